"""One fake search server speaking the three protocols web_search uses, on 127.0.0.1 (a real aiohttp site).

- SearXNG: ``GET /search?q=...&format=json`` → ``{"query", "results": [{"title", "url", "content", "engine"}]}``;
  any other format is 403, as a real instance answers when its settings.yml does not list it.
- Brave Search API: ``GET /res/v1/web/search?q=...&count=N`` with ``X-Subscription-Token`` →
  ``{"type": "search", "web": {"results": [{"title", "url", "description"}]}}`` (matches in ``<strong>``,
  entities escaped, as Brave sends them); a wrong key is 401, no hit leaves out ``web`` as Brave does.
- DuckDuckGo's HTML page: ``POST /html/`` (form ``q``) → the page its html endpoint serves: each result an
  ``a.result__a`` whose href is a ``//duckduckgo.com/l/?uddg=<url>&rut=...`` redirect, a
  ``.result__snippet`` with ``<b>`` marks, and an ad first (``result--ad``, its link into ``duckduckgo.com/y.js``).

The server searches a small corpus (a hit: every word of the query in its title or snippet) and records
each request. ``mode`` makes it misbehave the ways real engines do: ``"429"`` (rate limited, with
Retry-After), ``"malformed"`` (a JSON answer cut off), ``"challenge"`` (DuckDuckGo's bot check, a 202),
``"redirect"`` (a 302 elsewhere), ``"json-off"`` (a SearXNG whose settings list only html).
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import quote

from aiohttp import web

HOST = "127.0.0.1"
BRAVE_KEY = "BSA-test-key-0123456789"


@dataclass(frozen=True)
class Page:
    """A page the engines know."""

    title: str
    url: str
    snippet: str


CORPUS = (
    Page(
        "Planting tomatoes: when & how",
        "https://garden.example.org/tomatoes?x=1&y=2",
        "Plant tomatoes after the last frost, when the soil is warm.",
    ),
    Page(
        "Tomato - Wikipedia",
        "https://en.wikipedia.org/wiki/Tomato",
        "The tomato is the edible berry of the plant Solanum lycopersicum.",
    ),
    Page(
        "Frost dates by region",
        "https://weather.example.net/frost",
        "Average last frost dates help decide when to plant tomatoes and peppers.",
    ),
    Page(
        "Raspberry Pi documentation",
        "https://www.raspberrypi.com/documentation/",
        "The official documentation for Raspberry Pi computers.",
    ),
)


@dataclass
class SearchEngines:
    """The fake's state: the pages it knows, how it behaves now, and what it was asked."""

    url: str = ""
    corpus: list[Page] = field(default_factory=lambda: list(CORPUS))
    mode: str = "ok"  # ok | 429 | malformed | challenge | redirect | json-off
    requests: list[dict[str, str]] = field(default_factory=list)

    def find(self, query: str) -> list[Page]:
        """The pages holding every word of the query."""
        words = query.lower().split()
        return [p for p in self.corpus if all(w in (p.title + " " + p.snippet).lower() for w in words)]

    def _misbehave(self, json_api: bool) -> web.Response | None:
        if self.mode == "429":
            return web.json_response({"error": "rate limited"}, status=429, headers={"Retry-After": "30"})
        if self.mode == "redirect":
            return web.Response(status=302, headers={"Location": "http://127.0.0.1:9/elsewhere"})
        if self.mode == "malformed" and json_api:
            return web.Response(body=b'{"results": [{"title": "cut', content_type="application/json")
        return None

    async def searxng(self, request: web.Request) -> web.Response:
        """SearXNG's /search."""
        self._record(request, request.query.get("q", ""))
        if request.query.get("format") != "json" or self.mode == "json-off":
            return web.Response(status=403, text="403 Forbidden")
        bad = self._misbehave(json_api=True)
        if bad is not None:
            return bad
        query = request.query.get("q", "")
        results = [{"title": p.title, "url": p.url, "content": p.snippet, "engine": "fake"} for p in self.find(query)]
        return web.json_response({"query": query, "number_of_results": len(results), "results": results})

    async def brave(self, request: web.Request) -> web.Response:
        """The Brave Search API's /res/v1/web/search."""
        self._record(request, request.query.get("q", ""))
        if request.headers.get("X-Subscription-Token") != BRAVE_KEY:
            return web.json_response(
                {"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID", "status": 401}}, status=401
            )
        bad = self._misbehave(json_api=True)
        if bad is not None:
            return bad
        query = request.query.get("q", "")
        count = int(request.query.get("count", "20"))
        found = self.find(query)[:count]
        body: dict[str, object] = {"type": "search", "query": {"original": query}}
        if found:
            body["web"] = {
                "type": "search",
                "results": [
                    {"title": html.escape(p.title), "url": p.url, "description": _mark(p.snippet, query, "strong")}
                    for p in found
                ],
            }
        return web.json_response(body)

    async def duckduckgo(self, request: web.Request) -> web.Response:
        """DuckDuckGo's /html/ (the form posts q)."""
        form = await request.post()
        query = str(form.get("q", ""))
        self._record(request, query)
        bad = self._misbehave(json_api=False)
        if bad is not None:
            return bad
        if self.mode == "challenge":
            page = (
                '<html><body><div class="anomaly-modal__modal" data-testid="anomaly-modal">'
                "<p>Unfortunately, bots use DuckDuckGo too.</p></div>"
                '<form id="challenge-form" action="/anomaly.js"></form></body></html>'
            )
            return web.Response(text=page, status=202, content_type="text/html")
        blocks = [
            '<div class="result results_links results_links_deep result--ad">'
            '<h2 class="result__title"><a rel="nofollow" class="result__a" '
            'href="https://duckduckgo.com/y.js?ad_domain=ads.example&amp;ad_provider=x">Buy seeds now</a></h2>'
            '<a class="result__snippet" href="https://duckduckgo.com/y.js?ad_domain=ads.example">Sponsored.</a></div>'
        ]
        for p in self.find(query):
            href = "//duckduckgo.com/l/?uddg=" + quote(p.url, safe="") + "&amp;rut=abc123"
            blocks.append(
                '<div class="result results_links results_links_deep web-result">'
                '<div class="links_main links_deep result__body">'
                '<h2 class="result__title">'
                f'<a rel="nofollow" class="result__a" href="{href}">{html.escape(p.title)}</a></h2>'
                f'<div class="result__extras"><a class="result__url" href="{href}">{html.escape(p.url)}</a></div>'
                f'<a class="result__snippet" href="{href}">{_mark(p.snippet, query, "b")}</a>'
                "</div></div>"
            )
        if len(blocks) == 1:
            blocks.append('<div class="no-results">No results.</div>')
        page = (
            '<!DOCTYPE html><html><head><meta charset="UTF-8"><title>' + html.escape(query) + " at DuckDuckGo</title>"
            '</head><body><div id="links" class="results">' + "".join(blocks) + "</div></body></html>"
        )
        return web.Response(text=page, content_type="text/html", charset="utf-8")

    def _record(self, request: web.Request, query: str) -> None:
        self.requests.append(
            {
                "method": request.method,
                "path": request.path,
                "q": query,
                "format": request.query.get("format", ""),
                "count": request.query.get("count", ""),
                "token": request.headers.get("X-Subscription-Token", ""),
            }
        )


def _mark(text: str, query: str, tag: str) -> str:
    """The snippet escaped, each query word wrapped in ``tag``, as the engines highlight matches."""
    out = html.escape(text)
    for word in set(query.split()):
        out = out.replace(word, f"<{tag}>{word}</{tag}>")
    return out


@contextlib.asynccontextmanager
async def serve_engines(host: str = HOST) -> AsyncIterator[SearchEngines]:
    """The fake search server on host:random port; ``engines.url`` is its base URL."""
    engines = SearchEngines()
    app = web.Application()
    app.router.add_get("/search", engines.searxng)
    app.router.add_get("/res/v1/web/search", engines.brave)
    app.router.add_post("/html/", engines.duckduckgo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, 0).start()
    engines.url = f"http://{host}:{runner.addresses[0][1]}"
    try:
        yield engines
    finally:
        await runner.cleanup()
