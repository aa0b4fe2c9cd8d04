"""The memory store: add, hybrid search (vectors + FTS5, fused by RRF), forget, prune, export, re-embed.

Vectors come from ``MeaningEmbedder``, a deterministic test embedder defined here: the real embedding
model is tested in test_embeddings.py; these tests are about storing and ranking.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sqlite3
import subprocess
import sys
import threading
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appliance.errors import UsageError
from appliance.memory.db import Database
from appliance.memory.fusion import Weights
from appliance.memory.store import MemoryStore, NewMemory
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


# --- add, search, forget, prune, export ---------------------------------------------------------


def test_add_then_search_finds_by_meaning_and_by_keyword(store: MemoryStore) -> None:
    key = store.add("The spare key is under the blue flower pot", source="telegram")
    store.add("The boiler is serviced every October", source="telegram")
    store.add("Anna's birthday is on the 3rd of May", source="telegram")
    assert key.id > 0 and key.kind == "fact" and key.embedded_with == "test@384"

    hits = store.search("where are my keys", k=3)  # no shared keyword ("keys" is not "key"): by meaning
    assert hits.mode == "hybrid" and hits.note == ""
    assert hits[0].memory == key and hits[0].matched_by == {"vector"}
    assert hits[0].distance is not None and hits[1].distance is not None and hits[0].distance < hits[1].distance

    hits = store.search("boiler", k=3)
    assert hits[0].memory.text == "The boiler is serviced every October"
    assert hits[0].matched_by == {"vector", "keyword"}


def test_a_memory_is_durable_when_add_returns(db: Database, embedder: MeaningEmbedder, tmp_path: Path) -> None:
    store = MemoryStore(db, embedder, model_name="test", dimensions=384)
    memory = store.add("The NAS is at 192.168.1.40", source="cli")
    # A separate connection sees the row, its FTS entry and both vectors: one committed transaction.
    conn = sqlite3.connect(tmp_path / "picoagent.db")
    conn.enable_load_extension(True)
    import sqlite_vec

    sqlite_vec.load(conn)
    assert conn.execute("SELECT text FROM memories WHERE id = ?", (memory.id,)).fetchone() == (memory.text,)
    assert conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'nas'").fetchall() == [(memory.id,)]
    assert conn.execute("SELECT count(*) FROM memory_vec WHERE rowid = ?", (memory.id,)).fetchone() == (1,)
    assert conn.execute("SELECT count(*) FROM memory_bits WHERE rowid = ?", (memory.id,)).fetchone() == (1,)
    conn.close()


def test_forget_removes_the_memory_and_its_vectors(store: MemoryStore, db: Database) -> None:
    keep = store.add("The car is a blue Volvo", source="t")
    gone = store.add("The car keys are in the drawer", source="t")
    assert store.search("car")[0:2] and store.count() == 2
    assert store.forget(gone.id) is True
    assert store.forget(gone.id) is False
    assert store.count() == 1
    assert [h.memory.id for h in store.search("car keys drawer")] == [keep.id]
    assert db.value("SELECT count(*) FROM memory_vec WHERE rowid = ?", (gone.id,)) == 0
    # The text can be remembered again once forgotten (SQLite may give it the same id again).
    again = store.add("The car keys are in the drawer", source="t")
    assert store.count() == 2 and store.search("car keys drawer")[0].memory == again


def test_prune_deletes_old_facts_only(db: Database, embedder: MeaningEmbedder) -> None:
    clock = Clock()
    store = MemoryStore(db, embedder, model_name="test", dimensions=384, clock=clock)
    old_fact = store.add("The old router password was hunter2", source="t")
    old_summary = store.add("We talked about routers", kind="summary", source="t")
    clock.now += 100 * DAY
    new_fact = store.add("The new router is in the hall", source="t")
    assert store.prune(older_than_days=30) == 1
    assert store.get(old_fact.id) is None
    assert store.get(old_summary.id) is not None and store.get(new_fact.id) is not None
    assert [h.memory.id for h in store.search("router password", kinds=["fact"])] == [new_fact.id]
    assert store.prune(older_than_days=30, kinds=("fact", "summary")) == 1
    assert store.count() == 1 and store.count(["summary"]) == 0
    with pytest.raises(UsageError):
        store.prune(older_than_days=-1)


def test_export_writes_facts_newest_first_and_summaries(
    db: Database, embedder: MeaningEmbedder, tmp_path: Path
) -> None:
    clock = Clock(1_700_000_000.0)  # 2023-11-14
    store = MemoryStore(db, embedder, model_name="test", dimensions=384, clock=clock)
    store.add("Anna likes tulips", source="telegram")
    store.add("We planned the garden", kind="summary", source="conversation 3", conversation_id=3)
    clock.now += 2 * DAY
    store.add("The NAS is at 192.168.1.40\nIt has two disks", source="web")
    workspace = tmp_path / "workspace"
    memory_md, history_md = store.export_markdown(workspace)
    assert (memory_md, history_md) == (workspace / "MEMORY.md", workspace / "HISTORY.md")
    facts = memory_md.read_text().splitlines()
    items = [line for line in facts if line.startswith("- ")]
    assert items[0].endswith("(web): The NAS is at 192.168.1.40") and "2023-11-1" in items[0]
    assert facts[facts.index(items[0]) + 1] == "  It has two disks"
    assert items[1].endswith("(telegram): Anna likes tulips")
    history = history_md.read_text()
    assert "We planned the garden" in history and "(conversation 3)" in history
    assert "Anna" not in history
    assert sorted(p.name for p in workspace.iterdir()) == ["HISTORY.md", "MEMORY.md"]  # no temporary left


# --- keywords -------------------------------------------------------------------------------------


def test_keyword_search_finds_an_ip_address_and_odd_tokens(store: MemoryStore) -> None:
    nas = store.add("The NAS is at 192.168.1.40", source="t")
    store.add("The printer is at 192.168.1.41", source="t")
    store.add("Router 10.0.0.1 admin page", source="t")
    mail = store.add("Bob's e-mail is bob_smith@example.org", source="t")
    cafe = store.add("Meet at Café Noir, rue de l'Église", source="t")
    wifi = store.add("The wi-fi password is Tr0ub4dor&3", source="t")

    found = store.search("192.168.1.40")
    assert found[0].memory == nas and "keyword" in found[0].matched_by
    assert found.keyword_ids == [nas.id]  # the phrase of its parts, not any memory with "192" or "168"
    assert store.search("what's the IP of the NAS? 192.168.1.40").keyword_ids[0] == nas.id
    assert store.search("bob_smith@example.org").keyword_ids == [mail.id]
    assert store.search("cafe noir").keyword_ids == [cafe.id]  # FTS5 folds the diacritics away
    assert store.search("EGLISE").keyword_ids == [cafe.id]
    assert store.search("Tr0ub4dor&3").keyword_ids == [wifi.id]
    assert store.search("wi-fi").keyword_ids == [wifi.id]
    assert store.search("10.0.0.2").keyword_ids == []


MALICIOUS = [
    "AND",
    "OR OR OR",
    "NOT",
    '"',
    '"""',
    'say "hi',
    "-",
    "--",
    "-nas",
    ":",
    "text:nas",
    "memories_fts:nas",
    "nas*",
    "*",
    "^nas",
    "NEAR(a b, 3)",
    "NEAR(",
    "(",
    ")",
    "a AND (b OR",
    "{text}: nas",
    "+",
    "'; DROP TABLE memories; --",
    "\x00",
    "nas\x00AND",
    "\u200b",
    "＂nas＂",
    "½ ² ﬁ",
    "",
    "   ",
    "🙂 🔑",
    "a" * 5000,
    " ".join(["word"] * 500),
]


