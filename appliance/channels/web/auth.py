"""Who may use the web face: the owner's password, login sessions, API tokens, CSRF and the login page.

Secrets are stored only hashed: the password with scrypt (slow, salted), session ids and API tokens with
sha256 (they are 256 random bits, so a fast hash is enough). Sessions live in the database, so a daemon
restart does not log the owner out. Browsers authenticate with a cookie and must echo a CSRF token on
every unsafe request; scripts send ``Authorization: Bearer pat_...`` and need no CSRF token, because
nothing sends a bearer token on their behalf. A token may do what its scope allows (scopes.py holds the
one table of routes and scopes); the owner's browser session may do everything. How often and how many
at once the password may be tried is login_guard.py's; the login page and its routes are login.py's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from multidict import MultiDictProxy
from yarl import URL

from appliance.channels.web.http import json_error
from appliance.channels.web.scopes import (
    DEFAULT_SCOPE,
    SCOPE_HELP,
    SCOPE_MAY,
    Scope,
    allows,
    needed_scope,
    parse_scope,
    widened,
)
from appliance.errors import PicoagentError, UsageError
from appliance.fileio import write_atomic
from appliance.memory.db import Database

log = logging.getLogger(__name__)

SESSION_COOKIE = "pa_session"
LOGIN_CSRF_COOKIE = "pa_login_csrf"
CSRF_HEADER = "X-CSRF-Token"
# /telegram/webhook is authenticated by Telegram's secret token header instead (see telegram_hook);
# /whatsapp/webhook and each bridge's /api/webhook/NAME by their signatures (see hooks).
PUBLIC_PATHS = frozenset({"/healthz", "/metrics", "/login", "/telegram/webhook", "/whatsapp/webhook"})
BRIDGE_PREFIX = "/api/webhook/"
STATIC_PREFIX = "/static/"
# Request key the middleware stores the Principal under (read it with principal(request)).

MIN_PASSWORD_LENGTH = 8
PASSWORD_SETTING = "web.password"
# The first password, made at the first start, is kept here (0600, in the data dir) and never logged;
# `picoagent passwd --show-initial` reads it, and setting a password deletes it.
INITIAL_PASSWORD_FILE = "initial-password"
# scrypt at n=2**14, r=8 costs 16 MiB and tens of milliseconds: affordable on a Pi Zero 2 W, slow to guess.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
SCRYPT_MAXMEM = 64 * 1024 * 1024
TOKEN_PREFIX = "pat_"
# last_used_at is informational; writing it on every request would wear the SD card for nothing.
TOKEN_TOUCH_INTERVAL_S = 60.0
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


@dataclass(frozen=True)
class Session:
    """A live login session."""

    csrf: str
    expires_at: float


@dataclass(frozen=True)
class TokenInfo:
    """An API token's public facts; the token itself is never kept."""

    name: str
    created_at: float
    last_used_at: float | None
    scope: Scope


@dataclass(frozen=True)
class Principal:
    """Who made a request: the owner's browser session or a named API token, and what it may do."""

    kind: Literal["session", "token"]
    name: str
    scope: Scope
    csrf: str | None = None


AUTH_KEY = web.RequestKey("auth", Principal)


def _sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def same_secret(a: str, b: str) -> bool:
    # compare_digest refuses non-ASCII str; headers and form fields may carry any characters.
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """The stored form of a password: ``scrypt$n$r$p$salt_b64$hash_b64``."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    derived = hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, maxmem=SCRYPT_MAXMEM, dklen=32
    )
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(derived)}"


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``password`` matches a stored ``scrypt$...`` hash (constant-time compare)."""
    try:
        scheme, n, r, p, salt_b64, hash_b64 = encoded.split("$")
        if scheme != "scrypt":
            raise ValueError(f"unknown scheme {scheme!r}")
        salt, expected = base64.b64decode(salt_b64, validate=True), base64.b64decode(hash_b64, validate=True)
        derived = hashlib.scrypt(
            password.encode("utf-8"),
            salt=salt,
            n=int(n),
            r=int(r),
            p=int(p),
            maxmem=SCRYPT_MAXMEM,
            dklen=len(expected),
        )
    except (ValueError, MemoryError) as exc:
        log.warning("the stored web password hash is unreadable (%s); set a new one with `picoagent passwd`", exc)
        return False
    return hmac.compare_digest(derived, expected)


