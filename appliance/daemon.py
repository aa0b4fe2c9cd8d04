"""`picoagent serve`: the composition root. Builds every service, owns their lifecycle.

Start: runtime (database, model worker, agent), web auth, the aiohttp site (with ``web.tls: auto``:
HTTPS with the data dir's certificate and plain HTTP redirected on the same port, the certificate checked
for renewal once a day; see channels/web/listener.py and certificate.py); then ``READY=1`` to
systemd, watchdog pings, a status line, and the model loading in the background. SIGTERM/SIGINT:
stop taking requests, let turns in flight finish (briefly), cancel the rest, close the model and
the database, exit 0. SIGHUP: re-read the config; an invalid one is refused, with the reason
logged, and the running config stays. SIGHUP also re-reads the workspace's skills and retries the MCP
servers that are down. MCP servers start in the background once the site is up: a slow or broken one
never holds up or stops the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance import __version__
from appliance.config import Config, load_config
from appliance.errors import ConfigError, PicoagentError
from appliance.fileio import write_atomic
from appliance.runtime import Runtime, data_dir, local_model

log = logging.getLogger(__name__)

STOP_GRACE_S = 10.0
TASK_POLL_S = 5.0  # a task added by another process (the CLI) starts within this
TEMPERATURE_EVERY_S = 30.0
CERTIFICATE_CHECK_S = 86_400.0
CLI_TOKEN_NAME = "local-cli"


def sd_notify(message: str) -> bool:
    """Send a notification to systemd ($NOTIFY_SOCKET); False when not run by systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # abstract namespace
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError as exc:
        log.warning("cannot notify systemd at %s: %s", address, exc)
        return False
    return True


@dataclass(frozen=True)
class DaemonInfo:
    """What `picoagent status` needs to find the running daemon: written at start, removed at stop."""

    pid: int
    host: str
    port: int
    version: str
    started_at: float
    scheme: str = "http"  # https when web.tls is auto (the CLI then trusts the data dir's certificate only)

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