@pytest.mark.parametrize("query", MALICIOUS)
def test_fts_syntax_in_a_query_never_raises(store: MemoryStore, query: str) -> None:
    store.add("The NAS is at 192.168.1.40 and the word is here", source="t")
    store.search(query)
    store.search(query, kinds=["fact"], decay_half_life_days=7)


def test_random_text_as_a_query_never_raises(db: Database, embedder: MeaningEmbedder) -> None:
    store = MemoryStore(db, embedder, model_name="test", dimensions=384)
    store.add("The NAS is at 192.168.1.40", source="t")

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from('"*:^()-+{}NEARANDORNOT '), max_size=60))
    def search(query: str) -> None:
        store.search(query)

    search()


# --- fusion and decay -----------------------------------------------------------------------------


def test_rrf_puts_what_both_legs_found_first(db: Database) -> None:
    # The query's vector is e0. Closest by vector: "the keys" (no keyword). Best by bm25: the short
    # "spare key" note, far by vector. The long note is second in both, so fusion ranks it first.
    long_note = "spare key hidden under the blue doormat by the back entrance of the old brick house"
    fixed = {
        "spare key": unit(1),
        "the keys": unit(1),
        long_note: unit(1, 0.6),
        "spare key spare key": unit(0, 0, 1),
        **{f"filler number {i}": unit(1, 0, 0, 2 + i / 10) for i in range(12)},
    }
    store = MemoryStore(db, MeaningEmbedder(fixed=fixed), model_name="test", dimensions=384)
    store.weights = Weights(vector=1.0, keyword=1.0, rare_word=1.0)  # the fusion itself, legs weighed alike
    both = store.add(long_note, source="t")
    vector_only = store.add("the keys", source="t")
    keyword_only = store.add("spare key spare key", source="t")
    for i in range(12):
        store.add(f"filler number {i}", source="t")

    hits = store.search("spare key", k=5)
    assert hits.vector_ids[0] == vector_only.id and hits.keyword_ids[0] == keyword_only.id
    assert hits[0].memory == both and hits[0].matched_by == {"vector", "keyword"}
    assert (hits[0].vector_rank, hits[0].keyword_rank) == (2, 2)
    assert hits[0].score == pytest.approx(2 / 62)


