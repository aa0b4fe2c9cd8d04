"""Web login: the form and its cookie, redirects that stay on site, the rate limit (per address, IPv6 by /64),
scrypt slots, logout. The tiny app the tests serve is tests/web_auth_app.py."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web import auth as auth_module
from appliance.channels.web.auth import (
    CSRF_HEADER,
    LOGIN_CSRF_COOKIE,
    SESSION_COOKIE,
    Auth,
    middleware,
)
from appliance.channels.web.login import routes, safe_next
from appliance.channels.web.login_guard import SCRYPT_SLOTS, LoginGuard, client_key
from appliance.memory.db import Database
from tests import web_auth_app
from tests.helpers import eventually
from tests.web_auth_app import (
    PASSWORD,
    Clock,
    login_form,
    post_login,
    run,
    served,
    session_cookie,
)

auth = web_auth_app.auth  # the shared fixture, taken by this module's tests


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
