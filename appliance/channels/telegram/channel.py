"""The Telegram channel: python-telegram-bot driven inside the daemon's lifecycle, as a :class:`ChatChannel`.

Everything a chat channel shares (who may talk and pairing, commands and buttons, one turn per chat,
the footer, the reconnect in the background, the outbox delivered piece by piece, the stop) is
:class:`~appliance.channels.base.ChatChannel`'s; this module is only Telegram's part of it.

Updates come by long polling (getUpdates), or, when ``telegram.webhook_url`` is set, Telegram posts them
to the daemon's own web server (``POST /telegram/webhook``, checked by the secret token header) and this
channel only queues them; the webhook stays set across restarts, so Telegram keeps updates meanwhile.
Each message becomes an :class:`~appliance.channels.base.Incoming` (in a group only when the bot is
mentioned or replied to, or for a /command), each button press a :meth:`~ChatChannel.tap`. A reply
streams into one message (:mod:`.stream`), edited at most once per ``edit_interval_s``; a tapped button
is answered (a notice, or an alert) and its message edited as the command set says.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
import warnings
from collections.abc import Callable
from typing import Any

from telegram import Bot, BotCommand, CallbackQuery, InlineKeyboardMarkup, Message, ReplyParameters, Update
from telegram.constants import ChatType, MessageEntityType
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.ext import Application, CallbackQueryHandler, ContextTypes, MessageHandler, filters
from telegram.warnings import PTBDeprecationWarning

from appliance.channels.base import ChannelDown, ChatChannel, Incoming, Verdict
from appliance.channels.commands import COMMANDS, Said
from appliance.channels.core import StreamedReply
from appliance.channels.telegram.stream import ReplyStream, retry_after_s
from appliance.channels.telegram.text import chat_ref, keyboard, split_message
from appliance.config import TelegramConfig
from appliance.outbox import Outbox, OutMessage
from appliance.ratelimit import RateLimiter
from appliance.runtime import Runtime

log = logging.getLogger(__name__)

# PTB 22's own RetryAfter constructor reads its deprecated int-typed attribute: nothing of ours to change.
warnings.filterwarnings("ignore", r".*`retry_after` will be of type", PTBDeprecationWarning)

ALLOWED_UPDATES = ["message", "callback_query"]
REFUSED = "Telegram refused telegram.token"
GROUPS = (ChatType.GROUP, ChatType.SUPERGROUP)


class TelegramChannel(ChatChannel):
    """The bot: Telegram's updates in, its messages, edits and button answers out."""

    name = "telegram"
    buttons = True

    def __init__(
        self, config: TelegramConfig, runtime: Runtime, outbox: Outbox, *, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(config, runtime, outbox, clock=clock)
        self.config: TelegramConfig = config
        self.app: Application[Any, Any, Any, Any, Any, Any] | None = None
        self._polling_errors = RateLimiter(1, 300.0)

    @property
    def bot(self) -> Bot:
        """The Bot API client (after :meth:`start`)."""
        if self.app is None:
            raise RuntimeError("the Telegram channel is not started")
        return self.app.bot

    def owner_target(self) -> str | None:
        """The chat proactive messages go to: owner_chat, else the first allowed user, else the first paired."""
        if self.config.owner_chat is not None:
            return str(self.config.owner_chat)
        return super().owner_target()

    # --- the webhook ----------------------------------------------------------------------------------

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

        Returns at once: the update is handled in the background, like a polled one. Raises ValueError for a
        body that is not an Update.
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

    # --- connecting ----------------------------------------------------------------------------------------

    async def connect(self) -> None:
        """getMe (checks the token), the command menu, then polling or the webhook."""
        self.app = app = self._build()
        try:
            await app.initialize()
            await app.bot.set_my_commands([BotCommand(name, about) for name, about in COMMANDS])
            await app.start()
            if self.uses_webhook:
                await self._set_webhook(app.bot)
            else:
                assert app.updater is not None
                await app.updater.start_polling(  # deletes any webhook first (getUpdates refuses to run beside one)
                    timeout=self.config.poll_timeout_s,
                    allowed_updates=ALLOWED_UPDATES,
                    error_callback=self._on_polling_error,
                )
        except InvalidToken:
            log.error(
                "telegram: Fix: paste @BotFather's token on the settings page (or into the secrets file, and reload)"
            )
            raise ChannelDown(REFUSED, permanent=True) from None
        except TimedOut:
            raise ChannelDown("cannot reach Telegram: it did not answer in time (is the Pi online?)") from None
        except NetworkError as exc:
            if isinstance(exc, BadRequest):  # PTB makes it a NetworkError too; it is Telegram's answer, in words
                raise ChannelDown(f"Telegram refused the connection: {exc}") from None
            # said to a person in words, not httpx's class name (a README walk read "httpx.ConnectError: ...")
            raise ChannelDown(
                f"cannot reach Telegram at {self.config.api_base_url.removesuffix('/bot')} (no connection: is the Pi "
                "online? it retries by itself)"
            ) from None
        except TelegramError as exc:
            raise ChannelDown(f"cannot reach Telegram: {exc}") from None
        self.detail = f"{'webhook' if self.uses_webhook else 'polling'} as @{app.bot.username}"

    async def _set_webhook(self, bot: Bot) -> None:
        try:
            # drop_pending_updates=False: what arrived while the Pi was down is still answered.
            await bot.set_webhook(
                url=self.config.webhook_url,
                secret_token=self.config.webhook_secret,
                allowed_updates=ALLOWED_UPDATES,
                drop_pending_updates=False,
            )
        except BadRequest as exc:  # a URL or secret Telegram will not take: retrying does not help
            log.error("telegram: Telegram refused telegram.webhook_url (%s); updates will not arrive", exc.message)
            raise ChannelDown(f"Telegram refused the webhook: {exc.message}", permanent=True) from None

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
        app.add_handler(MessageHandler(filters.UpdateType.MESSAGE & filters.TEXT, self._on_message))
        app.add_handler(CallbackQueryHandler(self._on_tap))
        app.add_error_handler(self._on_error)
        return app

    async def stop(self) -> None:
        """Stop polling first (nothing new comes in), then the shared stop.

        A webhook stays set, so Telegram keeps the updates that arrive until the daemon is back.
        """
        self._stopping = True
        app = self.app
        if app is not None and app.updater is not None and app.updater.running:
            await app.updater.stop()
        await super().stop()

    async def disconnect(self) -> None:
        """Stop python-telegram-bot and close its connections (after a failed connect too)."""
        app, self.app = self.app, None
        if app is None:
            return
        if app.updater is not None and app.updater.running:
            await app.updater.stop()
        if app.running:
            await app.stop()
        await app.shutdown()

    # --- what comes in ------------------------------------------------------------------------------------

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

    async def _on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message, user, chat = update.message, update.effective_user, update.effective_chat
        if message is None or user is None or chat is None or not message.text:
            return
        text: str | None = message.text
        in_group = chat.type in GROUPS
        if in_group and not message.text.startswith("/"):  # a command counts without a mention, as Telegram shows it
            text = self._addressed(message)
        if not text:
            return
        await self.handle(
            Incoming(
                chat_id=str(chat.id),
                user_id=str(user.id),
                user_name=user.full_name,
                text=text,
                private=chat.type == ChatType.PRIVATE,
                remote_id=f"{self.bot.id}:{update.update_id}",  # a webhook post Telegram sends again
                meta={"reply_to": message.message_id} if in_group else {},
            )
        )

    async def _on_tap(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query, user, chat = update.callback_query, update.effective_user, update.effective_chat
        if query is None or user is None:
            return
        data = query.data if isinstance(query.data, str) else ""
        incoming = Incoming(
            chat_id=str(chat.id) if chat is not None else str(user.id),
            user_id=str(user.id),
            user_name=user.full_name,
            text="",
            private=chat is not None and chat.type == ChatType.PRIVATE,
            remote_id=f"{self.bot.id}:{update.update_id}",  # a press Telegram posts again is acted on once
        )
        tapped = await self.tap(incoming, data)
        if tapped is None:
            return
        if data.startswith("say:") and not tapped.alert:  # an answer under a reply: said, and its buttons go
            await query.answer()
            if isinstance(query.message, Message) and query.message.text:
                await _edit_quietly(query, f"{query.message.text}\n\n→ {data.removeprefix('say:')}", None)
            return
        await query.answer(tapped.notice[:200], show_alert=True if tapped.alert else None)
        if tapped.edit is not None:
            await _edit_quietly(query, tapped.edit.text, keyboard(tapped.edit.buttons))

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A failed update was dropped (fail closed: nothing after the failure ran)."""
        error = context.error
        if isinstance(error, TelegramError):
            log.warning("telegram: handling an update failed: %s", error)
        else:
            log.error("telegram: handling an update failed; it was dropped", exc_info=error)

    def _on_polling_error(self, exc: TelegramError) -> None:
        if self._polling_errors.hit("polling"):
            return
        if isinstance(exc, Conflict):
            log.error("telegram: another program is polling this bot's token; stop it (one bot, one poller)")
        else:
            log.warning("telegram: fetching updates failed (%s); retrying", exc)

    # --- what goes out ------------------------------------------------------------------------------------

    async def say(self, incoming: Incoming, said: Said) -> None:
        """A message in the chat (in a group: a reply), in pieces when long, its buttons under the last."""
        pieces = split_message(said.text)
        reply_to = incoming.meta.get("reply_to")
        reply = ReplyParameters(int(reply_to), allow_sending_without_reply=True) if reply_to else None
        for i, piece in enumerate(pieces):
            markup = keyboard(said.buttons) if i == len(pieces) - 1 else None
            await self.bot.send_message(chat_ref(incoming.chat_id), piece, reply_parameters=reply, reply_markup=markup)

    def streamed_reply(self, incoming: Incoming) -> StreamedReply | None:
        """The answer sent at its first words and edited as it grows (in a group: a reply to the message)."""
        if self.app is None:
            return None
        reply_to = incoming.meta.get("reply_to")
        return ReplyStream(
            self.bot, chat_ref(incoming.chat_id), self.config.edit_interval_s, int(reply_to) if reply_to else None
        )

    def pieces(self, message: OutMessage) -> list[str]:
        """A stored message in pieces within Telegram's 4,096 UTF-16 units."""
        return split_message(message.text)

    async def send_piece(self, message: OutMessage, piece: str) -> str:
        """sendMessage to the chat the message names."""
        sent = await self.bot.send_message(chat_ref(message.chat_id), piece)
        return str(sent.message_id)

    def verdict(self, exc: Exception) -> Verdict | None:
        """Flood control pauses delivery; a chat the bot cannot write to gives up; the rest is retried."""
        if isinstance(exc, RetryAfter):
            wait_s = retry_after_s(exc)
            return Verdict("paused", f"Telegram asked to wait {wait_s:g} s", wait_s)
        if isinstance(exc, (BadRequest, Forbidden, ChatMigrated)):
            # BadRequest before NetworkError: PTB makes it a subclass, but it is permanent.
            return Verdict("failed", exc.message)
        if isinstance(exc, TelegramError):  # network errors, 5xx: worth another try
            return Verdict("retry", str(exc) or type(exc).__name__)
        return None


async def _edit_quietly(query: CallbackQuery, text: str, markup: InlineKeyboardMarkup | None) -> None:
    """Edit the message under a button; an unchanged message or a transient failure is not worth an error."""
    try:
        await query.edit_message_text(text, reply_markup=markup)
    except BadRequest as exc:
        if "not modified" not in exc.message:
            log.warning("telegram: editing a message failed: %s", exc.message)
    except TelegramError as exc:
        log.info("telegram: editing a message failed: %s", exc)
