"""The wanted model, fetched in the background while the packaged one serves; then a switch to it.

With ``llm.model: auto`` (appliance/llm/board.py picks by the board's RAM and CPU) or a catalog name that
is not installed yet (``model:`` in picoagent-setup.yaml), the daemon starts with the packaged model
(llm.choice.model_spec with fallback) and this chore:

1. waits for the network: the download host (``$PICOAGENT_MODEL_MIRROR`` or the catalog URL's) must take
   a TCP connection; when it does not, the state is ``no_network``, logged once, retried with backoff;
2. downloads it with :func:`appliance.llm.models.pull` on a thread: into ``models/.partial``, resumed from
   what an earlier attempt left, hashed while it arrives, installed only when size and sha256 match;
   a failure (the host went away, a bad checksum) is ``failed`` with the reason, retried with backoff;
3. switches: a new LocalModel through ``switch`` (Daemon.switch_model: the web face keeps running, open
   websockets stay), loaded, then recorded like `picoagent models use`, so the next start loads it
   directly. A model that will not load is switched back to the packaged one and reported ``failed``;
   that is not retried by itself (it would fail again): SIGHUP tries again.

Progress is :attr:`ModelFetch.pull` (/api/status ``model.pull``, one line on the status page and in
`picoagent status`). SIGHUP wakes a waiting chore (retry now, or a changed llm.model). Idle, it waits on
an event: no polling, nothing imported beyond the catalog.

Cost, measured here (2-core x86, load ~5, tests/test_model_fetch.py): the 98 MB test file from a mirror
on 127.0.0.1 downloads and verifies (sha256 while it arrives) in ~4 s on one thread; chat turns on the
packaged model meanwhile are answered as usual. On a Pi the network sets the time (1.1 GB at 10 MB/s:
~2 min). The switch costs one model load; the two models are in memory together only until the old one
finishes its job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from appliance.errors import Cancelled, PicoagentError
from appliance.llm import models
from appliance.llm.catalog_entry import CatalogEntry
from appliance.llm.download import download_url, format_size

log = logging.getLogger(__name__)

RETRY_S = (10.0, 30.0, 120.0, 600.0, 1800.0)  # after each failed attempt in a row; then the last one again
PROBE_TIMEOUT_S = 5.0
STATES = ("waiting_network", "downloading", "verifying", "switching", "done", "failed", "no_network")


@dataclass
class PullStatus:
    """The /api/status ``model.pull`` document."""

    name: str
    state: str = "waiting_network"
    done_bytes: int = 0
    total_bytes: int = 0
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape (keys as the status contract names them)."""
        return asdict(self)


def status_line(pull: dict[str, Any] | None) -> str | None:
    """The one line the status page and `picoagent status` show for a pull (None: nothing to say)."""
    if not pull:
        return None
    name, state, message = pull["name"], pull["state"], pull.get("message") or ""
    done, total = pull.get("done_bytes", 0), pull.get("total_bytes", 0)
    if state == "downloading" and total:
        return f"pulling {name}: {format_size(done)} of {format_size(total)} ({int(100 * done // total)}%)"
    words = {
        "waiting_network": f"{name} wanted: waiting for the network",
        "verifying": f"pulling {name}: verifying",
        "switching": f"switching to {name}",
        "done": f"switched to {name}",
        "failed": f"pulling {name} failed",
        "no_network": f"no network: keeping the packaged model until {name} can be downloaded",
    }
    line = words.get(state, f"{name}: {state}")
    return f"{line} ({message})" if message and state in ("failed", "no_network", "done") else line


