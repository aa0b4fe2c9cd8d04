"""The message tool: a task or a cron prompt tells the owner something now, mid-run.

The message goes through the notifier (``appliance/notify.py``: the feed, and the outbox of the owner's
best channel), with the kind ``message``. It exists only where a notifier does (the daemon registers
it), so the model never sees a tool that cannot work. In a live chat turn (terminal, web, Telegram...)
it refuses: the owner is reading the reply, which is where the message belongs.

At most ``tools.message_per_hour`` messages go out in any hour, counted from the notifications table,
so a restart (or a crash loop) does not reset the count. The count and the send run as one call on the
database's single thread, so two calls at once cannot both slip under the limit. The text has the
secrets file's values redacted like every tool output, and when the turn has read outside text (a
page, search results) the message says so: it may carry words the owner did not ask for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from appliance.errors import ToolError
from appliance.memory.db import Database
from appliance.tools.registry import ToolRegistry, current_turn

KIND = "message"
HOUR_S = 3600.0
MAX_CHARS = 2000
# Turns nobody is reading as they happen: the message tool works there, and only there.
BACKGROUND = frozenset({"cron", "task", "heartbeat"})

Notify = Callable[[str, str], int]  # Notifier.notify(text, kind) -> the feed id


def _when(at: float, now: float) -> str:
    minutes = max(1, round((at - now) / 60))
    return f"{datetime.fromtimestamp(at).astimezone().strftime('%H:%M')} (in {minutes} minute{'s' * (minutes > 1)})"


def register(
    registry: ToolRegistry, notify: Notify, db: Database, per_hour: int, *, clock: Callable[[], float] = time.time
) -> None:
    """Register ``message`` (0 per hour: not at all); ``notify`` stores and delivers, like Notifier.notify."""
    if per_hour <= 0:
        return
    redact = registry.redact

    def send(text: str) -> str:
        """On the database thread: count this hour's messages, then send or refuse."""
        now = clock()
        sent = [
            at
            for (at,) in db.rows(
                "SELECT created_at FROM notifications WHERE kind = ? AND created_at > ? ORDER BY created_at",
                (KIND, now - HOUR_S),
            )
        ]
        if len(sent) >= per_hour:
            again = sent[len(sent) - per_hour] + HOUR_S  # when enough of them have left the last hour
            raise ToolError(
                f"not sent: at most {per_hour} message{'s' * (per_hour > 1)} an hour (tools.message_per_hour) "
                f"and {len(sent)} went out in the last hour; the next may go at {_when(again, now)}. "
                "Put it in the task's result instead, or send one message with everything later"
            )
        return f"sent to the owner (notification {notify(text, KIND)})"

    async def message(text: str) -> str:
        """Send the owner a message now, while a task or a scheduled job runs: a finding, a warning, a result.

        Examples: tell me when the soil is dry; message me as soon as the backup is done; warn me if the
        temperature passes 30 degrees

        Args:
            text: the message, written for the owner to read on their phone
        """
        turn = current_turn()
        if turn is not None and turn.channel not in BACKGROUND:
            raise ToolError("you are talking to the owner now: put it in your reply")
        body = text.strip()
        if not body:
            raise ToolError("the message is empty: write what the owner should read")
        if len(body) > MAX_CHARS:
            raise ToolError(f"the message is too long ({len(body)} characters; at most {MAX_CHARS})")
        if turn is not None and turn.trust.untrusted:
            body += "\n\n(" + turn.trust.reason().replace("this turn read", "written after reading", 1) + ")"
        return await db.call(send, redact(body))

    registry.register(message)
