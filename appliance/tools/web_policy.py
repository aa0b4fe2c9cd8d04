"""web_fetch's address policy: which hosts and addresses a fetch may reach (never the Pi's own network).

Shared by the tool (:mod:`appliance.tools.web_fetch`, checking its config when it registers) and the
client that fetches (:mod:`appliance.tools.web_client`, checking every address it connects to and every
redirect). No aiohttp here: registering the tool costs a one-shot command nothing.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from yarl import URL

from appliance.errors import ConfigError, ToolError
from appliance.tools.own_network import OwnNetworks

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# (family, type, proto, canonname, sockaddr), as socket.getaddrinfo gives them.
AddrInfo = tuple[Any, Any, int, str, tuple[Any, ...]]
Lookup = Callable[[str, int, int], Awaitable[Sequence[AddrInfo]]]
HostCheck = Callable[[str], None]  # raises ToolError for a host this fetch may not go to


# Cloud metadata services hand out credentials; never reachable unless listed address by address.
_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
_METADATA_NAMES = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_PRIVATE = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Deprecated (RFC 3879) but still routed inside some sites; Python counts it as global.
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")
# 127.1, 2130706433, 0x7f.0.0.1: legacy forms the C library reads as addresses; refused rather than guessed.
_NUMERIC_HOST = re.compile(r"(?:0x[0-9a-f]*|\d+)(?:\.(?:0x[0-9a-f]*|\d+))*", re.IGNORECASE)


# --- the address policy --------------------------------------------------------------------------


def allowed_networks(entries: Sequence[str]) -> list[IPNetwork]:
    """tools.web_fetch.allow_private as networks (a bare address is a network of one)."""
    networks: list[IPNetwork] = []
    for i, entry in enumerate(entries):
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ConfigError(
                f"tools.web_fetch.allow_private[{i}]: expected an IP address or network, got {entry!r}"
            ) from None
    return networks


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a 6to4, Teredo or NAT64 address leads to."""
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refused_address(ip: IPAddress, allow: Sequence[IPNetwork] = (), *, own: OwnNetworks | None = None) -> str | None:
    """Why a fetch must not connect to ``ip``, or None when it may.

    Only public internet addresses outside the Pi's ``own`` networks are reachable, plus the networks
    in ``allow`` (the owner's tools.web_fetch.allow_private). A metadata address stays refused unless
    listed on its own, so allowing 169.254.0.0/16 for a device does not open the cloud's credentials service.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        ip = ipaddress.IPv6Address(int(ip))  # drop a %zone: it does not change what the address is
        if ip.ipv4_mapped is not None:  # ::ffff:127.0.0.1 is 127.0.0.1 to the kernel
            ip = ip.ipv4_mapped
    if ip in _METADATA_ADDRESSES:
        if any(net.num_addresses == 1 and ip in net for net in allow):
            return None
        return "a cloud metadata address"
    if ip.is_unspecified:
        return "the unspecified address (this machine)"
    if ip.is_multicast:
        return "a multicast address"
    if any(ip.version == net.version and ip in net for net in allow):
        return None
    if ip.is_loopback:
        return "a loopback address (this machine)"
    if ip.is_link_local:
        return "a link-local address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            reason = refused_address(embedded, allow, own=own)
            return f"an address leading to {embedded}, {reason}" if reason else None
        if ip in _SITE_LOCAL:
            return "a site-local address (the local site's network)"
    mine = own.reason(ip) if own is not None else None
    if mine:
        return mine
    if ip in _CGNAT:
        return "a carrier-grade NAT address (a provider's private network)"
    if any(ip.version == net.version and ip in net for net in _PRIVATE):
        return "a private network address"
    if ip.is_reserved:
        return "a reserved address"
    if ip.is_private or not ip.is_global:  # documentation, benchmarking, 192.0.0.0/24 and the like
        return "not a public internet address"
    return None


def _refusal(host: str, ip: IPAddress | None, reason: str) -> ToolError:
    where = host if ip is None or host == str(ip) else f"{host} ({ip})"
    return ToolError(
        f"refused to fetch from {where}: {reason}; web_fetch only reaches public internet addresses outside "
        "the Pi's own networks (the owner can open one in tools.web_fetch.allow_private)"
    )


def check_url(url: str, allow: Sequence[IPNetwork] = (), own: OwnNetworks | None = None) -> URL:
    """The URL to fetch, or ToolError: http(s) only, a host, no credentials, no refused literal address."""
    text = url.strip()
    if len(text) > 4096:
        raise ToolError("the URL is too long (at most 4096 characters)")
    try:
        parsed = URL(text)
    except (ValueError, TypeError):
        raise ToolError(f"not a valid URL: {text[:200]!r}") from None
    scheme = parsed.scheme.lower()
    if not scheme:
        raise ToolError(f"{text[:200]!r} is not a full URL: write it with its scheme, e.g. https://{text[:100]}")
    if scheme not in ("http", "https"):
        raise ToolError(f"only http:// and https:// URLs can be fetched, not {scheme}:")
    if parsed.user is not None or parsed.password is not None:
        raise ToolError("URLs with a user name or password in them are refused")
    host = (parsed.host or "").rstrip(".").lower()
    if not host:
        raise ToolError(f"{text[:200]!r} has no host name")
    if host in _METADATA_NAMES:
        raise _refusal(host, None, "a cloud metadata service")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if _NUMERIC_HOST.fullmatch(host):
            raise _refusal(host, None, "not an IP address written the usual way") from None
    else:
        reason = refused_address(ip, allow, own=own)
        if reason:
            raise _refusal(host, ip, reason)
    return parsed.with_fragment(None)
