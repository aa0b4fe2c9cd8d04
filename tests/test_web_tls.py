"""HTTPS on the LAN: the certificate, one port for https:// and a redirect for http://, pinning with real curl.

A real aiohttp site (the appliance's app, the scripted instant model) listens on 127.0.0.1 with the certificate
made in a temporary data dir; clients trust exactly that certificate (never an unverified connection).
"""

from __future__ import annotations

import asyncio
import datetime
import re
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import WebState
from appliance.config import Config, load_config
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime

PASSWORD = "correct horse battery"
CURL = shutil.which("curl")


def site_names() -> Any:
    from appliance.channels.web.hosts import SiteNames

    return SiteNames(frozenset({"localhost", "kitchen-pi", "kitchen-pi.local"}), frozenset({"127.0.0.1", "::1"}))


@pytest.fixture
def app(config: Config) -> Iterator[web.Application]:
    runtime = Runtime.open(config, model=ScriptedModel())
    auth = Auth(runtime.db)
    auth.set_password(PASSWORD)
    yield build_app(WebState(runtime, auth), site_names())
    runtime.close()


@asynccontextmanager
async def serving(
    app: web.Application, root: Path, *, made_at: datetime.datetime | None = None
) -> AsyncIterator[tuple[int, Any, ssl.SSLContext]]:
    """The app on 127.0.0.1 (a free port) over HTTPS with plain HTTP redirected; (port, certificate, its context)."""
    from appliance.channels.web.certificate import ensure_certificate
    from appliance.channels.web.listener import DualSite

    certificate, _ = ensure_certificate(root, site_names(), now=made_at)
    runner = web.AppRunner(app)
    await runner.setup()
    context = certificate.server_context()
    site = DualSite(runner, "127.0.0.1", 0, ssl_context=context, site_names=site_names())
    await site.start()
    try:
        yield site.port, certificate, context
    finally:
        await runner.cleanup()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- the certificate ----------------------------------------------------------------------------


def test_the_certificate_names_the_site_and_only_its_owner_reads_the_key(tmp_path: Path) -> None:
    from appliance.channels.web.certificate import ensure_certificate

    certificate, why = ensure_certificate(tmp_path, site_names())
    assert why == "made"
    cert = x509.load_pem_x509_certificate(certificate.cert_path.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) == {"localhost", "kitchen-pi", "kitchen-pi.local"}
    assert {str(a) for a in sans.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    assert certificate.key_path.stat().st_mode & 0o777 == 0o600
    assert certificate.key_path.parent.stat().st_mode & 0o777 == 0o700
    assert re.fullmatch(r"([0-9A-F]{2}:){31}[0-9A-F]{2}", certificate.fingerprint)
    assert ensure_certificate(tmp_path, site_names())[1] == "kept"


def test_renewal_keeps_the_key_so_the_printed_fingerprint_stays_true(tmp_path: Path) -> None:
    from appliance.channels.web.certificate import ensure_certificate
    from appliance.channels.web.hosts import SiteNames

    first, _ = ensure_certificate(tmp_path, site_names())
    soon = first.not_after - datetime.timedelta(days=10)
    renewed, why = ensure_certificate(tmp_path, site_names(), now=soon)
    assert why == "renewed: 10 day(s) left"
    assert renewed.not_after > first.not_after and renewed.fingerprint == first.fingerprint
    moved = SiteNames(site_names().names, site_names().addresses | {"192.168.1.20"})
    readdressed, why = ensure_certificate(tmp_path, moved)
    assert why == "renewed: the names or addresses changed" and "192.168.1.20" in readdressed.addresses
    assert readdressed.fingerprint == first.fingerprint


def test_an_unreadable_key_is_set_aside_not_lost(tmp_path: Path) -> None:
    from appliance.channels.web.certificate import ensure_certificate

    first, _ = ensure_certificate(tmp_path, site_names())
    first.key_path.write_text("not a key\n")
    second, why = ensure_certificate(tmp_path, site_names())
    assert why == "made for its key" and second.fingerprint != first.fingerprint
    assert (first.key_path.parent / "key.pem.unreadable").read_text() == "not a key\n"


# --- one port: https:// served, http:// redirected -------------------------------------------------


def test_https_serves_the_app_and_plain_http_on_the_same_port_is_redirected(
    app: web.Application, tmp_path: Path
) -> None:
    async def main() -> None:
        async with serving(app, tmp_path) as (port, certificate, _):
            trust = certificate.client_context()
            async with aiohttp.ClientSession() as http:
                async with http.get(f"https://127.0.0.1:{port}/healthz", ssl=trust) as r:
                    assert r.status == 200 and (await r.json())["status"] == "ok"
                async with http.get(f"https://localhost:{port}/metrics", ssl=trust) as r:
                    assert r.status == 200  # the certificate names localhost too
                plain = f"http://127.0.0.1:{port}/chat?x=1"
                async with http.get(plain, allow_redirects=False) as r:
                    assert r.status == 308 and r.headers["Location"] == f"https://127.0.0.1:{port}/chat?x=1"
                    assert r.headers["Cache-Control"] == "no-store"
                async with http.post(plain, data=b"x" * 100_000, allow_redirects=False) as r:
                    assert r.status == 308  # the unread body does not reset the answer away
                async with http.get(plain, headers={"Host": "evil.example"}, allow_redirects=False) as r:
                    assert r.status == 421 and "web.allowed_hosts" in await r.text()
                async with http.get(
                    f"https://127.0.0.1:{port}/metrics", headers={"Host": "evil.example"}, ssl=trust
                ) as r:
                    assert r.status == 421

    run(main())


@pytest.mark.skipif(CURL is None, reason="curl is not installed (apt-get install curl)")
def test_curl_with_the_printed_pin_works_a_wrong_pin_fails_and_http_gets_a_redirect(
    app: web.Application, tmp_path: Path
) -> None:
    def curl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(CURL), "-sS", *args], capture_output=True, text=True, timeout=30)

    async def main() -> None:
        async with serving(app, tmp_path) as (port, certificate, _):
            url = f"https://127.0.0.1:{port}/healthz"
            pinned = await asyncio.to_thread(curl, *certificate.curl_command(url).split()[1:])
            assert pinned.returncode == 0 and '"status": "ok"' in pinned.stdout, pinned.stderr
            other = "sha256//" + "A" * 43 + "="
            wrong = await asyncio.to_thread(curl, "--insecure", "--pinnedpubkey", other, url)
            assert wrong.returncode == 90 and "pinned public key" in wrong.stderr  # CURLE_SSL_PINNEDPUBKEYNOTMATCH
            unpinned = await asyncio.to_thread(curl, url)
            assert unpinned.returncode == 60  # not trusted without the pin: curl's own CA check stands
            redirected = await asyncio.to_thread(
                curl, "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", url.replace("https", "http")
            )
            assert redirected.stdout == f"308 {url}", redirected.stderr

    run(main())


