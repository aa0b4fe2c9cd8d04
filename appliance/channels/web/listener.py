"""HTTPS and plain HTTP on one port: TLS goes to the app, plain HTTP gets a redirect to https://.

Every accepted connection's first byte is peeked (``MSG_PEEK``: nothing is consumed). ``0x16`` opens a TLS
handshake: the socket is handed to aiohttp with the certificate's SSL context
(``loop.connect_accepted_socket``), so pages, the API and the chat's WebSocket (wss://) are served exactly as
over a plain site. Anything else is plain HTTP: its request head is read and answered with a
``308 Permanent Redirect`` to the same path over https:// at the same Host (``421`` when the Host is not one
of ours, as on the app), then the connection is closed; nothing behind it runs.

Slow or idle clients cannot pile up: a connection that sends nothing within ``FIRST_BYTE_TIMEOUT_S``, does
not finish its handshake within ``HANDSHAKE_TIMEOUT_S`` or its plain request head within
``HEAD_TIMEOUT_S`` is closed, and at most ``MAX_PENDING`` connections may be at that stage at once (the
rest are closed at once). Cost per connection: one ``recv(MSG_PEEK)``; no byte is copied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from typing import Any

from aiohttp import web

from appliance.channels.web.hosts import SiteNames, normal_address

log = logging.getLogger(__name__)

TLS_HANDSHAKE = 0x16  # the first byte of a TLS record carrying a handshake (ClientHello)
FIRST_BYTE_TIMEOUT_S = 10.0
HANDSHAKE_TIMEOUT_S = 10.0
HEAD_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 8192
LINGER_S = 2.0
MAX_PENDING = 256


async def _readable(sock: socket.socket) -> None:
    """Wait until ``sock`` has something to read (or was closed by its peer)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


async def _peek(sock: socket.socket) -> bytes:
    """The first byte the client sent, left in the socket for whoever reads it next (b"" when it hung up)."""
    while True:
        try:
            return sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            await _readable(sock)


async def _read_head(sock: socket.socket) -> bytes:
    """A plain HTTP request's head, up to the blank line (at most MAX_HEAD_BYTES)."""
    loop = asyncio.get_running_loop()
    head = b""
    while b"\r\n\r\n" not in head and b"\n\n" not in head and len(head) < MAX_HEAD_BYTES:
        chunk = await loop.sock_recv(sock, MAX_HEAD_BYTES - len(head))
        if not chunk:
            break
        head += chunk
    return head


async def _linger(sock: socket.socket) -> None:
    """Close politely: a request body left unread would make the kernel reset the connection, and the client
    could lose the answer already sent. So stop writing, read what is left (briefly), then close."""
    sock.shutdown(socket.SHUT_WR)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(TimeoutError, OSError):
        async with asyncio.timeout(LINGER_S):
            while await loop.sock_recv(sock, 4096):
                pass


