"""The aiohttp application: assembles the routes and middlewares; status, metrics, pages and static files.

Error translation and JSON bodies live in ``http.py``, which the route modules import; this module
imports them, never the other way round.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

from aiohttp import WSCloseCode, web

from appliance import __version__
from appliance.channels.web import auth as web_auth
from appliance.channels.web import (
    chat,
    cron,
    devices,
    hooks,
    hosts,
    http,
    login,
    openai_api,
    tasks,
    telegram_hook,
)
from appliance.channels.web.login_guard import LoginGuard
from appliance.channels.web.pages import PAGES, STATIC, Page, render
from appliance.channels.web.state import (
    AUTOMATION,
    CHANNELS,
    DEVICES,
    MONITOR,
    RUNTIME,
    STATE,
    STREAMS,
    WebState,
)
from appliance.errors import UsageError
from appliance.hardware.states import device_states
from appliance.health import read_health
from appliance.metrics import CONTENT_TYPE
from appliance.notify import recent as recent_notifications

STATUS_TASKS = 10  # the newest tasks on the status page


# The Settings page's and the first run's routes (settings, setup, access, updates, skills, memory): each module is
# imported at its first request, so the idle daemon does not hold them (0.45 MiB measured). This table is the
# one place they are routed; tests/test_web_api.py checks it against the OpenAPI document.
SETTINGS_ROUTES = (
    ("GET", "/api/settings", "settings:get_settings"),
    ("POST", "/api/settings", "settings:save_settings"),
    ("GET", "/api/settings/audit", "settings:settings_audit"),
    ("GET", "/api/setup", "setup:setup_state"),
    ("POST", "/api/setup/password", "setup:setup_password"),
    ("POST", "/api/setup/cloud", "setup:setup_cloud"),
    ("GET", "/api/models", "setup:list_models"),
    ("POST", "/api/setup/telegram/check", "setup:telegram_check"),
    ("POST", "/api/setup/telegram/pairing", "setup:telegram_pairing"),
    ("GET", "/api/setup/telegram/pairing", "setup:telegram_paired"),
    ("GET", "/api/access", "access:get_access"),
    ("POST", "/api/access/password", "access:change_password"),
    ("POST", "/api/access/tokens", "access:add_token"),
    ("POST", "/api/access/tokens/{name}", "access:set_scope"),
    ("DELETE", "/api/access/tokens/{name}", "access:revoke_token"),
    ("POST", "/api/access/sessions/end", "access:end_other_sessions"),
    ("GET", "/api/update", "updates:update_status"),
    ("POST", "/api/update/rollback", "updates:ask_rollback"),
    ("GET", "/api/memory", "memory:list_memory"),
    ("GET", "/api/memory/export", "memory:export_memory"),
    ("POST", "/api/memory/forget", "memory:forget_about"),
    ("PATCH", "/api/memory/{id}", "memory:edit_memory"),
    ("DELETE", "/api/memory/{id}", "memory:forget_memory"),
    ("GET", "/api/conversations", "memory:list_conversations"),
    ("DELETE", "/api/conversations/{id}", "memory:forget_conversation"),
    ("GET", "/api/skills", "skills:list_skills"),
    ("POST", "/api/skills/install", "skills:install_skill"),
    ("DELETE", "/api/skills/{name}", "skills:remove_skill"),
)


def _on_first_use(target: str) -> Any:
    """A handler that imports ``module:function`` of this package at its first request and then calls it."""
    module, name = target.split(":")

    async def handler(request: web.Request) -> web.StreamResponse:
        found = getattr(importlib.import_module(f"appliance.channels.web.{module}"), name)
        response: web.StreamResponse = await found(request)
        return response

    return handler


async def healthz(request: web.Request) -> web.Response:
    """Liveness for systemd's watchdog and the OTA health check: the loop and the database answer.

    The version lets the updater tell the new release's answer from the old one's.
    """
    db = request.app[RUNTIME].db
    ok = await db.call(db.ping)
    body = {"status": "ok" if ok else "degraded", "version": __version__}
    return web.json_response(body, status=200 if ok else 503)


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format."""
    body = request.app[MONITOR].metrics.registry.render()
    return web.Response(body=body.encode(), headers={"Content-Type": CONTENT_TYPE})


