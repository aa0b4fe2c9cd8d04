"""The web_search tool: a few results (title, address, snippet) from the search engine the owner chose.

The engine is ``tools.web_search.backend``: DuckDuckGo's HTML page by default (no key, no setup: the
appliance searches out of the box; DuckDuckGo sometimes answers automated searches with a bot check,
and the tool then says so and names the other backends), a SearXNG instance (usually on the LAN: its
configured host and port are reached though the guard refuses the LAN to everything else) or the
Brave Search API (a key). How each is asked lives in :mod:`appliance.tools.search_engines`, imported at
the first search, so registering the tool costs the idle daemon nothing.

Results are outside text, like a fetched page: the snippets are written by whoever wrote the pages, so
once they are in a turn, device writes wait for approval and web_fetch is held to named hosts
(:mod:`appliance.tools.trust`), except the result addresses themselves, which web_fetch may read as
they are (their URL carries nothing from the conversation). Secrets are redacted from every result by
the registry, and the API key is never part of an error.
"""

from __future__ import annotations

from pathlib import Path

from appliance.config import WebSearchConfig
from appliance.errors import ToolError
from appliance.tools.own_network import PROC_NET
from appliance.tools.registry import ToolRegistry, current_turn
from appliance.tools.web_policy import Lookup

MAX_COUNT = 10
ENGINES = {"duckduckgo": "DuckDuckGo's HTML page", "searxng": "SearXNG", "brave": "the Brave Search API"}
MAX_QUERY_CHARS = 400


def register(
    registry: ToolRegistry, config: WebSearchConfig, *, lookup: Lookup | None = None, proc_net: Path = PROC_NET
) -> None:
    """Register web_search (read-only) unless tools.web_search.backend is off (``lookup``: tests' DNS)."""
    if config.backend == "off":
        return

    async def web_search(query: str, count: int = config.max_results) -> list[dict[str, str]] | str:
        """Search the web: a list of results, each with its title, url and a short snippet.

        Examples: search the web for the best time to plant tomatoes; look up today's news about the
        railway strike; find the opening hours of the town library

        Args:
            query: what to search for, in a few words
            count: how many results to give, 1 to 10
        """
        words = " ".join(query.split())
        if not words:
            raise ToolError("the query is empty: say what to search for")
        if len(words) > MAX_QUERY_CHARS:
            raise ToolError(f"the query is too long ({len(words)} characters; at most {MAX_QUERY_CHARS})")
        if count < 1:
            raise ToolError("count must be 1 or more")

        from appliance.tools.search_engines import search  # aiohttp and the parsers, only once a search is made

        results = await search(config, words, min(count, MAX_COUNT), lookup=lookup, proc_net=proc_net)
        turn = current_turn()
        if turn is not None:
            turn.trust.listed.update(r.url for r in results)
        if not results:
            return f"no results for {words!r}"
        return [r.as_dict() for r in results]

    # Not cached: a reused answer would not list its addresses in the new turn's trust.
    registry.register(web_search, read_only=True, outside="web search results")
