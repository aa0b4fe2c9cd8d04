"""What the memory store takes and gives back: memories, searches' hits and results, its status."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from appliance.errors import UsageError

KINDS = ("fact", "summary")
# Memory's fields in order, as the columns of memories to read one from.
MEMORY_COLUMNS = "id, kind, text, source, created_at, importance, conversation_id, embedded_with"


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


def fetch_memories(conn: sqlite3.Connection, ids: list[int]) -> dict[int, Memory]:
    """These memories by id (those that exist)."""
    if not ids:
        return {}
    rows = conn.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),)
    ).fetchall()
    return {r[0]: Memory(*r) for r in rows}


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


# The bar `memory search` shows a hit at: cosine similarity to the question. Measured with MiniLM on
# tests/eval/recall.yaml (questions that share no content word with their fact): 97 % of right facts
# reach 0.20 and 90 % of the wrong ones do not; off-topic questions ("a good pizza recipe", "hello")
# reach at most 0.16 against any of its 61 facts.
MIN_SIMILARITY = 0.20
ABOUT_K = 20  # the most memories "forget everything about X" shows (and so can forget) at once


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
        self.rare_ids: set[int] = set(getattr(keyword_ids, "rare", ()))  # matched a name, number or code

    def relevant(self, min_similarity: float = MIN_SIMILARITY) -> list[Hit]:
        """The hits a person should see: close enough by meaning, or found by a rare word, or by keyword alone.

        The vector leg always returns the nearest memories, however far: without a bar a search for
        "pizza recipe" lists the shed key. A keyword-only search (no vectors) has no similarity to judge.
        """
        return [
            h
            for h in self
            if h.memory.id in self.rare_ids
            or (h.distance is None and self.mode == "keyword")
            or (h.distance is not None and 1 - h.distance >= min_similarity)
        ]

    def about(self, min_similarity: float = MIN_SIMILARITY) -> list[Hit]:
        """The hits about the query's subject, for "forget everything about X": close enough by meaning, or
        sharing one of its words (its stopwords aside). Wider than :meth:`relevant`, since a person reads this
        list before anything goes, and a memory that names X but drifts in meaning must be on it."""
        return [
            h
            for h in self
            if "keyword" in h.matched_by or (h.distance is not None and 1 - h.distance >= min_similarity)
        ]


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


def check_kinds(kinds: Sequence[str]) -> None:
    """Refuse kinds that are not some of KINDS (a bare string too: it would be read letter by letter)."""
    if isinstance(kinds, str) or not kinds or any(kind not in KINDS for kind in kinds):
        raise UsageError(f"memory: kinds must be some of {', '.join(KINDS)}, not {kinds!r}")


def check_new(item: NewMemory) -> None:
    """Refuse a memory to store that has an unknown kind, no text, or an importance outside 0 to 1."""
    if item.kind not in KINDS:
        raise UsageError(f"memory: a memory is a fact or a summary, not {item.kind!r}")
    if not item.text.strip():
        raise UsageError("memory: there is no text to remember")
    if not 0.0 <= item.importance <= 1.0:
        raise UsageError(f"memory: importance is from 0 to 1, not {item.importance}")


__all__ = [
    "ABOUT_K",
    "KINDS",
    "MEMORY_COLUMNS",
    "Hit",
    "Memory",
    "MemoryStatus",
    "NewMemory",
    "SearchResults",
    "check_kinds",
    "check_new",
    "fetch_memories",
]
