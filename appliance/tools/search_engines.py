"""web_search's engines: the request each backend makes, and how its answer becomes results.

Three protocols, one request each, through the guarded client (:func:`appliance.tools.web_client.request_service`):

- SearXNG: ``GET {url}/search?q=...&format=json`` → ``results: [{title, url, content}]``. It usually runs
  on the LAN, where the guard refuses to go; the host and port of ``tools.web_search.url`` are the owner's
  own choice, so exactly that host:port is reached wherever it is. The result URLs are never fetched here.
- Brave Search API: ``GET {url}/res/v1/web/search?q=...&count=N`` with the key in ``X-Subscription-Token``
  → ``web.results: [{title, url, description}]`` (descriptions carry ``<strong>`` marks, taken out).
- DuckDuckGo's HTML page: ``POST {url}/html/`` with ``q`` → ``a.result__a`` (its href a
  ``//duckduckgo.com/l/?uddg=<url>`` redirect, unwrapped) and ``.result__snippet``, read with the stdlib
  HTML parser. Ads (links into duckduckgo.com itself) are left out.

Without ``url`` a backend goes to its public address with the full guard (its DNS answer checked like a
page's). Imported when a search is made: the idle daemon does not hold aiohttp or the parser.
"""

from __future__ import annotations

import html
import json
import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from appliance.config import WebSearchConfig
from appliance.errors import ToolError
from appliance.tools.own_network import PROC_NET
from appliance.tools.web_client import Answer, request_service
from appliance.tools.web_policy import Lookup

log = logging.getLogger(__name__)

PUBLIC_URL = {"duckduckgo": "https://html.duckduckgo.com", "brave": "https://api.search.brave.com"}
NAMES = {"duckduckgo": "DuckDuckGo", "brave": "the Brave Search API", "searxng": "SearXNG"}
MAX_BYTES = 1_000_000  # a page of results is ~30 kB (DuckDuckGo's HTML); JSON answers are smaller
TITLE_CHARS = 200
SNIPPET_CHARS = 320
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class SearchResult:
    """One hit: its title, its address and what the engine quotes of it."""

    title: str
    url: str
    snippet: str

    def as_dict(self) -> dict[str, str]:
        """The result as the model reads it."""
        return {"title": self.title, "url": self.url, "snippet": self.snippet}


def _clean(text: Any, limit: int) -> str:
    """Engine text as one plain line: tags out, entities read, spaces folded, cut at ``limit``."""
    if not isinstance(text, str):
        return ""
    plain = _SPACE.sub(" ", html.unescape(_TAG.sub("", text))).strip()
    return plain if len(plain) <= limit else plain[: limit - 1].rstrip() + "…"


def _result(title: Any, url: Any, snippet: Any) -> SearchResult | None:
    """A result worth showing: an http(s) address; None otherwise."""
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        return None
    return SearchResult(_clean(title, TITLE_CHARS) or url, url, _clean(snippet, SNIPPET_CHARS))


# --- the answers -----------------------------------------------------------------------------------


def _json(answer: Answer, backend: str) -> Any:
    if answer.truncated:
        raise ToolError(f"{NAMES[backend]} answered more than {MAX_BYTES // 1000} kB; that is no page of results")
    try:
        return json.loads(answer.body)
    except ValueError:
        kind = answer.content_type or "no content type"
        raise ToolError(
            f"{NAMES[backend]}'s answer is not the JSON expected ({kind}, {len(answer.body)} bytes); "
            "the search did not work, try again later"
        ) from None


def _searxng(answer: Answer) -> list[SearchResult]:
    data = _json(answer, "searxng")
    items = data.get("results") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ToolError("SearXNG's answer has no results list; is tools.web_search.url a SearXNG instance?")
    found = [_result(i.get("title"), i.get("url"), i.get("content")) for i in items if isinstance(i, dict)]
    return [r for r in found if r is not None]


def _brave(answer: Answer) -> list[SearchResult]:
    data = _json(answer, "brave")
    if not isinstance(data, dict):
        raise ToolError("the Brave Search API's answer is not an object")
    web = data.get("web")
    items = web.get("results") if isinstance(web, dict) else []  # no "web" at all: nothing found
    if not isinstance(items, list):
        raise ToolError("the Brave Search API's answer has no web.results list")
    found = [_result(i.get("title"), i.get("url"), i.get("description")) for i in items if isinstance(i, dict)]
    return [r for r in found if r is not None]


def unwrap_duckduckgo(href: str) -> str:
    """The address behind a DuckDuckGo result link (``//duckduckgo.com/l/?uddg=<url>``); others as they are."""
    link = href.strip()
    if link.startswith("//"):
        link = "https:" + link
    parts = urlsplit(link)
    if parts.netloc.endswith("duckduckgo.com") and parts.path == "/l/":
        target = parse_qs(parts.query).get("uddg")
        if target:
            return target[0]
    return link


