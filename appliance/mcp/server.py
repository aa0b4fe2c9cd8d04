"""`picoagent mcp`: our tools served to another program as an MCP server over stdio.

Every call goes through :meth:`ToolRegistry.execute`, so the same rules hold as in a turn: device
allowlists, approvals, the sandbox, the output limit and secret redaction. Requests are answered
concurrently (a ping is answered while a tool runs); ``notifications/cancelled`` stops a call. Only
protocol messages are written to the output; logs go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from appliance import __version__
from appliance.mcp import protocol
from appliance.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

INSTRUCTIONS = "Tools of a picoagent appliance: its devices, sensors and built-in helpers."


class _Invalid(Exception):
    """A request whose params do not fit its method (answered with -32602)."""


class McpToolServer:
    """Answers one MCP client's requests with the tools of a registry."""

    def __init__(self, registry: ToolRegistry, write: Callable[[bytes], None], *, timeout_s: float = 30.0) -> None:
        self.registry = registry
        self.write = write
        self.timeout_s = timeout_s
        self.client: dict[str, Any] = {}  # clientInfo from initialize
        self._running: dict[Any, asyncio.Task[None]] = {}

    @property
    def running(self) -> int:
        """How many requests are being answered now."""
        return len(self._running)

    def _send(self, message: dict[str, Any]) -> None:
        self.write(protocol.encode(message))

    def receive(self, line: bytes) -> None:
        """Take one line from the client: answer it now, or start a task that will."""
        try:
            message = json.loads(line)
        except ValueError as exc:
            self._send(protocol.error(None, protocol.PARSE_ERROR, f"parse error: {exc}"))
            return
        if not isinstance(message, dict):
            why = "batches are not supported" if isinstance(message, list) else "a message must be a JSON object"
            self._send(protocol.error(None, protocol.INVALID_REQUEST, f"invalid request: {why}"))
            return
        method = message.get("method")
        id_ = message.get("id")
        if method is None and ("result" in message or "error" in message):
            return  # an answer to a request of ours: we send none
        good_id = isinstance(id_, str) or (isinstance(id_, int) and not isinstance(id_, bool))  # MCP: never null
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str) or ("id" in message and not good_id):
            reply_id = id_ if good_id else None
            self._send(protocol.error(reply_id, protocol.INVALID_REQUEST, "invalid request: not JSON-RPC 2.0"))
            return
        if "id" not in message:
            self._notification(method, message.get("params"))
            return
        task = asyncio.ensure_future(self._answer(id_, method, message.get("params")))
        self._running[id_] = task
        task.add_done_callback(lambda _t: self._running.pop(id_, None))

    def _notification(self, method: str, params: Any) -> None:
        if method == "notifications/cancelled" and isinstance(params, dict):
            task = self._running.get(params.get("requestId"))
            if task is not None:
                log.info("mcp: request %s cancelled by the client", params.get("requestId"))
                task.cancel()  # no answer is sent for a cancelled request

    async def _answer(self, id_: Any, method: str, params: Any) -> None:
        handler = {
            "initialize": self._initialize,
            "ping": self._ping,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
        }.get(method)
        if handler is None:
            self._send(protocol.error(id_, protocol.METHOD_NOT_FOUND, f"method not found: {method}"))
            return
        if params is None:
            params = {}
        try:
            if not isinstance(params, dict):
                raise _Invalid("params must be an object")
            result = await handler(params)
        except _Invalid as exc:
            self._send(protocol.error(id_, protocol.INVALID_PARAMS, f"invalid params: {exc}"))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # our bug: the client gets an error, the server goes on
            log.exception("mcp: %s failed", method)
            self._send(protocol.error(id_, protocol.INTERNAL_ERROR, f"internal error: {type(exc).__name__}"))
        else:
            self._send(protocol.response(id_, result))

    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = asked if asked in protocol.SUPPORTED_VERSIONS else protocol.PROTOCOL_VERSION
        client = params.get("clientInfo")
        self.client = client if isinstance(client, dict) else {}
        log.info("mcp: client %s %s, protocol %s", self.client.get("name"), self.client.get("version"), version)
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "picoagent", "version": __version__},
            "instructions": INSTRUCTIONS,
        }

    async def _ping(self, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _tools_list(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("cursor") is not None:
            return {"tools": []}  # everything fits the first page
        return {
            "tools": [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "inputSchema": tool.parameters,
                    "annotations": {"readOnlyHint": tool.read_only},
                }
                for tool in self.registry
            ]
        }

    async def _tools_call(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments", {})
        if not isinstance(name, str):
            raise _Invalid("name must be a string")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise _Invalid("arguments must be an object")
        if name not in self.registry.tools:
            raise _Invalid(f"unknown tool: {name}; tools: {', '.join(sorted(self.registry.tools)) or 'none'}")
        result = await self.registry.execute(name, arguments, timeout_s=self.timeout_s)
        text = result.output if result.ok else result.error or f"{name} failed"
        return {"content": [{"type": "text", "text": text}], "isError": not result.ok}

    async def serve(self, lines: asyncio.Queue[bytes | None]) -> None:
        """Answer lines until the input ends, then finish the calls in flight."""
        while (line := await lines.get()) is not None:
            if line.strip():
                self.receive(line)
        if self._running:
            await asyncio.wait(list(self._running.values()))


def read_lines(stream: BinaryIO, loop: asyncio.AbstractEventLoop) -> asyncio.Queue[bytes | None]:
    """Lines of a blocking stream (a pipe, a file, a terminal) on a queue; None at its end.

    A daemon thread reads: it does not hold up the end of the process the way an executor's would.
    """
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def pump() -> None:
        try:
            for line in iter(stream.readline, b""):
                loop.call_soon_threadsafe(queue.put_nowait, line)
        except (OSError, ValueError) as exc:
            log.warning("mcp: reading the input failed: %s", exc)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=pump, name="mcp-stdin", daemon=True).start()
    return queue


async def serve_stdio(registry: ToolRegistry, stdin: BinaryIO, stdout: BinaryIO, *, timeout_s: float) -> None:
    """Serve the registry over a pair of byte streams until the input ends."""

    def write(data: bytes) -> None:
        stdout.write(data)
        stdout.flush()

    server = McpToolServer(registry, write, timeout_s=timeout_s)
    await server.serve(read_lines(stdin, asyncio.get_running_loop()))
