"""The Host check: a page elsewhere that rebinds its DNS name to the Pi cannot read it through a browser.

The real app (every route behind the check) on a real socket, with the scripted instant model; the names
the appliance answers to come from the config, the machine's host name and its own addresses.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import WebState
from appliance.config import Config, load_config
from appliance.errors import ConfigError
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime


@pytest.fixture
def app(config: Config) -> Iterator[web.Application]:
    config.web.allowed_hosts = ["pi.home.arpa", "10.9.8.7"]
    config.telegram.webhook_url = "https://bot.example.net/telegram/webhook"
    runtime = Runtime.open(config, model=ScriptedModel())
    auth = Auth(runtime.db)
    auth.set_password("correct horse battery")
    yield build_app(WebState(runtime, auth))
    runtime.close()


def statuses(app: web.Application, hosts: list[str], paths: list[str]) -> dict[tuple[str, str], int]:
    """GET each path with each Host header (``{port}`` is the server's port); the status of each."""

    async def main() -> dict[tuple[str, str], int]:
        seen: dict[tuple[str, str], int] = {}
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            port = client.port
            for host in hosts:
                for path in paths:
                    headers = {"Host": host.format(port=port)}
                    response = await client.get(path, headers=headers, allow_redirects=False)
                    seen[(host, path)] = response.status
                    if response.status == 421:
                        body: dict[str, Any] = await response.json()
                        assert "web.allowed_hosts" in body["fix"], body
        return seen

    return asyncio.run(main())


def test_a_foreign_host_name_is_refused_on_every_route_and_our_names_are_answered(app: web.Application) -> None:
    paths = ["/metrics", "/healthz", "/api/status", "/login", "/", "/static/app.css", "/ws"]
    foreign = [
        "evil.example",
        "evil.example:{port}",
        "EVIL.example.",
        "127.0.0.1.evil.example",
        "localhost.evil.example:{port}",
        "pi.home.arpa.evil.example",
        "localhost:{port}@evil.example",
        "",
    ]
    hostname = socket.gethostname().lower()
    ours = [
        "127.0.0.1:{port}",
        "localhost:{port}",
        "LOCALHOST.",
        "[::1]:{port}",
        f"{hostname}:{{port}}",
        f"{hostname}.local:{{port}}",
        "pi.home.arpa",
        "10.9.8.7:{port}",
        "bot.example.net",  # telegram.webhook_url's host: a proxy or tunnel may pass it through
    ]
    seen = statuses(app, foreign + ours, paths)
    wrong = {key: status for key, status in seen.items() if (key[0] in foreign) != (status == 421)}
    assert not wrong, wrong


def test_metrics_and_healthz_keep_answering_our_own_names(app: web.Application) -> None:
    seen = statuses(app, ["127.0.0.1:{port}"], ["/metrics", "/healthz"])
    assert set(seen.values()) == {200}


def test_the_machine_addresses_are_read_from_proc_without_netlink(tmp_path: Path) -> None:
    """The hardened unit allows no AF_NETLINK, so getifaddrs() fails there: the addresses come from /proc."""
    from appliance.channels.web.hosts import machine_addresses

    fib_trie = """Main:
  +-- 0.0.0.0/0 3 0 5
     +-- 127.0.0.0/8 2 0 2
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
     |-- 192.168.1.255
        /32 link BROADCAST
     |-- 192.168.1.20
        /32 host LOCAL
Local:
     |-- 192.168.1.20
        /32 host LOCAL
"""
    if_inet6 = (
        "fe8000000000000000fc00fffe000001 04 40 20 80     eth0\n"
        "00000000000000000000000000000001 01 80 10 80       lo\n"
        "fd000000000000000000000000000002 04 40 00 82     eth0\n"
    )
    (tmp_path / "fib_trie").write_text(fib_trie)
    (tmp_path / "if_inet6").write_text(if_inet6)
    assert machine_addresses(tmp_path) == {"127.0.0.1", "192.168.1.20", "::1", "fd00::2"}
    assert machine_addresses(tmp_path / "missing") == set()


def test_site_names_hold_the_host_name_its_mdns_name_and_the_configured_ones(config: Config) -> None:
    from appliance.channels.web.hosts import SiteNames

    config.web.allowed_hosts = ["Pi.Home.Arpa", "2001:db8::7"]
    names = SiteNames.for_config(config, hostname="kitchen-pi", addresses={"192.168.1.20"})
    assert {"kitchen-pi", "kitchen-pi.local", "localhost", "pi.home.arpa"} <= names.names
    assert {"127.0.0.1", "::1", "192.168.1.20", "2001:db8::7"} <= names.addresses


@pytest.mark.parametrize(
    "entry",
    ["http://pi.home.arpa", "pi.home.arpa:8080", "pi.home.arpa/", "[::1]", "", "bad name", "*.example"],
)
def test_a_malformed_allowed_host_is_refused_with_the_key_and_an_example(tmp_path: Path, entry: str) -> None:
    path = tmp_path / "picoagent.yaml"
    path.write_text(f'web:\n  allowed_hosts: ["{entry}"]\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    message = info.value.for_people()
    assert "web.allowed_hosts[0]" in message and "pi.home.arpa" in message and "192.168.1.20" in message