def test_the_chat_websocket_works_over_wss_and_the_login_cookie_is_secure(app: web.Application, tmp_path: Path) -> None:
    async def main() -> None:
        async with serving(app, tmp_path) as (port, certificate, _):
            base = f"https://127.0.0.1:{port}"
            trust = certificate.client_context()
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
                async with http.get(f"{base}/login", ssl=trust) as r:
                    csrf = re.search(r'name="csrf" value="([^"]+)"', await r.text())
                    assert csrf and "Secure" in r.headers["Set-Cookie"]
                form = {"password": PASSWORD, "csrf": csrf.group(1), "next": "/"}
                async with http.post(f"{base}/login", data=form, ssl=trust, allow_redirects=False) as r:
                    assert r.status == 302
                    cookie = r.cookies["pa_session"]
                    assert cookie["secure"] and cookie["httponly"] and cookie["samesite"] == "Strict"
                async with http.ws_connect(f"wss://127.0.0.1:{port}/ws", ssl=trust, headers={"Origin": base}) as ws:
                    await ws.send_json({"type": "message", "text": "hello over tls", "session": "tls"})
                    while (event := await ws.receive_json(timeout=30))["type"] != "done":
                        assert event["type"] != "error", event
                    assert event["text"] == "echo: hello over tls"

    run(main())


def test_over_plain_http_the_login_cookie_stays_as_it_was(app: web.Application) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    async def main() -> None:
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            response = await client.get("/login")
            assert "Secure" not in response.headers["Set-Cookie"]

    run(main())


def test_a_silent_client_is_dropped_and_never_holds_up_the_others(
    app: web.Application, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from appliance.channels.web import listener

    monkeypatch.setattr(listener, "FIRST_BYTE_TIMEOUT_S", 0.3)
    monkeypatch.setattr(listener, "HANDSHAKE_TIMEOUT_S", 0.3)

    def closed_by_server(sock: socket.socket) -> bool:
        sock.settimeout(30)
        try:
            return sock.recv(1) == b""
        except ConnectionResetError:
            return True

    async def main() -> None:
        async with serving(app, tmp_path) as (port, certificate, _):
            silent = socket.create_connection(("127.0.0.1", port))
            half = socket.create_connection(("127.0.0.1", port))
            half.sendall(b"\x16\x03\x01")  # a handshake that never finishes
            url = f"https://127.0.0.1:{port}/healthz"
            async with aiohttp.ClientSession() as http, http.get(url, ssl=certificate.client_context()) as r:
                assert r.status == 200
            assert await asyncio.to_thread(closed_by_server, silent)
            assert await asyncio.to_thread(closed_by_server, half)
            silent.close()
            half.close()

    run(main())


def test_a_running_site_takes_a_renewed_certificate_without_a_restart(app: web.Application, tmp_path: Path) -> None:
    from appliance.channels.web.certificate import refresh_certificate

    async def main() -> None:
        # Made 350 days ago: 15 days left, so it is due for renewal (30 days ahead) but still valid.
        made_at = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=350)
        async with serving(app, tmp_path, made_at=made_at) as (port, certificate, context):

            def served_until() -> datetime.datetime:
                context = certificate.client_context()
                with (
                    socket.create_connection(("127.0.0.1", port)) as raw,
                    context.wrap_socket(raw, server_hostname="localhost") as tls,
                ):
                    der = tls.getpeercert(binary_form=True)
                return x509.load_der_x509_certificate(der).not_valid_after_utc

            assert await asyncio.to_thread(served_until) == certificate.not_after
            renewed = await asyncio.to_thread(refresh_certificate, tmp_path, site_names(), context)
            assert renewed is not None and renewed.not_after > certificate.not_after
            assert renewed.fingerprint == certificate.fingerprint
            assert await asyncio.to_thread(served_until) == renewed.not_after  # the next handshake has it
            assert await asyncio.to_thread(refresh_certificate, tmp_path, site_names(), context) is None

    run(main())


def test_an_unquoted_off_in_yaml_reads_as_off(tmp_path: Path) -> None:
    path = tmp_path / "picoagent.yaml"
    path.write_text("web:\n  tls: off\n")
    assert load_config(path, environ={}).web.tls == "off"
    path.write_text("web:\n  tls: auto\n")
    assert load_config(path, environ={}).web.tls == "auto"


def test_the_client_context_trusts_this_certificate_only(tmp_path: Path) -> None:
    from appliance.channels.web.certificate import ensure_certificate

    certificate, _ = ensure_certificate(tmp_path / "a", site_names())
    context = certificate.client_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
