"""The login page and the login, logout and session routes.

Who may log in is auth.py's; how often and how many at once, login_guard.py's.
"""

from __future__ import annotations

import asyncio
import html
import logging
import math
import secrets
from functools import partial
from urllib.parse import urlsplit

from aiohttp import web

from appliance.channels.web.auth import (
    LOGIN_CSRF_COOKIE,
    SESSION_COOKIE,
    Auth,
    form_field,
    principal,
    redirect_to,
    same_secret,
)
from appliance.channels.web.login_guard import LoginGuard
from appliance.config.schema import WebConfig

log = logging.getLogger(__name__)

_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def _page(body: str, *, status: int, headers: dict[str, str] | None = None) -> web.Response:
    text = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        '<title>picoagent · sign in</title><link rel="stylesheet" href="/static/app.css"></head>'
        f'<body class="auth-page"><main><h1>picoagent</h1>{body}</main></body></html>'
    )
    headers = {**_PAGE_HEADERS, **(headers or {})}
    return web.Response(text=text, status=status, content_type="text/html", headers=headers)


_FIRST_RUN = (
    '<p class="first-run">First start: sign in with the one-time password. A screen attached to the Pi shows it, '
    "and so does <code>picoagent passwd --show-initial</code> on it; or use the <code>setup_code</code> you wrote into "
    "<code>picoagent-setup.yaml</code> on the card. A short setup follows, where you choose your own.</p>"
)


def _login_form(csrf: str, next_path: str, error: str = "", *, first_run: bool = False) -> str:
    message = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
    return (
        f'{_FIRST_RUN if first_run else ""}{message}<form method="post" action="/login">'
        '<label for="password">Password</label>'
        '<input id="password" name="password" type="password" autocomplete="current-password" required autofocus>'
        f'<input type="hidden" name="csrf" value="{html.escape(csrf)}">'
        f'<input type="hidden" name="next" value="{html.escape(next_path)}">'
        '<button type="submit">Sign in</button></form>'
    )


_NO_PASSWORD = (
    "<p>No web password has been set yet.</p>"
    "<p>On the appliance, run <code>picoagent passwd</code> to set one, then reload this page.</p>"
)


def safe_next(target: str | None) -> str:
    """``target`` when it is a path on this site, else ``/`` (no open redirects)."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/"
    # Browsers read a backslash as a slash (`/\evil.com`), and control characters can hide a scheme.
    if "\\" in target or any(ord(c) < 0x20 or ord(c) == 0x7F for c in target):
        return "/"
    parts = urlsplit(target)
    return target if not parts.scheme and not parts.netloc else "/"


def session_cookie(response: web.StreamResponse, auth: Auth, request: web.Request, session_id: str) -> None:
    """Give the browser its session (after a login, or after the setup set the password, which ends sessions)."""
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=auth.secure_cookies or request.secure,
        max_age=int(auth.session_ttl_s),
    )


def routes(auth: Auth, *, login_guard: LoginGuard | None = None) -> list[web.RouteDef]:
    """The login, logout and session routes; the middleware protects everything else."""
    guard = login_guard or LoginGuard(WebConfig.login_attempts_per_minute, WebConfig.login_attempts_per_minute_total)

    async def login_page(
        request: web.Request, csrf: str, next_path: str, *, status: int = 200, error: str = ""
    ) -> web.Response:
        first_run = await asyncio.to_thread(auth.first_run)
        response = _page(_login_form(csrf, next_path, error, first_run=first_run), status=status)
        # Double-submit cookie: a cross-site page can post the form but cannot read or set this cookie.
        secure = auth.secure_cookies or request.secure  # over HTTPS a cookie never goes back over plain HTTP
        response.set_cookie(LOGIN_CSRF_COOKIE, csrf, path="/login", httponly=True, samesite="Strict", secure=secure)
        return response

    def login_csrf(request: web.Request) -> str:
        current = request.cookies.get(LOGIN_CSRF_COOKIE, "")
        # Reuse a well-formed cookie so that two open login tabs both keep working.
        return current if 20 <= len(current) <= 100 and current.isascii() else secrets.token_urlsafe(32)

    async def get_login(request: web.Request) -> web.Response:
        if not await auth.db.call(auth.has_password):
            return _page(_NO_PASSWORD, status=503)
        return await login_page(request, login_csrf(request), safe_next(request.query.get("next")))

    async def post_login(request: web.Request) -> web.Response:
        client = request.remote or "unknown"
        refused = guard.admit(request.remote)
        if refused is not None:
            return _page(
                f"<p class='error' role='alert'>{html.escape(refused.message())}</p>",
                status=429,
                headers={"Retry-After": str(math.ceil(refused.wait_s))},
            )
        if not await auth.db.call(auth.has_password):
            return _page(_NO_PASSWORD, status=503)
        form = await request.post()
        next_path = safe_next(form_field(form, "next") or request.query.get("next"))
        cookie_csrf = request.cookies.get(LOGIN_CSRF_COOKIE, "")
        sent_csrf = form_field(form, "csrf")
        if not cookie_csrf or not sent_csrf or not same_secret(cookie_csrf, sent_csrf):
            error = "The login form expired or your browser refused its cookie. Please try again."
            return await login_page(request, login_csrf(request), next_path, status=403, error=error)
        # scrypt takes tens of milliseconds of CPU and 16 MiB: off the event loop, a few at a time.
        if not await guard.check(partial(auth.check_password, form_field(form, "password"))):
            log.warning("web login from %s: wrong password", client)
            return await login_page(request, cookie_csrf, next_path, status=401, error="wrong password")
        session_id, _ = await auth.db.call(auth.create_session)
        log.info("web login from %s", client)
        # The first sign-in, with the one-time password (or the card's setup code), goes on to the setup.
        first_run = await asyncio.to_thread(auth.first_run)
        response = redirect_to("/setup" if first_run else next_path)
        session_cookie(response, auth, request, session_id)
        response.del_cookie(LOGIN_CSRF_COOKIE, path="/login")
        return response

    async def post_logout(request: web.Request) -> web.Response:
        session_id = request.cookies.get(SESSION_COOKIE)
        if session_id:
            await auth.db.call(auth.end_session, session_id)
        response = redirect_to("/login")
        response.del_cookie(SESSION_COOKIE, path="/")
        return response

    async def get_session(request: web.Request) -> web.Response:
        found = principal(request)
        if found is None:  # only when mounted without the middleware
            return web.json_response({"authenticated": False, "login": "/login"}, status=401)
        return web.json_response(
            {"authenticated": True, "kind": found.kind, "name": found.name, "scope": found.scope, "csrf": found.csrf},
            headers={"Cache-Control": "no-store"},
        )

    return [
        web.get("/login", get_login),
        web.post("/login", post_login),
        web.post("/logout", post_logout),
        web.get("/api/session", get_session),
    ]
