"""The escalation policy: one small module, one decision at each point, always with its reason.

A message goes to the cloud only when that is *allowed* (the mode permits it, the channel and the
conversation are not local-only, a provider is configured and its circuit is closed, the network is
up, the budget has room) and *needed* (the user asked with /cloud; cloud_first mode; in edge_first, the
message looks hard before any model runs; or the local answer is not good enough: its own token
probabilities say it is unsure, the prompt does not fit the local context, the local model failed or
timed out, or a tool the local model cannot drive is needed). When the cloud is needed but not
allowed, or fails, the local answer stands and the reply says so (route ``local_fallback``).

"Looks hard" is a number the caller brings (:mod:`appliance.understanding.difficulty` scores the message's
embedding): this module only compares it with the bar calibration chose. On the calibration set it
separates the labels far better than the local answer's own token probabilities (tests/eval/REPORT.md).

Forcing a route is one mechanism with several inputs: whatever way a person asks, the turn gets
``force="cloud"`` (or ``"local"``) and :class:`RoutingContext` carries it as ``forced``, which
:meth:`RoutingContext.cloud_blocked` and the decisions below read. The inputs: a message that starts with
``/cloud`` or ``/local`` (:func:`split_forced`, for every path that hands the agent the text: the terminal,
the web chat, ``picoagent chat -m``, the API); a chat channel's ``/cloud TEXT`` command, or a bare ``/cloud``
for the chat's next message (``channels/commands.py`` keeps it and passes it as ``force``); the API's
``"route"`` field; a task's ``--route``; the decline's "ask the cloud" button. :func:`asked_with` says which
input it was, so a reason quotes what the person did.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from appliance.understanding.difficulty import Difficulty

Route = Literal["local", "cloud"]


_FORCED = re.compile(r"/(cloud|local)(?:@\w+)?(?:\s+|$)", re.IGNORECASE)


def split_forced(text: str) -> tuple[Route | None, str]:
    """A message's own route request: ``/cloud what is ...`` -> ("cloud", "what is ...")."""
    stripped = text.lstrip()
    match = _FORCED.match(stripped)
    if match is None:
        return None, text
    return ("cloud" if match.group(1).lower() == "cloud" else "local"), stripped[match.end() :]


def asked_with(route: str, channel: str, *, in_text: bool) -> str:
    """How a person asked for a route, as reasons quote it: the API's field is not a chat's /cloud."""
    if channel == "api" and not in_text:
        return f'"route": "{route}"'
    if channel == "task" and not in_text:
        return f"the task's --route {route}"
    return f"/{route}"


@dataclass(frozen=True)
class RoutingContext:
    """What is true of this message before any model runs."""

    mode: Literal["local_only", "edge_first", "cloud_first"]
    provider: str | None  # the configured cloud provider, None when there is none
    forced: Literal["local", "cloud"] | None = None  # /local or /cloud for this message
    asked_with: str = ""  # how ``forced`` was asked, quoted in reasons: "/cloud", '"route": "cloud"' ...
    # Why the route is forced when no person asked for it, said in reasons instead of "you asked for the
    # cloud": a task on --route auto whose local model cannot plan goes to the cloud by the owner's setup.
    forced_by: str = ""
    channel_local_only: bool = False
    conversation_local_only: bool = False
    network_up: bool = True
    circuit_open: bool = False
    budget_left_usd: float = math.inf
    budget_off: str = ""  # the budget key set to 0, which turns the cloud off ("routing.daily_budget_usd"), or ""
    difficulty: Difficulty | None = None  # None: the signal is off (no embedding model, or routing.difficulty: off)
    # the local model would guess at this message (a question of fact on a model the catalog says guesses:
    # appliance/agent/decline.py would_guess): in edge_first it goes to the cloud first when the cloud may answer
    guesses: str = ""  # the guessing model's name, or ""

    def cloud_blocked(self) -> tuple[str, str] | None:
        """Why the cloud may not be used for this message, as (code, words); None when it may."""
        if self.forced == "local":
            return "user_local", f"you asked for the local model ({self.asked_with or '/local'})"
        if self.mode == "local_only":
            return "local_only", "routing.mode is local_only"
        if self.provider is None:
            return "no_provider", "no cloud provider is configured"
        if self.channel_local_only:
            return "channel_private", "this channel is local-only"
        if self.conversation_local_only:
            return "conversation_private", "this conversation is local-only (/private)"
        if not self.network_up:
            return "offline", "the network is down"
        if self.circuit_open:
            return "circuit_open", f"{self.provider} failed repeatedly and is paused"
        if self.budget_left_usd <= 0:
            if self.budget_off:  # nothing was spent: the owner's 0 keeps the cloud off
                return "budget", f"the cloud is off by budget ({self.budget_off}: 0)"
            return "budget", "the cloud budget is used up"
        return None


