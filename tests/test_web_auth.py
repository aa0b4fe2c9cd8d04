"""Web authentication: password, sessions, API tokens, CSRF, login rate limit, redirects, websocket origin.

Each test serves a tiny app (the real middleware and login routes, fake protected handlers) on a real
socket with aiohttp's TestServer, against a real database in tmp_path.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import re
import sqlite3
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web import auth as auth_module
from appliance.channels.web.auth import (
    CSRF_HEADER,
    LOGIN_CSRF_COOKIE,
    SESSION_COOKIE,
    Auth,
    Principal,
    middleware,
    principal,
)
from appliance.channels.web.login import routes, safe_next
from appliance.channels.web.login_guard import SCRYPT_SLOTS, LoginGuard, client_key
from appliance.errors import UsageError
from appliance.memory.db import Database
from appliance.ratelimit import RateLimiter
from tests.fakes.clock import ManualClock
from tests.helpers import eventually

PASSWORD = "correct horse battery"


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)


class Clock(ManualClock):
    start = 1_000_000.0


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "picoagent.db"


@pytest.fixture
def db(db_path: Path) -> Iterator[Database]:
    database = Database(db_path)
    yield database
    database.close()


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


# --- password ----------------------------------------------------------------------------------


def test_the_password_is_stored_as_salted_scrypt(auth: Auth, db: Database) -> None:
    stored = db.value("SELECT value FROM settings WHERE key = 'web.password'")
    scheme, n, r, p, salt, digest = stored.split("$")
    assert (scheme, n, r, p) == ("scrypt", str(2**14), "8", "1")
    assert len(base64.b64decode(salt)) == 16
    assert base64.b64decode(digest) == hashlib.scrypt(
        PASSWORD.encode(), salt=base64.b64decode(salt), n=2**14, r=8, p=1, maxmem=64 << 20, dklen=32
    )
    assert auth.has_password()
    assert auth.check_password(PASSWORD)
    assert not auth.check_password(PASSWORD + "!")
    assert not auth.check_password("")
    auth.set_password(PASSWORD)
    again = db.value("SELECT value FROM settings WHERE key = 'web.password'")
    assert again != stored  # a fresh salt every time


def test_a_short_password_is_refused_with_the_rule(db: Database) -> None:
    auth = Auth(db)
    assert not auth.has_password()
    assert not auth.check_password("anything")
    with pytest.raises(UsageError) as info:
        auth.set_password("1234567")
    assert "at least 8 characters" in str(info.value) and info.value.fix
    assert not auth.has_password()
    auth.set_password("12345678")
    assert auth.check_password("12345678")


def test_the_password_compare_is_constant_time(auth: Auth, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, object]] = []
    original = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert not auth.check_password("not it at all")
    assert len(calls) == 1 and isinstance(calls[0][0], bytes)


def test_generated_passwords_are_readable_and_accepted(db: Database) -> None:
    first, second = Auth.generate_password(), Auth.generate_password()
    assert first != second and len(first) == 16 and re.fullmatch(r"[A-Za-z0-9_-]+", first)
    Auth(db).set_password(first)


def test_a_new_password_ends_every_session(auth: Auth) -> None:
    session_id, _ = auth.create_session()
    auth.set_password("another password")
    assert auth.session(session_id) is None


# --- login -------------------------------------------------------------------------------------


def test_login_sets_a_strict_httponly_session_cookie_and_redirects(auth: Auth) -> None:
    async def scenario() -> None:
        async with served(auth) as client:
            resp = await post_login(client, PASSWORD, next_path="/chat?x=1")
            assert resp.status == 302
            assert resp.headers["Location"] == "/chat?x=1"
            cookie = next(c for c in resp.headers.getall("Set-Cookie") if c.startswith(SESSION_COOKIE + "="))
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
            assert f"Max-Age={7 * 86400}" in cookie and "Secure" not in cookie
            # The jar now holds the session: protected things open.
            resp = await client.get("/api/thing")
            assert resp.status == 200 and (await resp.json())["kind"] == "session"

    run(scenario())


def test_secure_cookies_when_asked(db: Database) -> None:
    auth = Auth(db, secure_cookies=True)
    auth.set_password(PASSWORD)

    async def scenario() -> None:
        async with served(auth) as client:
            resp = await client.get("/login")
            csrf = resp.cookies[LOGIN_CSRF_COOKIE].value
            assert "Secure" in resp.headers["Set-Cookie"]
            # The client's jar rightly keeps Secure cookies off plain http, so send it by hand.
            resp = await client.post(
                "/login",
                data={"password": PASSWORD, "csrf": csrf},
                headers={"Cookie": f"{LOGIN_CSRF_COOKIE}={csrf}"},
                allow_redirects=False,
            )
            assert resp.status == 302
            cookie = next(c for c in resp.headers.getall("Set-Cookie") if c.startswith(SESSION_COOKIE + "="))
            assert "Secure" in cookie

    run(scenario())


def test_the_login_page_is_self_contained(auth: Auth) -> None:
    async def scenario() -> None:
        async with served(auth) as client:
            resp = await client.get("/login?next=/chat")
            body = await resp.text()
            assert resp.status == 200 and resp.headers["Cache-Control"] == "no-store"
            assert 'type="password"' in body and 'name="next" value="/chat"' in body
            assert "http://" not in body and "https://" not in body and "<script" not in body
            assert "frame-ancestors 'none'" in resp.headers["Content-Security-Policy"]
            cookie = next(c for c in resp.headers.getall("Set-Cookie") if c.startswith(LOGIN_CSRF_COOKIE))
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie

    run(scenario())


def test_a_wrong_password_redisplays_the_form_with_401(auth: Auth) -> None:
    async def scenario() -> None:
        async with served(auth) as client:
            resp = await post_login(client, "wrong password!")
            assert resp.status == 401
            body = await resp.text()
            assert "wrong password" in body and 'type="password"' in body
            assert not any(c.startswith(SESSION_COOKIE) for c in resp.headers.getall("Set-Cookie", []))

    run(scenario())


def test_a_login_post_without_the_form_cookie_is_refused(auth: Auth) -> None:
    async def scenario() -> None:
        async with served(auth) as client:
            # A cross-site page can post the form but cannot know or set the pa_login_csrf cookie.
            resp = await client.post("/login", data={"password": PASSWORD, "csrf": "x" * 43}, allow_redirects=False)
            assert resp.status == 403
            await login_form(client)
            resp = await post_login(client, PASSWORD, csrf="y" * 43)
            assert resp.status == 403

    run(scenario())


@pytest.mark.parametrize(
    "target", ["//evil.com", "https://evil.com", "/\\evil.com", "javascript:alert(1)", "evil.com", "/\tx", ""]
)
def test_login_never_redirects_off_site(auth: Auth, target: str) -> None:
    async def scenario() -> None:
        async with served(auth) as client:
            resp = await post_login(client, PASSWORD, next_path=target)
            assert resp.status == 302 and resp.headers["Location"] == "/"

    run(scenario())


def test_safe_next_keeps_local_paths() -> None:
    assert safe_next("/chat") == "/chat"
    assert safe_next("/api/status?x=1#y") == "/api/status?x=1#y"
    assert safe_next("///evil.com") == "/"
    assert safe_next(None) == "/"


def test_login_without_a_password_set_says_how_to_set_one(db: Database) -> None:
    auth = Auth(db)

    async def scenario() -> None:
        async with served(auth) as client:
            for resp in (
                await client.get("/login"),
                await client.post("/login", data={"password": "whatever1"}, allow_redirects=False),
            ):
                assert resp.status == 503
                assert "picoagent passwd" in await resp.text()

    run(scenario())


def test_login_is_rate_limited_with_retry_after(auth: Auth) -> None:
    clock = Clock()
    guard = LoginGuard(5, 30, clock=clock)

    async def scenario() -> None:
        async with served(auth, guard) as client:
            for _ in range(5):
                assert (await post_login(client, "wrong password!")).status == 401
            clock.now += 10
            resp = await post_login(client, PASSWORD)  # even the right one waits
            assert resp.status == 429
            assert resp.headers["Retry-After"] == "50"
            clock.now += 50
            assert (await post_login(client, PASSWORD)).status == 302

    run(scenario())


@web.middleware
async def remote_from_header(request: web.Request, handler: Any) -> web.StreamResponse:
    """Stands in for many hosts: this machine has one IPv6 address (::1), a home network's /64 has 2**64."""
    return await handler(request.clone(remote=request.headers.get("X-Test-Remote", request.remote)))