def test_a_rare_name_or_number_comes_first_even_where_the_vectors_point_elsewhere(db: Database) -> None:
    # The query's vector is e0, which only the distractors share: the vector leg ranks them first and
    # the note with the number or the name far down. A name or number in three memories or fewer wins.
    fixed = {
        "What's 30419982?": unit(1),
        "Who is Fernhill?": unit(1),
        "The electricity account number is 30419982": unit(0, 0, 1),
        "The wifi network is called Fernhill": unit(0, 0, 0, 1),
        **{f"distractor {i}": unit(1, 0, 0, 0, 0.1 + i / 10) for i in range(8)},
    }
    store = MemoryStore(db, MeaningEmbedder(fixed=fixed), model_name="test", dimensions=384)
    account = store.add("The electricity account number is 30419982", source="t")
    wifi = store.add("The wifi network is called Fernhill", source="t")
    for i in range(8):
        store.add(f"distractor {i}", source="t")
    for query, memory in (("What's 30419982?", account), ("Who is Fernhill?", wifi)):
        hits = store.search(query, k=5)
        assert hits.vector_ids.index(memory.id) >= 8  # the vectors alone would bury it
        assert hits[0].memory == memory and "keyword" in hits[0].matched_by


def test_a_plain_word_match_does_not_outrank_meaning(db: Database) -> None:
    # "water" is in the tomato note (a plain word: what the question is about, not a name); by meaning
    # the question is about the sprinkler. The vector leg decides.
    fixed = {
        "when does the water come on in the garden": unit(1),
        "The garden sprinkler runs at 6 every morning": unit(1, 0.2),
        "Water the tomatoes every evening": unit(0, 1),
    }
    store = MemoryStore(db, MeaningEmbedder(fixed=fixed), model_name="test", dimensions=384)
    sprinkler = store.add("The garden sprinkler runs at 6 every morning", source="t")
    tomatoes = store.add("Water the tomatoes every evening", source="t")
    hits = store.search("when does the water come on in the garden", k=2)
    assert hits.keyword_ids[0] == tomatoes.id and hits[0].memory == sprinkler


def test_decay_ranks_older_memories_lower(db: Database) -> None:
    clock = Clock()
    old_text, new_text = "boiler service code 1111", "boiler code changed to 2222 after the service visit"
    fixed = {"boiler service code": unit(1), old_text: unit(1, 0.1), new_text: unit(1, 0.5)}
    store = MemoryStore(db, MeaningEmbedder(fixed=fixed), model_name="test", dimensions=384, clock=clock)
    old = store.add(old_text, source="t")
    clock.now += 400 * DAY
    new = store.add(new_text, source="t")

    assert [h.memory for h in store.search("boiler service code", k=2)] == [old, new]
    decayed = store.search("boiler service code", k=2, decay_half_life_days=30)
    assert [h.memory for h in decayed] == [new, old]
    assert decayed[1].score < decayed[0].score / 1000  # 400 days is over 13 half-lives


