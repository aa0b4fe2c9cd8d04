"""A fake Telegram Bot API server that speaks the wire protocol closely enough for python-telegram-bot.

``POST /bot<TOKEN>/<method>`` with a JSON, form or multipart body (python-telegram-bot sends forms
whose non-string values are JSON), answered ``{"ok": true, "result": ...}`` with real Message, User
and Chat objects, or ``{"ok": false, "error_code": ..., "description": ...}`` as Telegram does.

Tests inject updates (:meth:`FakeTelegram.push_message`, :meth:`FakeTelegram.push_callback`), which
the bot fetches with ``getUpdates`` (long polling; an ``offset`` confirms and drops older updates), or,
once the bot called ``setWebhook``, which collect in :attr:`FakeTelegram.webhook_updates` for the test
to post to the webhook (``getUpdates`` is then refused with 409, as Telegram does),
and failures for the next calls of a method (:meth:`FakeTelegram.fail_next`): ``network`` drops the
connection without answering, so the client sees a network error and nothing was delivered.
Every request is recorded (:attr:`FakeTelegram.calls`) so tests assert on what the bot sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

FailureKind = Literal["network", "429", "500", "403", "400"]

MESSAGE_LIMIT = 4096  # characters (UTF-16 code units) in one message
# Parameters sent as plain strings; python-telegram-bot JSON-encodes every other value in a form body.
_STRING_PARAMS = {
    "text",
    "caption",
    "action",
    "callback_query_id",
    "parse_mode",
    "url",
    "inline_message_id",
    "description",
    "short_description",
    "language_code",
    "secret_token",
}
_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
_MENTION = re.compile(r"@[A-Za-z0-9_]{3,32}")


@dataclass
class ApiCall:
    """One request the bot made, and how the fake answered it."""

    method: str
    params: dict[str, Any]
    outcome: str  # "ok", "network", or the HTTP status of an error ("429", "400", ...)
    at: float = field(default_factory=time.monotonic)


def utf16_len(text: str) -> int:
    """Length as Telegram counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def entities_for(text: str) -> list[dict[str, Any]]:
    """The entities Telegram would attach: a leading /command and every @mention (offsets in UTF-16)."""
    found: list[dict[str, Any]] = []
    command = re.match(r"/[A-Za-z0-9_]+(@[A-Za-z0-9_]+)?", text)
    if command:
        found.append({"type": "bot_command", "offset": 0, "length": utf16_len(command.group(0))})
    for match in _MENTION.finditer(text):
        if command and match.start() < command.end():
            continue
        found.append(
            {"type": "mention", "offset": utf16_len(text[: match.start()]), "length": utf16_len(match.group(0))}
        )
    return found