@dataclass(eq=False)
class Auth:
    """The web face's credentials, kept in the appliance's database."""

    db: Database
    _: KW_ONLY
    session_ttl_s: float = 7 * 86400
    secure_cookies: bool = False
    # Wall-clock time: expiry instants are stored and must mean the same after a restart.
    clock: Callable[[], float] = time.time

    # --- password --------------------------------------------------------------------------------

    def has_password(self) -> bool:
        """Whether the owner's web password has been set."""
        return bool(self.db.rows("SELECT 1 FROM settings WHERE key = ?", (PASSWORD_SETTING,)))

    def set_password(self, password: str) -> None:
        """Set the owner's web password; every browser session ends with the old one."""
        if len(password) < MIN_PASSWORD_LENGTH:
            raise UsageError(
                f"the web password must be at least {MIN_PASSWORD_LENGTH} characters long",
                fix="choose a longer one (a few words make a good password)",
            )
        self._store_password(password)
        # Once the owner chose a password, the copy of the first one must not outlive it.
        try:
            self.initial_password_path.unlink(missing_ok=True)
        except OSError as exc:
            raise PicoagentError(
                f"the password is set, but the first one's copy {self.initial_password_path} stays: {exc.strerror}",
                fix="delete that file by hand",
            ) from None

    def _store_password(self, password: str) -> None:
        encoded = hash_password(password)
        first = not self.has_password()
        with self.db.transaction() as conn:
            # Whoever knew the old password may hold a session: a new password is the way to evict them.
            # One transaction: a failed write never leaves old sessions alive beside a new password.
            conn.execute("DELETE FROM web_sessions")
            conn.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (PASSWORD_SETTING, encoded),
            )
        log.info("web password set" if first else "web password changed; browser sessions ended")

    def check_password(self, password: str) -> bool:
        """Whether ``password`` is the owner's web password (False when none is set)."""
        rows = self.db.rows("SELECT value FROM settings WHERE key = ?", (PASSWORD_SETTING,))
        return bool(rows) and verify_password(password, str(rows[0][0]))

    @staticmethod
    def generate_password() -> str:
        """A fresh random password, 16 URL-safe characters (96 bits)."""
        return secrets.token_urlsafe(12)

    def first_run(self) -> bool:
        """Whether the appliance has no owner yet: the password in use is still the one-time one the first start
        made (or the card's setup code), which the setup page replaces."""
        return self.initial_password_path.exists()

    @property
    def initial_password_path(self) -> Path:
        """Where the first password is kept until the owner sets one (beside the database)."""
        return self.db.path.parent / INITIAL_PASSWORD_FILE

    def set_initial_password(self, password: str | None = None) -> str:
        """Make the first password (or take ``password``, the card's setup code): written to a 0600 file first
        (so it is never lost), then set; returned. Until the owner sets their own, the setup page is first."""
        if password is not None and len(password) < MIN_PASSWORD_LENGTH:
            raise UsageError(f"a setup code must be at least {MIN_PASSWORD_LENGTH} characters long")
        password = password or self.generate_password()
        path = self.initial_password_path
        try:
            write_atomic(path, password + "\n", mode=0o600)
        except OSError as exc:
            raise PicoagentError(
                f"cannot keep the first web password in {path}: {exc.strerror}",
                fix="make the data dir writable by the user picoagent runs as, or set one with `picoagent passwd`",
            ) from None
        try:
            self._store_password(password)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return password

    # --- sessions --------------------------------------------------------------------------------

    def create_session(self) -> tuple[str, str]:
        """Start a login session: ``(session_id, csrf_token)``; only the id's sha256 is stored."""
        session_id, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        now = self.clock()
        with self.db.transaction() as conn:
            # Sweep here rather than on a timer: logins are rare, and the table stays small.
            conn.execute("DELETE FROM web_sessions WHERE expires_at <= ?", (now,))
            conn.execute(
                "INSERT INTO web_sessions (id_hash, csrf, created_at, expires_at) VALUES (?, ?, ?, ?)",
                (_sha256(session_id), csrf, now, now + self.session_ttl_s),
            )
        return session_id, csrf

    def session(self, session_id: str) -> Session | None:
        """The live session with this id; None when unknown or expired (expired ones are deleted)."""
        if not session_id:
            return None
        id_hash = _sha256(session_id)
        rows = self.db.rows("SELECT csrf, expires_at FROM web_sessions WHERE id_hash = ?", (id_hash,))
        if not rows:
            return None
        csrf, expires_at = rows[0]
        if expires_at <= self.clock():
            self.db.write("DELETE FROM web_sessions WHERE id_hash = ?", (id_hash,))
            return None
        return Session(csrf=str(csrf), expires_at=float(expires_at))

    def end_session(self, session_id: str) -> None:
        """End a session (logout); unknown ids are ignored."""
        self.db.write("DELETE FROM web_sessions WHERE id_hash = ?", (_sha256(session_id),))

    def live_sessions(self) -> int:
        """How many browsers are signed in now."""
        return int(self.db.rows("SELECT COUNT(*) FROM web_sessions WHERE expires_at > ?", (self.clock(),))[0][0])

    def end_other_sessions(self, session_id: str) -> int:
        """Sign out every browser but the one with ``session_id``; how many were ended."""
        with self.db.transaction() as conn:
            ended = conn.execute("DELETE FROM web_sessions WHERE id_hash != ?", (_sha256(session_id),)).rowcount
        log.info("web sessions ended: %d", ended)
        return int(ended)

    # --- API tokens ------------------------------------------------------------------------------

    def add_token(self, name: str, token: str | None = None, *, scope: str = DEFAULT_SCOPE) -> str:
        """Create an API token called ``name`` that may do what ``scope`` allows; returned once, stored hashed.

        ``token`` adopts a value made elsewhere (the image's setup file): ``pat_`` and 20+ more characters.
        """
        checked = parse_scope(scope)
        name = name.strip()
        if not name:
            raise UsageError("an API token needs a name", fix="name it after what will use it, e.g. `home-assistant`")
        if token is not None and (not token.startswith(TOKEN_PREFIX) or len(token) < len(TOKEN_PREFIX) + 20):
            raise UsageError(
                f"an API token must start with {TOKEN_PREFIX} and have at least 20 more characters",
                fix="make one with: python3 -c 'import secrets; print(\"pat_\" + secrets.token_urlsafe(32))'",
            )
        token = token or TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.db.transaction() as conn:
            if conn.execute("SELECT 1 FROM api_tokens WHERE name = ?", (name,)).fetchone():
                raise UsageError(
                    f"an API token named {name!r} already exists",
                    fix="choose another name, or revoke the old token first",
                )
            conn.execute(
                "INSERT INTO api_tokens (name, token_hash, created_at, scope) VALUES (?, ?, ?, ?)",
                (name, _sha256(token), self.clock(), checked),
            )
        log.info("API token %s added (scope %s)", name, checked)
        return token

    def list_tokens(self) -> list[TokenInfo]:
        """Every API token's name, dates and scope, oldest first (never the token)."""
        rows = self.db.rows("SELECT name, created_at, last_used_at, scope FROM api_tokens ORDER BY id")
        return [TokenInfo(str(r[0]), float(r[1]), None if r[2] is None else float(r[2]), r[3]) for r in rows]

    def set_token_scope(self, name: str, scope: str) -> bool:
        """Give the API token called ``name`` another scope (the token itself stays); False when there is none."""
        checked = parse_scope(scope)
        with self.db.transaction() as conn:
            if conn.execute("UPDATE api_tokens SET scope = ? WHERE name = ?", (checked, name)).rowcount == 0:
                return False
        log.info("API token %s: scope now %s", name, checked)
        return True

    def revoke_token(self, name: str) -> bool:
        """Delete the API token called ``name``; False when there is none."""
        with self.db.transaction() as conn:
            if conn.execute("DELETE FROM api_tokens WHERE name = ?", (name,)).rowcount == 0:
                return False
        log.info("API token %s revoked", name)
        return True

    def check_token(self, token: str) -> TokenInfo | None:
        """The token's facts when ``token`` is a live API token, else None; notes when it was last used."""
        if not token:
            return None
        token_hash = _sha256(token)
        rows = self.db.rows(
            "SELECT id, name, created_at, last_used_at, scope FROM api_tokens WHERE token_hash = ?", (token_hash,)
        )
        if not rows:
            return None
        row_id, name, created_at, last_used_at, scope = rows[0]
        now = self.clock()
        if last_used_at is None or now - last_used_at >= TOKEN_TOUCH_INTERVAL_S:
            self.db.write("UPDATE api_tokens SET last_used_at = ? WHERE id = ?", (now, row_id))
            last_used_at = now
        return TokenInfo(str(name), float(created_at), float(last_used_at), scope)


