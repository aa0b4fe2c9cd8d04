"""The Graph API client of the WhatsApp channel: reading the phone number, sending messages.

Meta publishes no Python SDK for the Cloud API; it is two HTTPS calls, made with aiohttp (the daemon's
own HTTP library, imported only when the channel connects, so ``picoagent chat -m`` never loads it):
``GET {api_base_url}/{phone_number_id}`` (checks the token and the number at connect) and ``POST
{api_base_url}/{phone_number_id}/messages`` with ``Authorization: Bearer <access token>``.

A refusal comes back in Graph's error format ``{"error": {"message", "type", "code", "error_subcode",
"error_data": {"details"}, "fbtrace_id"}}`` and becomes a :class:`GraphError` whose :attr:`~GraphError.kind`
says what to do: ``token`` (190 or HTTP 401: the channel is off until the token is fixed), ``rate``
(130429 throughput, 131056 pair rate, code 4/80007, HTTP 429: wait and send again), ``window`` (131047:
more than 24 hours since the person last wrote; only an approved template may start a conversation),
``retry`` (5xx, transient) or ``refused`` (this message can never go: bad number, bad parameter). A
request that never got an answer is :class:`GraphUnreachable` (send again later).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import aiohttp

ErrorKind = Literal["token", "rate", "window", "retry", "refused"]

TEXT_LIMIT = 4096  # characters in a text message's body
BODY_LIMIT = 1024  # characters in an interactive message's body
BUTTON_LIMIT = 3  # reply buttons in one interactive message
TITLE_LIMIT = 20  # characters in a reply button's title
BUTTON_ID_LIMIT = 256  # characters in a reply button's id
RATE_CODES = {4, 80007, 130429, 131056}
TRANSIENT_CODES = {1, 2, 131000, 131016, 133004}
# How long to hold back sends after a rate limit (Graph names no time): the pair rate allows about one
# message every 6 s to one person; throughput and app limits recover within a minute.
PAUSE_S = {131056: 10.0, 130429: 30.0}
DEFAULT_PAUSE_S = 60.0


class GraphUnreachable(Exception):
    """No answer from the Graph API (network down, DNS, timeout, connection dropped): try again later."""


@dataclass(eq=False)  # exceptions compare by identity
class GraphError(Exception):
    """The Graph API refused a request."""

    status: int
    code: int
    message: str
    subcode: int | None = None
    details: str = ""
    trace: str = ""
    transient: bool = False
    retry_after_s: float | None = None

    def __str__(self) -> str:
        text = self.details or self.message
        return f"{text} (Graph error {self.code}, HTTP {self.status})"

    @property
    def kind(self) -> ErrorKind:
        """What the channel does about it (see the module docstring)."""
        if self.code == 190 or self.status == 401:
            return "token"
        if self.code in RATE_CODES or self.status == 429:
            return "rate"
        if self.code == 131047:
            return "window"
        if self.status >= 500 or self.transient or self.code in TRANSIENT_CODES:
            return "retry"
        return "refused"

    @property
    def pause_s(self) -> float:
        """How long sends wait after a rate limit."""
        if self.retry_after_s is not None:
            return self.retry_after_s
        return PAUSE_S.get(self.code, DEFAULT_PAUSE_S)


def text_message(to: str, text: str) -> dict[str, Any]:
    """The body of a text message (links are not previewed: a reply is read on a phone, quickly)."""
    return {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": to,
        "type": "text",
        "text": {"preview_url": False, "body": text},
    }


def buttons_message(to: str, text: str, buttons: list[tuple[str, str]]) -> dict[str, Any]:
    """The body of an interactive message with reply buttons, each (id, title); see :func:`fits_buttons`."""
    return {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": to,
        "type": "interactive",
        "interactive": {
            "type": "button",
            "body": {"text": text},
            "action": {"buttons": [{"type": "reply", "reply": {"id": i, "title": t}} for i, t in buttons]},
        },
    }


def fits_buttons(text: str, buttons: list[tuple[str, str]]) -> bool:
    """Whether WhatsApp takes these as reply buttons: 1 to 3, unique titles of at most 20 characters."""
    titles = [title for _, title in buttons]
    return (
        0 < len(buttons) <= BUTTON_LIMIT
        and 0 < len(text) <= BODY_LIMIT
        and all(0 < len(title) <= TITLE_LIMIT for title in titles)
        and all(0 < len(ident) <= BUTTON_ID_LIMIT for ident, _ in buttons)
        and len(set(titles)) == len(titles)
    )


class GraphClient:
    """Calls to one WhatsApp business number through the Graph API."""

    def __init__(self, api_base_url: str, phone_number_id: str, token: str, *, timeout_s: float = 20.0) -> None:
        self.url = f"{api_base_url.rstrip('/')}/{phone_number_id}"
        self.token = token
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        """Make the HTTP session (aiohttp is imported here, when the channel connects)."""
        import aiohttp

        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=self.timeout_s)
            self._session = aiohttp.ClientSession(
                timeout=timeout, headers={"Authorization": f"Bearer {self.token}"}, raise_for_status=False
            )

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def phone_number(self) -> dict[str, Any]:
        """The number's details (display number, verified name): proves the token and the number id work."""
        return await self._call("GET", self.url, {"fields": "display_phone_number,verified_name"})

    async def send(self, body: dict[str, Any]) -> str:
        """Send one message; returns the id WhatsApp gave it (``wamid...``)."""
        answer = await self._call("POST", f"{self.url}/messages", body)
        messages = answer.get("messages")
        if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
            raise GraphError(200, 0, f"the Graph API answered without a message id: {str(answer)[:200]}")
        return str(messages[0].get("id", ""))

    async def _call(self, method: str, url: str, data: dict[str, Any]) -> dict[str, Any]:
        import aiohttp

        await self.open()
        assert self._session is not None
        try:
            get = method == "GET"
            request = self._session.get(url, params=data) if get else self._session.post(url, json=data)
            async with request as response:
                raw = await response.read()
                status = response.status
                retry_after = response.headers.get("Retry-After", "")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise GraphUnreachable(str(exc) or type(exc).__name__) from None
        try:
            answer = json.loads(raw) if raw else {}
        except (json.JSONDecodeError, UnicodeDecodeError):
            answer = {}
        if not isinstance(answer, dict):
            answer = {}
        if status < 300 and "error" not in answer:
            return answer
        raise _error(status, answer, retry_after)


def _error(status: int, answer: dict[str, Any], retry_after: str) -> GraphError:
    """A GraphError from an error answer (or from a bare HTTP status, e.g. a proxy's 502)."""
    error = answer.get("error") if isinstance(answer.get("error"), dict) else {}
    assert isinstance(error, dict)
    data = error.get("error_data")
    details = data.get("details", "") if isinstance(data, dict) else (data if isinstance(data, str) else "")
    code = error.get("code")
    subcode = error.get("error_subcode")
    return GraphError(
        status=status,
        code=code if isinstance(code, int) else 0,
        message=str(error.get("message") or f"HTTP {status}"),
        subcode=subcode if isinstance(subcode, int) else None,
        details=str(details),
        trace=str(error.get("fbtrace_id", "")),
        transient=bool(error.get("is_transient")),
        retry_after_s=float(retry_after) if retry_after.isdigit() else None,
    )
