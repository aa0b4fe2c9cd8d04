"""web_fetch never reaches the Pi's own networks, even where their addresses are public (IPv6 at home).

The kernel's view is fed from files laid out like /proc/net: a home IPv6 prefix on wlan0 (a real-looking
global prefix, not documentation space, which is refused as a class anyway), an on-link prefix known only
from the routing table, a public IPv4 LAN, a public address on a point-to-point link, and the routes a
VPN adds to take the whole internet (which must not make the internet "the Pi's own network").
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from appliance.config import WebFetchConfig
from appliance.errors import ToolError
from appliance.tools.own_network import OwnNetworks, read_own_networks
from appliance.tools.registry import ToolRegistry
from appliance.tools.result import ToolResult
from appliance.tools.web_client import fetch_page
from appliance.tools.web_fetch import register
from appliance.tools.web_policy import allowed_networks, refused_address
from tests.fakes.web_server import allowed_config, fake_lookup, redirect, serve

HOME = "2a02:8070:88c1:4e00"  # the Pi's home /64 (a German ISP's range, as a router would hand it out)
PI_V6 = f"{HOME}:ba27:ebff:fe12:3456"


def _v6_hex(address: str) -> str:
    return ipaddress.IPv6Address(address).packed.hex()


def _v4_hex(address: str) -> str:
    """An IPv4 address as /proc/net/route writes it: the raw 32 bits, printed in the host's byte order."""
    return f"{struct.unpack('=I', ipaddress.IPv4Address(address).packed)[0]:08X}"


def _v6_route(network: str, iface: str, flags: int, next_hop: str = "::") -> str:
    net = ipaddress.IPv6Network(network)
    destination, source, hop = _v6_hex(str(net.network_address)), "0" * 32, _v6_hex(next_hop)
    counters = "00000100 00000001 00000000"  # metric, references, use
    return f"{destination} {net.prefixlen:02x} {source} 00 {hop} {counters} {flags:08x} {iface:>8}"


def _v4_route(iface: str, network: str, gateway: str, flags: int) -> str:
    net = ipaddress.IPv4Network(network)
    fields = [iface, _v4_hex(str(net.network_address)), _v4_hex(gateway), f"{flags:04X}", "0", "0", "0"]
    return "\t".join([*fields, _v4_hex(str(net.netmask)), "0", "0", "0"])


@pytest.fixture
def proc_net(tmp_path: Path) -> Path:
    """A /proc/net of a Pi on an IPv6 home network with a public IPv4 LAN, a PPP link and a VPN."""
    proc = tmp_path / "net"
    proc.mkdir()
    (proc / "if_inet6").write_text(
        f"{_v6_hex(PI_V6)} 03 40 00 00    wlan0\n"
        f"{_v6_hex('fe80::ba27:ebff:fe12:3456')} 03 40 20 80    wlan0\n"
        f"{_v6_hex('::1')} 01 80 10 80       lo\n"
    )
    (proc / "ipv6_route").write_text(
        "\n".join(
            [
                _v6_route(f"{HOME}::/64", "wlan0", 0x00000001),
                _v6_route("2a02:8070:88c1:4e10::/60", "eth1", 0x00000001),  # on-link, no address of ours in it
                _v6_route("::/0", "wlan0", 0x00000003, next_hop="fe80::1"),  # the default route: the internet
                _v6_route("::/1", "wg0", 0x00000001),  # a VPN taking the whole internet
                _v6_route("8000::/1", "wg0", 0x00000001),
                _v6_route(f"{PI_V6}/128", "wlan0", 0x80200001),  # the kernel's local route for our address
                _v6_route("::/0", "lo", 0x00200200),  # the unreachable route on lo
            ]
        )
        + "\n"
    )
    (proc / "route").write_text(
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        + "\n".join(
            [
                _v4_route("wlan0", "0.0.0.0/0", "81.2.69.161", 0x0003),
                _v4_route("wlan0", "81.2.69.160/28", "0.0.0.0", 0x0001),  # a public IPv4 LAN
                _v4_route("wg0", "0.0.0.0/1", "0.0.0.0", 0x0001),
                _v4_route("wg0", "128.0.0.0/1", "0.0.0.0", 0x0001),
            ]
        )
        + "\n"
    )
    (proc / "fib_trie").write_text(
        "Local:\n"
        "  +-- 0.0.0.0/0 3 0 5\n"
        "     |-- 81.2.69.160\n"
        "        /28 link UNICAST\n"
        "     |-- 81.2.69.165\n"
        "        /32 host LOCAL\n"
        "     |-- 81.2.69.175\n"
        "        /32 link BROADCAST\n"
        "     |-- 93.95.224.10\n"  # our end of a PPP link: no on-link network, only the address
        "        /32 host LOCAL\n"
    )
    return proc


