"""Re-embedding: every memory's vector from the configured model, in batches, resumable.

After a model change (:func:`start_over`) the vec0 tables are made again for the new width and
``memory_meta`` says ``vectors = reembedding``: every store, in every process, searches by keyword
only until the run has finished. Otherwise only the memories stored without a vector (while the
model failed) are embedded, and searches go on meanwhile. Embedding is slow, so
:func:`embed_pending` embeds outside the database lock, a batch at a time, and writes each batch in
a transaction of its own: a memory deleted or rewritten meanwhile is skipped, and an interrupted
run resumes where it stopped (``memories.embedded_with`` says which memories are done).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from appliance.memory.db import Database
from appliance.memory.schema import create_vector_tables, delete_vectors, get_meta, set_meta, write_vector

if TYPE_CHECKING:
    import numpy as np


def start_over(conn: sqlite3.Connection, model_name: str, dimensions: int) -> bool:
    """In a write transaction: when the stored vectors are another model's, drop them all (True)."""
    if (get_meta(conn, "model"), int(get_meta(conn, "dimensions") or 0)) == (model_name, dimensions):
        return False
    # A new model: new tables (the width may differ); searches use keywords until all are done.
    conn.execute("DROP TABLE IF EXISTS memory_vec")
    conn.execute("DROP TABLE IF EXISTS memory_bits")
    conn.execute("DELETE FROM memory_meta WHERE key IN ('model', 'dimensions')")
    create_vector_tables(conn, model_name, dimensions)
    set_meta(conn, vectors="reembedding")
    return True


def embed_pending(
    db: Database,
    transaction: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]],
    embed_texts: Callable[[list[str]], list[np.ndarray]],
    key: str,
    batch: int,
) -> int:
    """Embed, ``batch`` at a time, every memory whose vector is not ``key``'s; how many were embedded."""
    done = last_id = 0
    while True:
        with db.reading() as conn:
            rows = conn.execute(
                "SELECT id, text FROM memories WHERE id > ? AND (embedded_with IS NULL OR embedded_with != ?)"
                " ORDER BY id LIMIT ?",
                (last_id, key, batch),
            ).fetchall()
        if not rows:
            return done
        vectors = embed_texts([r[1] for r in rows])  # outside the lock
        with transaction() as conn:
            for (memory_id, text), vector in zip(rows, vectors, strict=True):
                updated = conn.execute(
                    "UPDATE memories SET embedded_with = ? WHERE id = ? AND text = ?", (key, memory_id, text)
                ).rowcount
                if not updated:
                    continue  # deleted (or rewritten) meanwhile
                delete_vectors(conn, [memory_id])
                write_vector(conn, memory_id, vector)
                done += 1
        last_id = rows[-1][0]


__all__ = ["embed_pending", "start_over"]
