"""A fake of Meta's side of the WhatsApp Business Cloud API: the Graph API's messages endpoint, and the
webhook posts Meta makes to us.

**Sends.** ``POST /<version>/<phone_number_id>/messages`` with ``Authorization: Bearer <token>`` and a
JSON body, as the real Graph API takes it: ``{"messaging_product": "whatsapp", "to": ..., "type":
"text", "text": {"body": ...}}`` or ``"type": "interactive"`` with reply buttons (at most 3, titles of
1 to 20 characters, unique; body at most 1,024 characters, a text at most 4,096). It answers
``{"messaging_product": "whatsapp", "contacts": [{"input", "wa_id"}], "messages": [{"id": "wamid..."}]}``,
or an error in Graph's format ``{"error": {"message", "type", "code", "error_subcode", "error_data",
"fbtrace_id"}}`` with the HTTP status Graph uses (401 for a bad token, 400 for most others, 429, 500).
Tests inject failures for the next sends (:meth:`FakeGraph.fail_next`): ``network`` drops the connection
unanswered, ``429``/``500`` are bare HTTP errors, and Graph codes ``190`` (token), ``130429``
(throughput), ``131056`` (pair rate), ``131047`` (24-hour window, synchronous form), ``131026``
(undeliverable) answer as Graph does. Every request is recorded (:attr:`FakeGraph.calls`).

**The 24-hour window.** Free-form messages reach a user only within 24 hours of that user's last message;
outside it Meta still accepts the send (a wamid comes back) and then reports it ``failed`` with error
131047 in a ``statuses`` webhook. The fake keeps each user's last inbound time (set when a test builds
an inbound message with :meth:`FakeGraph.text_message` or :meth:`FakeGraph.button_reply`) and, with
``enforce_window``, does the same: such a send is accepted, not delivered, and its failed status is
queued in :attr:`FakeGraph.webhook_posts` for the test to post. ``template`` sends are allowed any time.

**Webhook posts.** :meth:`FakeGraph.text_message`, :meth:`FakeGraph.button_reply` and
:meth:`FakeGraph.status` build real ``whatsapp_business_account`` payloads (``entry[].changes[].value``
with ``metadata``, ``contacts[]``, ``messages[]`` or ``statuses[]``); :func:`signed` makes the exact
bytes and the ``X-Hub-Signature-256`` header Meta sends (HMAC-SHA256 of the raw body with the app
secret); :class:`MetaWebhook` posts them to the daemon, re-sends the very same bytes (Meta re-delivers
until it gets a 200) and performs the GET verification handshake.

The signature is computed here independently of the appliance's own check, so a bug there is caught.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from aiohttp import web

FailureKind = Literal["network", "429", "500", "190", "130429", "131056", "131047", "131026"]

API_VERSION = "v21.0"
TEXT_LIMIT = 4096  # characters in a text message's body
BODY_LIMIT = 1024  # characters in an interactive message's body
BUTTON_LIMIT = 3  # reply buttons in one interactive message
TITLE_LIMIT = 20  # characters in a reply button's title
BUTTON_ID_LIMIT = 256
WINDOW_S = 24 * 3600  # the customer service window
SIGNATURE_HEADER = "X-Hub-Signature-256"

# code -> (HTTP status, type, message, error_subcode, details): what Graph answers for these codes.
_GRAPH_ERRORS: dict[str, tuple[int, str, str, int | None, str]] = {
    "190": (
        401,
        "OAuthException",
        "Error validating access token: Session has expired on Tuesday, 01-Jul-25 10:00:00 PDT.",
        463,
        "",
    ),
    "130429": (
        400,
        "OAuthException",
        "(#130429) Rate limit hit",
        None,
        "Cloud API message throughput has been reached.",
    ),
    "131056": (
        400,
        "OAuthException",
        "(#131056) (Business Account, Consumer Account) pair rate limit hit",
        None,
        "Too many messages sent from the sender phone number to the same recipient phone number in a short period.",
    ),
    "131047": (
        400,
        "OAuthException",
        "(#131047) Re-engagement message",
        None,
        "Message failed to send because more than 24 hours have passed since the customer last replied to this number.",
    ),
    "131026": (
        400,
        "OAuthException",
        "(#131026) Message undeliverable",
        None,
        "Unable to deliver message. The recipient is not a WhatsApp user or has not accepted the terms.",
    ),
}


@dataclass
class GraphCall:
    """One request (a send, or a read of the phone number), and how the fake answered it."""

    endpoint: Literal["messages", "phone_number"]
    phone_number_id: str
    authorization: str
    body: dict[str, Any]
    outcome: str  # "ok", "network", the HTTP status ("429", "500") or the Graph error code ("190", ...)
    message_id: str = ""  # the wamid answered, when "ok"
    at: float = field(default_factory=time.monotonic)

    @property
    def to(self) -> str:
        """The recipient as sent."""
        return str(self.body.get("to", ""))

    @property
    def text(self) -> str:
        """What the user reads: a text's body, or an interactive message's body text."""
        if self.body.get("type") == "text":
            return str(self.body.get("text", {}).get("body", ""))
        if self.body.get("type") == "interactive":
            return str(self.body.get("interactive", {}).get("body", {}).get("text", ""))
        return ""

    @property
    def buttons(self) -> dict[str, str]:
        """An interactive message's reply buttons as id -> title (empty for anything else)."""
        action = self.body.get("interactive", {}).get("action", {}) if self.body.get("type") == "interactive" else {}
        return {b["reply"]["id"]: b["reply"]["title"] for b in action.get("buttons", [])}