class FakeTelegram:
    """The fake server: start it, point the bot's base_url at :attr:`base_url`, push updates, read calls."""

    def __init__(self, token: str = "123:TEST", *, username: str = "pico_test_bot", bot_id: int = 123) -> None:
        self.token = token
        self.bot_user: dict[str, Any] = {
            "id": bot_id,
            "is_bot": True,
            "first_name": "Pico",
            "username": username,
        }
        self.calls: list[ApiCall] = []
        self.commands: list[dict[str, Any]] = []
        self.chats: dict[int, dict[str, Any]] = {}
        self.messages: dict[int, dict[int, dict[str, Any]]] = {}  # chat id -> message id -> Message
        self.blocked: set[int] = set()  # chats whose user blocked the bot (403)
        self.callback_answers: dict[str, dict[str, Any] | None] = {}  # query id -> answer (None: not yet)
        self._updates: list[dict[str, Any]] = []
        self.pushed: list[dict[str, Any]] = []  # every update pushed, with its update_id (to post one again)
        self.webhook_url = ""  # set by setWebhook, cleared by deleteWebhook
        self.webhook_secret = ""
        self.webhook_allowed_updates: list[str] = []
        self.webhook_updates: list[dict[str, Any]] = []  # what Telegram would post to the webhook, oldest first
        self._update_ids = itertools.count(1)
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._callback_ids = itertools.count(1)
        self._failures: dict[str, deque[tuple[FailureKind, int] | None]] = {}
        self._arrived = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._closing = False
        self.port = 0

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What the bot's base_url is set to (the token is appended by the client)."""
        return f"http://127.0.0.1:{self.port}/bot"

    async def start(self) -> None:
        """Listen on 127.0.0.1 (a free port the first time, the same port when it comes back)."""
        app = web.Application()
        app.router.add_route("*", "/{bot_token}/{method}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Stop listening (pending long polls are answered first)."""
        self._closing = True
        self._arrived.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def come_back(self) -> None:
        """Listen again on the same port (the network is back)."""
        if self._runner is None:
            self._closing = False
            await self.start()

    async def __aenter__(self) -> FakeTelegram:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- what tests inject ---------------------------------------------------------------------

    def add_chat(self, chat_id: int, chat_type: str = "private", *, title: str = "Test group") -> dict[str, Any]:
        """A chat the bot can write to (for a private chat: a user who pressed Start)."""
        chat = self.chats.get(chat_id)
        if chat is None:
            chat = {"id": chat_id, "type": chat_type}
            if chat_type == "private":
                chat["first_name"] = f"User{chat_id}"
            else:
                chat["title"] = title
            self.chats[chat_id] = chat
            self.messages[chat_id] = {}
            self._message_ids[chat_id] = itertools.count(1)
        return chat

    def push_message(
        self,
        user_id: int,
        chat_id: int,
        text: str,
        chat_type: str = "private",
        entities: list[dict[str, Any]] | None = None,
        *,
        reply_to: int | None = None,
    ) -> dict[str, Any]:
        """A user sends a text message; returns the Message (entities as Telegram would set them by default)."""
        chat = self.add_chat(chat_id, chat_type)
        message: dict[str, Any] = {
            "message_id": next(self._message_ids[chat_id]),
            "date": int(time.time()),
            "chat": chat,
            "from": self.user(user_id),
            "text": text,
        }
        found = entities if entities is not None else entities_for(text)
        if found:
            message["entities"] = found
        if reply_to is not None:
            message["reply_to_message"] = self.messages[chat_id][reply_to]
        self.messages[chat_id][message["message_id"]] = message
        self._push({"message": message})
        return message

    def push_callback(self, user_id: int, chat_id: int, message_id: int, data: str) -> str:
        """A user presses an inline button under one of the bot's messages; returns the query id."""
        query_id = str(next(self._callback_ids))
        self.callback_answers[query_id] = None
        self._push(
            {
                "callback_query": {
                    "id": query_id,
                    "from": self.user(user_id),
                    "message": self.messages[chat_id][message_id],
                    "chat_instance": str(chat_id),
                    "data": data,
                }
            }
        )
        return query_id

    def fail_next(
        self, method: str, n: int = 1, kind: FailureKind = "network", *, retry_after: int = 1, after: int = 0
    ) -> None:
        """Make ``n`` calls of ``method`` fail, ``after`` more succeeded: network (connection dropped), 429, 500,
        403 or 400."""
        self._failures.setdefault(method, deque()).extend([None] * after + [(kind, retry_after)] * n)

    def user(self, user_id: int) -> dict[str, Any]:
        """The User object of a (human) user id."""
        return {"id": user_id, "is_bot": False, "first_name": f"User{user_id}", "username": f"user{user_id}"}

    def _push(self, update: dict[str, Any]) -> None:
        numbered = {"update_id": next(self._update_ids), **update}
        self.pushed.append(numbered)
        if self.webhook_url:
            self.webhook_updates.append(numbered)
            return
        self._updates.append(numbered)
        self._arrived.set()

    # --- what tests read ----------------------------------------------------------------------

    def calls_of(self, method: str, *, ok_only: bool = False) -> list[ApiCall]:
        """The recorded calls of one method, oldest first."""
        return [c for c in self.calls if c.method == method and (c.outcome == "ok" or not ok_only)]

    def sent_texts(self, chat_id: int) -> list[str]:
        """Texts of the messages the bot delivered to a chat, in order (as first sent)."""
        return [
            c.params["text"] for c in self.calls_of("sendMessage", ok_only=True) if c.params.get("chat_id") == chat_id
        ]

    def bot_messages(self, chat_id: int) -> list[dict[str, Any]]:
        """The bot's messages in a chat as they look now (after edits)."""
        bot_id = self.bot_user["id"]
        return [m for m in self.messages.get(chat_id, {}).values() if m["from"]["id"] == bot_id]

    async def wait_for(self, predicate: Any, timeout: float = 5.0, what: str = "the condition") -> None:
        """Wait until ``predicate()`` is true (AssertionError after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            await asyncio.sleep(0.01)

    @property
    def pending_updates(self) -> int:
        """Updates not yet confirmed by the bot."""
        return len(self._updates)

    # --- the protocol ---------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            body = await request.json() if request.can_read_body else {}
            params.update(body or {})
            return params
        if request.can_read_body:
            form = await request.post()
            params.update({k: v for k, v in form.items() if isinstance(v, str)})
        for key, value in list(params.items()):
            if key not in _STRING_PARAMS and isinstance(value, str):
                with contextlib.suppress(ValueError):  # else a plain string (e.g. an @channel chat id)
                    params[key] = json.loads(value)
        return params

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        if request.match_info["bot_token"] != f"bot{self.token}":
            return _error(401, "Unauthorized")
        params = await self._params(request)
        failures = self._failures.get(method)
        failure = failures.popleft() if failures else None
        if failure is not None:
            kind, retry_after = failure
            self.calls.append(ApiCall(method, params, kind))
            if kind == "network":
                # Drop the connection without an answer: the client sees a network error.
                if request.transport is not None:
                    request.transport.abort()
                return web.Response(status=204)
            if kind == "429":
                return _error(429, f"Too Many Requests: retry after {retry_after}", {"retry_after": retry_after})
            if kind == "500":
                return _error(500, "Internal Server Error")
            if kind == "403":
                return _error(403, "Forbidden: bot was blocked by the user")
            return _error(400, "Bad Request: chat not found")
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            self.calls.append(ApiCall(method, params, "404"))
            return _error(404, "Not Found")
        try:
            result = await handler(params)
        except _ApiError as exc:
            self.calls.append(ApiCall(method, params, str(exc.code)))
            return _error(exc.code, exc.description)
        self.calls.append(ApiCall(method, params, "ok"))
        return web.json_response({"ok": True, "result": result})

    def _chat(self, params: dict[str, Any]) -> int:
        chat_id = params.get("chat_id")
        if not isinstance(chat_id, int) or chat_id not in self.chats:
            raise _ApiError(400, "Bad Request: chat not found")
        if chat_id in self.blocked:
            raise _ApiError(403, "Forbidden: bot was blocked by the user")
        return chat_id

    @staticmethod
    def _text(params: dict[str, Any]) -> str:
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        if utf16_len(text) > MESSAGE_LIMIT:
            raise _ApiError(400, "Bad Request: message is too long")
        return text

    async def _api_getMe(self, params: dict[str, Any]) -> dict[str, Any]:
        return {**self.bot_user, "can_join_groups": True, "can_read_all_group_messages": False}

    async def _api_deleteWebhook(self, params: dict[str, Any]) -> bool:
        if params.get("drop_pending_updates"):
            self._updates.clear()
            self.webhook_updates.clear()
        self._updates[:0] = self.webhook_updates  # not yet posted: now for getUpdates
        self.webhook_updates.clear()
        self.webhook_url = self.webhook_secret = ""
        self.webhook_allowed_updates = []
        return True

    async def _api_setWebhook(self, params: dict[str, Any]) -> bool:
        url = params.get("url")
        if not isinstance(url, str) or not url:
            return await self._api_deleteWebhook(params)  # an empty URL removes the webhook
        if not url.startswith("https://"):
            raise _ApiError(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        secret = params.get("secret_token")
        if secret is not None and (not isinstance(secret, str) or not _SECRET_TOKEN.fullmatch(secret)):
            raise _ApiError(400, "Bad Request: secret token contains unallowed characters")
        if params.get("drop_pending_updates"):
            self._updates.clear()
        self.webhook_url, self.webhook_secret = url, secret or ""
        self.webhook_allowed_updates = list(params.get("allowed_updates") or [])
        self.webhook_updates.extend(self._updates)  # pending updates go to the webhook from now on
        self._updates.clear()
        return True

    async def _api_getWebhookInfo(self, params: dict[str, Any]) -> dict[str, Any]:
        info: dict[str, Any] = {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self.webhook_updates) if self.webhook_url else len(self._updates),
        }
        if self.webhook_url and self.webhook_allowed_updates:
            info["allowed_updates"] = self.webhook_allowed_updates
        return info

    async def _api_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self.webhook_url:
            raise _ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active;"
                " use deleteWebhook to delete the webhook first",
            )
        offset = int(params.get("offset") or 0)
        if offset > 0:
            # Confirmed: updates before the offset are never returned again.
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        elif offset < 0:
            self._updates = self._updates[offset:]
        limit = int(params.get("limit") or 100)
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        while not self._updates:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closing:
                break
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                break
        return self._updates[:limit]

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._chat(params)
        text = self._text(params)
        message: dict[str, Any] = {
            "message_id": next(self._message_ids[chat_id]),
            "date": int(time.time()),
            "chat": self.chats[chat_id],
            "from": self.bot_user,
            "text": text,
        }
        if params.get("reply_markup"):
            message["reply_markup"] = params["reply_markup"]
        reply = params.get("reply_parameters") or {}
        if reply.get("message_id") in self.messages[chat_id]:
            message["reply_to_message"] = self.messages[chat_id][reply["message_id"]]
        self.messages[chat_id][message["message_id"]] = message
        return message

    async def _api_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = self._chat(params)
        text = self._text(params)
        message = self.messages[chat_id].get(params.get("message_id"))
        if message is None or message["from"]["id"] != self.bot_user["id"]:
            raise _ApiError(400, "Bad Request: message to edit not found")
        markup = params.get("reply_markup")  # an edit without reply_markup removes the inline keyboard
        if message["text"] == text and message.get("reply_markup") == markup:
            raise _ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and reply markup are"
                " exactly the same as a current content and reply markup of the message",
            )
        message["text"] = text
        message["edit_date"] = int(time.time())
        if markup:
            message["reply_markup"] = markup
        else:
            message.pop("reply_markup", None)
        return message

    async def _api_deleteMessage(self, params: dict[str, Any]) -> bool:
        chat_id = self._chat(params)
        if self.messages[chat_id].pop(params.get("message_id"), None) is None:
            raise _ApiError(400, "Bad Request: message to delete not found")
        return True

    async def _api_sendChatAction(self, params: dict[str, Any]) -> bool:
        self._chat(params)
        return True

    async def _api_answerCallbackQuery(self, params: dict[str, Any]) -> bool:
        query_id = params.get("callback_query_id")
        if query_id not in self.callback_answers or self.callback_answers[query_id] is not None:
            raise _ApiError(400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
        self.callback_answers[query_id] = params
        return True

    async def _api_setMyCommands(self, params: dict[str, Any]) -> bool:
        self.commands = list(params.get("commands") or [])
        return True

    async def _api_getMyCommands(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self.commands


class _ApiError(Exception):
    def __init__(self, code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


def _error(code: int, description: str, parameters: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=code)
