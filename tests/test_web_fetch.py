"""web_fetch: pages as text, and never the Pi's own network (real servers on 127.0.0.x, all offline).

Pages are served from 127.0.0.2, which the tests open with allow_private; 127.0.0.1 (and ::1) hold
listeners that record every connection, so a refusal is checked by what did not arrive as well as by
the message the model reads.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from appliance.config import WebFetchConfig, load_config
from appliance.errors import ConfigError, ToolError
from appliance.tools.html_text import html_to_text
from appliance.tools.registry import ToolRegistry
from appliance.tools.result import ToolResult
from appliance.tools.web_client import GuardedResolver, fetch_page
from appliance.tools.web_fetch import register
from appliance.tools.web_policy import allowed_networks, check_url, refused_address
from tests.fakes.web_server import (
    ALLOWED_HOST,
    Listener,
    Site,
    allowed_config,
    fake_lookup,
    listener,
    redirect,
    serve,
    text,
)


def ipv6_loopback() -> bool:
    """Whether ::1 can be listened on here (containers sometimes have no IPv6)."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback (::1) in this environment")


def registry_for(config: WebFetchConfig) -> ToolRegistry:
    registry = ToolRegistry()
    register(registry, config)
    return registry


async def call(config: WebFetchConfig, url: str, **arguments: Any) -> ToolResult:
    """web_fetch as the model calls it: through the registry."""
    return await registry_for(config).execute("web_fetch", {"url": url, **arguments}, timeout_s=10)


# --- a page, as text -----------------------------------------------------------------------------

PAGE = """<!doctype html>
<html><head><title>Pico &amp; the  garden</title>
<style>body { color: red }</style><script>var secret = "SCRIPT-TEXT";</script>
<meta charset="utf-8"></head>
<body><noscript>NOSCRIPT-TEXT</noscript><svg><title>SVG-TITLE</title><text>SVG-TEXT</text></svg>
<h1>Tomatoes</h1><p>Water them   every
morning.</p><p>Read <a href="/docs">the docs</a> or <a href="#top">jump</a>.</p>
<ul><li>sun</li><li>rain</li></ul>
<table><tr><th>month</th><th>yield</th></tr><tr><td>July</td><td>3 kg</td></tr></table>
<script>document.write("LATE-SCRIPT")</script></body></html>"""


def test_a_page_is_fetched_and_read_as_text_when_its_network_is_allowed() -> None:
    async def main() -> tuple[Site, ToolResult]:
        async with serve({"/garden": text(PAGE, "text/html; charset=utf-8")}) as site:
            return site, await call(allowed_config(), site.url + "/garden")

    site, result = asyncio.run(main())
    assert result.ok, result.error
    lines = result.output.splitlines()
    assert lines[0].startswith(f"{site.url}/garden — 200 OK, text/html")
    assert lines[1] == "Title: Pico & the garden"
    out = result.output
    assert "# Tomatoes" in out and "Water them every morning." in out
    assert f"Read [the docs]({site.url}/docs) or jump." in out
    assert "- sun\n- rain\n\nmonth | yield\nJuly | 3 kg" in out
    for hidden in ("SCRIPT-TEXT", "LATE-SCRIPT", "color: red", "NOSCRIPT-TEXT", "SVG-TEXT", "SVG-TITLE"):
        assert hidden not in out
    assert site.hits == ["/garden"]


def test_html_to_text_drops_scripts_and_styles_and_keeps_the_blocks() -> None:
    title, body = html_to_text(
        "<title>T</title><p>one<br>two</p><div>three</div><pre>a\n  b</pre><p>caf&eacute; &lt;ok&gt;</p>"
        "<style>p{}</style><script>alert(1)</script>",
        links=False,
    )
    assert title == "T"
    assert body == "one\ntwo\n\nthree\n\na\nb\n\ncafé <ok>"


def test_a_head_that_is_never_closed_does_not_hide_the_body() -> None:
    title, body = html_to_text("<html><head><title>T</title><body><p>visible</p>")
    assert (title, body) == ("T", "visible")


def test_plain_text_and_json_pass_through() -> None:
    async def main() -> tuple[ToolResult, ToolResult]:
        routes = {"/a.txt": text("line 1\r\nline  2\n"), "/a.json": text('{"temp": 21.5}', "application/json")}
        async with serve(routes) as site:
            return await call(allowed_config(), site.url + "/a.txt"), await call(allowed_config(), site.url + "/a.json")

    plain, data = asyncio.run(main())
    assert plain.output.endswith("\n\nline 1\nline  2")
    assert ", application/json, " in data.output.splitlines()[0]
    assert data.output.endswith('\n\n{"temp": 21.5}')