@dataclass(frozen=True)
class LocalOutcome:
    """How the local attempt went."""

    mean_prob: float | None = None  # the answer's mean token probability (None: no answer)
    failed: str | None = None  # the error or "timed out"
    prompt_fits: bool = True
    tool_needed: str | None = None  # a tool the local model cannot drive reliably
    aborted_early: bool = False  # confidence collapsed mid-stream and the local attempt was stopped
    guarded: str | None = None  # the reply guard cut the answer because the model lost its way ("repeated itself")


@dataclass(frozen=True)
class Decision:
    """Where a message goes, and why: in words for people, as codes for the statistics.

    ``why`` is what decided (``confident``, ``low_confidence``, ``collapsed``, ``guarded``, ``too_long``,
    ``local_failed``, ``tool_needed``, ``user_cloud``, ``task_cloud`` (no person asked: a task the local model
    cannot plan, ``forced_by``), ``user_local``, ``cloud_first``, ``looks_hard``, ``guesses`` (the model
    guesses at questions of fact, appliance/agent/decline.py: sent to the cloud in edge_first, else declined),
    ``edge_first``); ``blocked`` is why the cloud was not used although it was wanted (a
    :meth:`RoutingContext.cloud_blocked` code, or ``cloud_failed``), else "".
    """

    route: Route
    reason: str
    why: str
    wanted_cloud: bool = False  # the cloud was needed (when route is local, the reply is a fallback)
    blocked: str = ""


# The cloud is not an option at all for these (the owner's mode, no provider, the user's own /local): a
# local answer the routing signals would have escalated is then just "local", though the statistics
# still count that it would have. A person who asked for the cloud is another matter (local_route).
CLOUD_OFF = frozenset({"local_only", "no_provider", "user_local"})


def local_route(decision: Decision) -> Literal["local", "local_fallback"]:
    """The route a local answer gets: ``local_fallback`` when the cloud was wanted and is an option, but not now.

    A person's own request for the cloud (/cloud, ``"route": "cloud"``) that cannot be met is always a
    fallback, whatever blocks it: they asked for something and got something else, and the reply says why.
    """
    if not decision.wanted_cloud:
        return "local"
    if decision.why == "user_cloud":
        return "local_fallback"
    return "local" if decision.blocked in CLOUD_OFF else "local_fallback"


def before_local(ctx: RoutingContext) -> Decision:
    """Whether to skip the local model and go straight to the cloud."""
    blocked = ctx.cloud_blocked()
    if ctx.forced == "cloud":
        asked = ctx.forced_by or f"you asked for the cloud ({ctx.asked_with or '/cloud'})"
        why = "task_cloud" if ctx.forced_by else "user_cloud"
        if blocked is None:
            return Decision("cloud", asked, why, True)
        return Decision("local", f"{asked}, but {blocked[1]}", why, True, blocked[0])
    if ctx.mode == "cloud_first" and blocked is None:
        return Decision("cloud", "routing.mode is cloud_first", "cloud_first", True)
    hard = ctx.difficulty
    # Only in edge_first, and only where the cloud is an option at all: no provider and /local keep the
    # message home without a word about how hard it looked (the local answer is judged as before).
    cloud_off = blocked is not None and blocked[0] in CLOUD_OFF
    if ctx.mode == "edge_first" and hard is not None and hard.looks_hard() and not cloud_off:
        words = f"this looks like a question for a stronger model ({hard.p_cloud:.2f})"
        if blocked is None:
            return Decision("cloud", words, "looks_hard", True)
        return Decision("local", f"{words}, but {blocked[1]}", "looks_hard", True, blocked[0])
    if ctx.mode == "edge_first" and ctx.guesses and blocked is None:  # walk 10: 0.48 stayed local, "Le Grand Paris"
        return Decision("cloud", f"{ctx.guesses} guesses at questions of fact", "guesses", True)
    if blocked is None:
        return Decision("local", "edge-first: the local model answers first", "edge_first")
    return Decision("local", f"local: {blocked[1]}", "edge_first", blocked=blocked[0])


