"""The escalation policy: one small module, one decision at each point, always with its reason.

A message goes to the cloud only when that is *allowed* (the mode permits it, the channel and the
conversation are not local-only, a provider is configured and its circuit is closed, the network is
up, the budget has room) and *needed* (the user asked with /cloud; cloud_first mode; or the local
answer is not good enough: its own token probabilities say it is unsure, the prompt does not fit the
local context, the local model failed or timed out, or a tool the local model cannot drive is
needed). When the cloud is needed but not allowed, or fails, the local answer stands and the reply
says so (route ``local_fallback``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Route = Literal["local", "cloud"]


@dataclass(frozen=True)
class RoutingContext:
    """What is true of this message before any model runs."""

    mode: Literal["local_only", "edge_first", "cloud_first"]
    provider: str | None  # the configured cloud provider, None when there is none
    forced: Literal["local", "cloud"] | None = None  # /local or /cloud for this message
    channel_local_only: bool = False
    conversation_local_only: bool = False
    network_up: bool = True
    circuit_open: bool = False
    budget_left_usd: float = math.inf

    def cloud_blocked(self) -> str | None:
        """Why the cloud may not be used for this message (None when it may)."""
        if self.forced == "local":
            return "you asked for the local model (/local)"
        if self.mode == "local_only" and self.forced != "cloud":
            return "routing.mode is local_only"
        if self.provider is None:
            return "no cloud provider is configured"
        if self.channel_local_only:
            return "this channel is local-only"
        if self.conversation_local_only:
            return "this conversation is local-only"
        if not self.network_up:
            return "the network is down"
        if self.circuit_open:
            return f"{self.provider} failed repeatedly and is paused"
        if self.budget_left_usd <= 0:
            return "the cloud budget is used up"
        return None


@dataclass(frozen=True)
class LocalOutcome:
    """How the local attempt went."""

    mean_prob: float | None = None  # the answer's mean token probability (None: no answer)
    failed: str | None = None  # the error or "timed out"
    prompt_fits: bool = True
    tool_needed: str | None = None  # a tool the local model cannot drive reliably
    aborted_early: bool = False  # confidence collapsed mid-stream and the local attempt was stopped


@dataclass(frozen=True)
class Decision:
    """Where a message goes, and why."""

    route: Route
    reason: str
    wanted_cloud: bool = False  # the cloud was needed (when route is local, the reply is a fallback)


def before_local(ctx: RoutingContext) -> Decision:
    """Whether to skip the local model and go straight to the cloud."""
    blocked = ctx.cloud_blocked()
    if ctx.forced == "cloud":
        if blocked is None:
            return Decision("cloud", "you asked for the cloud (/cloud)", True)
        return Decision("local", f"you asked for the cloud, but {blocked}", True)
    if ctx.mode == "cloud_first" and blocked is None:
        return Decision("cloud", "routing.mode is cloud_first", True)
    return Decision("local", "edge-first: the local model answers first" if blocked is None else f"local: {blocked}")


def after_local(ctx: RoutingContext, outcome: LocalOutcome, min_confidence: float) -> Decision:
    """Whether the local answer stands or the cloud should answer instead."""
    need = _need(outcome, min_confidence)
    if need is None:
        confidence = f"{outcome.mean_prob:.2f}" if outcome.mean_prob is not None else "n/a"
        return Decision("local", f"the local model answered with confidence {confidence}")
    blocked = ctx.cloud_blocked()
    if blocked is None:
        return Decision("cloud", need, True)
    return Decision("local", f"{need}, but {blocked}: answered locally", True)


def _need(outcome: LocalOutcome, min_confidence: float) -> str | None:
    if outcome.failed is not None:
        return f"the local model failed ({outcome.failed})"
    if not outcome.prompt_fits:
        return "the prompt does not fit the local context"
    if outcome.tool_needed is not None:
        return f"{outcome.tool_needed} needs a stronger model"
    if outcome.aborted_early:
        return "the local answer's confidence collapsed mid-way"
    if outcome.mean_prob is not None and outcome.mean_prob < min_confidence:
        return f"the local answer's confidence {outcome.mean_prob:.2f} is below {min_confidence:.2f}"
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
