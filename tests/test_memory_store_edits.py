"""The memory store's changes one by one, as the Settings page makes them: a text edited in place (found by its
new words and meaning, not its old ones, here and in another process's index), several forgotten at once with
their vectors and keywords, and the newest page by page.

Vectors come from ``MeaningEmbedder`` (tests/memory_store_fixtures.py), as in test_memory_store.py.
"""

from __future__ import annotations

import pytest

from appliance.errors import UsageError
from appliance.memory.db import Database
from appliance.memory.store import MemoryStore
from tests import memory_store_fixtures
from tests.memory_store_fixtures import DAY, Clock, MeaningEmbedder

embedder = memory_store_fixtures.embedder  # the shared fixture, taken by this module's tests
store = memory_store_fixtures.store  # the shared fixture, taken by this module's tests

BOILER = "The boiler is serviced every October"
KEY = "The spare key is under the flower pot"


def counts(db: Database, memory_id: int) -> tuple[int, int]:
    """This memory's rows in memory_vec and memory_bits."""
    vec = db.value("SELECT count(*) FROM memory_vec WHERE rowid = ?", (memory_id,))
    bits = db.value("SELECT count(*) FROM memory_bits WHERE rowid = ?", (memory_id,))
    return int(vec), int(bits)


def fts(db: Database, word: str) -> list[int]:
    """The ids the keyword index finds for a word."""
    return [r[0] for r in db.rows("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", (word,))]


def test_edit_changes_the_text_in_place_found_by_its_new_words_and_meaning(store: MemoryStore, db: Database) -> None:
    other = store.add("Anna's birthday is on the 3rd of May", source="t")
    before = store.add(BOILER, source="telegram", conversation_id=7)
    assert store.search("boiler")[0].memory == before  # the index is loaded with the old vector

    edited = store.edit(before.id, f"  {KEY} ")
    assert edited is not None and edited.id == before.id and edited.text == KEY
    assert (edited.source, edited.created_at, edited.conversation_id) == ("telegram", before.created_at, 7)
    assert edited.embedded_with == "test@384" and counts(db, before.id) == (1, 1)
    assert fts(db, "boiler") == [] and fts(db, "key") == [before.id]

    by_meaning = store.search("keys", k=2)  # "keys" is not a keyword of it: found by its new vector
    assert by_meaning[0].memory == edited and by_meaning[0].matched_by == {"vector"}
    old_words = store.search(BOILER, k=2)
    assert all("keyword" not in h.matched_by for h in old_words)
    hit = next(h for h in old_words if h.memory.id == before.id)
    assert hit.distance is not None and hit.distance > 0.5  # the old vector (distance 0) is gone
    assert store.get(other.id) == other and store.count() == 2


def test_an_edit_made_by_another_connection_replaces_the_vector_held_here(
    db: Database, embedder: MeaningEmbedder
) -> None:
    store = MemoryStore(db, embedder, model_name="test", dimensions=384)
    store.add("Anna's birthday is on the 3rd of May", source="t")
    memory = store.add(BOILER, source="t")
    store.preload()
    other_db = Database(db.path)  # another connection: for this store, as good as another process
    MemoryStore(other_db, MeaningEmbedder(), model_name="test", dimensions=384).edit(memory.id, KEY)
    other_db.close()
    hit = store.search("where are my keys")[0]
    assert hit.memory.id == memory.id and hit.memory.text == KEY and hit.matched_by == {"vector"}
    stale = next(h for h in store.search(BOILER) if h.memory.id == memory.id)
    assert stale.distance is not None and stale.distance > 0.5


def test_edit_merges_with_a_text_already_remembered_and_refuses_nonsense(
    store: MemoryStore, db: Database, embedder: MeaningEmbedder
) -> None:
    key, boiler = store.add(KEY, source="t"), store.add(BOILER, source="t")
    embedded = len(embedder.calls)
    assert store.edit(boiler.id, BOILER) == boiler and len(embedder.calls) == embedded  # unchanged: not embedded
    merged = store.edit(boiler.id, KEY.upper())  # the same text as another memory, case aside
    assert merged == key and store.get(boiler.id) is None and store.count() == 1
    assert counts(db, boiler.id) == (0, 0) and fts(db, "boiler") == []
    assert store.edit(boiler.id, "anything") is None  # no such memory
    with pytest.raises(UsageError, match="no text"):
        store.edit(key.id, "   ")
    assert store.get(key.id) == key
    recased = store.edit(key.id, KEY.lower())  # its own text in other case: stays itself
    assert recased is not None and recased.id == key.id and recased.text == KEY.lower()


def test_edit_without_a_model_keeps_the_memory_findable_by_keyword(db: Database) -> None:
    store = MemoryStore(db, None, model_name="none", dimensions=0)
    memory = store.add(BOILER, source="t")
    edited = store.edit(memory.id, KEY)
    assert edited is not None and edited.embedded_with is None
    hits = store.search("spare key")
    assert hits.mode == "keyword" and [h.memory.id for h in hits] == [memory.id]
    assert store.search("boiler") == []


def test_forget_many_deletes_exactly_those_with_their_vectors_and_keywords(store: MemoryStore, db: Database) -> None:
    keep = store.add(KEY, source="t")
    gone = [store.add(BOILER, source="t"), store.add("The boiler pressure should be 1.5 bar", source="t")]
    assert store.forget_many([m.id for m in gone] + [999_999]) == 2  # an unknown id deletes nothing
    assert [store.get(m.id) for m in gone] == [None, None] and store.get(keep.id) == keep
    assert all(counts(db, m.id) == (0, 0) for m in gone) and fts(db, "boiler") == []
    assert [h.memory.id for h in store.search("boiler pressure serviced")] == [keep.id]
    assert store.forget_many([]) == 0


def test_newest_pages_through_the_memories_newest_first(db: Database, embedder: MeaningEmbedder) -> None:
    clock = Clock()
    store = MemoryStore(db, embedder, model_name="test", dimensions=384, clock=clock)
    made = []
    for i, kind in enumerate(["fact", "summary", "fact", "fact"]):
        made.append(store.add(f"memory number {i}", kind=kind, source="t"))
        clock.now += DAY
    assert store.newest(2) == [made[3], made[2]] and store.newest(2, 2) == [made[1], made[0]]
    assert store.newest(10, 0, ["summary"]) == [made[1]] and store.newest(10, 4) == []
    with pytest.raises(UsageError, match="kinds"):
        store.newest(10, 0, ["opinion"])
