"""Outbound messages that must not be lost: stored first, delivered by their channel, marked when accepted.

Events, cron results, heartbeat findings and task completions are *notifications*: nobody is waiting on
the other end, so they go through this table. A channel's delivery loop takes the due messages, sends
each, and marks it sent only when the remote side accepted it; a failure schedules a retry with
backoff (or the server's own Retry-After). After a restart the loop simply picks up what is pending.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from appliance.memory.db import Database

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 20
BACKOFF_S = (2, 5, 15, 30, 60, 120, 300, 600)


@dataclass(frozen=True)
class OutMessage:
    """One stored outbound message."""

    id: int
    channel: str
    chat_id: str
    text: str
    kind: str
    attempts: int


class Outbox:
    """The outbox table."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def enqueue(self, channel: str, chat_id: str, text: str, kind: str) -> int:
        """Store a message for delivery (durable when this returns)."""
        now = self.clock()
        return self.db.write(
            "INSERT INTO outbox (channel, chat_id, text, kind, created_at, next_attempt_at, status)"
            " VALUES (?, ?, ?, ?, ?, ?, 'pending')",
            (channel, chat_id, text, kind, now, now),
        )

    def due(self, channel: str, limit: int = 20) -> list[OutMessage]:
        """Pending messages whose time has come, oldest first."""
        rows = self.db.rows(
            "SELECT id, channel, chat_id, text, kind, attempts FROM outbox"
            " WHERE channel = ? AND status = 'pending' AND next_attempt_at <= ? ORDER BY id LIMIT ?",
            (channel, self.clock(), limit),
        )
        return [OutMessage(*row) for row in rows]

    def pending_count(self, channel: str) -> int:
        """Messages not yet accepted."""
        return int(self.db.value("SELECT count(*) FROM outbox WHERE channel = ? AND status = 'pending'", (channel,)))

    def next_due_in(self, channel: str) -> float | None:
        """Seconds until the next pending message is due (None when nothing is pending)."""
        due = self.db.value(
            "SELECT min(next_attempt_at) FROM outbox WHERE channel = ? AND status = 'pending'", (channel,)
        )
        return None if due is None else max(0.0, float(due) - self.clock())

    def mark_sent(self, message_id: int, remote_id: str | None = None) -> None:
        """The remote side accepted it."""
        self.db.write(
            "UPDATE outbox SET status = 'sent', sent_at = ?, remote_id = ?, attempts = attempts + 1 WHERE id = ?",
            (self.clock(), remote_id, message_id),
        )

    def mark_retry(self, message: OutMessage, error: str, retry_after_s: float | None = None) -> None:
        """It failed; try again later (the server's Retry-After when it gave one, else backoff)."""
        attempts = message.attempts + 1
        if attempts >= MAX_ATTEMPTS:
            self.db.write(
                "UPDATE outbox SET status = 'failed', attempts = ?, last_error = ? WHERE id = ?",
                (attempts, error, message.id),
            )
            log.error("giving up on outbound message %d after %d attempts: %s", message.id, attempts, error)
            return
        delay = retry_after_s if retry_after_s is not None else BACKOFF_S[min(attempts - 1, len(BACKOFF_S) - 1)]
        self.db.write(
            "UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_error = ? WHERE id = ?",
            (attempts, self.clock() + delay, error, message.id),
        )

    def mark_failed(self, message_id: int, error: str) -> None:
        """It can never be delivered (the chat is gone, the bot was blocked)."""
        self.db.write("UPDATE outbox SET status = 'failed', last_error = ? WHERE id = ?", (error, message_id))


class Notifier:
    """Proactive messages to the owner: stored in the outbox for the owner's channel."""

    def __init__(self, outbox: Outbox, owner: Callable[[], tuple[str, str] | None]) -> None:
        self.outbox = outbox
        self.owner = owner  # () -> (channel, chat_id), or None when no channel can reach the owner

    def notify(self, text: str, kind: str) -> int | None:
        """Queue a message for the owner; None when no channel reaches them (it is logged instead)."""
        target = self.owner()
        if target is None:
            log.info("notification (no channel to deliver it): %s", text)
            return None
        return self.outbox.enqueue(target[0], target[1], text, kind)
