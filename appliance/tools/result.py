"""What one tool call gave back: the record the model reads, plugins may replace, and a reply keeps.

It lives apart from the registry so that the plugin hooks (``appliance/plugins.py``), which the registry
runs, can name it without importing the registry. :class:`Action` is the call as a reply record
(``appliance/agent/record.py``) keeps it: it lives here, below the agent, as the tools make it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Action:
    """One tool call a turn made (or a device the intent path drove), and what came of it."""

    tool: str
    arguments: dict[str, Any]
    ok: bool
    result: Any = None  # a tool's text; the intent path's device data (a set result, readings, events)
    error: str | None = None
    duration_s: float = 0.0
    cached: bool = False  # reused from an identical read-only call moments ago
    outside: str = ""  # the outside source its text came from ("" when none), e.g. "a web page"

    def as_dict(self) -> dict[str, Any]:
        """The action as JSON-ready data (``cached`` and ``outside`` only when set)."""
        return {
            "tool": self.tool,
            "arguments": self.arguments,
            "ok": self.ok,
            "result": self.result,
            "error": self.error,
            "duration_s": self.duration_s,
            **({"cached": True} if self.cached else {}),
            **({"outside": self.outside} if self.outside else {}),
        }


@dataclass
class ToolResult:
    """What one tool call gave back (or why it failed)."""

    name: str
    arguments: dict[str, Any]
    ok: bool
    output: str
    duration_s: float = 0.0
    error: str | None = None
    cached: bool = False  # reused from an identical read-only call moments ago
    outside: str = ""  # the outside source its text came from ("" when none), e.g. "a web page"
    outside_file: str = ""  # the workspace file it was read from (the model's own when it wrote it this turn)

    def for_model(self) -> str:
        """The text the model reads as the tool's answer."""
        return self.output if self.ok else f"ERROR: {self.error}"

    def as_action(self) -> Action:
        """The call as it appears in a reply record."""
        return Action(
            tool=self.name,
            arguments=self.arguments,
            ok=self.ok,
            result=self.output if self.ok else None,
            error=self.error,
            duration_s=round(self.duration_s, 4),
            cached=self.cached,
            outside=self.outside,
        )

    def as_dict(self) -> dict[str, Any]:
        """The call as JSON-ready data (the ``tool_result`` event; a reply record's action)."""
        return self.as_action().as_dict()


__all__ = ["Action", "ToolResult"]
