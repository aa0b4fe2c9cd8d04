"""The Telegram channel: python-telegram-bot driven inside the daemon's lifecycle.

Updates come by long polling (getUpdates), or, when ``telegram.webhook_url`` is set, Telegram posts them
to the daemon's own web server (``POST /telegram/webhook``, checked by the secret token header) and this
channel only queues them; the webhook stays set across restarts, so Telegram keeps updates meanwhile.

Only the users in ``telegram.allow_from`` and those paired with a one-time code (`picoagent telegram
pair`) are served; anyone else costs nothing: no turn, no model call, no reply. A reply streams into
one message, edited at most once per ``edit_interval_s``, and ends with a footer (route · model ·
seconds). Commands show the Pi's status, drive devices and approvals with inline buttons, and manage
the conversation. Proactive messages come from the outbox: marked sent only once Telegram accepted
them, retried with backoff (or the server's retry_after), in order per chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import hmac
import logging
import re
import secrets
import time
import warnings
from collections.abc import Callable
from typing import Any, Literal

from telegram import (
    Bot,
    BotCommand,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
)
from telegram.constants import ChatAction, ChatType, MessageEntityType
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    RetryAfter,
    TelegramError,
)
from telegram.ext import (
    Application,
    ApplicationHandlerStop,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    TypeHandler,
    filters,
)
from telegram.warnings import PTBDeprecationWarning

from appliance.agent.record import ReplyRecord
from appliance.config import TelegramConfig
from appliance.errors import PicoagentError
from appliance.health import read_health
from appliance.memory.db import Database
from appliance.outbox import Outbox, OutMessage
from appliance.ratelimit import RateLimiter
from appliance.runtime import Runtime

log = logging.getLogger(__name__)

# PTB 22's own RetryAfter constructor reads its deprecated int-typed attribute: nothing of ours to change.
warnings.filterwarnings("ignore", r".*`retry_after` will be of type", PTBDeprecationWarning)

CHANNEL = "telegram"
MESSAGE_LIMIT = 4096  # Telegram's limit for one message, in UTF-16 code units
TYPING_EVERY_S = 4.0  # Telegram shows "typing…" for about 5 s per sendChatAction
DELIVERY_POLL_S = 1.0  # the outbox is also checked this often, so no enqueuer has to wake us
STOP_GRACE_S = 10.0
CODE_ATTEMPTS_PER_HOUR = 5  # per unknown user; a 6-digit code then takes ~20 years to guess
ALL_CODE_ATTEMPTS_PER_HOUR = 30  # across all unknown users, so many accounts do not help either
CONNECT_RETRY_S = (5, 15, 30, 60, 120, 300)
ALLOWED_UPDATES = ["message", "callback_query"]

Route = Literal["local", "cloud"]
Outcome = Literal["sent", "retry", "failed", "paused"]

HELP = """I am the assistant on your Raspberry Pi. Write to me and I answer with the model on the Pi; \
"turn on the porch light" or "living room temperature" are done at once, without the model.

