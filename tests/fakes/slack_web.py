"""The fake Slack's Web API: the workspace, the methods a bot calls on it, and what every call goes through.

Calls arrive as ``POST /api/<method>`` (``base_url`` is ``http://127.0.0.1:<port>/api/``; slack_sdk appends
the method) with a form, JSON or query body and ``Authorization: Bearer <token>``. A call of a method held
by :meth:`SlackWeb.hold` waits first; then a failure queued by :meth:`SlackWeb.fail_next` is answered as
Slack fails (the connection dropped, HTTP 429 ``{"ok": false, "error": "ratelimited"}`` with a
``Retry-After`` header, HTTP 500, or any Slack error code); else the token must fit the method (the bot
token serves auth.test, chat.postMessage, chat.update, conversations.open and users.info; the app-level
token only ``apps.connections.open``, which hands out a Socket Mode URL with a ticket). A method answers
``{"ok": true, ...}`` or refuses as Slack does, HTTP 200 ``{"ok": false, "error": ...}`` (``not_authed``,
``invalid_auth``, ``not_allowed_token_type``, ``channel_not_found``, ``message_not_found``,
``invalid_blocks`` with its ``errors`` list, ...); Block Kit is checked against Slack's limits, in Slack's
words. Every call is recorded with how it was answered (:class:`ApiCall`).

Slash commands and block actions carry a ``response_url`` (``POST /response/<id>``, five posts each,
recorded in :attr:`SlackWeb.responses`): an ephemeral answer is kept in :attr:`SlackWeb.ephemeral`, and
``replace_original`` edits the message it came from.

:class:`SlackWeb` holds the state the whole fake shares (users, conversations, messages as they look now).
Like Slack, it tells the app about the bot's own posts and edits (a ``message`` event with ``bot_id`` set;
edits as ``message_changed``) where the app is subscribed, through :meth:`SlackWeb._push_event`, which
``FakeSlack`` in slack_api.py provides. This module does not listen on a port and imports nothing from
Socket Mode (slack_socket.py) or from slack_api.py.
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

from aiohttp import web

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


class SlackWeb:
    """The workspace and its Web API; ``FakeSlack`` serves it and adds Socket Mode."""

    def __init__(self, bot_token: str, app_token: str, *, bot_name: str, subscriptions: tuple[str, ...]) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.app_id = APP_ID
        self.bot_name = bot_name
        self.subscriptions = set(subscriptions)  # the bot events the app subscribed to
        self.users: dict[str, dict[str, Any]] = {}
        self.conversations: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, dict[str, dict[str, Any]]] = {}  # channel id -> ts -> message
        self.calls: list[ApiCall] = []
        self.responses: list[dict[str, Any]] = []  # what the app posted to response_urls, with "url_id"
        self.ephemeral: dict[str, dict[str, Any]] = {}  # ts -> an ephemeral message as its one reader sees it
        self.tickets: set[str] = set()  # Socket Mode tickets handed out by apps.connections.open
        self._response_urls: dict[str, dict[str, Any]] = {}  # url id -> what it answers (channel, message)
        self._failures: dict[str, deque[tuple[str, int] | None]] = {}
        self._holds: dict[str, asyncio.Event] = {}  # method -> released when set
        self.held: dict[str, int] = {}  # method -> calls waiting at its hold now
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()
        self.port = 0
        self.add_user(BOT_USER_ID, bot_name, is_bot=True)

    @property
    def base_url(self) -> str:
        """What the Web API client's base_url is set to (slack_sdk appends the method name)."""
        return f"http://127.0.0.1:{self.port}/api/"

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

    # --- what tests make happen and read ------------------------------------------------------

    def hold(self, method: str) -> asyncio.Event:
        """Calls of ``method`` wait (in :attr:`held`) until the returned event is set: a slow Slack."""
        gate = self._holds[method] = asyncio.Event()
        return gate

    def fail_next(
        self, method: str, n: int = 1, kind: str = "network", *, retry_after: int = 1, after: int = 0
    ) -> None:
        """``n`` calls of ``method`` fail, ``after`` more succeeded: ``network`` (connection dropped
        unanswered), ``429`` (ratelimited, with Retry-After), ``500``, or any Slack error code (``invalid_auth``, ...).
        ``method`` ``response_url`` makes posts to response URLs fail (network or an HTTP status)."""
        self._failures.setdefault(method, deque()).extend([None] * after + [(kind, retry_after)] * n)

    def calls_of(self, method: str, *, ok_only: bool = False) -> list[ApiCall]:
        """The recorded calls of one method, oldest first."""
        return [c for c in self.calls if c.method == method and (c.outcome == "ok" or not ok_only)]

    def wake(self) -> None:
        """Tell tests waiting in ``wait_for`` that something changed."""
        self._changed.set()

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def _push_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """Deliver an Events API event to the app; ``FakeSlack`` sends it over Socket Mode."""
        raise NotImplementedError("FakeSlack delivers events; SlackWeb alone has no Socket Mode")

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
        failure = failures.popleft() if failures else None
        if failure is not None:  # fail_next("response_url", ...): network or an HTTP status
            kind, _ = failure
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
        self.wake()
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
            self.wake()
            try:
                await gate.wait()
            finally:
                self.held[method] -= 1
        failures = self._failures.get(method)
        failure = failures.popleft() if failures else None
        if failure is not None:
            kind, retry_after = failure
            self.calls.append(ApiCall(method, params, kind, token))
            self.wake()
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
            self.wake()
            return _error(exc.error, exc.extra)
        self.calls.append(ApiCall(method, params, "ok", token))
        self.wake()
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
        self.tickets.add(ticket)
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
