"""A fake of Discord's REST API (v10) and gateway websocket, close enough for discord.py to run against it.

REST under ``http://127.0.0.1:PORT/api/v10`` (what ``discord.http.Route.BASE`` is set to): the bot's
token in ``Authorization: Bot ...`` (else 401), JSON bodies, Discord's error bodies (``{"message",
"code"}``, 50035 with ``errors`` for an invalid form), and the ``X-RateLimit-*`` headers on every answer,
counted per route and channel in a window, so discord.py's own rate limiter sees what it sees on Discord.
A 429 carries ``retry_after`` in the body, ``Retry-After`` and ``Via`` (discord.py takes a 429 without
``Via`` for a Cloudflare ban).

The gateway at ``ws://127.0.0.1:PORT/gateway`` (``GET /gateway/bot`` names it) speaks v10 JSON, plain or
``zlib-stream`` (one zlib stream per connection, each payload ending in a Z_SYNC_FLUSH; discord.py 2.7
always asks for compression, zlib unless ``zstandard``/``compression.zstd`` is importable, which this fake
refuses with close code 4000): HELLO (op 10) -> IDENTIFY (op 2) -> READY (the guilds unavailable) and a
GUILD_CREATE per guild; HEARTBEAT (op 1) -> ACK (op 11); RESUME (op 6) replays what the session missed,
then RESUMED; an unknown session gets INVALID_SESSION (op 9). A bad token closes with 4004, a privileged
intent the application may not use with 4014. As on Discord, without the message-content intent a guild
message that does not mention the bot arrives with empty content.

Tests inject users' messages (:meth:`FakeDiscord.push_message`, in a DM or a guild channel, optionally
mentioning the bot), slash commands and button presses (:meth:`FakeDiscord.push_slash`,
:meth:`FakeDiscord.push_button`; :meth:`FakeDiscord.dispatch` sends any payload again), failures for the
next requests of a route (:meth:`FakeDiscord.fail_next`: network, 429, 401, 403, 500), a dropped gateway
connection (:meth:`FakeDiscord.drop_gateway`) and no network at all (:meth:`FakeDiscord.go_offline`).
Every request is recorded (:attr:`FakeDiscord.calls`), and so is every gateway payload the client sent
(:attr:`FakeDiscord.received`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import secrets
import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from aiohttp import WSMsgType, web

FailureKind = Literal["network", "429", "401", "403", "500"]
Handler = Callable[[dict[str, str], dict[str, Any], dict[str, str]], Awaitable[Any]]

MESSAGE_LIMIT = 2000  # characters of a message's content
DISCORD_EPOCH_MS = 1420070400000
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15
PRIVILEGED_INTENTS = (1 << 1) | (1 << 8) | INTENT_MESSAGE_CONTENT  # members, presences, message content
TEXT_CHANNEL, DM_CHANNEL = 0, 1
CALLBACK_PONG, CALLBACK_MESSAGE, CALLBACK_DEFERRED, CALLBACK_DEFERRED_UPDATE, CALLBACK_UPDATE = 1, 4, 5, 6, 7


@dataclass
class ApiCall:
    """One REST request the client made, and how the fake answered it."""

    method: str
    route: str  # the template, as discord.py names it: "POST /channels/{channel_id}/messages"
    path: dict[str, str]  # the template's parameters
    body: Any
    outcome: str  # "ok", "network", or the HTTP status of an error ("429", "401", ...)
    query: dict[str, str] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)


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


@dataclass
class _Session:
    session_id: str
    intents: int
    seq: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)  # every dispatch, for a RESUME to replay


class FakeDiscord:
    """The fake: start it, point discord.py at :attr:`api_base`, push users' events, read what the bot did."""

    def __init__(
        self,
        token: str = "TEST.BOT.TOKEN",
        *,
        bot_id: int = 900000000000000001,
        username: str = "pico",
        heartbeat_interval_ms: int = 41250,
        allowed_intents: int = PRIVILEGED_INTENTS,  # the privileged intents enabled in the developer portal
        rate_limit: int = 50,  # requests per route and channel per window, as X-RateLimit-Limit says
        rate_window_s: float = 1.0,
    ) -> None:
        self.token = token
        self.bot_user: dict[str, Any] = _user(bot_id, username, bot=True)
        self.application_id = str(bot_id)  # a bot's application id is its user id
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.allowed_intents = allowed_intents
        self.rate_limit = rate_limit
        self.rate_window_s = rate_window_s
        self.calls: list[ApiCall] = []
        self.received: list[dict[str, Any]] = []  # gateway payloads from the client (tokens included)
        self.guilds: dict[str, dict[str, Any]] = {}
        self.channels: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, dict[str, dict[str, Any]]] = {}  # channel id -> message id -> Message
        self.users: dict[str, dict[str, Any]] = {self.bot_user["id"]: self.bot_user}
        self.blocked: set[str] = set()  # users who accept no DM from the bot (50007)
        self.commands: list[dict[str, Any]] = []  # global application commands, as last PUT
        self.guild_commands: dict[str, list[dict[str, Any]]] = {}
        self.interactions: dict[str, dict[str, Any]] = {}  # id -> payload sent to the bot
        self.callbacks: dict[str, list[dict[str, Any]]] = {}  # interaction id -> accepted callback bodies
        self.originals: dict[str, dict[str, Any]] = {}  # interaction token -> its response message
        self.sessions: dict[str, _Session] = {}
        self.identified = asyncio.Event()  # set at each READY; tests clear it to wait for the next
        self._live: _Connection | None = None
        self._session: _Session | None = None  # of the live connection
        self._backlog: list[tuple[str, dict[str, Any]]] = []  # dispatches while nobody was connected
        self._ids = itertools.count((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22)
        self._failures: dict[str, deque[tuple[FailureKind, float] | None]] = {}  # None: this one succeeds
        self._windows: dict[str, tuple[float, int]] = {}  # bucket -> (window start, requests)
        self._routes: list[tuple[str, re.Pattern[str], str, Handler]] = []
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self.port = 0
        self.offline = False  # go_offline(): kept-alive connections are cut at their next request
        self._add_routes()

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def api_base(self) -> str:
        """What ``discord.http.Route.BASE`` (the channel's ``api_base_url``) is set to."""
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        """The gateway's address, as ``GET /gateway/bot`` gives it."""
        return f"ws://127.0.0.1:{self.port}/gateway"

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1."""
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await self.go_online()

    async def close(self) -> None:
        """Stop listening; a connected client sees its gateway closed."""
        await self.drop_gateway()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def go_offline(self) -> None:
        """No network: the gateway connection drops and nothing listens on the port until :meth:`go_online`."""
        self.offline = True
        if self._site is not None:
            await self._site.stop()
            self._site = None
        await self.drop_gateway()

    async def go_online(self) -> None:
        """Listen again, on the same port as before (a free one the first time)."""
        assert self._runner is not None, "start() first"
        self.offline = False
        self._site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await self._site.start()
        if not self.port:
            self.port = self._runner.addresses[0][1]

    async def drop_gateway(self) -> None:
        """Cut the gateway connection without a close frame (the client should RESUME)."""
        live, self._live, self._session = self._live, None, None
        if live is not None:
            live.drop()

    @property
    def connected(self) -> bool:
        """Whether a client is identified (or resumed) on the gateway now."""
        return self._session is not None

    # --- what tests inject ---------------------------------------------------------------------

    def new_id(self) -> str:
        """A fresh snowflake (its timestamp is now)."""
        return str(next(self._ids))

    def user(self, user_id: int | str, name: str | None = None) -> dict[str, Any]:
        """The User object of a (human) user id."""
        key = str(user_id)
        if key not in self.users:
            self.users[key] = _user(int(key), name or f"user{key}")
        return self.users[key]

    def add_guild(self, guild_id: int | str, channel_ids: list[int | str], *, name: str = "Home") -> dict[str, Any]:
        """A guild the bot is in, with text channels (dispatched as GUILD_CREATE when a client is connected)."""
        gid = str(guild_id)
        channels = []
        for position, cid in enumerate(channel_ids):
            channel = {
                "id": str(cid),
                "type": TEXT_CHANNEL,
                "guild_id": gid,
                "name": f"channel-{position}",
                "position": position,
                "permission_overwrites": [],
                "nsfw": False,
                "parent_id": None,
                "topic": None,
                "last_message_id": None,
                "rate_limit_per_user": 0,
            }
            self.channels[channel["id"]] = channel
            self.messages.setdefault(channel["id"], {})
            channels.append({k: v for k, v in channel.items() if k != "guild_id"})
        everyone = {"id": gid, "name": "@everyone", "permissions": "1071698660929", "position": 0, "color": 0}
        guild = {
            "id": gid,
            "name": name,
            "icon": None,
            "owner_id": self.new_id(),
            "roles": [{**everyone, "hoist": False, "managed": False, "mentionable": False, "flags": 0}],
            "member_count": 2,
            "large": False,
            "unavailable": False,
            "joined_at": _now_iso(),
            "channels": channels,
            "members": [self._member(self.bot_user)],
            "preferred_locale": "en-US",
            **{key: 0 for key in ("verification_level", "default_message_notifications", "explicit_content_filter")},
            **{key: 0 for key in ("mfa_level", "premium_tier", "system_channel_flags", "nsfw_level")},
            **{key: [] for key in ("emojis", "stickers", "features", "threads", "voice_states", "presences")},
            **{key: [] for key in ("stage_instances", "guild_scheduled_events", "soundboard_sounds")},
        }
        self.guilds[gid] = guild
        if self._session is not None:
            self.dispatch("GUILD_CREATE", guild)
        return guild

    def dm_channel(self, user_id: int | str) -> dict[str, Any]:
        """The DM channel between the bot and a user (created once, as Discord does)."""
        user = self.user(user_id)
        for channel in self.channels.values():
            if channel["type"] == DM_CHANNEL and channel["recipients"][0]["id"] == user["id"]:
                return channel
        channel = {"id": self.new_id(), "type": DM_CHANNEL, "last_message_id": None, "recipients": [user]}
        self.channels[channel["id"]] = channel
        self.messages[channel["id"]] = {}
        return channel

    def push_message(
        self,
        user_id: int | str,
        text: str,
        *,
        channel_id: int | str | None = None,
        mention: bool = False,
        reply_to: str | None = None,
    ) -> dict[str, Any]:
        """A user writes: in a DM (no ``channel_id``) or in a guild channel, ``mention`` putting ``<@bot>`` first,
        ``reply_to`` naming a message of that channel it answers.

        Returns the Message as stored (full content); the MESSAGE_CREATE the bot gets has it blanked
        when Discord would blank it (a guild message, no mention, no message-content intent).
        """
        author = self.user(user_id)
        channel = self.dm_channel(user_id) if channel_id is None else self.channels[str(channel_id)]
        content = f"<@{self.bot_user['id']}> {text}" if mention else text
        message = self._message(channel, author, content)
        if mention:
            message["mentions"] = (
                [{**self.bot_user, "member": self._member(None)}] if "guild_id" in channel else [self.bot_user]
            )
        if reply_to is not None:
            message.update(type=19, referenced_message=self.messages[channel["id"]][reply_to])
            message["message_reference"] = {"type": 0, "channel_id": channel["id"], "message_id": reply_to}
        self.messages[channel["id"]][message["id"]] = message
        event = dict(message)
        if "guild_id" in channel:
            event["guild_id"] = channel["guild_id"]
            event["member"] = self._member(None)
        self.dispatch("MESSAGE_CREATE", event)
        return message

    def push_slash(
        self,
        user_id: int | str,
        name: str,
        options: dict[str, str] | None = None,
        *,
        channel_id: int | str | None = None,
    ) -> dict[str, Any]:
        """A user runs ``/name`` (string options) in a DM or a guild channel; returns the INTERACTION_CREATE."""
        command = next((c for c in self._all_commands() if c["name"] == name), None)
        data: dict[str, Any] = {
            "id": command["id"] if command else self.new_id(),
            "name": name,
            "type": 1,
            "options": [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()],
        }
        channel = self.dm_channel(user_id) if channel_id is None else self.channels[str(channel_id)]
        if "guild_id" in channel:
            data["guild_id"] = channel["guild_id"]
        return self._interact(user_id, channel, 2, data)

    def push_button(
        self, user_id: int | str, channel_id: int | str, message_id: int | str, custom_id: str
    ) -> dict[str, Any]:
        """A user presses a button under one of the bot's messages; returns the INTERACTION_CREATE."""
        channel = self.channels[str(channel_id)]
        message = self.messages[channel["id"]][str(message_id)]
        data = {"custom_id": custom_id, "component_type": 2}
        return self._interact(user_id, channel, 3, data, message=message)

    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send a DISPATCH (op 0) to the connected client; kept for a RESUME when nobody is connected."""
        if self._session is None:
            self._backlog.append((event, data))
            return
        self._session.seq += 1
        payload = {"op": 0, "t": event, "s": self._session.seq, "d": data}
        self._session.sent.append(payload)
        self._send_now(payload)

    def fail_next(
        self, route: str, n: int = 1, kind: FailureKind = "network", *, retry_after: float = 1.0, after: int = 0
    ) -> None:
        """Make ``n`` requests of ``route`` ("POST /channels/{channel_id}/messages") fail, ``after`` more succeeded."""
        if not any(r == route for r, *_ in self._routes):
            raise ValueError(f"the fake has no route {route!r}")
        self._failures.setdefault(route, deque()).extend([None] * after + [(kind, retry_after)] * n)

    # --- what tests read ----------------------------------------------------------------------

    def calls_of(self, route: str, *, ok_only: bool = False) -> list[ApiCall]:
        """The recorded requests of one route template, oldest first."""
        return [c for c in self.calls if c.route == route and (c.outcome == "ok" or not ok_only)]

    def bot_messages(self, channel_id: int | str) -> list[dict[str, Any]]:
        """The bot's messages in a channel as they look now (after edits), oldest first."""
        found = self.messages.get(str(channel_id), {}).values()
        return [m for m in found if m["author"]["id"] == self.bot_user["id"]]

    def sent_texts(self, channel_id: int | str) -> list[str]:
        """The content of every message the bot created in a channel, as first sent."""
        return [
            c.body["content"]
            for c in self.calls_of("POST /channels/{channel_id}/messages", ok_only=True)
            if c.path["channel_id"] == str(channel_id)
        ]

    def gateway_ops(self, op: int) -> list[dict[str, Any]]:
        """The payloads of one opcode the client sent, oldest first."""
        return [p for p in self.received if p.get("op") == op]

    # --- the gateway ----------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        if self.offline:
            return _cut(request)
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
        await self.drop_gateway()  # one connection at a time, like one shard
        live = self._live = _Connection(ws, request, compress is not None)
        self._send_now({"op": 10, "s": None, "t": None, "d": {"heartbeat_interval": self.heartbeat_interval_ms}})
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
            if data.get("token") != self.token:
                await ws.close(code=4004, message=b"Authentication failed.")
                return
            intents = int(data.get("intents", 0))
            if intents & PRIVILEGED_INTENTS & ~self.allowed_intents:
                await ws.close(code=4014, message=b"Disallowed intent(s).")
                return
            session = _Session(secrets.token_hex(16), intents)
            self.sessions[session.session_id] = session
            self._session = session
            self.dispatch("READY", self._ready(session))
            for guild in self.guilds.values():
                self.dispatch("GUILD_CREATE", guild)
            self._flush_backlog()
            self.identified.set()
        elif op == 6:
            session = self.sessions.get(data.get("session_id", ""))
            if session is None or data.get("token") != self.token or data.get("seq") is None:
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
        mentioned = any(u["id"] == self.bot_user["id"] for u in data.get("mentions", []))
        if "guild_id" not in data or mentioned or data["author"]["id"] == self.bot_user["id"]:
            return data
        return {**data, "content": "", "embeds": [], "attachments": [], "components": []}

    def _ready(self, session: _Session) -> dict[str, Any]:
        return {
            "v": 10,
            "user": self.bot_user,
            "guilds": [{"id": gid, "unavailable": True} for gid in self.guilds],
            "session_id": session.session_id,
            "resume_gateway_url": self.gateway_url,
            "session_type": "normal",
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "guild_join_requests": [],
            "application": {"id": self.application_id, "flags": 0},
            "shard": [0, 1],
            "_trace": ["fake-discord"],
        }

    # --- REST ----------------------------------------------------------------------------------

    def _add_routes(self) -> None:
        table: list[tuple[str, Handler]] = [
            ("GET /gateway/bot", self._api_gateway_bot),
            ("GET /users/@me", self._api_me),
            ("GET /oauth2/applications/@me", self._api_application),
            ("POST /users/@me/channels", self._api_open_dm),
            ("POST /channels/{channel_id}/typing", self._api_typing),
            ("POST /channels/{channel_id}/messages", self._api_send),
            ("PATCH /channels/{channel_id}/messages/{message_id}", self._api_edit),
            ("POST /interactions/{interaction_id}/{interaction_token}/callback", self._api_callback),
            ("PATCH /webhooks/{application_id}/{interaction_token}/messages/@original", self._api_edit_original),
            ("POST /webhooks/{application_id}/{interaction_token}", self._api_followup),
            ("PUT /applications/{application_id}/commands", self._api_put_commands),
            ("PUT /applications/{application_id}/guilds/{guild_id}/commands", self._api_put_guild_commands),
        ]
        for route, handler in table:
            method, template = route.split(" ", 1)
            pattern = re.escape(template).replace(r"\{", "{").replace(r"\}", "}")
            pattern = re.sub(r"{(\w+)}", r"(?P<\1>[^/]+)", pattern)
            self._routes.append((route, re.compile(pattern + "$"), method, handler))

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        if self.offline:
            return _cut(request)
        path = "/" + request.match_info["tail"]
        for route, pattern, method, handler in self._routes:  # noqa: B007 - the match is used after the loop
            found = pattern.match(path)
            if found and method == request.method:
                break
        else:
            return _error(404, 0, "404: Not Found")
        params = found.groupdict()
        body = await request.json() if request.can_read_body else None
        call = ApiCall(request.method, route, params, body, "ok", dict(request.query))
        self.calls.append(call)
        failure = self._failures[route].popleft() if self._failures.get(route) else None
        if failure is not None:
            kind, retry_after = failure
            call.outcome = kind
            if kind == "network":
                return _cut(request)
            if kind == "429":
                return self._too_many(route, retry_after)
            return _error(int(kind), 0, {"401": "401: Unauthorized", "403": "Missing Access"}.get(kind, "500"))
        uses_webhook_token = "interaction_token" in params  # those routes need no bot token, as on Discord
        if not uses_webhook_token and request.headers.get("Authorization") != f"Bot {self.token}":
            call.outcome = "401"
            return _error(401, 0, "401: Unauthorized")
        bucket = f"{route}:{params.get('channel_id') or params.get('interaction_token') or ''}"
        remaining, reset_after = self._count(bucket)
        if remaining < 0:
            call.outcome = "429"
            return self._too_many(route, reset_after)
        try:
            result = await handler(params, body or {}, dict(request.query))
        except _ApiError as exc:
            call.outcome = str(exc.status)
            return _error(exc.status, exc.code, exc.message, exc.errors)
        headers = self._ratelimit_headers(route, remaining, reset_after)
        if result is None:
            return web.Response(status=204, headers=headers)
        return _json(result, headers=headers)

    def _count(self, bucket: str) -> tuple[int, float]:
        now = time.monotonic()
        start, used = self._windows.get(bucket, (now, 0))
        if now - start >= self.rate_window_s:
            start, used = now, 0
        self._windows[bucket] = (start, used + 1)
        return self.rate_limit - used - 1, max(0.001, start + self.rate_window_s - now)

    def _ratelimit_headers(self, route: str, remaining: int, reset_after: float) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.rate_limit),
            "X-RateLimit-Remaining": str(max(0, remaining)),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": format(zlib.crc32(route.encode()), "x"),
        }

    def _too_many(self, route: str, retry_after: float) -> web.Response:
        headers = {
            **self._ratelimit_headers(route, 0, retry_after),
            "Retry-After": str(math.ceil(retry_after)),
            "X-RateLimit-Scope": "user",
            "Via": "1.1 google",
        }
        body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
        return _json(body, status=429, headers=headers)

    # --- the endpoints --------------------------------------------------------------------------

    async def _api_gateway_bot(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        limit = {"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}
        return {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}

    async def _api_me(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        return {**self.bot_user, "verified": True, "mfa_enabled": False, "flags": 0, "locale": "en-US"}

    async def _api_application(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        return {
            "id": self.application_id,
            "name": self.bot_user["username"],
            "icon": None,
            "description": "",
            "summary": "",
            "bot_public": False,
            "bot_require_code_grant": False,
            "verify_key": "0" * 64,
            "owner": self.user(1, "owner"),
            "flags": 0,
            "bot": self.bot_user,
            "interactions_endpoint_url": None,
            "redirect_uris": [],
        }

    async def _api_open_dm(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        recipient = str(body.get("recipient_id", ""))
        if recipient not in self.users:
            raise _ApiError(400, 50035, "Invalid Form Body", {"recipient_id": "Unknown user"})
        return self.dm_channel(recipient)

    async def _api_typing(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        self._channel(p["channel_id"])
        return None

    async def _api_send(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        channel = self._channel(p["channel_id"])
        if channel["type"] == DM_CHANNEL and channel["recipients"][0]["id"] in self.blocked:
            raise _ApiError(403, 50007, "Cannot send messages to this user")
        message = self._message(channel, self.bot_user, _content(body), components=body.get("components") or [])
        replied = str((body.get("message_reference") or {}).get("message_id"))  # snowflakes: numbers or strings
        if replied in self.messages[channel["id"]]:
            message["message_reference"] = {"channel_id": channel["id"], "message_id": replied}
            message["referenced_message"] = self.messages[channel["id"]][replied]
            message["type"] = 19  # a reply
        self.messages[channel["id"]][message["id"]] = message
        return message

    async def _api_edit(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        channel = self._channel(p["channel_id"])
        message = self.messages[channel["id"]].get(p["message_id"])
        if message is None:
            raise _ApiError(404, 10008, "Unknown Message")
        if message["author"]["id"] != self.bot_user["id"]:
            raise _ApiError(403, 50005, "Cannot edit a message authored by another user")
        _edit(message, body)
        return message

    async def _api_callback(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        interaction = self.interactions.get(p["interaction_id"])
        if interaction is None or interaction["token"] != p["interaction_token"]:
            raise _ApiError(404, 10062, "Unknown interaction")
        if interaction["id"] in self.callbacks:
            raise _ApiError(400, 40060, "Interaction has already been acknowledged.")
        kind, data = body.get("type"), body.get("data") or {}
        channel = self.channels[interaction["channel_id"]]
        if kind in (CALLBACK_MESSAGE, CALLBACK_DEFERRED):
            content = _content(data) if kind == CALLBACK_MESSAGE else ""
            message = self._message(channel, self.bot_user, content, components=data.get("components") or [])
            message.update(type=20 if interaction["type"] == 2 else 0, webhook_id=self.application_id)
            message["flags"] = int(data.get("flags", 0)) | (128 if kind == CALLBACK_DEFERRED else 0)  # 128: loading
            self.messages[channel["id"]][message["id"]] = message
        elif kind in (CALLBACK_UPDATE, CALLBACK_DEFERRED_UPDATE) and interaction["type"] == 3:
            message = self.messages[channel["id"]][interaction["message"]["id"]]
            if kind == CALLBACK_UPDATE:
                _edit(message, data)
        else:
            raise _ApiError(400, 50035, "Invalid Form Body", {"type": f"not a response to this interaction: {kind}"})
        self.callbacks[interaction["id"]] = [body]
        self.originals[interaction["token"]] = message
        if q.get("with_response") not in ("1", "true", "True"):
            return None
        response = {
            "id": interaction["id"],
            "type": interaction["type"],
            "response_message_id": message["id"],
            "response_message_loading": kind == CALLBACK_DEFERRED,
            "response_message_ephemeral": bool(int(data.get("flags", 0)) & 64),
        }
        return {"interaction": response, "resource": {"type": kind, "message": message}}

    def _original(self, p: dict[str, str]) -> dict[str, Any]:
        message = self.originals.get(p["interaction_token"])
        if p["application_id"] != self.application_id or message is None:
            raise _ApiError(404, 10008, "Unknown Message")
        return message

    async def _api_edit_original(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        message = self._original(p)
        _edit(message, body)
        message["flags"] = message.get("flags", 0) & ~128  # no longer "thinking…"
        return message

    async def _api_followup(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        interaction = next((i for i in self.interactions.values() if i["token"] == p["interaction_token"]), None)
        if interaction is None or interaction["id"] not in self.callbacks:
            raise _ApiError(404, 10015, "Unknown Webhook")
        channel = self.channels[interaction["channel_id"]]
        message = self._message(channel, self.bot_user, _content(body), components=body.get("components") or [])
        message["webhook_id"] = self.application_id
        self.messages[channel["id"]][message["id"]] = message
        return message

    async def _api_put_commands(self, p: dict[str, str], body: Any, q: dict[str, str]) -> Any:
        self.commands = self._stored_commands(p, body)
        return self.commands

    async def _api_put_guild_commands(self, p: dict[str, str], body: Any, q: dict[str, str]) -> Any:
        self.guild_commands[p["guild_id"]] = self._stored_commands(p, body, guild_id=p["guild_id"])
        return self.guild_commands[p["guild_id"]]

    # --- helpers ---------------------------------------------------------------------------------

    def _stored_commands(self, p: dict[str, str], body: Any, guild_id: str | None = None) -> list[dict[str, Any]]:
        if p["application_id"] != self.application_id:
            raise _ApiError(403, 50001, "Missing Access")
        if not isinstance(body, list):
            raise _ApiError(400, 50035, "Invalid Form Body", {"_errors": "expected a list of commands"})
        stored = []
        for command in body:
            name = command.get("name", "")
            if not re.fullmatch(r"[-_\w]{1,32}", name) or name != name.lower():
                raise _ApiError(400, 50035, "Invalid Form Body", {"name": f"invalid command name {name!r}"})
            if not 1 <= len(command.get("description", "")) <= 100:
                raise _ApiError(400, 50035, "Invalid Form Body", {"description": f"{name}: 1 to 100 characters"})
            item = {"id": self.new_id(), "application_id": self.application_id, "version": self.new_id(), **command}
            item.setdefault("type", 1)
            if guild_id:
                item["guild_id"] = guild_id
            stored.append(item)
        return stored

    def _all_commands(self) -> list[dict[str, Any]]:
        return [*self.commands, *itertools.chain.from_iterable(self.guild_commands.values())]

    def _channel(self, channel_id: str) -> dict[str, Any]:
        channel = self.channels.get(channel_id)
        if channel is None:
            raise _ApiError(404, 10003, "Unknown Channel")
        return channel

    def _member(self, user: dict[str, Any] | None) -> dict[str, Any]:
        member: dict[str, Any] = {"roles": [], "joined_at": _now_iso(), "deaf": False, "mute": False, "flags": 0}
        if user is not None:
            member["user"] = user
        return member

    def _message(
        self, channel: dict[str, Any], author: dict[str, Any], content: str, *, components: list[Any] | None = None
    ) -> dict[str, Any]:
        message_id = self.new_id()
        channel["last_message_id"] = message_id
        return {
            "id": message_id,
            "channel_id": channel["id"],
            "author": author,
            "content": content,
            "timestamp": _now_iso(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
            "components": components or [],
        }

    def _interact(
        self,
        user_id: int | str,
        channel: dict[str, Any],
        kind: int,
        data: dict[str, Any],
        *,
        message: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        user = self.user(user_id)
        interaction: dict[str, Any] = {
            "id": self.new_id(),
            "application_id": self.application_id,
            "type": kind,
            "data": data,
            "channel_id": channel["id"],
            "channel": {k: v for k, v in channel.items() if k != "recipients"} | {"recipients": [user]}
            if channel["type"] == DM_CHANNEL
            else channel,
            "token": secrets.token_urlsafe(48),
            "version": 1,
            "app_permissions": "1071698660929",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": channel.get("guild_id", "0")},
            "attachment_size_limit": 10485760,
        }
        if "guild_id" in channel:
            interaction.update(guild_id=channel["guild_id"], guild_locale="en-US", context=0)
            interaction["member"] = {**self._member(user), "permissions": "1071698660929"}
        else:
            interaction.update(user=user, context=1)
        if message is not None:
            interaction["message"] = message
        self.interactions[interaction["id"]] = interaction
        self.dispatch("INTERACTION_CREATE", interaction)
        return interaction


class _ApiError(Exception):
    def __init__(self, status: int, code: int, message: str, errors: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.errors = status, code, message, errors


def _error(status: int, code: int, message: str, errors: dict[str, str] | None = None) -> web.Response:
    body: dict[str, Any] = {"message": message, "code": code}
    if errors:  # Discord's nested form errors: {"field": {"_errors": [{"code": ..., "message": ...}]}}
        body["errors"] = {k: {"_errors": [{"code": "INVALID", "message": v}]} for k, v in errors.items()}
    return _json(body, status=status)


def _cut(request: web.Request) -> web.Response:
    """Drop the connection without an answer: the client sees a network error."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=204)


def _json(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer typed exactly ``application/json``, as Discord sends it (discord.py compares the header)."""
    return web.Response(
        body=json.dumps(body).encode(), status=status, headers={**(headers or {}), "Content-Type": "application/json"}
    )


def _user(user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    user: dict[str, Any] = {
        "id": str(user_id),
        "username": name,
        "discriminator": "0",
        "global_name": name.title(),
        "avatar": None,
        "public_flags": 0,
    }
    if bot:
        user["bot"] = True
    return user


def _content(body: dict[str, Any]) -> str:
    content = body.get("content") or ""
    if len(content) > MESSAGE_LIMIT:
        raise _ApiError(400, 50035, "Invalid Form Body", {"content": "Must be 2000 or fewer in length."})
    if not content.strip() and not body.get("embeds") and not body.get("components"):
        raise _ApiError(400, 50006, "Cannot send an empty message")
    return content


def _edit(message: dict[str, Any], body: dict[str, Any]) -> None:
    if "content" in body:
        message["content"] = _content({**body, "components": body.get("components", message["components"])})
    if "components" in body:  # an edit without components keeps them; an empty list removes them
        message["components"] = body["components"] or []
    message["edited_timestamp"] = _now_iso()


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()
