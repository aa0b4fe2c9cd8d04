"""The MCP client: each enabled ``tools.mcp`` server runs as a subprocess; its tools join the registry.

A server is started over stdio with a minimal environment (PATH, HOME, locale, ...) plus its configured
``env`` — never the daemon's own environment, which may hold secrets. The session is JSON-RPC 2.0, one
message per line: ``initialize``, ``notifications/initialized``, ``tools/list`` (every page), then
``tools/call`` for each use. A tool ``search`` of server ``web`` becomes ``mcp_web_search``.

Starting and every call are bounded by the server's ``timeout_s``. A server that exits fails the calls in
flight (with its name and exit code) and is started again by the next call — at once the first time,
then at most once a minute, so a server that keeps crashing is not restarted in a loop. Its stderr goes
to the log, with secrets redacted. A server that does not start is logged and listed in ``problems``;
it never stops the appliance.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance import __version__
from appliance.errors import ToolError
from appliance.mcp import adapt, protocol
from appliance.tools.registry import Tool, ToolRegistry

if TYPE_CHECKING:
    from appliance.config import Config, McpServerConfig

log = logging.getLogger(__name__)

RESTART_EVERY_S = 60.0
STOP_GRACE_S = 2.0
MAX_LINE_BYTES = 16 * 2**20  # one JSON-RPC message; a tools/list with big schemas can be large
MAX_PAGES = 100
SAFE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class McpError(ToolError):
    """An MCP server could not be started or did not answer; the message names the server."""


def safe_env(extra: dict[str, str], environ: dict[str, str] | None = None) -> dict[str, str]:
    """A server's environment: the few harmless variables of ours, then its configured ones."""
    source = os.environ if environ is None else environ
    env = {key: source[key] for key in SAFE_ENV if key in source}
    env.setdefault("PATH", DEFAULT_PATH)
    return {**env, **extra}


