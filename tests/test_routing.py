"""Edge-first routing end to end: the real local model, fake OpenAI / Anthropic servers on 127.0.0.1.

Each test checks where a message was answered, the reason the record gives, and what reached the fake
cloud (its request log): escalation for each reason, fallbacks when the cloud fails, the budget, and
local-only chats that must never reach it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from appliance.agent.escalation import CloudRoute, has_default_route
from appliance.agent.router import split_forced
from appliance.config import Config
from appliance.errors import UsageError
from appliance.llm.base import ChatMessage, GenerationRequest
from appliance.llm.cloud import OpenAIProvider
from appliance.llm.local import LocalModel
from appliance.tools import builtin
from tests.agents import CALCULATE, Routed
from tests.fakes.cloud_api import FakeCloud, Flavour

FLAVOURS: list[Flavour] = ["openai", "anthropic"]
Events = list[tuple[str, dict[str, Any]]]


def scenario(
    flavour: Flavour, config: Config, model: LocalModel, body: Callable[[Routed], Awaitable[None]], **options: Any
) -> None:
    """Run ``body`` against a fresh fake cloud of this flavour."""

    async def main() -> None:
        async with FakeCloud(flavour) as fake:
            routed = Routed(config, model, fake, **options)
            try:
                await body(routed)
            finally:
                await routed.close()

    asyncio.run(main())


# --- escalation, for each reason -------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_unsure_local_answer_escalates_and_the_ledger_counts_it(
    flavour: Flavour, config: Config, local_model: LocalModel
) -> None:
    config.routing.min_confidence = 1.0  # no answer is that sure: every one escalates

    async def body(r: Routed) -> None:
        # small talk, not a question of fact (one of those goes to the cloud first on the packaged model, which
        # guesses: test_decline.py); here the local model answers first and is judged
        r.fake.enqueue("Paris is lovely in the spring.")
        record, events = await r.ask("Say something nice about Paris.")
        assert record.route == "cloud" and record.text == "Paris is lovely in the spring."
        assert record.why in ("low_confidence", "collapsed") and "confidence" in record.reason
        assert record.model == "fake/fake-model" and record.confidence["mean_prob"] < 1.0
        assert len(r.fake.requests) == 1
        kinds = [kind for kind, _ in events]
        assert "reroute" in kinds and kinds.index("reroute") < len(kinds) - 1  # the cloud text follows it
        after = "".join(d["delta"] for k, d in events[kinds.index("reroute") :] if k == "text")
        assert after == record.text  # what streams after the reroute is the cloud's answer, whole
        usage = {row["provider"]: row for row in r.db.usage(1)}
        assert usage["local"]["prompt_tokens"] > 0  # the local attempt is counted too
        cloud = usage["fake"]
        assert cloud["route"] == "cloud" and cloud["completion_tokens"] == 6
        expected = (cloud["prompt_tokens"] * 3.0 + 6 * 15.0) / 1e6
        assert math.isclose(cloud["cost_usd"], expected) and math.isclose(record.timings.cost_usd, expected)
        assert r.db.routes(1) == [{"route": "cloud", "why": record.why, "blocked": "", "turns": 1}]

    scenario(flavour, config, local_model, body)


def test_a_sure_enough_local_answer_stays_on_the_pi(config: Config, local_model: LocalModel) -> None:
    config.routing.min_confidence = 0.0

    async def body(r: Routed) -> None:
        record, events = await r.ask("Good evening, how are you?")  # small talk: the packaged model answers it
        assert record.route == "local" and record.why == "confident" and record.text
        assert r.fake.requests == [] and "reroute" not in [k for k, _ in events]
        assert [row["provider"] for row in r.db.usage(1)] == ["local"]

    scenario("openai", config, local_model, body)


def test_a_prompt_too_long_for_the_local_context_goes_to_the_cloud(config: Config, local_model: LocalModel) -> None:
    config.routing.min_confidence = 0.0
    long_text = "Summarise this log: " + " ".join(f"line {i} sensor ok." for i in range(900))

    async def body(r: Routed) -> None:
        r.fake.enqueue("All sensors were fine.")
        record, _ = await r.ask(long_text)
        assert record.route == "cloud" and record.why == "too_long" and "does not fit" in record.reason
        assert record.text == "All sensors were fine."

    scenario("anthropic", config, local_model, body)


def test_a_tool_the_local_model_cannot_drive_is_left_to_the_cloud(config: Config, local_model: LocalModel) -> None:
    config.routing.min_confidence = 0.0
    config.routing.cloud_tools = [tool.name for tool in builtin.default_registry()]

    async def body(r: Routed) -> None:
        r.fake.enqueue("It is 391.")
        record, _ = await r.ask(CALCULATE, tool_choice="required")
        assert record.route == "cloud" and record.why == "tool_needed" and "needs a stronger model" in record.reason
        assert record.actions == []  # the local model's call was not run: the cloud decides again

    scenario("openai", config, local_model, body)


def test_the_local_answer_is_stopped_as_soon_as_its_confidence_collapses(
    config: Config, local_model: LocalModel
) -> None:
    config.routing.min_confidence = 0.95  # collapse: the last 12 tokens average below 0.475
    config.agent.temperature = 0.0

    async def body(r: Routed) -> None:
        r.agent.config.agent.max_reply_tokens = 96
        r.fake.enqueue("Egun on (Basque), habari za asubuhi (Swahili), magandang umaga (Tagalog).")
        record, _ = await r.ask("Translate 'good morning' into Swahili, Tagalog and Basque.")
        assert record.route == "cloud" and record.why == "collapsed", record
        local = next(row for row in r.db.usage(1) if row["provider"] == "local")
        assert local["completion_tokens"] < 96  # stopped before the reply budget ran out

    scenario("openai", config, local_model, body)


def test_should_stop_ends_a_local_generation_with_finish_reason_aborted(local_model: LocalModel) -> None:
    request = GenerationRequest(
        [ChatMessage("user", "Count from one to fifty in words.")],
        max_tokens=64,
        temperature=0.0,
        should_stop=lambda logprobs: len(logprobs) >= 5,
    )
    generation = asyncio.run(local_model.generate(request))
    assert generation.finish_reason == "aborted" and generation.completion_tokens == 5


# --- the user asks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_slash_cloud_goes_straight_to_the_cloud(flavour: Flavour, config: Config, local_model: LocalModel) -> None:
    config.routing.min_confidence = 0.0

    async def body(r: Routed) -> None:
        r.fake.enqueue("Straight from the cloud.")
        record, _ = await r.ask("/cloud What is a qubit?")
        assert record.route == "cloud" and record.why == "user_cloud" and "/cloud" in record.reason
        assert record.timings.rounds == 0  # the local model never ran
        sent = r.fake.requests[0].body
        last = sent["messages"][-1]
        assert last["content"] == "What is a qubit?"  # the command itself is not sent
        if flavour == "anthropic":
            assert isinstance(sent["system"], str) and all(m["role"] != "system" for m in sent["messages"])

    scenario(flavour, config, local_model, body)


def test_cloud_first_mode_asks_the_cloud_and_slash_local_keeps_a_message_home(
    config: Config, local_model: LocalModel
) -> None:
    config.routing.min_confidence = 0.0

    async def body(r: Routed) -> None:
        r.agent.config.routing.mode = "cloud_first"
        r.fake.enqueue("From the cloud.")
        first, _ = await r.ask("Hello there.")
        assert first.route == "cloud" and first.why == "cloud_first"
        second, _ = await r.ask("/local Hello again.")
        assert second.route == "local" and len(r.fake.requests) == 1

    scenario("anthropic", config, local_model, body)


def test_a_bare_slash_cloud_asks_for_the_message(config: Config, local_model: LocalModel) -> None:
    async def body(r: Routed) -> None:
        with pytest.raises(UsageError, match="needs the message after it"):
            await r.ask("/cloud   ")
        assert r.fake.requests == []

    scenario("openai", config, local_model, body)


def test_split_forced_reads_the_route_a_message_asks_for() -> None:
    assert split_forced("/cloud what is x") == ("cloud", "what is x")
    assert split_forced("  /LOCAL@picobot hi") == ("local", "hi")
    assert split_forced("/cloudy skies") == (None, "/cloudy skies")
    assert split_forced("tell me about /cloud") == (None, "tell me about /cloud")


# --- the cloud uses tools natively ------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_cloud_calls_a_tool_and_reads_its_result_in_the_native_format(
    flavour: Flavour, config: Config, local_model: LocalModel
) -> None:
    async def body(r: Routed) -> None:
        r.fake.enqueue(tool_calls=[{"name": "calculator", "arguments": {"expression": "17 * 23"}}])
        r.fake.enqueue("17 times 23 is 391.")
        record, events = await r.ask("/cloud What is 17 times 23?")
        assert record.route == "cloud" and record.text == "17 times 23 is 391."
        assert [a.tool for a in record.actions] == ["calculator"] and record.actions[0].result == "391"
        assert ("tool_call", {"tool": "calculator", "arguments": {"expression": "17 * 23"}}) in events
        assert [req.outcome for req in r.fake.requests] == ["ok", "ok"]  # the fake checks the tool protocol
        second = r.fake.requests[1].body
        assert any(tool.get("function", tool).get("name") == "calculator" for tool in r.fake.requests[0].body["tools"])
        if flavour == "openai":
            call = second["messages"][-2]["tool_calls"][0]
            assert second["messages"][-1] == {"role": "tool", "tool_call_id": call["id"], "content": "391"}
        else:
            use = second["messages"][-2]["content"][-1]
            assert use["type"] == "tool_use" and use["input"] == {"expression": "17 * 23"}
            result = second["messages"][-1]["content"][0]
            assert result == {"type": "tool_result", "tool_use_id": use["id"], "content": "391"}

    scenario(flavour, config, local_model, body)


# --- when the cloud fails, the Pi answers ------------------------------------------------------------


@pytest.mark.parametrize(("flavour", "failure"), [("openai", "500"), ("anthropic", "drop"), ("openai", "malformed")])
def test_a_cloud_outage_gives_the_local_answer_as_local_fallback(
    flavour: Flavour, failure: Any, config: Config, local_model: LocalModel
) -> None:
    config.routing.min_confidence = 1.0

    async def body(r: Routed) -> None:
        r.fake.fail_next(failure, 10)
        record, events = await r.ask("Tell me a joke about France.")  # a request to make something: no fact
        assert record.route == "local_fallback" and record.blocked == "cloud_failed"
        assert "fake failed" in record.reason and "answered locally" in record.reason
        assert record.text and record.model == local_model.name
        assert [k for k, d in events if k == "reroute"] == ["reroute", "reroute"]  # to the cloud and back
        assert r.fake.requests  # it was tried

    scenario(flavour, config, local_model, body)


@pytest.mark.parametrize("asked", ["What is the capital of France?", "/cloud What year did World War II end?"])
def test_a_cloud_outage_declines_a_question_of_fact_the_packaged_model_would_guess(
    asked: str, config: Config, local_model: LocalModel
) -> None:
    """A README walk: /cloud with the provider down showed the 135M's "The year 2023 was the end of World War II."
    A model the catalog says guesses (answers: false) is not asked a question of fact the cloud failed to answer."""
    config.routing.min_confidence = 1.0

    async def body(r: Routed) -> None:
        r.fake.fail_next("500", 10)
        record, events = await r.ask(asked)
        assert record.text.startswith("I can't answer that reliably: it needs a stronger model than the small one")
        assert "the cloud model could not be reached just now" in record.text and "2023" not in record.text
        assert record.route == "local_fallback" and record.blocked == "cloud_failed" and record.model == ""
        assert "fake" in record.reason and "guesses at questions of fact" in record.reason
        assert record.why == ("user_cloud" if asked.startswith("/cloud") else "guesses")
        assert r.fake.requests  # the cloud was tried first
        assert "".join(d["delta"] for k, d in events if k == "text").endswith(record.text)  # shown as it is
        assert "cloud_s" in record.as_dict()["timings"]  # the time the cloud took is its own, not the Pi's

    scenario("openai", config, local_model, body)


def test_a_cloud_timeout_falls_back_and_a_dead_provider_is_then_skipped(
    config: Config, local_model: LocalModel
) -> None:
    config.routing.min_confidence = 1.0

    async def body(r: Routed) -> None:
        r.fake.fail_next("hang", 10)
        record, _ = await r.ask("Say hello.")
        assert record.route == "local_fallback" and record.blocked == "cloud_failed"
        assert len(r.fake.requests) == 1  # one attempt: the total timeout leaves no room for another
        # The breaker (threshold 1 here) is now open: the next unsure answer does not even try.
        again, _ = await r.ask("Say hello again.")
        assert again.route == "local_fallback" and again.blocked == "circuit_open"
        assert len(r.fake.requests) == 1

    scenario("anthropic", config, local_model, body, timeout_s=0.5, breaker_threshold=1)


def test_budget_exhaustion_stops_cloud_calls(config: Config, local_model: LocalModel) -> None:
    config.routing.min_confidence = 1.0

    async def body(r: Routed) -> None:
        r.agent.config.routing.daily_budget_usd = 0.0001  # one request at these prices spends it
        r.fake.enqueue("An answer that costs money.")
        first, _ = await r.ask("What is the capital of France?")
        assert first.route == "cloud" and first.timings.cost_usd > 0.0001
        second, _ = await r.ask("What is the capital of Spain?")
        assert second.route == "local_fallback" and second.blocked == "budget" and "budget" in second.reason
        assert len(r.fake.requests) == 1
        today, month = r.db.spent_usd()
        assert today == month == pytest.approx(first.timings.cost_usd)

    scenario("openai", config, local_model, body)


# --- what may never leave the Pi ------------------------------------------------------------------


def test_local_only_chats_channels_and_mode_never_reach_the_cloud(config: Config, local_model: LocalModel) -> None:
    config.routing.min_confidence = 1.0  # every answer would escalate if it could

    async def body(r: Routed) -> None:
        await r.db.call(r.db.set_private, "terminal", "secret", True)
        private, _ = await r.ask("My locker code is 4512.", chat_id="secret")
        assert private.route == "local_fallback" and private.blocked == "conversation_private"
        forced, _ = await r.ask("/cloud My locker code is 4512.", chat_id="secret")
        assert forced.route == "local_fallback" and forced.blocked == "conversation_private"
        r.agent.config.routing.local_only_channels.append("web")
        on_web, _ = await r.ask("My bank PIN is 1234.", channel="web")
        assert on_web.route == "local_fallback" and on_web.blocked == "channel_private"
        r.agent.config.routing.mode = "local_only"
        r.cloud.routing.mode = "local_only"
        owner_off, _ = await r.ask("/cloud What is 2+2?")
        assert owner_off.route == "local_fallback" and owner_off.blocked == "local_only"  # asked for, not given
        assert r.fake.requests == []  # nothing reached the cloud
        stats = {(row["why"], row["blocked"]) for row in r.db.routes(1)}
        assert ("low_confidence", "conversation_private") in stats and ("user_cloud", "local_only") in stats

    scenario("openai", config, local_model, body)


def test_no_network_means_no_cloud_attempt(config: Config, local_model: LocalModel, tmp_path: Path) -> None:
    config.routing.min_confidence = 1.0

    async def main() -> None:
        async with FakeCloud("openai") as fake:
            r = Routed(config, local_model, fake)
            remote = OpenAIProvider("fake", api_base="https://api.example.com/v1", api_key="k", model="m")
            r.cloud = r.agent.cloud = CloudRoute(config, r.db, remote, route_exists=lambda: False)
            try:
                record, _ = await r.ask("Say hello.")
                assert record.route == "local_fallback" and record.blocked == "offline"
                assert "network is down" in record.reason
            finally:
                await r.close()

    asyncio.run(main())


def test_the_default_route_is_read_from_proc(tmp_path: Path) -> None:
    header = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
    (tmp_path / "route").write_text(header + "eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")
    (tmp_path / "ipv6_route").write_text("")
    assert not has_default_route(tmp_path)  # a LAN route only
    (tmp_path / "route").write_text(header + "eth0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n")
    assert has_default_route(tmp_path)


def test_a_rate_limited_cloud_is_retried_after_retry_after(config: Config, local_model: LocalModel) -> None:
    async def body(r: Routed) -> None:
        r.fake.fail_next("429", 1, retry_after=0)
        r.fake.enqueue("Answered on the second try.")
        record, _ = await r.ask("/cloud Hello?")
        assert record.route == "cloud" and record.text == "Answered on the second try."
        assert [req.outcome for req in r.fake.requests] == ["429", "ok"]

    scenario("anthropic", config, local_model, body)
