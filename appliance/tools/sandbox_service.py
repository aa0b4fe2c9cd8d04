"""The picoagent-sandbox service: one sandboxed command per connection, on stdin/stdout.

systemd starts it per connection to picoagent-sandbox.socket (``Accept=yes``, the connection as
stdin and stdout). It reads one JSON line ``{"command": ..., "limits": {...}}``, runs the command in
bubblewrap on the workspace given on its command line (never one named by the request), and writes
one JSON line: the outcome, or ``{"error": ..., "fix": ...}``. The caller closing its end stops the
command. It runs apart from the daemon because the daemon's hardened unit may not create namespaces.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from appliance.tools import sandbox

MAX_REQUEST_BYTES = 64 * 1024


def read_request(fd: int) -> dict[str, Any]:
    """The request line (read byte-wise up to its newline, so that nothing after it is consumed)."""
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST_BYTES:
            raise ValueError("request too long")
    request = json.loads(data)
    if not isinstance(request, dict) or not isinstance(request.get("command"), str):
        raise ValueError("expected {command, limits}")
    return request


def limits_from(raw: Any) -> sandbox.Limits:
    """Limits from the request (unknown keys refused)."""
    if not isinstance(raw, dict):
        raise ValueError("limits must be an object")
    return sandbox.Limits(**raw)


def serve_one(workspace: Path, fd_in: int = 0, fd_out: int = 1) -> int:
    """Answer one request; 0 when a command ran (whatever its exit code)."""
    try:
        request = read_request(fd_in)
        limits = limits_from(request.get("limits", {}))
    except (ValueError, TypeError) as exc:
        answer: dict[str, Any] = {"error": f"bad request: {exc}", "fix": "a client bug: see the daemon's log"}
    else:
        try:
            answer = sandbox.run(request["command"], workspace, limits, cancel_fd=fd_in).as_dict()
        except sandbox.SandboxUnavailable as exc:
            answer = {"error": exc.reason, "fix": exc.fix}
    try:
        os.write(fd_out, json.dumps(answer).encode() + b"\n")
    except OSError:
        return 1  # the caller is gone
    return 0 if "error" not in answer else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m appliance.tools.sandbox_service --workspace DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workspace", required=True, help="the folder commands may read and write")
    args = parser.parse_args(argv)
    return serve_one(Path(args.workspace))


if __name__ == "__main__":
    sys.exit(main())
