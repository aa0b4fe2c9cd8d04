"""One lifecycle for the daemon's services: started in order, stopped in reverse, each stop attempted.

A service is anything with ``name``, ``async start()`` and ``async stop()`` (the aiohttp ``cleanup_ctx``
idea without aiohttp): the runtime, the web site, Telegram, the task runner, the scheduler. A background
loop (the watchdog, the temperature sampler, memory sweeps) is a :class:`Loop`: a task started with the
others and cancelled at stop. :class:`Services` owns the order: when a start fails, what already started
is stopped again, newest first, so a half-started daemon leaves no port, thread or database open; a stop
that fails is logged and the others still stop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

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
        """Start one more service after the rest (a loop begun by SIGHUP); it stops with them."""
        await self.start([service])

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
