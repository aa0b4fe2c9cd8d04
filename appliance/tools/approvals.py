"""Approvals for any tool: a call of a tool in ``tools.require_approval`` waits for a person.

The call does not run. It becomes a pending approval in the same table, with the same ids and
expiry, as a device write that needs one (:class:`~appliance.hardware.approvals.ApprovalStore`), so
/approve, /deny, their buttons on every chat channel, ``/api/approvals`` and ``picoagent approvals``
decide both. The model reads "waiting for a person's approval (id a-3f2a)". When a person approves,
exactly the stored call (tool and arguments: the id names nothing else) runs here, in the process
that holds the tool registry (the daemon), once: the row's change from pending to approved is one
SQL statement, so a double approval runs it once. Its result goes to the owner (the notifier, kind
``approval``) and into the conversation it came from. Denied or expired: nothing runs. No tool can
approve: deciding is not in the model's tool registry.

``picoagent tools run`` is a person at the Pi's shell: its registry has no gate and runs at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from appliance.hardware.approvals import ApprovalError, ApprovalStore, PendingAction
from appliance.tools.registry import Tool, ToolRegistry, ToolTurn
from appliance.tools.result import ToolResult

if TYPE_CHECKING:
    from appliance.hardware.devices import DeviceRegistry, SetResult

log = logging.getLogger(__name__)

REPORT_CHARS = 1500  # an approved call's output as the owner and the conversation read it


@dataclass(frozen=True)
class ToolRun:
    """An approved tool call that ran: the stored call and what it gave back."""

    action: PendingAction
    result: ToolResult

    def describe(self) -> str:
        """One line for people."""
        what = f"{self.action.id}: {self.action.tool}"
        if not self.result.ok:
            return f"{what} failed: {self.result.error}"
        output = self.result.output
        return f"{what} ran: {output if len(output) <= REPORT_CHARS else output[:REPORT_CHARS] + '…'}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (what /api/approvals/{id}/approve answers for a tool call)."""
        return {
            "id": self.action.id,
            "tool": self.action.tool,
            "arguments": self.action.arguments,
            "done": True,
            "ok": self.result.ok,
            "output": self.result.output,
            "error": self.result.error,
        }


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether a tool name is one of ``patterns`` (a name, or a prefix ending in ``*``: ``mcp_files_*``)."""
    return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in patterns)


class ToolApprovals:
    """Holds the calls of the tools that need a person, and carries out people's decisions on every approval."""

    def __init__(
        self,
        store: ApprovalStore,
        registry: ToolRegistry,
        names: Iterable[str],
        *,
        devices: DeviceRegistry | None = None,
        timeout_s: float = 30.0,
        requested_by: str = "model",
        notify: Callable[[str, str], object] | None = None,
    ) -> None:
        """``notify``: where an approved call's result goes (the owner's notifier; None: nowhere)."""
        self.store = store
        self.registry = registry
        self.names = tuple(names)
        self.devices = devices
        self.timeout_s = timeout_s  # an approved call's own time limit (agent.tool_timeout_s)
        self.requested_by = requested_by  # who calls the tools here: the model, or an MCP client
        self.notify = notify
        registry.gate = self.hold

    def configure(self, names: Iterable[str], *, timeout_s: float) -> None:
        """A reloaded config's tools that wait for a person and an approved call's time limit (SIGHUP)."""
        self.names = tuple(names)
        self.timeout_s = timeout_s

    def needs(self, name: str) -> bool:
        """Whether calls of this tool wait for a person."""
        return matches(name, self.names)

    async def hold(self, tool: Tool, arguments: dict[str, Any], turn: ToolTurn | None) -> ToolResult | None:
        """The registry's gate: a call that needs a person is stored and answered with its id (None: it runs)."""
        if not self.needs(tool.name):
            return None
        origin = turn.origin if turn is not None else ""
        by = f"{self.requested_by} in {origin}" if origin else self.requested_by
        action = await asyncio.to_thread(self.store.request_tool, tool.name, arguments, by, origin)
        log.info("tool %s waits for approval %s", tool.name, action.id)
        text = (
            f"waiting for a person's approval (id {action.id}): {tool.name} has not run. It runs only when a person"
            f" approves it (/approve {action.id}), and its result then goes to the owner. Tell the person it waits."
        )
        return ToolResult(tool.name, arguments, True, text)

    def pending(self) -> list[PendingAction]:
        """Every approval waiting for a person (device writes and tool calls), oldest first (blocking)."""
        return self.store.pending()

    async def decide(self, action_id: str, approve: bool, decided_by: str) -> PendingAction | SetResult | ToolRun:
        """A person's decision: a device write goes to the devices; an approved tool call runs now, once."""
        current = await asyncio.to_thread(self.store.get, action_id)
        if current.tool is None:
            if self.devices is None:
                raise ApprovalError(
                    f"approval {action_id} is a device write, and no devices are configured",
                    fix="declare the device under devices: again, or let the approval expire",
                )
            return await self.devices.decide(action_id, approve, decided_by)
        action = await asyncio.to_thread(self.store.decide, action_id, approve, decided_by)
        if action.status != "approved" or action.tool is None:
            await self._tell_chat(action, f"Denied by {decided_by}: {action.tool} did not run ({action.id}).")
            return action
        # The stored row this decision won is what runs: its tool and arguments, nothing the caller passed.
        arguments = action.arguments or {}
        result = await self.registry.execute(action.tool, arguments, timeout_s=self.timeout_s, approved=True)
        outcome = result.output if result.ok else (result.error or "failed")
        await asyncio.to_thread(self.store.record_result, action.id, outcome, failed=not result.ok)
        ran = ToolRun(action, result)
        log.info("approval %s: %s ran (%s)", action.id, action.tool, "ok" if result.ok else "failed")
        text = f"Approved by {decided_by}: {ran.describe()}"
        await self._tell_chat(action, text)
        if self.notify is not None:
            try:
                await self.store.db.call(self.notify, text, "approval")
            except Exception:  # the call ran and is recorded; a lost notice must not turn that into an error
                log.exception("approval %s: the owner could not be told", action.id)
        return ran

    async def _tell_chat(self, action: PendingAction, text: str) -> None:
        """Put what became of a call into the conversation it came from (the next turn's history has it)."""
        if not action.origin or ":" not in action.origin:
            return
        channel, chat_id = action.origin.split(":", 1)
        db = self.store.db

        def add() -> None:
            conversation = db.conversation(channel, chat_id)
            db.add_message(conversation, "assistant", text, route="approval", meta={"approval": action.id})

        try:
            await db.call(add)
        except Exception:
            log.exception("approval %s: the conversation could not be told", action.id)
