"""Automatic memory around the turns: compaction, quiet-time extraction, and the memory CLI across processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from appliance.config import Config
from appliance.llm.embeddings import LocalEmbedder
from appliance.llm.scripted import ScriptedModel
from appliance.memory.db import Database
from appliance.memory.keeper import MemoryKeeper
from appliance.memory.store import MemoryStore, NewMemory
from tests.fakes.clock import ManualClock
from tests.helpers import picoagent

ROOT = Path(__file__).resolve().parent.parent


class Clock(ManualClock):
    start = 10_000.0


def keeper_with(tmp_path: Path, config: Config, model: ScriptedModel, clock: Clock) -> tuple[MemoryKeeper, Database]:
    db = Database(tmp_path / "k.db")
    store = MemoryStore(db, None, model_name="none", dimensions=0)
    return MemoryKeeper(config.memory, store, db, model, context_tokens=1000, clock=clock), db


def test_long_history_is_compacted_into_a_recalled_summary(config: Config, tmp_path: Path) -> None:
    model = ScriptedModel()
    model.enqueue(json.dumps({"summary": "We planned Anna's party for 14 March in the garden."}))
    keeper, db = keeper_with(tmp_path, config, model, Clock())
    conversation = db.conversation("web", "c")
    ids = [db.add_message(conversation, "user" if i % 2 == 0 else "assistant", f"message {i} " * 20) for i in range(12)]
    assert keeper.needs_compaction(800) and not keeper.needs_compaction(700)  # 75 % of 1,000 tokens
    summary = asyncio.run(keeper.compact(conversation))
    assert summary == "We planned Anna's party for 14 March in the garden."
    assert model.history[0].json_schema is not None  # constrained, so it always parses
    kept, recalled_summary = keeper.history(conversation, 50)
    assert [m.id for m in kept] == ids[-config.memory.keep_recent :]  # only the last few stay verbatim
    assert recalled_summary == summary
    assert keeper.store.search("party", 3)[0].memory.kind == "summary"  # kept, and found again
    db.close()


def test_a_quiet_conversation_is_swept_for_facts_once(config: Config, tmp_path: Path) -> None:
    model = ScriptedModel()
    model.enqueue(json.dumps({"facts": ["The user's cat is called Miso."]}))
    clock = Clock()
    keeper, db = keeper_with(tmp_path, config, model, clock)
    conversation = db.conversation("web", "q")
    db.add_message(conversation, "user", "My cat is called Miso.")
    assert asyncio.run(keeper.sweep()) == []  # not quiet yet (the message is newer than quiet_minutes)
    clock.now = 10**10
    assert asyncio.run(keeper.sweep()) == [conversation]
    assert [h.memory.text for h in keeper.store.search("cat", 3)] == ["The user's cat is called Miso."]
    assert asyncio.run(keeper.sweep()) == []  # nothing new: no second model call
    assert len(model.history) == 1
    db.close()


def test_only_facts_in_the_persons_own_words_are_kept(config: Config, tmp_path: Path) -> None:
    """The packaged model stored its own invented reply ("a city shaped by brave knights") as the owner's fact:
    the model reads the person's messages only, and a fact it lists that is not in their words is dropped."""
    model = ScriptedModel()
    listed = ["Ada visits on Sunday.", "Ada likes tea.", "It's a city that has been shaped by brave knights."]
    listed += ["Paris is a city shaped by knights.", "Does Ada visit on Sunday?"]  # a name first; a question
    model.enqueue(json.dumps({"facts": [*listed, "Ada visits on Monday."]}))
    keeper, db = keeper_with(tmp_path, config, model, Clock())
    conversation = db.conversation("web", "q")
    db.add_message(conversation, "user", "My sister Ada visits on Sunday.")
    db.add_message(conversation, "assistant", "Lovely! Ada likes tea, I'm sure. Paris is a city shaped by knights.")
    assert asyncio.run(keeper.extract(conversation)) == ["Ada visits on Sunday."]
    assert "Lovely" not in model.history[0].messages[-1].content  # the reply is not read for facts
    assert [h.memory.text for h in keeper.store.search("Ada", 5)] == ["Ada visits on Sunday."]
    db.close()


def test_a_question_and_the_models_answer_to_it_are_no_facts(config: Config, tmp_path: Path) -> None:
    """A walk of the README stored "What is the capital of France?" and "Paris is the capital of France." (the
    small model's answer), and the next such question was answered "You told me ...: What is the capital ..."."""
    model = ScriptedModel()
    model.enqueue(json.dumps({"facts": ["What is the capital of France?", "Paris is the capital of France."]}))
    keeper, db = keeper_with(tmp_path, config, model, Clock())
    conversation = db.conversation("terminal", "default")
    db.add_message(conversation, "user", "What is the capital of France? Answer in one word.")
    db.add_message(conversation, "assistant", 'The answer is "Paris".')
    assert asyncio.run(keeper.extract(conversation)) == []
    db.close()


