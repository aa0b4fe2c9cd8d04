"""The memory store across changes: a new embedding model (keyword search until re-embedded, a re-embed that
resumes, an embedder that fails), no embedder or no sqlite-vec, the index growing and shrinking, and an old
database file upgraded by the migrations to the schema a new file has."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from appliance.memory.db import Database
from appliance.memory.store import MemoryStore, NewMemory
from tests import memory_store_fixtures
from tests.memory_store_fixtures import MeaningEmbedder

embedder = memory_store_fixtures.embedder  # the shared fixture, taken by this module's tests


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
