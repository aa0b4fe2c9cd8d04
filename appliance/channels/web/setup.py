"""The first run in the browser: what is set up yet, the owner's own password, a cloud key checked, the models.

Until the owner chooses a password, the one in use is the one-time one the first start made (or the card's
``setup_code``): signing in with it leads to /setup, and the status page sends there too. Each step of the
page saves through POST /api/settings (settings.py: checked, written, applied) or one of the routes here:
``POST /api/setup/password`` (which ends every session, so it gives this browser a new one),
``POST /api/setup/cloud`` (one real request with the key before anything is saved, the same question
`picoagent doctor` asks, then the provider and routing saved together), ``GET /api/models`` (the catalog
with what fits this board), and Telegram: ``POST /api/setup/telegram/check`` (getMe with a token, before it
is saved), ``POST /api/setup/telegram/pairing`` (a one-time code as a t.me link and its QR code) and ``GET
/api/setup/telegram/pairing`` (whether the owner's first message has paired them). Every step can be
skipped and done later from Settings. Admin only.

Routed by app.SETTINGS_ROUTES, which imports this module at its first request (the idle daemon never does).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from aiohttp import web

from appliance.channels.web.auth import principal
from appliance.channels.web.http import json_error, read_json
from appliance.channels.web.login import session_cookie
from appliance.channels.web.state import MONITOR, RUNTIME, STATE
from appliance.errors import PicoagentError, UsageError

PROVIDER_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
TELEGRAM_TIMEOUT_S = 15.0  # the setup page's getMe


async def setup_state(request: web.Request) -> web.Response:
    """What is set up so far: the owner's password, the name, time zone and place, the cloud, the model."""
    from appliance.channels.pairing import paired_users

    state, runtime = request.app[STATE], request.app[RUNTIME]
    version, config = await asyncio.to_thread(state.settings.file(runtime).read)
    weather, routing = config.weather, config.routing
    telegram = await runtime.db.call(paired_users, runtime.db, "telegram")
    return web.json_response(
        {
            "version": version,
            "first_run": await asyncio.to_thread(state.auth.first_run),
            "name": config.agent.name,
            "timezone": config.scheduler.timezone,
            "place": {"name": weather.place, "latitude": weather.latitude, "longitude": weather.longitude},
            "routing": {"mode": routing.mode, "provider": routing.cloud_provider},
            "providers": sorted(config.providers),
            "model": config.llm.model,
            "telegram": {
                "enabled": config.telegram.enabled,
                "token_set": bool(config.telegram.token),
                "paired": telegram,
            },
        }
    )


async def setup_password(request: web.Request) -> web.Response:
    """The owner's own password: replaces the one-time one, ends every session, and gives this browser a new one."""
    body = await read_json(request)
    password = body.get("password")
    if not isinstance(password, str):
        return json_error(400, 'expected {"password": "..."}', key="password")
    auth = request.app[STATE].auth
    try:
        await asyncio.to_thread(auth.set_password, password)
    except UsageError as exc:
        return json_error(400, exc.message, key="password", fix=exc.fix)
    session_id, csrf = await auth.db.call(auth.create_session)
    response = web.json_response({"password": "set", "csrf": csrf})
    session_cookie(response, auth, request, session_id)
    return response


async def setup_cloud(request: web.Request) -> web.Response:
    """Check a cloud provider with one real request, then save it with routing.mode (edge_first unless given) and
    routing.cloud_provider: {"version", "name", "type", "api_base", "model", "api_key", "password", "mode"}."""
    from appliance.config import ProviderConfig
    from appliance.llm.cloud import ask_once

    body = await read_json(request)
    name = body.get("name") or body.get("type") or ""
    fields = {key: body.get(key) for key in ("type", "api_base", "model", "api_key")}
    if not isinstance(name, str) or not PROVIDER_NAME.fullmatch(name):
        return json_error(400, "a provider's name is a short lowercase word, e.g. openai", key="name")
    for key, value in fields.items():
        if not isinstance(value, str) or not value.strip():
            return json_error(400, f"{key}: required", key=f"providers.{name}.{key}")
    if fields["type"] not in ("openai", "anthropic"):
        return json_error(400, 'type: "openai" or "anthropic"', key=f"providers.{name}.type")
    mode = body.get("mode", "edge_first")
    who = principal(request)
    auth = request.app[STATE].auth
    if who is not None and who.kind == "session":
        password = body.get("password")
        if not isinstance(password, str) or not await asyncio.to_thread(auth.check_password, password):
            return json_error(403, "saving a key needs your password again", key="password")
    provider = ProviderConfig(**{k: str(v).strip() for k, v in fields.items()})  # type: ignore[arg-type]
    try:
        seconds = await ask_once(name, provider)
    except PicoagentError as exc:
        key = "api_key" if "key" in (exc.fix or "") else "api_base"
        return json_error(400, exc.message, key=f"providers.{name}.{key}", fix=exc.fix)
    entry = {k: v for k, v in fields.items() if k != "api_key"}
    changes: dict[str, Any] = {
        f"providers.{name}": entry,
        f"providers.{name}.api_key": provider.api_key,
        "routing.mode": mode,
        "routing.cloud_provider": name,
    }
    from appliance.channels.web.settings import save_and_apply

    saved = await save_and_apply(request, str(body.get("version", "")), changes)
    if isinstance(saved, web.Response):
        return saved
    return web.json_response({**saved, "answered_in_s": round(seconds, 2)})


