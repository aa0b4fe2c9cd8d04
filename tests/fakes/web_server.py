"""Real web servers for the tests of web_fetch and of what fetched pages may do: an aiohttp site on
127.0.0.2 that records the paths asked for, a bare TCP listener that records every connection (a refusal
is checked by what did not arrive), handlers that answer text or redirect, and a made-up resolver.

The whole of 127/8 is loopback on Linux, so serving on 127.0.0.2 needs no setup; the tests open it with
``allow_private`` while 127.0.0.1 and ::1 stay the Pi's own network.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from appliance.config import WebFetchConfig
from appliance.tools.web_policy import AddrInfo

ALLOWED_HOST = "127.0.0.2"  # the whole of 127/8 is loopback on Linux: binding 127.0.0.2 needs no setup
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def allowed_config(**overrides: Any) -> WebFetchConfig:
    """The config the tests fetch with: 127.0.0.2 opened, short limits."""
    return WebFetchConfig(**{"allow_private": [f"{ALLOWED_HOST}/32"], "timeout_s": 3.0, **overrides})


@dataclass
class Site:
    """A real aiohttp server and the paths it was asked for."""

    url: str
    hits: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def serve(routes: dict[str, Handler], host: str = ALLOWED_HOST) -> AsyncIterator[Site]:
    """Serve ``routes`` (path -> handler) on host:random port; anything else is a 404."""
    site = Site("")

    async def dispatch(request: web.Request) -> web.StreamResponse:
        site.hits.append(request.path_qs)
        handler = routes.get(request.path)
        if handler is None:
            raise web.HTTPNotFound()
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", dispatch)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, 0).start()
    site.url = f"http://{host}:{runner.addresses[0][1]}"
    try:
        yield site
    finally:
        await runner.cleanup()


@dataclass
class Listener:
    """A TCP listener that records every connection (and would answer one, were it let through)."""

    host: str
    port: int
    connections: list[Any] = field(default_factory=list)

    def url(self, host: str | None = None) -> str:
        shown = host or (f"[{self.host}]" if ":" in self.host else self.host)
        return f"http://{shown}:{self.port}/"


LEAKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nLEAKED"


@contextlib.asynccontextmanager
async def listener(host: str = "127.0.0.1", reply: bytes = LEAKED) -> AsyncIterator[Listener]:
    """A recording listener on host:random port that answers every connection with ``reply``."""
    connections: list[Any] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer.get_extra_info("peername"))
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(accept, host, 0)
    try:
        yield Listener(host, server.sockets[0].getsockname()[1], connections)
    finally:
        server.close()
        await server.wait_closed()


def text(body: str, content_type: str = "text/plain", status: int = 200, **headers: str) -> Handler:
    """A handler answering ``body``."""

    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body.encode(), status=status, headers={"Content-Type": content_type, **headers})

    return handle


def redirect(location: str, status: int = 302) -> Handler:
    """A handler redirecting to ``location``."""

    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location})

    return handle


def fake_lookup(*addresses: str) -> Callable[[str, int, int], Awaitable[Sequence[AddrInfo]]]:
    """A getaddrinfo that gives made-up names these addresses."""

    async def lookup(host: str, port: int, family: int) -> Sequence[AddrInfo]:
        infos: list[AddrInfo] = []
        for address in addresses:
            if ":" in address:
                infos.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0)))
            else:
                infos.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)))
        return infos

    return lookup