# --- dedupe ---------------------------------------------------------------------------------------


def test_an_identical_text_is_stored_once(store: MemoryStore, embedder: MeaningEmbedder) -> None:
    first = store.add("The garage code is 4711", source="telegram")
    embedded = len(embedder.calls)
    again = store.add("  the GARAGE   code is 4711 ", source="web")
    assert again == first and store.count() == 1
    assert len(embedder.calls) == embedded  # a duplicate is not even embedded
    summary = store.add("The garage code is 4711", kind="summary", source="t")
    assert summary.id != first.id  # dedupe is per kind
    batch = store.add_many(
        [NewMemory("Milk is in the fridge", "t"), NewMemory("milk IS in the fridge", "t"), NewMemory("x", "t")]
    )
    assert batch[0] == batch[1] and store.count() == 4


def test_bad_input_is_refused_for_people(store: MemoryStore) -> None:
    with pytest.raises(UsageError, match="fact or a summary"):
        store.add("x", kind="opinion", source="t")
    with pytest.raises(UsageError, match="no text"):
        store.add("   ", source="t")
    with pytest.raises(UsageError, match="k must be"):
        store.search("x", k=0)
    with pytest.raises(UsageError, match="kinds"):
        store.search("x", kinds=["opinion"])


# --- model changes --------------------------------------------------------------------------------


def test_a_new_model_means_keyword_search_until_reembedded(db: Database) -> None:
    old = MemoryStore(db, MeaningEmbedder(), model_name="model-a", dimensions=384)
    shed = old.add("The lawnmower is in the shed", source="t")
    old.add("The NAS is at 192.168.1.40", source="t")

    new_embedder = MeaningEmbedder(dimensions=256, seed="b")
    new = MemoryStore(db, new_embedder, model_name="model-b", dimensions=256)
    assert new.status().vectors == "stale" and new.needs_reembed()
    hits = new.search("lawnmower")
    assert hits.mode == "keyword" and "model-a (384 dims)" in hits.note and "model-b" in hits.note
    assert hits[0].memory == shed and hits[0].matched_by == {"keyword"}
    assert new.search("where is the garden shed").mode == "keyword"
    added_while_stale = new.add("The ladder is in the garden shed", source="t")
    assert added_while_stale.embedded_with is None  # no vector of the old width; reembed gives it one

    assert new.reembed(batch=2) == 3
    assert not new.needs_reembed() and new.status().recorded_model == "model-b"
    hits = new.search("where is the garden shed")  # "garden shed" means "shed": found by meaning
    assert hits.mode == "hybrid" and {shed.id, added_while_stale.id} <= set(hits.vector_ids[:2])
    assert all(h.memory.embedded_with == "model-b@256" for h in hits)
    # The old configuration now sees stale vectors in its turn.
    assert old.search("shed").mode == "keyword"


def test_an_interrupted_reembed_resumes(db: Database) -> None:
    MemoryStore(db, MeaningEmbedder(), model_name="model-a", dimensions=384).add_many(
        [NewMemory(f"memory number {i}", "t") for i in range(10)]
    )
    failing = MeaningEmbedder(dimensions=128, seed="b")
    store = MemoryStore(db, failing, model_name="model-b", dimensions=128)
    calls = 0

    def fail_on_second_batch(texts: list[str]) -> list[list[float]]:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("out of memory")
        return failing(texts)

    store._embed = fail_on_second_batch
    with pytest.raises(Exception, match="out of memory"):
        store.reembed(batch=4)
    assert store.status().vectors == "reembedding" and store.search("memory").mode == "keyword"
    store._embed = failing
    assert store.reembed(batch=4) == 6
    assert store.status().vectors == "ready" and store.status().pending == 0


def test_a_failing_embedder_loses_nothing(db: Database, embedder: MeaningEmbedder) -> None:
    store = MemoryStore(db, embedder, model_name="test", dimensions=384)
    embedder.fail = True
    memory = store.add("The fuse box is behind the coats", source="t")
    assert memory.embedded_with is None and store.needs_reembed()
    calls = len(embedder.calls)
    hits = store.search("fuse box")  # no memory has a vector: the query is not even embedded
    assert hits.mode == "keyword" and hits[0].memory == memory and len(embedder.calls) == calls
    embedder.fail = False
    assert store.reembed() == 1 and not store.needs_reembed()
    assert store.search("fuse box")[0].matched_by == {"vector", "keyword"}
    embedder.fail = True
    hits = store.search("where is the fuse box")
    assert hits.mode == "keyword" and "could not be embedded" in hits.note and hits[0].memory.id == memory.id