async def list_models(request: web.Request) -> web.Response:
    """The model catalog: this board, what auto picks, the one running and the one wanted, each model's size,
    RAM, speed on a Pi 5 and whether it fits here (choose one with POST /api/settings {"llm.model": NAME}: the
    daemon downloads it in the background, shown in /api/status model.pull, and switches to it).

    ``here_tps``: the speed to expect on this machine, from the running model's measured decode speed scaled by
    the sizes of the two files (decoding reads every weight once a token: its speed goes with the file's size);
    null until the running model has answered once."""
    from appliance.llm.choice import models_document

    config = request.app[RUNTIME].config
    doc = await asyncio.to_thread(models_document, config)
    measured = request.app[MONITOR].recent_tps()
    running = next((m["size_bytes"] for m in doc["models"] if m["running"] and m["size_bytes"]), 0)
    for model in doc["models"]:
        ok = running and model["kind"] == "chat" and model["size_bytes"]
        model["here_tps"] = round(measured * running / model["size_bytes"], 1) if measured is not None and ok else None
    doc["measured_tps"] = measured
    return web.json_response(doc)


async def _get_me(base_url: str, token: str) -> dict[str, Any]:
    """Telegram's getMe for ``token`` (the bot's username and name); a UsageError that never shows the token."""
    import aiohttp

    if not token or "/" in token or any(c.isspace() for c in token):
        raise UsageError("that is not a bot token", fix="copy the whole token @BotFather gave, e.g. 123456:ABC-...")
    try:
        timeout = aiohttp.ClientTimeout(total=TELEGRAM_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as http, http.get(f"{base_url}{token}/getMe") as answer:
            body = await answer.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        raise UsageError(
            f"cannot reach Telegram at {base_url.rstrip('/')}",
            fix="check this Pi's network (and telegram.api_base_url)",
        ) from None
    if not isinstance(body, dict) or not body.get("ok"):
        said = body.get("description", "") if isinstance(body, dict) else ""
        raise UsageError(f"Telegram refused the token ({said or answer.status})", fix="copy it again from @BotFather")
    result: dict[str, Any] = body["result"]
    return result


async def telegram_check(request: web.Request) -> web.Response:
    """Ask Telegram who the bot with {"token": ...} is: its username, or why the token is refused."""
    body = await read_json(request)
    config = request.app[RUNTIME].config
    try:
        bot = await _get_me(config.telegram.api_base_url, str(body.get("token", "")).strip())
    except UsageError as exc:
        return json_error(400, exc.message, key="telegram.token", fix=exc.fix)
    return web.json_response({"ok": True, "bot": {"username": bot.get("username"), "name": bot.get("first_name")}})


async def telegram_pairing(request: web.Request) -> web.Response:
    """A one-time pairing code for the configured bot, as a t.me link (and its QR code): whoever opens it and
    presses Start may talk to the assistant."""
    import io

    import segno

    from appliance.channels.pairing import create_code

    runtime = request.app[RUNTIME]
    telegram = runtime.config.telegram
    if not telegram.enabled or not telegram.token:
        return json_error(409, "Telegram is not on yet", key="telegram.token", fix="save a token first")
    try:
        bot = await _get_me(telegram.api_base_url, telegram.token)
    except UsageError as exc:
        return json_error(400, exc.message, key="telegram.token", fix=exc.fix)
    code = await runtime.db.call(create_code, runtime.db, "telegram")
    link = f"https://t.me/{bot.get('username', '')}?start={code}"
    svg = io.BytesIO()
    segno.make(link, error="m").save(svg, kind="svg", scale=5, border=2, xmldecl=False)
    return web.json_response({"code": code, "link": link, "qr_svg": svg.getvalue().decode()})


async def telegram_paired(request: web.Request) -> web.Response:
    """Whether anyone has paired with the bot (the setup page waits for the owner's first message)."""
    from appliance.channels.pairing import paired_users

    runtime = request.app[RUNTIME]
    users = await runtime.db.call(paired_users, runtime.db, "telegram")
    return web.json_response({"paired": bool(users), "users": users})