def test_the_charset_comes_from_the_header_and_a_bad_one_falls_back_to_utf8() -> None:
    async def latin1(request: web.Request) -> web.StreamResponse:
        return web.Response(body="café".encode("latin-1"), headers={"Content-Type": "text/plain; charset=iso-8859-1"})

    async def bogus(request: web.Request) -> web.StreamResponse:
        return web.Response(body="naïve".encode(), headers={"Content-Type": "text/plain; charset=no-such-codec"})

    async def main() -> tuple[ToolResult, ToolResult]:
        async with serve({"/latin1": latin1, "/bogus": bogus}) as site:
            return await call(allowed_config(), site.url + "/latin1"), await call(allowed_config(), site.url + "/bogus")

    latin, fallback = asyncio.run(main())
    assert latin.output.endswith("café")
    assert fallback.output.endswith("naïve")


def test_start_reads_on_where_an_answer_was_cut() -> None:
    async def main() -> tuple[ToolResult, ToolResult]:
        async with serve({"/t": text("0123456789")}) as site:
            url = site.url + "/t"
            return await call(allowed_config(), url, start=4), await call(allowed_config(), url, start=10)

    later, past = asyncio.run(main())
    assert "10 characters of text, from character 4" in later.output and later.output.endswith("\n\n456789")
    assert not past.ok and "past the end" in str(past.error)


# --- refusals: never the Pi's own network --------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.20", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("fec0::1", "site-local"),
        ("feff:ffff::1", "site-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "metadata"),
        ("2002:7f00:1::", "leading to 127.0.0.1"),
        ("64:ff9b::a00:1", "leading to 10.0.0.1"),
        ("192.0.2.1", "not a public"),
    ],
)
def test_addresses_that_are_not_public_are_refused(address: str, reason: str) -> None:
    refusal = refused_address(ipaddress.ip_address(address))
    assert refusal is not None and reason in refusal


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "64:ff9b::808:808"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert refused_address(ipaddress.ip_address(address)) is None


def test_allow_private_opens_a_network_but_not_the_metadata_service() -> None:
    allow = allowed_networks(["10.0.0.0/8", "169.254.0.0/16"])
    assert refused_address(ipaddress.ip_address("10.1.2.3"), allow) is None
    assert refused_address(ipaddress.ip_address("::ffff:10.1.2.3"), allow) is None
    assert refused_address(ipaddress.ip_address("169.254.1.1"), allow) is None
    assert "metadata" in str(refused_address(ipaddress.ip_address("169.254.169.254"), allow))
    assert refused_address(ipaddress.ip_address("169.254.169.254"), allowed_networks(["169.254.169.254"])) is None
    assert "private" in str(refused_address(ipaddress.ip_address("192.168.1.1"), allow))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "only http:// and https://"),
        ("ftp://example.com/file", "only http:// and https://"),
        ("javascript:alert(1)", "only http:// and https://"),
        ("example.com/page", "not a full URL"),
        ("http:///just/a/path", "no host name"),
        ("http://user:secret@example.com/", "user name or password"),
        ("http://2130706433/", "not an IP address written the usual way"),
        ("http://127.1/", "not an IP address written the usual way"),
        ("http://0x7f.0.0.1/", "not an IP address written the usual way"),
        ("http://metadata.google.internal/computeMetadata/v1/", "metadata"),
        ("http://127.0.0.1./", "loopback"),
    ],
)
def test_urls_that_are_not_plain_public_http_are_refused(url: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        check_url(url)


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("http://127.0.0.1:{port}/", "loopback"),
        ("http://[::ffff:127.0.0.1]:{port}/", "loopback"),
        ("http://localhost:{port}/", "loopback"),  # a name: refused by the resolver the connector uses
        ("http://10.0.0.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ],
)
def test_the_pis_own_network_is_refused_and_nothing_connects(target: str, reason: str) -> None:
    async def main() -> tuple[ToolResult, Listener]:
        async with listener("127.0.0.1") as local:
            return await call(allowed_config(), target.format(port=local.port)), local

    result, local = asyncio.run(main())
    assert not result.ok and reason in str(result.error) and "allow_private" in str(result.error)
    assert local.connections == []


@needs_ipv6
def test_ipv6_loopback_is_refused_and_nothing_connects() -> None:
    async def main() -> tuple[ToolResult, Listener]:
        async with listener("::1") as local:
            return await call(allowed_config(), local.url()), local

    result, local = asyncio.run(main())
    assert not result.ok and "loopback" in str(result.error)
    assert local.connections == []


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("localhost", "loopback"),
        ("10.0.0.1", "private"),
        ("169.254.169.254", "metadata"),
        pytest.param("[::1]", "loopback", marks=needs_ipv6),
    ],
)
def test_a_redirect_into_the_pis_network_is_refused_and_nothing_connects(target: str, reason: str) -> None:
    async def main() -> tuple[ToolResult, Site, Listener]:
        async with listener("::1" if target == "[::1]" else "127.0.0.1") as local:
            routes = {"/go": redirect(f"http://{target}:{local.port}/secret")}
            async with serve(routes) as site:
                return await call(allowed_config(), site.url + "/go"), site, local

    result, site, local = asyncio.run(main())
    assert not result.ok and reason in str(result.error) and f"{site.url}/go" in str(result.error)
    assert site.hits == ["/go"]
    assert local.connections == []


