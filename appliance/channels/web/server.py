"""The web face as one of the daemon's services: password and CLI token, certificate, listening socket.

Start: the first web password (to a 0600 file, and to the terminal that started us when there is one:
never into a log, where journald would keep it), a fresh admin token for the local CLI, with
``web.tls: auto`` the data dir's certificate (HTTPS, plain HTTP redirected on the same port; see
listener.py and certificate.py), the aiohttp site, and ``daemon.json`` for `picoagent status`.
Stop: let the turns in flight finish (briefly), cancel the rest, close the site, remove the files the
CLI finds the daemon by. :meth:`WebServer.renew_certificate` is the daily renewal loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance import __version__
from appliance.errors import PicoagentError
from appliance.fileio import write_atomic

if TYPE_CHECKING:
    from aiohttp import web

    from appliance.channels.web.certificate import SiteCertificate
    from appliance.channels.web.state import WebState
    from appliance.config import Config

log = logging.getLogger(__name__)

STOP_GRACE_S = 10.0
CERTIFICATE_CHECK_S = 86_400.0
CLI_TOKEN_NAME = "local-cli"


@dataclass(frozen=True)
class DaemonInfo:
    """What `picoagent status` needs to find the running daemon: written at start, removed at stop."""

    pid: int
    host: str
    port: int
    version: str
    started_at: float
    scheme: str = "http"  # https when web.tls is auto (the CLI then trusts the data dir's certificate only)
    config: str = ""  # the config file it runs on: a command with another one is told that the daemon's applies

    @staticmethod
    def path(root: Path) -> Path:
        """Where the info file lives in a data dir."""
        return root / "daemon.json"

    @staticmethod
    def token_path(root: Path) -> Path:
        """Where the local CLI's API token lives (0600)."""
        return root / "cli.token"


def _write_private(path: Path, text: str) -> None:
    write_atomic(path, text, mode=0o600)  # the local CLI token: the picoagent user only


