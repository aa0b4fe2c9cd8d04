"""Prompt states (appliance/llm/prompt_state.py): the prefix's KV state on disk and in RAM, with the real model."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from appliance.agent import context
from appliance.agent.context import Workspace
from appliance.config import Config
from appliance.daemon import Daemon
from appliance.llm import footprint
from appliance.llm.base import ChatMessage, Generation, GenerationRequest
from appliance.llm.local import LocalModel
from appliance.llm.prompt_state import (
    SUFFIX,
    PromptStates,
    SeqState,
    StateCache,
    StateFiles,
    model_identity,
    state_key,
)
from appliance.runtime import Runtime
from appliance.tools import builtin
from appliance.tools.registry import ToolRegistry
from tests.helpers import eventually


@dataclasses.dataclass
class States:
    """The session model with its prompt states in a folder of this test."""

    model: LocalModel
    folder: Path

    def fresh(self, ram_mb: float = 16, disk_mb: int = 64) -> None:
        """New states (nothing in RAM) on the same folder, and an empty KV cache: a restarted daemon."""

        def reset() -> None:
            self.model._load()
            self.model._llm.reset()

        self.model._submit(reset).result()
        self.model._states = PromptStates(int(ram_mb * 2**20), StateFiles(self.folder, disk_mb * 2**20))

    def files(self) -> list[Path]:
        return sorted(self.folder.glob(f"*{SUFFIX}"))


@pytest.fixture
def states(local_model: LocalModel, tmp_path: Path) -> Iterator[States]:
    kept = local_model._states
    s = States(local_model, tmp_path / "prompt-state")
    s.fresh()
    yield s
    local_model._states = kept


def workspace(tmp_path: Path, soul: str = "") -> Workspace:
    space = Workspace(tmp_path / "workspace")
    space.ensure("Pico")
    if soul:
        (space.root / "SOUL.md").write_text(soul, encoding="utf-8")
    return space


def tools() -> ToolRegistry:
    registry = ToolRegistry()
    builtin.register(registry)
    return registry


def chat(space: Workspace, tools: Any, text: str) -> list[ChatMessage]:
    return [ChatMessage("system", context.system_prompt(space, tools)), ChatMessage("user", text)]


def ask(model: LocalModel, messages: list[ChatMessage], max_tokens: int = 6) -> Generation:
    return asyncio.run(model.generate(GenerationRequest(messages=messages, max_tokens=max_tokens, temperature=0.0)))


def prefix_of(space: Workspace) -> list[ChatMessage]:
    return [ChatMessage("system", context.stable_system_prompt(space, True))]


def test_a_loaded_state_answers_as_a_cold_read_does(states: States, tmp_path: Path) -> None:
    space = workspace(tmp_path)
    model = states.model
    built = asyncio.run(model.warm_prefix(prefix_of(space)))
    assert built["state"] == "built" and built["tokens"] > 100
    assert len(states.files()) == 1

    states.fresh()  # a restart: nothing in RAM or in the KV cache, the file on disk
    loaded = asyncio.run(model.warm_prefix(prefix_of(space)))
    assert loaded == {**loaded, "state": "loaded", "tokens": built["tokens"]}
    question = chat(space, tools(), "What is the capital of France?")
    warm = ask(model, question)
    assert warm.cached_tokens >= loaded["tokens"]  # restored from the file counts as not read again

    states.fresh(ram_mb=0)
    model._states.files = None
    cold = ask(model, question)
    assert cold.cached_tokens == 0
    assert warm.text == cold.text and warm.text
    assert warm.token_logprobs == pytest.approx(cold.token_logprobs, abs=1e-2)


def test_the_key_changes_with_the_model_the_prefix_and_the_context(states: States) -> None:
    model = states.model
    model._submit(model._load).result()
    identity = model_identity(model.path, model._llm)
    assert identity["n_ctx"] == 2048 and "type_k" in identity and identity["size"] == model.path.stat().st_size
    tokens = [1, 2, 3, 4]
    key = state_key(identity, tokens)
    assert key == state_key(dict(identity), list(tokens))
    others = [
        state_key({**identity, "model": "other.gguf"}, tokens),
        state_key({**identity, "mtime_ns": identity["mtime_ns"] + 1}, tokens),
        state_key({**identity, "n_ctx": 4096}, tokens),
        state_key({**identity, "type_k": identity["type_k"] + 1}, tokens),
        state_key({**identity, "llama_cpp": "0.0.0"}, tokens),
        state_key(identity, [1, 2, 3, 5]),
        state_key(identity, [1, 2, 3]),
    ]
    assert len({key, *others}) == len(others) + 1


@pytest.mark.parametrize("damage", ["truncate", "flip", "header", "empty"])
def test_a_damaged_state_file_is_ignored_and_built_again(states: States, tmp_path: Path, damage: str) -> None:
    space = workspace(tmp_path)
    model = states.model
    assert asyncio.run(model.warm_prefix(prefix_of(space)))["state"] == "built"
    [path] = states.files()
    raw = path.read_bytes()
    damaged = {
        "truncate": raw[: len(raw) // 2],
        "flip": raw[:-100] + bytes([raw[-100] ^ 0xFF]) + raw[-99:],
        "header": b"not a state\n" + raw,
        "empty": b"",
    }[damage]
    path.write_bytes(damaged)

    states.fresh()
    assert asyncio.run(model.warm_prefix(prefix_of(space)))["state"] == "built"
    assert path.read_bytes() == raw  # written again, whole
    states.fresh()
    assert asyncio.run(model.warm_prefix(prefix_of(space)))["state"] == "loaded"


def test_state_files_stay_within_their_bound_oldest_used_removed_first(tmp_path: Path) -> None:
    files = StateFiles(tmp_path, max_bytes=250_000)
    state = SeqState((1, 2, 3), b"x" * 100_000)
    for key in ("a", "b"):
        files.save(key, state)
    assert files.load("a", state.tokens) == state  # "a" is now the most recently used
    files.save("c", state)
    assert sorted(p.stem for p in tmp_path.glob(f"*{SUFFIX}")) == ["a", "c"]
    assert files.total_bytes() <= 250_000
    files.save("big", SeqState((1,), b"x" * 300_000))  # larger than the bound: never written
    assert not files.path("big").exists()
    assert files.load("a", (1, 2, 4)) is None and not files.path("a").exists()  # stale: other tokens


def test_the_ram_cache_keeps_to_its_bound_least_recently_used_out_first() -> None:
    cache = StateCache(max_bytes=3_000)
    a, b, c = (SeqState((n, 1, 2), b"x" * 900) for n in (1, 2, 3))
    for state in (a, b, c):
        cache.put(state)
    assert len(cache) == 3 and cache.nbytes <= 3_000
    assert cache.best([1, 1, 2, 9]) == (a, 3)
    cache.touch(a)  # put back into the KV cache: now the most recent
    cache.put(SeqState((4,), b"x" * 900))
    assert cache.best([2, 1, 2]) == (None, 0)  # b was the least recently used
    assert cache.nbytes <= 3_000
    longer = SeqState((1, 1, 2, 7), b"x" * 950)
    cache.put(longer)  # holds all that a holds: a goes
    assert cache.best([1, 1, 2]) == (longer, 3) and len(cache) == 3
    assert cache.covers((1, 1, 2)) and cache.covers((1, 1, 2, 7)) and not cache.covers((1, 1, 2, 7, 8))
    cache.put(SeqState((5,), b"x" * 4_000))  # larger than the bound: not kept, nothing dropped
    assert len(cache) == 3 and cache.nbytes <= 3_000


def test_prompt_states_kept_in_ram_stay_within_prompt_cache_mb(states: States) -> None:
    model = states.model
    f16 = footprint.resolved(model.kv_type, model.batch_size, model.ubatch_size)[0] == "f16"
    bound = 6 if f16 else 3  # about 370 tokens of the packaged model's KV cache (q8_0: half): two of these prompts
    states.fresh(ram_mb=bound)
    for topic in ("the sea", "mountains", "the sea", "bread", "rivers", "mountains"):
        system = f"You answer questions about {topic}. " + "Be brief, kind and exact. " * 12
        ask(model, [ChatMessage("system", system), ChatMessage("user", f"Tell me about {topic}.")], max_tokens=2)
    stats = model.prompt_cache_stats()
    assert 0 < stats["ram_mb"] <= bound and stats["snapshots"] >= 3 and stats["entries"] == 2
    assert stats["restores"] == 1  # the sea's start came back from RAM; mountains had been pushed out


@pytest.mark.parametrize("ram_mb", [16, 0])
def test_a_fact_extraction_between_two_chat_turns_leaves_the_prefix_cached(
    states: States, config: Config, ram_mb: int
) -> None:
    states.fresh(ram_mb=ram_mb)
    config.agent.local_tools = 0  # every tool offered every turn: the whole warmed prefix is each turn's start
    config.agent.max_reply_tokens = 8  # what is cached is the question here, not the reply

    async def main() -> tuple[int, int, int]:
        runtime = Runtime.open(config, model=states.model)
        try:
            agent = runtime.agent
            assert agent.memory is not None
            warm = await states.model.warm_prefix(agent.prefix_messages())
            await agent.turn("My sister Ada lives in Lyon.")
            conversation = await runtime.db.call(runtime.db.conversation, "terminal", "default")
            await agent.memory.extract(conversation)  # the side job: its own prompt replaces the chat's
            second = await agent.turn("Tell me about spring flowers.")
            return warm["tokens"], second.timings.cached_tokens, second.timings.prompt_tokens
        finally:
            runtime.close()

    prefix, cached, prompt = asyncio.run(main())
    assert prompt > prefix > 100
    if ram_mb:
        assert cached >= prefix
    else:
        assert cached < prefix  # today's behaviour without the cache: the chat prompt is read again


def test_sighup_with_a_changed_soul_warms_the_new_prefix(states: States, config: Config) -> None:
    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        runtime = Runtime.open(config, model=states.model)
        daemon = Daemon(config)
        daemon._runtime = runtime  # the runtime a started daemon runs (Daemon.run builds it)
        daemon.state = SimpleNamespace(runtime=runtime)  # type: ignore[assignment]
        try:
            await daemon._preload()
            first = states.model.prompt_cache_stats()
            (runtime.workspace.root / "SOUL.md").write_text("You are Brisk, a terse assistant.\n", encoding="utf-8")
            level = logging.getLogger().level
            try:
                daemon.reload()
            finally:
                logging.getLogger().setLevel(level)
            await eventually(lambda: len(states.files()) == 2, 60, "the new prefix's state file")
            await eventually(lambda: states.model.prompt_cache_stats()["prefix"] == "built", 60, "the new prefix")
            return first, states.model.prompt_cache_stats()
        finally:
            await daemon.chores.stop()
            runtime.close()

    first, second = asyncio.run(main())
    assert first["prefix"] == "built" and second["prefix"] == "built"
    assert second["prefix_tokens"] != first["prefix_tokens"]


def test_a_state_folder_that_cannot_be_written_loses_nothing_but_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "taken").write_text("a file where the folder should be")
    files = StateFiles(tmp_path / "taken" / "prompt-state", max_bytes=2**20)
    state = SeqState((1, 2), b"x" * 100)
    files.save("a", state)
    assert files.load("a", state.tokens) is None and files.total_bytes() == 0
    assert "prompt state not saved" in caplog.text
