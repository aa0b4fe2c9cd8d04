"""Outbound messages that must not be lost: stored first, delivered by their channel, marked when accepted.

Events, cron results, heartbeat findings and task completions are *notifications*: nobody is waiting on
the other end, so they go through this table. A channel's :class:`Delivery` takes the due messages,
hands each to the channel's ``send``, and marks it sent only when the remote side accepted it; a
failure schedules a retry with backoff (or the server's own Retry-After). Messages to one chat go out
in order: a message waiting for its retry holds back the younger ones of its chat. After a restart
the loop simply picks up what is pending.

A send that raises instead of saying how it went is a message its platform can never take (it cannot
even be built: an e-mail subject with a line break did that, issue 31) or a bug: sending it again would
raise again and, oldest first, hold back every message after it. So it is marked failed and the pass
goes on; only a network error (``OSError``, ``TimeoutError``) that slipped through is retried. Every
message marked failed is said on the notifications feed: a notification's own row shows it, and a
reply (not in the feed) gets a row saying it was not delivered. :class:`Outbox` holds every SQL
statement on the table (and that feed row); which channel a proactive message goes to is
:mod:`appliance.notify`'s choice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from appliance.errors import PicoagentError
from appliance.memory.db import Database

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 20
BACKOFF_S = (2, 5, 15, 30, 60, 120, 300, 600)
DELIVERY_POLL_S = 1.0  # the outbox is also checked this often, so no enqueuer has to wake the loop

# What a channel's send made of one message: accepted; to be retried; never deliverable; or the
# server asked everyone to wait (flood control), which ends the pass.
Outcome = Literal["sent", "retry", "failed", "paused"]
TRANSIENT = (OSError, TimeoutError)  # raised by a send: worth another try; anything else never will be
FEED_EXCERPT = 80  # how much of an undelivered reply the feed quotes


@dataclass(frozen=True)
class OutMessage:
    """One stored outbound message."""

    id: int
    channel: str
    chat_id: str
    text: str
    kind: str
    attempts: int
    meta: dict[str, Any] = field(default_factory=dict)  # what the channel needs besides the text (a thread)


class Outbox:
    """The outbox table."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def enqueue(self, channel: str, chat_id: str, text: str, kind: str, meta: dict[str, Any] | None = None) -> int:
        """Store a message for delivery (durable when this returns); ``meta``: what the channel needs besides."""
        now = self.clock()
        return self.db.write(
            "INSERT INTO outbox (channel, chat_id, text, kind, created_at, next_attempt_at, status, meta)"
            " VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
            (channel, chat_id, text, kind, now, now, json.dumps(meta) if meta else None),
        )

    def due(self, channel: str, limit: int = 20) -> list[OutMessage]:
        """Pending messages whose time has come, oldest first."""
        rows = self.db.rows(
            "SELECT id, channel, chat_id, text, kind, attempts, meta FROM outbox"
            " WHERE channel = ? AND status = 'pending' AND next_attempt_at <= ? ORDER BY id LIMIT ?",
            (channel, self.clock(), limit),
        )
        return [
            OutMessage(i, ch, chat, text, kind, attempts, json.loads(meta) if meta else {})
            for i, ch, chat, text, kind, attempts, meta in rows
        ]

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
            with self.db.transaction() as conn:
                conn.execute(
                    "UPDATE outbox SET status = 'failed', attempts = ?, last_error = ? WHERE id = ?",
                    (attempts, error, message.id),
                )
                self._tell_feed(conn, message.id)
            log.error("giving up on outbound message %d after %d attempts: %s", message.id, attempts, error)
            return
        delay = retry_after_s if retry_after_s is not None else BACKOFF_S[min(attempts - 1, len(BACKOFF_S) - 1)]
        self.db.write(
            "UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_error = ? WHERE id = ?",
            (attempts, self.clock() + delay, error, message.id),
        )

    def mark_failed(self, message_id: int, error: str) -> None:
        """It can never be delivered (the chat is gone, the bot was blocked); the feed says so."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE outbox SET status = 'failed', last_error = ? WHERE id = ?", (error, message_id))
            self._tell_feed(conn, message_id)

    def mark_undelivered(self, channel: str, remote_id: str, error: str) -> bool:
        """The platform accepted a message (marked sent) and reported later that it never arrived; True if found."""
        with self.db.transaction() as conn:
            changed = conn.execute(
                "UPDATE outbox SET status = 'failed', last_error = ?"
                " WHERE channel = ? AND remote_id = ? AND status = 'sent'",
                (error, channel, remote_id),
            ).rowcount
            for (message_id,) in conn.execute(
                "SELECT id FROM outbox WHERE channel = ? AND remote_id = ? AND status = 'failed'", (channel, remote_id)
            ).fetchall():
                self._tell_feed(conn, int(message_id))
        return changed > 0

    def _tell_feed(self, conn: sqlite3.Connection, message_id: int) -> None:
        """A failed message on the notifications feed: a notification shows it in its own row (the feed
        reads the outbox's status and error); any other message (a reply) gets a row saying so."""
        conn.execute(
            "INSERT INTO notifications (created_at, kind, text, channel, outbox_id)"
            " SELECT ?, 'undelivered', 'A ' || kind || ' to ' || chat_id || ' on ' || channel"
            " || ' could not be sent: ' || substr(text, 1, ?), channel, id FROM outbox"
            " WHERE id = ? AND NOT EXISTS (SELECT 1 FROM notifications WHERE outbox_id = ?)",
            (self.clock(), FEED_EXCERPT, message_id, message_id),
        )

    def keep_unsent(self, message_id: int, rest: str) -> None:
        """Part of a long message went out: only the rest stays to send, so a retry repeats nothing."""
        self.db.write("UPDATE outbox SET text = ? WHERE id = ?", (rest, message_id))

    def pending_by_chat(self, channel: str) -> dict[str, list[int]]:
        """Every pending message id of a channel per chat, oldest first (what keeps delivery in order)."""
        rows = self.db.rows(
            "SELECT id, chat_id FROM outbox WHERE channel = ? AND status = 'pending' ORDER BY id", (channel,)
        )
        queues: dict[str, list[int]] = {}
        for message_id, chat_id in rows:
            queues.setdefault(chat_id, []).append(int(message_id))
        return queues


class Delivery:
    """One channel's delivery loop: due messages through ``send``, oldest first per chat, one pass at a time."""

    def __init__(
        self,
        outbox: Outbox,
        channel: str,
        send: Callable[[OutMessage], Awaitable[Outcome]],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.outbox = outbox
        self.channel = channel
        self.send = send
        self.clock = clock
        self.paused_until = 0.0  # the server's flood control (e.g. a 429's retry_after), by ``clock``
        self._lock = asyncio.Lock()  # one delivery pass at a time: no message sent twice
        self._wakeup = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def bind(self) -> None:
        """Remember the running event loop, so :meth:`wakeup` works from any thread from now on."""
        self._loop = asyncio.get_running_loop()

    def start(self) -> None:
        """Deliver in the background until :meth:`stop`."""
        self.bind()
        self._task = asyncio.ensure_future(self._deliver_forever())

    def stop_soon(self) -> None:
        """End the loop after the pass in flight (a stop's first step: nothing new starts)."""
        self._stopping = True
        self._wakeup.set()

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Let the pass in flight finish (so no message is sent without being marked sent), then end."""
        self.stop_soon()
        if self._task is None:
            return
        _done, pending = await asyncio.wait({self._task}, timeout=timeout_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    def wakeup(self) -> None:
        """Something was put into the outbox: deliver now rather than at the next poll (any thread)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wakeup.set)

    def pause(self, seconds: float) -> None:
        """The server asked to wait (flood control): no pass sends anything for ``seconds``."""
        self.paused_until = self.clock() + seconds

    async def _deliver_forever(self) -> None:
        while not self._stopping:
            self._wakeup.clear()
            try:
                await self.deliver_due()
            except PicoagentError as exc:
                log.error("%s: delivering the outbox failed: %s", self.channel, exc.message)
            except Exception:  # the loop must outlive a bug; the messages stay pending
                log.exception("%s: delivering the outbox failed", self.channel)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), DELIVERY_POLL_S)

    async def deliver_due(self) -> int:
        """One delivery pass: send the due messages, oldest first per chat; returns how many were accepted."""
        db = self.outbox.db
        async with self._lock:
            if self.clock() < self.paused_until:
                return 0
            due = await db.call(self.outbox.due, self.channel)
            if not due:
                return 0
            queues = await db.call(self.outbox.pending_by_chat, self.channel)
            blocked: set[str] = set()
            accepted = 0
            for message in due:
                queue = queues.get(message.chat_id, [])
                if message.chat_id in blocked or not queue or queue[0] != message.id:
                    blocked.add(message.chat_id)  # an older message of this chat waits for its retry
                    continue
                outcome = await self._send(message)
                if outcome == "paused":
                    break
                if outcome == "retry":
                    blocked.add(message.chat_id)
                    continue
                queue.pop(0)
                accepted += outcome == "sent"
            return accepted

    async def _send(self, message: OutMessage) -> Outcome:
        """``send``, with what it raised turned into an outcome: a network error retried, anything else failed."""
        try:
            return await self.send(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, TRANSIENT):
                log.warning("%s: message %d not delivered (%s); will retry", self.channel, message.id, error)
                await self.outbox.db.call(self.outbox.mark_retry, message, error)
                return "retry"
            log.error(
                "%s: message %d to %s can never be sent (%s); marked failed, the next ones go on",
                self.channel,
                message.id,
                message.chat_id,
                error,
                exc_info=not isinstance(exc, PicoagentError | ValueError),  # a bug: its traceback, once
            )
            await self.outbox.db.call(self.outbox.mark_failed, message.id, error)
            return "failed"