class FakeGraph:
    """The fake Graph API: start it, point ``whatsapp.api_base_url`` at :attr:`base_url`, read :attr:`calls`."""

    def __init__(
        self,
        token: str = "EAAG-TEST-TOKEN",
        *,
        phone_number_id: str = "106540352242922",
        display_phone_number: str = "15550783881",
        business_account_id: str = "102290129340398",
        app_secret: str = "fake-app-secret",
        enforce_window: bool = False,
        clock: Any = time.time,
    ) -> None:
        self.token = token
        self.phone_number_id = phone_number_id
        self.display_phone_number = display_phone_number
        self.business_account_id = business_account_id
        self.app_secret = app_secret
        self.enforce_window = enforce_window
        self.clock = clock
        self.calls: list[GraphCall] = []
        self.last_inbound: dict[str, float] = {}  # wa_id -> when the user last wrote (the 24-hour window)
        self.webhook_posts: list[dict[str, Any]] = []  # status payloads Meta would post, oldest first
        self._failures: deque[FailureKind | None] = deque()
        self._sent_ids = itertools.count(1)
        self._inbound_ids = itertools.count(1)
        self._trace_ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What ``whatsapp.api_base_url`` is set to (the client appends ``/<phone_number_id>/messages``)."""
        return f"http://127.0.0.1:{self.port}/{API_VERSION}"

    async def start(self) -> None:
        """Listen on 127.0.0.1 (a free port the first time, the same port when it comes back)."""
        app = web.Application()
        app.router.add_post("/{version}/{phone_number_id}/messages", self._messages)
        app.router.add_get("/{version}/{phone_number_id}", self._phone_number)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Stop listening: requests now fail to connect (as when the network is down)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def come_back(self) -> None:
        """Listen again on the same port."""
        if self._runner is None:
            await self.start()

    async def __aenter__(self) -> FakeGraph:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- what tests inject -------------------------------------------------------------------

    def fail_next(self, n: int = 1, kind: FailureKind = "network", *, after: int = 0) -> None:
        """Make ``n`` requests fail in the given way (see the module docstring), ``after`` more succeeded."""
        self._failures.extend([None] * after + [kind] * n)

    def text_message(self, wa_id: str, text: str, *, name: str = "", message_id: str = "") -> dict[str, Any]:
        """The webhook payload Meta posts when ``wa_id`` sends a text (opens that user's 24-hour window)."""
        message = self._inbound(wa_id, message_id, {"type": "text", "text": {"body": text}})
        return self._payload(messages=[message], contacts=[self._contact(wa_id, name)])

    def button_reply(
        self, wa_id: str, button_id: str, title: str, *, context_id: str, name: str = "", message_id: str = ""
    ) -> dict[str, Any]:
        """The payload Meta posts when ``wa_id`` taps a reply button under our message ``context_id``."""
        body = {
            "context": {"from": self.display_phone_number, "id": context_id},
            "type": "interactive",
            "interactive": {"type": "button_reply", "button_reply": {"id": button_id, "title": title}},
        }
        message = self._inbound(wa_id, message_id, body)
        return self._payload(messages=[message], contacts=[self._contact(wa_id, name)])

    def status(
        self, message_id: str, status: str, recipient: str, *, errors: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """A ``statuses`` payload: our message ``message_id`` was sent / delivered / read / failed."""
        entry: dict[str, Any] = {
            "id": message_id,
            "status": status,
            "timestamp": str(int(self.clock())),
            "recipient_id": recipient,
        }
        if status != "failed":
            entry["conversation"] = {"id": f"conv-{recipient}", "origin": {"type": "service"}}
            entry["pricing"] = {"billable": False, "pricing_model": "PMP", "category": "service"}
        if errors:
            entry["errors"] = errors
        return self._payload(statuses=[entry])

    def _contact(self, wa_id: str, name: str) -> dict[str, Any]:
        return {"profile": {"name": name or f"User {wa_id[-4:]}"}, "wa_id": wa_id}

    def _inbound(self, wa_id: str, message_id: str, body: dict[str, Any]) -> dict[str, Any]:
        now = self.clock()
        self.last_inbound[wa_id] = now
        number = next(self._inbound_ids)
        wamid = message_id or "wamid." + base64.b64encode(f"in:{wa_id}:{number}".encode()).decode()
        return {"from": wa_id, "id": wamid, "timestamp": str(int(now)), **body}

    def _payload(self, **value: Any) -> dict[str, Any]:
        return {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": self.business_account_id,
                    "changes": [
                        {
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {
                                    "display_phone_number": self.display_phone_number,
                                    "phone_number_id": self.phone_number_id,
                                },
                                **value,
                            },
                            "field": "messages",
                        }
                    ],
                }
            ],
        }

    # --- what tests read ---------------------------------------------------------------------

    def sent(self, to: str | None = None) -> list[GraphCall]:
        """The sends Graph accepted, oldest first (to one recipient when ``to`` is given)."""
        return [c for c in self.calls if c.endpoint == "messages" and c.outcome == "ok" and (to is None or c.to == to)]

    def sent_texts(self, to: str) -> list[str]:
        """What one recipient was sent (texts and interactive bodies), oldest first."""
        return [c.text for c in self.sent(to)]

    async def wait_for(self, predicate: Any, timeout: float = 5.0, what: str = "the condition") -> None:
        """Wait until ``predicate()`` is true (AssertionError after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            await asyncio.sleep(0.01)

    # --- the protocol ------------------------------------------------------------------------

    async def _phone_number(self, request: web.Request) -> web.StreamResponse:
        """``GET /<version>/<phone_number_id>``: the number's details (what a client checks its token with)."""
        record = GraphCall("phone_number", request.match_info["phone_number_id"], "", {}, "")
        refused = await self._refused(request, record)
        if refused is not None:
            return refused
        record.outcome = "ok"
        return web.json_response(
            {
                "verified_name": "Pico Test",
                "display_phone_number": f"+{self.display_phone_number}",
                "quality_rating": "GREEN",
                "id": self.phone_number_id,
            }
        )

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        """``POST /<version>/<phone_number_id>/messages``: send one message."""
        try:
            body = json.loads(await request.read())
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        body = body if isinstance(body, dict) else {}
        record = GraphCall("messages", request.match_info["phone_number_id"], "", body, "")
        refused = await self._refused(request, record)
        if refused is not None:
            return refused
        problem = _invalid(body)
        if problem is not None:
            record.outcome = str(problem[0])
            return self._error(400, "OAuthException", problem[1], problem[0], details=problem[2])
        to = str(body["to"])
        wa_id = "".join(ch for ch in to if ch.isdigit())
        record.outcome = "ok"
        record.message_id = "wamid." + base64.b64encode(f"out:{wa_id}:{next(self._sent_ids)}".encode()).decode()
        if self.enforce_window and body["type"] != "template":
            opened = self.last_inbound.get(wa_id)
            if opened is None or self.clock() - opened > WINDOW_S:
                # Accepted, never delivered: Meta says so later, in a statuses webhook.
                details = _GRAPH_ERRORS["131047"][4]
                error = {
                    "code": 131047,
                    "title": "Re-engagement message",
                    "message": "Re-engagement message",
                    "error_data": {"details": details},
                }
                self.webhook_posts.append(self.status(record.message_id, "failed", wa_id, errors=[error]))
        return web.json_response(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": wa_id}],
                "messages": [{"id": record.message_id}],
            }
        )

    async def _refused(self, request: web.Request, record: GraphCall) -> web.StreamResponse | None:
        """Record the request; the answer when it fails (an injected failure, the token, the number), else None."""
        record.authorization = request.headers.get("Authorization", "")
        self.calls.append(record)
        failure = self._failures.popleft() if self._failures else None
        if failure is not None:
            kind = failure
            record.outcome = kind
            if kind == "network":
                if request.transport is not None:
                    request.transport.abort()  # the client sees the connection drop, nothing was done
                return web.Response(status=204)
            if kind == "429":
                return self._error(429, "OAuthException", "(#4) Application request limit reached", 4)
            if kind == "500":
                return self._error(500, "OAuthException", "An unknown error has occurred.", 1, transient=True)
            status, kind_of, message, subcode, details = _GRAPH_ERRORS[kind]
            return self._error(status, kind_of, message, int(kind), subcode=subcode, details=details)
        scheme, _, token = record.authorization.partition(" ")
        if scheme != "Bearer" or not token:
            record.outcome = "190"
            message = "An active access token must be used to query information about the current user."
            return self._error(400, "OAuthException", message, 2500)
        if token != self.token:
            record.outcome = "190"
            return self._error(401, "OAuthException", "Invalid OAuth access token - Cannot parse access token", 190)
        if record.phone_number_id != self.phone_number_id:
            record.outcome = "100"
            return self._error(
                400,
                "GraphMethodException",
                f"Unsupported post request. Object with ID '{record.phone_number_id}' does not exist, cannot be"
                " loaded due to missing permissions, or does not support this operation.",
                100,
                subcode=33,
            )
        return None

    def _error(
        self,
        status: int,
        kind: str,
        message: str,
        code: int,
        *,
        subcode: int | None = None,
        details: str = "",
        transient: bool = False,
    ) -> web.Response:
        error: dict[str, Any] = {"message": message, "type": kind, "code": code}
        if subcode is not None:
            error["error_subcode"] = subcode
        if details:
            error["error_data"] = {"messaging_product": "whatsapp", "details": details}
        if transient:
            error["is_transient"] = True
        error["fbtrace_id"] = f"A{next(self._trace_ids):010d}xyz"
        return web.json_response({"error": error}, status=status)