def test_an_empty_memory_embeds_nothing_for_a_search(db: Database, embedder: MeaningEmbedder) -> None:
    store = MemoryStore(db, embedder, model_name="test", dimensions=384)
    for query in ("where is the shed key", "hello"):
        assert store.search(query) == [] and store.status().memories == 0
    assert embedder.calls == []  # an empty memory costs a turn no embedding (and no model load)
    store.add("The shed key hangs by the back door", source="t")
    assert store.search("where is the shed key")[0].matched_by == {"vector", "keyword"}
    assert len(embedder.calls) == 2  # the memory, then the query


def test_without_an_embedder_search_is_by_keyword(db: Database) -> None:
    store = MemoryStore(db, None, model_name="", dimensions=0)
    memory = store.add("The fuse box is behind the coats", source="t")
    hits = store.search("fuse")
    assert hits.mode == "keyword" and "no embedding model" in hits.note and hits[0].memory == memory
    assert not store.needs_reembed()


def test_without_sqlite_vec_search_is_by_keyword(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    from appliance.memory import store as store_module

    monkeypatch.setattr(store_module, "vec_available", lambda conn: False)
    store = MemoryStore(db, MeaningEmbedder(), model_name="test", dimensions=384)
    memory = store.add("The fuse box is behind the coats", source="t")
    assert memory.embedded_with is None
    hits = store.search("fuse")
    assert hits.mode == "keyword" and "sqlite-vec" in hits.note and hits[0].memory == memory
    assert store.forget(memory.id) and store.count() == 0


def test_many_memories_grow_and_shrink_the_index(db: Database, embedder: MeaningEmbedder) -> None:
    store = MemoryStore(db, embedder, model_name="test", dimensions=384)
    store.EXACT_SEARCH_BELOW = 0
    store.add("first of all", source="t")
    store.preload()  # small index; the adds below grow it in place
    added = store.add_many([NewMemory(f"note {i} about topic {i % 7}", "t") for i in range(3000)], batch=700)
    assert store.count() == 3001 and len({m.id for m in added}) == 3000
    for memory in added[:1500]:
        store.forget(memory.id)
    hits = store.search("note 2999 about topic 3", k=3)
    assert hits[0].memory.text == "note 2999 about topic 3"
    assert all(h.memory.id not in {m.id for m in added[:1500]} for h in hits)


# --- the store's tables come from the database's migrations ---------------------------------------

# What MemoryStore made itself when it opened a file, before migration 10 made these tables: a file
# written by that version has them exactly so (the triggers' text as it was).
STORE_TABLES_BEFORE_MIGRATION_10 = [
    "CREATE TABLE IF NOT EXISTS memory_meta (key TEXT PRIMARY KEY, value)",
    "CREATE TABLE IF NOT EXISTS memory_keys (key BLOB PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS memory_keys_id ON memory_keys (id)",
    "CREATE TRIGGER IF NOT EXISTS memory_keys_ad AFTER DELETE ON memories BEGIN"
    " DELETE FROM memory_keys WHERE id = old.id; END",
    "CREATE INDEX IF NOT EXISTS memories_embedded_with ON memories (embedded_with)",
    "CREATE TRIGGER IF NOT EXISTS memories_generation_ai AFTER INSERT ON memories BEGIN"
    " UPDATE memory_meta SET value = value + 1 WHERE key IN ('generation'); END",
    "CREATE TRIGGER IF NOT EXISTS memories_generation_ad AFTER DELETE ON memories BEGIN"
    " UPDATE memory_meta SET value = value + 1 WHERE key IN ('generation', 'deletions'); END",
    "CREATE TRIGGER IF NOT EXISTS memories_generation_au AFTER UPDATE ON memories BEGIN"
    " UPDATE memory_meta SET value = value + 1 WHERE key IN ('generation'); END",
    "INSERT OR IGNORE INTO memory_meta (key, value) VALUES ('generation', 0), ('deletions', 0)",
]


def old_file(path: Path, monkeypatch: pytest.MonkeyPatch, *, store_opened: bool) -> dict[str, int]:
    """A database file at schema 9 holding two memories, as the last version before migration 10 left it.

    ``store_opened``: the old store had opened it (its own tables made, the memories written through it
    with their dedupe keys and vectors); else they were written before the store existed (no keys).
    Returns the memories' ids by text.
    """
    from appliance.memory import db as db_module
    from appliance.memory.migrations import MIGRATIONS
    from appliance.memory.schema import create_vector_tables, dedupe_key

    names = [m.__name__ for m in MIGRATIONS]
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[: names.index("_m10_memory_store")])
    old = Database(path)
    ids = {}
    with old.transaction() as conn:
        if store_opened:
            for sql in STORE_TABLES_BEFORE_MIGRATION_10:
                conn.execute(sql)
            create_vector_tables(conn, "test", 384)
        for text in ("The spare key is under the blue flower pot", "The boiler is serviced every October"):
            cur = conn.execute(
                "INSERT INTO memories (kind, text, source, created_at, embedded_with) VALUES ('fact', ?, 't', 1.0, ?)",
                (text, "test@384" if store_opened else None),
            )
            ids[text] = int(cur.lastrowid or 0)
            if store_opened:
                vector = np.array(MeaningEmbedder()([text])[0], np.float32).tobytes()
                conn.execute("INSERT INTO memory_keys (key, id) VALUES (?, ?)", (dedupe_key("fact", text), ids[text]))
                conn.execute("INSERT INTO memory_vec (rowid, embedding) VALUES (?, ?)", (ids[text], vector))
                conn.execute(
                    "INSERT INTO memory_bits (rowid, embedding) VALUES (?, vec_quantize_binary(?))", (ids[text], vector)
                )
    assert old.value("PRAGMA user_version") == 9
    old.close()
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS)
    return ids