class Daemon:
    """The long-running appliance process."""

    def __init__(
        self, config: Config, *, host: str | None = None, port: int | None = None, data_dir_override: str | None = None
    ) -> None:
        self.config = config
        self.host = host or config.web.host
        self.port = port if port is not None else config.web.port
        self.data_dir_override = data_dir_override
        self.stopping = asyncio.Event()
        self.config_loaded_at = time.time()
        self._tasks: list[asyncio.Task[Any]] = []

    async def run(self) -> int:
        """Serve until SIGTERM or SIGINT; returns the exit status."""
        from aiohttp import web

        from appliance.channels.web.app import build_app
        from appliance.channels.web.auth import Auth
        from appliance.channels.web.hosts import SiteNames
        from appliance.channels.web.listener import DualSite
        from appliance.channels.web.site import site_url
        from appliance.channels.web.state import WebState

        loop = asyncio.get_running_loop()
        runtime = Runtime.open(self.config)
        web_cfg = self.config.web
        auth = Auth(runtime.db, session_ttl_s=web_cfg.session_days * 86400, secure_cookies=web_cfg.secure_cookies)
        self.state = state = WebState(runtime, auth)
        root = data_dir(self.config)
        watcher = None
        if runtime.devices is not None:
            from appliance.hardware.events import EventBus, ThresholdWatcher

            state.events = EventBus(runtime.db)
            runtime.devices.listeners.append(state.events.input_listener)
            if self.config.events:
                watcher = ThresholdWatcher(self.config.events, runtime.devices.read, state.events)
        # The first password goes to a 0600 file and, when a person started us in a terminal, onto that
        # terminal: never into a log, where journald would keep it.
        first_password = auth.set_initial_password() if not auth.has_password() else None
        auth.revoke_token(CLI_TOKEN_NAME)
        # The local CLI acts for the owner (approvals, devices, jobs): it gets the owner's scope.
        _write_private(DaemonInfo.token_path(root), auth.add_token(CLI_TOKEN_NAME, scope="admin"))

        site_names = SiteNames.for_config(self.config)
        certificate = None
        if web_cfg.tls == "auto":
            # Only here: cryptography's x509 costs ~8 MiB of resident memory a plain-HTTP daemon does not need.
            from appliance.channels.web.certificate import ensure_certificate

            try:
                certificate, _ = await asyncio.to_thread(ensure_certificate, root, site_names)
            except PicoagentError:
                runtime.close()
                raise
        runner = web.AppRunner(
            build_app(state, site_names), handler_cancellation=True, access_log=None, shutdown_timeout=STOP_GRACE_S
        )
        await runner.setup()
        tls = certificate.server_context() if certificate is not None else None
        site: web.BaseSite
        if tls is not None:
            site = DualSite(runner, self.host, self.port, ssl_context=tls, site_names=site_names)
        else:
            site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            runtime.close()
            raise PicoagentError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror}",
                fix="is picoagent already running? pick another port with --port or web.port",
            ) from None
        actual_port = site.port if isinstance(site, DualSite) else self.port or _bound_port(site)
        scheme = "https" if tls is not None else "http"
        state.web = {"url": site_url(self.host, actual_port, scheme=scheme), "tls": tls is not None}
        if certificate is not None:
            state.web["certificate"] = certificate.as_dict()
        info = DaemonInfo(os.getpid(), self.host, actual_port, __version__, state.started_at, scheme)
        _write_private(DaemonInfo.path(root), json.dumps(info.__dict__))

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        loop.add_signal_handler(signal.SIGHUP, self.reload)
        log.warning("serving on %s://%s:%d (picoagent %s)", scheme, self.host, actual_port, __version__)
        if certificate is not None:
            log.warning(
                "TLS certificate for %s; its public key's SHA-256 fingerprint: %s (curl: --pinnedpubkey %s)",
                ", ".join(certificate.names + certificate.addresses),
                certificate.fingerprint,
                certificate.pin,
            )
        if first_password is not None:
            self._announce_first_password(first_password, auth.initial_password_path, state.web["url"], certificate)
        sd_notify(f"READY=1\nSTATUS=serving on {self.host}:{actual_port}")
        self._tasks = [asyncio.ensure_future(self._sample_temperature())]
        watchdog_us = int(os.environ.get("WATCHDOG_USEC", "0") or 0)
        if watchdog_us > 0:
            self._tasks.append(asyncio.ensure_future(self._watchdog(watchdog_us / 2e6)))
        if self.config.llm.preload:
            self._tasks.append(asyncio.ensure_future(self._preload()))
        if watcher is not None:
            self._tasks.append(asyncio.ensure_future(watcher.run()))
        if tls is not None:
            self._tasks.append(asyncio.ensure_future(self._renew_certificate(root, tls)))
        self._tasks.append(asyncio.ensure_future(runtime.start_mcp()))
        await self._start_background(runtime, state)

        await self.stopping.wait()
        sd_notify("STOPPING=1\nSTATUS=stopping")
        log.warning("stopping: finishing %d turn(s) in flight", len(state.turns))
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)  # a cancelled task runner puts its task back first
        await self._stop_background()
        await self._drain()
        await runner.cleanup()
        await runtime.stop_mcp()
        await runtime.close_cloud()
        await asyncio.to_thread(runtime.close)
        for path in (DaemonInfo.path(root), DaemonInfo.token_path(root)):
            path.unlink(missing_ok=True)
        log.warning("stopped")
        return 0

    def _announce_first_password(self, password: str, kept: Path, url: str, certificate: Any) -> None:
        """Show the first password on the terminal that started us, if any; the log only says where it is."""
        from appliance.channels.web.site import first_password_text

        if sys.stdout.isatty():
            print(first_password_text(password, kept, url, certificate), flush=True)
        log.warning(
            "first start: a web password was made; `picoagent passwd --show-initial` shows it "
            "(as the user picoagent runs as, or with sudo), `picoagent passwd` changes it"
        )

    async def _start_background(self, runtime: Runtime, state: Any) -> None:
        """Notifications, persistent tasks, the scheduler, the heartbeat and Telegram."""
        from appliance.outbox import Notifier, Outbox
        from appliance.tasks import TaskRunner, TaskStore, make_agent_step

        self.outbox = Outbox(runtime.db)
        self.notifier = Notifier(self.outbox, self._owner)
        self.telegram: Any = None
        if self.config.telegram.enabled:
            from appliance.channels.telegram import TelegramChannel

            self.telegram = TelegramChannel(self.config.telegram, runtime, self.outbox)
            state.telegram = self.telegram  # POST /telegram/webhook hands updates to it (webhook mode)
            await self.telegram.start()  # never raises for a bad token or no network; see .problem
        if state.events is not None:
            state.events.subscribe(self._notify_event)
        self.task_store = TaskStore(runtime.db)
        recovered = self.task_store.recover()  # tasks left running by a crash go back to pending, with their steps
        if recovered:
            log.warning("resuming %d task(s) left running: %s", len(recovered), recovered)
        self.task_runner = TaskRunner(self.task_store, make_agent_step(runtime.agent), self.notifier.notify)
        self._tasks.append(asyncio.ensure_future(self.task_runner.run_forever(poll_s=TASK_POLL_S)))
        self._start_scheduler(runtime, state)
        if runtime.agent.memory is not None:
            self._tasks.append(asyncio.ensure_future(runtime.agent.memory.run_sweeps()))
        memory = runtime.memory
        if memory is not None and memory.needs_reembed():
            # A new embedding model: memories are re-embedded in the background; search uses keywords meanwhile.
            log.warning("memory: re-embedding with %s in the background", memory.model_name)
            self._tasks.append(asyncio.ensure_future(asyncio.to_thread(memory.reembed)))

    def _start_scheduler(self, runtime: Runtime, state: Any) -> None:
        """Cron jobs (config + workspace/cron.yaml) and the heartbeat."""
        from appliance.config import load_jobs
        from appliance.errors import ConfigError
        from appliance.schedule.heartbeat import Heartbeat, device_readings
        from appliance.schedule.jobs import make_job_runner
        from appliance.schedule.scheduler import Scheduler

        sched = self.config.scheduler

        async def start_task(goal: str) -> str:
            task = await runtime.db.call(self.task_store.add, goal)
            self.task_runner.wake()
            return f"task {task.id} queued: {task.goal}"

        try:
            jobs = load_jobs(sched.jobs, runtime.workspace.root, self.config.devices)
        except ConfigError as exc:
            # A typo in workspace/cron.yaml must not keep the appliance off the network: run the config's jobs.
            log.error("cron jobs: %s; running the config's jobs only", exc.for_people())
            jobs = list(sched.jobs)
        self.cron = Scheduler(
            jobs,
            tz=sched.timezone,
            run_job=make_job_runner(runtime.agent, runtime.devices, start_task),
            notify=self.notifier.notify,
            db=runtime.db,
        )
        state.cron = self.cron
        self._tasks.append(asyncio.ensure_future(self.cron.run()))
        if sched.heartbeat_minutes:
            devices = runtime.devices
            self.heartbeat = Heartbeat(
                runtime.workspace.root / "HEARTBEAT.md",
                runtime.scheduler,  # the local model behind the fair queue; never a cloud model
                self.notifier.notify,
                readings=(lambda: device_readings(devices)) if devices is not None else None,
                every_minutes=sched.heartbeat_minutes,
                tz=sched.timezone,
            )
            self._tasks.append(asyncio.ensure_future(self.heartbeat.run()))

    def _notify_event(self, event: Any) -> None:
        """Tell the owner of thresholds, presses and motion (releases and "still" are only stored)."""
        if event.kind == "threshold" or event.data.get("event") in ("pressed", "motion"):
            self.notifier.notify(event.message, "event")

    async def _stop_background(self) -> None:
        """Stop what _start_background started that needs more than a cancel."""
        if getattr(self, "telegram", None) is not None:
            await self.telegram.stop()  # answers in flight get 10 s; the delivery pass in flight finishes

    def _owner(self) -> tuple[str, str] | None:
        """Where proactive messages go: the owner's Telegram chat, when Telegram is on."""
        from appliance.channels.telegram import owner_target

        return owner_target(self.config.telegram, self.state.runtime.db)

    async def _drain(self) -> None:
        turns = set(self.state.turns)
        if turns:
            _done, pending = await asyncio.wait(turns, timeout=STOP_GRACE_S)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)

    async def _preload(self) -> None:
        sd_notify("STATUS=loading the model")
        try:
            await self.state.runtime.model.load()
        except PicoagentError as exc:
            log.error("the model did not load: %s", exc.for_people())
            sd_notify(f"STATUS=model failed to load: {exc.message}")
        else:
            sd_notify(f"STATUS=serving on {self.host}:{self.port}, model {self.state.runtime.model.name} loaded")
        await self.state.runtime.agent.prepare_understanding()  # the embedding model: ~0.3 s

    async def _renew_certificate(self, root: Path, context: Any) -> None:
        """Once a day: renew the certificate when it is due or the addresses changed, without a restart."""
        from appliance.channels.web.certificate import refresh_certificate
        from appliance.channels.web.hosts import SiteNames

        while True:
            await asyncio.sleep(CERTIFICATE_CHECK_S)
            try:
                names = await asyncio.to_thread(SiteNames.for_config, self.config)
                renewed = await asyncio.to_thread(refresh_certificate, root, names, context)
            except PicoagentError as exc:
                log.error("TLS certificate not renewed: %s", exc.for_people())
                continue
            except Exception:  # a bug here must not end renewal for good: tomorrow tries again
                log.exception("TLS certificate not renewed")
                continue
            if renewed is not None:
                self.state.web["certificate"] = renewed.as_dict()

    async def _watchdog(self, every_s: float) -> None:
        while True:
            sd_notify("WATCHDOG=1")
            await asyncio.sleep(every_s)

    async def _sample_temperature(self) -> None:
        from appliance.health import cpu_temperature

        while True:
            self.state.add_temperature(await asyncio.to_thread(cpu_temperature))
            await asyncio.sleep(TEMPERATURE_EVERY_S)

    def reload(self) -> None:
        """SIGHUP: apply a new config, or keep the running one and say why; re-read skills; retry MCP."""
        runtime = self.state.runtime
        self._reload_skills(runtime)
        if runtime.mcp is not None and runtime.mcp.problems:
            self._tasks.append(asyncio.ensure_future(runtime.start_mcp()))
        try:
            new = load_config(self.config.source, data_dir=self.data_dir_override)
        except PicoagentError as exc:
            log.error("SIGHUP: the new config is refused, keeping the running one: %s", exc.for_people())
            sd_notify(f"STATUS=config reload refused: {exc.message}")
            return
        old = self.config
        listening = ("host", "port", "tls", "allowed_hosts")
        if any(getattr(new.web, k) != getattr(old.web, k) for k in listening) or new.data_dir != old.data_dir:
            log.warning("SIGHUP: web.host, web.port, web.tls, web.allowed_hosts and data_dir apply at the next restart")
        try:
            if new.llm != old.llm:
                replacement = local_model(new)
                previous, runtime.model = runtime.model, replacement
                runtime.scheduler.model = replacement
                asyncio.get_running_loop().run_in_executor(None, previous.close)  # after its current job
                if new.llm.preload:
                    self._tasks.append(asyncio.ensure_future(self._preload()))
        except ConfigError as exc:
            log.error("SIGHUP: keeping the running model: %s", exc.for_people())
            return
        except PicoagentError as exc:
            log.error("SIGHUP: keeping the running model: %s", exc.for_people())
            return
        # Apply in place: the agent and handlers hold this same object.
        routing_changed = (new.providers, new.routing) != (old.providers, old.routing)
        for name in ("agent", "llm", "log_level", "secrets_file", "providers", "routing"):
            setattr(old, name, getattr(new, name))
        if routing_changed:
            from appliance.agent.escalation import CloudRoute

            previous_cloud = runtime.cloud
            runtime.cloud = runtime.agent.cloud = CloudRoute(old, runtime.db)
            if previous_cloud is not None:
                self._tasks.append(asyncio.ensure_future(previous_cloud.close()))
        logging.getLogger().setLevel(old.log_level.upper())
        self.config_loaded_at = time.time()
        log.warning("SIGHUP: config reloaded from %s", old.source)
        sd_notify("STATUS=config reloaded")

    def _reload_skills(self, runtime: Runtime) -> None:
        """Re-read workspace/skills: the next turn's prompt lists the new set, load_skill reads it."""
        from appliance.agent import skills

        catalog = runtime.workspace.reload_skills()
        skills.sync_tool(runtime.tools, runtime.workspace)
        problems = f"; {len(catalog.problems)} problem(s), see `picoagent skills list`" if catalog.problems else ""
        log.warning("SIGHUP: %d skill(s) loaded%s", len(catalog), problems)


def _bound_port(site: Any) -> int:
    """The port a site listening on port 0 got from the kernel."""
    server = getattr(site, "_server", None)
    sockets = getattr(server, "sockets", None) or []
    with contextlib.suppress(IndexError, OSError):
        return int(sockets[0].getsockname()[1])
    return 0
