"""The fake Discord's gateway: the websocket discord.py keeps open to receive events.

It sits at ``ws://127.0.0.1:PORT/gateway`` (``GET /gateway/bot`` names it) and speaks v10 JSON, plain or
``zlib-stream`` (one zlib stream per connection, each payload ending in a Z_SYNC_FLUSH; discord.py 2.7
always asks for compression, zlib unless ``zstandard``/``compression.zstd`` is importable, which this fake
refuses with close code 4000): HELLO (op 10) -> IDENTIFY (op 2) -> READY (the guilds unavailable) and a
GUILD_CREATE per guild; HEARTBEAT (op 1) -> ACK (op 11); RESUME (op 6) replays what the session missed,
then RESUMED; an unknown session gets INVALID_SESSION (op 9). A bad token closes with 4004, a privileged
intent the application may not use with 4014. As on Discord, without the message-content intent a guild
message that does not mention the bot arrives with empty content.

:class:`Gateway` is one shard: one live connection at a time (a new one drops the old), the sessions a
RESUME can pick up, and the events dispatched while nobody was connected, sent after the next READY or
RESUMED. The token, the allowed intents, the bot's user and the guilds are read from its host
(:class:`GatewayHost`, which ``FakeDiscord`` in discord_api.py is) when a payload needs them, so the two
never disagree; this module imports nothing from the REST side.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import WSMsgType, web

INTENT_GUILDS = 1 << 0
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15
PRIVILEGED_INTENTS = (1 << 1) | (1 << 8) | INTENT_MESSAGE_CONTENT  # members, presences, message content


class GatewayHost(Protocol):
    """What the gateway reads from the fake it belongs to."""

    token: str
    heartbeat_interval_ms: int
    allowed_intents: int  # the privileged intents enabled in the developer portal
    bot_user: dict[str, Any]
    application_id: str
    guilds: dict[str, dict[str, Any]]  # guild id -> Guild, as GUILD_CREATE sends it

    @property
    def gateway_url(self) -> str: ...


@dataclass
class Session:
    """One identified session: its intents and every dispatch it was sent, for a RESUME to replay."""

    session_id: str
    intents: int
    seq: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)


class _Connection:
    """One gateway websocket: payloads are queued and written in order by one task."""

    def __init__(self, ws: web.WebSocketResponse, request: web.Request, compress: bool) -> None:
        self.ws = ws
        self.transport = request.transport
        self.zlib = zlib.compressobj() if compress else None
        self.queue: asyncio.Queue[str | bytes] = asyncio.Queue()
        self.writer = asyncio.ensure_future(self._write())

    def send(self, payload: dict[str, Any]) -> None:
        text = json.dumps(payload)
        if self.zlib is None:
            self.queue.put_nowait(text)
        else:  # one zlib stream for the connection, each payload ending in a sync flush
            self.queue.put_nowait(self.zlib.compress(text.encode()) + self.zlib.flush(zlib.Z_SYNC_FLUSH))

    async def _write(self) -> None:
        while not self.ws.closed:
            data = await self.queue.get()
            try:
                await (self.ws.send_str(data) if isinstance(data, str) else self.ws.send_bytes(data))
            except ConnectionError:
                return

    def drop(self) -> None:
        """Cut the connection without a close frame."""
        self.writer.cancel()
        if self.transport is not None:
            self.transport.abort()


class Gateway:
    """One shard of the gateway: serves the websocket, keeps the sessions, dispatches events in order."""

    def __init__(self, host: GatewayHost) -> None:
        self.host = host
        self.received: list[dict[str, Any]] = []  # payloads from the client (tokens included)
        self.sessions: dict[str, Session] = {}
        self.identified = asyncio.Event()  # set at each READY or RESUMED; tests clear it to wait for the next
        self._live: _Connection | None = None
        self._session: Session | None = None  # of the live connection
        self._backlog: list[tuple[str, dict[str, Any]]] = []  # dispatches while nobody was connected

    @property
    def connected(self) -> bool:
        """Whether a client is identified (or resumed) now."""
        return self._session is not None

    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send a DISPATCH (op 0) to the connected client; kept for a RESUME when nobody is connected."""
        if self._session is None:
            self._backlog.append((event, data))
            return
        self._session.seq += 1
        payload = {"op": 0, "t": event, "s": self._session.seq, "d": data}
        self._session.sent.append(payload)
        self._send_now(payload)

    def drop(self) -> None:
        """Cut the live connection without a close frame (the client should RESUME)."""
        live, self._live, self._session = self._live, None, None
        if live is not None:
            live.drop()

    async def serve(self, request: web.Request) -> web.StreamResponse:
        """The aiohttp handler of ``GET /gateway``: one websocket, until either side closes it."""
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        version, encoding = request.query.get("v"), request.query.get("encoding", "json")
        compress = request.query.get("compress")
        if version != "10" or encoding != "json":
            await ws.close(code=4012 if version != "10" else 4002, message=b"Invalid API version or encoding")
            return ws
        if compress not in (None, "zlib-stream"):
            await ws.close(code=4000, message=f"this fake speaks no {compress}".encode())
            return ws
        self.drop()  # one connection at a time, like one shard
        live = self._live = _Connection(ws, request, compress is not None)
        self._send_now({"op": 10, "s": None, "t": None, "d": {"heartbeat_interval": self.host.heartbeat_interval_ms}})
        try:
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    continue
                payload = json.loads(msg.data)
                self.received.append(payload)
                if live is not self._live:
                    break
                await self._on_op(ws, payload)
        finally:
            live.writer.cancel()
            if self._live is live:
                self._live = self._session = None
        return ws

    async def _on_op(self, ws: web.WebSocketResponse, payload: dict[str, Any]) -> None:
        op, data = payload.get("op"), payload.get("d")
        if op == 1:
            self._send_now({"op": 11, "s": None, "t": None, "d": None})
        elif op == 2:
            if data.get("token") != self.host.token:
                await ws.close(code=4004, message=b"Authentication failed.")
                return
            intents = int(data.get("intents", 0))
            if intents & PRIVILEGED_INTENTS & ~self.host.allowed_intents:
                await ws.close(code=4014, message=b"Disallowed intent(s).")
                return
            session = Session(secrets.token_hex(16), intents)
            self.sessions[session.session_id] = session
            self._session = session
            self.dispatch("READY", self._ready(session))
            for guild in self.host.guilds.values():
                self.dispatch("GUILD_CREATE", guild)
            self._flush_backlog()
            self.identified.set()
        elif op == 6:
            session = self.sessions.get(data.get("session_id", ""))
            if session is None or data.get("token") != self.host.token or data.get("seq") is None:
                self._send_now({"op": 9, "s": None, "t": None, "d": False})
                return
            self._session = session
            for missed in session.sent:
                if missed["s"] > data["seq"]:
                    self._send_now(missed)
            self.dispatch("RESUMED", {})
            self._flush_backlog()
            self.identified.set()

    def _flush_backlog(self) -> None:
        backlog, self._backlog = self._backlog, []
        for event, data in backlog:
            self.dispatch(event, data)

    def _send_now(self, payload: dict[str, Any]) -> None:
        if self._live is None:
            return
        if event := payload.get("t"):
            payload = {**payload, "d": self._as_seen(event, payload["d"])}
        self._live.send(payload)

    def _as_seen(self, event: str, data: dict[str, Any]) -> dict[str, Any]:
        """What the session's intents let the client see (no content without the intent, unless mentioned)."""
        session = self._session
        if event != "MESSAGE_CREATE" or session is None or session.intents & INTENT_MESSAGE_CONTENT:
            return data
        bot_id = self.host.bot_user["id"]
        mentioned = any(u["id"] == bot_id for u in data.get("mentions", []))
        if "guild_id" not in data or mentioned or data["author"]["id"] == bot_id:
            return data
        return {**data, "content": "", "embeds": [], "attachments": [], "components": []}

    def _ready(self, session: Session) -> dict[str, Any]:
        return {
            "v": 10,
            "user": self.host.bot_user,
            "guilds": [{"id": gid, "unavailable": True} for gid in self.host.guilds],
            "session_id": session.session_id,
            "resume_gateway_url": self.host.gateway_url,
            "session_type": "normal",
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "guild_join_requests": [],
            "application": {"id": self.host.application_id, "flags": 0},
            "shard": [0, 1],
            "_trace": ["fake-discord"],
        }
