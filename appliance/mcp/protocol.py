"""What the MCP client and server share: protocol versions, JSON-RPC framing and error codes.

MCP over stdio is JSON-RPC 2.0, one message per line (no embedded newlines), UTF-8.
"""

from __future__ import annotations

import json
from typing import Any

PROTOCOL_VERSION = "2025-06-18"  # what picoagent asks for, and answers to a version it does not know
SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # tools work the same in each

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def encode(message: dict[str, Any]) -> bytes:
    """One message as a line (json.dumps escapes every newline inside strings)."""
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def request(id_: int | str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC request."""
    return {"jsonrpc": "2.0", "id": id_, "method": method, **({"params": params} if params is not None else {})}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC notification (no answer expected)."""
    return {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}


def response(id_: Any, result: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC result."""
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def error(id_: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": body}