def _invalid(body: Any) -> tuple[int, str, str] | None:
    """Why Graph would refuse this message body (code, message, details), or None."""
    if not isinstance(body, dict):
        return 100, "(#100) Invalid parameter", "the request body is not a JSON object"
    if body.get("messaging_product") != "whatsapp":
        return 100, "(#100) The parameter messaging_product is required.", "messaging_product must be whatsapp"
    if not isinstance(body.get("to"), str) or not any(ch.isdigit() for ch in body["to"]):
        return 100, "(#100) The parameter to is required.", "to must be a phone number"
    kind = body.get("type", "text")
    if kind == "text":
        text = body.get("text", {}).get("body") if isinstance(body.get("text"), dict) else None
        if not isinstance(text, str) or not text.strip():
            return 100, "(#100) The parameter text['body'] is required.", "text.body is empty"
        if len(text) > TEXT_LIMIT:
            return 100, "(#100) Param text['body'] must be at most 4096 characters long.", "text too long"
        return None
    if kind == "template":
        return None if isinstance(body.get("template"), dict) else (100, "(#100) Invalid parameter", "no template")
    if kind != "interactive":
        return 100, f"(#100) Param type '{kind}' is not supported in this fake", "unsupported type"
    interactive = body.get("interactive")
    if not isinstance(interactive, dict) or interactive.get("type") != "button":
        return 100, "(#100) Invalid parameter", "only interactive reply buttons are faked"
    text = interactive.get("body", {}).get("text") if isinstance(interactive.get("body"), dict) else None
    if not isinstance(text, str) or not text.strip():
        return 131008, "(#131008) Required parameter is missing", "interactive.body.text is required"
    if len(text) > BODY_LIMIT:
        return 131009, "(#131009) Parameter value is not valid", "Body text length invalid. Max length: 1024"
    buttons = interactive.get("action", {}).get("buttons") if isinstance(interactive.get("action"), dict) else None
    if not isinstance(buttons, list) or not 1 <= len(buttons) <= BUTTON_LIMIT:
        return 131009, "(#131009) Parameter value is not valid", "Buttons count invalid. Min: 1, Max: 3"
    titles: set[str] = set()
    for button in buttons:
        reply = button.get("reply") if isinstance(button, dict) and button.get("type") == "reply" else None
        if not isinstance(reply, dict):
            return 131009, "(#131009) Parameter value is not valid", "a button must be of type reply"
        title, button_id = reply.get("title"), reply.get("id")
        if not isinstance(title, str) or not 1 <= len(title) <= TITLE_LIMIT:
            return 131009, "(#131009) Parameter value is not valid", "Button title length invalid. Min: 1, Max: 20"
        if not isinstance(button_id, str) or not 1 <= len(button_id) <= BUTTON_ID_LIMIT:
            return 131009, "(#131009) Parameter value is not valid", "Button id length invalid. Min: 1, Max: 256"
        if title in titles:
            return 131009, "(#131009) Parameter value is not valid", "Button titles must be unique"
        titles.add(title)
    return None


