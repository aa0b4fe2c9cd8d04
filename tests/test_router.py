"""The escalation policy: each reason to escalate, each reason not to, and the early abort."""

from __future__ import annotations

import math

import pytest

from appliance.agent.router import LocalOutcome, RoutingContext, after_local, before_local, collapsed, local_route

EDGE = RoutingContext(mode="edge_first", provider="openai")


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        (LocalOutcome(mean_prob=0.3), "confidence 0.30 is below 0.55"),
        (LocalOutcome(failed="timed out"), "the local model failed (timed out)"),
        (LocalOutcome(mean_prob=0.9, prompt_fits=False), "does not fit the local context"),
        (LocalOutcome(mean_prob=0.9, tool_needed="web_fetch"), "web_fetch needs a stronger model"),
        (LocalOutcome(mean_prob=0.9, aborted_early=True), "collapsed mid-way"),
    ],
)
def test_escalates_for_each_reason_when_allowed(outcome: LocalOutcome, reason: str) -> None:
    decision = after_local(EDGE, outcome, 0.55)
    assert decision.route == "cloud" and reason in decision.reason and decision.wanted_cloud
    assert decision.why in ("low_confidence", "local_failed", "too_long", "tool_needed", "collapsed")
    assert decision.blocked == ""


def test_a_confident_local_answer_stands() -> None:
    decision = after_local(EDGE, LocalOutcome(mean_prob=0.8), 0.55)
    assert decision.route == "local" and "confidence 0.80" in decision.reason and not decision.wanted_cloud


@pytest.mark.parametrize(
    ("context", "why"),
    [
        (RoutingContext(mode="local_only", provider="openai"), "local_only"),
        (RoutingContext(mode="edge_first", provider=None), "no cloud provider"),
        (RoutingContext(mode="edge_first", provider="openai", channel_local_only=True), "channel is local-only"),
        (
            RoutingContext(mode="edge_first", provider="openai", conversation_local_only=True),
            "conversation is local-only",
        ),
        (RoutingContext(mode="edge_first", provider="openai", network_up=False), "network is down"),
        (RoutingContext(mode="edge_first", provider="openai", circuit_open=True), "failed repeatedly"),
        (RoutingContext(mode="edge_first", provider="openai", budget_left_usd=0), "budget is used up"),
        (RoutingContext(mode="edge_first", provider="openai", forced="local"), "/local"),
    ],
)
def test_never_escalates_when_not_allowed_and_says_why(context: RoutingContext, why: str) -> None:
    decision = after_local(context, LocalOutcome(mean_prob=0.1), 0.55)
    assert decision.route == "local" and decision.wanted_cloud
    assert decision.why == "low_confidence" and decision.blocked  # a code for `routing stats`
    assert why in decision.reason
    # A fallback when the cloud is an option but not now; plain local when it is off altogether.
    off = decision.blocked in ("local_only", "no_provider", "user_local")
    assert local_route(decision) == ("local" if off else "local_fallback")
    assert ("answered locally" in decision.reason) == (not off)


def test_the_user_and_cloud_first_send_it_straight_to_the_cloud() -> None:
    forced = RoutingContext(mode="edge_first", provider="openai", forced="cloud")
    assert before_local(forced).route == "cloud" and "/cloud" in before_local(forced).reason
    assert before_local(forced).why == "user_cloud"
    # The owner's local_only is absolute: /cloud cannot override it.
    owner_says_no = before_local(RoutingContext(mode="local_only", provider="openai", forced="cloud"))
    assert owner_says_no.route == "local" and owner_says_no.blocked == "local_only" and owner_says_no.wanted_cloud
    assert before_local(RoutingContext(mode="cloud_first", provider="openai")).route == "cloud"
    blocked = RoutingContext(mode="edge_first", provider="openai", forced="cloud", network_up=False)
    assert before_local(blocked).route == "local" and "network is down" in before_local(blocked).reason
    assert before_local(EDGE).route == "local"


def test_early_abort_needs_a_sustained_collapse() -> None:
    sure, unsure = math.log(0.9), math.log(0.05)
    assert not collapsed([unsure] * 5, 0.55)  # too early to judge
    assert not collapsed([sure] * 20 + [unsure], 0.55)  # one unsure word
    assert collapsed([sure] * 4 + [unsure] * 12, 0.55)
