"""What Meta posts to the WhatsApp webhook: the signature check and the payload, read into events.

Meta signs every post with the app secret: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw
body>``; the check runs on the bytes as received (before any JSON parsing) and compares in constant time.
A payload is ``{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages",
"value": {"metadata", "contacts", "messages" | "statuses"}}]}]}``; one post may carry several entries,
changes and messages. Read here into :class:`Text`, :class:`ButtonPress`, :class:`Unsupported` and
:class:`Failed` (a ``statuses`` entry saying our message could not be delivered); ``sent``, ``delivered``
and ``read`` statuses are dropped. Message ids (``wamid...``) are what makes a re-sent post a duplicate.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

SIGNATURE_HEADER = "X-Hub-Signature-256"


def signature_ok(body: bytes, header: str | None, app_secret: str) -> bool:
    """Whether ``header`` is Meta's signature of ``body`` with ``app_secret`` (constant-time compare)."""
    if not header or not app_secret or not header.startswith("sha256="):
        return False
    expected = hmac.new(app_secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(header[len("sha256=") :].strip().lower().encode(), expected.encode())


@dataclass(frozen=True)
class Text:
    """A person wrote a text."""

    wa_id: str
    name: str
    text: str
    message_id: str
    phone_number_id: str


@dataclass(frozen=True)
class ButtonPress:
    """A person tapped one of our reply buttons (``data`` is the button's id)."""

    wa_id: str
    name: str
    data: str
    message_id: str
    phone_number_id: str


@dataclass(frozen=True)
class Unsupported:
    """A message of a kind the channel does not read (image, voice note, location, ...)."""

    wa_id: str
    name: str
    kind: str
    message_id: str
    phone_number_id: str


@dataclass(frozen=True)
class Failed:
    """WhatsApp could not deliver one of our messages (e.g. 131047: outside the 24-hour window)."""

    message_id: str
    recipient: str
    code: int
    reason: str


Event = Text | ButtonPress | Unsupported | Failed


def read_events(payload: Any) -> list[Event]:
    """The events in one webhook post, in order; ValueError for a body that is not a WhatsApp payload."""
    if not isinstance(payload, dict) or payload.get("object") != "whatsapp_business_account":
        raise ValueError("not a WhatsApp Business Account webhook payload")
    entries = payload.get("entry")
    if not isinstance(entries, list):
        raise ValueError("the payload has no entry list")
    events: list[Event] = []
    for entry in entries:
        for change in _dicts(entry.get("changes") if isinstance(entry, dict) else None):
            value = change.get("value")
            if change.get("field") != "messages" or not isinstance(value, dict):
                continue
            number = str(_dict(value.get("metadata")).get("phone_number_id", ""))
            names = {
                str(c.get("wa_id", "")): str(_dict(c.get("profile")).get("name", ""))
                for c in _dicts(value.get("contacts"))
            }
            events.extend(_message(m, names, number) for m in _dicts(value.get("messages")))
            events.extend(_failure(s) for s in _dicts(value.get("statuses")) if s.get("status") == "failed")
    return events


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _message(message: dict[str, Any], names: dict[str, str], number: str) -> Event:
    wa_id = str(message.get("from", ""))
    message_id = str(message.get("id", ""))
    if not wa_id or not message_id:
        raise ValueError("a message without its sender or its id")
    name = names.get(wa_id, "")
    kind = str(message.get("type", ""))
    if kind == "text":
        body = _dict(message.get("text")).get("body")
        if isinstance(body, str):
            return Text(wa_id, name, body, message_id, number)
    elif kind == "interactive":
        interactive = _dict(message.get("interactive"))
        reply = interactive.get("button_reply") or interactive.get("list_reply")
        if isinstance(reply, dict) and isinstance(reply.get("id"), str):
            return ButtonPress(wa_id, name, reply["id"], message_id, number)
    elif kind == "button":  # a template's quick-reply button
        payload = _dict(message.get("button")).get("payload")
        if isinstance(payload, str):
            return ButtonPress(wa_id, name, payload, message_id, number)
    return Unsupported(wa_id, name, kind or "unknown", message_id, number)


def _failure(status: dict[str, Any]) -> Failed:
    errors = _dicts(status.get("errors"))
    first = errors[0] if errors else {}
    data = _dict(first.get("error_data"))
    reason = str(data.get("details") or first.get("message") or first.get("title") or "failed")
    code = first.get("code")
    return Failed(
        str(status.get("id", "")), str(status.get("recipient_id", "")), code if isinstance(code, int) else 0, reason
    )
