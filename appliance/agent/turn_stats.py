"""What one turn of the agent keeps while it runs: its timings, tokens, the text streamed so far, the
tool budget and the tools offered; the loop (:mod:`appliance.agent.loop`) fills it in."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from appliance.errors import ModelError
from appliance.tools.registry import Tool, ToolTurn

if TYPE_CHECKING:  # the guard loads with the first local answer (appliance/agent/local_turn.py)
    from appliance.agent.reply_guard import Guarded, ReplyGuard

EventSink = Callable[[str, dict[str, Any]], None]


@dataclass
class TurnStats:
    """One turn's running figures and state."""

    started: float
    first_text_at: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    model_s: float = 0.0
    rounds: int = 0
    partial: str = ""  # the reply text streamed so far
    last_prompt_tokens: int = 0
    client: str = ""
    emit: EventSink | None = None
    watch: bool = False  # stop the local answer when its confidence collapses, and escalate cloud_tools
    error: ModelError | None = None  # why the last local attempt failed
    cloud_error: str = ""  # why the cloud could not answer
    declines: bool = False  # a cloud that fails: the question is declined, the Pi's model would only guess (decline.py)
    confidence: dict[str, float] = field(default_factory=dict)  # the local answer's
    tools: ToolTurn | None = None  # the turn's tool budget, shared by the local and the cloud rounds
    offered: list[Tool] = field(default_factory=list)  # the tools the local model is shown (ranked)
    guard: ReplyGuard | None = None  # the reply guard, with this turn's prompt instructions
    guarded: Guarded | None = None  # its verdict on the last local answer

    def emit_(self, kind: str, data: dict[str, Any]) -> None:
        """Pass an event on, keeping the streamed text (for a stopped turn) and the time of the first."""
        if kind == "text":
            if not self.first_text_at and data["delta"].strip():
                self.first_text_at = time.perf_counter()
            self.partial += data["delta"]
        elif kind == "reroute":
            self.partial = ""
        if self.emit is not None:
            self.emit(kind, data)
