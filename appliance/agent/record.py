"""The reply record: what a turn produced and how, as every channel shows or returns it.

Its parts are typed: :class:`Timings`, and each tool call or device act an
:class:`~appliance.tools.result.Action`, which lives beside the tool result it is made from (below the agent).
``as_dict()`` gives the JSON that the API, the ``/ws`` stream and the stored message meta carry, with the
keys and their order as they always were.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from appliance.tools.result import Action


@dataclass(frozen=True)
class Timings:
    """How long a turn took and what it used."""

    ttft_s: float = 0.0  # until the first text
    decode_tps: float = 0.0
    total_s: float = 0.0
    model_s: float = 0.0  # in the local model
    # None on the intent path: no model could run, so the record leaves the cloud out altogether.
    cloud_s: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    rounds: int = 0  # local model calls
    cost_usd: float | None = None

    def as_dict(self) -> dict[str, float]:
        """The timings as JSON-ready data (the cloud's only when the turn could use it)."""
        return {name: value for name, value in vars(self).items() if value is not None}


@dataclass
class ReplyRecord:
    """What a turn produced, and how: the record every channel shows or returns."""

    text: str
    route: str
    reason: str
    actions: list[Action] = field(default_factory=list)
    timings: Timings = field(default_factory=Timings)
    model: str = ""
    session: str = ""
    finish_reason: str = ""
    confidence: dict[str, float] = field(default_factory=dict)  # the local answer's, when the local model ran
    why: str = ""  # the routing decision's code (see appliance.agent.router.Decision)
    blocked: str = ""  # why the cloud was not used although it was wanted ("" when it was not wanted)
    choices: list[str] = field(default_factory=list)  # answers a person may tap ("yes", "no"; "porch", "kitchen")

    def as_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data."""
        return {
            "text": self.text,
            "route": self.route,
            "reason": self.reason,
            "actions": [action.as_dict() for action in self.actions],
            "timings": self.timings.as_dict(),
            "model": self.model,
            "session": self.session,
            "finish_reason": self.finish_reason,
            "confidence": dict(self.confidence),
            "why": self.why,
            "blocked": self.blocked,
            "choices": list(self.choices),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplyRecord:
        """The record :meth:`as_dict` gave (the CLI reads the daemon's reply record back)."""
        fields = {key: value for key, value in data.items() if key not in ("actions", "timings")}
        actions = [Action(**action) for action in data.get("actions", [])]
        return cls(**fields, actions=actions, timings=Timings(**data.get("timings", {})))