# --- aiohttp glue --------------------------------------------------------------------------------


def principal(request: web.Request) -> Principal | None:
    """Who made this request, as the middleware found out (None on public paths)."""
    found = request.get(AUTH_KEY)
    return found if isinstance(found, Principal) else None


def _is_public(path: str) -> bool:
    # The router sees the same un-normalised path, but a `..` under /static/ has no honest use.
    if path in PUBLIC_PATHS or (path.startswith(STATIC_PREFIX) and ".." not in path):
        return True
    # One path segment after the prefix, a bridge's name: nothing else under /api/ is let through.
    name = path[len(BRIDGE_PREFIX) :] if path.startswith(BRIDGE_PREFIX) else ""
    return bool(name) and "/" not in name and ".." not in name


def _wants_json(path: str) -> bool:
    return path.startswith(("/api/", "/v1/")) or path == "/ws"


def redirect_to(location: str) -> web.Response:
    return web.Response(status=302, headers={"Location": location})


def _unauthenticated(request: web.Request, *, bad_token: bool) -> web.Response:
    if _wants_json(request.path):
        challenge = 'Bearer realm="picoagent"' + (', error="invalid_token"' if bad_token else "")
        return web.json_response(
            {"error": "authentication required", "login": "/login"},
            status=401,
            headers={"WWW-Authenticate": challenge},
        )
    return redirect_to("/login?next=" + quote(request.path_qs, safe="/"))