async def call(config: WebFetchConfig, url: str, proc_net: Path) -> ToolResult:
    registry = ToolRegistry()
    register(registry, config, proc_net=proc_net)
    return await registry.execute("web_fetch", {"url": url}, timeout_s=10)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (f"http://[{HOME}::1]/", f"the Pi's own network ({HOME}::/64 on wlan0)"),  # the router
        (f"http://[{HOME}::20]:5000/", f"the Pi's own network ({HOME}::/64 on wlan0)"),  # a NAS
        ("http://[2a02:8070:88c1:4e1f::5]/", "the Pi's own network (2a02:8070:88c1:4e10::/60 on eth1)"),
        (f"http://[{PI_V6}]:8080/", "one of the Pi's own addresses (on wlan0)"),
        ("http://81.2.69.170/", "the Pi's own network (81.2.69.160/28 on wlan0)"),
        ("http://93.95.224.10/", "one of the Pi's own addresses"),
    ],
)
def test_the_pis_own_networks_are_refused_though_their_addresses_are_public(
    url: str, reason: str, proc_net: Path
) -> None:
    result = asyncio.run(call(WebFetchConfig(timeout_s=2.0), url, proc_net))
    assert not result.ok
    assert reason in str(result.error) and "allow_private" in str(result.error)


def test_a_name_or_a_redirect_into_the_pis_network_is_refused(proc_net: Path) -> None:
    async def main() -> tuple[ToolError, ToolError, list[str]]:
        with pytest.raises(ToolError) as by_name:
            await fetch_page("http://nas.test/", WebFetchConfig(), lookup=fake_lookup(f"{HOME}::20"), proc_net=proc_net)
        async with serve({"/go": redirect(f"http://[{HOME}::1]/admin")}) as site:
            with pytest.raises(ToolError) as by_redirect:
                await fetch_page(site.url + "/go", allowed_config(), proc_net=proc_net)
            return by_name.value, by_redirect.value, site.hits

    by_name, by_redirect, hits = asyncio.run(main())
    assert f"nas.test ({HOME}::20): the Pi's own network ({HOME}::/64 on wlan0)" in by_name.message
    assert f"redirected to http://[{HOME}::1]/admin" in by_redirect.message
    assert "the Pi's own network" in by_redirect.message and hits == ["/go"]


def test_the_internet_stays_reachable_through_the_default_route_and_a_vpn(proc_net: Path) -> None:
    own = read_own_networks(proc_net)
    for address in ("8.8.8.8", "200.1.1.1", "2606:4700:4700::1111", "2a02:8070:88c1:4f00::1", "81.2.69.180"):
        assert refused_address(ipaddress.ip_address(address), own=own) is None, address


def test_allow_private_still_opens_a_named_host_of_the_pis_network(proc_net: Path) -> None:
    own = read_own_networks(proc_net)
    allow = allowed_networks([f"{HOME}::20"])
    assert refused_address(ipaddress.ip_address(f"{HOME}::20"), allow, own=own) is None
    assert "own network" in str(refused_address(ipaddress.ip_address(f"{HOME}::1"), allow, own=own))


def test_a_missing_proc_file_means_no_networks_of_that_kind(tmp_path: Path) -> None:
    """IPv6 switched off has no if_inet6: the IPv4 part still counts."""
    header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    (tmp_path / "route").write_text(header + _v4_route("eth0", "81.2.69.160/28", "0.0.0.0", 0x0001) + "\n")
    own = read_own_networks(tmp_path)
    assert own == OwnNetworks(networks=((ipaddress.ip_network("81.2.69.160/28"), "eth0"),))


@pytest.mark.skipif(shutil.which("ip") is None, reason="no `ip` command here to compare with")
def test_the_kernels_own_addresses_are_read_as_ip_addr_lists_them() -> None:
    listed = json.loads(subprocess.run(["ip", "-j", "addr"], capture_output=True, check=True, text=True).stdout)
    own = read_own_networks()
    addresses = {address for address, _ in own.addresses}
    networks = {network for network, _ in own.networks}
    for link in listed:
        for info in link.get("addr_info", []):
            address = ipaddress.ip_address(info["local"])
            assert address in addresses, (address, own)
            network = ipaddress.ip_network(f"{address}/{info['prefixlen']}", strict=False)
            if address.version == 6 or not address.is_loopback:  # 127/8 is in the local table only
                assert network in networks, (network, own)