async def api_status(request: web.Request) -> web.Response:
    """The appliance's health, model, queue and recent replies."""
    state = request.app[STATE]
    health = (await asyncio.to_thread(read_health, state.runtime.db.path.parent)).as_dict()
    await state.monitor.load_recent()
    status = state.status(health)
    status["devices"] = await device_states(state.runtime.devices, state.devices.readings)
    status["routing"] = await state.runtime.db.call(state.monitor.routing_status)
    events = state.devices.events
    if events is not None:
        status["events"] = [e.as_dict() for e in await asyncio.to_thread(events.recent, 10)]
    status["channels"] = state.channels.states() if state.channels is not None else []
    status["notifications"] = await state.runtime.db.call(recent_notifications, state.runtime.db, limit=10)
    # The cards with buttons: writes waiting for a person (shown on their device), the jobs, the tasks.
    devices_ = state.runtime.devices
    pending = await asyncio.to_thread(devices_.approvals.pending) if devices_ is not None else []
    status["approvals"] = [p.as_dict() for p in pending]
    cron = state.automation.cron
    status["jobs"] = cron.list_jobs() if cron is not None else []
    status["tasks"] = await tasks.recent_tasks(state.runtime.db, state.automation, STATUS_TASKS)
    return web.json_response(status)


async def api_notifications(request: web.Request) -> web.Response:
    """The feed of proactive messages, newest first; ``?after=ID`` only those newer than ID."""
    try:
        after = int(request.query.get("after", "0"))
    except ValueError:
        raise UsageError("after: expected a notification id (a whole number)") from None
    db = request.app[RUNTIME].db
    return web.json_response({"notifications": await db.call(recent_notifications, db, after_id=after)})


async def api_openapi(request: web.Request) -> web.Response:
    """The OpenAPI 3 description of this API."""
    from appliance.channels.web.openapi import openapi_document  # built on request: the idle daemon never needs it

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


def page(one: Page) -> Any:
    """A handler serving one of the HTML pages (its document is put together once, here). Until the owner
    has chosen a password (the first run), the status page sends to the setup."""
    text = render(one)

    async def handler(request: web.Request) -> web.Response:
        if one.path == "/" and await asyncio.to_thread(request.app[STATE].auth.first_run):
            raise web.HTTPFound("/setup")
        return web.Response(text=text, content_type="text/html", headers=PAGE_HEADERS)

    return handler


async def close_sockets(app: web.Application) -> None:
    """At shutdown, tell open chat pages the server is going away (they reconnect by themselves)."""
    for ws in list(app[STREAMS].sockets):
        await ws.close(code=WSCloseCode.GOING_AWAY, message=b"server stopping")


def build_app(state: WebState, site: hosts.SiteNames | None = None) -> web.Application:
    """The daemon's web application, answering only to ``site``'s names (default: read from the config now)."""
    config = state.runtime.config
    guard = LoginGuard(config.web.login_attempts_per_minute, config.web.login_attempts_per_minute_total)
    # The Host check comes first: a request for a foreign name (DNS rebinding) touches nothing else.
    middlewares = [
        hosts.middleware(site or hosts.SiteNames.for_config(config)),
        http.errors_middleware(state.monitor.metrics.requests),
        web_auth.middleware(state.auth),
    ]
    app = web.Application(middlewares=middlewares, client_max_size=http.MAX_BODY)
    app[STATE] = state
    # Each route group reads only its own part (channels/web/state.py).
    app[RUNTIME], app[MONITOR], app[STREAMS] = state.runtime, state.monitor, state.streams
    app[AUTOMATION], app[DEVICES], app[CHANNELS] = state.automation, state.devices, state.channels
    app.on_shutdown.append(close_sockets)
    app.add_routes(
        [
            web.get("/healthz", healthz),
            web.get("/metrics", metrics),
            *(web.get(one.path, page(one)) for one in PAGES),
            web.get("/api/status", api_status),
            web.get("/api/notifications", api_notifications),
            *devices.routes,
            *cron.routes,
            *tasks.routes,
            *(web.route(method, path, _on_first_use(target)) for method, path, target in SETTINGS_ROUTES),
            web.get("/api/openapi.json", api_openapi),
            *chat.routes,
            *openai_api.routes,
            *telegram_hook.routes(),
            *hooks.routes(),
            *login.routes(state.auth, login_guard=guard),
            web.static("/static", STATIC),
        ]
    )
    return app