def probe(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the host of ``url`` resolves and takes a TCP connection; else why not."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return f"{host}:{port} is not reachable ({exc.strerror or exc})"


class ModelFetch:
    """The background pull of the wanted model and the switch to it, as a daemon chore (:meth:`run`)."""

    def __init__(
        self,
        models_dir: Path,
        wanted: Callable[[], str],
        running: Callable[[], str],
        switch: Callable[[str], Awaitable[None]],
    ) -> None:
        self.models_dir = models_dir
        self.wanted = wanted  # the model the config asks for (llm.choice.wanted_model)
        self.running = running  # the name of the model serving now
        self.switch = switch  # replace the serving model by the installed one of this name, loaded
        self.pull: PullStatus | None = None
        self._wake = asyncio.Event()
        self._failures = 0
        self._hold = False  # the last failure will repeat (the model did not load): wait for a SIGHUP
        self._stopping = threading.Event()  # ends a download thread at its next block when the daemon stops

    def wake(self) -> None:
        """Retry now (SIGHUP): a waiting chore re-reads what is wanted and tries again at once."""
        self._wake.set()

    def status(self) -> tuple[str | None, dict[str, Any] | None]:
        """``model.wanted`` (what the config asks for) and ``model.pull`` (null: nothing to fetch) for /api/status."""
        try:
            wanted: str | None = self.wanted()
        except PicoagentError:  # e.g. an unknown name after a SIGHUP: the running model stays, doctor explains
            wanted = None
        return wanted, self.pull.as_dict() if self.pull is not None else None

    def _target(self) -> CatalogEntry | None:
        """The catalog chat model still to fetch and switch to, or None."""
        try:
            name = self.wanted()
        except PicoagentError:  # an unknown llm.model after a SIGHUP is refused there; nothing to fetch
            return None
        entry = models.load_catalog().get(name)
        if entry is None or entry.kind != "chat" or name == self.running():
            if self.pull is not None and self.pull.name != name:
                self.pull = None  # llm.model changed (SIGHUP): the old target is no longer wanted
            return None
        return entry

    async def run(self) -> None:
        """Fetch and switch whenever the wanted model is not the one serving; until cancelled (daemon stop)."""
        try:
            while True:
                entry = self._target()
                if entry is None:
                    await self._idle(None)
                    continue
                if self.pull is None or self.pull.name != entry.name or self.pull.state == "done":
                    self.pull = PullStatus(entry.name, total_bytes=entry.size_bytes)
                    self._failures = 0
                try:
                    ok = await self._attempt(entry)
                except Exception as exc:  # a bug must not end the chore: the packaged model keeps serving
                    log.exception("model %s: the background pull failed", entry.name)
                    self.pull.state, self.pull.message, ok = "failed", f"{type(exc).__name__}: {exc}", False
                self._failures = 0 if ok else self._failures + 1
                if not ok:
                    hold, self._hold = self._hold, False
                    await self._idle(None if hold else RETRY_S[min(self._failures, len(RETRY_S)) - 1])
        finally:
            self._stopping.set()  # the download thread (not cancellable) stops at its next block

    async def _idle(self, timeout_s: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout_s)
        self._wake.clear()

    async def _attempt(self, entry: CatalogEntry) -> bool:
        """One try: network, download, switch. False when it is to be retried later."""
        assert self.pull is not None
        pull = self.pull
        if models.installed_path(entry, self.models_dir) is None:
            url = download_url(entry)
            problem = await asyncio.to_thread(probe, url)
            if problem is not None:
                if pull.state != "no_network":
                    log.warning("model %s: no network (%s); serving with %s", entry.name, problem, self.running())
                pull.state, pull.message = "no_network", problem
                return False
            pull.state, pull.message = "downloading", ""
            log.warning("model %s: downloading %s in the background", entry.name, format_size(entry.size_bytes))
            started = time.monotonic()
            try:
                await asyncio.to_thread(models.pull, entry, self.models_dir, progress=self._progress)
            except PicoagentError as exc:
                pull.state, pull.message = "failed", exc.message
                log.error("model %s: download failed, retrying later: %s", entry.name, exc.for_people())
                return False
            pull.done_bytes = pull.total_bytes = entry.size_bytes
            log.warning(
                "model %s: %s verified in %.0f s", entry.name, format_size(entry.size_bytes), time.monotonic() - started
            )
        pull.state, pull.message = "switching", ""
        try:
            await self.switch(entry.name)
        except PicoagentError as exc:
            pull.state, pull.message = "failed", f"{entry.name} did not load: {exc.message}; SIGHUP tries again"
            log.error("model %s: keeping the packaged model: %s", entry.name, exc.for_people())
            self._hold = True  # loading it again would fail again, and each try reloads the packaged model
            return False
        pull.state, pull.message = "done", f"recorded: the next start loads {entry.name} directly"
        return True

    def _progress(self, done: int, total: int) -> None:
        """Called on the download thread: plain attribute writes, read by the event loop."""
        if self._stopping.is_set():
            raise Cancelled("the daemon is stopping: the partial download is kept and resumed at the next start")
        pull = self.pull
        if pull is None:
            return
        pull.done_bytes, pull.total_bytes = done, total
        if total and done >= total:
            pull.state = "verifying"