def test_a_relative_redirect_is_followed() -> None:
    async def main() -> tuple[ToolResult, Site]:
        async with serve({"/old/page": redirect("../new?x=1", 301), "/new": text("moved here")}) as site:
            return await call(allowed_config(), site.url + "/old/page"), site

    result, site = asyncio.run(main())
    assert result.ok, result.error
    assert result.output.startswith(f"{site.url}/new?x=1 — 200 OK, text/plain, after 1 redirect,")
    assert site.hits == ["/old/page", "/new?x=1"]


def test_too_many_redirects_are_refused() -> None:
    async def main() -> tuple[ToolResult, Site]:
        async with serve({"/loop": redirect("/loop")}) as site:
            return await call(allowed_config(max_redirects=2), site.url + "/loop"), site

    result, site = asyncio.run(main())
    assert not result.ok and "redirected more than 2 times" in str(result.error)
    assert site.hits == ["/loop"] * 3


# --- the resolver the connector uses -------------------------------------------------------------


def test_a_name_is_refused_when_any_of_its_addresses_is() -> None:
    resolver = GuardedResolver(lookup=fake_lookup("93.184.216.34", "10.0.0.7"))
    with pytest.raises(ToolError, match=r"pico\.test \(10\.0\.0\.7\): a private network address"):
        asyncio.run(resolver.resolve("pico.test", 80, socket.AF_UNSPEC))
    public = GuardedResolver(lookup=fake_lookup("93.184.216.34", "2606:4700::1"))
    hosts = asyncio.run(public.resolve("pico.test", 443, socket.AF_UNSPEC))
    assert [(h["host"], h["port"], h["flags"] & socket.AI_NUMERICHOST) for h in hosts] == [
        ("93.184.216.34", 443, socket.AI_NUMERICHOST),
        ("2606:4700::1", 443, socket.AI_NUMERICHOST),
    ]


def test_the_connection_goes_to_the_address_the_resolver_checked() -> None:
    # pico.test exists in no DNS: the fetch reaches the server only through the guarded resolver.
    async def host_header(request: web.Request) -> web.StreamResponse:
        return web.Response(text=f"host={request.host}")

    async def main() -> tuple[str, Listener, ToolError]:
        async with serve({"/": host_header}) as site, listener("127.0.0.1") as local:
            port = site.url.rsplit(":", 1)[1]
            page = await fetch_page(f"http://pico.test:{port}/", allowed_config(), lookup=fake_lookup(ALLOWED_HOST))
            with pytest.raises(ToolError) as refused:
                await fetch_page(f"http://pico.test:{local.port}/", allowed_config(), lookup=fake_lookup("127.0.0.1"))
            return page.text, local, refused.value

    body, local, refused = asyncio.run(main())
    assert body == "host=pico.test:" + body.rsplit(":", 1)[1]
    assert "pico.test (127.0.0.1): a loopback address" in refused.message
    assert local.connections == []


# --- limits and content types --------------------------------------------------------------------


