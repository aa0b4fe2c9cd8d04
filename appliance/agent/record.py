"""The reply record: what a turn produced and how, as every channel shows or returns it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ReplyRecord:
    """What a turn produced, and how: the record every channel shows or returns."""

    text: str
    route: str
    reason: str
    actions: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    model: str = ""
    session: str = ""
    finish_reason: str = ""
    confidence: dict[str, float] = field(default_factory=dict)  # the local answer's, when the local model ran
    why: str = ""  # the routing decision's code (see appliance.agent.router.Decision)
    blocked: str = ""  # why the cloud was not used although it was wanted ("" when it was not wanted)
    choices: list[str] = field(default_factory=list)  # answers a person may tap ("yes", "no"; "porch", "kitchen")

    def as_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data."""
        return asdict(self)
