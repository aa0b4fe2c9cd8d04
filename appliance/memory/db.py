"""The SQLite database: one file, WAL mode, migrations as a list of small functions, one writer.

All access goes through one connection guarded by a lock; async callers use :meth:`Database.call`,
which runs the work on the database's single thread so the event loop never blocks on SQLite.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from appliance.errors import DatabaseError
from appliance.memory.migrations import MIGRATIONS

log = logging.getLogger(__name__)

T = TypeVar("T")

# PRAGMA application_id marks the file as ours, so a foreign database is never migrated over.
APPLICATION_ID = 0x50494341  # "PICA"


@dataclass(frozen=True)
class StoredMessage:
    """One message of a conversation as stored."""

    id: int
    role: str
    content: str
    created_at: float
    route: str | None
    meta: dict[str, Any]


class Database:
    """The appliance's SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._conn = self._open(path)

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10)
        except (OSError, sqlite3.Error) as exc:
            raise DatabaseError(f"cannot open the database {path}: {exc}") from None
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise DatabaseError(
                f"{path} is not a picoagent database ({exc}); it was left untouched",
                fix="move the file away (or pass --data-dir) and picoagent starts a new one",
            ) from None
        if app_id != APPLICATION_ID and (tables or version):
            conn.close()
            raise DatabaseError(
                f"{path} belongs to another program (SQLite application id {app_id:#x}); it was left untouched",
                fix="move the file away (or pass --data-dir) and picoagent starts a new one",
            )
        if version > len(MIGRATIONS):
            conn.close()
            raise DatabaseError(
                f"{path} was written by a newer picoagent (schema {version}, this one knows {len(MIGRATIONS)})",
                fix="update picoagent, or roll back with `picoagent update rollback`",
            )
        _load_vec(conn)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        for number in range(version, len(MIGRATIONS)):
            migrate = MIGRATIONS[number]
            log.info("database %s: migration %d (%s)", path, number + 1, migrate.__name__)
            try:
                conn.execute("BEGIN IMMEDIATE")
                migrate(conn)
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version={number + 1}")
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                conn.close()
                raise DatabaseError(f"database {path}: migration {number + 1} failed: {exc}") from None
        return conn

    def close(self) -> None:
        """Close the connection and the writer thread."""
        with self._lock:
            self._conn.close()
        if self._executor:
            self._executor.shutdown(wait=True)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` on the database thread (the one writer), off the event loop."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite")
        return await asyncio.get_running_loop().run_in_executor(self._executor, partial(fn, *args, **kwargs))

    # --- the one way in: every module reads and writes through these -----------------------------

    def write_error(self, exc: sqlite3.Error) -> DatabaseError:
        """A failed write as people read it: a full disk said plainly, anything else as SQLite put it."""
        if "full" in str(exc):
            return DatabaseError(
                f"the disk holding {self.path} is full; nothing was written",
                fix="free some space (picoagent memory prune, old models) and try again",
            )
        return DatabaseError(f"database write failed: {exc}")

    def write(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        """Run one statement that changes something; returns the new row id (when it inserted one)."""
        with self._lock:
            try:
                cur = self._conn.execute(sql, params)
            except sqlite3.Error as exc:
                raise self.write_error(exc) from None
            return int(cur.lastrowid or 0)

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection under the lock, for reads that belong together; SQLite errors become DatabaseError."""
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise DatabaseError(f"database read failed: {exc}") from None

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Every row a query returns."""
        with self.reading() as conn:
            return conn.execute(sql, params).fetchall()

    def row(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        """The first row a query returns (None when there is none)."""
        with self.reading() as conn:
            found: tuple[Any, ...] | None = conn.execute(sql, params).fetchone()
            return found

    def value(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """The first column of the first row (None when there is no row): counts, sums, one setting."""
        found = self.row(sql, params)
        return None if found is None else found[0]

    @contextmanager
    def transaction(self, on_rollback: Callable[[], None] | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (BEGIN IMMEDIATE) so reads inside it stay true until it commits.

        Inside a transaction already open on this connection it is a savepoint. The block's end commits; any
        exception rolls back (``on_rollback`` is told first) and SQLite's errors become DatabaseError.
        """
        with self._lock:
            conn = self._conn
            nested = conn.in_transaction
            try:
                conn.execute("SAVEPOINT nested" if nested else "BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("RELEASE nested" if nested else "COMMIT")
                except BaseException:
                    if on_rollback is not None:
                        on_rollback()
                    if nested:
                        conn.execute("ROLLBACK TO nested")
                        conn.execute("RELEASE nested")
                    elif conn.in_transaction:  # SQLite may have rolled back already (a full disk does)
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise self.write_error(exc) from None

    # --- conversations ------------------------------------------------------------------------

    def conversation(self, channel: str, chat_id: str) -> int:
        """The open conversation of a chat, started when there is none."""
        with self._lock:
            row = self._conn.execute(
                "SELECT id FROM conversations WHERE channel = ? AND chat_id = ? AND closed_at IS NULL"
                " ORDER BY id DESC LIMIT 1",
                (channel, chat_id),
            ).fetchone()
            if row:
                return int(row[0])
            return self.write(
                "INSERT INTO conversations (channel, chat_id, created_at) VALUES (?, ?, ?)",
                (channel, chat_id, time.time()),
            )

    def reset(self, channel: str, chat_id: str) -> None:
        """Close the open conversation of a chat; the next message starts a new one."""
        self.write(
            "UPDATE conversations SET closed_at = ? WHERE channel = ? AND chat_id = ? AND closed_at IS NULL",
            (time.time(), channel, chat_id),
        )

    def forget_conversation(self, conversation_id: int) -> int:
        """Delete a conversation and its messages (its memories stay, no longer tied to it); how many messages
        went, or -1 when there is no such conversation."""
        with self.transaction() as conn:
            if conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is None:
                return -1
            gone = conn.execute("DELETE FROM messages WHERE conversation_id = ?", (conversation_id,)).rowcount
            conn.execute("DELETE FROM memory_progress WHERE conversation_id = ?", (conversation_id,))
            conn.execute("UPDATE memories SET conversation_id = NULL WHERE conversation_id = ?", (conversation_id,))
            conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        return int(gone)

    def conversations(self, limit: int = 50) -> list[dict[str, Any]]:
        """The newest conversations: id, channel, chat, when it began and ended, how many messages."""
        rows = self.rows(
            "SELECT c.id, c.channel, c.chat_id, c.created_at, c.closed_at, COUNT(m.id) FROM conversations c"
            " LEFT JOIN messages m ON m.conversation_id = c.id GROUP BY c.id ORDER BY c.id DESC LIMIT ?",
            (limit,),
        )
        keys = ("id", "channel", "chat_id", "created_at", "closed_at", "messages")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def conversation_channels(self, ids: Iterable[int]) -> dict[int, tuple[str, str]]:
        """The channel and chat of each of these conversations (those that still exist)."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        rows = self.rows(
            "SELECT id, channel, chat_id FROM conversations WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(wanted),),
        )
        return {int(i): (str(channel), str(chat)) for i, channel, chat in rows}

    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        *,
        route: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> int:
        """Append a message; it is durable when this returns."""
        return self.write(
            "INSERT INTO messages (conversation_id, role, content, created_at, route, meta) VALUES (?, ?, ?, ?, ?, ?)",
            (conversation_id, role, content, time.time(), route, json.dumps(meta) if meta else None),
        )

    def recent_messages(self, conversation_id: int, limit: int) -> list[StoredMessage]:
        """The last ``limit`` messages of a conversation, oldest first."""
        if limit <= 0:
            return []
        rows = self.rows(
            "SELECT id, role, content, created_at, route, meta FROM messages"
            " WHERE conversation_id = ? ORDER BY id DESC LIMIT ?",
            (conversation_id, limit),
        )
        return [StoredMessage(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]) if r[5] else {}) for r in reversed(rows)]

    def add_usage(
        self,
        route: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        provider: str = "local",
        cost_usd: float = 0.0,
        turns: int = 1,
    ) -> None:
        """Count one turn's use of one model for today (local time), by route, provider and model.

        ``turns``: 1 for the model that answered the turn, 0 for one that only tried (its tokens and cost
        still count), so that each turn is counted once, as ``routes`` counts it.
        """
        day = time.strftime("%Y-%m-%d")
        self.write(
            "INSERT INTO usage (day, route, provider, model, turns, prompt_tokens, completion_tokens, cost_usd)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (day, route, provider, model) DO UPDATE SET turns = turns + excluded.turns,"
            " prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
            " completion_tokens = completion_tokens + excluded.completion_tokens,"
            " cost_usd = cost_usd + excluded.cost_usd",
            (day, route, provider, model or "-", turns, prompt_tokens, completion_tokens, cost_usd),
        )

    def usage(self, days: int = 30) -> list[dict[str, Any]]:
        """Use by day, route, provider and model, newest first."""
        keys = ("day", "route", "provider", "model", "turns", "prompt_tokens", "completion_tokens", "cost_usd")
        rows = self.rows(
            f"SELECT {', '.join(keys)} FROM usage"
            " WHERE day >= date('now', 'localtime', ?) ORDER BY day DESC, provider, route, model",
            (f"-{days - 1} days",),
        )
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def spent_usd(self) -> tuple[float, float]:
        """What the cloud cost today and this month (local time)."""
        row = self.row(  # an aggregate: always one row
            "SELECT coalesce(sum(CASE WHEN day = date('now', 'localtime') THEN cost_usd END), 0),"
            " coalesce(sum(cost_usd), 0) FROM usage WHERE day >= date('now', 'localtime', 'start of month')"
        )
        return (float(row[0]), float(row[1])) if row else (0.0, 0.0)

    def add_route(self, route: str, why: str, blocked: str) -> None:
        """Count one routing decision for today."""
        self.write(
            "INSERT INTO routing_log (day, route, why, blocked, turns) VALUES (?, ?, ?, ?, 1)"
            " ON CONFLICT (day, route, why, blocked) DO UPDATE SET turns = turns + 1",
            (time.strftime("%Y-%m-%d"), route, why, blocked),
        )

    def routes(self, days: int = 30) -> list[dict[str, Any]]:
        """Routing decisions of the last ``days`` days, summed by route, why and blocked; most frequent first."""
        rows = self.rows(
            "SELECT route, why, blocked, sum(turns) FROM routing_log WHERE day >= date('now', 'localtime', ?)"
            " GROUP BY route, why, blocked ORDER BY sum(turns) DESC, route, why",
            (f"-{days - 1} days",),
        )
        return [{"route": r, "why": w, "blocked": b, "turns": int(n)} for r, w, b, n in rows]

    def set_private(self, channel: str, chat_id: str, private: bool) -> None:
        """Mark a chat local-only (its messages never leave the Pi), or lift that."""
        if private:
            self.write(
                "INSERT OR IGNORE INTO private_chats (channel, chat_id, since) VALUES (?, ?, ?)",
                (channel, chat_id, time.time()),
            )
        else:
            self.write("DELETE FROM private_chats WHERE channel = ? AND chat_id = ?", (channel, chat_id))

    def is_private(self, channel: str, chat_id: str) -> bool:
        """Whether a chat is local-only."""
        return self.value("SELECT 1 FROM private_chats WHERE channel = ? AND chat_id = ?", (channel, chat_id)) == 1

    def ping(self) -> bool:
        """Whether the database answers a trivial query (the health check)."""
        with self._lock:
            try:
                return self._conn.execute("SELECT 1").fetchone() == (1,)
            except sqlite3.Error:
                return False

    def integrity(self) -> str:
        """SQLite's quick_check result: "ok" when the file is sound."""
        return str(self.value("PRAGMA quick_check"))


def _load_vec(conn: sqlite3.Connection) -> bool:
    """Load sqlite-vec into a connection; False (memory search by keyword only) when it cannot be."""
    try:
        # The extension's own path, without importing the sqlite_vec package (it imports numpy: ~10 MB).
        spec = importlib.util.find_spec("sqlite_vec")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("the sqlite-vec package is not installed")
        conn.enable_load_extension(True)
        conn.load_extension(str(Path(spec.submodule_search_locations[0]) / "vec0"))
        conn.enable_load_extension(False)
    except (ImportError, AttributeError, sqlite3.Error) as exc:
        log.warning("sqlite-vec is not available (%s): memory search falls back to keywords", exc)
        return False
    return True


def can_load_extensions() -> bool:
    """Whether this interpreter's sqlite3 can load extensions (sqlite-vec needs it)."""
    return hasattr(sqlite3.connect(":memory:"), "enable_load_extension")