@pytest.mark.parametrize("store_opened", [False, True], ids=["memories-only", "store-opened"])
def test_an_old_database_file_is_upgraded_by_migration_10(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_opened: bool
) -> None:
    path = tmp_path / "picoagent.db"
    ids = old_file(path, monkeypatch, store_opened=store_opened)
    generation_before = 2 if store_opened else None  # the old triggers counted the two inserts
    db = Database(path)
    try:
        from appliance.memory.migrations import MIGRATIONS

        assert db.value("PRAGMA user_version") == len(MIGRATIONS) and db.integrity() == "ok"
        assert db.value("SELECT count(*) FROM memory_keys") == 2  # backfilled once, or kept: never doubled
        if generation_before is not None:
            assert db.value("SELECT value FROM memory_meta WHERE key = 'generation'") >= generation_before
        embedder = MeaningEmbedder()
        store = MemoryStore(db, embedder, model_name="test", dimensions=384)
        known = store.add("the spare key is under the BLUE flower pot", source="web")
        assert known.id == ids["The spare key is under the blue flower pot"] and store.count() == 2
        if store_opened:
            assert not store.needs_reembed()
            assert store.search("where are my keys")[0].memory.id == known.id  # the old vectors, by meaning
        else:
            assert store.reembed() == 2  # memories from before the store get their vectors
        other_db = Database(path)  # another process's write is seen through the migrated triggers
        MemoryStore(other_db, MeaningEmbedder(), model_name="test", dimensions=384).forget(known.id)
        other_db.close()
        assert known.id not in {h.memory.id for h in store.search("spare key")} and store.count() == 1
        assert db.value("SELECT count(*) FROM memory_keys") == 1  # its dedupe key went with it
    finally:
        db.close()


def test_a_new_file_and_an_upgraded_one_have_the_same_store_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_file(tmp_path / "old.db", monkeypatch, store_opened=False)
    schemas = []
    for name in ("old.db", "new.db"):
        db = Database(tmp_path / name)
        MemoryStore(db, MeaningEmbedder(), model_name="test", dimensions=384)
        schemas.append(db.rows("SELECT type, name, sql FROM sqlite_master WHERE name LIKE 'memor%' ORDER BY name"))
        db.close()
    assert schemas[0] == schemas[1]


# --- processes, threads, async ----------------------------------------------------------------------


