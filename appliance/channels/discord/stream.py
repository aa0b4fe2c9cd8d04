"""A reply streamed into a Discord channel: sent at the first text, edited as it grows, split when too long.

The throttle (one push per ``discord.edit_interval_s``; Discord allows about 5 messages or edits per
5 s in a channel) and the loop of sending each piece once and then editing it are the shared
:class:`~appliance.channels.core.EditedReply`; this module says how Discord splits
(:func:`~appliance.channels.discord.text.split_message`), sends, edits and fails. An
unchanged piece is not sent again; a rate limit discord.py does not wait out itself moves the next
push to when Discord allows it; what could not be shown of the final text is returned for the outbox.
"Typing…" shows until the first piece is on screen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import aiohttp
import discord

from appliance.channels.core import EditedReply, Trouble
from appliance.channels.discord.text import choice_components, split_message

log = logging.getLogger(__name__)

TYPING_EVERY_S = 8.0  # Discord shows "typing…" for about 10 s per request
# What a request to Discord can fail with besides a refusal: its errors, a network error, a timeout.
REQUEST_ERRORS = (discord.HTTPException, aiohttp.ClientError, OSError, asyncio.TimeoutError)


class ReplyStream(EditedReply):
    """One answer written into a channel: sent at the first text, edited as it grows, finished with a footer."""

    typing_every_s = TYPING_EVERY_S

    def __init__(self, channel: discord.PartialMessageable, interval_s: float, reply_to: int | None = None) -> None:
        super().__init__(interval_s)
        self.channel = channel
        self.reply_to = reply_to  # in a server channel: the message answered, shown as a reply

    def split(self, text: str) -> list[str]:
        """Pieces within Discord's 2,000 characters."""
        return split_message(text)

    def markup(self, choices: list[str]) -> discord.ui.View | None:
        """A button per answer."""
        return choice_components(choices)

    async def post(self, piece: str, markup: discord.ui.View | None, *, first: bool) -> int:
        """A new message (the first one a reply to the message answered, in a server)."""
        sent = await self.channel.send(piece, **self._extras(markup, first=first))
        return int(sent.id)

    async def edit(self, ref: int, piece: str, markup: discord.ui.View | None) -> None:
        """An edit of a sent message."""
        message = self.channel.get_partial_message(ref)
        await (message.edit(content=piece, view=markup) if markup else message.edit(content=piece))

    async def trouble(self, exc: Exception, *, final: bool, last_try: bool) -> Trouble:
        """A rate limit moves the next push; no permission reaches nobody; anything else is kept."""
        if isinstance(exc, discord.RateLimited):  # longer than discord.py waits by itself
            self.last_push = time.monotonic() + exc.retry_after
            return "unsent"
        if isinstance(exc, discord.Forbidden):
            log.warning("discord: may not write in channel %s: %s", self.channel.id, exc.text or exc)
            return "gone"  # no permission, or the user blocks DMs: retrying will not reach them
        if isinstance(exc, REQUEST_ERRORS):
            log.info("discord: showing a reply in channel %s failed: %s", self.channel.id, exc)
            return "unsent"
        raise exc

    def _extras(self, view: discord.ui.View | None, *, first: bool) -> dict[str, Any]:
        extras: dict[str, Any] = {}
        if view is not None:
            extras["view"] = view
        if first and self.reply_to is not None:
            extras["reference"] = discord.MessageReference(
                message_id=self.reply_to, channel_id=self.channel.id, fail_if_not_exists=False
            )
        return extras

    async def send_typing(self) -> None:
        """Discord's typing request (shown for about 10 s)."""
        with contextlib.suppress(*REQUEST_ERRORS):
            await self.channel.typing()