def _response(status: str, text: str, headers: dict[str, str] | None = None) -> bytes:
    body = text.encode() + b"\n"
    lines = [f"HTTP/1.1 {status}", "Content-Type: text/plain; charset=utf-8", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    lines += ["Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


def redirect_for(head: bytes, site: SiteNames, local_address: str | None, port: int) -> bytes:
    """The answer to a plain HTTP request head on the HTTPS port: a redirect to https://, or why not."""
    lines = head.decode("latin-1").replace("\r\n", "\n").split("\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return _response("400 Bad Request", "this port speaks HTTPS: open https:// instead of http://")
    target = parts[1]
    if not target.startswith("/"):
        # absolute-form (a proxy's request line): keep only the path, never the host it names
        rest = target.split("://", 1)[-1]
        target = "/" + rest.split("/", 1)[1] if "/" in rest else "/"
    host = next((line.split(":", 1)[1].strip() for line in lines[1:] if line.lower().startswith("host:")), None)
    if host is None:
        # No Host (HTTP/1.0): send them to the address they reached us on.
        address = local_address or "127.0.0.1"
        shown = f"[{address}]" if ":" in address else address
        host = f"{shown}:{port}"
    elif not site.allows(host, local_address):
        error, fix = site.refusal(host)
        return _response("421 Misdirected Request", f"{error}; {fix}")
    location = f"https://{host}{target}"
    return _response(
        "308 Permanent Redirect",
        f"this port speaks HTTPS: {location}",
        # Not cached: should the owner turn web.tls off, browsers must not keep going to https://.
        {"Location": location, "Cache-Control": "no-store"},
    )


class DualSite(web.BaseSite):
    """An aiohttp site serving HTTPS, with plain HTTP on the same port redirected to it."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext,
        site_names: SiteNames,
        backlog: int = 128,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host = host
        self._port = port
        self._names = site_names
        self._ssl = ssl_context
        self._listeners: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The port listened on (the kernel's choice when 0 was asked for)."""
        if self._listeners:
            return int(self._listeners[0].getsockname()[1])
        return self._port

    @property
    def name(self) -> str:
        """The site's URL, as aiohttp names sites."""
        shown = f"[{self._host}]" if ":" in self._host else self._host
        return f"https://{shown}:{self.port}"

    async def start(self) -> None:
        """Listen on every address the host resolves to (as aiohttp's TCPSite does), and accept."""
        await super().start()
        infos = socket.getaddrinfo(self._host or None, self._port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        addresses = list(dict.fromkeys((info[0], info[4][:2]) for info in infos))
        for family, address in addresses:
            # One "::" alone takes IPv4 too (dual stack); beside an IPv4 socket it must keep to IPv6.
            dual = len(addresses) == 1 and family == socket.AF_INET6 and socket.has_dualstack_ipv6()
            listener = socket.create_server(address, family=family, backlog=self._backlog, dualstack_ipv6=dual)
            listener.setblocking(False)
            self._listeners.append(listener)
            self._accepting.append(asyncio.ensure_future(self._accept(listener)))

    async def stop(self) -> None:
        """Stop accepting; close connections not yet handed to aiohttp (the runner closes the rest)."""
        for task in self._accepting:
            task.cancel()
        if self._accepting:
            await asyncio.wait(self._accepting)
        for listener in self._listeners:
            listener.close()
        for task in list(self._pending):
            task.cancel()
        if self._pending:
            await asyncio.wait(self._pending)
        await super().stop()

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError as exc:  # out of file descriptors, mostly: let some close before trying again
                log.warning("web: cannot accept a connection: %s", exc)
                await asyncio.sleep(0.5)
                continue
            if len(self._pending) >= MAX_PENDING:
                conn.close()
                continue
            task = asyncio.ensure_future(self._route(conn))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _route(self, conn: socket.socket) -> None:
        """Hand a TLS connection to aiohttp, or answer a plain one with a redirect."""
        conn.setblocking(False)
        handed = False
        try:
            first = await asyncio.wait_for(_peek(conn), FIRST_BYTE_TIMEOUT_S)
            if not first:
                return
            if first[0] == TLS_HANDSHAKE:
                server: Any = self._runner.server
                loop = asyncio.get_running_loop()
                await loop.connect_accepted_socket(
                    server, conn, ssl=self._ssl, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S
                )
                handed = True
                return
            head = await asyncio.wait_for(_read_head(conn), HEAD_TIMEOUT_S)
            local = normal_address(str(conn.getsockname()[0]).split("%")[0])
            answer = redirect_for(head, self._names, local, self.port) if head else b""
            if answer:
                await asyncio.get_running_loop().sock_sendall(conn, answer)
                await _linger(conn)
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            # A client that gave up, refused our certificate or said nothing: nothing to tell anyone.
            log.debug("web: connection dropped before a request: %r", exc)
        finally:
            if not handed:
                conn.close()
