"""The memory store's tables, and the counters that keep every process's view of them true.

The database's migrations (``memory/migrations.py``) make ``memories`` and its FTS5 index (migration 5),
``memory_meta`` (the vectors' model and width, whether they are being rebuilt, and two counters) and
``memory_keys`` (a dedupe hash per memory, :func:`dedupe_key`) (migration 10). Triggers bump the
counters on every write to ``memories``, by any process: a store reads one row to know whether its
in-process index is still true (an edit in place, :func:`replace_text`, counts as a deletion: the id stays, its
vector does not). The store itself makes only the vec0 tables, ``memory_vec`` (unit float
vectors) and ``memory_bits`` (their sign bits), with sqlite-vec and once it knows the model's width.
"""

from __future__ import annotations

import hashlib
import sqlite3
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def create_vector_tables(conn: sqlite3.Connection, model: str, dimensions: int) -> None:
    """The vec0 tables for vectors of this width; the model is recorded when none was."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS memory_vec USING vec0(embedding float[{dimensions}])")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS memory_bits USING vec0(embedding bit[{dimensions}])")
    if get_meta(conn, "model") is None:
        set_meta(conn, model=model, dimensions=dimensions, vectors="ready")


def write_vector(conn: sqlite3.Connection, memory_id: int, vector: np.ndarray) -> None:
    """A memory's unit vector into memory_vec and its sign bits into memory_bits (both must be free of it)."""
    blob = vector.tobytes()
    conn.execute("INSERT INTO memory_vec (rowid, embedding) VALUES (?, ?)", (memory_id, blob))
    conn.execute("INSERT INTO memory_bits (rowid, embedding) VALUES (?, vec_quantize_binary(?))", (memory_id, blob))


def replace_text(
    conn: sqlite3.Connection, memory_id: int, text: str, key: bytes, vector: np.ndarray | None, embedded_with: str
) -> bool:
    """A memory's text changed in place: its FTS row (by trigger), dedupe key and vectors follow; False when
    there is no such memory. The deletions counter is bumped as for a delete: another process's in-memory index
    holds this id's old vector and learns only from that counter that an id it holds has changed."""
    done = conn.execute(
        "UPDATE memories SET text = ?, embedded_with = ? WHERE id = ?",
        (text, embedded_with if vector is not None else None, memory_id),
    ).rowcount
    if not done:
        return False
    conn.execute("DELETE FROM memory_keys WHERE id = ?", (memory_id,))
    conn.execute("INSERT OR REPLACE INTO memory_keys (key, id) VALUES (?, ?)", (key, memory_id))
    if table_exists(conn, "memory_vec"):
        delete_vectors(conn, [memory_id])
        if vector is not None:
            write_vector(conn, memory_id, vector)
    conn.execute("UPDATE memory_meta SET value = value + 1 WHERE key = 'deletions'")
    return True


def delete_vectors(conn: sqlite3.Connection, ids: Sequence[int]) -> None:
    """Delete these memories' vectors (from the vec0 tables that exist)."""
    for table in ("memory_vec", "memory_bits"):
        if table_exists(conn, table):
            conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", ((i,) for i in ids))


def vec_available(conn: sqlite3.Connection) -> bool:
    """Whether sqlite-vec is loaded in this connection (without it, memory is searched by keyword only)."""
    try:
        conn.execute("SELECT vec_version()")
    except sqlite3.OperationalError:
        return False
    return True


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


def known_keys(conn: sqlite3.Connection, keys: list[bytes]) -> dict[bytes, int]:
    """Of these dedupe keys, the ones already stored, with their memory ids."""
    known: dict[bytes, int] = {}
    for key in set(keys):
        row = conn.execute(
            "SELECT k.id FROM memory_keys k JOIN memories m ON m.id = k.id WHERE k.key = ?", (key,)
        ).fetchone()
        if row is not None:
            known[key] = row[0]
    return known


__all__ = [
    "create_vector_tables",
    "dedupe_key",
    "delete_vectors",
    "get_meta",
    "known_keys",
    "replace_text",
    "set_meta",
    "table_exists",
    "vec_available",
    "write_vector",
]
