"""A reply streamed into a Discord channel: sent at the first text, edited as it grows, split when too long.

The throttle (one push per ``discord.edit_interval_s``; Discord allows about 5 messages or edits per
5 s in a channel) is the shared :class:`~appliance.channels.core.StreamedReply`; this module shows a
text the Discord way: each piece of :func:`~appliance.channels.discord.text.split_message` is one
message, sent once and then edited. An unchanged piece is not sent again; a rate limit discord.py does
not wait out itself moves the next push to when Discord allows it; what could not be shown of the
final text is returned for the outbox. "Typing…" shows until the first piece is on screen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import aiohttp
import discord

from appliance.channels.core import StreamedReply
from appliance.channels.discord.text import choice_components, split_message

log = logging.getLogger(__name__)

TYPING_EVERY_S = 8.0  # Discord shows "typing…" for about 10 s per request
# What a request to Discord can fail with besides a refusal: its errors, a network error, a timeout.
REQUEST_ERRORS = (discord.HTTPException, aiohttp.ClientError, OSError, asyncio.TimeoutError)


class ReplyStream(StreamedReply):
    """One answer written into a channel: sent at the first text, edited as it grows, finished with a footer."""

    def __init__(self, channel: discord.PartialMessageable, interval_s: float, reply_to: int | None = None) -> None:
        super().__init__(interval_s)
        self.channel = channel
        self.reply_to = reply_to  # in a server channel: the message answered, shown as a reply
        self.shown: list[tuple[int, str]] = []  # per piece: the message id and what it shows

    @property
    def on_screen(self) -> bool:
        """Whether a first message was sent."""
        return bool(self.shown)

    async def run(self) -> None:
        """Push the growing text (the shared throttle), showing "typing…" until the first piece is out."""
        typing = asyncio.ensure_future(self._typing())
        try:
            await super().run()
        finally:
            typing.cancel()

    async def show(self, text: str, *, final: bool, choices: list[str]) -> str:
        """Send or edit one message per piece; returns what could not be delivered (of a final text)."""
        pieces = split_message(text)
        buttons = choice_components(choices)
        for i, piece in enumerate(pieces):
            view = buttons if i == len(pieces) - 1 else None  # "Turn the fan on?" [yes] [no]
            if i < len(self.shown) and self.shown[i][1] == piece and view is None:
                continue
            self.last_push = time.monotonic()
            try:
                if i < len(self.shown):
                    message = self.channel.get_partial_message(self.shown[i][0])
                    await (message.edit(content=piece, view=view) if view else message.edit(content=piece))
                    self.shown[i] = (self.shown[i][0], piece)
                else:
                    sent = await self.channel.send(piece, **self._extras(view, first=not self.shown))
                    self.shown.append((sent.id, piece))
            except discord.RateLimited as exc:  # longer than discord.py waits by itself
                self.last_push = time.monotonic() + exc.retry_after
                return "\n\n".join(pieces[i:]) if final else ""
            except discord.Forbidden as exc:
                log.warning("discord: may not write in channel %s: %s", self.channel.id, exc.text or exc)
                return ""  # no permission, or the user blocks DMs: retrying will not reach them
            except REQUEST_ERRORS as exc:
                log.info("discord: showing a reply in channel %s failed: %s", self.channel.id, exc)
                return "\n\n".join(pieces[i:]) if final else ""
        return ""

    def _extras(self, view: discord.ui.View | None, *, first: bool) -> dict[str, Any]:
        extras: dict[str, Any] = {}
        if view is not None:
            extras["view"] = view
        if first and self.reply_to is not None:
            extras["reference"] = discord.MessageReference(
                message_id=self.reply_to, channel_id=self.channel.id, fail_if_not_exists=False
            )
        return extras

    async def _typing(self) -> None:
        while not self.shown:
            with contextlib.suppress(*REQUEST_ERRORS):
                await self.channel.typing()
            await asyncio.sleep(TYPING_EVERY_S)
