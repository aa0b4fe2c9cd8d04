"""Pairing with the Telegram bot, and who gets proactive messages: no python-telegram-bot needed.

``picoagent telegram pair`` stores a one-time 6-digit code (only its hash); whoever sends it to the bot
within its lifetime is paired, once. The CLI and the daemon's owner lookup import this module alone,
so neither loads python-telegram-bot (nor the runtime) just to pair or to find the owner's chat:
``python -X importtime`` on the development machine gave 0.1 s for this module against 0.33-0.70 s
for the whole channel.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable

from appliance.config import TelegramConfig
from appliance.memory.db import Database

CHANNEL = "telegram"

# A bare code, or what a t.me/<bot>?start=<code> link sends.
PAIRING_MESSAGE = re.compile(r"(?:/start(?:@\w+)?\s+)?(\d{6})")


def _code_hash(code: str) -> str:
    return hashlib.sha256(f"picoagent-telegram-pairing:{code}".encode()).hexdigest()


def create_pairing_code(db: Database, ttl_s: float = 600, *, clock: Callable[[], float] = time.time) -> str:
    """A one-time 6-digit code: whoever sends it to the bot is paired (the code is stored only hashed)."""
    now = clock()
    with db.transaction() as conn:
        conn.execute("DELETE FROM telegram_pairing WHERE used_by IS NULL AND expires_at <= ?", (now,))
        while True:  # used codes stay (who paired, when); never hand out a code whose hash is taken
            code = f"{secrets.randbelow(10**6):06d}"
            taken = conn.execute("SELECT 1 FROM telegram_pairing WHERE code_hash = ?", (_code_hash(code),))
            if taken.fetchone() is None:
                break
        conn.execute(
            "INSERT INTO telegram_pairing (code_hash, created_at, expires_at) VALUES (?, ?, ?)",
            (_code_hash(code), now, now + ttl_s),
        )
    return code


def redeem_pairing_code(
    db: Database, code: str, user_id: int, name: str, *, clock: Callable[[], float] = time.time
) -> bool:
    """Pair a user with a valid, unused, unexpired code; False (and nothing changed) otherwise."""
    now = clock()
    with db.transaction() as conn:
        used = conn.execute(
            "UPDATE telegram_pairing SET used_by = ?, used_at = ?"
            " WHERE code_hash = ? AND used_by IS NULL AND expires_at > ?",
            (user_id, now, _code_hash(code), now),
        ).rowcount
        if used == 1:
            conn.execute(
                "INSERT OR IGNORE INTO telegram_users (user_id, name, paired_at) VALUES (?, ?, ?)",
                (user_id, name, now),
            )
    return used == 1


def paired_users(db: Database) -> list[int]:
    """Users added by pairing, first paired first."""
    rows = db.rows("SELECT user_id FROM telegram_users ORDER BY paired_at, user_id")
    return [int(r[0]) for r in rows]


def is_paired(db: Database, user_id: int) -> bool:
    """Whether a user was added by pairing."""
    return db.value("SELECT 1 FROM telegram_users WHERE user_id = ?", (user_id,)) == 1


def owner_target(config: TelegramConfig, db: Database) -> tuple[str, str] | None:
    """Where proactive messages go: owner_chat, else the first allowed user, else the first paired one."""
    if not config.enabled:
        return None
    if config.owner_chat is not None:
        return CHANNEL, str(config.owner_chat)
    if config.allow_from:
        return CHANNEL, str(config.allow_from[0])
    users = paired_users(db)
    return (CHANNEL, str(users[0])) if users else None
