"""Who may use the appliance, from the Settings page's access tab: the password, API tokens and their scopes,
the signed-in browsers. Every change is in the events list (kind ``config``: who, when, what; never a token or
a password). Admin only (scopes.py's default); the password needs the current one.

Routed by app.SETTINGS_ROUTES, which imports this module at its first request (the idle daemon never does).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict

from aiohttp import web

from appliance.channels.web.auth import SESSION_COOKIE, principal
from appliance.channels.web.http import json_error, read_json
from appliance.channels.web.login import session_cookie
from appliance.channels.web.scopes import SCOPE_HELP
from appliance.channels.web.state import RUNTIME, STATE
from appliance.errors import NotFound, UsageError


async def _audit(request: web.Request, what: str) -> None:
    from appliance.hardware.events import record_settings_change

    who = principal(request)
    db = request.app[RUNTIME].db
    await db.call(record_settings_change, db, [what], f"{who.kind}:{who.name}" if who else "unknown")


async def get_access(request: web.Request) -> web.Response:
    """The API tokens (never their values) with their scopes, what each scope may do, the browsers signed in."""
    auth = request.app[STATE].auth
    tokens = await asyncio.to_thread(auth.list_tokens)
    return web.json_response(
        {
            "tokens": [asdict(t) for t in tokens],
            "scopes": SCOPE_HELP,
            "sessions": await asyncio.to_thread(auth.live_sessions),
        }
    )


async def change_password(request: web.Request) -> web.Response:
    """A new web password: {"current", "password"}; every browser is signed out but this one."""
    body = await read_json(request)
    auth = request.app[STATE].auth
    current, new = body.get("current"), body.get("password")
    if not isinstance(current, str) or not await asyncio.to_thread(auth.check_password, current):
        return json_error(403, "that is not the current password", key="current")
    if not isinstance(new, str):
        return json_error(400, 'expected {"current": "...", "password": "..."}', key="password")
    try:
        await asyncio.to_thread(auth.set_password, new)
    except UsageError as exc:
        return json_error(400, exc.message, key="password", fix=exc.fix)
    await _audit(request, "access.password")
    response = web.json_response({"password": "changed"})
    if (found := principal(request)) is not None and found.kind == "session":
        session_id, _ = await auth.db.call(auth.create_session)
        session_cookie(response, auth, request, session_id)
    return response


async def add_token(request: web.Request) -> web.Response:
    """A new API token: {"name", "scope"}; the answer holds it, once."""
    body = await read_json(request)
    name, scope = body.get("name"), body.get("scope", "chat")
    if not isinstance(name, str) or not isinstance(scope, str):
        return json_error(400, 'expected {"name": "...", "scope": "chat" | "read" | "devices" | "admin"}', key="name")
    auth = request.app[STATE].auth
    try:
        token = await asyncio.to_thread(auth.add_token, name, scope=scope)
    except UsageError as exc:
        return json_error(400, exc.message, key="scope" if "scope" in exc.message else "name", fix=exc.fix)
    await _audit(request, f"access.tokens.{name.strip()} (scope {scope})")
    return web.json_response({"name": name.strip(), "scope": scope, "token": token}, status=201)


async def set_scope(request: web.Request) -> web.Response:
    """Give a token another scope: {"scope"}."""
    body = await read_json(request)
    name, scope = request.match_info["name"], body.get("scope")
    if not isinstance(scope, str):
        return json_error(400, 'expected {"scope": "chat" | "read" | "devices" | "admin"}', key="scope")
    auth = request.app[STATE].auth
    try:
        found = await asyncio.to_thread(auth.set_token_scope, name, scope)
    except UsageError as exc:
        return json_error(400, exc.message, key="scope", fix=exc.fix)
    if not found:
        raise NotFound(f"no API token named {name!r}", fix="GET /api/access lists them")
    await _audit(request, f"access.tokens.{name} (scope {scope})")
    return web.json_response({"name": name, "scope": scope})


async def revoke_token(request: web.Request) -> web.Response:
    """Revoke a token: what used it is refused from now on."""
    name = request.match_info["name"]
    auth = request.app[STATE].auth
    if not await asyncio.to_thread(auth.revoke_token, name):
        raise NotFound(f"no API token named {name!r}", fix="GET /api/access lists them")
    await _audit(request, f"access.tokens.{name} (revoked)")
    return web.json_response({"revoked": name})


async def end_other_sessions(request: web.Request) -> web.Response:
    """Sign out every other browser (a token's call signs out every browser)."""
    auth = request.app[STATE].auth
    ended = await asyncio.to_thread(auth.end_other_sessions, request.cookies.get(SESSION_COOKIE, ""))
    await _audit(request, "access.sessions (others signed out)")
    return web.json_response({"ended": ended})