def test_addresses_in_one_ipv6_64_share_a_login_limit(auth: Auth) -> None:
    app = web.Application(middlewares=[remote_from_header, middleware(auth)])
    app.add_routes(routes(auth))  # the default: 5 attempts a minute per address

    async def scenario() -> None:
        async with TestClient(TestServer(app)) as client:

            async def attempt(remote: str) -> int:
                csrf = await login_form(client)
                data = {"password": "wrong password", "csrf": csrf}
                response = await client.post("/login", data=data, headers={"X-Test-Remote": remote})
                return response.status

            # Rotating the last 64 bits (privacy addresses, or an attacker's whole /64) is one address.
            rotated = ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:a::3", "2001:db8:1:2:ffff::4"]
            assert [await attempt(remote) for remote in rotated] == [401] * 4
            assert await attempt("2001:db8:1:2:ffff:ffff:ffff:ffff") == 401
            assert await attempt("2001:db8:1:2:1234::99") == 429
            assert await attempt("2001:db8:1:3::1") == 401  # the next /64 is another network

    run(scenario())


class HeldScrypt:
    """verify_password held until ``release`` is set: how many runs are inside now, and the most at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.inside = self.most = 0
        self.count = threading.Lock()
        self.release = threading.Event()
        self.real_verify = auth_module.verify_password
        monkeypatch.setattr(auth_module, "verify_password", self.verify)

    def verify(self, password: str, encoded: str) -> bool:
        with self.count:
            self.inside += 1
            self.most = max(self.most, self.inside)
        self.release.wait()  # every run that got in stays in until the test has looked
        try:
            return self.real_verify(password, encoded)
        finally:
            with self.count:
                self.inside -= 1


def test_concurrent_logins_run_at_most_two_scrypt_at_once(auth: Auth, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each scrypt run holds 16 MiB: parallel logins wait for a slot instead of all running at once."""
    logins = 6  # as many as the default thread pool runs at once on this 2-core machine
    guard = LoginGuard(100, 100)
    held = HeldScrypt(monkeypatch)

    async def scenario() -> None:
        async with served(auth, guard) as client:
            csrf = await login_form(client)
            posts = [asyncio.ensure_future(post_login(client, "wrong password!", csrf=csrf)) for _ in range(logins)]
            try:
                # each login is in scrypt or waits for a slot
                await eventually(lambda: held.inside + guard.waiting >= logins, what="every login in or waiting")
                assert (held.most, guard.waiting) == (SCRYPT_SLOTS, logins - SCRYPT_SLOTS) == (2, 4)
            finally:
                held.release.set()
            assert [r.status for r in await asyncio.gather(*posts)] == [401] * logins
            assert held.most == SCRYPT_SLOTS and guard.waiting == 0

    run(scenario())