def test_a_word_or_two_is_no_fact(config: Config, tmp_path: Path) -> None:
    """A README walk found "yes" (its answer to "Turn the porch light on?") and "sunset" stored as facts."""
    model = ScriptedModel()
    model.enqueue(
        json.dumps({"facts": ["yes", "sunset", "Porch light at sunset", "The porch light goes on at sunset."]})
    )
    keeper, db = keeper_with(tmp_path, config, model, Clock())
    conversation = db.conversation("terminal", "default")
    db.add_message(conversation, "user", "yes")
    db.add_message(conversation, "user", "The porch light goes on at sunset.")
    assert asyncio.run(keeper.extract(conversation)) == ["Porch light at sunset", "The porch light goes on at sunset."]
    db.close()


def cli(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    return picoagent("--data-dir", data, "memory", *args, cwd=data, timeout=120)


def test_memory_cli_finds_by_meaning_and_by_keyword_across_processes(tmp_path: Path) -> None:
    for fact in (
        "The key to the garden shed is under the flowerpot by the door.",
        "Anna's birthday is on 14 March.",
        "The NAS is at 192.168.1.40.",
    ):
        added = cli("add", fact, data=tmp_path)
        assert added.returncode == 0, added.stderr
    by_meaning = json.loads(cli("search", "where is the shed key", "--json", data=tmp_path).stdout)
    assert "flowerpot" in by_meaning[0]["text"] and "vector" in by_meaning[0]["matched_by"]
    by_keyword = json.loads(cli("search", "192.168.1.40", "--json", data=tmp_path).stdout)
    assert "192.168.1.40" in by_keyword[0]["text"] and "keyword" in by_keyword[0]["matched_by"]
    exported = cli("export", data=tmp_path)
    assert exported.returncode == 0
    assert "flowerpot" in (tmp_path / "workspace" / "MEMORY.md").read_text()
    forgotten = cli("forget", str(by_keyword[0]["id"]), data=tmp_path)
    assert forgotten.returncode == 0
    assert "192.168.1.40" not in cli("search", "192.168.1.40", data=tmp_path).stdout


def test_recall_applies_the_configured_decay(config: Config, tmp_path: Path) -> None:
    clock = Clock()
    db = Database(tmp_path / "d.db")
    store = MemoryStore(db, None, model_name="none", dimensions=0, clock=clock)
    keeper = MemoryKeeper(config.memory, store, db, ScriptedModel(), context_tokens=1000, clock=clock)

    day = 86_400.0
    store.add_many(
        [
            NewMemory("bike lock code 1234", "t", created_at=clock() - 400 * day),
            NewMemory("The bike lock code was changed last month and it is now 9876", "t", created_at=clock() - day),
        ]
    )
    config.memory.decay_half_life_days = 0
    assert asyncio.run(keeper.recall("bike lock code"))[0] == "bike lock code 1234"  # bm25 alone: the shorter
    config.memory.decay_half_life_days = 30
    assert asyncio.run(keeper.recall("bike lock code"))[0].endswith("now 9876")  # a year older: ranked lower
    db.close()


def test_recall_shows_the_model_only_memories_near_the_message(
    config: Config, tmp_path: Path, minilm: LocalEmbedder
) -> None:
    """A sign-off is near no memory: the small model is shown none, so it cannot read one back ("perfect" got
    "The key to the garden shed is under the flowerpot", a README walk). A question about it still recalls it."""
    db = Database(tmp_path / "r.db")
    store = MemoryStore(
        db, minilm.embed, model_name="minilm", dimensions=minilm.dimensions, embed_query=minilm.embed_query
    )  # as runtime.memory_store builds it
    keeper = MemoryKeeper(config.memory, store, db, ScriptedModel(), context_tokens=1000)
    store.add_many(
        [
            NewMemory("The key to the garden shed is under the flowerpot by the door", "t"),
            NewMemory("My sister's birthday is on the 4th of May", "t"),
        ]
    )
    for sign_off in ("perfect", "got it", "no that's it", "cheers, that's all", "cool"):
        assert asyncio.run(keeper.recall(sign_off)) == [], sign_off
    assert asyncio.run(keeper.recall("where did I leave the shed key?"))[0].startswith("The key to the garden shed")
    assert asyncio.run(keeper.recall("when is my sister's birthday?"))[0].startswith("My sister's birthday")
    db.close()
