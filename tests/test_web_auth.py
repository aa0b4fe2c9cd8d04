"""Web authentication: password, sessions, API tokens, CSRF, the middleware, websocket origin, the rate limiter
(the login form, its rate limit and redirects: tests/test_web_login.py).

Each test serves a tiny app (tests/web_auth_app.py: the real middleware and login routes, fake protected
handlers) on a real socket with aiohttp's TestServer, against a real database in tmp_path.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from appliance.channels.web import auth as auth_module
from appliance.channels.web.auth import (
    CSRF_HEADER,
    SESSION_COOKIE,
    Auth,
)
from appliance.errors import UsageError
from appliance.memory.db import Database
from appliance.ratelimit import RateLimiter
from tests import web_auth_app
from tests.web_auth_app import (
    PASSWORD,
    Clock,
    run,
    served,
    session_cookie,
)

auth = web_auth_app.auth  # the shared fixture, taken by this module's tests
db_path = web_auth_app.db_path  # the shared fixture, taken by this module's tests

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
