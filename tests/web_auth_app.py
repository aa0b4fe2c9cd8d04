"""The web authentication suites' tiny app: the real middleware and login routes, fake protected handlers,
served on a real socket with aiohttp's TestServer, against a real database in tmp_path; the owner's password
set (tests/test_web_auth.py, tests/test_web_login.py)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.auth import (
    SESSION_COOKIE,
    Auth,
    Principal,
    middleware,
    principal,
)
from appliance.channels.web.login import routes
from appliance.channels.web.login_guard import LoginGuard
from appliance.memory.db import Database
from tests.fakes.clock import ManualClock

PASSWORD = "correct horse battery"


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)


class Clock(ManualClock):
    start = 1_000_000.0


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "picoagent.db"


@pytest.fixture
def auth(db: Database) -> Auth:
    a = Auth(db)
    a.set_password(PASSWORD)
    return a


# --- the tiny app ------------------------------------------------------------------------------


def whoami(request: web.Request) -> dict[str, Any]:
    found = principal(request)
    assert isinstance(found, Principal)
    return {"kind": found.kind, "name": found.name}


async def page(request: web.Request) -> web.Response:
    return web.Response(text="status page", content_type="text/html")


async def get_thing(request: web.Request) -> web.Response:
    return web.json_response({"thing": 1, **whoami(request)})


async def post_thing(request: web.Request) -> web.Response:
    return web.json_response({"posted": True, **whoami(request)})


async def ws_echo(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    async for msg in ws:
        if msg.type == aiohttp.WSMsgType.TEXT:
            await ws.send_str(msg.data)
    return ws


async def ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def make_app(auth: Auth, guard: LoginGuard | None = None) -> web.Application:
    app = web.Application(middlewares=[middleware(auth)])
    app.add_routes(routes(auth, login_guard=guard))
    app.add_routes(
        [
            web.get("/", page),
            web.get("/api/thing", get_thing),
            web.post("/api/thing", post_thing),
            web.get("/ws", ws_echo),
            web.get("/healthz", ok),
            web.get("/metrics", ok),
        ]
    )
    return app


@asynccontextmanager
async def served(auth: Auth, guard: LoginGuard | None = None) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(make_app(auth, guard))) as client:
        yield client


def session_cookie(session_id: str) -> dict[str, str]:
    return {"Cookie": f"{SESSION_COOKIE}={session_id}"}


async def login_form(client: TestClient[Any, Any], query: str = "") -> str:
    """GET /login and return the form's csrf value (its cookie is now in the client's jar)."""
    resp = await client.get("/login" + query)
    assert resp.status == 200
    body = await resp.text()
    match = re.search(r'name="csrf" value="([^"]+)"', body)
    assert match
    return match.group(1)


async def post_login(
    client: TestClient[Any, Any], password: str, *, next_path: str = "/", csrf: str | None = None
) -> aiohttp.ClientResponse:
    token = csrf if csrf is not None else await login_form(client)
    return await client.post(
        "/login", data={"password": password, "csrf": token, "next": next_path}, allow_redirects=False
    )
