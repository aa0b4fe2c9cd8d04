"""The other end of the webhook bridge: what Home Assistant, n8n, Node-RED or a shell script run.

**Outbound (the bridge posts to ``url``).** :class:`WebhookReceiver` is a real aiohttp server on
127.0.0.1 that takes the bridge's POSTs, checks them as a careful receiver would (the signature over
``timestamp + "." + body``, a timestamp within five minutes), records every one (:attr:`received`) and
answers 200, or a refusal. It can go down (:meth:`go_down`: the port refuses connections) and come back
on the same port (:meth:`come_back`), and fail the next posts with a status (:meth:`fail_next`).

**Inbound (a caller posts to ``/api/webhook/{name}``).** :func:`signed_request` builds the headers a
caller sends: ``X-Picoagent-Timestamp`` (Unix seconds) and ``X-Picoagent-Signature: sha256=<hex of
HMAC-SHA256(secret, timestamp + "." + body)>``. Both directions sign the same way; this module computes
it on its own, never with the appliance's code, so a bug there is caught.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TIMESTAMP_HEADER = "X-Picoagent-Timestamp"
SIGNATURE_HEADER = "X-Picoagent-Signature"
DELIVERY_HEADER = "X-Picoagent-Delivery"  # the outbox id: the same message posted again carries the same one
TOLERANCE_S = 300


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=`` and the hex HMAC-SHA256 of ``timestamp + "." + body`` with the shared secret."""
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def signed_request(
    secret: str, payload: dict[str, Any] | bytes, *, timestamp: float | None = None
) -> tuple[bytes, dict[str, str]]:
    """The body and headers a caller of ``POST /api/webhook/{name}`` sends (signed now, or at ``timestamp``)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    stamp = str(int(time.time() if timestamp is None else timestamp))
    return body, {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: signature(secret, stamp, body),
    }


@dataclass
class Received:
    """One post that reached the receiver, and what it answered."""

    body: dict[str, Any]
    raw: bytes
    timestamp: str
    signature: str
    delivery: str
    valid: bool  # signed with the shared secret, within the tolerance
    status: int  # what the receiver answered
    at: float = field(default_factory=time.monotonic)


class WebhookReceiver:
    """A receiver for the bridge's posts: start it, set the bridge's ``url`` to :attr:`url`, read :attr:`received`."""

    def __init__(self, secret: str, *, path: str = "/api/webhook/picoagent", clock: Any = time.time) -> None:
        self.secret = secret
        self.path = path
        self.clock = clock
        self.received: list[Received] = []
        self._failures: deque[int] = deque()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """Where the bridge posts."""
        return f"http://127.0.0.1:{self.port}{self.path}"

    @property
    def accepted(self) -> list[dict[str, Any]]:
        """The bodies of the posts answered 2xx, oldest first."""
        return [r.body for r in self.received if 200 <= r.status < 300]

    @property
    def texts(self) -> list[str]:
        """The texts of the accepted posts, oldest first."""
        return [str(body.get("text", "")) for body in self.accepted]

    async def start(self) -> None:
        """Listen on 127.0.0.1 (a free port the first time, the same port when it comes back)."""
        app = web.Application()
        app.router.add_post(self.path, self._receive)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self.port = self._runner.addresses[0][1]

    async def go_down(self) -> None:
        """Stop listening: posts now fail to connect."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def come_back(self) -> None:
        """Listen again on the same port."""
        if self._runner is None:
            await self.start()

    def fail_next(self, n: int = 1, status: int = 500, *, after: int = 0) -> None:
        """Answer ``n`` good posts with ``status`` (e.g. 500 or 503: the bridge retries), ``after`` more were taken."""
        self._failures.extend([200] * after + [status] * n)

    async def __aenter__(self) -> WebhookReceiver:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.go_down()

    async def _receive(self, request: web.Request) -> web.Response:
        raw = await request.read()
        stamp = request.headers.get(TIMESTAMP_HEADER, "")
        sent = request.headers.get(SIGNATURE_HEADER, "")
        valid = bool(stamp.isdigit() and sent) and hmac.compare_digest(sent, signature(self.secret, stamp, raw))
        valid = valid and abs(self.clock() - int(stamp)) <= TOLERANCE_S
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = {}
        status = 401 if not valid else (self._failures.popleft() if self._failures else 200)
        self.received.append(
            Received(
                body if isinstance(body, dict) else {},
                raw,
                stamp,
                sent,
                request.headers.get(DELIVERY_HEADER, ""),
                valid,
                status,
            )
        )
        return web.json_response({"ok": 200 <= status < 300}, status=status)
