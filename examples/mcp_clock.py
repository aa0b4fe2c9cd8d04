#!/usr/bin/env python3
"""A small MCP server that needs nothing but Python's standard library: the README's MCP example.

It answers over stdio (newline-delimited JSON-RPC 2.0, MCP 2025-06-18) with one tool, ``now``: the
date and time in a time zone (the ``timezone`` argument, else ``$TZ``, else UTC). Run by picoagent
as configured under ``tools.mcp`` (see README, "Plugins, skills and MCP"); by hand, type
``{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}`` into it. Copy it as the start of your own.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

PROTOCOL = "2025-06-18"
NOW = {
    "name": "now",
    "description": "The current date and time in a time zone.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "timezone": {"type": "string", "description": "an IANA zone like Europe/Brussels (default: the server's)"}
        },
    },
}


def now(arguments: dict[str, Any]) -> dict[str, Any]:
    """The ``now`` tool: a tools/call result (an unknown zone is a tool error the model can read)."""
    zone = arguments.get("timezone") or os.environ.get("TZ") or "UTC"
    try:
        shown = datetime.now(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")
    except (ZoneInfoNotFoundError, ValueError):
        return {"content": [{"type": "text", "text": f"unknown time zone {zone!r}"}], "isError": True}
    return {"content": [{"type": "text", "text": f"{shown} ({zone})"}], "isError": False}


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    """The response to one request (None for a notification)."""
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:
        return None  # notifications/initialized, notifications/cancelled: nothing to say
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", PROTOCOL),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "clock", "version": "1.0"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [NOW]}
    elif method == "tools/call" and params.get("name") == "now":
        result = now(params.get("arguments") or {})
    else:
        error = {"code": -32601, "message": f"unknown method or tool: {method} {params.get('name', '')}".strip()}
        return {"jsonrpc": "2.0", "id": request["id"], "error": error}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    """Answer requests from stdin until it closes."""
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError:
            reply: dict[str, Any] | None = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32700, "message": "not JSON"},
            }
        else:
            reply = answer(request) if isinstance(request, dict) else None
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