class _DuckDuckGoPage(HTMLParser):
    """The results of DuckDuckGo's HTML page: each ``a.result__a`` and the ``.result__snippet`` after it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hits: list[list[str]] = []  # [title, href, snippet]
        self.challenge = False
        self._field = -1  # 0: reading a title, 2: a snippet, -1: neither
        self._tag = ""
        self._depth = 0
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._field >= 0:
            self._depth += tag == self._tag
            return
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        if "anomaly-modal__modal" in classes or found.get("id") == "challenge-form":
            self.challenge = True
        if tag == "a" and "result__a" in classes:
            self.hits.append(["", found.get("href") or "", ""])
            self._start(0, tag)
        elif "result__snippet" in classes and self.hits and not self.hits[-1][2]:
            self._start(2, tag)

    def _start(self, field: int, tag: str) -> None:
        self._field, self._tag, self._depth, self._text = field, tag, 0, []

    def handle_endtag(self, tag: str) -> None:
        if self._field < 0 or tag != self._tag:
            return
        if self._depth:
            self._depth -= 1
            return
        self.hits[-1][self._field] = "".join(self._text)
        self._field = -1

    def handle_data(self, data: str) -> None:
        if self._field >= 0:
            self._text.append(data)


def _duckduckgo(answer: Answer) -> list[SearchResult]:
    page = _DuckDuckGoPage()
    page.feed(answer.text())
    page.close()
    if page.challenge or (answer.status == 202 and not page.hits):
        raise ToolError(
            "DuckDuckGo answered with a bot check instead of results (it blocks automated searches at "
            "times); try again in a few minutes, or the owner can set tools.web_search.backend to searxng "
            "or brave"
        )
    results = []
    for title, href, snippet in page.hits:
        url = unwrap_duckduckgo(href)
        if urlsplit(url).netloc.endswith("duckduckgo.com"):  # an ad: its link goes through duckduckgo.com/y.js
            continue
        hit = _result(title, url, snippet)
        if hit is not None:
            results.append(hit)
    return results


# --- asking ------------------------------------------------------------------------------------------


def _refused(answer: Answer, backend: str) -> ToolError | None:
    """The error for an answer that is not results (a status other than 2xx), else None."""
    status, name = answer.status, NAMES[backend]
    if 200 <= status < 300:
        return None
    said = f"{name} answered {status} {answer.reason}".strip()
    if status == 429:
        wait = f"{answer.retry_after} seconds" if answer.retry_after.isdigit() else "a minute"
        return ToolError(f"{said}: too many searches; try again in {wait}")
    if status in (301, 302, 303, 307, 308):
        where = answer.location[:200] or "elsewhere"
        return ToolError(f"{said}, a redirect to {where}: the owner can set tools.web_search.url to where it points")
    if backend == "brave" and status in (401, 403):
        return ToolError(f"{said}: the API key was refused; the owner can check tools.web_search.api_key")
    if backend == "searxng" and status == 403:
        return ToolError(
            f"{said}: the instance does not serve JSON; the owner can turn it on in its settings.yml "
            "(search: formats: [html, json])"
        )
    if status >= 500 or status == 408:
        return ToolError(f"{said}: the engine is in trouble; try again later")
    return ToolError(said)


async def search(
    config: WebSearchConfig, query: str, count: int, *, lookup: Lookup | None = None, proc_net: Path = PROC_NET
) -> list[SearchResult]:
    """Up to ``count`` results for ``query`` from the configured engine; every failure is a ToolError."""
    backend = config.backend
    if backend not in NAMES:
        raise ToolError("web search is off (tools.web_search.backend: off)")
    base = (config.url or PUBLIC_URL.get(backend, "")).rstrip("/")
    form: dict[str, str] | None = None
    headers = {"Accept": "application/json"}
    if backend == "searxng":
        method, url = "GET", f"{base}/search?" + urlencode({"q": query, "format": "json"})
    elif backend == "brave":
        method, url = "GET", f"{base}/res/v1/web/search?" + urlencode({"q": query, "count": count})
        headers["X-Subscription-Token"] = config.api_key
    else:
        method, url, form = "POST", f"{base}/html/", {"q": query}
        headers = {"Accept": "text/html"}
    try:
        answer = await request_service(
            method,
            url,
            timeout_s=config.timeout_s,
            max_bytes=MAX_BYTES,
            headers=headers,
            form=form,
            exempt=bool(config.url),
            lookup=lookup,
            proc_net=proc_net,
        )
        problem = _refused(answer, backend)
        if problem is not None:
            raise problem
        results = {"searxng": _searxng, "brave": _brave, "duckduckgo": _duckduckgo}[backend](answer)
    except ToolError as exc:
        message = exc.message if not config.api_key else exc.message.replace(config.api_key, "[redacted]")
        if not message.startswith(NAMES[backend]):
            message = f"searching with {NAMES[backend]} failed: {message}"
        log.info("web search: %s", message)
        raise ToolError(message) from None
    log.debug("web search: %d result(s) from %s", len(results), backend)
    return results[:count]
