"""Only the tools that matter in the local prompt: ranking by meaning (real MiniLM), and what the model sees."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from appliance.agent.context import TOOL_CALL_START
from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime


@pytest.fixture
def runtime(config: Config) -> Iterator[Runtime]:
    config.memory.extract_after_messages = 0
    rt = Runtime.open(config, model=ScriptedModel())
    assert rt.agent.understanding is not None, "needs the embedding model (make install)"
    yield rt
    rt.close()


def offered(rt: Runtime, text: str, stored: list[object] | None = None) -> list[str]:
    assert rt.agent.understanding is not None
    return [t.name for t in asyncio.run(rt.agent.understanding.offered_tools(text, stored or []))]


# Phrasings unlike the tools' own examples: the ranking must generalise, not match strings.
@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("can you tell me the date?", "current_time"),
        ("what's 45 divided by 9?", "calculator"),
        ("please note that the plumber comes on friday", "remember"),
        ("when is my mother's birthday?", "recall"),
        ("summarise the page at https://example.org/news for me", "web_fetch"),
        ("is the raspberry getting too warm?", "system_health"),
        ("put my packing list in a file called trip.txt", "write_file"),
        ("switch the fan off", "device_set"),
    ],
)
def test_the_tool_a_message_needs_is_offered(runtime: Runtime, text: str, tool: str) -> None:
    names = offered(runtime, text)
    assert tool in names, names
    assert len(names) <= runtime.config.agent.local_tools


def test_small_talk_gets_no_tools(runtime: Runtime) -> None:
    for text in ("hi, how are you?", "tell me a joke", "good night!"):
        assert offered(runtime, text) == [], text


class _Stored:
    def __init__(self, role: str, content: str, meta: dict[str, object] | None = None) -> None:
        self.role, self.content, self.meta = role, content, meta or {}


def test_tools_used_in_the_conversation_stay_offered(runtime: Runtime) -> None:
    history = [
        _Stored("user", "how much is 12 times 7?"),
        _Stored("assistant", "84", {"actions": [{"tool": "calculator", "arguments": {"expression": "12*7"}}]}),
    ]
    assert "calculator" in offered(runtime, "thanks, that's great", history)
    assert offered(runtime, "thanks, that's great") == []  # the history is what kept it


def test_the_local_model_sees_only_the_offered_tools(runtime: Runtime) -> None:
    model = runtime.model
    assert isinstance(model, ScriptedModel)
    model.enqueue(TOOL_CALL_START, '{"name": "current_time", "arguments": {}}', "It is noon.")
    # a date the clock's grounded answer does not give ("what's the date" needs no model at all), asked of the
    # model on purpose (/local): with the cloud off, the desk would otherwise say what it knows of the clock
    record = asyncio.run(
        runtime.agent.turn("what was the date 3 days ago?", channel="test", chat_id="t", force="local")
    )
    assert record.actions and record.actions[0].tool == "current_time"
    free, call = model.history[0], model.history[1]
    system = free.messages[0].content
    assert "current_time" in system and "- shell(" not in system and "- write_file(" not in system
    assert call.json_schema is not None
    options = call.json_schema.get("anyOf", [call.json_schema])
    names = {o["properties"]["name"]["const"] for o in options}
    assert "current_time" in names and names <= set(offered(runtime, "what was the date 3 days ago?"))
    assert "shell" not in names


def test_local_tools_0_offers_every_tool(config: Config) -> None:
    config.agent.local_tools = 0
    rt = Runtime.open(config, model=ScriptedModel())
    try:
        assert offered(rt, "hi, how are you?") == [t.name for t in rt.agent.tools]
    finally:
        rt.close()


def test_within_a_conversation_the_list_only_grows_in_a_fixed_order(runtime: Runtime) -> None:
    """The tool list ends the system prompt: kept in place, the KV cache still holds the turn before."""
    first = offered(runtime, "what's the date today?")
    assert first == ["current_time"]
    history = [_Stored("user", "what's the date today?"), _Stored("assistant", "Monday", {"offered": first})]
    second = offered(runtime, "and how much is 17 times 23?", history)
    assert second[: len(first)] == first and "calculator" in second[len(first) :]
    history += [_Stored("user", "and how much is 17 times 23?"), _Stored("assistant", "391", {"offered": second})]
    assert offered(runtime, "thanks!", history) == second  # nothing new needed: the very same list


def test_the_offered_tools_are_kept_with_the_reply(runtime: Runtime) -> None:
    asyncio.run(runtime.agent.turn("what was the date 3 days ago?", channel="test", chat_id="k", force="local"))
    conversation = runtime.db.conversation("test", "k")
    reply = runtime.db.recent_messages(conversation, 2)[-1]
    assert reply.role == "assistant" and reply.meta["offered"] == ["current_time"]


def test_the_tools_and_profiles_vectors_are_kept_for_the_next_process(config: Config) -> None:
    """A one-shot command (chat -m) reuses what an earlier run embedded instead of ~60 texts again."""
    first = Runtime.open(config, model=ScriptedModel())
    try:
        assert first.agent.understanding is not None
        asyncio.run(first.agent.prepare_understanding())
        cached = first.db.value("SELECT count(*) FROM embedding_cache")
        assert cached >= len(list(first.agent.tools))
    finally:
        first.close()
    second = Runtime.open(config, model=ScriptedModel())
    try:
        understanding = second.agent.understanding
        assert understanding is not None
        before = understanding.embedder.embedded
        asyncio.run(second.agent.prepare_understanding())
        assert understanding.embedder.embedded - before <= 1  # at most the probe message, no profile or tool
        assert offered(second, "what's the date today?") == ["current_time"]
    finally:
        second.close()


def test_messages_arriving_together_embed_the_tools_once(config: Config) -> None:
    rt = Runtime.open(config, model=ScriptedModel())
    try:
        understanding = rt.agent.understanding
        assert understanding is not None
        understanding.tool_ranker._texts = understanding.embedder.aembed_queries  # no kept vectors: all embedded
        before = understanding.embedder.embedded

        async def together() -> None:
            texts = [f"what time is it in city {i}?" for i in range(20)]
            await asyncio.gather(*(understanding.offered_tools(t, []) for t in texts))

        asyncio.run(together())
        tool_texts = sum(1 + len(t.examples) for t in rt.agent.tools)
        assert understanding.embedder.embedded - before == tool_texts + 20  # once for the tools, once a message
    finally:
        rt.close()