def test_a_login_whose_client_hangs_up_keeps_its_scrypt_slot_until_scrypt_ends(
    auth: Auth, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread cannot be stopped: freeing the slot when the client goes away would let hang-ups pile up runs."""
    guard = LoginGuard(100, 100)
    held = HeldScrypt(monkeypatch)
    cancelled = asyncio.Event()

    @web.middleware
    async def note_cancel(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            return await handler(request)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    app = web.Application(middlewares=[note_cancel, middleware(auth)])
    app.add_routes(routes(auth, login_guard=guard))

    async def scenario() -> None:
        async with TestClient(TestServer(app)) as client:
            csrf = await login_form(client)
            gone = asyncio.ensure_future(post_login(client, "wrong password!", csrf=csrf))
            try:
                await eventually(lambda: held.inside >= 1, what="the login's scrypt run")
                gone.cancel()  # the client hangs up while its scrypt runs
                await cancelled.wait()
                more = [asyncio.ensure_future(post_login(client, "wrong password!", csrf=csrf)) for _ in range(2)]
                await eventually(lambda: held.inside + guard.waiting >= 3, what="three logins in or waiting")
                assert (held.most, guard.waiting) == (2, 1)  # the hung-up run still holds its slot
            finally:
                held.release.set()
            assert [r.status for r in await asyncio.gather(*more)] == [401, 401]

    run(scenario())


def test_login_limits_key_ipv6_by_64_and_ipv4_by_address() -> None:
    assert client_key("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == client_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("fe80::1%eth0") == "fe80::/64"
    assert client_key("::ffff:192.0.2.7") == client_key("192.0.2.7") == "192.0.2.7"  # a v4 client on a v6 socket
    assert client_key("192.0.2.8") != client_key("192.0.2.7")
    assert client_key(None) == client_key("") == "unknown"


def test_logout_needs_csrf_and_ends_the_session(auth: Auth) -> None:
    async def scenario() -> None:
        session_id, csrf = auth.create_session()
        async with served(auth) as client:
            resp = await client.post("/logout", headers=session_cookie(session_id), allow_redirects=False)
            assert resp.status == 403
            resp = await client.post(
                "/logout", headers={**session_cookie(session_id), CSRF_HEADER: csrf}, allow_redirects=False
            )
            assert resp.status == 302 and resp.headers["Location"] == "/login"
            assert any(c.startswith(SESSION_COOKIE + '=""') for c in resp.headers.getall("Set-Cookie"))
            resp = await client.get("/api/thing", headers=session_cookie(session_id))
            assert resp.status == 401

    run(scenario())


# --- the middleware ----------------------------------------------------------------------------


def test_unauthenticated_api_gets_401_json_and_pages_a_redirect(auth: Auth) -> None:
    async def scenario() -> None:
        async with served(auth) as client:
            for path in ("/api/thing", "/ws", "/api/session"):
                resp = await client.get(path)
                assert resp.status == 401
                assert await resp.json() == {"error": "authentication required", "login": "/login"}
                assert resp.headers["WWW-Authenticate"].startswith("Bearer")
            resp = await client.get("/", allow_redirects=False)
            assert resp.status == 302 and resp.headers["Location"] == "/login?next=/"
            resp = await client.get("/chat?a=1&b=2", allow_redirects=False)
            assert resp.headers["Location"] == "/login?next=/chat%3Fa%3D1%26b%3D2"
            resp = await client.post("/api/thing", allow_redirects=False)
            assert resp.status == 401

    run(scenario())


def test_public_paths_need_no_login(auth: Auth) -> None:
    async def scenario() -> None:
        async with served(auth) as client:
            for path in ("/healthz", "/metrics", "/login"):
                assert (await client.get(path, allow_redirects=False)).status == 200, path
            assert (await client.get("/static/app.css")).status == 404  # passed through to the router

    run(scenario())


def test_a_session_cookie_grants_access_and_unsafe_methods_need_csrf(auth: Auth) -> None:
    async def scenario() -> None:
        session_id, csrf = auth.create_session()
        cookie = session_cookie(session_id)
        async with served(auth) as client:
            resp = await client.get("/", headers=cookie)
            assert resp.status == 200 and await resp.text() == "status page"
            resp = await client.get("/api/session", headers=cookie)
            assert await resp.json() == {
                "authenticated": True,
                "kind": "session",
                "name": "owner",
                "scope": "admin",
                "csrf": csrf,
            }
            resp = await client.post("/api/thing", headers=cookie, json={})
            assert resp.status == 403
            assert await resp.json() == {"error": "missing or wrong CSRF token"}
            resp = await client.post("/api/thing", headers={**cookie, CSRF_HEADER: "nope"}, json={})
            assert resp.status == 403
            resp = await client.post("/api/thing", headers={**cookie, CSRF_HEADER: "é" * 10}, json={})
            assert resp.status == 403
            resp = await client.post("/api/thing", headers={**cookie, CSRF_HEADER: csrf}, json={})
            assert resp.status == 200 and (await resp.json())["posted"] is True
            # An HTML form posts the token as a field.
            resp = await client.post("/api/thing", headers=cookie, data={"csrf": csrf})
            assert resp.status == 200
            resp = await client.post("/api/thing", headers=cookie, data={"csrf": "nope"})
            assert resp.status == 403

    run(scenario())


def test_a_bearer_token_works_without_csrf_until_revoked(auth: Auth) -> None:
    async def scenario() -> None:
        token = auth.add_token("home-assistant", scope="admin")
        bearer = {"Authorization": f"Bearer {token}"}
        async with served(auth) as client:
            resp = await client.get("/api/thing", headers=bearer)
            assert resp.status == 200 and await resp.json() == {"thing": 1, "kind": "token", "name": "home-assistant"}
            resp = await client.post("/api/thing", headers=bearer, json={})
            assert resp.status == 200
            resp = await client.get("/api/session", headers=bearer)
            assert (await resp.json())["csrf"] is None
            for wrong in (f"Bearer {token}x", "Bearer ", f"Basic {token}"):
                resp = await client.get("/api/thing", headers={"Authorization": wrong})
                assert resp.status == 401, wrong
                assert "invalid_token" in resp.headers["WWW-Authenticate"]
            assert auth.revoke_token("home-assistant")
            resp = await client.get("/api/thing", headers=bearer)
            assert resp.status == 401

    run(scenario())


def test_a_token_may_use_only_the_routes_its_scope_names(auth: Auth) -> None:
    async def scenario() -> None:
        chat = {"Authorization": f"Bearer {auth.add_token('chatty')}"}  # the default scope
        async with served(auth) as client:
            resp = await client.get("/api/session", headers=chat)
            assert resp.status == 200 and (await resp.json())["scope"] == "chat"
            # /api/thing is in no row of the table: only admin may use a route nobody decided about.
            resp = await client.post("/api/thing", headers=chat, json={})
            assert resp.status == 403
            body = await resp.json()
            assert body["error"] == "the API token 'chatty' may chat only; POST /api/thing needs the admin scope"
            assert "picoagent tokens add NAME --scope admin" in body["fix"]
            assert "picoagent tokens scope chatty admin" in body["fix"]
            assert (body["scope"], body["needed"]) == ("chat", "admin")
            assert (await client.get("/nowhere", headers=chat)).status == 404  # no route: no scope to name
            assert auth.set_token_scope("chatty", "admin")
            assert (await client.post("/api/thing", headers=chat, json={})).status == 200
            assert not auth.set_token_scope("nobody", "chat")
            with pytest.raises(UsageError) as info:
                auth.set_token_scope("chatty", "root")
            assert "unknown token scope 'root'" in info.value.message and "devices (" in (info.value.fix or "")

    run(scenario())


def test_a_bad_bearer_token_does_not_fall_back_to_the_cookie(auth: Auth) -> None:
    async def scenario() -> None:
        session_id, _ = auth.create_session()
        async with served(auth) as client:
            headers = {**session_cookie(session_id), "Authorization": "Bearer pat_nope"}
            assert (await client.get("/api/thing", headers=headers)).status == 401

    run(scenario())


def test_an_expired_session_is_refused_and_deleted(db: Database) -> None:
    clock = Clock()
    auth = Auth(db, session_ttl_s=3600, clock=clock)
    auth.set_password(PASSWORD)

    async def scenario() -> None:
        session_id, _ = auth.create_session()
        async with served(auth) as client:
            clock.now += 3599
            assert (await client.get("/api/thing", headers=session_cookie(session_id))).status == 200
            clock.now += 1
            assert (await client.get("/api/thing", headers=session_cookie(session_id))).status == 401
            resp = await client.get("/", headers=session_cookie(session_id), allow_redirects=False)
            assert resp.status == 302
        assert db.value("SELECT count(*) FROM web_sessions") == 0

    run(scenario())


def test_sessions_survive_a_restart(db_path: Path) -> None:
    first = Database(db_path)
    auth = Auth(first)
    auth.set_password(PASSWORD)
    session_id, csrf = auth.create_session()
    first.close()

    second = Database(db_path)
    try:
        again = Auth(second)
        found = again.session(session_id)
        assert found is not None and found.csrf == csrf

        async def scenario() -> None:
            async with served(again) as client:
                assert (await client.get("/api/thing", headers=session_cookie(session_id))).status == 200

        run(scenario())
    finally:
        second.close()


def test_a_websocket_needs_our_own_origin_with_a_session(auth: Auth) -> None:
    async def scenario() -> None:
        session_id, _ = auth.create_session()
        cookie = session_cookie(session_id)
        async with served(auth) as client:
            ours = f"http://{client.host}:{client.port}"
            for origin in ("http://evil.example", f"http://{client.host}:1", "null", f"https://{client.host}"):
                with pytest.raises(aiohttp.WSServerHandshakeError) as info:
                    await client.ws_connect("/ws", headers={**cookie, "Origin": origin})
                assert info.value.status == 403, origin
            with pytest.raises(aiohttp.WSServerHandshakeError) as info:
                await client.ws_connect("/ws", headers=cookie)  # no Origin at all
            assert info.value.status == 403
            ws = await client.ws_connect("/ws", headers={**cookie, "Origin": ours})
            await ws.send_str("hello")
            assert await ws.receive_str() == "hello"
            await ws.close()
            # A token is no ambient credential: no Origin needed.
            token = auth.add_token("script")
            ws = await client.ws_connect("/ws", headers={"Authorization": f"Bearer {token}"})
            await ws.send_str("hi")
            assert await ws.receive_str() == "hi"
            await ws.close()
            with pytest.raises(aiohttp.WSServerHandshakeError) as info:
                await client.ws_connect("/ws", headers={"Origin": ours})
            assert info.value.status == 401

    run(scenario())


# --- tokens and storage ------------------------------------------------------------------------


def test_tokens_are_listed_without_their_secret(db: Database) -> None:
    clock = Clock()
    auth = Auth(db, clock=clock)
    token = auth.add_token("ha")
    assert token.startswith("pat_") and len(token) > 40
    with pytest.raises(UsageError) as info:
        auth.add_token("ha")
    assert "already exists" in str(info.value) and info.value.fix
    with pytest.raises(UsageError):
        auth.add_token("  ")
    [listed] = auth.list_tokens()
    assert (listed.name, listed.created_at, listed.last_used_at) == ("ha", clock.now, None)
    assert token not in repr(auth.list_tokens())
    assert not auth.revoke_token("nobody")


def test_token_use_is_noted_at_most_once_a_minute(db: Database) -> None:
    clock = Clock()
    auth = Auth(db, clock=clock)
    token = auth.add_token("ha")
    start = clock.now
    assert auth.check_token(token) is not None
    clock.now += 30
    assert auth.check_token("pat_wrong") is None
    info = auth.check_token(token)
    assert info is not None and info.last_used_at == start
    clock.now += 30
    info = auth.check_token(token)
    assert info is not None and info.last_used_at == start + 60
    assert auth.list_tokens()[0].last_used_at == start + 60


def test_secrets_are_stored_only_hashed(db_path: Path) -> None:
    db = Database(db_path)
    auth = Auth(db)
    auth.set_password(PASSWORD)
    token = auth.add_token("ha")
    session_id, _ = auth.create_session()

    def stored_bytes() -> bytes:
        return b"".join(p.read_bytes() for p in db_path.parent.iterdir() if p.name.startswith(db_path.name))

    def assert_only_hashes() -> None:
        data = stored_bytes()
        for secret in (PASSWORD, token, session_id):
            assert secret.encode() not in data
        # The scan does see the rows: the hashes are there.
        assert hashlib.sha256(token.encode()).hexdigest().encode() in data
        assert hashlib.sha256(session_id.encode()).hexdigest().encode() in data

    assert_only_hashes()  # database and WAL while open
    db.close()
    assert_only_hashes()  # after the checkpoint
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT count(*) FROM api_tokens").fetchone()[0] == 1
    conn.close()


# --- the rate limiter --------------------------------------------------------------------------


def test_the_rate_limiter_slides_and_keeps_keys_apart() -> None:
    clock = Clock(0.0)
    limiter = RateLimiter(5, 60.0, clock=clock)
    for second in range(5):
        clock.now = float(second)
        assert limiter.hit("10.0.0.1") == 0
    clock.now = 10.0
    assert limiter.hit("10.0.0.1") == pytest.approx(50.0)
    assert limiter.hit("10.0.0.2") == 0  # another address is unaffected
    clock.now = 60.5  # the first hit (at 0) left the window; the one at 1 has not
    assert limiter.hit("10.0.0.1") == 0
    assert limiter.hit("10.0.0.1") == pytest.approx(0.5)


def test_the_rate_limiter_forgets_old_keys() -> None:
    clock = Clock(0.0)
    limiter = RateLimiter(2, 10.0, clock=clock, max_keys=100)
    for n in range(50):
        limiter.hit(f"a{n}")
    clock.now = 11.0
    limiter.hit("b")
    assert len(limiter._hits) == 1  # the stale keys went
    for n in range(500):
        limiter.hit(f"c{n}")
    assert len(limiter._hits) == 100  # bounded even under a flood of fresh keys
    with pytest.raises(ValueError):
        RateLimiter(0, 10.0)


def test_module_constants() -> None:
    assert sorted(auth_module.PUBLIC_PATHS) == [
        "/healthz",
        "/login",
        "/metrics",
        "/telegram/webhook",
        "/whatsapp/webhook",
    ]
    # A webhook bridge's route is public (its signature is checked there); nothing else under /api/ is.
    public = auth_module._is_public
    assert public("/api/webhook/home_assistant")
    assert not any(public(p) for p in ("/api/webhook/", "/api/webhook/a/b", "/api/webhook/..", "/api/status"))
    assert (SESSION_COOKIE, CSRF_HEADER, auth_module.STATIC_PREFIX) == ("pa_session", "X-CSRF-Token", "/static/")
