"""A reply streamed into a Slack conversation: posted at the first text, then edited in place with chat.update.

The throttle and the send-then-edit loop are the shared :class:`~appliance.channels.core.EditedReply`
(one push per ``slack.edit_interval_s``; chat.update is in Slack's rate tier 3, about 50 a minute, so 1 s is the
sensible floor). Each piece of :func:`~appliance.channels.slack.text.split_message` is one message,
posted once and then edited; an unchanged piece is not sent again. A 429 moves the next push to when
Slack's ``Retry-After`` allows it; for the final text the reply waits that long once (up to
``FINAL_WAIT_MAX_S``) rather than leaving a half-written message, and what still could not be shown
is returned for the outbox.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from appliance.channels.core import EditedReply, Trouble
from appliance.channels.slack.text import button_blocks, choice_buttons, escape, section, split_message, unescape

log = logging.getLogger(__name__)

FINAL_WAIT_MAX_S = 30.0  # the longest a final text waits for Slack's rate limit before going to the outbox
NETWORK_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


def retry_after_s(exc: SlackApiError) -> float | None:
    """Seconds Slack asks to wait (a 429's Retry-After); None for any other error."""
    if exc.response.status_code != 429:
        return None
    for key, value in (exc.response.headers or {}).items():
        if key.lower() == "retry-after":
            try:
                return max(0.0, float(value))
            except (TypeError, ValueError):
                break
    return 1.0


def error_of(exc: SlackApiError) -> str:
    """Slack's error code (``channel_not_found``), else the HTTP status (a 5xx page is not JSON)."""
    data = exc.response.data
    error = data.get("error") if isinstance(data, dict) else None
    return str(error or exc.response.status_code)


class SlackReply(EditedReply):
    """One answer written into a conversation (a thread when ``thread_ts``): posted, edited as it grows."""

    def __init__(self, client: AsyncWebClient, channel: str, thread_ts: str | None, interval_s: float) -> None:
        super().__init__(interval_s)
        self.client = client
        self.channel = channel
        self.thread_ts = thread_ts

    def split(self, text: str) -> list[str]:
        """Pieces of the mrkdwn-escaped text within Slack's section limit."""
        return split_message(escape(text))

    def rest(self, pieces: list[str], first_unsent: int) -> str:
        """What was not shown, unescaped again (the outbox escapes it when it sends)."""
        return unescape(super().rest(pieces, first_unsent))

    def markup(self, choices: list[str]) -> list[dict[str, Any]] | None:
        """Actions blocks with a button per answer (None without answers)."""
        return button_blocks(choice_buttons(choices)) or None

    async def post(self, piece: str, markup: list[dict[str, Any]] | None, *, first: bool) -> str:
        """chat.postMessage (in the thread)."""
        sent = await self.client.chat_postMessage(
            channel=self.channel, text=piece, blocks=[section(piece), *(markup or [])], thread_ts=self.thread_ts
        )
        return str(sent["ts"])

    async def edit(self, ref: str, piece: str, markup: list[dict[str, Any]] | None) -> None:
        """chat.update."""
        await self.client.chat_update(
            channel=self.channel, ts=ref, text=piece, blocks=[section(piece), *(markup or [])]
        )

    async def trouble(self, exc: Exception, *, final: bool, last_try: bool) -> Trouble:
        """A 429 moves the next push; the final text waits it out once (up to ``FINAL_WAIT_MAX_S``)."""
        if isinstance(exc, SlackApiError):
            wait_s = retry_after_s(exc)
            if wait_s is None:
                log.warning("slack: showing a reply in %s failed: %s", self.channel, error_of(exc))
                return "unsent"
            self.last_push = time.monotonic() + wait_s
            if not final or last_try or wait_s > FINAL_WAIT_MAX_S:
                return "unsent"
            log.info("slack: rate-limited; the final reply waits %g s", wait_s)
            await asyncio.sleep(wait_s)
            return "again"
        if isinstance(exc, (SlackClientError, *NETWORK_ERRORS)):
            log.info("slack: showing a reply in %s failed: %s", self.channel, exc or type(exc).__name__)
            return "unsent"
        raise exc
