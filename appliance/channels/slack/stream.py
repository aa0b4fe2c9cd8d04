"""A reply streamed into a Slack conversation: posted at the first text, then edited in place with chat.update.

The throttle is the shared :class:`~appliance.channels.core.StreamedReply` (one push per
``slack.edit_interval_s``; chat.update is in Slack's rate tier 3, about 50 a minute, so 1 s is the
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

from appliance.channels.core import StreamedReply
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


class SlackReply(StreamedReply):
    """One answer written into a conversation (a thread when ``thread_ts``): posted, edited as it grows."""

    def __init__(self, client: AsyncWebClient, channel: str, thread_ts: str | None, interval_s: float) -> None:
        super().__init__(interval_s)
        self.client = client
        self.channel = channel
        self.thread_ts = thread_ts
        self.shown: list[tuple[str, str]] = []  # per piece: the message's ts and what it shows

    @property
    def on_screen(self) -> bool:
        """Whether a first message was posted."""
        return bool(self.shown)

    async def show(self, text: str, *, final: bool, choices: list[str]) -> str:
        """Post or edit one message per piece; returns what could not be shown (of a final text)."""
        pieces = split_message(escape(text))
        buttons = button_blocks(choice_buttons(choices)) if final else []
        for i, piece in enumerate(pieces):
            blocks = [section(piece)] + (buttons if i == len(pieces) - 1 else [])
            if i < len(self.shown) and self.shown[i][1] == piece and len(blocks) == 1:
                continue
            for attempt in range(2):
                try:
                    await self._push(i, piece, blocks)
                    break
                except SlackApiError as exc:
                    wait_s = retry_after_s(exc)
                    if wait_s is None:
                        log.warning("slack: showing a reply in %s failed: %s", self.channel, error_of(exc))
                        return unescape("\n\n".join(pieces[i:])) if final else ""
                    self.last_push = time.monotonic() + wait_s
                    if not final or attempt == 1 or wait_s > FINAL_WAIT_MAX_S:
                        return unescape("\n\n".join(pieces[i:])) if final else ""
                    log.info("slack: rate-limited; the final reply waits %g s", wait_s)
                    await asyncio.sleep(wait_s)
                except (SlackClientError, *NETWORK_ERRORS) as exc:
                    log.info("slack: showing a reply in %s failed: %s", self.channel, exc or type(exc).__name__)
                    return unescape("\n\n".join(pieces[i:])) if final else ""
        return ""

    async def _push(self, i: int, piece: str, blocks: list[dict[str, Any]]) -> None:
        self.last_push = time.monotonic()
        if i < len(self.shown):
            await self.client.chat_update(channel=self.channel, ts=self.shown[i][0], text=piece, blocks=blocks)
            self.shown[i] = (self.shown[i][0], piece)
        else:
            sent = await self.client.chat_postMessage(
                channel=self.channel, text=piece, blocks=blocks, thread_ts=self.thread_ts
            )
            self.shown.append((str(sent["ts"]), piece))
