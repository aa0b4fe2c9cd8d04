"""The fake Discord's REST API (v10): Discord's objects, the endpoints that act on them, and what every
request goes through first.

Requests arrive under ``http://127.0.0.1:PORT/api/v10`` (what ``discord.http.Route.BASE`` is set to) and
are matched against route templates as discord.py names them (``"POST /channels/{channel_id}/messages"``).
Each is recorded (:class:`ApiCall`), then: a failure queued by :meth:`DiscordRest.fail_next` (network,
429, 401, 403, 500); the bot's token in ``Authorization: Bot ...`` (else 401; the interaction routes need
none, as on Discord); the ``X-RateLimit-*`` headers on every answer, counted per route and channel in a
window, so discord.py's own rate limiter sees what it sees on Discord. A 429 carries ``retry_after`` in the
body, ``Retry-After`` and ``Via`` (discord.py takes a 429 without ``Via`` for a Cloudflare ban). Bodies are
JSON both ways; an endpoint refuses by raising :class:`ApiError`, answered with Discord's error body
(``{"message", "code"}``, 50035 with ``errors`` for an invalid form).

:class:`DiscordRest` holds the state the whole fake shares (users, guilds, channels, messages, commands,
interactions and their answers) and builds Discord's JSON objects. It does not listen on a port: the
``FakeDiscord`` in discord_api.py subclasses it, adding the server, the gateway and what tests inject.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from aiohttp import web

FailureKind = Literal["network", "429", "401", "403", "500"]
Endpoint = Callable[[dict[str, str], dict[str, Any], dict[str, str]], Awaitable[Any]]  # (path, body, query)

MESSAGE_LIMIT = 2000  # characters of a message's content
DISCORD_EPOCH_MS = 1420070400000
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


class ApiError(Exception):
    """An endpoint's refusal, answered with Discord's error body."""

    def __init__(self, status: int, code: int, message: str, errors: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.errors = status, code, message, errors


class DiscordRest:
    """Discord's objects and the REST endpoints on them; ``FakeDiscord`` serves it and adds the gateway."""

    def __init__(self, token: str, *, bot_id: int, username: str, rate_limit: int, rate_window_s: float) -> None:
        self.token = token
        self.bot_user: dict[str, Any] = _user(bot_id, username, bot=True)
        self.application_id = str(bot_id)  # a bot's application id is its user id
        self.rate_limit = rate_limit
        self.rate_window_s = rate_window_s
        self.port = 0
        self.calls: list[ApiCall] = []
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
        self._ids = itertools.count((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22)
        self._failures: dict[str, deque[tuple[FailureKind, float] | None]] = {}  # None: this one succeeds
        self._windows: dict[str, tuple[float, int]] = {}  # bucket -> (window start, requests)
        self._routes: list[tuple[str, re.Pattern[str], str, Endpoint]] = []
        self._add_routes()

    @property
    def api_base(self) -> str:
        """What ``discord.http.Route.BASE`` (the channel's ``api_base_url``) is set to."""
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        """The gateway's address, as ``GET /gateway/bot`` gives it."""
        return f"ws://127.0.0.1:{self.port}/gateway"

    def new_id(self) -> str:
        """A fresh snowflake (its timestamp is now)."""
        return str(next(self._ids))

    def user(self, user_id: int | str, name: str | None = None) -> dict[str, Any]:
        """The User object of a (human) user id."""
        key = str(user_id)
        if key not in self.users:
            self.users[key] = _user(int(key), name or f"user{key}")
        return self.users[key]

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

    def fail_next(
        self, route: str, n: int = 1, kind: FailureKind = "network", *, retry_after: float = 1.0, after: int = 0
    ) -> None:
        """Make ``n`` requests of ``route`` ("POST /channels/{channel_id}/messages") fail, ``after`` more succeeded."""
        if not any(r == route for r, *_ in self._routes):
            raise ValueError(f"the fake has no route {route!r}")
        self._failures.setdefault(route, deque()).extend([None] * after + [(kind, retry_after)] * n)

    def calls_of(self, route: str, *, ok_only: bool = False) -> list[ApiCall]:
        """The recorded requests of one route template, oldest first."""
        return [c for c in self.calls if c.route == route and (c.outcome == "ok" or not ok_only)]

    # --- what every request goes through --------------------------------------------------------

    def _add_routes(self) -> None:
        table: list[tuple[str, Endpoint]] = [
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
        for route, endpoint in table:
            method, template = route.split(" ", 1)
            pattern = re.escape(template).replace(r"\{", "{").replace(r"\}", "}")
            pattern = re.sub(r"{(\w+)}", r"(?P<\1>[^/]+)", pattern)
            self._routes.append((route, re.compile(pattern + "$"), method, endpoint))

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        """The aiohttp handler of ``/api/v10/{tail}``."""
        path = "/" + request.match_info["tail"]
        for route, pattern, method, endpoint in self._routes:  # noqa: B007 - the match is used after the loop
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
                return cut(request)
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
            result = await endpoint(params, body or {}, dict(request.query))
        except ApiError as exc:
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
            raise ApiError(400, 50035, "Invalid Form Body", {"recipient_id": "Unknown user"})
        return self.dm_channel(recipient)

    async def _api_typing(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        self._channel(p["channel_id"])
        return None

    async def _api_send(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        channel = self._channel(p["channel_id"])
        if channel["type"] == DM_CHANNEL and channel["recipients"][0]["id"] in self.blocked:
            raise ApiError(403, 50007, "Cannot send messages to this user")
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
            raise ApiError(404, 10008, "Unknown Message")
        if message["author"]["id"] != self.bot_user["id"]:
            raise ApiError(403, 50005, "Cannot edit a message authored by another user")
        _edit(message, body)
        return message

    async def _api_callback(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        interaction = self.interactions.get(p["interaction_id"])
        if interaction is None or interaction["token"] != p["interaction_token"]:
            raise ApiError(404, 10062, "Unknown interaction")
        if interaction["id"] in self.callbacks:
            raise ApiError(400, 40060, "Interaction has already been acknowledged.")
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
            raise ApiError(400, 50035, "Invalid Form Body", {"type": f"not a response to this interaction: {kind}"})
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
            raise ApiError(404, 10008, "Unknown Message")
        return message

    async def _api_edit_original(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        message = self._original(p)
        _edit(message, body)
        message["flags"] = message.get("flags", 0) & ~128  # no longer "thinking…"
        return message

    async def _api_followup(self, p: dict[str, str], body: dict[str, Any], q: dict[str, str]) -> Any:
        interaction = next((i for i in self.interactions.values() if i["token"] == p["interaction_token"]), None)
        if interaction is None or interaction["id"] not in self.callbacks:
            raise ApiError(404, 10015, "Unknown Webhook")
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

    # --- Discord's objects ----------------------------------------------------------------------

    def _stored_commands(self, p: dict[str, str], body: Any, guild_id: str | None = None) -> list[dict[str, Any]]:
        if p["application_id"] != self.application_id:
            raise ApiError(403, 50001, "Missing Access")
        if not isinstance(body, list):
            raise ApiError(400, 50035, "Invalid Form Body", {"_errors": "expected a list of commands"})
        stored = []
        for command in body:
            name = command.get("name", "")
            if not re.fullmatch(r"[-_\w]{1,32}", name) or name != name.lower():
                raise ApiError(400, 50035, "Invalid Form Body", {"name": f"invalid command name {name!r}"})
            if not 1 <= len(command.get("description", "")) <= 100:
                raise ApiError(400, 50035, "Invalid Form Body", {"description": f"{name}: 1 to 100 characters"})
            item = {"id": self.new_id(), "application_id": self.application_id, "version": self.new_id(), **command}
            item.setdefault("type", 1)
            if guild_id:
                item["guild_id"] = guild_id
            stored.append(item)
        return stored

    def _channel(self, channel_id: str) -> dict[str, Any]:
        channel = self.channels.get(channel_id)
        if channel is None:
            raise ApiError(404, 10003, "Unknown Channel")
        return channel

    def _member(self, user: dict[str, Any] | None) -> dict[str, Any]:
        member: dict[str, Any] = {"roles": [], "joined_at": now_iso(), "deaf": False, "mute": False, "flags": 0}
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
            "timestamp": now_iso(),
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


def cut(request: web.Request) -> web.Response:
    """Drop the connection without an answer: the client sees a network error."""
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=204)


def now_iso() -> str:
    """Now, as Discord writes a timestamp."""
    return datetime.now(UTC).isoformat()


def _error(status: int, code: int, message: str, errors: dict[str, str] | None = None) -> web.Response:
    body: dict[str, Any] = {"message": message, "code": code}
    if errors:  # Discord's nested form errors: {"field": {"_errors": [{"code": ..., "message": ...}]}}
        body["errors"] = {k: {"_errors": [{"code": "INVALID", "message": v}]} for k, v in errors.items()}
    return _json(body, status=status)


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
        raise ApiError(400, 50035, "Invalid Form Body", {"content": "Must be 2000 or fewer in length."})
    if not content.strip() and not body.get("embeds") and not body.get("components"):
        raise ApiError(400, 50006, "Cannot send an empty message")
    return content


def _edit(message: dict[str, Any], body: dict[str, Any]) -> None:
    if "content" in body:
        message["content"] = _content({**body, "components": body.get("components", message["components"])})
    if "components" in body:  # an edit without components keeps them; an empty list removes them
        message["components"] = body["components"] or []
    message["edited_timestamp"] = now_iso()