@dataclass(eq=False)
class McpServer:
    """One MCP server process over stdio and the JSON-RPC session with it."""

    name: str
    config: McpServerConfig = field(repr=False)  # its env may hold secrets
    _: KW_ONLY
    cwd: Path | None = None
    redact: Callable[[str], str] = lambda text: text
    restart_every_s: float = RESTART_EVERY_S
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self.tools: list[dict[str, Any]] = []  # as tools/list gave them
        self.server_info: dict[str, Any] = {}
        self.protocol_version = ""
        self.on_tools: Callable[[McpServer], None] | None = None  # told when the tool list changed
        self._proc: asyncio.subprocess.Process | None = None
        self._alive = False
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = 0
        self._tasks: list[asyncio.Task[Any]] = []
        self._stderr_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._stderr: collections.deque[str] = collections.deque(maxlen=5)
        self._down = ""  # why the last process ended
        self._restarted_at: float | None = None

    @property
    def running(self) -> bool:
        """Started, initialized, and not exited since."""
        return self._alive and self._proc is not None and self._proc.returncode is None

    async def start(self) -> None:
        """Start the process and the session, and list its tools (McpError on failure or timeout)."""
        async with self._lock:
            if not self.running:
                await self._start()

    async def _start(self) -> None:
        try:
            await asyncio.wait_for(self._spawn_and_handshake(), self.config.timeout_s)
        except TimeoutError:
            await self._stop_process()
            raise McpError(f"mcp server {self.name} did not start within {self.config.timeout_s:g} s") from None
        except McpError:
            await self._stop_process()
            raise
        log.info("mcp server %s: started, %d tool(s)", self.name, len(self.tools))

    async def _spawn_and_handshake(self) -> None:
        command = list(self.config.command)
        if not command:
            raise McpError(f"mcp server {self.name}: command is empty", fix=f"set tools.mcp.{self.name}.command")
        self._stderr.clear()
        try:
            if self.cwd is not None:
                self.cwd.mkdir(parents=True, exist_ok=True)
            self._proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=safe_env(dict(self.config.env)),
                cwd=self.cwd,
                limit=MAX_LINE_BYTES,
                start_new_session=True,  # its own process group: stopped with its children; no Ctrl-C of ours
            )
        except OSError as exc:
            raise McpError(
                f"mcp server {self.name}: cannot run {command[0]}: {exc.strerror or exc}",
                fix=f"check tools.mcp.{self.name}.command (is the program installed and on PATH?)",
            ) from None
        self._stderr_task = asyncio.ensure_future(self._read_stderr(self._proc))
        self._tasks = [asyncio.ensure_future(self._read_stdout(self._proc)), self._stderr_task]
        self._alive = True
        init = await self.request(
            "initialize",
            {
                "protocolVersion": protocol.PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "picoagent", "version": __version__},
            },
            timeout_s=None,  # the whole start is bounded by the caller
        )
        version = init.get("protocolVersion") if isinstance(init, dict) else None
        if version not in protocol.SUPPORTED_VERSIONS:
            raise McpError(
                f"mcp server {self.name} speaks MCP {version!r}; picoagent speaks "
                + ", ".join(protocol.SUPPORTED_VERSIONS)
            )
        self.protocol_version = str(version)
        self.server_info = init.get("serverInfo") or {}
        await self._send(protocol.notification("notifications/initialized"))
        self.tools = await self._list_tools(timeout_s=None)

    async def _list_tools(self, timeout_s: float | None) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self.request("tools/list", {"cursor": cursor} if cursor else {}, timeout_s=timeout_s)
            tools += [t for t in (page or {}).get("tools") or [] if isinstance(t, dict) and t.get("name")]
            cursor = (page or {}).get("nextCursor")
            if not cursor:
                break
        return tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call one of its tools; the text of the result, or McpError (a tool error, a crash, a timeout)."""
        if not self.running:
            await self._restart()
        result = await self.request("tools/call", {"name": tool, "arguments": arguments})
        text = adapt.result_text(result)
        if isinstance(result, dict) and result.get("isError"):
            raise McpError(text or f"{tool} failed (mcp server {self.name} gave no reason)")
        return text

    async def _restart(self) -> None:
        async with self._lock:
            if self.running:
                return  # another call restarted it meanwhile
            now = self.clock()
            if self._restarted_at is not None and now - self._restarted_at < self.restart_every_s:
                wait = self.restart_every_s - (now - self._restarted_at)
                raise McpError(f"mcp server {self.name} is down ({self._down}); it is restarted in {wait:.0f} s")
            self._restarted_at = now
            log.warning("mcp server %s: restarting (%s)", self.name, self._down or "not running")
            before = [t.get("name") for t in self.tools]
            await self._start()
        if [t.get("name") for t in self.tools] != before and self.on_tools is not None:
            self.on_tools(self)

    async def request(self, method: str, params: dict[str, Any], *, timeout_s: float | None = -1.0) -> Any:
        """Send a request and wait for its result (``timeout_s`` -1: the server's timeout_s)."""
        if timeout_s is not None and timeout_s < 0:
            timeout_s = self.config.timeout_s
        self._ids += 1
        id_ = self._ids
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[id_] = future
        try:
            await self._send(protocol.request(id_, method, params))
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            self._cancel_request(id_, "timed out")
            raise McpError(f"mcp server {self.name}: {method} timed out after {timeout_s:g} s") from None
        except asyncio.CancelledError:
            self._cancel_request(id_, "cancelled")  # the turn gave up on it (its own timeout, or stopped)
            raise
        finally:
            self._pending.pop(id_, None)

    def _cancel_request(self, id_: int, reason: str) -> None:
        with contextlib.suppress(Exception):
            self._write(protocol.notification("notifications/cancelled", {"requestId": id_, "reason": reason}))

    def _write(self, message: dict[str, Any]) -> None:
        if self._proc is None or self._proc.stdin is None or not self._alive:
            raise McpError(f"mcp server {self.name} is not running ({self._down or 'not started'})")
        self._proc.stdin.write(protocol.encode(message))

    async def _send(self, message: dict[str, Any]) -> None:
        self._write(message)
        try:
            assert self._proc is not None and self._proc.stdin is not None
            await self._proc.stdin.drain()
        except (ConnectionError, BrokenPipeError) as exc:
            raise McpError(f"mcp server {self.name} closed its input: {exc}") from None

    async def _read_stdout(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        try:
            while True:
                try:
                    line = await proc.stdout.readline()
                except ValueError:  # a line past MAX_LINE_BYTES: the stream cannot be resynchronised
                    log.error("mcp server %s: a message longer than %d bytes; stopping it", self.name, MAX_LINE_BYTES)
                    break
                if not line:
                    break
                self._dispatch(line)
        finally:
            await self._ended(proc)

    async def _ended(self, proc: asyncio.subprocess.Process) -> None:
        """The server's output ended: note why, fail the calls in flight, reap the process."""
        was_alive, self._alive = self._alive, False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), STOP_GRACE_S)
        if self._stderr_task is not None:  # its last words (the reason it exited) may still be in the pipe
            await asyncio.wait([self._stderr_task], timeout=STOP_GRACE_S / 4)
        code = proc.returncode
        last = f": {self._stderr[-1]}" if self._stderr else ""
        self._down = f"exited with code {code}{last}" if code is not None else "closed its output"
        error = McpError(f"mcp server {self.name} {self._down}")
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        if was_alive:
            log.warning("mcp server %s %s", self.name, self._down)
        if code is None:
            _signal_group(proc, signal.SIGKILL)  # it closed stdout but did not exit: not usable any more

    def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            log.warning("mcp server %s wrote a line that is not JSON: %r", self.name, line[:200])
            return
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:  # a request from the server: we offer no capabilities but ping
                reply = (
                    protocol.response(message["id"], {})
                    if method == "ping"
                    else protocol.error(message["id"], protocol.METHOD_NOT_FOUND, f"picoagent does not do {method}")
                )
                with contextlib.suppress(McpError):
                    self._write(reply)
            elif method == "notifications/tools/list_changed":
                self._tasks.append(asyncio.ensure_future(self._refresh_tools()))
            elif method == "notifications/message":
                params = message.get("params") or {}
                log.info("mcp server %s: %s", self.name, self.redact(str(params.get("data", ""))[:500]))
            return
        id_ = message.get("id")
        future = self._pending.get(id_) if isinstance(id_, int) else None
        if future is None or future.done():
            return
        if "error" in message:
            err = message.get("error") or {}
            future.set_exception(McpError(f"mcp server {self.name}: {err.get('message', 'error')}"))
        else:
            future.set_result(message.get("result"))

    async def _refresh_tools(self) -> None:
        try:
            self.tools = await self._list_tools(timeout_s=self.config.timeout_s)
        except McpError as exc:
            log.warning("%s", exc.message)
            return
        if self.on_tools is not None:
            self.on_tools(self)

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        with contextlib.suppress(ValueError):  # an endless line: stop reading it
            while line := await proc.stderr.readline():
                text = self.redact(line.decode("utf-8", "replace").rstrip())[:1000]
                if text:
                    self._stderr.append(text)
                    log.info("mcp server %s: %s", self.name, text)

    async def stop(self) -> None:
        """Close its input, then SIGTERM its process group, then SIGKILL."""
        async with self._lock:
            await self._stop_process()

    async def _stop_process(self) -> None:
        proc, self._alive = self._proc, False
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(Exception):
                assert proc.stdin is not None
                proc.stdin.close()  # the polite way: a stdio server exits at the end of its input
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(proc.wait()), STOP_GRACE_S / 2)
                if proc.returncode is not None:
                    break
                _signal_group(proc, sig)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), STOP_GRACE_S)
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=STOP_GRACE_S)
        self._tasks = []
        self._down = self._down or "stopped"
        for future in self._pending.values():
            if not future.done():
                future.set_exception(McpError(f"mcp server {self.name} was stopped"))


