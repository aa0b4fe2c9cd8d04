"""Webhook bridges: Home Assistant, n8n, Node-RED or a shell script talk to the assistant over signed HTTP.

Each bridge under ``webhooks:`` has a name, a ``secret`` and, optionally, a ``url``.

- **In**: ``POST /api/webhook/<name>`` with ``{"text": ..., "chat": ...}`` (``chat`` optional: each chat
  of a bridge is a conversation of its own; without it the bridge has one). The request is signed:
  ``X-Picoagent-Timestamp: <Unix seconds>`` and ``X-Picoagent-Signature: sha256=<hex HMAC-SHA256 of
  timestamp + "." + body with the secret>``. An unsigned or wrongly signed request (or one for a bridge
  that does not exist) is a 401, one more than 5 minutes off the Pi's clock or one whose signature was
  seen before (a replay) a 403; none of them reaches the model, and refusals log one line per few
  minutes. The answer is the HTTP response: the reply's text, its footer, route and reason.
- **Out**: proactive messages (and a reply whose caller hung up before it was ready) are POSTed to the
  bridge's ``url`` through the durable outbox, signed the same way, with ``X-Picoagent-Delivery: <id>``
  (the same message retried carries the same id, so a receiver can drop a repeat); a receiver that is
  down is retried with backoff, in order, and a 429/503's ``Retry-After`` is honoured.

The signature is the bridge's authentication: a signed caller is the owner's own automation, so there
is no allowlist or pairing here. Nor is it a person (``people = False``): whatever holds the secret (Home
Assistant, a script) talks to the assistant, and the only command is ``/help``; approving, reading the
memories and the other commands are for a person in a chat, so an automation cannot approve a write it
asked for. A bridge's chat id (where its answers go) is the bridge's name.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from appliance.agent.record import ReplyRecord
from appliance.channels.base import ChatChannel, Incoming
from appliance.channels.commands import Said
from appliance.channels.core import Route, footer
from appliance.config import WebhookConfig
from appliance.outbox import Outcome, OutMessage
from appliance.ratelimit import RateLimiter

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Picoagent-Timestamp"
SIGNATURE_HEADER = "X-Picoagent-Signature"
DELIVERY_HEADER = "X-Picoagent-Delivery"
TOLERANCE_S = 300.0  # a signed request older (or further in the future) than this is refused
POST_TIMEOUT_S = 15.0
MAX_TEXT = 8000
CHAT = re.compile(r"[A-Za-z0-9_.:@-]{1,64}")
REFUSED_FIX = (
    "sign the request: X-Picoagent-Timestamp (Unix seconds) and X-Picoagent-Signature: sha256=<hex"
    ' HMAC-SHA256 of timestamp + "." + body, keyed with webhooks.NAME.secret> (README, "Webhook bridge")'
)


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=`` and the hex HMAC-SHA256 of ``timestamp + "." + body``: both directions sign this way."""
    digest = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def signed_headers(secret: str, body: bytes, now: float) -> dict[str, str]:
    """The headers of a signed request made at ``now``."""
    stamp = str(int(now))
    return {TIMESTAMP_HEADER: stamp, SIGNATURE_HEADER: signature(secret, stamp, body)}