/status – the Pi's health, the model and its queue
/devices – switch and read the devices with buttons
/approve – device writes waiting for your approval
/cloud, /local – answer the next message (or /cloud TEXT) with the cloud model, or on the Pi
/private on|off – keep this chat on the Pi always, or route it as configured
/reset – forget this conversation and start a new one
/memory – what this conversation holds"""
COMMANDS = [
    ("help", "what I can do"),
    ("status", "the Pi's health, model and queue"),
    ("devices", "switch and read the devices"),
    ("approve", "device writes waiting for approval"),
    ("local", "answer the next message on the Pi"),
    ("cloud", "answer the next message with a cloud model"),
    ("private", "on: this chat never leaves the Pi; off: as configured"),
    ("reset", "start a new conversation"),
    ("memory", "what this conversation holds"),
]

# --- pairing and who may talk ---------------------------------------------------------------------

_CODE = re.compile(r"(?:/start(?:@\w+)?\s+)?(\d{6})")  # a bare code, or a t.me/<bot>?start=<code> link


def _code_hash(code: str) -> str:
    return hashlib.sha256(f"picoagent-telegram-pairing:{code}".encode()).hexdigest()


def create_pairing_code(db: Database, ttl_s: float = 600, *, clock: Callable[[], float] = time.time) -> str:
    """A one-time 6-digit code: whoever sends it to the bot is paired (the code is stored only hashed)."""
    now = clock()
    with db.transaction() as conn:
        conn.execute("DELETE FROM telegram_pairing WHERE used_by IS NULL AND expires_at <= ?", (now,))
        while True:  # used codes stay (who paired, when); never hand out a code whose hash is taken
            code = f"{secrets.randbelow(10**6):06d}"
            taken = conn.execute("SELECT 1 FROM telegram_pairing WHERE code_hash = ?", (_code_hash(code),))
            if taken.fetchone() is None:
                break
        conn.execute(
            "INSERT INTO telegram_pairing (code_hash, created_at, expires_at) VALUES (?, ?, ?)",
            (_code_hash(code), now, now + ttl_s),
        )
    return code


def redeem_pairing_code(
    db: Database, code: str, user_id: int, name: str, *, clock: Callable[[], float] = time.time
) -> bool:
    """Pair a user with a valid, unused, unexpired code; False (and nothing changed) otherwise."""
    now = clock()
    with db.transaction() as conn:
        used = conn.execute(
            "UPDATE telegram_pairing SET used_by = ?, used_at = ?"
            " WHERE code_hash = ? AND used_by IS NULL AND expires_at > ?",
            (user_id, now, _code_hash(code), now),
        ).rowcount
        if used == 1:
            conn.execute(
                "INSERT OR IGNORE INTO telegram_users (user_id, name, paired_at) VALUES (?, ?, ?)",
                (user_id, name, now),
            )
    return used == 1


def paired_users(db: Database) -> list[int]:
    """Users added by pairing, first paired first."""
    rows = db.rows("SELECT user_id FROM telegram_users ORDER BY paired_at, user_id")
    return [int(r[0]) for r in rows]


def is_paired(db: Database, user_id: int) -> bool:
    """Whether a user was added by pairing."""
    return db.value("SELECT 1 FROM telegram_users WHERE user_id = ?", (user_id,)) == 1


def owner_target(config: TelegramConfig, db: Database) -> tuple[str, str] | None:
    """Where proactive messages go: owner_chat, else the first allowed user, else the first paired one."""
    if not config.enabled:
        return None
    if config.owner_chat is not None:
        return CHANNEL, str(config.owner_chat)
    if config.allow_from:
        return CHANNEL, str(config.allow_from[0])
    users = paired_users(db)
    return (CHANNEL, str(users[0])) if users else None


# --- text -------------------------------------------------------------------------------------------


def _within(text: str, limit: int) -> str:
    """The longest prefix of ``text`` that fits ``limit`` UTF-16 code units."""
    units = 0
    for i, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            return text[:i]
    return text


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Cut a text into messages Telegram accepts: at a paragraph, else a line, else a space, else hard."""
    pieces: list[str] = []
    rest = text.strip()
    while len(_within(rest, limit)) < len(rest):
        window = _within(rest, limit)
        cut = len(window)
        for separator in ("\n\n", "\n", " "):
            at = window.rfind(separator)
            if at >= len(window) // 4:  # an earlier boundary would leave a stub of a message
                cut = at
                break
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces


def footer(record: ReplyRecord) -> str:
    """The line under a reply: which path answered, which model, how long it took."""
    parts = [record.route, record.model, f"{record.timings.total_s:.1f} s"]
    line = " · ".join(p for p in parts if p)
    if record.route in ("cloud", "local_fallback") or record.why == "user_cloud":
        line += f"\n({record.reason})"  # say why it left the Pi, or why it did not although it should have
    return line


def _retry_after_s(exc: RetryAfter) -> float:
    with warnings.catch_warnings():  # int vs timedelta: PTB is migrating the attribute's type
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def _chat_ref(chat_id: str) -> int | str:
    """An outbox chat id as the Bot API takes it (numeric ids as numbers, @channel names as they are)."""
    return int(chat_id) if re.fullmatch(r"-?\d+", chat_id) else chat_id


class ReplyStream:
    """One answer written into a chat: sent at the first text, edited as it grows, finished with a footer."""

    def __init__(self, bot: Bot, chat_id: int, interval_s: float, reply_to: int | None = None) -> None:
        self.bot = bot
        self.chat_id = chat_id
        self.interval_s = interval_s
        self.reply_to = reply_to
        self.text = ""
        self.shown: list[tuple[int, str]] = []  # per piece: the message id and what it shows
        # Counting from the start, an instant answer (the intent fast path) is one sendMessage, no edits.
        self.last_push = time.monotonic()
        self._changed = asyncio.Event()
        self._finished = asyncio.Event()

    def on_event(self, kind: str, data: dict[str, Any]) -> None:
        """The agent's event sink: collects the streamed text."""
        if kind == "text":
            self.text += data["delta"]
            self._changed.set()
        elif kind == "reroute":  # what was streamed is replaced by the other model's answer
            where = "asking the cloud" if data["route"] == "cloud" else "answering on the Pi"
            self.text = f"({data['reason']}: {where}…)\n\n"
            self._changed.set()

    async def run(self) -> None:
        """Push the growing text, at most once per interval, until :meth:`finish`."""
        while not self._finished.is_set():
            await self._changed.wait()
            self._changed.clear()
            delay = self.last_push + self.interval_s - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._finished.wait(), delay)
            if self._finished.is_set():
                return
            await self._show(self.text, final=False)

    async def finish(self, runner: asyncio.Task[None], text: str, choices: list[str] | None = None) -> str:
        """Show the complete text (with a button per choice); returns what could not be delivered."""
        self._finished.set()
        self._changed.set()
        await runner  # lets a push in flight complete, so its message id is known
        if self.shown:
            await asyncio.sleep(max(0.0, self.last_push + self.interval_s - time.monotonic()))
        return await self._show(text, final=True, markup=choice_keyboard(choices or []))

    async def _show(self, text: str, *, final: bool, markup: InlineKeyboardMarkup | None = None) -> str:
        pieces = split_message(text)
        for i, piece in enumerate(pieces):
            buttons = markup if i == len(pieces) - 1 else None  # "Turn the fan on?" [yes] [no]
            if i < len(self.shown) and self.shown[i][1] == piece and buttons is None:
                continue
            self.last_push = time.monotonic()
            try:
                if i < len(self.shown):
                    await self.bot.edit_message_text(
                        piece, chat_id=self.chat_id, message_id=self.shown[i][0], reply_markup=buttons
                    )
                    self.shown[i] = (self.shown[i][0], piece)
                else:
                    reply = ReplyParameters(self.reply_to, allow_sending_without_reply=True) if self.reply_to else None
                    sent = await self.bot.send_message(
                        self.chat_id, piece, reply_parameters=reply, reply_markup=buttons
                    )
                    self.shown.append((sent.message_id, piece))
            except BadRequest as exc:
                if "not modified" in exc.message:
                    self.shown[i] = (self.shown[i][0], piece)
                    continue
                log.warning("telegram: showing a reply in chat %s failed: %s", self.chat_id, exc.message)
                return "\n\n".join(pieces[i:]) if final else ""
            except Forbidden:
                return ""  # the user blocked the bot: nothing will ever reach them
            except RetryAfter as exc:
                self.last_push = time.monotonic() + _retry_after_s(exc)
                return "\n\n".join(pieces[i:]) if final else ""
            except TelegramError as exc:
                log.info("telegram: showing a reply in chat %s failed: %s", self.chat_id, exc)
                return "\n\n".join(pieces[i:]) if final else ""
        return ""


