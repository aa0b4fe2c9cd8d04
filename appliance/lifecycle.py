"""One lifecycle for the daemon's services: started in order, stopped in reverse, each stop attempted.

A service is anything with ``name``, ``async start()`` and ``async stop()`` (the aiohttp ``cleanup_ctx``
idea without aiohttp): the runtime, the web site, Telegram, the task runner, the scheduler. A background
loop (the watchdog, the temperature sampler, memory sweeps) is a :class:`Loop`: a task started with the
others and cancelled at stop. :class:`Services` owns the order: when a start fails, what already started
is stopped again, newest first, so a half-started daemon leaves no port, thread or database open; a stop
that fails is logged and the others still stop. systemd is told of each state (:func:`sd_notify`), and what
starting up left free goes back to the system (:func:`release_free_memory`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from appliance.runtime import Runtime

log = logging.getLogger(__name__)

LOOP_STOP_S = 5.0  # a cancelled loop may need a moment (the task runner puts its task back first)


class Service(Protocol):
    """What the daemon starts and stops."""

    @property
    def name(self) -> str:
        """What the log calls it."""

    async def start(self) -> None:
        """Begin; raise a PicoagentError for a person when this service cannot run."""

    async def stop(self) -> None:
        """End what start began (only called after start returned)."""


class Loop:
    """A background coroutine as a service: started as a task, cancelled at stop."""

    def __init__(self, name: str, run: Callable[[], Awaitable[Any]]) -> None:
        self.name = name
        self._run = run
        self.task: asyncio.Future[Any] | None = None

    async def start(self) -> None:
        """Start the coroutine as a task."""
        self.task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Cancel the task and give it a moment to finish."""
        if self.task is None:
            return
        self.task.cancel()
        await asyncio.wait([self.task], timeout=LOOP_STOP_S)


class Services:
    """The started services, in start order."""

    def __init__(self) -> None:
        self.started: list[Service] = []

    async def start(self, services: Iterable[Service]) -> None:
        """Start each in order; when one fails, stop those started (newest first) and raise its error."""
        for service in services:
            try:
                await service.start()
            except BaseException:
                await self.stop()
                raise
            self.started.append(service)
            log.debug("started %s", service.name)

    async def add(self, service: Service) -> None:
        """Start one more service after the rest (begun by a reload); it stops with them. A start that fails
        raises and stops nothing else: unlike the daemon's start, the running services run on."""
        await service.start()
        self.started.append(service)

    async def remove(self, service: Service) -> None:
        """Stop one started service now (a channel a reload turned off); the rest run on."""
        if service in self.started:
            self.started.remove(service)
        try:
            await service.stop()
        except Exception:
            log.exception("stopping %s failed", service.name)

    async def stop(self) -> None:
        """Stop every started service, newest first; a failing stop is logged and the rest still stop."""
        while self.started:
            service = self.started.pop()
            try:
                await service.stop()
            except Exception:
                log.exception("stopping %s failed", service.name)
            else:
                log.debug("stopped %s", service.name)


class Chores:
    """One-shot background work (load the model, start MCP servers, close a replaced cloud session):
    each runs as its own task; whatever is still running at stop is cancelled."""

    name = "background chores"

    def __init__(self) -> None:
        self._running: set[asyncio.Future[Any]] = set()

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run ``work`` in the background."""
        task = asyncio.ensure_future(work)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def start(self) -> None:
        """Nothing to begin: chores are spawned as they come."""

    async def stop(self) -> None:
        """Cancel the chores still running."""
        running = list(self._running)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running, timeout=LOOP_STOP_S)


def release_free_memory() -> None:
    """Collect garbage and hand the C heap's free pages back to the system (glibc's malloc_trim).

    Start-up parses the config, migrates the database and builds every parser and route: a few MiB that
    are free afterwards but stay in the process unless trimmed. Measured with the serve_idle_rss bench,
    three runs each: 50.25-50.30 MiB -> 49.6-49.8 MiB (ctypes itself costs 0.35 of the 0.8 MiB trimmed).
    Without glibc (musl, macOS) or ctypes there is nothing to do.
    """
    import gc

    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (ImportError, OSError, AttributeError):
        pass


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


class RuntimeService:
    """The runtime as a service: opened before the rest, closed after them."""

    name = "runtime"

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def start(self) -> None:
        """Opened already (Runtime.open); nothing more to begin."""

    async def stop(self) -> None:
        """End the memory keeper's background work, stop the MCP servers and the cloud session on this loop,
        then the model and the database (last: every other service, and each turn, has ended by now)."""
        if self.runtime.agent.memory is not None:
            await self.runtime.agent.memory.stop()
        await self.runtime.stop_mcp()
        await self.runtime.close_cloud()
        await asyncio.to_thread(self.runtime.close)
