"""Settings over HTTP: the forms made from the config schema, a save that is checked, written and applied.

``GET /api/settings`` answers the file's version and every tab's forms (appliance/config/form.py; secrets only
as set / not set). ``POST /api/settings`` takes ``{"version": V, "set": {"web.port": 8081, ...}}``: the change
is checked by the config's own checks (an error names its key: ``{"error", "key"}``, 400), refused when the
file changed since V (409, with the keys that changed), else written (appliance/config/edit.py) and applied
at once through the daemon's reload (SIGHUP's path): the answer says which keys applied and which wait for a
restart. Changing a secret from a browser asks for the owner's password again. Every save is in the events
list (kind ``config``: who, when, which keys; never a secret's value). Admin only (scopes.py's default).

Routed by app.SETTINGS_ROUTES, which imports this module at its first request (the idle daemon never does).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from appliance.channels.web.auth import principal
from appliance.channels.web.http import json_error, read_json
from appliance.channels.web.state import RUNTIME, STATE
from appliance.config.edit import ConfigFile, FieldError, VersionConflict, secret_keys

AUDIT_SHOWN = 20  # the newest settings changes the page lists


def _file(request: web.Request) -> ConfigFile:
    return request.app[STATE].settings.file(request.app[RUNTIME])


async def get_settings(request: web.Request) -> web.Response:
    """The config file's version and every tab's forms, filled in with the file's values (secrets: set or not)."""
    from appliance.config.form import settings_form

    version, config = await asyncio.to_thread(_file(request).read)
    reloaded = request.app[STATE].sources.reloaded
    waiting = (reloaded() if reloaded is not None else {}).get("restart_needed", [])
    return web.json_response({"version": version, "pages": settings_form(config), "restart_needed": waiting})


async def save_settings(request: web.Request) -> web.Response:
    """Check, write and apply a change: {"version": V, "set": {"key": value, ...}, "password": (for secrets)}."""
    started = time.monotonic()
    body = await read_json(request)
    version, changes = body.get("version"), body.get("set")
    if not isinstance(version, str) or not isinstance(changes, dict) or not changes:
        return json_error(400, 'expected {"version": "...", "set": {"key": value, ...}}')
    who = principal(request)
    try:
        secrets = secret_keys(changes)
    except FieldError as exc:
        return json_error(400, exc.message, key=exc.key, fix=exc.fix)
    if secrets and who is not None and who.kind == "session":
        password = body.get("password")
        auth = request.app[STATE].auth
        if not isinstance(password, str) or not await asyncio.to_thread(auth.check_password, password):
            return json_error(
                403, "changing a secret needs your password again", key=secrets[0], fix="type the web password"
            )
    answer = await save_and_apply(request, version, changes)
    if isinstance(answer, web.Response):
        return answer
    return web.json_response({**answer, "took_ms": round((time.monotonic() - started) * 1000, 1)})


async def save_and_apply(request: web.Request, version: str, changes: dict[str, Any]) -> dict[str, Any] | web.Response:
    """Write ``changes`` (checked; 400 with the key, 409 with what changed), audit them, and apply them through the
    daemon's reload: what changed, what applies now and what waits (outside the daemon, or when the reload refuses
    the file, at the next start). The settings route and the setup's cloud step both save through here."""
    from appliance.hardware.events import record_settings_change

    settings, who = request.app[STATE].settings, principal(request)
    try:
        saved = await asyncio.to_thread(_file(request).save, version, changes)
    except FieldError as exc:
        return json_error(400, exc.message, key=exc.key, fix=exc.fix)
    except VersionConflict as exc:
        return json_error(409, exc.message, changed=exc.changed, version=exc.version, fix=exc.fix)
    db = request.app[RUNTIME].db
    await db.call(record_settings_change, db, saved.keys, f"{who.kind}:{who.name}" if who is not None else "unknown")
    result = settings.reload() if settings.reload is not None and saved.keys else {}
    refused = result.get("refused", "") if settings.reload is not None else "no daemon is running this site"
    waiting = saved.keys if refused else [key for key in result.get("restart_needed", []) if key in saved.keys]
    return {
        "version": saved.version,
        "changed": saved.keys,
        "applied": [key for key in saved.keys if key not in waiting],
        "restart_needed": waiting,
        "refused": refused,
    }


async def settings_audit(request: web.Request) -> web.Response:
    """The newest settings changes: who, when, which keys."""
    from appliance.hardware.events import settings_changes

    db = request.app[RUNTIME].db
    changes = await db.call(settings_changes, db, AUDIT_SHOWN)
    return web.json_response({"changes": [c.as_dict() for c in changes]})
