"""The fake Slack's Socket Mode: the websocket slack_sdk's socket-mode client keeps open to receive events.

``apps.connections.open`` (the Web API side) hands out ``ws://127.0.0.1:<port>/link/?ticket=...&app_id=...``.
A connection with a ticket its host issued first gets ``hello``; envelopes ``{envelope_id, type, payload,
accepts_response_payload[, retry_attempt, retry_reason]}`` of type ``events_api``, ``slash_commands`` or
``interactive`` go to the newest open connection (queued while there is none); the client acknowledges
with ``{"envelope_id": ..., "payload"?: ...}``. An envelope not acknowledged is sent again, with
``retry_attempt`` + 1 and ``retry_reason: "timeout"``, to the next connection (at-least-once, as Slack
does) or on :meth:`SocketMode.redeliver`. :meth:`SocketMode.disconnect` sends Slack's
``{"type": "disconnect", "reason": ...}``; :meth:`SocketMode.drop` cuts the connections without one.

:class:`SocketMode` keeps the connections, every envelope sent and every ack. The tickets, the app id and
the wake-up of tests waiting for a change are read from its host (:class:`SocketHost`, which ``FakeSlack``
in slack_api.py is); this module imports nothing from the Web API side (slack_web.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import WSMsgType, web


class SocketHost(Protocol):
    """What Socket Mode reads from the fake it belongs to."""

    app_id: str
    tickets: set[str]  # handed out by apps.connections.open

    def wake(self) -> None:
        """Tell tests waiting in ``wait_for`` that something changed."""
        ...


@dataclass
class Connection:
    """One Socket Mode websocket the app opened."""

    ticket: str
    ws: web.WebSocketResponse
    opened: float = field(default_factory=time.monotonic)


class SocketMode:
    """The app's Socket Mode connections: envelopes sent in push order, acknowledged or sent again."""

    def __init__(self, host: SocketHost) -> None:
        self.host = host
        self.envelopes: list[dict[str, Any]] = []  # every envelope sent, in order (re-deliveries too)
        self.acks: dict[str, dict[str, Any] | None] = {}  # envelope id -> the ack's payload (None: none)
        self.connects = 0  # websocket connections accepted
        self._connections: list[Connection] = []
        self._unacked: dict[str, dict[str, Any]] = {}  # envelope id -> envelope, in push order
        self._queued: deque[str] = deque()  # envelope ids waiting for a connection
        self._flushing: set[asyncio.Future[None]] = set()
        self._sent: set[str] = set()  # envelope ids sent on some connection and not acknowledged

    @property
    def connected(self) -> int:
        """Websockets open now."""
        return sum(1 for c in self._connections if not c.ws.closed)

    def unacked(self) -> list[str]:
        """Ids of the envelopes the app has not acknowledged."""
        return list(self._unacked)

    def push(self, kind: str, payload: dict[str, Any], *, accepts_response_payload: bool) -> dict[str, Any]:
        """Wrap a payload in an envelope of ``kind`` and send it (or queue it until a connection opens)."""
        envelope: dict[str, Any] = {
            "envelope_id": str(uuid.uuid4()),
            "payload": payload,
            "type": kind,
            "accepts_response_payload": accepts_response_payload,
        }
        if kind == "events_api":
            envelope["retry_attempt"] = 0
            envelope["retry_reason"] = ""
        self._unacked[envelope["envelope_id"]] = envelope
        self._queued.append(envelope["envelope_id"])
        flushing = asyncio.ensure_future(self._flush())  # sent once the test yields to the loop
        self._flushing.add(flushing)
        flushing.add_done_callback(self._flushing.discard)
        return envelope

    async def redeliver(self, envelope: dict[str, Any]) -> dict[str, Any]:
        """Send an envelope again as Slack does when its ack did not arrive in time; returns the new copy."""
        again = self._retry(envelope)
        self._unacked[again["envelope_id"]] = again
        await self._send(again)
        return again

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Slack's ``disconnect`` message on every open connection (the client is expected to reconnect)."""
        for connection in list(self._connections):
            with contextlib.suppress(ConnectionError, RuntimeError):
                await connection.ws.send_json(
                    {
                        "type": "disconnect",
                        "reason": reason,
                        "debug_info": {"host": "applink-fake"},
                        "connection_info": {"app_id": self.host.app_id},
                    }
                )

    async def drop(self) -> None:
        """Close every websocket without a ``disconnect`` message (a network blip, or the fake stopping)."""
        connections, self._connections = self._connections, []
        for connection in connections:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await connection.ws.close()
        self.host.wake()

    async def serve(self, request: web.Request) -> web.StreamResponse:
        """The aiohttp handler of ``GET /link/``: one websocket, until either side closes it."""
        ticket = request.query.get("ticket", "")
        if ticket not in self.host.tickets or request.query.get("app_id") != self.host.app_id:
            raise web.HTTPUnauthorized(text="invalid ticket")
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        connection = Connection(ticket, ws)
        self._connections.append(connection)
        self.connects += 1
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": self.connected,
                "debug_info": {"host": "applink-fake", "build_number": 1, "approximate_connection_time": 18060},
                "connection_info": {"app_id": self.host.app_id},
            }
        )
        # What the app did not acknowledge on an earlier connection comes again, marked as a retry.
        for envelope_id, envelope in list(self._unacked.items()):
            if envelope_id in self._sent:
                self._sent.discard(envelope_id)
                self._unacked[envelope_id] = self._retry(envelope)
                if envelope_id not in self._queued:
                    self._queued.append(envelope_id)
        await self._flush()
        self.host.wake()
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                with contextlib.suppress(ValueError):
                    self._ack(json.loads(message.data))
        finally:
            if connection in self._connections:
                self._connections.remove(connection)
            self.host.wake()
        return ws

    def _ack(self, body: Any) -> None:
        if not isinstance(body, dict) or "envelope_id" not in body:
            return
        envelope_id = str(body["envelope_id"])
        self._sent.discard(envelope_id)
        if self._unacked.pop(envelope_id, None) is None and envelope_id in self.acks:
            return  # a second ack of the same envelope changes nothing
        self.acks[envelope_id] = body.get("payload")
        self.host.wake()

    @staticmethod
    def _retry(envelope: dict[str, Any]) -> dict[str, Any]:
        again = dict(envelope)
        again["retry_attempt"] = int(envelope.get("retry_attempt") or 0) + 1
        again["retry_reason"] = "timeout"
        return again

    def _newest(self) -> Connection | None:
        open_ = [c for c in self._connections if not c.ws.closed]
        return open_[-1] if open_ else None

    async def _flush(self) -> None:
        while self._queued and self._newest() is not None:
            envelope = self._unacked.get(self._queued.popleft())
            if envelope is not None:
                await self._send(envelope)

    async def _send(self, envelope: dict[str, Any]) -> None:
        connection = self._newest()
        if connection is None:
            self._queued.append(envelope["envelope_id"])
            return
        try:
            await connection.ws.send_str(json.dumps(envelope))
        except (ConnectionError, RuntimeError):
            self._queued.append(envelope["envelope_id"])
            return
        self._sent.add(envelope["envelope_id"])
        self.envelopes.append(envelope)
        self.host.wake()
