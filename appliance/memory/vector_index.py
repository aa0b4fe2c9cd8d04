"""The vector leg of a memory search: a binary first pass, then exact cosine re-ranking.

The binary first pass (Hamming distance over the sign bits picks ``10·k`` candidates) is re-ranked
by exact cosine on the float vectors. vec0 tables are brute-force scans and a vec0 read by rowid
costs ~0.3 ms, so on 100,000 memories vec0 alone takes ~15 ms for the bit pass and ~60 ms more to
re-rank 100 candidates (``tests/bench/memory.py`` measures it). A process that searches often (the
daemon) therefore keeps a copy of the vectors in numpy (:class:`VectorIndex`, 1.6 KB per memory at
384 dims), where the same two passes take under 1 ms; ``vector_cache=False`` runs them in SQL
instead (:func:`nearest_sql`), for one-shot processes (the CLI) that would otherwise read every vector.

numpy is imported on first use (:class:`LazyNumpy`): an idle daemon that has not searched yet does
not hold it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any


class LazyNumpy:
    """numpy on first use: an idle daemon that has not searched yet stays small (numpy is ~15 MB).

    ``np = LazyNumpy(globals())`` in a module: its first ``np.`` imports numpy and puts it in the
    module's ``np``, so later uses go straight to numpy.
    """

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str) -> Any:
        import numpy

        self._namespace["np"] = numpy
        return getattr(numpy, name)


if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyNumpy(globals())

KIND_CODES = {"fact": 0, "summary": 1}  # a memory's kind as the index holds it


class VectorIndex:
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


def load_index(conn: sqlite3.Connection, key: str, dimensions: int) -> VectorIndex:
    """Every current vector (of memories embedded as ``key``) in a new index: one scan of memory_vec."""
    kinds = dict(conn.execute("SELECT id, kind FROM memories WHERE embedded_with = ?", (key,)).fetchall())
    index = VectorIndex(dimensions, capacity=len(kinds) + 1024)
    rows = conn.execute("SELECT rowid, embedding FROM memory_vec")
    index.load((i, KIND_CODES[kinds[i]], blob) for i, blob in rows if i in kinds)
    return index


def catch_up(index: VectorIndex, conn: sqlite3.Connection, key: str) -> bool:
    """Bring an index in line with the database after someone else wrote to it.

    False when so many vectors were added that reloading the index (one scan on the next search)
    beats reading each of them from vec0; the index is then left as it was.
    """
    rows = conn.execute("SELECT id, kind FROM memories WHERE embedded_with = ? ORDER BY id", (key,)).fetchall()
    ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    kinds = np.fromiter((KIND_CODES[r[1]] for r in rows), np.uint8, len(rows))
    added = np.setdiff1d(ids, index.ids, assume_unique=True)
    if len(added) > 256:
        return False
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
    return True


def nearest_sql(
    conn: sqlite3.Connection, query: np.ndarray, depth: int, candidates: int, kinds: Sequence[str] | None
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


__all__ = ["KIND_CODES", "LazyNumpy", "VectorIndex", "catch_up", "load_index", "nearest_sql"]
