"""Chat over HTTP: POST /api/chat (one reply record), GET /api/history, and the /ws event stream.

Websocket protocol (JSON text frames). The client sends ``{"type": "message", "text": ...,
"session": ...}`` or ``{"type": "cancel"}``; the server answers with events ``queued`` (position),
``thinking``, ``tool_call``, ``tool_result``, ``text`` (delta), ``done`` (the reply record) and
``error`` (message). One message at a time per connection; closing the socket cancels its turn.

A token that may only chat (scope ``chat``) has conversations of its own: its session names are kept
apart from the owner's and other programs', so it cannot read their history through the model either;
GET /api/history and POST /api/reset reach its own conversations, and only those.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from appliance.channels.web.auth import Principal, principal
from appliance.channels.web.http import bad_request, read_json, read_optional_json
from appliance.channels.web.scopes import allows
from appliance.channels.web.state import RUNTIME, STREAMS, Streams
from appliance.errors import PicoagentError

if TYPE_CHECKING:
    from appliance.agent.loop import Agent

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 8000
CHANNELS = ("web", "api", "terminal")  # the conversations /api/history reads and /api/reset resets
_SESSION = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_connections = itertools.count(1)

routes = web.RouteTableDef()  # chat routes, added to the app by app.build_app


def check_message(body: dict[str, Any], default_session: str) -> tuple[str, str]:
    """The message text and session of a chat request, or a 400 saying what is wrong."""
    text = body.get("message", body.get("text"))
    if not isinstance(text, str) or not text.strip():
        raise bad_request('expected "message": a non-empty string')
    if len(text) > MAX_MESSAGE_CHARS:
        raise bad_request(f'"message" is too long ({len(text)} characters; at most {MAX_MESSAGE_CHARS})')
    session = body.get("session", default_session)
    if not isinstance(session, str) or not _SESSION.fullmatch(session):
        raise bad_request('"session" must be 1-64 letters, digits or _.:-')
    return text.strip(), session


def _principal(request: web.Request) -> str:
    found = principal(request)
    return found.name if found else "anonymous"


def conversation_key(found: Principal | None, session: str) -> str:
    """The chat id a session's conversation is stored under: ``session@token`` for a chat-only token.

    Session names cannot hold ``@``, so no one else can name a chat-only token's conversations.
    """
    if found is not None and not allows(found.scope, "read"):
        return f"{session}@{found.name}"
    return session


@routes.post("/api/chat")
async def api_chat(request: web.Request) -> web.Response:
    """Answer one message; returns the reply record."""
    body = await read_json(request)
    text, session = check_message(body, "api")
    route = body.get("route")
    if route not in (None, "local", "cloud"):
        raise bad_request('"route" must be "local" or "cloud" (or absent: routing.mode decides)')
    channel = body.get("channel", "api")  # `picoagent chat` beside the daemon: "terminal", its own conversations
    if channel not in CHANNELS:
        raise bad_request(f'"channel" must be one of {", ".join(CHANNELS)} (absent: api)')
    chat_id = conversation_key(principal(request), session)
    task = asyncio.ensure_future(
        request.app[RUNTIME].agent.turn(
            text, channel=channel, chat_id=chat_id, client=f"{channel}:{_principal(request)}:{session}", force=route
        )
    )
    request.app[STREAMS].track(task)
    record = await task
    return web.json_response(record.as_dict())


def conversation_named(found: Principal | None, channel: Any, session: Any) -> tuple[str, str]:
    """The (channel, session) a history or reset request names, or a 400 saying what is wrong.

    Absent, both default to the caller's own conversation: a browser's is the web chat's (``web``, ``web``),
    a token's the one POST /api/chat keeps when it names no session (``api``, ``api``).
    """
    own = "web" if found is None or found.kind == "session" else "api"
    channel = own if channel is None else channel
    if channel not in CHANNELS:
        raise bad_request(f'"channel" must be one of {", ".join(CHANNELS)} (absent: {own})')
    session = channel if session is None else session
    if not isinstance(session, str) or not _SESSION.fullmatch(session):
        raise bad_request('"session" must be 1-64 letters, digits or _.:-')
    return channel, session


@routes.get("/api/history")
async def api_history(request: web.Request) -> web.Response:
    """The open conversation of a session, oldest first (the web chat reloads it; a program reads its own)."""
    found = principal(request)
    channel, session = conversation_named(found, request.query.get("channel"), request.query.get("session"))
    limit = min(int(request.query.get("limit", "100")) if request.query.get("limit", "").isdigit() else 100, 500)
    db = request.app[RUNTIME].db
    conversation = await db.call(db.conversation, channel, conversation_key(found, session))
    messages = await db.call(db.recent_messages, conversation, limit)
    return web.json_response(
        {
            "session": session,
            "channel": channel,
            "messages": [
                {"role": m.role, "content": m.content, "at": m.created_at, "route": m.route, "meta": m.meta}
                for m in messages
            ],
        }
    )


@routes.post("/api/reset")
async def api_reset(request: web.Request) -> web.Response:
    """Start a new conversation for a session (the old one stays in the database, closed); no body: the
    caller's own default conversation (see :func:`conversation_named`). ``?session=``/``?channel=`` name it as
    they do for /api/history (a walk's `POST /api/reset?session=kitchen` reset the default one instead); the
    body's, when both are given."""
    body = await read_optional_json(request)
    found = principal(request)
    query = request.query
    channel, session = conversation_named(
        found, body.get("channel", query.get("channel")), body.get("session", query.get("session"))
    )
    await request.app[RUNTIME].agent.reset(channel, conversation_key(found, session))
    return web.json_response({"reset": session, "channel": channel})


class _Connection:
    """One websocket: a sender task keeps events in order; at most one turn runs at a time."""

    def __init__(self, agent: Agent, streams: Streams, ws: web.WebSocketResponse, found: Principal | None) -> None:
        self.agent = agent
        self.streams = streams
        self.ws = ws
        self.principal = found
        self.client = f"ws:{found.name if found else 'anonymous'}:{next(_connections)}"
        self.outbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.turn: asyncio.Task[Any] | None = None

    def send(self, kind: str, data: dict[str, Any]) -> None:
        self.outbox.put_nowait({"type": kind, **data})

    async def sender(self) -> None:
        while (event := await self.outbox.get()) is not None:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.ws.send_json(event)

    async def run_turn(self, text: str, session: str) -> None:
        try:
            await self.agent.turn(
                text,
                channel="web",
                chat_id=conversation_key(self.principal, session),
                client=self.client,
                on_event=self.send,
            )
        except asyncio.CancelledError:
            self.send("error", {"message": "stopped"})
            raise
        except PicoagentError as exc:
            self.send("error", {"message": exc.message, "fix": exc.fix})
        except Exception:
            log.exception("websocket turn failed")
            self.send("error", {"message": "internal error; the log has the details"})

    def handle(self, raw: str) -> None:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            self.send("error", {"message": "frames must be JSON objects"})
            return
        if not isinstance(data, dict):
            self.send("error", {"message": "frames must be JSON objects"})
            return
        kind = data.get("type")
        if kind == "cancel":
            if self.turn and not self.turn.done():
                self.turn.cancel()
            return
        if kind != "message":
            self.send("error", {"message": f"unknown frame type {kind!r}; use message or cancel"})
            return
        if self.turn and not self.turn.done():
            self.send("error", {"message": "one message at a time: wait for done, or send cancel"})
            return
        try:
            text, session = check_message(data, "web")
        except web.HTTPException as exc:
            self.send("error", {"message": json.loads(exc.text or "{}").get("error", "bad message")})
            return
        self.turn = asyncio.ensure_future(self.run_turn(text, session))
        self.streams.track(self.turn)


@routes.get("/ws")
async def websocket(request: web.Request) -> web.WebSocketResponse:
    """The chat event stream."""
    streams = request.app[STREAMS]
    ws = web.WebSocketResponse(heartbeat=30, max_msg_size=64 * 1024)
    await ws.prepare(request)
    conn = _Connection(request.app[RUNTIME].agent, streams, ws, principal(request))
    sender = asyncio.ensure_future(conn.sender())
    streams.sockets.add(ws)
    try:
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                conn.handle(message.data)
            elif message.type == WSMsgType.BINARY:
                conn.send("error", {"message": "frames must be JSON text"})
    finally:
        streams.sockets.discard(ws)
        if conn.turn and not conn.turn.done():
            conn.turn.cancel()  # the client went away: stop its work
            with contextlib.suppress(asyncio.CancelledError):
                await conn.turn
        conn.outbox.put_nowait(None)
        await sender
    return ws
