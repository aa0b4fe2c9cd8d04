"""A reply streamed into a Telegram chat: sent at the first text, edited as it grows, split when too long.

The throttle (one push per ``telegram.edit_interval_s``) and the loop of sending each piece once and
then editing it are the shared :class:`~appliance.channels.core.EditedReply`; this module says how
Telegram splits (:func:`~appliance.channels.telegram.text.split_message`), sends, edits and
fails. An unchanged piece is not sent again; flood control (429) moves the next push to when Telegram
allows it; what could not be shown of the final text is returned for the outbox.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
import warnings

from telegram import Bot, InlineKeyboardMarkup, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from appliance.channels.core import EditedReply, Trouble
from appliance.channels.telegram.text import choice_keyboard, split_message

log = logging.getLogger(__name__)

TYPING_EVERY_S = 4.0  # Telegram shows "typing…" for about 5 s per sendChatAction


def retry_after_s(exc: RetryAfter) -> float:
    """How long Telegram's flood control asks to wait, in seconds."""
    with warnings.catch_warnings():  # int vs timedelta: PTB is migrating the attribute's type
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


class ReplyStream(EditedReply):
    """One answer written into a chat: sent at the first text, edited as it grows, finished with a footer."""

    typing_every_s = TYPING_EVERY_S

    def __init__(self, bot: Bot, chat_id: int | str, interval_s: float, reply_to: int | None = None) -> None:
        super().__init__(interval_s)
        self.bot = bot
        self.chat_id = chat_id
        self.reply_to = reply_to

    def split(self, text: str) -> list[str]:
        """Pieces within Telegram's 4,096 UTF-16 units."""
        return split_message(text)

    def markup(self, choices: list[str]) -> InlineKeyboardMarkup | None:
        """An inline keyboard with a button per answer."""
        return choice_keyboard(choices)

    async def post(self, piece: str, markup: InlineKeyboardMarkup | None, *, first: bool) -> int:
        """sendMessage (in a group: as a reply to the message answered)."""
        reply = ReplyParameters(self.reply_to, allow_sending_without_reply=True) if self.reply_to else None
        sent = await self.bot.send_message(self.chat_id, piece, reply_parameters=reply, reply_markup=markup)
        return int(sent.message_id)

    async def edit(self, ref: int, piece: str, markup: InlineKeyboardMarkup | None) -> None:
        """editMessageText."""
        await self.bot.edit_message_text(piece, chat_id=self.chat_id, message_id=ref, reply_markup=markup)

    async def trouble(self, exc: Exception, *, final: bool, last_try: bool) -> Trouble:
        """An unchanged edit is shown; a blocked bot reaches nobody; flood control moves the next push."""
        if isinstance(exc, BadRequest):
            if "not modified" in exc.message:
                return "shown"
            log.warning("telegram: showing a reply in chat %s failed: %s", self.chat_id, exc.message)
            return "unsent"
        if isinstance(exc, Forbidden):
            return "gone"  # the user blocked the bot: nothing will ever reach them
        if isinstance(exc, RetryAfter):
            self.last_push = time.monotonic() + retry_after_s(exc)
            return "unsent"
        if isinstance(exc, TelegramError):
            log.info("telegram: showing a reply in chat %s failed: %s", self.chat_id, exc)
            return "unsent"
        raise exc

    async def send_typing(self) -> None:
        """sendChatAction typing (Telegram shows it for about 5 s)."""
        with contextlib.suppress(TelegramError):
            await self.bot.send_chat_action(self.chat_id, ChatAction.TYPING)
