"""A reply streamed into a Telegram chat: sent at the first text, edited as it grows, split when too long.

The throttle (one push per ``telegram.edit_interval_s``) is the shared
:class:`~appliance.channels.core.StreamedReply`; this module shows a text the Telegram way: each
piece of :func:`~appliance.channels.telegram.text.split_message` is one message, sent once and then
edited. An unchanged piece is not sent again; flood control (429) moves the next push to when
Telegram allows it; what could not be shown of the final text is returned for the outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
import warnings

from telegram import Bot, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from appliance.channels.core import StreamedReply
from appliance.channels.telegram.text import choice_keyboard, split_message

log = logging.getLogger(__name__)

TYPING_EVERY_S = 4.0  # Telegram shows "typing…" for about 5 s per sendChatAction


def retry_after_s(exc: RetryAfter) -> float:
    """How long Telegram's flood control asks to wait, in seconds."""
    with warnings.catch_warnings():  # int vs timedelta: PTB is migrating the attribute's type
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


class ReplyStream(StreamedReply):
    """One answer written into a chat: sent at the first text, edited as it grows, finished with a footer."""

    def __init__(self, bot: Bot, chat_id: int, interval_s: float, reply_to: int | None = None) -> None:
        super().__init__(interval_s)
        self.bot = bot
        self.chat_id = chat_id
        self.reply_to = reply_to
        self.shown: list[tuple[int, str]] = []  # per piece: the message id and what it shows

    @property
    def on_screen(self) -> bool:
        """Whether a first message was sent."""
        return bool(self.shown)

    async def show(self, text: str, *, final: bool, choices: list[str]) -> str:
        """Send or edit one message per piece; returns what could not be delivered (of a final text)."""
        pieces = split_message(text)
        markup = choice_keyboard(choices)
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
                self.last_push = time.monotonic() + retry_after_s(exc)
                return "\n\n".join(pieces[i:]) if final else ""
            except TelegramError as exc:
                log.info("telegram: showing a reply in chat %s failed: %s", self.chat_id, exc)
                return "\n\n".join(pieces[i:]) if final else ""
        return ""

    async def show_typing(self) -> None:
        """Show "typing…" until the first piece of the answer is on screen (cancel it when the turn ends)."""
        while not self.shown:
            with contextlib.suppress(TelegramError):
                await self.bot.send_chat_action(self.chat_id, ChatAction.TYPING)
            await asyncio.sleep(TYPING_EVERY_S)
