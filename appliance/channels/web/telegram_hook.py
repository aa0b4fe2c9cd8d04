"""``POST /telegram/webhook``: where Telegram posts updates when telegram.webhook_url is set.

The path is public (no session, no API token): Telegram proves itself with the secret token we gave it in
setWebhook, sent back in the ``X-Telegram-Bot-Api-Secret-Token`` header. A wrong or missing secret is a 403
and nothing is read further. A good post is queued and answered 200 at once; the bot handles it in the
background, so a slow answer never makes Telegram time out and post the update again.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, cast

from aiohttp import web

from appliance.channels.web.http import json_error
from appliance.channels.web.state import CHANNELS
from appliance.ratelimit import RateLimiter

if TYPE_CHECKING:
    from appliance.channels.telegram.channel import TelegramChannel

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_BODY = 1_000_000

_refusals = RateLimiter(1, 300.0)  # at most one log line per five minutes for refused posts


async def telegram_webhook(request: web.Request) -> web.Response:
    """Check Telegram's secret token, then hand the Update to the Telegram channel."""
    channels = request.app[CHANNELS]
    channel = cast("TelegramChannel | None", channels.get("telegram") if channels is not None else None)
    if channel is None or not channel.uses_webhook:
        return json_error(404, "no Telegram webhook is configured (telegram.webhook_url)")
    if not channel.webhook_secret_ok(request.headers.get(SECRET_HEADER)):
        if _refusals.hit("refused") == 0:
            log.warning("telegram webhook: refused a post from %s without the right secret token", request.remote)
        return json_error(403, "wrong or missing secret token")
    if request.content_length is not None and request.content_length > MAX_BODY:
        return json_error(413, "the update is too large")
    try:
        data = json.loads(await request.read())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return json_error(400, "the body is not JSON")
    if not isinstance(data, dict):
        return json_error(400, "the body must be a Telegram Update object")
    try:
        queued = await channel.feed_update(data)
    except ValueError as exc:
        log.warning("telegram webhook: %s", exc)
        return json_error(400, "the body is not a Telegram Update")
    if not queued:
        # Not connected yet (or stopping): Telegram posts the update again later.
        return json_error(503, "the Telegram channel is not running")
    return web.json_response({"ok": True})


def routes() -> list[web.RouteDef]:
    """The webhook route, for build_app."""
    return [web.post(WEBHOOK_PATH, telegram_webhook)]
