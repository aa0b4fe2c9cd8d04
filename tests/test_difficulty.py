"""The difficulty score: the shipped weights, refusing a model they were not fitted on, and routing by it.

The policy is tested pure (router.before_local / after_local with a score); the turns run the real
MiniLM embedder and the real local model against the fake OpenAI server on 127.0.0.1, whose request
log says what reached the cloud. The prompts are not in tests/eval/prompts.yaml (the weights never saw
them) and sit far from the bar on either side.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from appliance.agent.router import (
    Difficulty,
    LocalOutcome,
    RoutingContext,
    after_local,
    before_local,
    local_route,
)
from appliance.config import Config
from appliance.llm.embeddings import LocalEmbedder
from appliance.llm.local import LocalModel
from appliance.understanding import difficulty
from tests.agents import Routed
from tests.fakes.cloud_api import FakeCloud

HARD = "Write a Go function that merges two sorted slices into one sorted slice."
EASY = "Good evening, how was your day?"
EDGE = RoutingContext(mode="edge_first", provider="openai")


def _weights(tmp_path: Path, **changes: Any) -> Path:
    """A copy of the shipped weights with some fields changed (a new file each time: they are read once per path)."""
    data = json.loads(difficulty.SHIPPED.read_text(encoding="utf-8"))
    data.update(changes)
    path = tmp_path / f"difficulty-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --- the shipped weights ----------------------------------------------------------------------------


def test_the_shipped_weights_load_and_tell_a_greeting_from_code(minilm: LocalEmbedder) -> None:
    model = difficulty.for_embedder(minilm)
    assert model is not None and model.enabled
    assert (model.model, model.dimensions, len(model.weights)) == ("minilm", 384, 384)
    assert 0.5 < model.hard_above < 1.0 and model.cv_auc >= 0.8  # the goal, cross-validated
    assert difficulty.load() is difficulty.load()  # read once
    easy, hard = (model.p_cloud(minilm.embed_query(text)) for text in (EASY, HARD))
    assert 0.0 <= easy < 0.3 < model.hard_above <= hard <= 1.0
    vector = minilm.embed_query(HARD)
    z = sum(w * x for w, x in zip(model.weights, vector, strict=True)) + model.bias
    assert model.p_cloud(vector) == pytest.approx(1 / (1 + 2.718281828459045 ** (-z)))


def test_the_readme_s_examples_of_the_score_are_what_minilm_gives(minilm: LocalEmbedder) -> None:
    """README "Calibration" quotes messages with their scores and which side of the bar they fall on."""
    model = difficulty.for_embedder(minilm)
    assert model is not None
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    quoted = re.findall(r'"([^"]+\?)" scores (0\.\d\d), (over|under) the bar', " ".join(readme.split()))
    assert len(quoted) >= 2, "the README's Calibration paragraph no longer quotes scores"
    for text, shown, side in quoted:
        score = model.p_cloud(minilm.embed_query(text))
        assert (f"{score:.2f}", side) == (shown, "over" if score >= model.hard_above else "under"), text


def test_weights_for_another_width_are_refused_with_a_log_line(
    minilm: LocalEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _weights(tmp_path, dimensions=768, weights=[0.0] * 768)
    with caplog.at_level(logging.WARNING, logger="appliance.understanding.difficulty"):
        assert difficulty.for_embedder(minilm, path) is None
        assert difficulty.for_embedder(minilm, path) is None  # asked again: still off, not logged again
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "signal is off" in lines[0] and "768-dimension" in lines[0] and "384" in lines[0]


def test_weights_for_another_model_are_refused(
    minilm: LocalEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _weights(tmp_path, model="bge-small", file="bge-small-en-v1.5.Q8_0.gguf")
    with caplog.at_level(logging.WARNING, logger="appliance.understanding.difficulty"):
        assert difficulty.for_embedder(minilm, path) is None
    assert "fitted on bge-small's vectors, not minilm's" in caplog.text
    # The same file under another name (a path in memory.embedding_model) is the same model.
    same_file = _weights(tmp_path, model="my-minilm")
    assert difficulty.for_embedder(minilm, same_file) is not None


def test_missing_or_broken_weights_turn_the_signal_off(
    minilm: LocalEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"model": "minilm"}', encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="appliance.understanding.difficulty"):
        assert difficulty.for_embedder(minilm, tmp_path / "absent.json") is None
        assert difficulty.for_embedder(minilm, broken) is None
    assert "no difficulty weights" in caplog.text and "unreadable" in caplog.text
    assert difficulty.for_embedder(minilm, _weights(tmp_path, enabled=False)) is None  # calibration said no


# --- the policy, pure -------------------------------------------------------------------------------


def _ctx(p: float, **kwargs: Any) -> RoutingContext:
    fields: dict[str, Any] = {"mode": "edge_first", "provider": "openai", **kwargs}
    return RoutingContext(difficulty=Difficulty(p, 0.8), **fields)


def test_a_message_over_the_bar_goes_to_the_cloud_before_the_local_model() -> None:
    decision = before_local(_ctx(0.91))
    assert (decision.route, decision.why, decision.wanted_cloud, decision.blocked) == ("cloud", "looks_hard", True, "")
    assert decision.reason == "this looks like a question for a stronger model (0.91)"
    below = before_local(_ctx(0.79))
    assert (below.route, below.why, below.wanted_cloud) == ("local", "edge_first", False)
    assert before_local(_ctx(0.8)).route == "cloud"  # at the bar counts
    assert before_local(EDGE).route == "local"  # no score: as before


def test_after_the_local_answer_the_reason_says_the_message_looked_easy() -> None:
    decision = after_local(_ctx(0.12), LocalOutcome(mean_prob=0.7), 0.3)
    assert decision.route == "local" and decision.why == "confident"
    assert decision.reason == "the message looked easy enough (0.12) and the local model answered with confidence 0.70"
    # The token rule still escalates an answer that falls apart, whatever the score.
    collapsed = after_local(_ctx(0.12), LocalOutcome(mean_prob=0.7, aborted_early=True), 0.3)
    assert collapsed.route == "cloud" and collapsed.why == "collapsed"


@pytest.mark.parametrize(
    ("extra", "blocked", "words"),
    [
        ({"conversation_local_only": True}, "conversation_private", "this conversation is local-only"),
        ({"channel_local_only": True}, "channel_private", "this channel is local-only"),
        ({"network_up": False}, "offline", "the network is down"),
        ({"budget_left_usd": 0.0}, "budget", "budget is used up"),
    ],
)
def test_a_hard_message_that_may_not_leave_is_answered_locally_as_a_fallback(
    extra: dict[str, Any], blocked: str, words: str
) -> None:
    decision = before_local(_ctx(0.95, **extra))
    assert (decision.route, decision.why, decision.wanted_cloud, decision.blocked) == (
        "local",
        "looks_hard",
        True,
        blocked,
    )
    assert (
        decision.reason.startswith("this looks like a question for a stronger model (0.95), but")
        and words in decision.reason
    )
    assert local_route(decision) == "local_fallback"


@pytest.mark.parametrize(
    "ctx",
    [
        _ctx(0.99, mode="local_only"),
        _ctx(0.99, provider=None),
        _ctx(0.99, forced="local"),
        _ctx(0.99, mode="cloud_first", conversation_local_only=True),
    ],
)
def test_where_the_cloud_is_off_the_score_says_nothing(ctx: RoutingContext) -> None:
    decision = before_local(ctx)
    assert decision.route == "local" and decision.why == "edge_first" and "stronger model" not in decision.reason
    assert not decision.wanted_cloud


def test_slash_cloud_and_cloud_first_are_not_the_score_s_business() -> None:
    assert before_local(_ctx(0.01, forced="cloud")).why == "user_cloud"
    assert before_local(_ctx(0.01, mode="cloud_first")).why == "cloud_first"


# --- real turns: MiniLM, the local model, a fake OpenAI server --------------------------------------

Events = list[tuple[str, dict[str, Any]]]


def scenario(
    config: Config, model: LocalModel, embedder: LocalEmbedder, body: Callable[[Routed], Awaitable[None]]
) -> None:
    async def main() -> None:
        async with FakeCloud("openai") as fake:
            config.routing.min_confidence = 0.0  # the token rule never escalates: only the score decides here
            routed = Routed(config, model, fake, understanding=embedder)
            try:
                await body(routed)
            finally:
                await routed.cloud.close()
                routed.db.close()

    asyncio.run(main())


def test_a_hard_message_goes_to_the_cloud_before_any_local_generation_and_a_greeting_stays(
    config: Config, local_model: LocalModel, minilm: LocalEmbedder
) -> None:
    async def body(r: Routed) -> None:
        r.fake.enqueue("func merge(a, b []int) []int { ... }")
        hard, events = await r.ask(HARD)
        assert hard.route == "cloud" and hard.why == "looks_hard", hard.reason
        assert hard.reason.startswith("this looks like a question for a stronger model (0.")
        assert hard.timings.rounds == 0 and hard.timings.model_s == 0  # the local model never ran
        assert "reroute" not in [kind for kind, _ in events]  # nothing local was shown to replace
        assert len(r.fake.requests) == 1 and r.fake.requests[0].body["messages"][-1]["content"] == HARD
        easy, _ = await r.ask(EASY, chat_id="other")
        assert easy.route == "local" and easy.why == "confident" and easy.timings.rounds >= 1
        assert "looked easy enough (0." in easy.reason
        assert len(r.fake.requests) == 1
        assert {(row["route"], row["why"]) for row in r.db.routes(1)} == {
            ("cloud", "looks_hard"),
            ("local", "confident"),
        }

    scenario(config, local_model, minilm, body)


def test_a_cloud_failure_after_the_score_falls_back_to_the_local_answer(
    config: Config, local_model: LocalModel, minilm: LocalEmbedder
) -> None:
    async def body(r: Routed) -> None:
        r.fake.fail_next("500", 10)
        record, _ = await r.ask(HARD)
        assert record.route == "local_fallback" and record.why == "looks_hard" and record.blocked == "cloud_failed"
        assert record.text and record.timings.rounds >= 1 and "answered locally" in record.reason

    scenario(config, local_model, minilm, body)


def test_private_chats_local_only_and_slash_local_never_reach_the_cloud(
    config: Config, local_model: LocalModel, minilm: LocalEmbedder
) -> None:
    async def body(r: Routed) -> None:
        await r.db.call(r.db.set_private, "terminal", "secret", True)
        private, _ = await r.ask(HARD, chat_id="secret")
        assert private.route == "local_fallback" and private.why == "looks_hard"
        assert private.blocked == "conversation_private" and "local-only" in private.reason
        assert private.timings.rounds == 0 and "stronger model" in private.text  # declined: no model guessed
        home, _ = await r.ask(f"/local {HARD}")
        assert home.route == "local" and home.why == "user_local" and "(/local)" in home.reason
        assert home.timings.rounds >= 1  # /local: it tries
        r.agent.config.routing.mode = "local_only"
        r.cloud.routing.mode = "local_only"
        owner_off, _ = await r.ask(HARD, chat_id="owner")
        assert owner_off.route == "local" and owner_off.why == "looks_hard" and owner_off.blocked == "local_only"
        assert owner_off.timings.rounds == 0  # declined too (tests/test_decline.py)
        assert r.fake.requests == []

    scenario(config, local_model, minilm, body)


def test_routing_difficulty_off_leaves_the_decision_to_the_local_answer(
    config: Config, local_model: LocalModel, minilm: LocalEmbedder
) -> None:
    config.routing.difficulty = "off"

    async def body(r: Routed) -> None:
        record, _ = await r.ask(HARD)
        assert record.route == "local" and record.why == "confident" and "looked easy" not in record.reason
        assert r.fake.requests == []

    scenario(config, local_model, minilm, body)