# --- Meta's webhook posts ----------------------------------------------------------------------


def signature(body: bytes, app_secret: str) -> str:
    """The ``X-Hub-Signature-256`` value Meta sends: ``sha256=`` and the HMAC-SHA256 of the raw body."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def signed(payload: dict[str, Any], app_secret: str) -> tuple[bytes, dict[str, str]]:
    """The bytes and headers of one webhook post, as Meta sends them."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    return body, {"Content-Type": "application/json", SIGNATURE_HEADER: signature(body, app_secret)}


@dataclass
class Posted:
    """What the daemon answered one webhook post."""

    status: int
    text: str


class MetaWebhook:
    """Meta's side of the webhook: posts signed payloads to the daemon's URL, re-sends, verifies."""

    def __init__(self, url: str, app_secret: str) -> None:
        self.url = url
        self.app_secret = app_secret
        self.last: tuple[bytes, dict[str, str]] | None = None

    async def post(self, payload: dict[str, Any], *, secret: str | None = None, unsigned: bool = False) -> Posted:
        """Post one payload, signed with the app secret (or ``secret``, or not at all)."""
        body, headers = signed(payload, self.app_secret if secret is None else secret)
        if unsigned:
            del headers[SIGNATURE_HEADER]
        self.last = (body, headers)
        return await self._send(body, headers)

    async def resend(self) -> Posted:
        """Post the last payload again, byte for byte with its signature (Meta re-delivers without a 200)."""
        assert self.last is not None, "nothing was posted yet"
        return await self._send(*self.last)

    async def verify(self, verify_token: str, challenge: str = "1158201444") -> Posted:
        """The GET handshake Meta makes when the webhook URL is saved in the app's settings."""
        params = {"hub.mode": "subscribe", "hub.verify_token": verify_token, "hub.challenge": challenge}
        async with aiohttp.ClientSession() as session, session.get(self.url, params=params) as response:
            return Posted(response.status, await response.text())

    async def _send(self, body: bytes, headers: dict[str, str]) -> Posted:
        async with aiohttp.ClientSession() as session, session.post(self.url, data=body, headers=headers) as response:
            return Posted(response.status, await response.text())