def test_a_large_response_is_cut_at_max_bytes_and_says_so() -> None:
    async def main() -> ToolResult:
        async with serve({"/big": text("x" * 50_000)}) as site:
            return await call(allowed_config(max_bytes=1024), site.url + "/big", start=1000)

    result = asyncio.run(main())
    assert result.ok, result.error
    assert "only the start of the page was read" in result.output and "1024 characters of text" in result.output
    assert result.output.endswith("\n\n" + "x" * 24)


def test_a_server_that_does_not_answer_in_time_is_given_up_on() -> None:
    async def main() -> tuple[ToolResult, list[str]]:
        released = asyncio.Event()  # set once the fetch gave up: only then does the server answer
        answered: list[str] = []

        async def slow(request: web.Request) -> web.StreamResponse:
            await released.wait()
            answered.append(request.path)
            return web.Response(text="too late")

        async with serve({"/slow": slow}) as site:
            result = await call(allowed_config(timeout_s=0.3), site.url + "/slow")
            answered_by_then = list(answered)
            released.set()
            return result, answered_by_then

    result, answered_by_then = asyncio.run(main())
    assert not result.ok and "did not answer within 0.3 s" in str(result.error)
    assert answered_by_then == []  # the fetch returned while the server still held its answer back


def test_binary_content_is_refused_without_reading_it() -> None:
    untyped = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\n\x00\x01\x02 raw"

    async def main() -> tuple[ToolResult, ToolResult]:
        async with serve({"/cat.png": text("\x89PNG" + "\x00" * 3000, "image/png")}) as site:
            image = await call(allowed_config(), site.url + "/cat.png")
        async with listener(ALLOWED_HOST, untyped) as raw:  # aiohttp's server always sends a type
            return image, await call(allowed_config(), raw.url())

    image, blob = asyncio.run(main())
    assert not image.ok and "is image/png, 3 kB, not text" in str(image.error)
    assert not blob.ok and "binary data" in str(blob.error)


def test_an_error_status_is_a_tool_error_naming_it() -> None:
    async def main() -> tuple[ToolResult, Site]:
        async with serve({"/gone": text("nope", status=410)}) as site:
            return await call(allowed_config(), site.url + "/gone"), site

    result, site = asyncio.run(main())
    assert not result.ok and result.error == f"{site.url}/gone answered 410 Gone"
    missing = asyncio.run(call(allowed_config(), "http://127.0.0.2:1/"))  # nothing listens on port 1
    assert not missing.ok and "cannot connect to 127.0.0.2:1" in str(missing.error)


# --- registration and config ---------------------------------------------------------------------


def test_web_fetch_is_registered_read_only_and_only_when_enabled() -> None:
    tool = registry_for(WebFetchConfig()).get("web_fetch")
    assert tool.read_only
    assert tool.description.startswith("Fetch a web page")
    assert tool.parameters["required"] == ["url"] and list(tool.parameters["properties"]) == ["url", "start"]
    assert len(registry_for(WebFetchConfig(enabled=False))) == 0


def test_a_bad_allow_private_entry_is_refused_with_its_key(tmp_path: Path) -> None:
    path = tmp_path / "picoagent.yaml"
    path.write_text("tools:\n  web_fetch:\n    allow_private: [192.168.1.20, 10.0.0.0/8, 192.168.1.300]\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert info.value.message.startswith("tools.web_fetch.allow_private[2]: expected an IP address or network")
    assert '"192.168.1.300"' in info.value.message
    path.write_text("tools:\n  web_fetch:\n    allow_private: [192.168.1.20, 10.0.0.0/8, 'fd00::/8']\n")
    assert load_config(path, environ={}).tools.web_fetch.allow_private[2] == "fd00::/8"


def test_registering_the_tool_and_a_cloud_route_does_not_import_aiohttp(tmp_path: Path) -> None:
    """aiohttp costs ~0.1 s to import: a one-shot `chat -m` registers web_fetch and may route to the cloud,
    and pays for it only when a page is fetched or a provider called."""
    import subprocess
    import sys

    from tests.helpers import ROOT

    script = f"""
import sys
from appliance.config import load_config
from appliance.runtime import base_registry
from appliance.agent.escalation import CloudRoute  # and through it the cloud providers
config = load_config({str(ROOT / "config/picoagent.yaml")!r}, data_dir={str(tmp_path)!r})
registry = base_registry(config)
assert "web_fetch" in registry.tools, sorted(registry.tools)
print("aiohttp loaded:", "aiohttp" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "aiohttp loaded: False" in out.stdout
