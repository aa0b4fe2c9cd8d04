"""The aiohttp application: routes, error translation, status, metrics, pages and static files."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from aiohttp import WSCloseCode, web

from appliance import __version__
from appliance.channels.web import auth as web_auth
from appliance.channels.web import chat, cron, devices, hosts, login, openai_api, telegram_hook
from appliance.channels.web.login_guard import LoginGuard
from appliance.channels.web.openapi import openapi_document
from appliance.channels.web.state import STATE, WebState
from appliance.errors import ConfigError, PicoagentError, UsageError
from appliance.hardware.states import device_states
from appliance.health import read_health
from appliance.metrics import CONTENT_TYPE

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
API_PREFIXES = ("/api/", "/v1/")


def json_error(status: int, message: str, **extra: Any) -> web.Response:
    """A JSON error body: {"error": message, ...}."""
    return web.json_response({"error": message, **extra}, status=status)


@web.middleware
async def errors_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Expected failures become clear JSON errors; unexpected ones a 500 without a traceback."""
    state = request.app[STATE]
    try:
        response: web.StreamResponse = await handler(request)
    except web.HTTPException as exc:
        state.metrics.requests.inc(1, f"{exc.status // 100}xx")
        if exc.status >= 400 and request.path.startswith(API_PREFIXES) and exc.content_type != "application/json":
            # aiohttp's own 404/405/413 are plain text; API clients get JSON like every other error.
            error = json_error(exc.status, exc.reason)
            for header in ("Allow", "Retry-After"):
                if header in exc.headers:
                    error.headers[header] = exc.headers[header]
            return error
        raise
    except (UsageError, ConfigError) as exc:
        response = json_error(400, exc.message, fix=exc.fix)
    except PicoagentError as exc:
        response = json_error(503 if "memory" in exc.message else 500, exc.message, fix=exc.fix)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("unexpected error in %s %s", request.method, request.path)
        response = json_error(500, "internal error; the log has the details")
    state.metrics.requests.inc(1, f"{response.status // 100}xx")
    return response


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request's JSON object body, or a 400 that says what is wrong with it."""
    if request.content_length and request.content_length > 1_000_000:
        raise web.HTTPRequestEntityTooLarge(max_size=1_000_000, actual_size=request.content_length)
    try:
        body = await request.json(loads=json.loads)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"the body is not valid JSON: {exc}"}), content_type="application/json"
        ) from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(
            text=json.dumps({"error": "the body must be a JSON object"}), content_type="application/json"
        )
    return body


def bad_request(message: str) -> web.HTTPBadRequest:
    """A 400 with a JSON error body."""
    return web.HTTPBadRequest(text=json.dumps({"error": message}), content_type="application/json")


async def healthz(request: web.Request) -> web.Response:
    """Liveness for systemd's watchdog and the OTA health check: the loop and the database answer.

    The version lets the updater tell the new release's answer from the old one's.
    """
    state = request.app[STATE]
    db = state.runtime.db
    ok = await db.call(db.ping)
    body = {"status": "ok" if ok else "degraded", "version": __version__}
    return web.json_response(body, status=200 if ok else 503)


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format."""
    body = request.app[STATE].metrics.registry.render()
    return web.Response(body=body.encode(), headers={"Content-Type": CONTENT_TYPE})


async def api_status(request: web.Request) -> web.Response:
    """The appliance's health, model, queue and recent replies."""
    state = request.app[STATE]
    health = (await asyncio.to_thread(read_health, state.runtime.db.path.parent)).as_dict()
    status = state.status(health)
    status["devices"] = await device_states(state.runtime.devices, state.readings)
    status["routing"] = await state.runtime.db.call(state.routing_status)
    if state.events is not None:
        status["events"] = [e.as_dict() for e in await asyncio.to_thread(state.events.recent, 10)]
    return web.json_response(status)


async def api_openapi(request: web.Request) -> web.Response:
    """The OpenAPI 3 description of this API."""
    return web.json_response(openapi_document())


# The pages load only their own scripts and styles: nothing inline, nothing from elsewhere.
PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'self'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def page(name: str) -> Any:
    """A handler serving one of the static HTML pages."""

    async def handler(request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / name, headers=PAGE_HEADERS)

    return handler


async def close_sockets(app: web.Application) -> None:
    """At shutdown, tell open chat pages the server is going away (they reconnect by themselves)."""
    for ws in list(app[STATE].sockets):
        await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server stopping")


def build_app(state: WebState, site: hosts.SiteNames | None = None) -> web.Application:
    """The daemon's web application, answering only to ``site``'s names (default: read from the config now)."""
    config = state.runtime.config
    guard = LoginGuard(config.web.login_attempts_per_minute, config.web.login_attempts_per_minute_total)
    # The Host check comes first: a request for a foreign name (DNS rebinding) touches nothing else.
    middlewares = [
        hosts.middleware(site or hosts.SiteNames.for_config(config)),
        errors_middleware,
        web_auth.middleware(state.auth),
    ]
    app = web.Application(middlewares=middlewares, client_max_size=1_000_000)
    app[STATE] = state
    app.on_shutdown.append(close_sockets)
    app.add_routes(
        [
            web.get("/healthz", healthz),
            web.get("/metrics", metrics),
            web.get("/", page("status.html")),
            web.get("/chat", page("chat.html")),
            web.get("/api/status", api_status),
            *devices.routes(),
            *cron.routes(),
            web.get("/api/openapi.json", api_openapi),
            *chat.routes(),
            *openai_api.routes(),
            *telegram_hook.routes(),
            *login.routes(state.auth, login_guard=guard),
            web.static("/static", STATIC),
        ]
    )
    return app