def _same_origin(request: web.Request) -> bool:
    """Whether the Origin header names this server (host and port), as a browser sends it."""
    origin, host = request.headers.get("Origin"), request.headers.get("Host")
    if not origin or not host:
        return False
    try:
        theirs = URL(origin)
        # A Host without a port means the default port of the scheme the browser used, which is the Origin's.
        ours = URL(f"{theirs.scheme}://{host}")
    except ValueError:
        return False
    if theirs.scheme not in ("http", "https") or not theirs.host or not ours.host:
        return False
    return (theirs.host.lower(), theirs.port) == (ours.host.lower(), ours.port)


def form_field(form: MultiDictProxy[Any], name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


async def _authenticate(auth: Auth, request: web.Request) -> tuple[Principal | None, bool]:
    """The request's principal, and whether it presented credentials that were refused."""
    header = request.headers.get("Authorization")
    if header is not None:
        # An explicit credential that fails is an error, never a fall-back to the cookie.
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return None, True
        info = await auth.db.call(auth.check_token, token.strip())
        return (Principal(kind="token", name=info.name, scope=info.scope), False) if info else (None, True)
    session_id = request.cookies.get(SESSION_COOKIE)
    if session_id:
        session = await auth.db.call(auth.session, session_id)
        if session:
            return Principal(kind="session", name="owner", scope="admin", csrf=session.csrf), False
    return None, False


def _out_of_scope(request: web.Request, found: Principal) -> web.Response | None:
    """A 403 naming the scope needed when this route is beyond the principal's scope, else None."""
    resource = request.match_info.route.resource
    if resource is None:  # no such route: the router's own 404 or 405 answers
        return None
    route = resource.canonical
    need = needed_scope(request.method, route)
    if allows(found.scope, need) or need == "any":
        return None
    wider = widened(found.scope, need)
    log.warning("API token %s (scope %s) refused %s %s", found.name, found.scope, request.method, route)
    return web.json_response(
        {
            "error": f"the API token {found.name!r} may {SCOPE_MAY[found.scope]}; {request.method} {route}"
            f" needs the {need} scope",
            "fix": f"make a token for this with `picoagent tokens add NAME --scope {need}` ({SCOPE_HELP[need]}),"
            f" or widen this one with `picoagent tokens scope {found.name} {wider}`"
            + ("" if wider == need else f" ({SCOPE_HELP[wider]}, so it keeps what it may do now)"),
            "scope": found.scope,
            "needed": need,
        },
        status=403,
    )


def middleware(auth: Auth) -> Middleware:
    """The aiohttp middleware that admits only the owner's sessions and API tokens, outside public paths."""

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if _is_public(request.path):
            return await handler(request)
        found, bad_token = await _authenticate(auth, request)
        if found is None:
            return _unauthenticated(request, bad_token=bad_token)
        if found.kind == "session":
            # Cookies ride along on cross-site requests; the CSRF token and Origin prove the page is ours.
            if request.method not in SAFE_METHODS:
                sent = request.headers.get(CSRF_HEADER)
                if sent is None and request.content_type == "application/x-www-form-urlencoded":
                    sent = form_field(await request.post(), "csrf")
                if not sent or not found.csrf or not same_secret(sent, found.csrf):
                    return json_error(403, "missing or wrong CSRF token")
            if request.headers.get("Upgrade", "").lower() == "websocket" and not _same_origin(request):
                log.warning("refused a websocket from origin %s", request.headers.get("Origin"))
                return json_error(403, "websocket from a foreign origin refused")
        refused = _out_of_scope(request, found)
        if refused is not None:
            return refused
        request[AUTH_KEY] = found
        return await handler(request)

    return authenticate
