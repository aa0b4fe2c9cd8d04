"""The networks the Pi itself is on, read from the kernel: what web_fetch must not reach, public or not.

On an IPv6 home network every device has a global address, so the router at ``<prefix>::1`` and the
NAS pass every check by address class. The Pi's own view of its networks decides instead: the prefix
of each of its addresses (``/proc/net/if_inet6``), each on-link route (``/proc/net/ipv6_route``,
``/proc/net/route``: a network reached without a gateway is the LAN), and each of its own addresses
(those, plus the local IPv4 addresses in ``/proc/net/fib_trie``, which also holds the Pi's end of a
point-to-point link). web_fetch reads them for every fetch (four small files: 0.2 ms measured on a
busy x86 test machine, about a millisecond on a Pi 4, nothing next to a fetch), so a renumbered prefix
counts at once.

Two kinds of route are not the LAN: one through a gateway (the default route is the internet), and an
on-link route wider than /8 (IPv4) or /16 (IPv6), which is how a VPN takes the whole internet
(``0.0.0.0/1`` + ``128.0.0.0/1`` on wg0); refusing those would refuse the web. Other networks of the
home reached through the router (a second /64 of a delegated /56) are not on-link and look like the
internet from here: the owner's firewall is what keeps those apart.

A file that does not exist (no IPv6, not Linux) contributes nothing; any other read error is a
ToolError, because fetching without knowing the Pi's own networks could reach them.
"""

from __future__ import annotations

import ipaddress
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from appliance.errors import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

PROC_NET = Path("/proc/net")
# Route flags (linux/route.h, linux/ipv6_route.h).
_RTF_UP = 0x0001
_RTF_GATEWAY = 0x0002
_RTF_REJECT = 0x0200
_RTF_LOCAL = 0x80000000
# An on-link route wider than this is a VPN taking the internet, not a LAN.
_WIDEST = {4: 8, 6: 16}
_NO_NEXT_HOP = "0" * 32
_FIB_LEAF = re.compile(r"\|--\s+(\d+\.\d+\.\d+\.\d+)\s*$")
_FIB_LOCAL = re.compile(r"^\s*/32\s+host\s+LOCAL\b")


@dataclass(frozen=True)
class OwnNetworks:
    """The Pi's own networks and addresses, each with the interface it is on ("" where unknown)."""

    networks: tuple[tuple[IPNetwork, str], ...] = ()
    addresses: tuple[tuple[IPAddress, str], ...] = ()

    def reason(self, ip: IPAddress) -> str | None:
        """Why ``ip`` is the Pi's own (an address or a network it is on), or None when it is not."""
        for address, iface in self.addresses:
            if ip == address:
                return "one of the Pi's own addresses" + (f" (on {iface})" if iface else "")
        for network, iface in self.networks:
            if ip.version == network.version and ip in network:
                return f"the Pi's own network ({network}" + (f" on {iface})" if iface else ")")
        return None


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ToolError(
            f"cannot read the Pi's own networks from {path} ({exc.strerror or exc}); web_fetch refuses "
            "until it can, so that it never reaches them"
        ) from None


def _ipv6(hex32: str) -> ipaddress.IPv6Address:
    return ipaddress.IPv6Address(bytes.fromhex(hex32))


def _ipv4(hex8: str) -> ipaddress.IPv4Address:
    """An address of /proc/net/route: the raw 32 bits, printed as a number in the host's byte order."""
    return ipaddress.IPv4Address(struct.pack("=I", int(hex8, 16)))


def read_own_networks(proc_net: Path = PROC_NET) -> OwnNetworks:
    """The Pi's networks and addresses as the kernel sees them now (``proc_net``: where /proc/net is)."""
    networks: list[tuple[IPNetwork, str]] = []
    addresses: list[tuple[IPAddress, str]] = []

    def add_network(network: IPNetwork, iface: str) -> None:
        if network.prefixlen >= _WIDEST[network.version] and (network, iface) not in networks:
            networks.append((network, iface))

    def add_address(address: IPAddress, iface: str) -> None:
        if all(address != known for known, _ in addresses):
            addresses.append((address, iface))

    # if_inet6: address, ifindex, prefix length, scope, flags, interface (hex fields)
    for line in _lines(proc_net / "if_inet6"):
        fields = line.split()
        if len(fields) >= 6 and len(fields[0]) == 32:
            address = _ipv6(fields[0])
            add_address(address, fields[5])
            add_network(ipaddress.IPv6Network((address, int(fields[2], 16)), strict=False), fields[5])
    # ipv6_route: destination, its prefix length, source, its length, next hop, metric, refs, use, flags, interface
    for line in _lines(proc_net / "ipv6_route"):
        fields = line.split()
        if len(fields) < 10 or len(fields[0]) != 32:
            continue
        flags = int(fields[8], 16)
        if not flags & _RTF_UP or flags & (_RTF_GATEWAY | _RTF_REJECT) or fields[4] != _NO_NEXT_HOP:
            continue
        network = ipaddress.IPv6Network((_ipv6(fields[0]), int(fields[1], 16)), strict=False)
        if flags & _RTF_LOCAL and network.prefixlen == 128:
            add_address(network.network_address, fields[9])
        else:
            add_network(network, fields[9])
    # route: interface, destination, gateway, flags, refs, use, metric, mask, ... (a header line first)
    for line in _lines(proc_net / "route")[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        flags = int(fields[3], 16)
        if not flags & _RTF_UP or flags & (_RTF_GATEWAY | _RTF_REJECT):
            continue
        add_network(ipaddress.IPv4Network(f"{_ipv4(fields[1])}/{_ipv4(fields[7])}", strict=False), fields[0])
    # fib_trie: "|-- 192.168.1.20" then "/32 host LOCAL" for an address of this machine (no interface named)
    leaf: str | None = None
    for line in _lines(proc_net / "fib_trie"):
        match = _FIB_LEAF.search(line)
        if match:
            leaf = match.group(1)
        elif leaf is not None and _FIB_LOCAL.match(line):
            ipv4 = ipaddress.IPv4Address(leaf)
            on = [iface for network, iface in networks if ipv4 in network]
            add_address(ipv4, on[0] if on else "")
    return OwnNetworks(tuple(networks), tuple(addresses))
