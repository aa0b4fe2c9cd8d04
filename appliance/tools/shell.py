"""The shell tool: a command in the bubblewrap sandbox, run here or by the picoagent-sandbox service.

Under the hardened daemon unit (no namespaces allowed) commands go over a Unix socket to the
socket-activated picoagent-sandbox service, which runs :func:`appliance.tools.sandbox.run` for one
request per connection (``python -m appliance.tools.sandbox_service``). Elsewhere bwrap runs in this
process. There is no third way: without a sandbox the tool refuses, it never runs a command bare.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.config import ShellConfig
from appliance.errors import ToolError
from appliance.tools import quota
from appliance.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from appliance.tools import sandbox

SERVICE_SOCKET = "/run/picoagent-sandbox/sandbox.sock"  # ListenStream= of systemd/picoagent-sandbox.socket
MAX_COMMAND_CHARS = 8000
MAX_REPLY_BYTES = 64 * 1024 * 1024


def limits_for(config: ShellConfig, timeout_s: float, workspace_max_mb: int = 0) -> sandbox.Limits:
    """The sandbox limits for one command; it stops a little before the tool's own timeout."""
    from appliance.tools import sandbox  # bubblewrap, seccomp, rlimits: imported when a command runs

    return sandbox.Limits(
        timeout_s=max(0.5, timeout_s - 1.0),
        memory_mb=config.memory_mb,
        cpu_s=config.cpu_s,
        max_file_mb=config.max_file_mb,
        max_processes=config.max_processes,
        max_output_bytes=config.max_output_kb * 1024,
        workspace_max_bytes=workspace_max_mb * 1024 * 1024,
    )


def describe(outcome: sandbox.Outcome, limits: sandbox.Limits) -> str:
    """How the command ended and the quota's note, then its output (first: a long output is cut at its end)."""
    notes = {
        "timeout": f"[stopped: still running after {limits.timeout_s:g} s; every process was ended]",
        "output": f"[stopped: output passed {limits.max_output_bytes // 1024} KiB; every process was ended]",
        "cancelled": "[stopped: cancelled]",
        "quota": (
            f"[stopped: the workspace passed its quota of {quota.mib(limits.workspace_max_bytes)} "
            "(tools.workspace_max_mb); every process was ended]"
        ),
    }
    parts = [notes.get(outcome.stopped) or f"[exit code {outcome.exit_code}]", outcome.workspace]
    parts.append(outcome.output.rstrip("\n"))
    return "\n".join(part for part in parts if part)


def via_service(socket_path: str, command: str, limits: sandbox.Limits) -> sandbox.Outcome:
    """Ask the picoagent-sandbox service to run the command (one connection, one request)."""
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(limits.timeout_s + 10)
        conn.connect(socket_path)
    except OSError as exc:
        raise ToolError(
            f"the sandbox service at {socket_path} is not reachable ({exc.strerror or exc}); "
            "check `systemctl status picoagent-sandbox.socket`"
        ) from None
    with conn:
        return exchange(conn, command, limits)


def exchange(conn: socket.socket, command: str, limits: sandbox.Limits) -> sandbox.Outcome:
    """Send one request on a connected socket and read the answer."""
    from appliance.tools import sandbox

    request = json.dumps({"command": command, "limits": limits.as_dict()}).encode() + b"\n"
    try:
        conn.sendall(request)  # the write side stays open: closing it is how a caller cancels
        reply = bytearray()
        while chunk := conn.recv(65536):
            reply += chunk
            if len(reply) > MAX_REPLY_BYTES:
                raise ToolError("the sandbox service answered too much")
    except TimeoutError:
        raise ToolError("the sandbox service did not answer in time") from None
    except OSError as exc:
        raise ToolError(f"lost the sandbox service: {exc}") from None
    try:
        answer: dict[str, Any] = json.loads(reply)
    except ValueError:
        raise ToolError("the sandbox service gave no answer (see `journalctl -u picoagent-sandbox@*`)") from None
    if "error" in answer:
        raise ToolError(f"sandbox unavailable: {answer['error']} ({answer.get('fix', '')})")
    return sandbox.Outcome(
        answer["exit_code"],
        answer["output"],
        answer.get("stopped", ""),
        answer["duration_s"],
        answer.get("workspace", ""),
    )


def service_socket(config: ShellConfig) -> str:
    """The sandbox service's socket to use ("" for bubblewrap in this process)."""
    if config.sandbox_socket == "auto":
        return SERVICE_SOCKET if Path(SERVICE_SOCKET).exists() else ""
    return config.sandbox_socket


def unavailable(config: ShellConfig) -> sandbox.SandboxUnavailable | None:
    """Why the shell tool cannot run commands here (None when it can)."""
    from appliance.tools import sandbox

    path = service_socket(config)
    if path:
        if not Path(path).exists():
            return sandbox.SandboxUnavailable(
                f"the sandbox service's socket {path} does not exist",
                "sudo systemctl enable --now picoagent-sandbox.socket (make install-service sets it up)",
            )
        return None
    return sandbox.check()


def register(
    registry: ToolRegistry, config: ShellConfig, workspace: Path, timeout_s: float, workspace_max_mb: int = 0
) -> None:
    """Register the shell tool (when enabled); ``workspace_max_mb`` is the workspace's quota (0: none)."""
    if not config.enabled:
        return

    def shell(command: str) -> str:
        """Run a shell command in the workspace, sandboxed: no network, nothing outside the workspace.

        Examples: run a command; count the lines in notes.txt; run this python script

        Args:
            command: the /bin/sh command line, e.g. "ls -la" or "python3 script.py"
        """
        from appliance.tools import sandbox

        if not command.strip():
            raise ToolError("the command is empty")
        if len(command) > MAX_COMMAND_CHARS:
            raise ToolError(f"the command is too long (at most {MAX_COMMAND_CHARS} characters)")
        limits = limits_for(config, timeout_s, workspace_max_mb)
        path = service_socket(config)
        if path:
            outcome = via_service(path, command, limits)
        else:
            problem = sandbox.check()
            if problem is not None:
                raise ToolError(f"the shell is disabled: {problem.reason}. Fix: {problem.fix}")
            try:
                outcome = sandbox.run(command, workspace, limits)
            except sandbox.SandboxUnavailable as exc:
                raise ToolError(f"the shell is disabled: {exc.reason}. Fix: {exc.fix}") from None
        return describe(outcome, limits)

    registry.register(shell, outside="shell output")
