"""A fake of Slack's Web API and Socket Mode websocket, close enough to the wire for slack_sdk and Bolt.

Web API: ``POST /api/<method>`` with a form, JSON or query body and ``Authorization: Bearer <token>``,
answered ``{"ok": true, ...}`` or as Slack answers a failure: HTTP 200 ``{"ok": false, "error": "invalid_auth"}``
(``not_authed``, ``not_allowed_token_type``, ``channel_not_found``, ``message_not_found``, ``invalid_blocks``
with its ``errors`` list ...), HTTP 429 ``{"ok": false, "error": "ratelimited"}`` with a ``Retry-After``
header. The bot token serves the bot's methods (auth.test, chat.postMessage, chat.update,
conversations.open, users.info); the app-level token only ``apps.connections.open``, which hands out a
``ws://127.0.0.1:<port>/link/?ticket=...`` URL.

Socket Mode: a connection first gets ``hello``; envelopes ``{envelope_id, type, payload,
accepts_response_payload[, retry_attempt, retry_reason]}`` of type ``events_api``, ``slash_commands`` or
``interactive`` go to the newest open connection (queued while there is none); the client acknowledges
with ``{"envelope_id": ..., "payload"?: ...}``. An envelope not acknowledged is sent again, with
``retry_attempt`` + 1 and ``retry_reason: "timeout"``, to the next connection (at-least-once, as Slack
does) or when a test calls :meth:`FakeSlack.redeliver`. :meth:`FakeSlack.disconnect` sends Slack's
``{"type": "disconnect", "reason": ...}``; :meth:`FakeSlack.drop_connections` cuts them without one.

Like Slack, the fake sends the app a ``message`` event for its own posts and edits (``bot_id`` set; edits as
``message_changed``) when it is subscribed to that kind of channel, so a bot that does not ignore its
own messages talks to itself here too. Slash commands and block actions carry a ``response_url`` on the
fake (``POST /response/<id>``, five posts each, recorded in :attr:`FakeSlack.responses`): an ephemeral
answer is kept in :attr:`FakeSlack.ephemeral`, where its buttons can be pressed too, and
``replace_original`` edits the message it came from.

Tests push what people do (:meth:`push_dm`, :meth:`push_mention`, :meth:`push_channel_message`,
:meth:`push_command`, :meth:`push_action`, :meth:`push_ephemeral_action`), make calls fail
(:meth:`fail_next`: network, 429, 500 or any Slack error code) or wait (:meth:`hold`), and read every
request (:attr:`calls`), acknowledgement (:attr:`acks`) and message as it looks now (:meth:`bot_messages`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

TEAM_ID = "T0PICO"
APP_ID = "A0PICO"
BOT_USER_ID = "U0PICOBOT"
BOT_ID = "B0PICO"
TEXT_LIMIT = 40_000  # characters of a message's text (Slack truncates at 40,000; more is msg_too_long)
SECTION_TEXT_LIMIT = 3_000  # characters of a section block's text
BUTTON_TEXT_LIMIT = 75  # characters of a button's label
BUTTON_VALUE_LIMIT = 2_000
RESPONSE_URL_USES = 5  # a response_url answers this many posts (within 30 minutes)
ACTIONS_LIMIT = 25  # elements in one actions block
BLOCKS_LIMIT = 50  # blocks in one message
# Methods the app-level token may call; the bot token may call all the others.
_APP_TOKEN_METHODS = {"apps.connections.open"}
_JSON_PARAMS = {"blocks", "attachments", "metadata"}  # form bodies carry these JSON-encoded


@dataclass
class ApiCall:
    """One Web API request the app made, and how the fake answered it."""

    method: str
    params: dict[str, Any]
    outcome: str  # "ok", "network", "429", "500", or the Slack error code ("invalid_auth", ...)
    token: str = ""
    at: float = field(default_factory=time.monotonic)


@dataclass
class Connection:
    """One Socket Mode websocket the app opened."""

    ticket: str
    ws: web.WebSocketResponse
    opened: float = field(default_factory=time.monotonic)


class FakeSlack:
    """The fake server: start it, point the app's Web API base_url at :attr:`base_url`, push what people do."""

    def __init__(
        self,
        bot_token: str = "xoxb-test-bot",
        app_token: str = "xapp-test-app",
        *,
        bot_name: str = "pico",
        subscriptions: tuple[str, ...] = ("app_mention", "message.im", "message.channels"),
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.bot_name = bot_name
        self.subscriptions = set(subscriptions)  # the bot events the app subscribed to
        self.users: dict[str, dict[str, Any]] = {}
        self.conversations: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, dict[str, dict[str, Any]]] = {}  # channel id -> ts -> message
        self.calls: list[ApiCall] = []
        self.envelopes: list[dict[str, Any]] = []  # every envelope sent, in order (re-deliveries too)
        self.acks: dict[str, dict[str, Any] | None] = {}  # envelope id -> the ack's payload (None: none)
        self.responses: list[dict[str, Any]] = []  # what the app posted to response_urls, with "url_id"
        self.ephemeral: dict[str, dict[str, Any]] = {}  # ts -> an ephemeral message as its one reader sees it
        self.connects = 0  # websocket connections accepted
        self._tickets: set[str] = set()
        self._connections: list[Connection] = []
        self._unacked: dict[str, dict[str, Any]] = {}  # envelope id -> envelope, in push order
        self._queued: deque[str] = deque()  # envelope ids waiting for a connection
        self._flushing: set[asyncio.Future[None]] = set()
        self._sent: set[str] = set()  # envelope ids sent on some connection and not acknowledged
        self._response_urls: dict[str, dict[str, Any]] = {}  # url id -> what it answers (channel, message)
        self._failures: dict[str, deque[tuple[str, int]]] = {}
        self._holds: dict[str, asyncio.Event] = {}  # method -> released when set
        self.held: dict[str, int] = {}  # method -> calls waiting at its hold now
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.add_user(BOT_USER_ID, bot_name, is_bot=True)

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What the Web API client's base_url is set to (slack_sdk appends the method name)."""
        return f"http://127.0.0.1:{self.port}/api/"

    async def start(self, port: int = 0) -> None:
        """Listen on 127.0.0.1 (a free port, or ``port`` to come back where it was)."""
        app = web.Application()
        app.router.add_post("/api/{method}", self._handle_api)
        app.router.add_get("/api/{method}", self._handle_api)
        app.router.add_get("/link/", self._handle_link)
        app.router.add_post("/response/{url_id}", self._handle_response_url)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Stop listening; open websockets are closed (the app sees the network go away). State is kept:
        :meth:`start` with the same port brings the same workspace back."""
        for gate in self._holds.values():
            gate.set()
        await self.drop_connections()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSlack:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- the workspace ---------------------------------------------------------------------------

    def add_user(self, user_id: str, name: str = "", *, is_bot: bool = False) -> dict[str, Any]:
        """A member of the workspace (users.info answers with it)."""
        user = self.users.get(user_id)
        if user is None:
            name = name or f"user{user_id.lower()}"
            user = {
                "id": user_id,
                "team_id": TEAM_ID,
                "name": name,
                "real_name": name.title(),
                "is_bot": is_bot,
                "deleted": False,
                "profile": {"display_name": name, "real_name": name.title()},
            }
            self.users[user_id] = user
        return user

    def add_channel(self, channel_id: str, name: str = "general", *, bot_member: bool = True) -> dict[str, Any]:
        """A public channel (``C...``); the bot is a member unless told otherwise."""
        channel = self.conversations.get(channel_id)
        if channel is None:
            channel = {
                "id": channel_id,
                "name": name,
                "is_channel": True,
                "is_im": False,
                "is_member": bot_member,
                "created": int(time.time()),
            }
            self.conversations[channel_id] = channel
            self.messages[channel_id] = {}
        return channel

    def im_with(self, user_id: str) -> dict[str, Any]:
        """The direct-message conversation (``D...``) between the bot and a user, opened on first use."""
        self.add_user(user_id)
        for conversation in self.conversations.values():
            if conversation["is_im"] and conversation["user"] == user_id:
                return conversation
        channel_id = f"D{user_id.removeprefix('U')}"
        conversation = {"id": channel_id, "is_im": True, "is_channel": False, "user": user_id, "is_open": True}
        self.conversations[channel_id] = conversation
        self.messages[channel_id] = {}
        return conversation

    # --- what people do (each returns the envelope, or the event's message) -----------------------

    def push_dm(self, user_id: str, text: str, *, thread_ts: str | None = None) -> dict[str, Any]:
        """A user writes to the bot in their direct-message conversation (``message.im``); returns the message."""
        channel = self.im_with(user_id)["id"]
        message = self._user_message(user_id, channel, text, thread_ts)
        if "message.im" in self.subscriptions:
            self._push_event({**message, "channel_type": "im"})
        return message

    def push_mention(self, user_id: str, channel_id: str, text: str, *, thread_ts: str | None = None) -> dict[str, Any]:
        """A user mentions the bot in a channel: an ``app_mention`` and, when subscribed, the ``message`` too."""
        self.add_channel(channel_id)
        if f"<@{BOT_USER_ID}>" not in text:
            text = f"<@{BOT_USER_ID}> {text}"
        message = self._user_message(user_id, channel_id, text, thread_ts)
        if "app_mention" in self.subscriptions and self.conversations[channel_id]["is_member"]:
            mention = {k: v for k, v in message.items() if k not in ("channel_type", "parent_user_id")}
            self._push_event({**mention, "type": "app_mention"})
        if "message.channels" in self.subscriptions and self.conversations[channel_id]["is_member"]:
            self._push_event({**message, "channel_type": "channel"})
        return message

    def push_channel_message(
        self, user_id: str, channel_id: str, text: str, *, thread_ts: str | None = None
    ) -> dict[str, Any]:
        """A user writes in a channel without mentioning the bot (delivered only with ``message.channels``)."""
        self.add_channel(channel_id)
        message = self._user_message(user_id, channel_id, text, thread_ts)
        if "message.channels" in self.subscriptions and self.conversations[channel_id]["is_member"]:
            self._push_event({**message, "channel_type": "channel"})
        return message

    def push_command(self, user_id: str, channel_id: str, text: str = "", *, command: str = "/pico") -> dict[str, Any]:
        """A user runs a slash command in a channel or DM (``slash_commands``, accepts a response payload)."""
        user = self.add_user(user_id)
        conversation = self.conversations.get(channel_id) or self.add_channel(channel_id)
        url_id = self._response_url(channel_id, user_id, None)
        payload = {
            "token": "verification-token",
            "team_id": TEAM_ID,
            "team_domain": "picotest",
            "channel_id": channel_id,
            "channel_name": "directmessage" if conversation["is_im"] else conversation["name"],
            "user_id": user_id,
            "user_name": user["name"],
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": f"http://127.0.0.1:{self.port}/response/{url_id}",
            "trigger_id": f"{next(self._ids)}.{TEAM_ID}.trigger",
        }
        return self._push_envelope("slash_commands", payload, accepts_response_payload=True)

    def push_action(self, user_id: str, channel_id: str, message_ts: str, action_id: str) -> dict[str, Any]:
        """A user presses the button ``action_id`` on one of the bot's messages (``block_actions``)."""
        return self._push_press(user_id, channel_id, self.messages[channel_id][message_ts], action_id, False)

    def push_ephemeral_action(self, user_id: str, message_ts: str, action_id: str) -> dict[str, Any]:
        """A user presses a button on an ephemeral message (one only they see, e.g. a slash command's answer)."""
        message = self.ephemeral[message_ts]
        return self._push_press(user_id, message["channel"], message, action_id, True)

    def _push_press(
        self, user_id: str, channel_id: str, message: dict[str, Any], action_id: str, ephemeral: bool
    ) -> dict[str, Any]:
        user = self.add_user(user_id)
        found = [
            (block, element)
            for block in message.get("blocks") or []
            for element in block.get("elements") or []
            if element.get("action_id") == action_id
        ]
        if not found:
            raise AssertionError(f"no button {action_id!r} on message {message['ts']} in {channel_id}")
        block, button = found[0]
        url_id = self._response_url(channel_id, user_id, message["ts"], ephemeral=ephemeral)
        conversation = self.conversations[channel_id]
        action = {
            "action_id": action_id,
            "block_id": block.get("block_id", ""),
            "text": button["text"],
            "type": button["type"],
            "action_ts": self._next_ts(),
        }
        if "value" in button:
            action["value"] = button["value"]
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": {"id": user_id, "username": user["name"], "name": user["name"], "team_id": TEAM_ID},
            "api_app_id": APP_ID,
            "token": "verification-token",
            "container": {
                "type": "message",
                "message_ts": message["ts"],
                "channel_id": channel_id,
                "is_ephemeral": ephemeral,
            },
            "trigger_id": f"{next(self._ids)}.{TEAM_ID}.trigger",
            "team": {"id": TEAM_ID, "domain": "picotest"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel_id, "name": "directmessage" if conversation["is_im"] else conversation["name"]},
            "state": {"values": {}},
            "response_url": f"http://127.0.0.1:{self.port}/response/{url_id}",
            "actions": [action],
        }
        if not ephemeral:  # Slack leaves the message out of presses on ephemeral ones
            payload["message"] = message
        return self._push_envelope("interactive", payload, accepts_response_payload=False)

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
                        "connection_info": {"app_id": APP_ID},
                    }
                )

    async def drop_connections(self) -> None:
        """Close every websocket without a ``disconnect`` message (a network blip, or the fake stopping)."""
        connections, self._connections = self._connections, []
        for connection in connections:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await connection.ws.close()
        self._wake()

    def hold(self, method: str) -> asyncio.Event:
        """Calls of ``method`` wait (in :attr:`held`) until the returned event is set: a slow Slack."""
        gate = self._holds[method] = asyncio.Event()
        return gate

    def fail_next(self, method: str, n: int = 1, kind: str = "network", *, retry_after: int = 1) -> None:
        """The next ``n`` calls of ``method`` fail: ``network`` (connection dropped unanswered), ``429``
        (ratelimited, with Retry-After), ``500``, or any Slack error code (``invalid_auth``, ...).
        ``method`` ``response_url`` makes posts to response URLs fail (network or an HTTP status)."""
        self._failures.setdefault(method, deque()).extend([(kind, retry_after)] * n)

    # --- what tests read ----------------------------------------------------------------------

    @property
    def connected(self) -> int:
        """Websockets open now."""
        return sum(1 for c in self._connections if not c.ws.closed)

    def calls_of(self, method: str, *, ok_only: bool = False) -> list[ApiCall]:
        """The recorded calls of one method, oldest first."""
        return [c for c in self.calls if c.method == method and (c.outcome == "ok" or not ok_only)]

    def bot_messages(self, channel_id: str, *, thread_ts: str | None = None) -> list[dict[str, Any]]:
        """The bot's messages in a conversation as they look now (after edits); in one thread when given."""
        found = [m for m in self.messages.get(channel_id, {}).values() if m.get("bot_id") == BOT_ID]
        if thread_ts is not None:
            found = [m for m in found if m.get("thread_ts") == thread_ts]
        return found

    def sent_texts(self, channel_id: str) -> list[str]:
        """Texts of the bot's messages in a conversation, in order, as they look now."""
        return [m["text"] for m in self.bot_messages(channel_id)]

    def unacked(self) -> list[str]:
        """Ids of the envelopes the app has not acknowledged."""
        return list(self._unacked)

    async def wait_for(self, predicate: Any, timeout: float = 5.0, what: str = "the condition") -> None:
        """Wait until ``predicate()`` is true (AssertionError after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.05))

    async def acked(self, envelope: dict[str, Any], timeout: float = 5.0) -> dict[str, Any] | None:
        """Wait for the app's ack of an envelope; returns the ack's payload (None when it had none)."""
        envelope_id = envelope["envelope_id"]
        await self.wait_for(lambda: envelope_id in self.acks, timeout, f"the ack of {envelope_id}")
        return self.acks[envelope_id]

    # --- events and envelopes ---------------------------------------------------------------

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def _user_message(self, user_id: str, channel_id: str, text: str, thread_ts: str | None) -> dict[str, Any]:
        self.add_user(user_id)
        ts = self._next_ts()
        message: dict[str, Any] = {
            "type": "message",
            "client_msg_id": str(uuid.uuid4()),
            "text": text,
            "user": user_id,
            "ts": ts,
            "team": TEAM_ID,
            "channel": channel_id,
            "event_ts": ts,
            "blocks": [
                {
                    "type": "rich_text",
                    "block_id": ts[-4:],
                    "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}],
                }
            ],
        }
        if thread_ts is not None:
            parent = self.messages[channel_id].get(thread_ts)
            message["thread_ts"] = thread_ts
            message["parent_user_id"] = (parent or {}).get("user", user_id)
            if parent is not None:
                parent["reply_count"] = parent.get("reply_count", 0) + 1
        self.messages[channel_id][ts] = {k: v for k, v in message.items() if k not in ("channel", "event_ts")}
        return message

    def _push_event(self, event: dict[str, Any]) -> dict[str, Any]:
        event_id = f"Ev{next(self._ids):08d}"
        payload = {
            "token": "verification-token",
            "team_id": TEAM_ID,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": TEAM_ID,
                    "user_id": BOT_USER_ID,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"1-{event['type']}-{TEAM_ID}-{event.get('channel', '')}",
        }
        return self._push_envelope("events_api", payload, accepts_response_payload=False)

    def _push_envelope(self, kind: str, payload: dict[str, Any], *, accepts_response_payload: bool) -> dict[str, Any]:
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
        self._wake()

    def _wake(self) -> None:
        self._changed.set()

    # --- Socket Mode ----------------------------------------------------------------------------

    async def _handle_link(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets or request.query.get("app_id") != APP_ID:
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
                "connection_info": {"app_id": APP_ID},
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
        self._wake()
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                with contextlib.suppress(ValueError):
                    self._ack(json.loads(message.data))
        finally:
            if connection in self._connections:
                self._connections.remove(connection)
            self._wake()
        return ws

    def _ack(self, body: Any) -> None:
        if not isinstance(body, dict) or "envelope_id" not in body:
            return
        envelope_id = str(body["envelope_id"])
        self._sent.discard(envelope_id)
        if self._unacked.pop(envelope_id, None) is None and envelope_id in self.acks:
            return  # a second ack of the same envelope changes nothing
        self.acks[envelope_id] = body.get("payload")
        self._wake()

    # --- response_url ---------------------------------------------------------------------------

    def _response_url(self, channel_id: str, user_id: str, message_ts: str | None, *, ephemeral: bool = False) -> str:
        url_id = uuid.uuid4().hex
        self._response_urls[url_id] = {
            "channel": channel_id,
            "user": user_id,
            "message_ts": message_ts,
            "ephemeral": ephemeral,
            "uses": 0,
        }
        return url_id

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        target = self._response_urls.get(request.match_info["url_id"])
        if target is None:
            return web.Response(status=404, text="no_response_url")
        if target["uses"] >= RESPONSE_URL_USES:
            return web.Response(status=404, text="used_url")
        failures = self._failures.get("response_url")
        if failures:  # fail_next("response_url", ...): network or an HTTP status
            kind, _ = failures.popleft()
            if kind == "network" and request.transport is not None:
                request.transport.abort()
            return web.Response(status=int(kind) if kind.isdigit() else 500, text="internal_error")
        try:
            body = await request.json()
        except ValueError:
            return web.Response(status=400, text="invalid_payload")
        target["uses"] += 1
        self.responses.append({"url_id": request.match_info["url_id"], **body})
        channel, message_ts = target["channel"], target["message_ts"]
        if body.get("replace_original") and message_ts:
            shown = self.ephemeral if target["ephemeral"] else self.messages.get(channel, {})
            message = shown.get(message_ts)
            if message is None:
                return web.Response(status=404, text="message_not_found")
            message["text"] = body.get("text", message.get("text", ""))
            message["blocks"] = body.get("blocks") or []
        elif body.get("response_type") == "in_channel":
            self._post(channel, {"text": body.get("text", ""), "blocks": body.get("blocks")})
        else:  # ephemeral: shown only to the person, until they reload
            ts = self._next_ts()
            self.ephemeral[ts] = {
                "type": "message",
                "ts": ts,
                "channel": channel,
                "user": target["user"],
                "text": body.get("text", ""),
                "blocks": body.get("blocks") or [],
            }
        self._wake()
        return web.Response(text="ok")

    # --- the Web API ---------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            params.update((await request.json()) if request.can_read_body else {})
            return params
        if request.can_read_body:
            form = await request.post()
            params.update({k: v for k, v in form.items() if isinstance(v, str)})
        for key in _JSON_PARAMS & params.keys():
            if isinstance(params[key], str):
                with contextlib.suppress(ValueError):
                    params[key] = json.loads(params[key])
        return params

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params = await self._params(request)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else str(params.pop("token", ""))
        gate = self._holds.get(method)
        if gate is not None and not gate.is_set():
            self.held[method] = self.held.get(method, 0) + 1
            self._wake()
            try:
                await gate.wait()
            finally:
                self.held[method] -= 1
        failures = self._failures.get(method)
        if failures:
            kind, retry_after = failures.popleft()
            self.calls.append(ApiCall(method, params, kind, token))
            self._wake()
            if kind == "network":
                if request.transport is not None:
                    request.transport.abort()
                return web.Response(status=204)
            if kind == "429":
                return web.json_response(
                    {"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": str(retry_after)}
                )
            if kind == "500":
                return web.Response(status=500, text="Internal Server Error")
            return _error(kind)
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        try:
            if handler is None:
                raise _ApiError("unknown_method")
            self._authorize(method, token)
            result = await handler(params)
        except _ApiError as exc:
            self.calls.append(ApiCall(method, params, exc.error, token))
            self._wake()
            return _error(exc.error, exc.extra)
        self.calls.append(ApiCall(method, params, "ok", token))
        self._wake()
        return web.json_response({"ok": True, **result})

    def _authorize(self, method: str, token: str) -> None:
        if not token:
            raise _ApiError("not_authed")
        if token not in (self.bot_token, self.app_token):
            raise _ApiError("invalid_auth")
        if (method in _APP_TOKEN_METHODS) != (token == self.app_token):
            raise _ApiError("not_allowed_token_type")

    def _conversation(self, params: dict[str, Any]) -> str:
        channel_id = str(params.get("channel") or "")
        if channel_id.startswith("U") and channel_id in self.users:
            channel_id = self.im_with(channel_id)["id"]  # a user id posts to the DM with that user
        conversation = self.conversations.get(channel_id)
        if conversation is None:
            raise _ApiError("channel_not_found")
        if conversation["is_channel"] and not conversation["is_member"]:
            raise _ApiError("not_in_channel")
        return channel_id

    def _content(self, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        text = params.get("text")
        blocks = params.get("blocks") or []
        if not isinstance(blocks, list):
            raise _ApiError("invalid_blocks_format")
        if not (isinstance(text, str) and text.strip()) and not blocks:
            raise _ApiError("no_text")
        text = text if isinstance(text, str) else ""
        if len(text) > TEXT_LIMIT:
            raise _ApiError("msg_too_long")
        errors = _block_errors(blocks)
        if errors:
            raise _ApiError("invalid_blocks", {"errors": errors, "response_metadata": {"messages": errors}})
        return text, blocks

    def _post(self, channel_id: str, params: dict[str, Any]) -> dict[str, Any]:
        text, blocks = params.get("text") or "", params.get("blocks") or []
        ts = self._next_ts()
        message: dict[str, Any] = {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "app_id": APP_ID,
            "text": text,
            "ts": ts,
            "team": TEAM_ID,
            "bot_profile": {"id": BOT_ID, "app_id": APP_ID, "name": self.bot_name, "team_id": TEAM_ID},
        }
        if blocks:
            message["blocks"] = blocks
        thread_ts = params.get("thread_ts")
        if thread_ts:
            message["thread_ts"] = str(thread_ts)
            message["parent_user_id"] = self.messages[channel_id].get(str(thread_ts), {}).get("user", "")
        self.messages[channel_id][ts] = message
        self._echo({**message, "channel": channel_id, "event_ts": ts}, channel_id)
        return message

    def _echo(self, event: dict[str, Any], channel_id: str) -> None:
        """Slack tells the app about its own messages too, wherever it listens."""
        conversation = self.conversations[channel_id]
        kind = "message.im" if conversation["is_im"] else "message.channels"
        if kind in self.subscriptions:
            self._push_event({**event, "channel_type": "im" if conversation["is_im"] else "channel"})

    async def _api_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://picotest.slack.com/",
            "team": "Pico Test",
            "user": self.bot_name,
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    async def _api_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        return {"url": f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}&app_id={APP_ID}"}

    async def _api_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel_id = self._conversation(params)
        self._content(params)
        message = self._post(channel_id, params)
        return {"channel": channel_id, "ts": message["ts"], "message": message}

    async def _api_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel_id = self._conversation(params)
        message = self.messages[channel_id].get(str(params.get("ts") or ""))
        if message is None:
            raise _ApiError("message_not_found")
        if message.get("bot_id") != BOT_ID:
            raise _ApiError("cant_update_message")
        text, blocks = self._content(params)
        previous = dict(message)
        message["text"] = text
        if "blocks" in params:  # an update without blocks keeps them; blocks=[] removes them
            if blocks:
                message["blocks"] = blocks
            else:
                message.pop("blocks", None)
        message["edited"] = {"user": BOT_USER_ID, "ts": self._next_ts()}
        self._echo(
            {
                "type": "message",
                "subtype": "message_changed",
                "hidden": True,
                "message": message,
                "previous_message": previous,
                "channel": channel_id,
                "ts": message["edited"]["ts"],
                "event_ts": message["edited"]["ts"],
            },
            channel_id,
        )
        return {"channel": channel_id, "ts": message["ts"], "text": text, "message": message}

    async def _api_conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        users = str(params.get("users") or "")
        if not users:
            raise _ApiError("users_list_not_supplied")
        user_ids = users.split(",")
        if len(user_ids) != 1:
            raise _ApiError("not_enough_users" if not user_ids else "too_many_users")
        if user_ids[0] not in self.users or self.users[user_ids[0]]["is_bot"]:
            raise _ApiError("user_not_found")
        return {"channel": {"id": self.im_with(user_ids[0])["id"]}}

    async def _api_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(params.get("user") or ""))
        if user is None:
            raise _ApiError("user_not_found")
        return {"user": user}


def _block_errors(blocks: list[Any]) -> list[str]:
    """Slack's checks of Block Kit that a bot can trip on, with Slack's wording and JSON pointers."""
    errors: list[str] = []
    if len(blocks) > BLOCKS_LIMIT:
        errors.append(f"no more than {BLOCKS_LIMIT} items allowed [json-pointer:/blocks]")
    for i, block in enumerate(blocks):
        where = f"/blocks/{i}"
        if not isinstance(block, dict) or not block.get("type"):
            errors.append(f"missing required field: type [json-pointer:{where}]")
            continue
        if block["type"] == "section":
            text = (block.get("text") or {}).get("text", "")
            if not text and not block.get("fields"):
                errors.append(f"must provide either text or fields [json-pointer:{where}]")
            if len(text) > SECTION_TEXT_LIMIT:
                errors.append(f"must be less than {SECTION_TEXT_LIMIT + 1} characters [json-pointer:{where}/text/text]")
        elif block["type"] == "actions":
            elements = block.get("elements") or []
            if not elements or len(elements) > ACTIONS_LIMIT:
                errors.append(f"must have between 1 and {ACTIONS_LIMIT} items [json-pointer:{where}/elements]")
            seen: set[str] = set()
            for j, element in enumerate(elements):
                at = f"{where}/elements/{j}"
                action_id = element.get("action_id", "")
                if action_id in seen:
                    errors.append(f"action_id must be unique within the block [json-pointer:{at}/action_id]")
                seen.add(action_id)
                label = (element.get("text") or {}).get("text", "")
                if element.get("type") == "button" and not 0 < len(label) <= BUTTON_TEXT_LIMIT:
                    errors.append(f"must be less than {BUTTON_TEXT_LIMIT + 1} characters [json-pointer:{at}/text/text]")
                if len(str(element.get("value", ""))) > BUTTON_VALUE_LIMIT:
                    errors.append(f"must be less than {BUTTON_VALUE_LIMIT + 1} characters [json-pointer:{at}/value]")
    return errors


class _ApiError(Exception):
    def __init__(self, error: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra or {}


def _error(error: str, extra: dict[str, Any] | None = None) -> web.Response:
    return web.json_response({"ok": False, "error": error, **(extra or {})})