def _signal_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    """Signal the server and the processes it started (its own process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


class McpClients:
    """Every enabled MCP server of a config, with their tools kept in one registry."""

    def __init__(self, servers: dict[str, McpServer], registry: ToolRegistry) -> None:
        self.servers = servers
        self.registry = registry
        self.problems: dict[str, str] = {}  # server -> why it did not start
        self._names: dict[str, list[str]] = {}  # server -> the registry names of its tools
        for server in servers.values():
            server.on_tools = self._register

    @classmethod
    def from_config(cls, config: Config, registry: ToolRegistry, *, cwd: Path | None = None) -> McpClients:
        """The enabled ``tools.mcp`` servers (a relative command path is relative to the config file)."""
        servers = {}
        for name, server in config.tools.mcp.items():
            if not server.enabled:
                continue
            command = list(server.command)
            if command and "/" in command[0] and not Path(command[0]).is_absolute():
                command[0] = str(config.resolve_path(command[0]))
            servers[name] = McpServer(name, replace(server, command=command), cwd=cwd, redact=registry.redact)
        return cls(servers, registry)

    def __len__(self) -> int:
        return len(self.servers)

    async def start(self) -> None:
        """Start every server not running yet, at once; a failure is logged and kept in problems."""
        await asyncio.gather(*(self._start(server) for server in self.servers.values() if not server.running))

    async def _start(self, server: McpServer) -> None:
        try:
            await server.start()
        except McpError as exc:
            self.problems[server.name] = exc.message
            log.error("mcp server %s did not start: %s", server.name, exc.message)
            return
        self.problems.pop(server.name, None)
        self._register(server)

    def _register(self, server: McpServer) -> None:
        """Put the server's current tools in the registry (replacing the ones it had)."""
        for name in self._names.pop(server.name, []):
            self.registry.remove(name)
        names: list[str] = []
        for remote in server.tools:
            name = adapt.tool_name(server.name, str(remote["name"]))
            if name in self.registry.tools:
                log.warning("mcp server %s: tool %s is skipped: %s exists already", server.name, remote["name"], name)
                continue
            self.registry.add(self._tool(server, name, remote))
            names.append(name)
        self._names[server.name] = names

    @staticmethod
    def _tool(server: McpServer, name: str, remote: dict[str, Any]) -> Tool:
        remote_name = str(remote["name"])

        async def call(**arguments: Any) -> str:
            return await server.call(remote_name, arguments)

        annotations = remote.get("annotations") or {}
        read_only = bool(annotations.get("readOnlyHint")) if isinstance(annotations, dict) else False
        parameters = adapt.parameters(remote.get("inputSchema"))
        # whatever the server answers is its text, not the person's: it may carry orders (appliance.tools.trust)
        outside = f"the MCP server {server.name}"
        return Tool(name, adapt.description(remote), parameters, call, read_only, outside=outside)

    def tool_names(self, server: str) -> list[str]:
        """The registry names of a server's tools."""
        return list(self._names.get(server, []))

    async def stop(self) -> None:
        """Stop every server (their tools stay listed; a call would start the server again)."""
        await asyncio.gather(*(server.stop() for server in self.servers.values()))
