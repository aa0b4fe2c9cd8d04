"""Proactive messages to the owner (events, cron results, heartbeat findings, finished tasks), wherever they are.

Each message is stored in the ``notifications`` feed (the status page and ``picoagent status`` show it
even when no chat channel is set up) and, in the same transaction, in the outbox of the first channel
in ``notify.owner`` that is up and knows the owner (when none is up: the first that knows the owner, which
delivers it when it is back); a message that can never be sent shows as failed with the reason
(:mod:`appliance.outbox` adds a row for a reply that failed). :meth:`Notifier.reroute` moves a message
that waited longer than ``notify.fallback_after_s`` on a channel that is down to the next channel that
is up, so a Telegram outage does not swallow a fire alarm that e-mail could carry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from appliance.memory.db import Database
from appliance.outbox import Outbox

log = logging.getLogger(__name__)

REROUTE_EVERY_S = 10.0
FEED_LIMIT = 50  # the most notifications one request returns


class Reachable(Protocol):
    """What the notifier needs of a channel."""

    @property
    def up(self) -> bool:
        """Whether messages can go out now."""

    def owner_target(self) -> str | None:
        """The owner's chat on this channel (None: nobody to tell here)."""

    def notify_wakeup(self) -> None:
        """Something was put into the outbox: deliver now (any thread)."""


class Notifier:
    """Stores each proactive message in the feed and gives it to the owner's best channel."""

    def __init__(
        self,
        outbox: Outbox,
        channels: Mapping[str, Reachable],
        order: Callable[[], list[str]],
        *,
        fallback_after_s: Callable[[], float] = lambda: 120.0,
        feed_keep: Callable[[], int] = lambda: 500,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.outbox = outbox
        self.db: Database = outbox.db
        self.channels = channels  # name -> running channel (read at every message: channels come and go)
        self.order = order  # () -> the channel names to try, in order
        self.fallback_after_s = fallback_after_s
        self.feed_keep = feed_keep
        self.clock = clock

    def targets(self) -> list[tuple[str, str, bool]]:
        """(channel, owner's chat, up) for each channel in order that knows the owner."""
        found = []
        for name in self.order():
            channel = self.channels.get(name)
            if channel is None:
                continue
            try:
                target = channel.owner_target()
            except Exception:  # a broken lookup must not lose the message: the next channel takes it
                log.exception("notify: finding the owner on %s failed", name)
                continue
            if target:
                found.append((name, target, channel.up))
        return found

    def choose(self, skip: str | None = None) -> tuple[str, str] | None:
        """The first channel that is up (else the first at all) and its owner chat; None: no channel."""
        targets = [t for t in self.targets() if t[0] != skip]
        for name, chat, up in targets:
            if up:
                return name, chat
        return (targets[0][0], targets[0][1]) if targets and skip is None else None

    def notify(self, text: str, kind: str) -> int:
        """Store a message in the feed and the chosen channel's outbox (any thread); returns its feed id."""
        target = self.choose()
        now = self.clock()
        with self.db.transaction() as conn:
            outbox_id = None
            if target is not None:
                outbox_id = self.outbox.enqueue(target[0], target[1], text, kind)
            feed_id = int(
                conn.execute(
                    "INSERT INTO notifications (created_at, kind, text, channel, outbox_id) VALUES (?, ?, ?, ?, ?)",
                    (now, kind, text, target[0] if target else None, outbox_id),
                ).lastrowid
                or 0
            )
        if target is None:
            log.info("notification (no chat channel reaches the owner; it is on the status page): %s", text)
        else:
            self._wake(target[0])
        return feed_id

    def _wake(self, name: str) -> None:
        channel = self.channels.get(name)
        if channel is not None:
            channel.notify_wakeup()

    def reroute(self) -> int:
        """Move messages that waited too long on a channel that is down to the next one up; how many moved."""
        down = {name for name, _chat, up in self.targets() if not up}
        if not down:
            return 0
        cutoff = self.clock() - self.fallback_after_s()
        waiting = self.db.rows(
            "SELECT o.id, o.channel FROM outbox o JOIN notifications n ON n.outbox_id = o.id"
            " WHERE o.status = 'pending' AND o.created_at <= ? ORDER BY o.id",
            (cutoff,),
        )
        moved = 0
        for outbox_id, channel in waiting:
            if channel not in down:
                continue
            target = self.choose(skip=channel)
            if target is None:
                continue
            with self.db.transaction() as conn:
                changed = conn.execute(
                    "UPDATE outbox SET channel = ?, chat_id = ?, meta = NULL, next_attempt_at = ?, attempts = 0"
                    " WHERE id = ? AND status = 'pending' AND channel = ?",
                    (target[0], target[1], self.clock(), outbox_id, channel),
                ).rowcount
                conn.execute("UPDATE notifications SET channel = ? WHERE outbox_id = ?", (target[0], outbox_id))
            if changed:
                moved += 1
                log.warning("notify: %s is down; message %d goes to %s instead", channel, outbox_id, target[0])
                self._wake(target[0])
        return moved

    def prune(self) -> None:
        """Keep the newest ``notify.feed_keep`` notifications."""
        self.db.write(
            "DELETE FROM notifications WHERE id <= (SELECT id FROM notifications ORDER BY id DESC LIMIT 1 OFFSET ?)",
            (self.feed_keep(),),
        )

    async def run(self) -> None:
        """Every few seconds: reroute from channels that are down; trim the feed."""
        while True:
            await asyncio.sleep(REROUTE_EVERY_S)
            try:
                await self.db.call(self.reroute)
                await self.db.call(self.prune)
            except Exception:  # the loop must outlive a bug or a full disk; messages stay where they are
                log.exception("notify: rerouting failed")


def recent(db: Database, *, after_id: int = 0, limit: int = FEED_LIMIT) -> list[dict[str, Any]]:
    """The newest notifications (after ``after_id``), newest first, with where each went and whether it arrived."""
    rows = db.rows(
        "SELECT n.id, n.created_at, n.kind, n.text, n.channel, o.status, o.sent_at, o.last_error"
        " FROM notifications n LEFT JOIN outbox o ON o.id = n.outbox_id WHERE n.id > ? ORDER BY n.id DESC LIMIT ?",
        (after_id, min(limit, FEED_LIMIT)),
    )
    return [
        {
            "id": int(i),
            "at": float(at),
            "kind": kind,
            "text": text,
            "channel": channel,
            "delivery": "not sent (no channel)" if channel is None else (status or "unknown"),
            "sent_at": sent_at,
            "error": error if status == "failed" else None,  # why it never arrived
        }
        for i, at, kind, text, channel, status, sent_at, error in rows
    ]