class Refused(Exception):
    """A request to a bridge that is not taken: ``status`` for the caller, ``why`` for the owner's log."""

    def __init__(self, status: int, error: str, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.error = error  # what the caller is told (it names no bridge and no secret)
        self.why = why


@dataclass
class _Waiting:
    """An HTTP caller waiting for its answer."""

    said: list[Said] = field(default_factory=list)
    record: ReplyRecord | None = None
    gone: bool = False  # the caller hung up: what is said now goes to the bridge's url instead


class WebhookChannel(ChatChannel):
    """Every bridge under ``webhooks:``: signed requests answered in the response, proactive messages POSTed."""

    name: ClassVar[str] = "webhook"
    buttons: ClassVar[bool] = False  # a bridge reads text: buttons become reply commands
    people: ClassVar[bool] = False  # a program holding the secret: messages to the assistant, not commands

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.bridges: Mapping[str, WebhookConfig] = self.config
        self._refusals = RateLimiter(1, 300.0)
        self._waiting: dict[str, _Waiting] = {}
        self._requests = itertools.count(1)
        self._session: aiohttp.ClientSession | None = None

    # --- lifecycle ----------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Nothing to log in to: the bridges are ready (their receivers are tried at each delivery)."""
        shown = [
            f"{name} -> {hook.url}" if hook.url else f"{name} (answers only)" for name, hook in self.bridges.items()
        ]
        self.detail = "bridges: " + ", ".join(shown)

    async def disconnect(self) -> None:
        """Close the HTTP session of the outbound posts."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def callers_waiting(self) -> int:
        """HTTP callers waiting for their answer now."""
        return sum(not w.gone for w in self._waiting.values())

    async def admit(self, incoming: Incoming) -> bool:
        """A request that reached the channel was signed with its bridge's secret: that is who may talk."""
        return True

    def owner_target(self) -> str | None:
        """The first bridge with a url that may carry proactive messages (``owner: true``)."""
        for name, hook in self.bridges.items():
            if hook.url and hook.owner:
                return name
        return None

    # --- requests in --------------------------------------------------------------------------------

    def check(self, name: str, timestamp: str | None, sent: str | None, body: bytes) -> str:
        """The signature the Pi computed for ``body``; :class:`Refused` unless bridge ``name`` signed it, recently.

        A signature seen before (a replay) is refused by :meth:`ask`: the base records each request's
        signature once (its ``remote_id``, in the database), so a replay after a restart is refused too.
        That record is the returned signature, never the header's text: the check forgives case and
        spaces, so the same request sent as ``SHA256=<HEX>`` must still be the same request.
        """
        hook = self.bridges.get(name)
        if not timestamp or not sent:
            raise Refused(401, "the request is not signed", f"a request to bridge {name!r} without a signature")
        if hook is None or not hook.secret:
            raise Refused(401, "unknown bridge or wrong signature", f"a request to {name!r}: no such bridge")
        expected = signature(hook.secret, timestamp, body) if timestamp.isdigit() else ""
        if not expected or not hmac.compare_digest(sent.strip().lower().encode(), expected.encode()):
            raise Refused(401, "unknown bridge or wrong signature", f"a request to {name!r} with a wrong signature")
        now = self.clock()
        if abs(now - int(timestamp)) > TOLERANCE_S:
            raise Refused(
                403,
                "the request's timestamp is more than 5 minutes off (is the sender's clock right?)",
                f"a request to {name!r} signed {now - int(timestamp):+.0f} s ago",
            )
        return expected

    def refused(self, exc: Refused, remote: str | None) -> None:
        """Log a refusal: at most one line per few minutes (a flood of them costs nothing else)."""
        if self._refusals.hit("refused") == 0:
            log.warning("webhook: refused %s from %s (%d)", exc.why, remote or "?", exc.status)

    async def ask(self, name: str, body: dict[str, Any], signed: str) -> dict[str, Any]:
        """Answer one signed request of bridge ``name``: the reply (or a command's answer) as JSON.

        ``signed`` is what :meth:`check` returned (the Pi's own HMAC of the request): its once-only key.
        """
        text, chat = _message(body)
        key = str(next(self._requests))
        incoming = Incoming(
            chat_id=name,
            user_id=name,
            user_name=str(body.get("user") or name)[:64],
            text=text,
            private=True,
            remote_id="sig:" + signed.removeprefix("sha256="),  # a replay after a restart is refused too
            session=f"{name}:{chat}" if chat else name,
            meta={"chat": chat, "request": key} if chat else {"request": key},
        )
        waiting = self._waiting[key] = _Waiting()
        # The turn runs in a task of its own: a caller hanging up (which cancels this handler) leaves it to
        # finish, and its answer goes to the bridge's url instead.
        task = asyncio.ensure_future(self.handle(incoming))
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            waiting.gone = True
            raise
        finally:
            if task.done():
                self._waiting.pop(key, None)
            else:
                task.add_done_callback(lambda _: self._waiting.pop(key, None))
        if not waiting.said:
            if self._stopping:
                raise Refused(503, "the assistant is stopping; send it again later", "a request while stopping")
            raise Refused(403, "this request was received before (a replay)", f"a replayed request to {name!r}")
        return _answer(name, chat, waiting)

    async def answer(self, incoming: Incoming, text: str, force: Route | None = None) -> ReplyRecord | None:
        """The base's turn, keeping the reply record for the HTTP answer (route, reason, footer)."""
        record = await super().answer(incoming, text, force)
        waiting = self._waiting.get(str(incoming.meta.get("request", "")))
        if waiting is not None:
            waiting.record = record
        return record

    async def say(self, incoming: Incoming, said: Said) -> None:
        """Put an answer into the waiting HTTP response; raise when its caller is gone (the outbox takes it)."""
        waiting = self._waiting.get(str(incoming.meta.get("request", "")))
        if waiting is None or waiting.gone:
            raise ConnectionError("the caller hung up before the answer was ready")
        waiting.said.append(said)

    # --- messages out -------------------------------------------------------------------------------

    async def deliver(self, message: OutMessage) -> Outcome:
        """POST one stored message to its bridge's url, signed, and mark it in the outbox."""
        hook = self.bridges.get(message.chat_id)
        if hook is None or not hook.url:
            why = f"webhooks.{message.chat_id}.url is empty" if hook else f"no bridge named {message.chat_id!r}"
            await self.db.call(self.outbox.mark_failed, message.id, f"{why}: nowhere to post it")
            return "failed"
        payload = {
            "bridge": message.chat_id,
            "chat": str(message.meta.get("chat", "")),
            "kind": message.kind,
            "text": message.text,
            "id": message.id,
        }
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {
            "Content-Type": "application/json",
            DELIVERY_HEADER: str(message.id),
            **signed_headers(hook.secret, body, self.clock()),
        }
        try:
            status, retry_after = await self._post(hook.url, body, headers)
        except _Unreachable as exc:
            return await self._unreachable(message, hook.url, str(exc))
        if 200 <= status < 300:
            await self.db.call(self.outbox.mark_sent, message.id, str(status))
            if not self.connected:
                self.came_up(self.detail)
            return "sent"
        if status in (429, 503) and retry_after is not None:
            self.delivery.pause(retry_after)
            await self.db.call(
                self.outbox.mark_retry, message, f"{hook.url} asked to wait (HTTP {status})", retry_after
            )
            return "paused"
        if status >= 500 or status in (408, 429):
            await self.db.call(self.outbox.mark_retry, message, f"{hook.url} answered HTTP {status}")
            return "retry"
        hint = " (is the secret the same on both sides?)" if status in (401, 403) else ""
        await self.db.call(self.outbox.mark_failed, message.id, f"{hook.url} refused it: HTTP {status}{hint}")
        log.warning("webhook: %s refused message %d: HTTP %d%s", hook.url, message.id, status, hint)
        return "failed"

    async def _unreachable(self, message: OutMessage, url: str, error: str) -> Outcome:
        """The receiver did not answer: retried with backoff; proactive messages meanwhile try other channels."""
        await self.db.call(self.outbox.mark_retry, message, f"cannot reach {url}: {error}")
        self.went_down(f"cannot reach {url}: {error}")
        return "retry"

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, float | None]:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=POST_TIMEOUT_S))
        try:
            async with self._session.post(url, data=body, headers=headers, allow_redirects=False) as response:
                await response.read()
                retry_after = response.headers.get("Retry-After", "")
                return response.status, float(retry_after) if retry_after.isdigit() else None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:  # refused, DNS, dropped, timed out
            raise _Unreachable(str(exc) or type(exc).__name__) from None


