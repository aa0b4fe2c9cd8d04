"""The Telegram channel: python-telegram-bot driven inside the daemon's lifecycle.

Updates come by long polling (getUpdates), or, when ``telegram.webhook_url`` is set, Telegram posts them
to the daemon's own web server (``POST /telegram/webhook``, checked by the secret token header) and this
channel only queues them; the webhook stays set across restarts, so Telegram keeps updates meanwhile.

Only the users in ``telegram.allow_from`` and those paired with a one-time code (`picoagent telegram
pair`) are served (:class:`~appliance.channels.core.Doorkeeper`); anyone else costs nothing: no turn,
no model call, no reply. A reply streams into one message (:mod:`.stream`), edited at most once per
``edit_interval_s``, and ends with a footer (route · model · seconds). Commands (:mod:`.commands`) show
the Pi's status, drive devices and approvals with inline buttons, and manage the conversation.
Proactive messages come from the outbox (:class:`~appliance.outbox.Delivery`): marked sent only once
Telegram accepted them, retried with backoff (or the server's retry_after), in order per chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
import time
import warnings
from collections.abc import Callable
from typing import Any

from telegram import Bot, BotCommand, Message, Update
from telegram.constants import ChatType, MessageEntityType
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
    ContextTypes,
    MessageHandler,
    TypeHandler,
    filters,
)
from telegram.warnings import PTBDeprecationWarning

from appliance.agent.record import ReplyRecord
from appliance.channels.commands import COMMANDS, ChatCommands
from appliance.channels.core import Doorkeeper, Route
from appliance.channels.telegram.commands import TelegramCommands
from appliance.channels.telegram.pairing import (
    CHANNEL,
    PAIRING_MESSAGE,
    is_paired,
    owner_target,
    redeem_pairing_code,
)
from appliance.channels.telegram.stream import ReplyStream, retry_after_s
from appliance.channels.telegram.text import chat_ref, split_message, with_footer
from appliance.config import TelegramConfig
from appliance.errors import PicoagentError
from appliance.outbox import Delivery, Outbox, Outcome, OutMessage
from appliance.ratelimit import RateLimiter
from appliance.runtime import Runtime

log = logging.getLogger(__name__)

# PTB 22's own RetryAfter constructor reads its deprecated int-typed attribute: nothing of ours to change.
warnings.filterwarnings("ignore", r".*`retry_after` will be of type", PTBDeprecationWarning)

STOP_GRACE_S = 10.0
CONNECT_RETRY_S = (5, 15, 30, 60, 120, 300)
ALLOWED_UPDATES = ["message", "callback_query"]


class TelegramChannel:
    """The bot: who may talk, replies, commands, buttons, and delivery of the outbox."""

    name = "telegram"

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
        self.connected = False
        self.detail = ""  # "polling as @pico", for status pages
        self.doorkeeper = Doorkeeper(
            CHANNEL,
            self.db,
            allow_from=lambda: self.config.allow_from,
            is_paired=is_paired,
            redeem=redeem_pairing_code,
            clock=clock,
        )
        self.commands = ChatCommands(CHANNEL, runtime, outbox)
        # The route forced with /local or /cloud for a chat's next message (the command set's).
        self.forced_route: dict[str, Route] = self.commands.forced_route
        self.delivery = Delivery(outbox, CHANNEL, self._deliver, clock=clock)
        self._polling_errors = RateLimiter(1, 300.0)
        self._chat_locks: dict[int, asyncio.Lock] = {}
        self._turns: set[asyncio.Task[Any]] = set()
        self._connecting: asyncio.Task[None] | None = None
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
    def up(self) -> bool:
        """Whether messages can go out now (connected, and Telegram did not refuse us)."""
        return self.connected and self.problem is None

    def owner_target(self) -> str | None:
        """The chat proactive messages go to: owner_chat, else the first allowed user, else the first paired."""
        target = owner_target(self.config, self.db)
        return target[1] if target is not None else None

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
        self.delivery.bind()
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
        app.add_handlers(TelegramCommands(self.commands, self._turn).handlers())
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
        self.connected = True
        self.detail = f"{how} as @{app.bot.username}"
        self.delivery.start()
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
        self.delivery.stop_soon()
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
        await self.delivery.stop()  # the pass in flight finishes: nothing is sent without being marked sent
        if app is not None:
            if app.running:
                await app.stop()
            await app.shutdown()
        self.connected = False

    def notify_wakeup(self) -> None:
        """Something was put into the outbox: deliver now rather than at the next poll (any thread)."""
        self.delivery.wakeup()

    # --- who may talk -------------------------------------------------------------------------------

    async def is_allowed(self, user_id: int) -> bool:
        """Whether a user is in telegram.allow_from or was paired."""
        return await self.doorkeeper.is_allowed(user_id)

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
        match = PAIRING_MESSAGE.fullmatch(message.text.strip()) if message and message.text else None
        if message is not None and match and chat is not None and chat.type == ChatType.PRIVATE:
            if await self.doorkeeper.try_code(user.id, user.full_name, match.group(1)):
                await message.reply_text("Paired: you can talk to me now.")
        else:
            self.doorkeeper.turned_away(user.id, user.full_name)
        return False

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
        typing = asyncio.ensure_future(stream.show_typing())
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
            final = with_footer(record)
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

    async def deliver_due(self) -> int:
        """One delivery pass of the outbox now; returns how many messages Telegram accepted."""
        return await self.delivery.deliver_due()

    async def _deliver(self, message: OutMessage) -> Outcome:
        """Send one stored message (in pieces when long): how it went, for the delivery pass."""
        pieces = split_message(message.text)
        if not pieces:
            await self.db.call(self.outbox.mark_failed, message.id, "the message is empty")
            return "failed"
        remote_id = ""
        for i, piece in enumerate(pieces):
            try:
                sent = await self.bot.send_message(chat_ref(message.chat_id), piece)
            except RetryAfter as exc:
                wait_s = retry_after_s(exc)
                self.delivery.pause(wait_s)
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
            await self.db.call(self.outbox.keep_unsent, message.id, rest)


class _WebhookRefused(Exception):
    """Telegram answered setWebhook with 400 (bad URL, certificate or secret): a configuration problem."""
