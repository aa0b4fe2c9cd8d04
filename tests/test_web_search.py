"""web_search: the real tool, the real guarded client and a real aiohttp server speaking each engine's protocol.

The fake engines (tests/fakes/search_engines.py) listen on 127.0.0.1, an address the guard refuses: a
configured ``tools.web_search.url`` is the owner's own choice and is reached there; the same engine at
its public default address, resolved to the loopback, is refused, and nothing arrives.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from appliance.config import WebSearchConfig, load_config
from appliance.errors import ConfigError, ToolError
from appliance.tools import web_fetch
from appliance.tools.registry import Redactor, ToolRegistry, ToolTurn
from appliance.tools.result import ToolResult
from appliance.tools.search_engines import unwrap_duckduckgo
from appliance.tools.web_client import GuardedResolver
from appliance.tools.web_search import register
from tests.fakes.search_engines import BRAVE_KEY, Page, SearchEngines, serve_engines
from tests.fakes.web_server import allowed_config, fake_lookup, serve, text

T = TypeVar("T")


def run(main: Callable[[SearchEngines], Awaitable[T]]) -> tuple[SearchEngines, T]:
    """Run ``main`` with the fake engines up; their record and its answer."""

    async def go() -> tuple[SearchEngines, T]:
        async with serve_engines() as engines:
            return engines, await main(engines)

    return asyncio.run(go())


def registry_for(config: WebSearchConfig, secrets: tuple[str, ...] = (), **kw: Any) -> ToolRegistry:
    registry = ToolRegistry(redact=Redactor(secrets))
    register(registry, config, **kw)
    return registry


async def search(
    config: WebSearchConfig, turn: ToolTurn | None = None, secrets: tuple[str, ...] = (), **arguments: Any
) -> ToolResult:
    """web_search as the model calls it: through the registry."""
    return await registry_for(config, secrets).execute("web_search", arguments, timeout_s=10, turn=turn)


def results(result: ToolResult) -> list[dict[str, str]]:
    assert result.ok, result.error
    found = json.loads(result.output)
    assert isinstance(found, list)
    return found


# --- the three protocols ---------------------------------------------------------------------------


def test_searxng_on_the_lan_answers_results_marked_as_outside_text() -> None:
    engines, result = run(
        lambda e: search(WebSearchConfig(backend="searxng", url=e.url), query="plant  tomatoes", count=2)
    )
    assert results(result) == [
        {
            "title": "Planting tomatoes: when & how",
            "url": "https://garden.example.org/tomatoes?x=1&y=2",
            "snippet": "Plant tomatoes after the last frost, when the soil is warm.",
        },
        {
            "title": "Frost dates by region",
            "url": "https://weather.example.net/frost",
            "snippet": "Average last frost dates help decide when to plant tomatoes and peppers.",
        },
    ]
    assert result.outside == "web search results"  # the model must treat the snippets as data
    assert engines.requests == [
        {"method": "GET", "path": "/search", "q": "plant tomatoes", "format": "json", "count": "", "token": ""}
    ]


def test_a_searxng_named_by_host_is_reached_on_its_port_and_no_other() -> None:
    lookup = fake_lookup("127.0.0.1")

    async def main(engines: SearchEngines) -> ToolResult:
        port = int(engines.url.rsplit(":", 1)[1])
        config = WebSearchConfig(backend="searxng", url=f"http://searx.lan:{port}/")
        reg = registry_for(config, lookup=lookup)
        return await reg.execute("web_search", {"query": "raspberry"}, timeout_s=10)

    engines, result = run(main)
    assert [r["url"] for r in results(result)] == ["https://www.raspberrypi.com/documentation/"]
    assert len(engines.requests) == 1

    resolver = GuardedResolver(lookup=lookup, exempt=("searx.lan", 8888))
    assert asyncio.run(resolver.resolve("searx.lan", 8888))[0]["host"] == "127.0.0.1"
    for host, port in (("searx.lan", 22), ("other.lan", 8888)):
        with pytest.raises(ToolError, match="loopback"):
            asyncio.run(resolver.resolve(host, port))


def test_brave_sends_its_key_in_the_header_and_strips_the_highlighting() -> None:
    config = WebSearchConfig(backend="brave", url="", api_key=BRAVE_KEY)

    async def main(engines: SearchEngines) -> ToolResult:
        config.url = engines.url
        return await search(config, secrets=(BRAVE_KEY,), query="tomatoes", count=1)

    engines, result = run(main)
    assert results(result) == [
        {
            "title": "Planting tomatoes: when & how",
            "url": "https://garden.example.org/tomatoes?x=1&y=2",
            "snippet": "Plant tomatoes after the last frost, when the soil is warm.",
        }
    ]
    assert engines.requests[0]["token"] == BRAVE_KEY and engines.requests[0]["count"] == "1"
    assert engines.requests[0]["path"] == "/res/v1/web/search"


def test_a_refused_brave_key_is_said_without_the_key() -> None:
    wrong = "BSA-wrong-key-9876543210"
    _, result = run(
        lambda e: search(WebSearchConfig(backend="brave", url=e.url, api_key=wrong), secrets=(wrong,), query="x")
    )
    assert not result.ok
    assert result.error == (
        "the Brave Search API answered 401 Unauthorized: the API key was refused; the owner can check "
        "tools.web_search.api_key"
    )
    assert wrong not in result.for_model()


def test_brave_with_nothing_found_says_so() -> None:
    _, result = run(lambda e: search(WebSearchConfig(backend="brave", url=e.url, api_key=BRAVE_KEY), query="zeppelin"))
    assert result.ok and result.output == "no results for 'zeppelin'"


def test_duckduckgo_links_are_unwrapped_and_its_ads_left_out() -> None:
    engines, result = run(lambda e: search(WebSearchConfig(backend="duckduckgo", url=e.url), query="tomato"))
    found = results(result)
    assert [r["url"] for r in found] == [
        "https://garden.example.org/tomatoes?x=1&y=2",  # the uddg= redirect unwrapped, its & kept
        "https://en.wikipedia.org/wiki/Tomato",
        "https://weather.example.net/frost",
    ]
    assert found[1] == {
        "title": "Tomato - Wikipedia",
        "url": "https://en.wikipedia.org/wiki/Tomato",
        "snippet": "The tomato is the edible berry of the plant Solanum lycopersicum.",
    }
    assert found[0]["title"] == "Planting tomatoes: when & how"  # entities read
    assert engines.requests[0]["method"] == "POST" and engines.requests[0]["q"] == "tomato"
    assert result.outside == "web search results"


def test_unwrapping_a_duckduckgo_link() -> None:
    wrapped = "//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fa%3Fb%3Dc%26d%3De&rut=f00"
    assert unwrap_duckduckgo(wrapped) == "https://example.org/a?b=c&d=e"
    assert unwrap_duckduckgo("https://example.org/plain") == "https://example.org/plain"


# --- engines misbehaving ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "mode", "error"),
    [
        (
            "brave",
            "429",
            "the Brave Search API answered 429 Too Many Requests: too many searches; try again in 30 seconds",
        ),
        ("searxng", "429", "SearXNG answered 429 Too Many Requests: too many searches; try again in 30 seconds"),
        (
            "searxng",
            "malformed",
            "SearXNG's answer is not the JSON expected (application/json, 27 bytes); "
            "the search did not work, try again later",
        ),
        (
            "brave",
            "malformed",
            "the Brave Search API's answer is not the JSON expected (application/json, 27 bytes); "
            "the search did not work, try again later",
        ),
        (
            "duckduckgo",
            "challenge",
            "DuckDuckGo answered with a bot check instead of results (it blocks automated "
            "searches at times); try again in a few minutes, or the owner can set tools.web_search.backend to "
            "searxng or brave",
        ),
        (
            "duckduckgo",
            "redirect",
            "DuckDuckGo answered 302 Found, a redirect to http://127.0.0.1:9/elsewhere: "
            "the owner can set tools.web_search.url to where it points",
        ),
    ],
)
def test_an_engine_that_misbehaves_gives_a_clear_result(backend: str, mode: str, error: str) -> None:
    async def main(engines: SearchEngines) -> ToolResult:
        engines.mode = mode
        config = WebSearchConfig(backend=backend, url=engines.url, api_key=BRAVE_KEY)  # type: ignore[arg-type]
        return await search(config, secrets=(BRAVE_KEY,), query="tomatoes")

    engines, result = run(main)
    assert not result.ok
    assert result.error == error
    assert len(engines.requests) == 1  # a redirect is not followed


def test_searxng_without_its_json_format_says_how_to_turn_it_on() -> None:
    async def main(engines: SearchEngines) -> ToolResult:
        engines.mode = "json-off"  # an instance whose settings.yml lists only html
        return await search(WebSearchConfig(backend="searxng", url=engines.url), query="tomato")

    _, result = run(main)
    assert result.error == (
        "SearXNG answered 403 Forbidden: the instance does not serve JSON; the owner can turn it on in its "
        "settings.yml (search: formats: [html, json])"
    )


def test_an_engine_that_does_not_answer_in_time() -> None:
    async def main() -> ToolResult:
        server = await asyncio.start_server(lambda r, w: asyncio.sleep(3600), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            config = WebSearchConfig(backend="searxng", url=f"http://127.0.0.1:{port}", timeout_s=0.2)
            return await search(config, query="x")
        finally:
            server.close()

    result = asyncio.run(main())
    assert result.error is not None and result.error.endswith("did not answer within 0.2 s")
    assert result.error.startswith("searching with SearXNG failed: http://127.0.0.1:")


# --- the guard -------------------------------------------------------------------------------------


def test_the_public_default_address_is_guarded_like_any_page() -> None:
    """No url configured: html.duckduckgo.com resolving to the loopback is refused and nothing arrives."""

    async def main(engines: SearchEngines) -> ToolResult:
        reg = registry_for(WebSearchConfig(backend="duckduckgo"), lookup=fake_lookup("127.0.0.1"))
        return await reg.execute("web_search", {"query": "tomato"}, timeout_s=10)

    engines, result = run(main)
    assert not result.ok and result.error is not None
    assert "refused to fetch from html.duckduckgo.com (127.0.0.1): a loopback address" in result.error
    assert engines.requests == []


def test_secrets_in_results_are_redacted() -> None:
    secret = "hunter2-garden-token"

    async def main(engines: SearchEngines) -> ToolResult:
        engines.corpus = [Page("leak", "https://leak.example/", f"the token is {secret}")]
        return await search(WebSearchConfig(backend="searxng", url=engines.url), secrets=(secret,), query="leak")

    _, result = run(main)
    assert results(result)[0]["snippet"] == "the token is [redacted]"


def test_a_result_address_may_be_read_this_turn_but_no_other_host() -> None:
    """After a search the turn holds outside text: web_fetch reads a listed address as it is, nothing else."""

    async def main(engines: SearchEngines) -> tuple[ToolResult, ToolResult, ToolResult]:
        async with serve({"/article": text("Plant them in May.")}) as site:
            engines.corpus = [Page("When to plant", f"{site.url}/article", "Plant them in May.")]
            reg = registry_for(WebSearchConfig(backend="searxng", url=engines.url))
            web_fetch.register(reg, allowed_config(trusted_hosts=[]))
            turn = reg.turn("when should I plant tomatoes?")
            found = await reg.execute("web_search", {"query": "plant"}, timeout_s=10, turn=turn)
            listed = await reg.execute("web_fetch", {"url": f"{site.url}/article"}, timeout_s=10, turn=turn)
            changed = await reg.execute("web_fetch", {"url": f"{site.url}/article?q=secret"}, timeout_s=10, turn=turn)
            return found, listed, changed

    _, (found, listed, changed) = run(main)
    assert found.ok and listed.ok, listed.error
    assert listed.output.endswith("Plant them in May.")
    assert not changed.ok and changed.error is not None
    assert changed.error.startswith("refused to fetch from 127.0.0.2: this turn read web search results")


# --- the tool's arguments and config ---------------------------------------------------------------


def test_arguments_are_checked_and_count_capped() -> None:
    async def main(engines: SearchEngines) -> list[ToolResult]:
        engines.corpus = [Page(f"tomato {i}", f"https://t{i}.example/", "tomato") for i in range(15)]
        config = WebSearchConfig(backend="searxng", url=engines.url)
        return [
            await search(config, query="   "),
            await search(config, query="tomato", count=0),
            await search(config, query="tomato", count=50),
            await search(config, query="tomato"),
        ]

    engines, (empty, zero, many, default) = run(main)
    assert empty.error == "the query is empty: say what to search for"
    assert zero.error == "count must be 1 or more"
    assert len(results(many)) == 10
    assert len(results(default)) == 5  # tools.web_search.max_results
    assert len(engines.requests) == 2


def test_off_means_no_tool() -> None:
    assert "web_search" not in registry_for(WebSearchConfig(backend="off")).tools
    assert "web_search" in registry_for(WebSearchConfig()).tools  # duckduckgo by default


def test_the_config_says_what_each_backend_needs(tmp_path: Path) -> None:
    def load(section: str) -> None:
        path = tmp_path / "c.yaml"
        path.write_text(f"data_dir: {tmp_path}\ntools:\n  web_search:\n{section}")
        load_config(str(path))

    with pytest.raises(ConfigError, match=r"tools.web_search.url: the searxng backend needs your instance's address"):
        load("    backend: searxng\n")
    with pytest.raises(ConfigError, match=r"tools.web_search.api_key: the brave backend needs an API key"):
        load("    backend: brave\n")
    with pytest.raises(ConfigError, match=r"tools.web_search.url: expected an http:// or https:// base URL"):
        load("    backend: searxng\n    url: 192.168.1.30:8888\n")
    with pytest.raises(ConfigError, match=r"tools.web_search.max_results: expected 1 to 10, got 11"):
        load("    max_results: 11\n")
    load("    backend: searxng\n    url: http://192.168.1.30:8888\n")
