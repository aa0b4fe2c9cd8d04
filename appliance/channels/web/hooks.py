"""The public routes of the WhatsApp channel and the webhook bridges: each proves itself by a signature.

- ``GET /whatsapp/webhook``: Meta's verification handshake when the webhook URL is saved in the app's
  settings (``hub.mode=subscribe``, ``hub.verify_token`` = whatsapp.verify_token, answered with
  ``hub.challenge``); a wrong token is a 403.
- ``POST /whatsapp/webhook``: Meta's posts, signed ``X-Hub-Signature-256`` with the app secret over the
  raw body. Answered 200 at once; the WhatsApp channel handles the messages in the background (Meta
  re-sends a post it got no 200 for, so a slow model never causes repeats).
- ``POST /api/webhook/{name}``: a bridge's signed request, answered with the reply (``channels/webhook.py``).

The session and token middleware lets these paths through (``auth.PUBLIC_PATHS`` and the bridge prefix):
the signature is checked here, before the body is parsed, and a refused request costs no model call and
at most one log line per few minutes. Neither channel's module is imported here: they come with the
daemon's channel set only when enabled.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import TYPE_CHECKING, Any, cast

from aiohttp import web

from appliance.channels.web.http import json_error
from appliance.channels.web.state import CHANNELS
from appliance.ratelimit import RateLimiter

if TYPE_CHECKING:
    from appliance.channels.webhook import WebhookChannel
    from appliance.channels.whatsapp.channel import WhatsAppChannel

log = logging.getLogger(__name__)

WHATSAPP_PATH = "/whatsapp/webhook"
BRIDGE_PREFIX = "/api/webhook/"
MAX_BODY = 1_000_000  # Meta's posts are a few kilobytes; a bridge's text is at most 8,000 characters

_refusals = RateLimiter(1, 300.0)  # WhatsApp: at most one log line per five minutes for refused posts


def _channel(request: web.Request, name: str) -> Any:
    channels = request.app[CHANNELS]
    return channels.get(name) if channels is not None else None


async def _body(request: web.Request) -> bytes | None:
    """The raw body, or None when it is larger than MAX_BODY."""
    if request.content_length is not None and request.content_length > MAX_BODY:
        return None
    body = await request.content.read(MAX_BODY + 1)
    return None if len(body) > MAX_BODY else body


def _refused_whatsapp(request: web.Request, why: str) -> None:
    if _refusals.hit("whatsapp") == 0:
        log.warning("whatsapp webhook: refused %s from %s", why, request.remote)


async def whatsapp_verify(request: web.Request) -> web.Response:
    """Meta's GET handshake: echo hub.challenge when hub.verify_token is ours."""
    channel = cast("WhatsAppChannel | None", _channel(request, "whatsapp"))
    if channel is None:
        return json_error(404, "the WhatsApp channel is not enabled (whatsapp.enabled)")
    query = request.query
    expected = channel.config.verify_token
    sent = query.get("hub.verify_token", "")
    if query.get("hub.mode") != "subscribe" or not expected or not sent:
        _refused_whatsapp(request, "a verification without hub.mode=subscribe and a verify token")
        return json_error(403, "not a subscription handshake with the verify token")
    if not hmac.compare_digest(sent.encode("utf-8"), expected.encode("utf-8")):
        _refused_whatsapp(request, "a verification with the wrong verify token (whatsapp.verify_token)")
        return json_error(403, "wrong verify token")
    log.info("whatsapp webhook: Meta verified the webhook URL")
    return web.Response(text=query.get("hub.challenge", ""), content_type="text/plain")


async def whatsapp_post(request: web.Request) -> web.Response:
    """Meta's post: check the signature over the raw body, queue the events, answer 200."""
    from appliance.channels.whatsapp.payload import SIGNATURE_HEADER, read_events, signature_ok

    channel = cast("WhatsAppChannel | None", _channel(request, "whatsapp"))
    if channel is None:
        return json_error(404, "the WhatsApp channel is not enabled (whatsapp.enabled)")
    body = await _body(request)
    if body is None:
        return json_error(413, "the post is too large")
    if not signature_ok(body, request.headers.get(SIGNATURE_HEADER), channel.config.app_secret):
        _refused_whatsapp(request, "a post without the app secret's signature (X-Hub-Signature-256)")
        return json_error(401, "missing or wrong X-Hub-Signature-256")
    try:
        events = read_events(json.loads(body))
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        log.warning("whatsapp webhook: a signed post that is not a WhatsApp payload: %s", exc)
        return json_error(400, "not a WhatsApp webhook payload")
    if not channel.accepting:
        return json_error(503, "the WhatsApp channel is stopping; Meta sends it again")
    channel.receive(events)
    return web.json_response({"ok": True})


async def webhook_bridge(request: web.Request) -> web.Response:
    """A bridge's signed request: the reply, its footer, route and reason."""
    from appliance.channels.webhook import REFUSED_FIX, SIGNATURE_HEADER, TIMESTAMP_HEADER, Refused

    name = request.match_info["name"]
    channel = cast("WebhookChannel | None", _channel(request, "webhook"))
    body = await _body(request)
    if body is None:
        return json_error(413, "the request is too large")
    if channel is None:  # answered like a wrong signature: the URL says nothing about which bridges exist
        return json_error(401, "unknown bridge or wrong signature", fix=REFUSED_FIX)
    try:
        signed = channel.check(name, request.headers.get(TIMESTAMP_HEADER), request.headers.get(SIGNATURE_HEADER), body)
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return json_error(400, f"the body is not valid JSON: {exc}")
        if not isinstance(data, dict):
            return json_error(400, 'the body must be a JSON object: {"text": ..., "chat": ...}')
        try:
            answer = await channel.ask(name, data, signed)
        except ValueError as exc:
            return json_error(400, str(exc))
    except Refused as exc:
        channel.refused(exc, request.remote)
        return json_error(exc.status, exc.error, fix=REFUSED_FIX if exc.status == 401 else None)
    return web.json_response(answer)


def routes() -> list[web.RouteDef]:
    """The routes, for build_app."""
    return [
        web.get(WHATSAPP_PATH, whatsapp_verify),
        web.post(WHATSAPP_PATH, whatsapp_post),
        web.post(BRIDGE_PREFIX + "{name}", webhook_bridge),
    ]
