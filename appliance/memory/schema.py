"""The memory store's own tables, and the counters that keep every process's view of them true.

``memories`` and its FTS5 index come from the database's migrations (``memory/db.py``). The store adds
``memory_meta`` (the vectors' model and width, whether they are being rebuilt, and two counters),
``memory_keys`` (a dedupe hash per memory) and, with sqlite-vec, the vec0 tables ``memory_vec`` (unit
float vectors) and ``memory_bits`` (their sign bits). Triggers bump the counters on every write to
``memories``, by any process: a store reads one row to know whether its in-process index is still true.
"""

from __future__ import annotations

import hashlib
import sqlite3
import unicodedata

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS memory_meta (key TEXT PRIMARY KEY, value)",
    # Dedupe: a hash of each memory's kind and normalised text.
    "CREATE TABLE IF NOT EXISTS memory_keys (key BLOB PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS memory_keys_id ON memory_keys (id)",
    "CREATE TRIGGER IF NOT EXISTS memory_keys_ad AFTER DELETE ON memories BEGIN"
    " DELETE FROM memory_keys WHERE id = old.id; END",
    "CREATE INDEX IF NOT EXISTS memories_embedded_with ON memories (embedded_with)",
    # Any write to memories, by anyone, bumps the generation: a store sees at once whether its
    # in-process index is still true (one primary-key read per search).
    *(
        f"CREATE TRIGGER IF NOT EXISTS memories_generation_{name} AFTER {event} ON memories BEGIN"
        f" UPDATE memory_meta SET value = value + 1 WHERE key IN ({keys}); END"
        for name, event, keys in (
            ("ai", "INSERT", "'generation'"),
            ("ad", "DELETE", "'generation', 'deletions'"),
            ("au", "UPDATE", "'generation'"),
        )
    ),
]


def ensure_tables(conn: sqlite3.Connection) -> None:
    """The store's tables, triggers and indexes (the vec0 tables aside); each created only when missing."""
    had_keys = table_exists(conn, "memory_keys")
    for sql in SCHEMA:
        conn.execute(sql)
    conn.execute("INSERT OR IGNORE INTO memory_meta (key, value) VALUES ('generation', 0), ('deletions', 0)")
    if not had_keys:  # memories written before the store existed get their dedupe keys once
        rows = conn.execute("SELECT id, kind, text FROM memories").fetchall()
        conn.executemany(
            "INSERT OR IGNORE INTO memory_keys (key, id) VALUES (?, ?)", ((dedupe_key(k, t), i) for i, k, t in rows)
        )


def create_vector_tables(conn: sqlite3.Connection, model: str, dimensions: int) -> None:
    """The vec0 tables for vectors of this width; the model is recorded when none was."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS memory_vec USING vec0(embedding float[{dimensions}])")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS memory_bits USING vec0(embedding bit[{dimensions}])")
    if get_meta(conn, "model") is None:
        set_meta(conn, model=model, dimensions=dimensions, vectors="ready")


def table_exists(conn: sqlite3.Connection, name: str) -> bool:
    """Whether a table, index or trigger of this name exists."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    """One value of memory_meta, as text (None when unset)."""
    row = conn.execute("SELECT value FROM memory_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def set_meta(conn: sqlite3.Connection, **values: object) -> None:
    """Set values of memory_meta and bump the generation, so every store resyncs its state."""
    for key, value in values.items():
        conn.execute("INSERT OR REPLACE INTO memory_meta (key, value) VALUES (?, ?)", (key, value))
    conn.execute("UPDATE memory_meta SET value = value + 1 WHERE key = 'generation'")


def _normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


def dedupe_key(kind: str, text: str) -> bytes:
    """The dedupe key: identical texts, case and spacing aside, of the same kind."""
    return hashlib.sha256(f"{kind}\0{_normalise(text)}".encode()).digest()[:16]


__all__ = [
    "SCHEMA",
    "create_vector_tables",
    "dedupe_key",
    "ensure_tables",
    "get_meta",
    "set_meta",
    "table_exists",
]
