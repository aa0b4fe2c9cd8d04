"""Long-term memory: facts and summaries in SQLite, recalled by meaning and by keyword.

A memory is a row of ``memories`` (its FTS5 index kept in sync by triggers) and, when an embedding
model is configured, two vectors written in the same transaction: the unit float vector in the vec0
table ``memory_vec`` and its sign bits in ``memory_bits``. A search runs a vector leg and a keyword
leg (FTS5 bm25) and merges them by Reciprocal Rank Fusion, weighted by what each kind of match
proved worth: :mod:`appliance.memory.fusion`.

The vector leg is a binary first pass (Hamming distance over the sign bits) re-ranked by exact
cosine. The daemon, which searches often, keeps the vectors in numpy, where both passes take under
1 ms on 100,000 memories; ``vector_cache=False`` runs them in vec0 instead, for one-shot processes
(the CLI). Why, and what each costs: :mod:`appliance.memory.vector_index`. The keyword leg quotes
each word of the query and ranks only the rarest by bm25: :mod:`appliance.memory.keywords`.

The vectors belong to one model and width, recorded in ``memory_meta``. When the configuration
names another, the vectors are stale: searches use keywords only (and say so in their results)
until :meth:`MemoryStore.reembed` has rebuilt them (:mod:`appliance.memory.reembed`). What the store
takes from an embedding model, checked: :mod:`appliance.memory.unit_vectors`. Its tables (made by the
database's migrations, the vec0 ones by the store), dedupe keys, and the counters by which each process
sees others' writes: :mod:`appliance.memory.schema`. What it takes and returns (re-exported here):
:mod:`appliance.memory.records`; the Markdown export: :mod:`appliance.memory.export`.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from appliance.errors import ModelError, PicoagentError, UsageError
from appliance.memory.db import Database
from appliance.memory.export import export_markdown
from appliance.memory.fusion import Weights, fuse
from appliance.memory.keywords import KeywordHits, keyword_search
from appliance.memory.records import (
    KINDS,
    Hit,
    Memory,
    MemoryStatus,
    NewMemory,
    SearchResults,
    check_kinds,
    check_new,
    fetch_memories,
)
from appliance.memory.reembed import embed_pending, start_over
from appliance.memory.schema import (
    create_vector_tables,
    dedupe_key,
    delete_vectors,
    get_meta,
    known_keys,
    replace_text,
    set_meta,
    vec_available,
    write_vector,
)
from appliance.memory.unit_vectors import Embed, EmbedQuery, unit_query_vector, unit_vectors
from appliance.memory.vector_index import KIND_CODES, LazyNumpy, VectorIndex, catch_up, load_index, nearest_sql

if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyNumpy(globals())  # numpy on first use: an idle daemon that has not searched yet stays small

log = logging.getLogger(__name__)

_DAY = 86_400.0


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
        embed_query: EmbedQuery | None = None,
        embedder: Any = None,
    ) -> None:
        """``embedder``: the model behind ``embed``, kept for whoever closes it (the runtime) and for the
        understanding stage that shares it (runtime.understanding); None: keyword-only, or given as functions."""
        if embed is not None and (dimensions < 8 or dimensions % 8):
            raise UsageError(
                f"memory: an embedding width of {dimensions} cannot be stored",
                fix="sqlite-vec's bit vectors need a width divisible by 8 (most models have 384, 768 or 1024)",
            )
        self._db = db
        self._embed = embed
        # A query may want another prefix than a stored text (bge, nomic), and the turn's stages share
        # its vector: the embedder's embed_query keeps the last few.
        self._embed_query = embed_query
        self.embedder = embedder
        self.weights = Weights()  # what a vector match, a keyword match and a rare-name match are worth
        self.model_name = model_name
        self.dimensions = dimensions
        self.clock = clock
        self.vector_cache = vector_cache
        self.key = f"{model_name}@{dimensions}"  # the memories.embedded_with of an up-to-date vector
        self._recorded: tuple[str, int] | None = None
        self._state: Literal["ready", "stale", "reembedding", "off"] = "off"
        self._generation = -1  # memory_meta's generation when the state and the index were last synced
        self._deletions = -1  # and its count of deletions
        self._index: VectorIndex | None = None
        self._reembed_lock = threading.Lock()
        with self._transaction() as conn:
            self._vec = vec_available(conn)
            self._ensure_schema(conn)
        with self._db.reading() as conn:
            self._sync(conn)

    # --- schema and state ---------------------------------------------------------------------

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        """The vec0 tables for the configured model, when missing (the rest comes from the migrations)."""
        if not self._vec or self._embed is None:
            return
        model, dims = get_meta(conn, "model"), get_meta(conn, "dimensions")
        if model is None:
            create_vector_tables(conn, self.model_name, self.dimensions)
        elif (model, int(dims or 0)) == (self.model_name, self.dimensions):
            create_vector_tables(conn, self.model_name, self.dimensions)  # a no-op unless someone dropped them

    def _sync(self, conn: sqlite3.Connection) -> None:
        """Catch up with writes by others (another process, another store): state, then the vector index."""
        generation = int(get_meta(conn, "generation") or 0)
        if generation == self._generation:
            return
        model, dims, vectors = get_meta(conn, "model"), get_meta(conn, "dimensions"), get_meta(conn, "vectors")
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
        deletions = int(get_meta(conn, "deletions") or 0)
        if self._state != "ready" or deletions != self._deletions:
            # SQLite hands a deleted top id out again: after others deleted, an id held may be another memory's.
            self._index = None
        elif self._index is not None and not catch_up(self._index, conn, self.key):
            self._index = None  # many new vectors: one scan on the next search beats many vec0 reads
        self._generation, self._deletions = generation, deletions

    def _load_index(self, conn: sqlite3.Connection) -> VectorIndex:
        """Read every current vector into a new in-process index (one scan of memory_vec)."""
        started = time.perf_counter()
        index = load_index(conn, self.key, self.dimensions)
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
            check_new(item)
        stored: list[Memory] = []
        for start in range(0, len(pending), batch):
            stored.extend(self._add_batch(pending[start : start + batch]))
        return stored

    def _add_batch(self, items: list[NewMemory]) -> list[Memory]:
        keys = [dedupe_key(item.kind, item.text) for item in items]
        with self._db.reading() as conn:
            self._sync(conn)
            known = known_keys(conn, keys)
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
            generation = int(get_meta(conn, "generation") or 0)
            in_sync = generation == self._generation
            # The model may have changed since the texts were embedded (another process re-embedding).
            recorded = (get_meta(conn, "model"), int(get_meta(conn, "dimensions") or 0))
            current = recorded == (self.model_name, self.dimensions)
            known = known_keys(conn, keys)
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
                    write_vector(conn, memory_id, vector)
                    added.append((memory_id, KIND_CODES[item.kind], vector))
            rows = fetch_memories(conn, list(set(known[key] for key in keys)))
            if in_sync:
                self._generation = int(get_meta(conn, "generation") or 0)
                if self._index is not None and added:
                    self._index.add(
                        np.array([a[0] for a in added], np.int64),
                        np.array([a[1] for a in added], np.uint8),
                        np.stack([a[2] for a in added]),
                    )
        return [rows[known[key]] for key in keys]

    def has_vectors(self) -> bool:
        """Whether any memory has a vector now: with none, a search embeds nothing and loads no model."""
        if self._index is not None and self._index.size:
            return True
        with self._db.reading() as conn:
            self._sync(conn)
            row = conn.execute("SELECT 1 FROM memories WHERE embedded_with = ? LIMIT 1", (self.key,)).fetchone()
        return row is not None

    def _query_vector(self, query: str) -> np.ndarray:
        """A search query's unit vector (its own embedder entry point when there is one)."""
        if self._embed_query is None:
            return self._embed_texts([query])[0]
        return unit_query_vector(self._embed_query, query, self.model_name, self.dimensions)

    def _embed_texts(self, texts: list[str]) -> list[np.ndarray]:
        """Unit float32 vectors for texts; ModelError when the model fails or gives the wrong width."""
        assert self._embed is not None
        return unit_vectors(self._embed, texts, self.model_name, self.dimensions)

    def forget(self, memory_id: int) -> bool:
        """Delete one memory and its vectors; False when there was none with that id."""
        return self._delete([memory_id]) == 1

    def forget_many(self, ids: Sequence[int]) -> int:
        """Delete these memories and their vectors and keywords; how many there were."""
        return self._delete(list(ids))

    def edit(self, memory_id: int, text: str) -> Memory | None:
        """Change a memory's text in place (same id, kind, source, age and conversation): its keywords, dedupe key
        and vectors made again from the new text; None when there is no such memory. A text already remembered
        as another memory of the kind merges the two: this one is forgotten and the answer is that one."""
        new_text = text.strip()
        check_new(NewMemory(new_text, "edit"))
        old = self.get(memory_id)
        if old is None or new_text == old.text:
            return old
        key = dedupe_key(old.kind, new_text)
        with self._db.reading() as conn:
            self._sync(conn)
            embedding = self._state in ("ready", "reembedding")
        vector = None
        if embedding:
            try:
                vector = self._embed_texts([new_text])[0]  # outside the lock: embedding is slow
            except PicoagentError as exc:  # kept without a vector: keyword search finds it, reembed() mends it
                log.warning("memory: edited memory %d stored without a vector: %s", memory_id, exc.message)
        with self._transaction() as conn:
            in_sync = int(get_meta(conn, "generation") or 0) == self._generation
            if (get_meta(conn, "model"), int(get_meta(conn, "dimensions") or 0)) != (self.model_name, self.dimensions):
                vector = None  # another process changed the model meanwhile: reembed() gives it a vector
            same = known_keys(conn, [key]).get(key)
            if same is not None and same != memory_id:
                merged = fetch_memories(conn, [same])[same]
            elif not replace_text(conn, memory_id, new_text, key, vector, self.key):
                return None  # forgotten meanwhile
            else:
                merged = None
                if in_sync:
                    self._generation = int(get_meta(conn, "generation") or 0)
                    self._deletions = int(get_meta(conn, "deletions") or 0)
                    if self._index is not None:
                        self._index.remove(np.array([memory_id], np.int64))
                        if vector is not None:
                            self._index.add(
                                np.array([memory_id], np.int64),
                                np.array([KIND_CODES[old.kind]], np.uint8),
                                vector[None],
                            )
        if merged is not None:
            self._delete([memory_id])
            return merged
        return self.get(memory_id)

    def newest(self, limit: int = 50, offset: int = 0, kinds: Sequence[str] | None = None) -> list[Memory]:
        """Memories newest first (a page of them), of these kinds or all."""
        if kinds is not None:
            check_kinds(kinds)
        where = f" WHERE kind IN ({_marks(kinds)})" if kinds else ""
        with self._db.reading() as conn:
            ids = [
                int(r[0])
                for r in conn.execute(
                    f"SELECT id FROM memories{where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                    (*(kinds or ()), limit, offset),
                )
            ]
            rows = fetch_memories(conn, ids)
        return [rows[i] for i in ids if i in rows]

    def prune(self, older_than_days: float, kinds: Sequence[str] = ("fact",)) -> int:
        """Delete memories of these kinds older than so many days; how many went."""
        if older_than_days < 0:
            raise UsageError(f"memory prune: {older_than_days} days is not an age", fix="give 0 or more days")
        check_kinds(kinds)
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
            in_sync = int(get_meta(conn, "generation") or 0) == self._generation
            deleted = 0
            for memory_id in ids:
                deleted += conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,)).rowcount
            if self._vec:
                delete_vectors(conn, ids)
            if in_sync:
                self._generation = int(get_meta(conn, "generation") or 0)
                self._deletions = int(get_meta(conn, "deletions") or 0)
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
            if start_over(conn, self.model_name, self.dimensions):
                log.info("memory: re-embedding every memory with %s (%d dims)", self.model_name, self.dimensions)
            # Otherwise only memories without a vector (stored while the model failed): searches go on meanwhile.
        done = embed_pending(self._db, self._transaction, self._embed_texts, self.key, batch)
        with self._transaction() as conn:
            set_meta(conn, vectors="ready")
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
            check_kinds(kinds)
            sql = f"SELECT count(*) FROM memories WHERE kind IN ({_marks(kinds)})"
            return int(conn.execute(sql, tuple(kinds)).fetchone()[0])

    def get(self, memory_id: int) -> Memory | None:
        """One memory by id."""
        with self._db.reading() as conn:
            return fetch_memories(conn, [memory_id]).get(memory_id)

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
            check_kinds(kinds)
        if decay_half_life_days < 0:
            raise UsageError(f"memory search: a half-life of {decay_half_life_days} days is not a time span")
        depth = max(2 * k, 20)  # each leg's ranking is cut here before fusion
        query_vector: np.ndarray | None = None
        note = ""
        if self._state == "ready" and query.strip() and self.has_vectors():
            try:
                query_vector = self._query_vector(query)  # outside the lock
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
            fused = fuse([i for i, _ in vector_hits], keyword_ids, keyword_ids.rare, self.weights)
            order = sorted(fused, key=lambda i: (-fused[i], -i))
            # Without decay this order is final: read only the rows returned (all, if some have gone).
            wanted = order if decay_half_life_days > 0 else order[:k]
            rows = fetch_memories(conn, wanted)
            if len(rows) < len(wanted):
                rows = fetch_memories(conn, order)
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
            return nearest_sql(conn, query, depth, candidates, kinds)
        if self._index is None:
            self._index = self._load_index(conn)
        codes = None if kinds is None else [KIND_CODES[kind] for kind in kinds]
        exact = self._index.size < self.EXACT_SEARCH_BELOW
        return self._index.nearest(query, depth, 0 if exact else candidates, codes)

    def _keyword(self, conn: sqlite3.Connection, query: str, depth: int, kinds: Sequence[str] | None) -> KeywordHits:
        """FTS5 ids for a query, best bm25 first, at most RANK_BUDGET matches ranked (see memory.keywords)."""
        return keyword_search(conn, query, depth, kinds, rank_budget=self.RANK_BUDGET)

    # --- export -------------------------------------------------------------------------------

    def export_markdown(self, workspace: Path) -> tuple[Path, Path]:
        """Write MEMORY.md (facts, newest first) and HISTORY.md (summaries, oldest first) into a workspace."""
        return export_markdown(self._db, workspace)

    # --- plumbing -----------------------------------------------------------------------------

    def _transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One write transaction; when it rolls back, what the index took in is resynchronised."""
        return self._db.transaction(on_rollback=self._forget_generation)

    def _forget_generation(self) -> None:
        self._generation = -1  # what the index took in may not have been committed: resync at the next read


# --- helpers ------------------------------------------------------------------------------------


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


__all__ = ["KINDS", "Hit", "Memory", "MemoryStatus", "MemoryStore", "NewMemory", "SearchResults"]
