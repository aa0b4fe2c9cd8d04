"""web_fetch's client: the aiohttp connection behind the tool, with the guard where connections are made.

The connector resolves host names through :class:`GuardedResolver`, which refuses a name when any of
its addresses is refused by the policy (:mod:`appliance.tools.web_policy`) and hands the connector
exactly the addresses it checked (numeric, so nothing is looked up again): a name that resolves to a
public address for the check and to 127.0.0.1 for the connection (DNS rebinding) has no second lookup
to exploit. Redirects are followed by hand, each new URL checked again. :func:`request_service` makes
web_search's one request to its engine the same way, with the engine's configured host and port (the
owner's choice, often a SearXNG on the LAN) exempt from the policy and no redirect followed. Imported
when a page is first fetched: aiohttp costs ~0.1 s to import, which a one-shot `chat -m` need not pay.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import ipaddress
import logging
import re
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from appliance.config import WebFetchConfig
from appliance.errors import ToolError
from appliance.tools.html_text import html_to_text
from appliance.tools.own_network import PROC_NET, OwnNetworks, read_own_networks
from appliance.tools.web_policy import (
    _METADATA_NAMES,
    AddrInfo,
    HostCheck,
    IPNetwork,
    Lookup,
    _refusal,
    allowed_networks,
    check_url,
    refused_address,
)

log = logging.getLogger(__name__)

USER_AGENT = "picoagent-web-fetch/0.1"
_ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.1"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-ndjson",
        "application/csv",
    }
)


async def _system_lookup(host: str, port: int, family: int) -> Sequence[AddrInfo]:
    loop = asyncio.get_running_loop()
    return await loop.getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM)  # on a thread


class GuardedResolver(AbstractResolver):
    """Resolves a host for the connector, refusing it when any of its addresses is refused.

    The connector connects to the numeric addresses returned here, so the addresses checked are the
    addresses used. ``lookup`` replaces getaddrinfo (tests point made-up names at local servers);
    ``own``: the Pi's own networks, refused like private ones; ``exempt``: the one (host, port) the
    owner configured as a service to reach wherever it is (web_search's SearXNG on the LAN).
    """

    def __init__(
        self,
        allow: Sequence[IPNetwork] = (),
        lookup: Lookup | None = None,
        own: OwnNetworks | None = None,
        exempt: tuple[str, int] | None = None,
    ) -> None:
        self.allow = list(allow)
        self.lookup = lookup or _system_lookup
        self.own = own
        self.exempt = exempt  # (host, port) the owner configured (web_search's engine): any address of it

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """The checked addresses of ``host``, or ToolError naming the refused one."""
        name = host.rstrip(".").lower()
        if name in _METADATA_NAMES:
            raise _refusal(name, None, "a cloud metadata service")
        try:
            infos = await self.lookup(host, port, family)
        except socket.gaierror as exc:
            raise ToolError(f"cannot find the host {host}: {exc.strerror or exc}") from None
        results: list[ResolveResult] = []
        for info_family, _, proto, _, sockaddr in infos:
            address = str(sockaddr[0])
            if info_family == socket.AF_INET6 and len(sockaddr) > 3 and sockaddr[3]:
                address = f"{address.split('%')[0]}%{sockaddr[3]}"
            ip = ipaddress.ip_address(address)
            reason = None if (name, port) == self.exempt else refused_address(ip, self.allow, own=self.own)
            if reason:
                raise _refusal(name, ip, reason)
            results.append(
                ResolveResult(
                    hostname=host,
                    host=address,
                    port=int(sockaddr[1]),
                    family=int(info_family),
                    proto=proto,
                    flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
                )
            )
        if not results:
            raise ToolError(f"cannot find the host {host}: it has no address")
        return results

    async def close(self) -> None:
        """Nothing to release."""


# --- fetching ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """A fetched page, as text."""

    url: str
    status: int
    reason: str
    content_type: str
    title: str
    text: str
    truncated: bool
    redirects: int

    def for_model(self, start: int = 0) -> str:
        """A header line (URL, status, type, size, cuts), the title, then the text from ``start``."""
        facts = [f"{self.status} {self.reason}".strip(), self.content_type or "no content type"]
        if self.redirects:
            facts.append(f"after {self.redirects} redirect{'s' if self.redirects > 1 else ''}")
        if self.truncated:
            facts.append("only the start of the page was read (it is larger than web_fetch reads)")
        facts.append(f"{len(self.text)} characters of text")
        if start:
            if start >= len(self.text):
                raise ToolError(f"start={start} is past the end: the page has {len(self.text)} characters of text")
            facts.append(f"from character {start}")
        lines = [f"{self.url} — {', '.join(facts)}"]
        if self.title:
            lines.append(f"Title: {self.title}")
        body = self.text[start:] if self.text else "(the page has no text; it may need JavaScript to show any)"
        return "\n".join(lines) + "\n\n" + body


def _kind(content_type: str, head: bytes) -> str:
    """html, text or binary, from the content type (or the first bytes when there is none)."""
    if not content_type:
        if b"\x00" in head[:1024]:
            return "binary"
        return "html" if re.search(rb"<(!doctype html|html|head|body)\b", head[:1024], re.IGNORECASE) else "text"
    if content_type in _HTML_TYPES:
        return "html"
    if content_type.startswith("text/") or content_type in _TEXT_TYPES:
        return "text"
    if content_type.endswith(("+json", "+xml")):
        return "text"
    return "binary"


def _charset(declared: str | None, body: bytes, kind: str) -> str:
    """The header's charset, else an HTML <meta charset>, else UTF-8; only codecs Python knows."""
    candidates = [declared]
    if kind == "html":
        match = re.search(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_.:-]+)""", body[:4096], re.IGNORECASE)
        if match:
            candidates.append(match.group(1).decode("ascii"))
    for name in candidates:
        if name:
            try:
                return codecs.lookup(name).name
            except LookupError:
                continue
    return "utf-8"


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 1_000_000 else f"{n / 1000:.0f} kB" if n >= 1000 else f"{n} bytes"


async def _read(response: aiohttp.ClientResponse, config: WebFetchConfig, redirects: int) -> Page:
    url = str(response.url)
    reason = response.reason or ""
    if not 200 <= response.status < 300:
        raise ToolError(f"{url} answered {response.status} {reason}".strip())
    declared = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if declared and _kind(declared, b"") == "binary":
        length = response.content_length
        size = f", {_size(length)}" if length is not None else ""
        raise ToolError(f"{url} is {declared}{size}, not text: web_fetch reads HTML, plain text, JSON and XML")
    body = bytearray()
    truncated = False
    async for chunk in response.content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) > config.max_bytes:
            del body[config.max_bytes :]
            truncated = True
            break
    kind = _kind(declared, bytes(body[:1024]))
    if kind == "binary":
        raise ToolError(f"{url} is binary data ({_size(len(body))}), not text")
    decoded = bytes(body).decode(_charset(response.charset, bytes(body), kind), errors="replace")
    title, text = "", decoded.replace("\r\n", "\n").strip()
    if kind == "html":  # a 2 MB page takes a while to parse on a Pi: not on the event loop
        title, text = await asyncio.to_thread(html_to_text, decoded, base_url=url)
    log.debug("fetched %s: %s, %d bytes", url, declared, len(body))
    return Page(url, response.status, reason, declared, title, text, truncated, redirects)


async def _follow(
    target: URL,
    config: WebFetchConfig,
    allow: Sequence[IPNetwork],
    lookup: Lookup | None,
    own: OwnNetworks,
    host_check: HostCheck | None,
) -> Page:
    connector = aiohttp.TCPConnector(resolver=GuardedResolver(allow, lookup, own), use_dns_cache=False)
    headers = {"User-Agent": USER_AGENT, "Accept": _ACCEPT}
    # trust_env=False: a proxy from the environment would do its own lookups, past the guard.
    async with aiohttp.ClientSession(connector=connector, headers=headers, trust_env=False) as session:
        current, previous = target, None
        for redirects in range(config.max_redirects + 1):
            try:
                if host_check is not None:
                    host_check(current.host or "")
                async with session.get(current, allow_redirects=False) as response:
                    location = response.headers.get("Location")
                    if response.status not in _REDIRECTS or not location:
                        return await _read(response, config, redirects)
            except ToolError as exc:  # refused by the resolver, or a bad answer: say which redirect led there
                if previous is None:
                    raise
                raise ToolError(f"{exc.message} (reached by a redirect from {previous})") from None
            try:
                following = current.join(URL(location))
            except (ValueError, TypeError):
                raise ToolError(f"{current} redirected to an invalid URL: {location[:200]!r}") from None
            try:
                current, previous = check_url(str(following), allow, own), current
            except ToolError as exc:
                raise ToolError(f"{current} redirected to {str(following)[:200]}: {exc.message}") from None
        raise ToolError(f"{target} redirected more than {config.max_redirects} times (the last to {current})")


async def fetch_page(
    url: str,
    config: WebFetchConfig,
    *,
    lookup: Lookup | None = None,
    proc_net: Path = PROC_NET,
    host_check: HostCheck | None = None,
) -> Page:
    """Fetch ``url`` within the config's limits and address policy; every failure is a ToolError.

    ``proc_net``: where the kernel lists the Pi's own networks (tests give a made-up home network).
    ``host_check``: asked before each hop, redirects included (the turn's trust, once outside text is in it).
    """
    allow = allowed_networks(config.allow_private)
    own = read_own_networks(proc_net)
    target = check_url(url, allow, own)
    with _tool_errors(str(target), config.timeout_s, "fetching"):
        async with asyncio.timeout(config.timeout_s):
            return await _follow(target, config, allow, lookup, own, host_check)


@contextlib.contextmanager
def _tool_errors(where: str, timeout_s: float, doing: str) -> Iterator[None]:
    """A request's failures (time, TLS, connection, protocol) as ToolErrors that say what went wrong."""
    try:
        yield
    except TimeoutError:
        raise ToolError(f"{where} did not answer within {timeout_s:g} s") from None
    except aiohttp.ClientConnectorCertificateError as exc:
        raise ToolError(f"{exc.host} has no valid TLS certificate: {exc.certificate_error}") from None
    except aiohttp.ClientConnectorError as exc:
        raise ToolError(f"cannot connect to {exc.host}:{exc.port}: {exc.os_error.strerror or exc}") from None
    except aiohttp.ClientError as exc:
        raise ToolError(f"{doing} {where} failed: {str(exc) or type(exc).__name__}") from None


# --- one request to a configured service (web_search's engine) -----------------------------------


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, read whole up to a limit: what a search engine said."""

    url: str
    status: int
    reason: str
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool
    retry_after: str = ""
    location: str = ""

    def text(self) -> str:
        """The body as text (the declared charset, else UTF-8; bad bytes replaced)."""
        return self.body.decode(_charset(self.charset, self.body, "text"), errors="replace")


async def _answer(response: aiohttp.ClientResponse, max_bytes: int) -> Answer:
    body = bytearray()
    truncated = False
    async for chunk in response.content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) > max_bytes:
            del body[max_bytes:]
            truncated = True
            break
    return Answer(
        str(response.url),
        response.status,
        response.reason or "",
        response.headers.get("Content-Type", "").split(";")[0].strip().lower(),
        response.charset,
        bytes(body),
        truncated,
        response.headers.get("Retry-After", ""),
        response.headers.get("Location", ""),
    )


async def request_service(
    method: str,
    url: str,
    *,
    timeout_s: float,
    max_bytes: int,
    headers: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
    exempt: bool = False,
    lookup: Lookup | None = None,
    proc_net: Path = PROC_NET,
) -> Answer:
    """One request (no redirects followed) under the address policy; every failure is a ToolError.

    ``exempt``: the URL's host and port are the owner's configured choice (a SearXNG on the LAN) and
    may be any address; without it the request is guarded like a page fetch. A redirect is returned
    as it is (``location``), never followed: a service's API does not redirect, and following one
    would carry the exemption nowhere or somewhere it was not given.
    """
    own = read_own_networks(proc_net)
    parsed = URL(url)
    host = (parsed.host or "").rstrip(".").lower()
    allow: list[IPNetwork] = []
    if exempt:
        with contextlib.suppress(ValueError):  # a literal address never reaches the resolver: allow it here
            allow = [ipaddress.ip_network(host)]
    target = check_url(url, allow, own)
    resolver = GuardedResolver((), lookup, own, exempt=(host, target.port or 0) if exempt else None)
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False)
    sent = {"User-Agent": USER_AGENT, **(headers or {})}
    where = f"{target.scheme}://{target.host}" + (f":{target.explicit_port}" if target.explicit_port else "")
    with _tool_errors(where, timeout_s, "asking"):
        async with (
            asyncio.timeout(timeout_s),
            aiohttp.ClientSession(connector=connector, headers=sent, trust_env=False) as session,
            session.request(method, target, data=form, allow_redirects=False) as response,
        ):
            return await _answer(response, max_bytes)
