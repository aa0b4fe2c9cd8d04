"""Long-term memory: facts and summaries in SQLite, recalled by meaning and by keyword.

A memory is a row of ``memories`` (its FTS5 index kept in sync by triggers) and, when an embedding
model is configured, two vectors written in the same transaction: the unit float vector in the vec0
table ``memory_vec`` and its sign bits in ``memory_bits``. A search runs a vector leg and a keyword
leg (FTS5 bm25) and merges them by Reciprocal Rank Fusion.

The vector leg is a binary first pass (Hamming distance over the sign bits picks ``10·k``
candidates) re-ranked by exact cosine on the float vectors. vec0 tables are brute-force scans and a
vec0 read by rowid costs ~0.3 ms, so on 100,000 memories vec0 alone takes ~15 ms for the bit pass
and ~60 ms more to re-rank 100 candidates (``tests/bench/memory.py`` measures it). A process that
searches often (the daemon) therefore keeps a copy of the vectors in numpy (:class:`_VectorIndex`,
1.6 KB per memory at 384 dims), where the same two passes take under 1 ms; ``vector_cache=False``
runs them in SQL instead, for one-shot processes (the CLI) that would otherwise read every vector.

The vectors belong to one model and width, recorded in ``memory_meta``. When the configuration
names another, the vectors are stale: searches use keywords only (and say so in their results)
until :meth:`MemoryStore.reembed` has rebuilt them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np
else:

    class _LazyNumpy:
        """numpy on first use: an idle daemon that has not searched yet stays small (numpy is ~15 MB)."""

        def __getattr__(self, name: str) -> Any:
            import numpy

            globals()["np"] = numpy
            return getattr(numpy, name)

    np = _LazyNumpy()

from appliance.errors import ModelError, PicoagentError, UsageError
from appliance.fileio import write_atomic
from appliance.memory.db import Database

log = logging.getLogger(__name__)

Embed = Callable[[list[str]], list[list[float]]]
KINDS = ("fact", "summary")
RRF_K = 60  # Reciprocal Rank Fusion's constant, as in Cormack et al.; it damps the weight of the top ranks
_KIND_CODES = {"fact": 0, "summary": 1}
_DAY = 86_400.0
_MEMORY_COLUMNS = "id, kind, text, source, created_at, importance, conversation_id, embedded_with"


@dataclass(frozen=True)
class Memory:
    """One remembered fact or conversation summary."""

    id: int
    kind: str
    text: str
    source: str
    created_at: float
    importance: float
    conversation_id: int | None
    embedded_with: str | None


@dataclass(frozen=True)
class NewMemory:
    """A memory to store with :meth:`MemoryStore.add_many`."""

    text: str
    source: str
    kind: str = "fact"
    importance: float = 0.5
    conversation_id: int | None = None
    created_at: float | None = None  # None: now (imports may keep their own dates)


@dataclass(frozen=True)
class Hit:
    """A memory found by a search, with how it was found."""

    memory: Memory
    score: float  # fused RRF score, times the time decay when there is one
    matched_by: frozenset[str]  # "vector", "keyword" or both
    vector_rank: int | None = None
    keyword_rank: int | None = None
    distance: float | None = None  # cosine distance to the query (0: same direction)


class SearchResults(list[Hit]):
    """A search's hits, best first, and how the search ran.

    ``mode`` is "hybrid", or "keyword" when vectors could not be used; ``note`` then says why.
    ``vector_ids`` and ``keyword_ids`` are each leg's own ranking, before fusion.
    """

    def __init__(
        self,
        hits: Iterable[Hit] = (),
        *,
        mode: Literal["hybrid", "keyword"] = "hybrid",
        note: str = "",
        vector_ids: Sequence[int] = (),
        keyword_ids: Sequence[int] = (),
    ) -> None:
        super().__init__(hits)
        self.mode = mode
        self.note = note
        self.vector_ids = list(vector_ids)
        self.keyword_ids = list(keyword_ids)


@dataclass(frozen=True)
class MemoryStatus:
    """How many memories there are and whether their vectors can be searched."""

    memories: int
    vectors: Literal["ready", "stale", "reembedding", "off"]
    model: str  # the configured embedding model
    dimensions: int
    recorded_model: str | None  # the model the stored vectors came from
    recorded_dimensions: int | None
    pending: int  # memories without a vector from the configured model
    note: str


class MemoryStore:
    """Facts and summaries in the appliance database, searchable by meaning and by keyword.

    Every method blocks and is thread-safe through the database lock; async code calls them with
    ``db.call``. Writing or re-embedding embeds first, outside the lock, since embedding is slow.
    """

    EXACT_SEARCH_BELOW = 4096  # fewer vectors than this: exact cosine over all of them (cheaper than two passes)
    OVERSAMPLE = 10  # the binary first pass keeps k x this many candidates for exact re-ranking
    RANK_BUDGET = 1000  # at most this many keyword matches are ranked by bm25 (~2 µs each)

    def __init__(
        self,
        db: Database,
        embed: Embed | None,
        *,
        model_name: str,
        dimensions: int,
        clock: Callable[[], float] = time.time,
        vector_cache: bool = True,
    ) -> None:
        if embed is not None and (dimensions < 8 or dimensions % 8):
            raise UsageError(
                f"memory: an embedding width of {dimensions} cannot be stored",
                fix="sqlite-vec's bit vectors need a width divisible by 8 (most models have 384, 768 or 1024)",
            )
        self._db = db
        self._embed = embed
        self.model_name = model_name
        self.dimensions = dimensions
        self.clock = clock
        self.vector_cache = vector_cache
        self.key = f"{model_name}@{dimensions}"  # the memories.embedded_with of an up-to-date vector
        self._recorded: tuple[str, int] | None = None
        self._state: Literal["ready", "stale", "reembedding", "off"] = "off"
        self._generation = -1  # memory_meta's generation when the state and the index were last synced
        self._deletions = -1  # and its count of deletions
        self._index: _VectorIndex | None = None
        self._reembed_lock = threading.Lock()
        with self._transaction() as conn:
            self._vec = _has_vec(conn)
            self._ensure_schema(conn)
        with self._db.reading() as conn:
            self._sync(conn)

    # --- schema and state ---------------------------------------------------------------------

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        """The store's own tables, triggers and index; each created only when missing."""
        had_keys = _exists(conn, "memory_keys")
        for sql in _SCHEMA:
            conn.execute(sql)
        conn.execute("INSERT OR IGNORE INTO memory_meta (key, value) VALUES ('generation', 0), ('deletions', 0)")
        if not had_keys:  # memories written before the store existed get their dedupe keys once
            rows = conn.execute("SELECT id, kind, text FROM memories").fetchall()
            conn.executemany(
                "INSERT OR IGNORE INTO memory_keys (key, id) VALUES (?, ?)", ((_key(k, t), i) for i, k, t in rows)
            )
        if not self._vec or self._embed is None:
            return
        model, dims = _meta(conn, "model"), _meta(conn, "dimensions")
        if model is None:
            self._create_vector_tables(conn)
        elif (model, int(dims or 0)) == (self.model_name, self.dimensions):
            self._create_vector_tables(conn)  # a no-op unless someone dropped them

    def _create_vector_tables(self, conn: sqlite3.Connection) -> None:
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS memory_vec USING vec0(embedding float[{self.dimensions}])")
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS memory_bits USING vec0(embedding bit[{self.dimensions}])")
        if _meta(conn, "model") is None:
            _set_meta(conn, model=self.model_name, dimensions=self.dimensions, vectors="ready")

    def _sync(self, conn: sqlite3.Connection) -> None:
        """Catch up with writes by others (another process, another store): state, then the vector index."""
        generation = int(_meta(conn, "generation") or 0)
        if generation == self._generation:
            return
        model, dims, vectors = _meta(conn, "model"), _meta(conn, "dimensions"), _meta(conn, "vectors")
        self._recorded = (model, int(dims or 0)) if model is not None else None
        previous = self._state
        if not self._vec or self._embed is None:
            self._state = "off"
        elif self._recorded != (self.model_name, self.dimensions):
            self._state = "stale"
        else:
            self._state = "reembedding" if vectors == "reembedding" else "ready"
        if self._state != previous and self._state in ("stale", "reembedding"):
            log.info("memory vectors %s: %s", self._state, self._vector_note())
        deletions = int(_meta(conn, "deletions") or 0)
        if self._state != "ready" or deletions != self._deletions:
            # SQLite hands a deleted top id out again: after others deleted, an id held may be another memory's.
            self._index = None
        elif self._index is not None:
            self._reconcile(conn)
        self._generation, self._deletions = generation, deletions

    def _reconcile(self, conn: sqlite3.Connection) -> None:
        """Bring the in-process index in line with the database after someone else wrote to it."""
        assert self._index is not None
        rows = conn.execute("SELECT id, kind FROM memories WHERE embedded_with = ? ORDER BY id", (self.key,)).fetchall()
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        kinds = np.fromiter((_KIND_CODES[r[1]] for r in rows), np.uint8, len(rows))
        index = self._index
        added = np.setdiff1d(ids, index.ids, assume_unique=True)
        if len(added) > 256:
            self._index = None  # many new vectors: one scan on the next search beats many vec0 reads
            return
        index.remove(np.setdiff1d(index.ids, ids, assume_unique=True))
        vectors = []
        found = []
        for memory_id in added.tolist():
            row = conn.execute("SELECT embedding FROM memory_vec WHERE rowid = ?", (memory_id,)).fetchone()
            if row is not None:
                found.append(memory_id)
                vectors.append(np.frombuffer(row[0], np.float32))
        if found:
            index.add(np.array(found, np.int64), np.zeros(len(found), np.uint8), np.stack(vectors))
        index.set_kinds(ids, kinds)

    def _load_index(self, conn: sqlite3.Connection) -> _VectorIndex:
        """Read every current vector into a new in-process index (one scan of memory_vec)."""
        started = time.perf_counter()
        kinds = dict(conn.execute("SELECT id, kind FROM memories WHERE embedded_with = ?", (self.key,)).fetchall())
        index = _VectorIndex(self.dimensions, capacity=len(kinds) + 1024)
        rows = conn.execute("SELECT rowid, embedding FROM memory_vec")
        index.load((i, _KIND_CODES[kinds[i]], blob) for i, blob in rows if i in kinds)
        log.info("memory: %d vectors loaded for search in %.2f s", index.size, time.perf_counter() - started)
        return index

    def _vector_note(self) -> str:
        if not self._vec:
            return "sqlite-vec is not available: keyword search only"
        if self._embed is None:
            return "no embedding model: keyword search only"
        if self._state == "stale":
            was = f"{self._recorded[0]} ({self._recorded[1]} dims)" if self._recorded else "another model"
            return (
                f"the stored vectors come from {was}, not the configured {self.model_name} ({self.dimensions} dims): "
                "keyword search only until they are re-embedded"
            )
        if self._state == "reembedding":
            return f"memories are being re-embedded with {self.model_name}: keyword search only until that is done"
        return ""

    def status(self) -> MemoryStatus:
        """Counts and the state of the vectors (the daemon re-embeds in the background when needed)."""
        with self._db.reading() as conn:
            self._sync(conn)
            total = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
            pending = conn.execute(
                "SELECT count(*) FROM memories WHERE embedded_with IS NULL OR embedded_with != ?", (self.key,)
            ).fetchone()[0]
        recorded = self._recorded
        return MemoryStatus(
            memories=total,
            vectors=self._state,
            model=self.model_name,
            dimensions=self.dimensions,
            recorded_model=recorded[0] if recorded else None,
            recorded_dimensions=recorded[1] if recorded else None,
            pending=pending if self._state != "off" else 0,
            note=self._vector_note(),
        )

    def needs_reembed(self) -> bool:
        """Whether :meth:`reembed` has work: stale vectors, an unfinished run, or memories without a vector."""
        status = self.status()
        return status.vectors != "off" and (status.vectors != "ready" or status.pending > 0)

    # --- writing ------------------------------------------------------------------------------

    def add(
        self,
        text: str,
        *,
        kind: str = "fact",
        source: str,
        importance: float = 0.5,
        conversation_id: int | None = None,
    ) -> Memory:
        """Remember a text; it is durable when this returns. An identical text (case and spacing aside) is kept once."""
        return self.add_many([NewMemory(text, source, kind, importance, conversation_id)])[0]

    def add_many(self, items: Iterable[NewMemory], *, batch: int = 500) -> list[Memory]:
        """Remember many texts, ``batch`` per transaction; the stored (or already known) memory for each, in order."""
        if batch < 1:
            raise UsageError(f"memory: a batch of {batch} memories is not a batch")
        pending = list(items)
        for item in pending:
            _check_new(item)
        stored: list[Memory] = []
        for start in range(0, len(pending), batch):
            stored.extend(self._add_batch(pending[start : start + batch]))
        return stored

    def _add_batch(self, items: list[NewMemory]) -> list[Memory]:
        keys = [_key(item.kind, item.text) for item in items]
        with self._db.reading() as conn:
            self._sync(conn)
            known = self._known(conn, keys)
            embedding = self._state in ("ready", "reembedding")
        # Embed outside the lock (it is slow), and only texts not already stored (nor twice in this batch).
        first: dict[bytes, int] = {}
        for i, key in enumerate(keys):
            if key not in known:
                first.setdefault(key, i)
        fresh = sorted(first.values())
        vectors: dict[int, np.ndarray] = {}
        if embedding and fresh:
            try:
                embedded = self._embed_texts([items[i].text.strip() for i in fresh])
                vectors = dict(zip(fresh, embedded, strict=True))
            except PicoagentError as exc:  # kept without a vector: keyword search finds it, reembed() mends it
                log.warning("memory: stored %d text(s) without vectors: %s", len(fresh), exc.message)
        now = self.clock()
        added: list[tuple[int, int, np.ndarray]] = []
        with self._transaction() as conn:
            generation = int(_meta(conn, "generation") or 0)
            in_sync = generation == self._generation
            # The model may have changed since the texts were embedded (another process re-embedding).
            recorded = (_meta(conn, "model"), int(_meta(conn, "dimensions") or 0))
            current = recorded == (self.model_name, self.dimensions)
            known = self._known(conn, keys)
            for i, (item, key) in enumerate(zip(items, keys, strict=True)):
                if key in known:
                    continue
                vector = vectors.get(i) if current else None
                cur = conn.execute(
                    "INSERT INTO memories (kind, text, source, created_at, importance, conversation_id, embedded_with)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        item.kind,
                        item.text.strip(),
                        item.source,
                        now if item.created_at is None else item.created_at,
                        float(item.importance),
                        item.conversation_id,
                        self.key if vector is not None else None,
                    ),
                )
                memory_id = int(cur.lastrowid or 0)
                conn.execute("INSERT OR REPLACE INTO memory_keys (key, id) VALUES (?, ?)", (key, memory_id))
                known[key] = memory_id
                if vector is not None:
                    blob = vector.tobytes()
                    conn.execute("INSERT INTO memory_vec (rowid, embedding) VALUES (?, ?)", (memory_id, blob))
                    conn.execute(
                        "INSERT INTO memory_bits (rowid, embedding) VALUES (?, vec_quantize_binary(?))",
                        (memory_id, blob),
                    )
                    added.append((memory_id, _KIND_CODES[item.kind], vector))
            rows = self._fetch(conn, list(set(known[key] for key in keys)))
            if in_sync:
                self._generation = int(_meta(conn, "generation") or 0)
                if self._index is not None and added:
                    self._index.add(
                        np.array([a[0] for a in added], np.int64),
                        np.array([a[1] for a in added], np.uint8),
                        np.stack([a[2] for a in added]),
                    )
        return [rows[known[key]] for key in keys]

    def _known(self, conn: sqlite3.Connection, keys: list[bytes]) -> dict[bytes, int]:
        """Of these dedupe keys, the ones already stored, with their memory ids."""
        known: dict[bytes, int] = {}
        for key in set(keys):
            row = conn.execute(
                "SELECT k.id FROM memory_keys k JOIN memories m ON m.id = k.id WHERE k.key = ?", (key,)
            ).fetchone()
            if row is not None:
                known[key] = row[0]
        return known

    def _embed_texts(self, texts: list[str]) -> list[np.ndarray]:
        """Unit float32 vectors for texts; ModelError when the model fails or gives the wrong width."""
        assert self._embed is not None
        try:
            raw = self._embed(texts)
            matrix = np.asarray(raw, dtype=np.float32)
        except PicoagentError:
            raise
        except Exception as exc:  # an embedder is third-party code: any failure is the model's
            raise ModelError(f"the embedding model {self.model_name} failed: {exc}") from None
        if matrix.ndim != 2 or matrix.shape != (len(texts), self.dimensions):
            raise ModelError(
                f"the embedding model {self.model_name} gave vectors of shape {matrix.shape}, "
                f"memory expects {len(texts)} x {self.dimensions}",
                fix="set the memory dimensions to the model's embedding width",
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        # Unit length: then L2 and cosine rank alike, in vec0 (L2) as in numpy (dot products).
        matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
        return list(matrix)

    def forget(self, memory_id: int) -> bool:
        """Delete one memory and its vectors; False when there was none with that id."""
        return self._delete([memory_id]) == 1

    def prune(self, older_than_days: float, kinds: Sequence[str] = ("fact",)) -> int:
        """Delete memories of these kinds older than so many days; how many went."""
        if older_than_days < 0:
            raise UsageError(f"memory prune: {older_than_days} days is not an age", fix="give 0 or more days")
        _check_kinds(kinds)
        cutoff = self.clock() - older_than_days * _DAY
        with self._db.reading() as conn:
            ids = [
                r[0]
                for r in conn.execute(
                    f"SELECT id FROM memories WHERE created_at < ? AND kind IN ({_marks(kinds)})", (cutoff, *kinds)
                )
            ]
        deleted = self._delete(ids)
        if deleted:
            log.info("memory: pruned %d memories older than %g days", deleted, older_than_days)
        return deleted

    def _delete(self, ids: list[int]) -> int:
        if not ids:
            return 0
        with self._transaction() as conn:
            in_sync = int(_meta(conn, "generation") or 0) == self._generation
            deleted = 0
            for memory_id in ids:
                deleted += conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,)).rowcount
            for table in ("memory_vec", "memory_bits"):
                if self._vec and _exists(conn, table):
                    conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", ((i,) for i in ids))
            if in_sync:
                self._generation = int(_meta(conn, "generation") or 0)
                self._deletions = int(_meta(conn, "deletions") or 0)
                if self._index is not None:
                    self._index.remove(np.array(ids, np.int64))
        return deleted

    def reembed(self, batch: int = 64) -> int:
        """Give every memory a vector from the configured model; how many were embedded.

        After a model change it rebuilds all vectors, and searches use keywords only until it is done;
        otherwise it embeds the memories stored without one. Slow: it embeds outside the lock, between
        batches, so run it in a thread of its own rather than through ``db.call``. Interrupted, it
        resumes where it stopped.
        """
        if self._embed is None or not self._vec:
            raise ModelError(
                f"cannot re-embed memories: {self._vector_note()}",
                fix="configure memory.embedding_model (and install sqlite-vec) first",
            )
        if not self._reembed_lock.acquire(blocking=False):
            return 0  # another thread of this process is at it
        try:
            return self._reembed(batch)
        finally:
            self._reembed_lock.release()

    def _reembed(self, batch: int) -> int:
        with self._transaction() as conn:
            if (_meta(conn, "model"), int(_meta(conn, "dimensions") or 0)) != (self.model_name, self.dimensions):
                # A new model: new tables (the width may differ); searches use keywords until all are done.
                conn.execute("DROP TABLE IF EXISTS memory_vec")
                conn.execute("DROP TABLE IF EXISTS memory_bits")
                conn.execute("DELETE FROM memory_meta WHERE key IN ('model', 'dimensions')")
                self._create_vector_tables(conn)
                _set_meta(conn, vectors="reembedding")
                log.info("memory: re-embedding every memory with %s (%d dims)", self.model_name, self.dimensions)
            # Otherwise only memories without a vector (stored while the model failed): searches go on meanwhile.
        done = last_id = 0
        while True:
            with self._db.reading() as conn:
                rows = conn.execute(
                    "SELECT id, text FROM memories WHERE id > ? AND (embedded_with IS NULL OR embedded_with != ?)"
                    " ORDER BY id LIMIT ?",
                    (last_id, self.key, batch),
                ).fetchall()
            if not rows:
                break
            vectors = self._embed_texts([r[1] for r in rows])  # outside the lock
            with self._transaction() as conn:
                for (memory_id, text), vector in zip(rows, vectors, strict=True):
                    updated = conn.execute(
                        "UPDATE memories SET embedded_with = ? WHERE id = ? AND text = ?", (self.key, memory_id, text)
                    ).rowcount
                    if not updated:
                        continue  # deleted (or rewritten) meanwhile
                    blob = vector.tobytes()
                    for table in ("memory_vec", "memory_bits"):
                        conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (memory_id,))
                    conn.execute("INSERT INTO memory_vec (rowid, embedding) VALUES (?, ?)", (memory_id, blob))
                    conn.execute(
                        "INSERT INTO memory_bits (rowid, embedding) VALUES (?, vec_quantize_binary(?))",
                        (memory_id, blob),
                    )
                    done += 1
            last_id = rows[-1][0]
        with self._transaction() as conn:
            _set_meta(conn, vectors="ready")
        with self._db.reading() as conn:
            self._sync(conn)
        log.info("memory: %d memories re-embedded with %s", done, self.model_name)
        return done

    # --- reading ------------------------------------------------------------------------------

    def count(self, kinds: Sequence[str] | None = None) -> int:
        """How many memories there are (of these kinds)."""
        with self._db.reading() as conn:
            if kinds is None:
                return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
            _check_kinds(kinds)
            sql = f"SELECT count(*) FROM memories WHERE kind IN ({_marks(kinds)})"
            return int(conn.execute(sql, tuple(kinds)).fetchone()[0])

    def get(self, memory_id: int) -> Memory | None:
        """One memory by id."""
        with self._db.reading() as conn:
            return self._fetch(conn, [memory_id]).get(memory_id)

    def search(
        self, query: str, k: int = 10, *, kinds: Sequence[str] | None = None, decay_half_life_days: float = 0
    ) -> SearchResults:
        """The ``k`` memories closest to a query by meaning and by keyword, best first.

        Older memories rank lower when ``decay_half_life_days`` is above 0 (the score halves every so
        many days). Never raises on odd query text: it is quoted for FTS5 term by term.
        """
        if k < 1:
            raise UsageError(f"memory search: k must be at least 1, not {k}")
        if kinds is not None:
            _check_kinds(kinds)
        if decay_half_life_days < 0:
            raise UsageError(f"memory search: a half-life of {decay_half_life_days} days is not a time span")
        depth = max(2 * k, 20)  # each leg's ranking is cut here before fusion
        query_vector: np.ndarray | None = None
        note = ""
        if self._state == "ready" and query.strip():
            try:
                query_vector = self._embed_texts([query])[0]  # outside the lock
            except PicoagentError as exc:
                note = f"the query could not be embedded ({exc.message}): keyword search only"
        with self._db.reading() as conn:
            self._sync(conn)
            vector_hits: list[tuple[int, float]] = []
            used_vectors = self._state == "ready" and query_vector is not None
            if self._state != "ready":
                note = self._vector_note()
            elif query_vector is not None:
                vector_hits = self._nearest(conn, query_vector, depth, kinds)
            keyword_ids = self._keyword(conn, query, depth, kinds)
            vector_rank = {memory_id: rank for rank, (memory_id, _) in enumerate(vector_hits, 1)}
            keyword_rank = {memory_id: rank for rank, memory_id in enumerate(keyword_ids, 1)}
            fused: dict[int, float] = {}
            for ranks in (vector_rank, keyword_rank):
                for memory_id, rank in ranks.items():
                    fused[memory_id] = fused.get(memory_id, 0.0) + 1.0 / (RRF_K + rank)
            order = sorted(fused, key=lambda i: (-fused[i], -i))
            # Without decay this order is final: read only the rows returned (all, if some have gone).
            wanted = order if decay_half_life_days > 0 else order[:k]
            rows = self._fetch(conn, wanted)
            if len(rows) < len(wanted):
                rows = self._fetch(conn, order)
        distance = dict(vector_hits)
        now = self.clock()
        hits = []
        for memory_id in order:
            memory = rows.get(memory_id)
            if memory is None or (kinds is not None and memory.kind not in kinds):
                continue  # deleted meanwhile (by another process), or of a kind not asked for
            score = fused[memory_id]
            if decay_half_life_days > 0:
                age_days = max(0.0, now - memory.created_at) / _DAY
                score *= 0.5 ** (age_days / decay_half_life_days)
            matched = frozenset(n for n, r in (("vector", vector_rank), ("keyword", keyword_rank)) if memory_id in r)
            rank_v, rank_k = vector_rank.get(memory_id), keyword_rank.get(memory_id)
            hits.append(Hit(memory, score, matched, rank_v, rank_k, distance.get(memory_id)))
        hits.sort(key=lambda h: (-h.score, -h.memory.id))
        return SearchResults(
            hits[:k],
            mode="hybrid" if used_vectors else "keyword",
            note=note,
            vector_ids=[i for i, _ in vector_hits],
            keyword_ids=keyword_ids,
        )

    def preload(self) -> None:
        """Read the vectors into this process now (else the first search does: ~0.1 s per 10,000 memories)."""
        with self._db.reading() as conn:
            self._sync(conn)
            if self._state == "ready" and self.vector_cache and self._index is None:
                self._index = self._load_index(conn)

    def _nearest(
        self, conn: sqlite3.Connection, query: np.ndarray, depth: int, kinds: Sequence[str] | None
    ) -> list[tuple[int, float]]:
        candidates = max(depth, self.OVERSAMPLE * depth // 2)  # 10·k for the usual depth of 2·k
        if not self.vector_cache:
            return self._nearest_sql(conn, query, depth, candidates, kinds)
        if self._index is None:
            self._index = self._load_index(conn)
        codes = None if kinds is None else [_KIND_CODES[kind] for kind in kinds]
        exact = self._index.size < self.EXACT_SEARCH_BELOW
        return self._index.nearest(query, depth, 0 if exact else candidates, codes)

    def _nearest_sql(
        self, conn: sqlite3.Connection, query: np.ndarray, depth: int, candidates: int, kinds: Sequence[str] | None
    ) -> list[tuple[int, float]]:
        """Both passes in vec0: Hamming over memory_bits, then exact L2 over those rows of memory_vec."""
        if kinds is not None:
            candidates *= 4  # the kind is checked after the search: look further
        candidates = min(candidates, 4096)  # sqlite-vec's largest k
        blob = query.tobytes()
        first = [
            r[0]
            for r in conn.execute(
                "SELECT rowid FROM memory_bits WHERE embedding MATCH vec_quantize_binary(?) AND k = ?",
                (blob, candidates),
            )
        ]
        if not first:
            return []
        rows = conn.execute(
            "SELECT rowid, distance FROM memory_vec WHERE embedding MATCH ? AND k = ?"
            " AND rowid IN (SELECT value FROM json_each(?))",
            (blob, len(first), json.dumps(first)),
        ).fetchall()
        if kinds is not None:
            kind_of = dict(
                conn.execute(
                    "SELECT id, kind FROM memories WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps([r[0] for r in rows]),),
                ).fetchall()
            )
            rows = [r for r in rows if kind_of.get(r[0]) in kinds]
        # Unit vectors: cosine distance is half the squared L2 distance.
        return [(int(i), float(d) * float(d) / 2) for i, d in rows[:depth]]

    def _keyword(self, conn: sqlite3.Connection, query: str, depth: int, kinds: Sequence[str] | None) -> list[int]:
        """FTS5 ids for a query, best bm25 first: an OR of its words, each quoted (never FTS5 syntax)."""
        terms = _query_terms(query)
        if not terms:
            return []
        # bm25 ranks every match (~2 µs each): rank only the rarest terms, up to RANK_BUDGET matches in all.
        # Common words add little to bm25 anyway (their inverse document frequency is small). Matches are
        # counted only up to the budget, so a word in every memory costs no more to size than a rare one.
        count = "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)"
        sized = sorted((conn.execute(count, (phrase, self.RANK_BUDGET + 1)).fetchone()[0], phrase) for phrase in terms)
        chosen: list[str] = []
        total = 0
        for n, phrase in sized:
            if n == 0 or (chosen and total + n > self.RANK_BUDGET):
                continue
            chosen.append(phrase)
            total += n
        if not chosen:
            return []
        where = "memories_fts MATCH ?"
        params: list[object] = [" OR ".join(chosen)]
        join = ""
        if kinds is not None:
            join = " JOIN memories m ON m.id = memories_fts.rowid"
            where += f" AND m.kind IN ({_marks(kinds)})"
            params.extend(kinds)
        # Too common to rank (one word in thousands of memories): the newest matches instead.
        order = "memories_fts.rank" if total <= self.RANK_BUDGET else "memories_fts.rowid DESC"
        sql = f"SELECT memories_fts.rowid FROM memories_fts{join} WHERE {where} ORDER BY {order} LIMIT ?"
        return [r[0] for r in conn.execute(sql, (*params, depth))]

    def _fetch(self, conn: sqlite3.Connection, ids: list[int]) -> dict[int, Memory]:
        if not ids:
            return {}
        rows = conn.execute(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),)
        ).fetchall()
        return {r[0]: Memory(*r) for r in rows}

    # --- export -------------------------------------------------------------------------------

    def export_markdown(self, workspace: Path) -> tuple[Path, Path]:
        """Write MEMORY.md (facts, newest first) and HISTORY.md (summaries, oldest first) into a workspace."""
        with self._db.reading() as conn:
            facts = conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE kind = 'fact' ORDER BY created_at DESC, id DESC"
            ).fetchall()
            summaries = conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE kind = 'summary' ORDER BY created_at, id"
            ).fetchall()
        lines = ["# Memory", "", "Facts picoagent remembers, newest first (exported from its database).", ""]
        for fact in (Memory(*r) for r in facts):
            text = "\n  ".join(fact.text.splitlines())  # continuation lines stay inside the list item
            lines.append(f"- {_date(fact.created_at)} ({fact.source}): {text}")
        history = ["# History", "", "Summaries of past conversations, oldest first.", ""]
        for summary in (Memory(*r) for r in summaries):
            history += [f"## {_date(summary.created_at, with_time=True)} ({summary.source})", "", summary.text, ""]
        memory_md, history_md = Path(workspace) / "MEMORY.md", Path(workspace) / "HISTORY.md"
        _write_atomically(memory_md, "\n".join(lines).rstrip() + "\n")
        _write_atomically(history_md, "\n".join(history).rstrip() + "\n")
        return memory_md, history_md

    # --- plumbing -----------------------------------------------------------------------------

    def _transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One write transaction; when it rolls back, what the index took in is resynchronised."""
        return self._db.transaction(on_rollback=self._forget_generation)

    def _forget_generation(self) -> None:
        self._generation = -1  # what the index took in may not have been committed: resync at the next read


class _VectorIndex:
    """Unit vectors and their sign bits, held in process: a Hamming pass, then exact cosine re-ranking."""

    def __init__(self, dimensions: int, capacity: int = 1024) -> None:
        self.dimensions = dimensions
        self.words = (dimensions + 63) // 64
        self.size = 0
        self._ids = np.empty(capacity, np.int64)
        self._kinds = np.empty(capacity, np.uint8)
        self._vectors = np.empty((capacity, dimensions), np.float32)
        # One row per 64-bit word of the signs: the Hamming pass runs down contiguous columns.
        self._bits = np.empty((self.words, capacity), np.uint64)

    @property
    def ids(self) -> np.ndarray:
        """The ids held, in slot order."""
        return self._ids[: self.size]

    def _signs(self, vectors: np.ndarray) -> np.ndarray:
        packed = np.packbits(vectors > 0, axis=1, bitorder="little")
        padded = np.zeros((len(vectors), self.words * 8), np.uint8)
        padded[:, : packed.shape[1]] = packed
        return padded.view(np.uint64).T

    def add(self, ids: np.ndarray, kinds: np.ndarray, vectors: np.ndarray) -> None:
        """Append vectors (already unit length)."""
        n = len(ids)
        if self.size + n > len(self._ids):
            self._grow(self.size + n)
        end = self.size + n
        self._ids[self.size : end] = ids
        self._kinds[self.size : end] = kinds
        self._vectors[self.size : end] = vectors
        self._bits[:, self.size : end] = self._signs(vectors)
        self.size = end

    def load(self, rows: Iterable[tuple[int, int, bytes]]) -> None:
        """Append (id, kind code, float32 blob) rows in place: a large memory is never held twice."""
        start = self.size
        for memory_id, kind, blob in rows:
            if self.size == len(self._ids):
                self._grow(self.size + 1)
            self._ids[self.size], self._kinds[self.size] = memory_id, kind
            self._vectors[self.size] = np.frombuffer(blob, np.float32)
            self.size += 1
        for chunk in range(start, self.size, 8192):  # the signs a chunk at a time, to bound the temporaries
            end = min(chunk + 8192, self.size)
            self._bits[:, chunk:end] = self._signs(self._vectors[chunk:end])

    def _grow(self, need: int) -> None:
        # A quarter more, not double: at 100,000 memories a doubling would hold ~150 MB for nothing.
        capacity = max(need, len(self._ids) + len(self._ids) // 4 + 1024)
        n = self.size
        ids, kinds = np.empty(capacity, np.int64), np.empty(capacity, np.uint8)
        vectors, bits = np.empty((capacity, self.dimensions), np.float32), np.empty((self.words, capacity), np.uint64)
        ids[:n], kinds[:n], vectors[:n], bits[:, :n] = (
            self._ids[:n],
            self._kinds[:n],
            self._vectors[:n],
            self._bits[:, :n],
        )
        self._ids, self._kinds, self._vectors, self._bits = ids, kinds, vectors, bits

    def remove(self, ids: np.ndarray) -> None:
        """Drop these ids (those held)."""
        if not len(ids) or not self.size:
            return
        keep = ~np.isin(self._ids[: self.size], ids)
        if keep.all():
            return
        n = int(keep.sum())
        self._ids[:n] = self._ids[: self.size][keep]
        self._kinds[:n] = self._kinds[: self.size][keep]
        self._vectors[:n] = self._vectors[: self.size][keep]
        self._bits[:, :n] = self._bits[:, : self.size][:, keep]
        self.size = n

    def set_kinds(self, ids: np.ndarray, kinds: np.ndarray) -> None:
        """Set the kind of each held id from sorted ``ids`` and their ``kinds``."""
        held = self._ids[: self.size]
        where = np.clip(np.searchsorted(ids, held), 0, max(len(ids) - 1, 0))
        if len(ids):
            found = ids[where] == held
            self._kinds[: self.size][found] = kinds[where[found]]

    def nearest(self, query: np.ndarray, k: int, candidates: int, kinds: list[int] | None) -> list[tuple[int, float]]:
        """The k closest (id, cosine distance); ``candidates`` from the Hamming pass (0: exact over all)."""
        n = self.size
        if not n:
            return []
        allowed = None if kinds is None else np.isin(self._kinds[:n], kinds)
        if candidates <= 0 or candidates >= n:
            slots = np.arange(n) if allowed is None else np.flatnonzero(allowed)
        else:
            hamming = self._hamming(query)
            if allowed is not None:
                hamming[~allowed] = self.dimensions + 1
            slots = _smallest(hamming, candidates, self.dimensions + 1)
            if allowed is not None:
                slots = slots[allowed[slots]]
        if not len(slots):
            return []
        similarity = self._vectors[slots] @ query
        top = np.argsort(-similarity, kind="stable")[:k]
        return [(int(self._ids[slots[t]]), float(1.0 - similarity[t])) for t in top]

    def _hamming(self, query: np.ndarray) -> np.ndarray:
        n = self.size
        signs = self._signs(query[None, :])[:, 0]
        total = np.zeros(n, np.uint16)  # up to the width in bits: more than a uint8 holds
        scratch, counts = np.empty(n, np.uint64), np.empty(n, np.uint8)
        for word in range(self.words):
            np.bitwise_xor(self._bits[word, :n], signs[word], out=scratch)
            total += _popcount(scratch, counts)
        return total


def _popcount(words: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Set bits per uint64 into a uint8 array (numpy 2's bitwise_count; a byte table on older numpy)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(words, out=out)
    byte_bits = np.array([bin(i).count("1") for i in range(256)], np.uint8)
    return np.sum(byte_bits[words.view(np.uint8)].reshape(len(words), 8), axis=1, dtype=np.uint8, out=out)


def _smallest(values: np.ndarray, m: int, top: int) -> np.ndarray:
    """Slots of about the m smallest small integers (ties at the cut included): a counting select, O(n)."""
    cumulative = np.cumsum(np.bincount(values, minlength=top + 1))
    cut = int(np.searchsorted(cumulative, m))
    slots = np.flatnonzero(values <= cut)
    if len(slots) > 4 * m:  # a huge tie (e.g. many identical vectors): fall back to a partial sort
        slots = np.argpartition(values, m)[:m]
    return slots


# --- helpers ------------------------------------------------------------------------------------

_SCHEMA = [
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


def _has_vec(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT vec_version()")
    except sqlite3.OperationalError:
        return False
    return True


def _exists(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def _meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM memory_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def _set_meta(conn: sqlite3.Connection, **values: object) -> None:
    for key, value in values.items():
        conn.execute("INSERT OR REPLACE INTO memory_meta (key, value) VALUES (?, ?)", (key, value))
    conn.execute("UPDATE memory_meta SET value = value + 1 WHERE key = 'generation'")


def _normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


def _key(kind: str, text: str) -> bytes:
    """The dedupe key: identical texts, case and spacing aside, of the same kind."""
    return hashlib.sha256(f"{kind}\0{_normalise(text)}".encode()).digest()[:16]


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


def _check_kinds(kinds: Sequence[str]) -> None:
    if isinstance(kinds, str) or not kinds or any(kind not in KINDS for kind in kinds):
        raise UsageError(f"memory: kinds must be some of {', '.join(KINDS)}, not {kinds!r}")


def _check_new(item: NewMemory) -> None:
    if item.kind not in KINDS:
        raise UsageError(f"memory: a memory is a fact or a summary, not {item.kind!r}")
    if not item.text.strip():
        raise UsageError("memory: there is no text to remember")
    if not 0.0 <= item.importance <= 1.0:
        raise UsageError(f"memory: importance is from 0 to 1, not {item.importance}")


# FTS5's default tokenizer (unicode61) keeps letters and digits and splits on everything else.
_TOKEN = re.compile(r"[^\W_]+")
_MAX_TERMS = 32
_STOPWORD_TEXT = """
    a about above after again all am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now
    of off on once only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself yourselves"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _query_terms(query: str) -> list[str]:
    """Each whitespace-separated word of a query as an FTS5 phrase of its tokens.

    "192.168.1.40" becomes the phrase "192 168 1 40", which is how the tokenizer indexed it. Phrases
    hold only letters, digits and spaces, so no input can become FTS5 syntax. Stopwords are dropped
    unless nothing else is left.
    """
    terms: list[str] = []
    content: list[str] = []
    for word in unicodedata.normalize("NFC", query).split():
        tokens = _TOKEN.findall(word)
        phrase = '"' + " ".join(tokens) + '"'
        if tokens and phrase not in terms:
            terms.append(phrase)
            if len(tokens) > 1 or tokens[0].lower() not in _STOPWORDS:
                content.append(phrase)
    return (content or terms)[:_MAX_TERMS]


def _date(timestamp: float, *, with_time: bool = False) -> str:
    return time.strftime("%Y-%m-%d %H:%M" if with_time else "%Y-%m-%d", time.localtime(timestamp))


def _write_atomically(path: Path, text: str) -> None:
    """Write a workspace file whole or not at all, with an error for people."""
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise PicoagentError(
            f"cannot write {path}: {exc.strerror or exc}", fix="check that the workspace directory is writable"
        ) from None


__all__ = ["KINDS", "Hit", "Memory", "MemoryStatus", "MemoryStore", "NewMemory", "SearchResults"]
