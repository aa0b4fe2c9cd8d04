"""What the memory store suites share (tests/test_memory_store.py, tests/test_memory_store_upgrades.py):
``MeaningEmbedder``, a deterministic test embedder (the real embedding model is tested in test_embeddings.py;
these suites are about storing and ranking), a clock, and a store searched both ways."""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from appliance.memory.db import Database
from appliance.memory.store import MemoryStore
from tests.fakes.clock import ManualClock

ROOT = Path(__file__).resolve().parent.parent
DAY = 86_400.0


class MeaningEmbedder:
    """A test embedder (not a model): deterministic, instant, and still carrying some meaning.

    Each word gets a fixed pseudo-random direction seeded by its hash; a text is the normalised sum of
    its words' directions, so texts that share words point alike (a hashed bag of words, dense so that
    sign bits keep its geometry). A few synonym groups share one direction, so "keys" is close to "key"
    and "garden shed" to "shed" by meaning alone, with no keyword in common. ``fixed`` pins the vector
    of given texts, for tests that need an exact geometry. It records every batch it embedded.
    """

    SYNONYMS: ClassVar[dict[str, str]] = {
        "garden shed": "shed",
        "keys": "key",
        "wifi": "wireless",
        "wi-fi": "wireless",
        "storage": "nas",
    }

    def __init__(self, dimensions: int = 384, fixed: dict[str, list[float]] | None = None, seed: str = "") -> None:
        self.dimensions = dimensions
        self.fixed = fixed or {}
        self.seed = seed  # another seed: another "model", whose vectors do not match this one's
        self.calls: list[list[str]] = []
        self.fail = False

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.fail:
            raise RuntimeError("the test embedder was told to fail")
        return [self.fixed[t] if t in self.fixed else self._vector(t).tolist() for t in texts]

    def _vector(self, text: str) -> np.ndarray:
        text = text.lower()
        for phrase, same in self.SYNONYMS.items():
            text = re.sub(rf"\b{re.escape(phrase)}\b", same, text)
        total = np.zeros(self.dimensions, np.float64)
        for word in re.findall(r"[\w.-]+", text):
            total += _direction(word.strip(".-"), self.dimensions, self.seed)
        norm = np.linalg.norm(total)
        return total / norm if norm else np.ones(self.dimensions) / np.sqrt(self.dimensions)


@lru_cache(maxsize=4096)
def _direction(word: str, dimensions: int, seed: str) -> np.ndarray:
    digest = hashlib.blake2b(f"{seed}:{word}".encode(), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(digest, "little")).standard_normal(dimensions)


class Clock(ManualClock):
    start = 1_700_000_000.0


@pytest.fixture
def embedder() -> MeaningEmbedder:
    return MeaningEmbedder()


@pytest.fixture(params=[True, False], ids=["numpy-index", "sql-vec0"])
def store(request: pytest.FixtureRequest, db: Database, embedder: MeaningEmbedder) -> MemoryStore:
    """A store searched both ways: the in-process numpy index, and vec0 in SQL."""
    return MemoryStore(db, embedder, model_name="test", dimensions=384, vector_cache=request.param, clock=Clock())


def unit(*weights: float, dimensions: int = 384) -> list[float]:
    """A unit vector with these leading components."""
    v = np.zeros(dimensions)
    v[: len(weights)] = weights
    return (v / np.linalg.norm(v)).tolist()
