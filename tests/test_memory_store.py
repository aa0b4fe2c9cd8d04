"""The memory store: add, hybrid search (vectors + FTS5, fused by RRF), forget, prune, export, dedupe, and
several processes, threads and async callers at once (a new model and an old file: test_memory_store_upgrades.py).

Vectors come from ``MeaningEmbedder`` (tests/memory_store_fixtures.py), a deterministic test embedder: the real
embedding model is tested in test_embeddings.py; these tests are about storing and ranking.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appliance.errors import UsageError
from appliance.memory.db import Database
from appliance.memory.fusion import Weights
from appliance.memory.store import MemoryStore, NewMemory
from tests import memory_store_fixtures
from tests.memory_store_fixtures import DAY, ROOT, Clock, MeaningEmbedder, unit

embedder = memory_store_fixtures.embedder  # the shared fixture, taken by this module's tests
store = memory_store_fixtures.store  # the shared fixture, taken by this module's tests


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
from tests.memory_store_fixtures import MeaningEmbedder
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
