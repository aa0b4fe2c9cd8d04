"""Human approval for actuator writes: a pending action bound to its exact device and value.

A device with ``approval: required`` never moves on the model's word. Its write becomes a pending
action with an id and an expiry; only a person approves it (`picoagent approvals approve ID`, the web
page, Telegram), and what runs then is exactly the stored device and value — the approver names the
id, never the action. No tool for the model can approve: approving is not in its tool registry.

A call of a tool named in ``tools.require_approval`` waits in the same table, in the same id
namespace (:meth:`ApprovalStore.request_tool`): its row holds the tool's name and arguments instead of
a device and value, and the chat it came from; :mod:`appliance.tools.approvals` runs it once approved.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from appliance.errors import Conflict, NotFound, UsageError
from appliance.memory.db import Database

Status = Literal["pending", "approved", "denied", "expired", "failed"]


class ApprovalError(Conflict, UsageError):
    """An approval cannot be decided (expired, already decided; unknown is UnknownApprovalError)."""


class UnknownApprovalError(NotFound, ApprovalError):
    """No approval has that id."""


@dataclass(frozen=True)
class PendingAction:
    """A write waiting for (or decided by) a person."""

    id: str
    device: str
    value: bool | float | None  # None for a tool call
    requested_by: str
    created_at: float
    expires_at: float
    status: Status
    decided_by: str | None = None
    decided_at: float | None = None
    result: str | None = None
    tool: str | None = None  # a tool call waiting (device is "" then)
    arguments: dict[str, Any] | None = None
    origin: str | None = None  # the chat the call came from, "channel:chat_id" ("" when none)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def describe(self) -> str:
        """One line for people."""
        if self.tool is not None:
            shown = json.dumps(self.arguments or {}, ensure_ascii=False)
            if len(shown) > DESCRIBE_ARGUMENTS_CHARS:
                shown = shown[:DESCRIBE_ARGUMENTS_CHARS] + f"… ({len(shown)} characters)"
            return f"{self.id}: run {self.tool} {shown} (asked by {self.requested_by})"
        value = ("on" if self.value else "off") if isinstance(self.value, bool) else f"{(self.value or 0) * 100:.0f}%"
        return f"{self.id}: set {self.device} {value} (asked by {self.requested_by})"


ID = re.compile(r"\ba-[0-9a-f]{8}\b")  # an approval's id, as :meth:`ApprovalStore.request` makes it
HIDDEN_ID = "ID"


def hide_ids(text: str) -> str:
    """``text`` with every approval id replaced (what a place that is not a person's chat may show)."""
    return ID.sub(HIDDEN_ID, text)


_COLUMNS = (
    "id, device, value, requested_by, created_at, expires_at, status, decided_by, decided_at, result,"
    " tool, arguments, origin"
)
DESCRIBE_ARGUMENTS_CHARS = 300  # a long shell command is cut in one-line lists; as_dict has it whole


def _action(row: tuple[Any, ...]) -> PendingAction:
    names = [c.strip() for c in _COLUMNS.split(",")]
    fields = dict(zip(names, row, strict=True))
    fields["value"] = json.loads(fields["value"])
    fields["arguments"] = json.loads(fields["arguments"]) if fields["arguments"] is not None else None
    return PendingAction(**fields)


class ApprovalStore:
    """Pending actions in the database, so they survive a restart and any process can decide them."""

    def __init__(self, db: Database, *, timeout_s: float = 300.0, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.timeout_s = timeout_s
        self.clock = clock

    def expire_after(self, timeout_s: float) -> None:
        """How long an approval asked from now on waits for a person (SIGHUP: hardware.approval_timeout_s)."""
        self.timeout_s = timeout_s

    def request(self, device: str, value: bool | float, requested_by: str) -> PendingAction:
        """Record a write that needs a person's approval."""
        now = self.clock()
        # Short ids are typed by people; 8 base32 characters are plenty for a handful of pending actions.
        action_id = "a-" + secrets.token_hex(4)
        self.db.write(
            "INSERT INTO approvals (id, device, value, requested_by, created_at, expires_at, status)"
            " VALUES (?, ?, ?, ?, ?, ?, 'pending')",
            (action_id, device, json.dumps(value), requested_by, now, now + self.timeout_s),
        )
        return self.get(action_id)

    def request_tool(self, tool: str, arguments: dict[str, Any], requested_by: str, origin: str = "") -> PendingAction:
        """Record a tool call that needs a person's approval (bound: the id runs exactly this call)."""
        now = self.clock()
        action_id = "a-" + secrets.token_hex(4)
        self.db.write(
            "INSERT INTO approvals (id, device, value, requested_by, created_at, expires_at, status, tool,"
            " arguments, origin) VALUES (?, '', 'null', ?, ?, ?, 'pending', ?, ?, ?)",
            (action_id, requested_by, now, now + self.timeout_s, tool, json.dumps(arguments), origin),
        )
        return self.get(action_id)

    def _expire(self) -> None:
        self.db.write(
            "UPDATE approvals SET status = 'expired' WHERE status = 'pending' AND expires_at <= ?", (self.clock(),)
        )

    def get(self, action_id: str) -> PendingAction:
        """One action by id (UnknownApprovalError when unknown)."""
        self._expire()
        row = self.db.row(f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", (action_id,))
        if row is None:
            raise UnknownApprovalError(
                f"no approval {action_id!r}", fix="picoagent approvals list shows the pending ones"
            )
        return _action(row)

    def pending(self) -> list[PendingAction]:
        """Actions waiting for a person, oldest first."""
        self._expire()
        ids = [r[0] for r in self.db.rows("SELECT id FROM approvals WHERE status = 'pending' ORDER BY created_at")]
        return [self.get(i) for i in ids]

    def decide(self, action_id: str, approve: bool, decided_by: str) -> PendingAction:
        """Approve or deny a pending action, once; returns the stored row as decided (the caller runs it).

        The check and the change are one statement, so of two decisions at the same moment (a Telegram
        button and the CLI, in two processes) exactly one changes the row; the other is told who won.
        """
        status: Status = "approved" if approve else "denied"
        now = self.clock()
        with self.db.transaction() as conn:
            rows = conn.execute(
                "UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?"
                f" WHERE id = ? AND status = 'pending' AND expires_at > ? RETURNING {_COLUMNS}",
                (status, decided_by, now, action_id, now),
            ).fetchall()
        if len(rows) == 1:
            return _action(rows[0])
        action = self.get(action_id)  # unknown, expired or decided: say which
        if action.status in ("expired", "pending"):
            raise ApprovalError(f"approval {action_id} expired; ask again")
        raise ApprovalError(f"approval {action_id} was already {action.status}")

    def record_result(self, action_id: str, result: str, *, failed: bool = False) -> None:
        """What happened when an approved action ran."""
        if failed:
            self.db.write("UPDATE approvals SET status = 'failed', result = ? WHERE id = ?", (result, action_id))
        else:
            self.db.write("UPDATE approvals SET result = ? WHERE id = ?", (result, action_id))
