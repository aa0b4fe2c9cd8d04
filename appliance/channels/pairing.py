"""Pairing with any chat channel, and the messages a channel has handled: no platform library needed.

``picoagent channels pair NAME`` stores a one-time 6-digit code for that channel (only its hash); whoever
sends it to the assistant there, in a private chat, within its lifetime is paired, once. The CLI and
the daemon's owner lookup import this module alone, so neither loads a platform library (nor the runtime)
just to pair or to find the owner's chat. Telegram had tables of its own until migration 16 moved its
rows here; its codes keep the hash they had (:data:`LEGACY_SALT`). :func:`first_time` records a
platform's message id, so a message the platform delivers twice (a retried webhook, a re-sent envelope)
is handled once, across restarts.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import secrets
import time
from collections.abc import Callable

from appliance.memory.db import Database

log = logging.getLogger(__name__)

CODE_TTL_S = 600.0
# A bare code, /pair CODE, or what a t.me/<bot>?start=<code> link sends (/start@bot CODE in a group).
PAIRING_CODE = re.compile(r"(?:/(?:start|pair)(?:@\w+)?\s+)?(\d{6})")
# Telegram's codes were hashed this way before its rows moved into channel_pairing: an unused code
# printed by an older picoagent still works after the upgrade.
LEGACY_SALT = {"telegram": "picoagent-telegram-pairing:"}


def _code_hash(channel: str, code: str) -> str:
    salt = LEGACY_SALT.get(channel, f"picoagent-pairing:{channel}:")
    return hashlib.sha256(f"{salt}{code}".encode()).hexdigest()


def create_code(
    db: Database, channel: str, ttl_s: float = CODE_TTL_S, *, clock: Callable[[], float] = time.time
) -> str:
    """A one-time 6-digit code: whoever sends it on ``channel`` is paired (the code is stored only hashed)."""
    now = clock()
    with db.transaction() as conn:
        conn.execute("DELETE FROM channel_pairing WHERE used_by IS NULL AND expires_at <= ?", (now,))
        while True:  # used codes stay (who paired, when); never hand out a code whose hash is taken
            code = f"{secrets.randbelow(10**6):06d}"
            taken = conn.execute("SELECT 1 FROM channel_pairing WHERE code_hash = ?", (_code_hash(channel, code),))
            if taken.fetchone() is None:
                break
        conn.execute(
            "INSERT INTO channel_pairing (code_hash, channel, created_at, expires_at) VALUES (?, ?, ?, ?)",
            (_code_hash(channel, code), channel, now, now + ttl_s),
        )
    return code


def redeem(
    channel: str, db: Database, code: str, user_id: object, name: str, *, clock: Callable[[], float] = time.time
) -> bool:
    """Pair a user with a valid, unused, unexpired code of this channel; False (nothing changed) otherwise."""
    now = clock()
    with db.transaction() as conn:
        used = conn.execute(
            "UPDATE channel_pairing SET used_by = ?, used_at = ?"
            " WHERE code_hash = ? AND channel = ? AND used_by IS NULL AND expires_at > ?",
            (str(user_id), now, _code_hash(channel, code), channel, now),
        ).rowcount
        if used == 1:
            conn.execute(
                "INSERT OR IGNORE INTO channel_users (channel, user_id, name, paired_at) VALUES (?, ?, ?, ?)",
                (channel, str(user_id), name, now),
            )
    return used == 1


def is_paired(channel: str, db: Database, user_id: object) -> bool:
    """Whether a user was added to this channel by pairing."""
    found = db.value("SELECT 1 FROM channel_users WHERE channel = ? AND user_id = ?", (channel, str(user_id)))
    return found == 1


def paired_users(db: Database, channel: str) -> list[str]:
    """The channel's users added by pairing, first paired first."""
    rows = db.rows("SELECT user_id FROM channel_users WHERE channel = ? ORDER BY paired_at, user_id", (channel,))
    return [str(r[0]) for r in rows]


def first_time(db: Database, channel: str, remote_id: str, *, clock: Callable[[], float] = time.time) -> bool:
    """Record a platform message id; False when it was recorded before (a second delivery of it)."""
    with db.transaction() as conn:
        inserted = conn.execute(
            "INSERT OR IGNORE INTO inbound (channel, remote_id, received_at) VALUES (?, ?, ?)",
            (channel, remote_id, clock()),
        ).rowcount
    return inserted == 1


INBOUND_KEEP_S = 30 * 86400  # longer than any platform re-sends a message (Meta: 7 days)


def prune_inbound(db: Database, *, clock: Callable[[], float] = time.time) -> int:
    """Forget the ids of messages handled more than 30 days ago; how many were forgotten."""
    with db.transaction() as conn:
        return int(
            conn.execute(
                "DELETE FROM inbound WHERE status = 'handled' AND received_at < ?", (clock() - INBOUND_KEEP_S,)
            ).rowcount
        )


async def prune_inbound_daily(db: Database) -> None:
    """The daemon's chore: :func:`prune_inbound` once a day (first an hour after the start)."""
    delay = 3600.0
    while True:
        await asyncio.sleep(delay)
        delay = 86400.0
        try:
            await db.call(prune_inbound, db)
        except Exception:  # a full disk or a locked file: try again tomorrow
            log.exception("channels: forgetting old message ids failed")


def mark_handled(db: Database, channel: str, remote_id: str) -> None:
    """The message was answered (its reply accepted, or stored in the outbox)."""
    db.write("UPDATE inbound SET status = 'handled' WHERE channel = ? AND remote_id = ?", (channel, remote_id))


def inbound_status(db: Database, channel: str, remote_id: str) -> str | None:
    """'received' (taken in, its answer not yet stored), 'handled', or None (never seen)."""
    found = db.value("SELECT status FROM inbound WHERE channel = ? AND remote_id = ?", (channel, remote_id))
    return None if found is None else str(found)


def forget_unhandled(db: Database, channel: str, remote_id: str) -> None:
    """Drop the record of a message taken in but never answered (a restart interrupted it), so it is handled."""
    db.write("DELETE FROM inbound WHERE channel = ? AND remote_id = ? AND status = 'received'", (channel, remote_id))