# A decline costs the person an answer where the routing bar only costs a cloud call, so its bar is higher. On
# the calibration set (tests/eval/prompts.yaml, in-sample) 0.85 takes 37 of the 100 cloud prompts and none of
# the 114 local or intent ones; outside it, "what is the capital of Peru" (0.71), "how do I make pancakes"
# (0.75) and "use the current_time tool" (0.83) stay with the model, "write a Python script that renames
# files by date" (0.91) is declined.
DECLINE_ABOVE = 0.85


def declines(ctx: RoutingContext) -> bool:
    """Whether to say no without any model: the message looks very hard and the cloud may not answer it.

    Not for /local (the person asked the Pi to try), nor cloud_first (the owner wants the cloud, and the Pi
    when it cannot be had). A cloud that fails later is not this: the local answer stands then, as before.
    """
    hard = ctx.difficulty
    return (
        hard is not None
        and hard.p_cloud >= max(hard.hard_above, DECLINE_ABOVE)
        and ctx.forced is None
        and ctx.mode != "cloud_first"
        and ctx.cloud_blocked() is not None
    )


def after_local(ctx: RoutingContext, outcome: LocalOutcome, min_confidence: float) -> Decision:
    """Whether the local answer stands or the cloud should answer instead."""
    need = _need(outcome, min_confidence)
    if ctx.forced == "local":  # the person's choice decided, however sure the answer is
        asked = ctx.cloud_blocked()
        assert asked is not None
        if need is None:
            confidence = f"{outcome.mean_prob:.2f}" if outcome.mean_prob is not None else "n/a"
            return Decision("local", f"{asked[1]}; it answered with confidence {confidence}", "user_local")
        return Decision("local", f"{asked[1]}, though {need[1]}", "user_local", True, asked[0])
    if need is None:
        confidence = f"{outcome.mean_prob:.2f}" if outcome.mean_prob is not None else "n/a"
        words = f"the local model answered with confidence {confidence}"
        if ctx.difficulty is not None and not ctx.difficulty.looks_hard():
            words = f"the message looked easy enough ({ctx.difficulty.p_cloud:.2f}) and {words}"
        return Decision("local", words, "confident")
    why, words = need
    blocked = ctx.cloud_blocked()
    if blocked is None:
        return Decision("cloud", words, why, True)
    if blocked[0] in CLOUD_OFF:
        return Decision("local", f"{words} ({blocked[1]})", why, True, blocked[0])
    return Decision("local", f"{words}, but {blocked[1]}: answered locally", why, True, blocked[0])


def _need(outcome: LocalOutcome, min_confidence: float) -> tuple[str, str] | None:
    if outcome.failed is not None:
        return "local_failed", f"the local model failed ({outcome.failed})"
    if not outcome.prompt_fits:
        return "too_long", "the prompt does not fit the local context"
    if outcome.tool_needed is not None:
        return "tool_needed", f"{outcome.tool_needed} needs a stronger model"
    if outcome.aborted_early:
        return "collapsed", "the local answer's confidence collapsed mid-way"
    if outcome.guarded is not None:  # a loop, a recited prompt, tool calls as text: as unsure as it gets
        return "guarded", f"the local answer {outcome.guarded}"
    if outcome.mean_prob is not None and outcome.mean_prob < min_confidence:
        shown = f"{outcome.mean_prob:.2f}"
        if shown == f"{min_confidence:.2f}":  # 0.298 is not "0.30 is below 0.30": enough digits to see it is
            shown = f"{outcome.mean_prob:.3f}"
        return "low_confidence", f"the local answer's confidence {shown} is below {min_confidence:.2f}"
    return None


def collapsed(logprobs: Sequence[float], min_confidence: float, *, window: int = 12, after: int = 8) -> bool:
    """Whether to stop a local answer early: its recent tokens are far less sure than the threshold.

    Checked while the answer streams. It needs ``after`` tokens before judging, and looks at the mean
    probability of the last ``window`` tokens against half the threshold, so one unsure word does not
    abort an answer that is otherwise good.
    """
    if len(logprobs) < max(after, window):
        return False
    recent = logprobs[-window:]
    return sum(math.exp(lp) for lp in recent) / len(recent) < min_confidence / 2