def test_what_another_process_adds_is_found_here(store: MemoryStore, db: Database) -> None:
    store.add("The bins go out on Tuesday", source="t")
    assert store.search("bins")[0].memory.text == "The bins go out on Tuesday"  # index loaded before
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from appliance.memory.db import Database
from appliance.memory.store import MemoryStore
from tests.test_memory_store import MeaningEmbedder
db = Database(Path({str(db.path)!r}))
store = MemoryStore(db, MeaningEmbedder(), model_name="test", dimensions=384)
print(store.add("The spare key is with the neighbour at number 12", source="cli").id)
db.close()
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    added = int(out.stdout.strip())
    hits = store.search("who has my keys")  # by meaning only: the vector index took in the other's write
    assert hits[0].memory.id == added and hits[0].matched_by == {"vector"}
    assert store.search("neighbour")[0].matched_by == {"vector", "keyword"}


def test_an_id_reused_by_another_connection_is_not_mistaken(db: Database, embedder: MeaningEmbedder) -> None:
    # SQLite gives a deleted top id out again: the other writer's new memory must not keep the old vector here.
    store = MemoryStore(db, embedder, model_name="test", dimensions=384)
    store.add("The bins go out on Tuesday", source="t")
    old = store.add("The spare key is with the neighbour", source="t")
    store.preload()
    other_db = Database(db.path)  # another connection: for this store, as good as another process
    other = MemoryStore(other_db, MeaningEmbedder(), model_name="test", dimensions=384)
    assert other.forget(old.id)
    new = other.add("Choir practice is on Thursday evening", source="t")
    other_db.close()
    assert new.id == old.id
    hit = store.search("choir practice on thursday evening")[0]
    assert hit.memory == new and hit.vector_rank == 1
    assert hit.distance is not None and hit.distance < 0.3  # the choir's vector, not the key's


def test_kinds_filter_both_legs(store: MemoryStore) -> None:
    fact = store.add("The heating turns on at 6am", source="t")
    summary = store.add("We discussed the heating schedule", kind="summary", source="t")
    assert [h.memory for h in store.search("heating", kinds=["fact"])] == [fact]
    assert [h.memory for h in store.search("heating", kinds=["summary"])] == [summary]
    assert {h.memory.id for h in store.search("heating")} == {fact.id, summary.id}


def test_threads_add_and_search_at_once(db: Database, embedder: MeaningEmbedder) -> None:
    store = MemoryStore(db, embedder, model_name="test", dimensions=384)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(25):
                store.add(f"thread {n} remembers item {i}", source="t")
                store.search(f"item {i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and store.count() == 100
    assert store.search("thread 3 remembers item 24", k=1)[0].memory.text == "thread 3 remembers item 24"


def test_async_callers_go_through_db_call(db: Database, embedder: MeaningEmbedder) -> None:
    store = MemoryStore(db, embedder, model_name="test", dimensions=384)

    async def main() -> list[str]:
        await db.call(store.add, "The router reboots at 4am", source="t")
        hits = await db.call(store.search, "router", 5)
        return [h.memory.text for h in hits]

    assert asyncio.run(main()) == ["The router reboots at 4am"]


# --- recall against exact search ------------------------------------------------------------------------


@pytest.mark.parametrize("vector_cache", [True, False], ids=["numpy-index", "sql-vec0"])
def test_recall_at_10_against_exact_float_search(db: Database, vector_cache: bool) -> None:
    embedder = MeaningEmbedder()
    store = MemoryStore(db, embedder, model_name="test", dimensions=384, vector_cache=vector_cache)
    store.EXACT_SEARCH_BELOW = 0  # force the binary first pass, however small the memory
    rng = np.random.default_rng(7)
    vocabulary = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choice(vocabulary, rng.integers(6, 13))) for _ in range(1000)]
    memories = store.add_many([NewMemory(t, "t") for t in texts])
    ids = np.array(sorted({m.id for m in memories}))
    by_id = {m.id: m.text for m in memories}
    matrix = np.array(embedder([by_id[i] for i in ids]))
    recalls = []
    for _ in range(50):
        query = " ".join(rng.choice(vocabulary, 3))
        exact = set(ids[np.argsort(-(matrix @ np.array(embedder([query])[0])))[:10]].tolist())
        found = store.search(query, k=10).vector_ids[:10]
        recalls.append(len(exact & set(found)) / 10)
    assert np.mean(recalls) >= 0.95
