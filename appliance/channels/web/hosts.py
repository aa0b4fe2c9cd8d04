"""The names and addresses this appliance answers to, and the Host check that refuses every other name.

DNS rebinding: a page on the internet points its own name at the Pi's LAN address, and the browser then
lets that page read whatever the Pi answers, because to the browser it is the page's own origin. The one
thing the page cannot fake is the ``Host`` header, which carries its name. So every request must name
the appliance: localhost, its host name, ``<hostname>.local``, one of its own addresses (the address the
connection came in on always counts, so a new DHCP lease works at once), the host of
``telegram.webhook_url`` or ``whatsapp.webhook_url``, or a name listed in ``web.allowed_hosts``; anything
else gets ``421``.

The machine's addresses come from ``/proc/net`` because the hardened unit allows no ``AF_NETLINK``
socket, which ``getifaddrs()`` needs. The same names go into the TLS certificate (``certificate.py``).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from appliance.config.checks import NAME_RE, host_entry
from appliance.errors import ToolError
from appliance.tools.own_network import PROC_NET, read_own_networks

if TYPE_CHECKING:
    from appliance.config import Config

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost"})
LOOPBACK_ADDRESSES = frozenset({"127.0.0.1", "::1"})


def normal_address(text: str) -> str | None:
    """``text`` as a canonical IP address (``::1``, ``192.168.1.20``), or None when it is not one."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    # A dual-stack socket sees IPv4 clients as ::ffff:a.b.c.d; they reached the IPv4 address.
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(mapped or address)


def host_of(header: str) -> str | None:
    """The host in a ``Host`` header (no port, lower case, no trailing dot, addresses canonical); None if malformed."""
    value = header.strip().lower()
    if value.startswith("["):
        inside, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not re.fullmatch(r":\d{1,5}", rest)):
            return None
        address = normal_address(inside)
        return address if address and ":" in address else None
    name, colon, port = value.partition(":")
    if colon and not re.fullmatch(r"\d{1,5}", port):
        return None
    name = name.rstrip(".")
    address = normal_address(name)
    if address is not None:
        return address
    return name if NAME_RE.fullmatch(name) else None


def machine_addresses(proc_net: Path = PROC_NET) -> set[str]:
    """This machine's own addresses as /proc/net lists them (tools/own_network.py reads it for web_fetch too).

    IPv6 link-local addresses are left out: a URL naming one needs a zone (``%eth0``) that browsers refuse.
    Empty when /proc cannot be read: the address a connection came in on still counts.
    """
    try:
        own = read_own_networks(proc_net)
    except ToolError:
        return set()
    return {str(address) for address, _ in own.addresses if not (address.version == 6 and address.is_link_local)}


@dataclass(frozen=True)
class SiteNames:
    """The DNS names and IP addresses this appliance answers to (and its certificate names)."""

    names: frozenset[str]
    addresses: frozenset[str]

    @classmethod
    def for_config(
        cls, config: Config, *, hostname: str | None = None, addresses: Iterable[str] | None = None
    ) -> SiteNames:
        """The names from the config, the machine's host name and its addresses (read now unless given)."""
        host = (hostname if hostname is not None else socket.gethostname()).strip().lower().rstrip(".")
        names = set(LOOPBACK_NAMES)
        if NAME_RE.fullmatch(host):
            names.add(host)
            # avahi publishes the first label under .local, whatever the rest of the name is.
            names.add(host.split(".")[0] + ".local")
        found = set(LOOPBACK_ADDRESSES)
        found.update(
            a for a in (normal_address(a) for a in (machine_addresses() if addresses is None else addresses)) if a
        )
        listen = normal_address(config.web.host)
        if listen and not ipaddress.ip_address(listen).is_unspecified:
            found.add(listen)
        # The public names Telegram and Meta post to (a tunnel's or a reverse proxy's) are this appliance too.
        webhooks = [config.telegram.webhook_url, config.whatsapp.webhook_url]
        public = [host for host in (urlsplit(url).hostname for url in webhooks if url) if host]
        for entry in [*config.web.allowed_hosts, *public]:
            value = host_entry(entry)
            if value is None:
                continue  # the config check refuses these; a webhook URL's host always parses
            (found if normal_address(value) else names).add(value)
        return cls(frozenset(names), frozenset(found))

    def allows(self, header: str, local_address: str | None = None) -> bool:
        """Whether a request whose ``Host`` is ``header``, arriving at ``local_address``, names this appliance."""
        host = host_of(header)
        if host is None:
            return False
        if host in self.names or host in self.addresses:
            return True
        return local_address is not None and host == normal_address(local_address.split("%")[0])

    def refusal(self, header: str) -> tuple[str, str]:
        """What a refused request is told: the error and how to fix it."""
        shown = header[:100]
        return (
            f"this appliance does not answer to the name {shown!r}",
            "open it by its own name (its host name, NAME.local or its address), or add the name to "
            "web.allowed_hosts in the config",
        )


def local_address(request: web.Request) -> str | None:
    """The address of this machine the request's connection came in on."""
    transport = request.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    return str(sockname[0]) if isinstance(sockname, tuple) and sockname else None


def middleware(site: SiteNames) -> Middleware:
    """The aiohttp middleware answering ``421 Misdirected Request`` to a request for another name."""

    @web.middleware
    async def check_host(request: web.Request, handler: Handler) -> web.StreamResponse:
        # HTTP/1.0 clients may send no Host; browsers always send one, so no Host is no rebinding.
        header = request.headers.get("Host")
        if header is None or site.allows(header, local_address(request)):
            return await handler(request)
        error, fix = site.refusal(header)
        log.debug("refused a request for host %r from %s", header[:100], request.remote)
        body: dict[str, Any] = {"error": error, "fix": fix}
        return web.json_response(body, status=421)

    return check_host
