"""The escalation policy: each reason to escalate, each reason not to, and the early abort."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from appliance.agent.router import (
    Decision,
    Difficulty,
    LocalOutcome,
    RoutingContext,
    after_local,
    before_local,
    collapsed,
    local_route,
)

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


def test_a_confidence_just_below_the_bar_is_shown_with_the_digit_that_says_so() -> None:
    """Walk 9: "the local answer's confidence 0.30 is below 0.30" (0.298 rounded)."""
    decision = after_local(EDGE, LocalOutcome(mean_prob=0.298), 0.30)
    assert "confidence 0.298 is below 0.30" in decision.reason, decision.reason


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
    # a code for `routing stats`; the person's own /local is what decided
    assert decision.why == ("user_local" if context.forced == "local" else "low_confidence") and decision.blocked
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


# --- what the README's "Cloud escalation" says, decision by decision (issue 33) ----------------------


@pytest.mark.parametrize("blocked_by", ["local_only", "no_provider"])
def test_a_request_for_the_cloud_that_cannot_be_met_is_a_fallback_that_says_why(blocked_by: str) -> None:
    """A person asked for the cloud and did not get it: `local_fallback`, as the reply record's table says."""
    context = (
        RoutingContext(mode="local_only", provider="openai", forced="cloud", asked_with="/cloud")
        if blocked_by == "local_only"
        else RoutingContext(mode="edge_first", provider=None, forced="cloud", asked_with="/cloud")
    )
    decision = before_local(context)
    assert decision.route == "local" and decision.why == "user_cloud" and decision.blocked == blocked_by
    assert local_route(decision) == "local_fallback"
    assert decision.reason.startswith("you asked for the cloud (/cloud), but ")
    assert ("routing.mode is local_only" if blocked_by == "local_only" else "no cloud provider") in decision.reason


def test_an_unsure_answer_in_local_only_stays_plain_local() -> None:
    """Not asked for: the owner's local_only is the answer, and a low confidence is no fallback."""
    decision = after_local(RoutingContext(mode="local_only", provider="openai"), LocalOutcome(mean_prob=0.1), 0.55)
    assert local_route(decision) == "local" and decision.blocked == "local_only"


def test_the_reason_names_how_the_route_was_asked_for() -> None:
    """The API's `"route": "cloud"` is not `/cloud`: the reason quotes what was used."""
    asked = RoutingContext(mode="edge_first", provider="openai", forced="cloud", asked_with='"route": "cloud"')
    api = before_local(asked)
    assert api.route == "cloud" and api.reason == 'you asked for the cloud ("route": "cloud")'
    assert "/cloud" not in api.reason
    local = RoutingContext(mode="edge_first", provider="openai", forced="local", asked_with='"route": "local"')
    assert local.cloud_blocked() == ("user_local", 'you asked for the local model ("route": "local")')


def test_a_task_sent_to_the_cloud_is_not_counted_as_a_person_asking() -> None:
    """A task on --route auto that the local model cannot plan goes to the cloud with ``forced_by``: its
    decision is ``task_cloud`` (routing stats counted it as ``user_cloud``, a README walk found); a failed
    cloud then answers locally as a fallback."""
    words = "the task's --route auto sends it to the cloud"
    task = RoutingContext(mode="edge_first", provider="openai", forced="cloud", forced_by=words)
    assert before_local(task) == Decision("cloud", words, "task_cloud", True)
    down = before_local(replace(task, network_up=False))
    assert down.route == "local" and down.why == "task_cloud" and down.reason.startswith(words + ", but ")
    assert local_route(down) == "local_fallback"


@pytest.mark.parametrize("mean_prob", [0.9, 0.1])
def test_a_forced_local_answer_reports_the_person_not_the_confidence(mean_prob: float) -> None:
    """`route: local` on any message: the decision is the person's (`user_local`), confident or not."""
    context = RoutingContext(
        mode="edge_first",
        provider="openai",
        forced="local",
        asked_with='"route": "local"',
        difficulty=Difficulty(0.9, 0.65),
    )
    decision = after_local(context, LocalOutcome(mean_prob=mean_prob), 0.55)
    assert decision.route == "local" and decision.why == "user_local" and local_route(decision) == "local"
    assert decision.reason.startswith('you asked for the local model ("route": "local")')
    assert "confident" not in decision.why and "looked easy" not in decision.reason
    # The statistics still count that the cloud would have been wanted for an unsure answer.
    assert decision.blocked == ("user_local" if mean_prob < 0.55 else "")