class TelegramChannel:
    """The bot: who may talk, replies, commands, buttons, and delivery of the outbox."""

    def __init__(
        self, config: TelegramConfig, runtime: Runtime, outbox: Outbox, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config
        self.runtime = runtime
        self.db = runtime.db
        self.outbox = outbox
        self.clock = clock
        self.app: Application[Any, Any, Any, Any, Any, Any] | None = None
        self.problem: str | None = None  # why the bot is not running, for status pages
        # The route forced with /local or /cloud for a chat's next message (read by the routing, later).
        self.forced_route: dict[str, Route] = {}
        self._strangers = RateLimiter(1, 60.0)  # at most one log line per unknown user per minute
        self._code_attempts = RateLimiter(CODE_ATTEMPTS_PER_HOUR, 3600.0)
        self._all_code_attempts = RateLimiter(ALL_CODE_ATTEMPTS_PER_HOUR, 3600.0)
        self._polling_errors = RateLimiter(1, 300.0)
        self._chat_locks: dict[int, asyncio.Lock] = {}
        self._decide_lock = asyncio.Lock()  # one approval decision at a time: a double tap runs once
        self._deliver_lock = asyncio.Lock()  # one delivery pass at a time: no message sent twice
        self._paused_until = 0.0  # Telegram's flood control (429 retry_after), by ``clock``
        self._wakeup = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._turns: set[asyncio.Task[Any]] = set()
        self._connecting: asyncio.Task[None] | None = None
        self._delivery: asyncio.Task[None] | None = None
        self._stopping = False

    # --- lifecycle --------------------------------------------------------------------------------

    @property
    def bot(self) -> Bot:
        """The Bot API client (after :meth:`start`)."""
        if self.app is None:
            raise RuntimeError("the Telegram channel is not started")
        return self.app.bot

    @property
    def turns_in_flight(self) -> int:
        """Answers being written now."""
        return len(self._turns)

    @property
    def uses_webhook(self) -> bool:
        """Whether Telegram posts updates to our web server (telegram.webhook_url) instead of being polled."""
        return bool(self.config.webhook_url)

    def webhook_secret_ok(self, sent: str | None) -> bool:
        """Whether a webhook post carries our secret token (compared in constant time)."""
        expected = self.config.webhook_secret
        if not sent or not expected:
            return False
        return hmac.compare_digest(sent.encode("utf-8"), expected.encode("utf-8"))

    async def feed_update(self, data: dict[str, Any]) -> bool:
        """Queue an update Telegram posted to the webhook; False when the bot is not running (so Telegram retries).

        Returns at once: the update is handled in the background, like a polled one (gate first). Raises
        ValueError for a body that is not an Update.
        """
        app = self.app
        if app is None or not app.running or self._stopping:
            return False
        try:
            update = Update.de_json(data, app.bot)
        except Exception as exc:  # de_json of an arbitrary object can fail in any way
            raise ValueError(f"not a Telegram update: {type(exc).__name__}: {exc}") from None
        await app.update_queue.put(update)
        return True

    async def start(self) -> None:
        """Connect, register the commands, poll or set the webhook, deliver; an unreachable Telegram is retried."""
        self._loop = asyncio.get_running_loop()
        self.app = self._build()
        try:
            await self._connect()
        except InvalidToken:
            self.problem = "Telegram refused telegram.token"
            log.error(
                "telegram: Telegram refused the bot token (telegram.token); the bot is off."
                " Fix: copy the token from @BotFather into the secrets file and restart"
            )
        except _WebhookRefused as exc:
            self.problem = f"Telegram refused the webhook: {exc}"
            log.error("telegram: Telegram refused telegram.webhook_url (%s); updates will not arrive", exc)
        except TelegramError as exc:
            self.problem = f"cannot reach Telegram: {exc}"
            log.warning("telegram: cannot reach Telegram (%s); retrying in the background", exc)
            self._connecting = asyncio.ensure_future(self._connect_later())

    def _build(self) -> Application[Any, Any, Any, Any, Any, Any]:
        builder = (
            Application.builder()
            .token(self.config.token)
            .base_url(self.config.api_base_url)
            .concurrent_updates(True)  # a long answer must not hold up a button press
        )
        if self.uses_webhook:
            builder = builder.updater(None)  # updates come from our web server, never from getUpdates
        app = builder.build()
        app.add_handler(TypeHandler(Update, self._gate), group=-1)
        for name, callback in (
            ("start", self._cmd_help),
            ("help", self._cmd_help),
            ("status", self._cmd_status),
            ("devices", self._cmd_devices),
            ("approve", self._cmd_approve),
            ("local", self._cmd_local),
            ("cloud", self._cmd_cloud),
            ("private", self._cmd_private),
            ("reset", self._cmd_reset),
            ("memory", self._cmd_memory),
        ):
            app.add_handler(CommandHandler(name, callback))
        app.add_handler(CallbackQueryHandler(self._on_device_button, pattern=r"^dev:"))
        app.add_handler(CallbackQueryHandler(self._on_approval_button, pattern=r"^apr:"))
        app.add_handler(CallbackQueryHandler(self._on_choice_button, pattern=r"^say:"))
        app.add_handler(CallbackQueryHandler(self._on_unknown_button))
        app.add_handler(MessageHandler(filters.UpdateType.MESSAGE & filters.TEXT & ~filters.COMMAND, self._on_text))
        app.add_error_handler(self._on_error)
        return app

    async def _connect(self) -> None:
        app = self.app
        assert app is not None
        await app.initialize()  # getMe: checks the token
        await app.bot.set_my_commands([BotCommand(name, about) for name, about in COMMANDS])
        if not app.running:  # a retry after a failed setWebhook or getUpdates bootstrap finds it running
            await app.start()
        if self.uses_webhook:
            try:
                # drop_pending_updates=False: what arrived while the Pi was down is still answered.
                await app.bot.set_webhook(
                    url=self.config.webhook_url,
                    secret_token=self.config.webhook_secret,
                    allowed_updates=ALLOWED_UPDATES,
                    drop_pending_updates=False,
                )
            except BadRequest as exc:  # a URL or secret Telegram will not take: retrying does not help
                raise _WebhookRefused(exc.message) from None
            how = "webhook"
        else:
            assert app.updater is not None
            await app.updater.start_polling(  # deletes any webhook first (getUpdates refuses to run beside one)
                timeout=self.config.poll_timeout_s,
                allowed_updates=ALLOWED_UPDATES,
                error_callback=self._on_polling_error,
            )
            how = "polling"
        self.problem = None
        self._delivery = asyncio.ensure_future(self._deliver_forever())
        log.info("telegram: %s as @%s", how, app.bot.username)

    async def _connect_later(self) -> None:
        for attempt in range(10**9):
            await asyncio.sleep(CONNECT_RETRY_S[min(attempt, len(CONNECT_RETRY_S) - 1)])
            try:
                await self._connect()
                return
            except InvalidToken:
                log.error("telegram: Telegram refused the bot token (telegram.token); the bot is off")
                self.problem = "Telegram refused telegram.token"
                return
            except _WebhookRefused as exc:
                log.error("telegram: Telegram refused telegram.webhook_url (%s); updates will not arrive", exc)
                self.problem = f"Telegram refused the webhook: {exc}"
                return
            except TelegramError as exc:
                self.problem = f"cannot reach Telegram: {exc}"
                log.info("telegram: still cannot reach Telegram: %s", exc)

    async def stop(self) -> None:
        """Stop polling, let answers in flight finish (briefly), finish the delivery pass, disconnect.

        A webhook stays set, so Telegram keeps the updates that arrive until the daemon is back.
        """
        self._stopping = True
        self._wakeup.set()
        if self._connecting is not None:
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
        app = self.app
        if app is not None and app.updater is not None and app.updater.running:
            await app.updater.stop()
        if self._turns:
            _done, pending = await asyncio.wait(set(self._turns), timeout=STOP_GRACE_S)
            for task in pending:
                task.cancel()
        if self._delivery is not None:
            # The pass in flight finishes, so no message is sent without being marked sent.
            _done, pending = await asyncio.wait({self._delivery}, timeout=5.0)
            for task in pending:
                task.cancel()
            await asyncio.gather(self._delivery, return_exceptions=True)
        if app is not None:
            if app.running:
                await app.stop()
            await app.shutdown()

    def notify_wakeup(self) -> None:
        """Something was put into the outbox: deliver now rather than at the next poll (any thread)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wakeup.set)

    # --- who may talk -------------------------------------------------------------------------------

    async def is_allowed(self, user_id: int) -> bool:
        """Whether a user is in telegram.allow_from or was paired."""
        return user_id in self.config.allow_from or await self.db.call(is_paired, self.db, user_id)

    async def _gate(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Runs before every handler: allowed users go on; everything else stops here."""
        try:
            if await self._admit(update):
                return
        except Exception:
            # Fail closed: PTB would run the next handler group after an error in this one.
            log.exception("telegram: checking who sent an update failed; it was dropped")
        raise ApplicationHandlerStop

    async def _admit(self, update: Update) -> bool:
        """True for an allowed user; a stranger is turned away (a pairing code aside)."""
        user = update.effective_user
        if user is None:
            return False
        if await self.is_allowed(user.id):
            return True
        if update.callback_query is not None:
            with contextlib.suppress(TelegramError):
                await update.callback_query.answer("not allowed")
        message, chat = update.message, update.effective_chat
        match = _CODE.fullmatch(message.text.strip()) if message and message.text else None
        if message is not None and match and chat is not None and chat.type == ChatType.PRIVATE:
            await self._try_code(message, user.id, user.full_name, match.group(1))
        elif self._strangers.hit(str(user.id)) == 0:
            log.warning("telegram: ignored user %s (%s): not allowed and not paired", user.id, user.full_name)
        return False

    async def _try_code(self, message: Message, user_id: int, name: str, code: str) -> None:
        if self._code_attempts.hit(str(user_id)) or self._all_code_attempts.hit("all"):
            if self._strangers.hit(str(user_id)) == 0:
                log.warning("telegram: too many pairing attempts; ignoring user %s (%s)", user_id, name)
            return
        if await self.db.call(redeem_pairing_code, self.db, code, user_id, name, clock=self.clock):
            log.warning("telegram: paired user %s (%s)", user_id, name)
            await message.reply_text("Paired: you can talk to me now.")
        else:
            log.warning("telegram: a wrong or used pairing code from user %s (%s)", user_id, name)

    # --- messages ----------------------------------------------------------------------------------

    def _addressed(self, message: Message) -> str | None:
        """In a group: the text without the bot's @mention, or None when the bot was not addressed."""
        bot = self.bot
        text = message.text or ""
        mention = f"@{bot.username}".lower()
        mentioned = any(
            value.lower() == mention for value in message.parse_entities([MessageEntityType.MENTION]).values()
        )
        replied = message.reply_to_message is not None and message.reply_to_message.from_user is not None
        if replied:
            replied = message.reply_to_message.from_user.id == bot.id  # type: ignore[union-attr]
        if not (mentioned or replied):
            return None
        return re.sub(re.escape(mention), "", text, flags=re.IGNORECASE).strip()

    async def _on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message, user, chat = update.message, update.effective_user, update.effective_chat
        if message is None or user is None or chat is None or not message.text:
            return
        text: str | None = message.text
        in_group = chat.type in (ChatType.GROUP, ChatType.SUPERGROUP)
        if in_group:
            text = self._addressed(message)
        if not text:
            return
        route = self.forced_route.pop(str(chat.id), None)
        await self._turn(chat.id, user.id, text, reply_to=message.message_id if in_group else None, force=route)

    async def _turn(self, chat_id: int, user_id: int, text: str, *, reply_to: int | None, force: Route | None) -> None:
        """One turn per chat at a time, known to the shutdown (which lets it finish)."""
        task = asyncio.current_task()
        if task is not None:
            self._turns.add(task)
        try:
            async with self._chat_locks.setdefault(chat_id, asyncio.Lock()):
                await self.answer(chat_id, user_id, text, reply_to=reply_to, force=force)
        finally:
            if task is not None:
                self._turns.discard(task)

    async def answer(
        self, chat_id: int, user_id: int, text: str, *, reply_to: int | None = None, force: Route | None = None
    ) -> ReplyRecord | None:
        """Run a turn and stream its reply into the chat; what cannot be delivered goes to the outbox."""
        stream = ReplyStream(self.bot, chat_id, self.config.edit_interval_s, reply_to)
        pusher = asyncio.ensure_future(stream.run())
        typing = asyncio.ensure_future(self._typing(stream))
        record: ReplyRecord | None = None
        try:
            record = await self.runtime.agent.turn(
                text,
                channel=CHANNEL,
                chat_id=str(chat_id),
                client=f"telegram:{user_id}",
                on_event=stream.on_event,
                force=force,
            )
            final = f"{record.text}\n\n{footer(record)}".rstrip()
        except PicoagentError as exc:
            final = exc.for_people()
        except asyncio.CancelledError:
            pusher.cancel()
            raise
        except Exception:
            log.exception("telegram: a turn failed in chat %s", chat_id)
            final = "Something went wrong on the Pi while answering; the log has the details."
        finally:
            typing.cancel()
        undelivered = await stream.finish(pusher, final, record.choices if record is not None else None)
        if undelivered:
            await self.db.call(self.outbox.enqueue, CHANNEL, str(chat_id), undelivered, "reply")
            self.notify_wakeup()
        return record

    async def _typing(self, stream: ReplyStream) -> None:
        """Show "typing…" until the first piece of the answer is on screen."""
        while not stream.shown:
            with contextlib.suppress(TelegramError):
                await self.bot.send_chat_action(stream.chat_id, ChatAction.TYPING)
            await asyncio.sleep(TYPING_EVERY_S)

    # --- commands ------------------------------------------------------------------------------------

    async def _cmd_help(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        if update.effective_message is not None:
            await update.effective_message.reply_text(HELP)

    async def _cmd_status(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        if update.effective_message is not None:
            await update.effective_message.reply_text(await self.status_text())

    async def status_text(self) -> str:
        """The Pi's health, the model and the queue, as /status shows them."""
        health = await asyncio.to_thread(read_health, self.db.path.parent)
        runtime = self.runtime
        temperature = "no CPU temperature" if health.cpu_temperature_c is None else f"CPU {health.cpu_temperature_c} °C"
        throttled = [name for name, on in (health.throttled or {}).items() if on and not name.endswith("occurred")]
        lines = [
            f"{temperature} · load {' '.join(f'{x:g}' for x in health.load)} · up {_duration(health.uptime_s)}",
            f"Memory {health.memory_available_mb} of {health.memory_total_mb} MB free"
            f" · disk {health.disk_free_gb:g} of {health.disk_total_gb:g} GB free",
        ]
        if throttled:
            lines.append("Throttled now: " + ", ".join(throttled))
        queue = runtime.scheduler.waiting + (1 if runtime.scheduler.busy else 0)
        loaded = "loaded" if runtime.model.loaded else "not loaded yet"
        lines.append(f"Model {runtime.model.name} ({loaded}) · queue {queue}")
        if runtime.devices is not None:
            waiting = len(await asyncio.to_thread(runtime.devices.approvals.pending))
            lines.append(f"Devices {len(runtime.devices.devices)} · waiting for approval {waiting}")
        pending = await self.db.call(self.outbox.pending_count, CHANNEL)
        lines.append(f"Messages waiting to be delivered: {pending}")
        return "\n".join(lines)

    async def _cmd_local(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await self._forced(update, context, "local")

    async def _cmd_cloud(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await self._forced(update, context, "cloud")

    async def _forced(self, update: Update, context: ContextTypes.DEFAULT_TYPE, route: Route) -> None:
        """/cloud TEXT answers TEXT on that route; a bare /cloud applies to the next message."""
        chat, message, user = update.effective_chat, update.effective_message, update.effective_user
        if chat is None or message is None or user is None:
            return
        text = " ".join(context.args or [])
        if text:
            await self._turn(chat.id, user.id, text, reply_to=None, force=route)
            return
        self.forced_route[str(chat.id)] = route
        if route == "local":
            await message.reply_text("The next message stays on the Pi.")
            return
        ctx = await self.runtime.agent.route_preview(CHANNEL, str(chat.id), "cloud")
        blocked = ctx.cloud_blocked()
        if blocked is None:
            await message.reply_text(f"The next message goes to {ctx.provider}.")
        else:
            await message.reply_text(f"The next message is answered on the Pi: {blocked[1]}.")

    async def _cmd_private(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        chat, message = update.effective_chat, update.effective_message
        if chat is None or message is None:
            return
        words = [w.lower() for w in context.args or []]
        if words and words[0] in ("on", "off"):
            await self.db.call(self.db.set_private, CHANNEL, str(chat.id), words[0] == "on")
        private = await self.db.call(self.db.is_private, CHANNEL, str(chat.id))
        await message.reply_text(
            "This chat stays on the Pi: its messages never go to a cloud model. /private off undoes it."
            if private
            else "This chat is routed as configured (the cloud only when allowed). /private on keeps it on the Pi."
        )

    async def _cmd_reset(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        if update.effective_chat is not None and update.effective_message is not None:
            await self.runtime.agent.reset(CHANNEL, str(update.effective_chat.id))
            await update.effective_message.reply_text("Forgotten: the next message starts a new conversation.")

    async def _cmd_memory(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        if update.effective_chat is None or update.effective_message is None:
            return
        count = await self.db.call(_conversation_size, self.db, str(update.effective_chat.id))
        recent = self.runtime.config.agent.history_messages
        await update.effective_message.reply_text(
            f"This conversation holds {count} message{'s' if count != 1 else ''}; the last {recent} go into"
            " each prompt. Searching older memories is not available yet. /reset starts a new conversation."
        )

    # --- devices ---------------------------------------------------------------------------------------

    async def _cmd_devices(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        if update.effective_message is None:
            return
        if self.runtime.devices is None or not self.runtime.devices.devices:
            await update.effective_message.reply_text("No devices are configured (devices: in the config).")
            return
        await update.effective_message.reply_text(DEVICES_HEADER, reply_markup=await self._device_keyboard())

    async def _device_keyboard(self) -> InlineKeyboardMarkup:
        """One button per device: switches and dimmers toggle, sensors and inputs read."""
        assert self.runtime.devices is not None
        rows = []
        for device in self.runtime.devices.describe():
            name = device["name"]
            if device["kind"] in ("switch", "dimmer") and "set" in device["allowed"]:
                state = await self._state_words(name)
                lock = " (needs approval)" if device["approval"] == "required" else ""
                rows.append([InlineKeyboardButton(f"{name}: {state}{lock}", callback_data=f"dev:toggle:{name}")])
            elif "read" in device["allowed"]:
                rows.append([InlineKeyboardButton(f"{name}: read", callback_data=f"dev:read:{name}")])
        return InlineKeyboardMarkup(rows)

    async def _state_words(self, name: str) -> str:
        assert self.runtime.devices is not None
        try:
            readings = {r.quantity: r.value for r in await self.runtime.devices.read(name)}
        except PicoagentError:
            return "?"
        brightness = readings.get("brightness")
        if readings.get("state") and isinstance(brightness, float) and brightness < 100:
            return f"on ({brightness:g}%)"
        return "on" if readings.get("state") else "off"

    async def _on_device_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query, user = update.callback_query, update.effective_user
        devices = self.runtime.devices
        if query is None or user is None or devices is None:
            return
        _, verb, name = _button(query)
        try:
            if verb == "toggle":
                on = any(r.quantity == "state" and r.value for r in await devices.read(name))
                result = await devices.set(name, not on, requested_by=f"telegram:{user.id}")
                if result.pending is not None:
                    shown = f"{name} needs a person's approval: see /approve"
                else:
                    shown = f"{name} is now {'on' if result.value else 'off'}"
            elif verb == "read":
                shown = f"{name}: " + ", ".join(str(r) for r in await devices.read(name))
            else:
                await query.answer("That button is no longer valid.")
                return
        except PicoagentError as exc:
            await query.answer(exc.message[:200], show_alert=True)
            return
        await query.answer(shown[:200])
        await _edit_quietly(query, f"{DEVICES_HEADER}\n\n{shown}", await self._device_keyboard())

    async def _on_choice_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A tapped answer to the reply's question ("yes", "porch") is said as a message, once."""
        query, user, chat = update.callback_query, update.effective_user, update.effective_chat
        if query is None or user is None or chat is None or not isinstance(query.data, str):
            return
        said = query.data.removeprefix("say:")
        await query.answer()
        if isinstance(query.message, Message) and query.message.text:
            await _edit_quietly(query, f"{query.message.text}\n\n→ {said}", None)  # the buttons go away
        await self._turn(chat.id, user.id, said, reply_to=None, force=None)

    # --- approvals --------------------------------------------------------------------------------------

    async def _cmd_approve(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None:
            return
        devices = self.runtime.devices
        pending = await asyncio.to_thread(devices.approvals.pending) if devices is not None else []
        if not pending:
            await message.reply_text("Nothing is waiting for approval.")
            return
        for action in pending:
            minutes = max(0, round((action.expires_at - time.time()) / 60))
            keyboard = InlineKeyboardMarkup(
                [
                    [
                        InlineKeyboardButton("Approve", callback_data=f"apr:approve:{action.id}"),
                        InlineKeyboardButton("Deny", callback_data=f"apr:deny:{action.id}"),
                    ]
                ]
            )
            text = f"Waiting for approval: {action.describe()}; expires in {minutes} min."
            await message.reply_text(text, reply_markup=keyboard)

    async def _on_approval_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query, user = update.callback_query, update.effective_user
        devices = self.runtime.devices
        if query is None or user is None:
            return
        _, verb, action_id = _button(query)
        if devices is None or verb not in ("approve", "deny"):
            await query.answer("That button is no longer valid.")
            return
        try:
            async with self._decide_lock:
                result = await devices.decide(action_id, verb == "approve", decided_by=f"telegram:{user.id}")
        except PicoagentError as exc:
            await query.answer(exc.message[:200], show_alert=True)
            return
        if verb == "approve":
            text = f"Approved by {user.full_name}: {result.describe()}."
        else:
            text = f"Denied by {user.full_name}: {result.describe()}."
        await query.answer("Approved" if verb == "approve" else "Denied")
        await _edit_quietly(query, text, None)

    async def _on_unknown_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        if update.callback_query is not None:
            await update.callback_query.answer("That button is no longer valid.")

    # --- errors -------------------------------------------------------------------------------------------

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        error = context.error
        if isinstance(error, TelegramError):
            log.warning("telegram: handling an update failed: %s", error)
        else:
            log.error("telegram: handling an update failed", exc_info=error)

    def _on_polling_error(self, exc: TelegramError) -> None:
        if self._polling_errors.hit("polling"):
            return
        if isinstance(exc, Conflict):
            log.error("telegram: another program is polling this bot's token; stop it (one bot, one poller)")
        else:
            log.warning("telegram: fetching updates failed (%s); retrying", exc)

    # --- delivery of the outbox -----------------------------------------------------------------------------

    async def _deliver_forever(self) -> None:
        while not self._stopping:
            self._wakeup.clear()
            try:
                await self.deliver_due()
            except PicoagentError as exc:
                log.error("telegram: delivering the outbox failed: %s", exc.message)
            except Exception:  # the loop must outlive a bug; the messages stay pending
                log.exception("telegram: delivering the outbox failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), DELIVERY_POLL_S)

    async def deliver_due(self) -> int:
        """One delivery pass: send the due messages, oldest first per chat; returns how many were accepted."""
        async with self._deliver_lock:
            if self.clock() < self._paused_until:
                return 0
            due = await self.db.call(self.outbox.due, CHANNEL)
            if not due:
                return 0
            queues = await self.db.call(_pending_by_chat, self.db)
            blocked: set[str] = set()
            accepted = 0
            for message in due:
                queue = queues.get(message.chat_id, [])
                if message.chat_id in blocked or not queue or queue[0] != message.id:
                    blocked.add(message.chat_id)  # an older message of this chat waits for its retry
                    continue
                outcome = await self._deliver(message)
                if outcome == "paused":
                    break
                if outcome == "retry":
                    blocked.add(message.chat_id)
                    continue
                queue.pop(0)
                accepted += outcome == "sent"
            return accepted

    async def _deliver(self, message: OutMessage) -> Outcome:
        pieces = split_message(message.text)
        if not pieces:
            await self.db.call(self.outbox.mark_failed, message.id, "the message is empty")
            return "failed"
        remote_id = ""
        for i, piece in enumerate(pieces):
            try:
                sent = await self.bot.send_message(_chat_ref(message.chat_id), piece)
            except RetryAfter as exc:
                wait_s = _retry_after_s(exc)
                self._paused_until = self.clock() + wait_s
                await self._keep_unsent(message, pieces, i)
                await self.db.call(self.outbox.mark_retry, message, f"Telegram asked to wait {wait_s:g} s", wait_s)
                log.info("telegram: flood control, sending again in %g s", wait_s)
                return "paused"
            except (BadRequest, Forbidden, ChatMigrated) as exc:
                # BadRequest before NetworkError: PTB makes it a subclass, but it is permanent.
                await self.db.call(self.outbox.mark_failed, message.id, exc.message)
                log.warning("telegram: message %d to chat %s cannot be delivered: %s", message.id, message.chat_id, exc)
                return "failed"
            except TelegramError as exc:  # network errors, 5xx: worth another try
                await self._keep_unsent(message, pieces, i)
                await self.db.call(self.outbox.mark_retry, message, str(exc) or type(exc).__name__)
                log.info("telegram: message %d not delivered (%s); will retry", message.id, exc)
                return "retry"
            remote_id = str(sent.message_id)
        await self.db.call(self.outbox.mark_sent, message.id, remote_id)
        return "sent"

    async def _keep_unsent(self, message: OutMessage, pieces: list[str], first_unsent: int) -> None:
        """After some pieces of a long message went out, keep only the rest, so a retry repeats nothing."""
        if first_unsent:
            rest = "\n\n".join(pieces[first_unsent:])
            await self.db.call(self.db.write, "UPDATE outbox SET text = ? WHERE id = ?", (rest, message.id))


DEVICES_HEADER = "Devices: tap a switch to toggle it, a sensor to read it."


class _WebhookRefused(Exception):
    """Telegram answered setWebhook with 400 (bad URL, certificate or secret): a configuration problem."""


def choice_keyboard(choices: list[str]) -> InlineKeyboardMarkup | None:
    """One button per answer a reply offers (callback data "say:<answer>", within Telegram's 64 bytes)."""
    usable = [c for c in choices if len(f"say:{c}".encode()) <= 64]
    return (
        InlineKeyboardMarkup([[InlineKeyboardButton(c, callback_data=f"say:{c}") for c in usable]]) if usable else None
    )


async def _edit_quietly(query: CallbackQuery, text: str, markup: InlineKeyboardMarkup | None) -> None:
    """Edit the message under a button; an unchanged message or a transient failure is not worth an error."""
    try:
        await query.edit_message_text(text, reply_markup=markup)
    except BadRequest as exc:
        if "not modified" not in exc.message:
            log.warning("telegram: editing a message failed: %s", exc.message)
    except TelegramError as exc:
        log.info("telegram: editing a message failed: %s", exc)


def _button(query: CallbackQuery) -> tuple[str, str, str]:
    """A button's callback data, ``kind:verb:target`` (clients can send anything, so never trust its shape)."""
    parts = (query.data or "").split(":", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else ("", "", "")


def _pending_by_chat(db: Database) -> dict[str, list[int]]:
    """Every pending Telegram message id per chat, oldest first (what keeps delivery in order)."""
    rows = db.rows("SELECT id, chat_id FROM outbox WHERE channel = ? AND status = 'pending' ORDER BY id", (CHANNEL,))
    queues: dict[str, list[int]] = {}
    for message_id, chat_id in rows:
        queues.setdefault(chat_id, []).append(int(message_id))
    return queues


def _conversation_size(db: Database, chat_id: str) -> int:
    """Messages in a chat's open conversation."""
    count = db.value(
        "SELECT count(*) FROM messages JOIN conversations c ON c.id = messages.conversation_id"
        " WHERE c.channel = ? AND c.chat_id = ? AND c.closed_at IS NULL",
        (CHANNEL, chat_id),
    )
    return int(count)


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours < 48 else f"{hours // 24} days"