class _Unreachable(Exception):
    """The receiver gave no HTTP answer."""


def _message(body: dict[str, Any]) -> tuple[str, str]:
    """The text and chat of a request body, or a ValueError saying what is wrong."""
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError('expected "text": a non-empty string')
    if len(text) > MAX_TEXT:
        raise ValueError(f'"text" is too long ({len(text)} characters; at most {MAX_TEXT})')
    chat = body.get("chat", "")
    if not isinstance(chat, str) or (chat and not CHAT.fullmatch(chat)):
        raise ValueError('"chat" must be 1-64 letters, digits or _.:@-')
    return text.strip(), chat


def _answer(name: str, chat: str, waiting: _Waiting) -> dict[str, Any]:
    """The HTTP answer: what a chat would show (``text``), and the reply's parts."""
    record = waiting.record
    shown = "\n\n".join(s.text for s in waiting.said)
    answer: dict[str, Any] = {"bridge": name, "chat": chat, "text": shown}
    if record is None:  # a command's answer (/help, or why another command needs a person)
        answer.update(reply=shown, footer="", route="command", reason="", model="", choices=[])
    else:
        answer.update(
            reply=record.text,
            footer=footer(record),
            route=record.route,
            reason=record.reason,
            model=record.model,
            choices=list(record.choices),
        )
    return answer