class WebServer:
    """The aiohttp site of the daemon, serving ``state`` on host:port."""

    name = "web site"

    def __init__(self, config: Config, state: WebState, root: Path, host: str, port: int) -> None:
        self.config = config
        self.state = state
        self.root = root
        self.host = host
        self.port = port  # the bound port once started (port 0 asks the kernel for one)
        self.scheme = "http"
        self.certificate: SiteCertificate | None = None
        self.tls: Any = None  # the server's ssl.SSLContext with web.tls: auto
        self._runner: web.AppRunner | None = None
        self.url = ""  # once listening

    def serving(self) -> dict[str, Any]:
        """How the site serves, for /api/status: its url, TLS, the certificate ({} until it listens)."""
        if not self.url:
            return {}
        shown: dict[str, Any] = {"url": self.url, "tls": self.tls is not None}
        if self.certificate is not None:
            shown["certificate"] = self.certificate.as_dict()
        return shown

    async def start(self) -> None:
        """Listen; a port in use is a PicoagentError with its fix."""
        from aiohttp import web

        from appliance.channels.web.app import build_app
        from appliance.channels.web.hosts import SiteNames
        from appliance.channels.web.listener import DualSite
        from appliance.channels.web.site import site_url

        state, auth = self.state, self.state.auth
        first_password = auth.set_initial_password() if not auth.has_password() else None
        auth.revoke_token(CLI_TOKEN_NAME)
        # The local CLI acts for the owner (approvals, devices, jobs): it gets the owner's scope.
        _write_private(DaemonInfo.token_path(self.root), auth.add_token(CLI_TOKEN_NAME, scope="admin"))
        site_names = SiteNames.for_config(self.config)
        if self.config.web.tls == "auto":
            # Only here: cryptography's x509 costs ~8 MiB of resident memory a plain-HTTP daemon does not need.
            from appliance.channels.web.certificate import ensure_certificate

            certificate, _ = await asyncio.to_thread(ensure_certificate, self.root, site_names)
            self.certificate, self.tls = certificate, certificate.server_context()
        runner = web.AppRunner(
            build_app(state, site_names), handler_cancellation=True, access_log=None, shutdown_timeout=STOP_GRACE_S
        )
        await runner.setup()
        site: web.BaseSite
        if self.tls is not None:
            site = DualSite(runner, self.host, self.port, ssl_context=self.tls, site_names=site_names)
        else:
            site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise PicoagentError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror}",
                fix="is picoagent already running? pick another port with --port or web.port",
            ) from None
        self._runner = runner
        self.port = site.port if isinstance(site, DualSite) else self.port or _bound_port(site)
        self.scheme = "https" if self.tls is not None else "http"
        self.url = site_url(self.host, self.port, scheme=self.scheme)
        source = str(getattr(self.config, "source", "") or "")
        started_at = state.monitor.started_at
        info = DaemonInfo(os.getpid(), self.host, self.port, __version__, started_at, self.scheme, source)
        _write_private(DaemonInfo.path(self.root), json.dumps(info.__dict__))
        self._announce(first_password, auth.initial_password_path)

    def _announce(self, first_password: str | None, kept: Path) -> None:
        # INFO, not a warning: nothing is wrong. `serve` logs at INFO under the default log_level (warning),
        # so the line is in the terminal and the journal; with a quieter log_level a terminal still gets it.
        log.info("serving on %s://%s:%d (picoagent %s)", self.scheme, self.host, self.port, __version__)
        if not log.isEnabledFor(logging.INFO) and sys.stdout.isatty():
            print(f"serving on {self.scheme}://{self.host}:{self.port}", flush=True)
        certificate = self.certificate
        if certificate is not None:
            log.warning(
                "TLS certificate for %s; its public key's SHA-256 fingerprint: %s (curl: --pinnedpubkey %s)",
                ", ".join(certificate.names + certificate.addresses),
                certificate.fingerprint,
                certificate.pin,
            )
        if first_password is None:
            return
        from appliance.channels.web.site import first_password_text

        if sys.stdout.isatty():  # the terminal that started us, never the log
            print(first_password_text(first_password, kept, self.url, certificate), flush=True)
        log.warning(
            "first start: a web password was made; `picoagent passwd --show-initial` shows it "
            "(as the user picoagent runs as, or with sudo), `picoagent passwd` changes it"
        )

    async def stop(self) -> None:
        """Finish the turns in flight (briefly), close the site, remove daemon.json and the CLI token."""
        turns = set(self.state.streams.turns)
        if turns:
            _done, pending = await asyncio.wait(turns, timeout=STOP_GRACE_S)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        if self._runner is not None:
            await self._runner.cleanup()
        for path in (DaemonInfo.path(self.root), DaemonInfo.token_path(self.root)):
            path.unlink(missing_ok=True)

    async def renew_certificate(self) -> None:
        """Once a day: renew the certificate when it is due or the addresses changed, without a restart."""
        if self.tls is None:
            return  # plain HTTP: nothing to renew, and cryptography's ~8 MiB never loaded
        from appliance.channels.web.certificate import refresh_certificate
        from appliance.channels.web.hosts import SiteNames

        while True:
            await asyncio.sleep(CERTIFICATE_CHECK_S)
            try:
                names = await asyncio.to_thread(SiteNames.for_config, self.config)
                renewed = await asyncio.to_thread(refresh_certificate, self.root, names, self.tls)
            except PicoagentError as exc:
                log.error("TLS certificate not renewed: %s", exc.for_people())
                continue
            except Exception:  # a bug here must not end renewal for good: tomorrow tries again
                log.exception("TLS certificate not renewed")
                continue
            if renewed is not None:
                self.certificate = renewed


def _bound_port(site: Any) -> int:
    """The port a site listening on port 0 got from the kernel."""
    server = getattr(site, "_server", None)
    sockets = getattr(server, "sockets", None) or []
    with contextlib.suppress(IndexError, OSError):
        return int(sockets[0].getsockname()[1])
    return 0
