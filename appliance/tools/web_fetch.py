"""The web_fetch tool: a web page as text, without ever reaching the Pi's own network.

The guard against server-side request forgery sits where the connection is made
(:mod:`appliance.tools.web_client`): every address a host name resolves to is checked against the policy
(:mod:`appliance.tools.web_policy`: loopback, private, link-local, site-local, metadata or otherwise not
public, or one of the Pi's own networks as the kernel lists them, :mod:`appliance.tools.own_network`: on
IPv6 the router and the NAS have global addresses), and the connection goes to exactly the addresses
checked. Literal IP addresses in URLs are checked by ``check_url``; redirects are followed by hand, each
new URL checked again.

A page is outside text that may carry orders (:mod:`appliance.tools.trust`): once one is in the turn,
each hop of a later fetch must also go to a host the person named or ``tools.web_fetch.trusted_hosts``
lists, so a page cannot send the conversation to a host of its choosing, not even through a redirect.
"""

from __future__ import annotations

from pathlib import Path

from appliance.config import WebFetchConfig
from appliance.errors import ToolError
from appliance.tools.own_network import PROC_NET
from appliance.tools.registry import ToolRegistry, current_turn
from appliance.tools.web_policy import allowed_networks


def register(registry: ToolRegistry, config: WebFetchConfig, *, proc_net: Path = PROC_NET) -> None:
    """Register web_fetch (read-only) when tools.web_fetch.enabled is on (``proc_net``: see fetch_page)."""
    if not config.enabled:
        return
    allowed_networks(config.allow_private)  # a bad entry fails now, not at the first fetch

    async def web_fetch(url: str, start: int = 0) -> str:
        """Fetch a web page (http or https) and read it as text: title, headings, paragraphs and links.

        Examples: what does this page say https://example.org; read the article at this link

        Args:
            url: the full address, e.g. https://example.com/page
            start: the character of the page's text to begin at, to read on where an earlier answer was cut
        """
        if start < 0:
            raise ToolError("start must be 0 or more")
        turn = current_turn()
        # A search result's own address, unchanged, carries nothing from the context to its host.
        listed = turn is not None and url.strip() in turn.trust.listed

        def host_check(host: str) -> None:
            if turn is not None and not listed:  # a page already read this turn may be what asks for this fetch
                turn.trust.check_host(host, config.trusted_hosts)

        from appliance.tools.web_client import fetch_page  # aiohttp, only once a page is fetched

        page = await fetch_page(url, config, proc_net=proc_net, host_check=host_check)
        return page.for_model(start)

    registry.register(web_fetch, cacheable=True, outside="a web page")
