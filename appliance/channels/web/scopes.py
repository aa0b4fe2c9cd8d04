"""What an API token may do: its scope, and the one table of which scope each route needs.

``chat`` talks to the assistant (the web chat's socket, POST /api/chat, the OpenAI-compatible /v1 API) and
reads its own conversations' history;
``read`` only reads status, history, devices, approvals, events, jobs, tasks, skills and memory, and cannot talk (a
chat turn drives the assistant's tools, so a read-only token that could chat would not be read-only);
``devices`` talks, reads, switches devices and decides approvals; ``admin`` is the owner (a browser logged
in with the password is always admin). ``GRANTS`` says what each holds. A route missing from the table
needs ``admin``, so a new route is closed to narrower tokens until someone decides otherwise here.
"""

from __future__ import annotations

from typing import Literal

from appliance.errors import UsageError

Scope = Literal["chat", "read", "devices", "admin"]
Need = Literal["any", "chat", "read", "devices", "admin"]  # "any": every token (its own session, the API's map)
SCOPES: tuple[Scope, ...] = ("chat", "read", "devices", "admin")
GRANTS: dict[Scope, frozenset[Need]] = {
    "chat": frozenset({"any", "chat"}),
    "read": frozenset({"any", "read"}),
    "devices": frozenset({"any", "chat", "read", "devices"}),
    "admin": frozenset({"any", "chat", "read", "devices", "admin"}),
}
DEFAULT_SCOPE: Scope = "chat"  # what `picoagent tokens add` gives: the least a program needs to chat

SCOPE_HELP: dict[Scope, str] = {
    "chat": "chat only: the web chat socket, /api/chat (and its own /api/history) and the OpenAI-compatible /v1 API",
    "read": "read only: status, history, devices, approvals, events, jobs, tasks, skills and memory (no chat)",
    "devices": "chat, read, and switch devices and approve or deny their pending writes",
    "admin": "everything the owner can do",
}
# "the API token 'x' may ...", in refusals
SCOPE_MAY: dict[Scope, str] = {
    "chat": "chat only",
    "read": "read only",
    "devices": "chat, read and switch devices",
    "admin": "do everything",
}

# (method, route as aiohttp names it) -> the narrowest scope that may use it. HEAD is looked up as GET.
ROUTE_SCOPES: dict[tuple[str, str], Need] = {
    ("GET", "/chat"): "chat",
    ("GET", "/ws"): "chat",
    ("POST", "/api/chat"): "chat",
    ("POST", "/api/reset"): "chat",
    ("POST", "/v1/chat/completions"): "chat",
    ("GET", "/v1/models"): "chat",
    ("GET", "/api/session"): "any",
    ("GET", "/api/openapi.json"): "any",
    ("POST", "/logout"): "any",
    ("GET", "/"): "read",
    ("GET", "/api/status"): "read",
    # every token: a chat-only one reads its own conversations (stored apart: chat.conversation_key)
    ("GET", "/api/history"): "any",
    ("GET", "/api/devices"): "read",
    ("GET", "/api/devices/{name}"): "read",
    ("GET", "/api/approvals"): "read",
    ("GET", "/api/events"): "read",
    ("GET", "/api/notifications"): "read",
    ("GET", "/api/cron"): "read",
    ("GET", "/api/cron/{id}/logs"): "read",
    ("GET", "/api/tasks"): "read",
    ("GET", "/api/tasks/{id}/logs"): "read",
    ("GET", "/api/memory"): "read",  # what it remembers (editing and forgetting need admin)
    ("GET", "/api/memory/export"): "read",
    ("GET", "/api/conversations"): "read",
    ("GET", "/api/skills"): "read",
    ("POST", "/api/devices/{name}"): "devices",
    ("POST", "/api/approvals/{id}/{decision}"): "devices",
    # Probing a bus or driving a device that is no configured one is the owner's: neither is a read.
    ("GET", "/api/devices/scan"): "admin",
    ("POST", "/api/devices/try"): "admin",
}


def needed_scope(method: str, route: str) -> Need:
    """The narrowest scope that may call ``method route`` (admin for any route the table does not name)."""
    return ROUTE_SCOPES.get(("GET" if method == "HEAD" else method, route), "admin")


def allows(have: Scope, need: Need) -> bool:
    """Whether a token of scope ``have`` may use a route that needs ``need``."""
    return need in GRANTS[have]


def widened(have: Scope, need: Scope) -> Scope:
    """The narrowest scope holding all of ``have`` and ``need`` (``read`` and ``chat`` together: ``devices``)."""
    wanted = GRANTS[have] | GRANTS[need]
    return next(scope for scope in SCOPES if GRANTS[scope] >= wanted)


def parse_scope(value: str) -> Scope:
    """A scope named by a person, or a UsageError listing the scopes."""
    if value not in SCOPES:
        raise UsageError(
            f"unknown token scope {value!r}",
            fix="use one of: " + "; ".join(f"{name} ({SCOPE_HELP[name]})" for name in SCOPES),
        )
    return value
