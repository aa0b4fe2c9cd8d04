"""A small MCP server built with the official SDK's FastMCP, run over stdio by the MCP client tests.

Run it as ``python tests/fakes/mcp_server.py``. Its tools: ``add``, ``fail`` (a tool error), ``crash``
(the process exits at once with code 3), ``env`` (reads its own environment), ``slow`` (sleeps),
``Where-Is`` (a pydantic argument, so its schema has ``$defs`` and a ``$ref``). tools/list answers
two tools per page, with a ``nextCursor``, so that the client's paging is exercised. With
``FAKE_MCP_PIDFILE`` set, it writes its process id there.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp import types
from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

server = FastMCP("fake-tools")
PAGE = 2


class Place(BaseModel):
    """A city in a country."""

    city: str
    country: str


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers.

    A second paragraph the client leaves out of the one-line description.
    """
    return a + b


@server.tool()
def fail(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ValueError(reason)


@server.tool()
def crash() -> str:
    """End the server process at once (exit code 3)."""
    print("fake-tools: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable of this server, or (unset)."""
    return os.environ.get(name, "(unset)")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "awake"


@server.tool(name="Where-Is")
def where_is(place: Place) -> str:
    """Where a place is."""
    return f"{place.city} is in {place.country}"


async def _paged_list(request: types.ListToolsRequest) -> types.ListToolsResult:
    # The SDK calls this with None when it refreshes its own cache; the annotation must be the bare type.
    tools = await server.list_tools()
    cursor = request.params.cursor if request is not None and request.params is not None else None
    start = int(cursor or 0)
    following = start + PAGE
    return types.ListToolsResult(
        tools=tools[start:following], nextCursor=str(following) if following < len(tools) else None
    )


server._mcp_server.list_tools()(_paged_list)

if __name__ == "__main__":
    print("fake-tools: starting", file=sys.stderr, flush=True)
    if os.environ.get("FAKE_MCP_PIDFILE"):  # so a test can see that the process is gone
        with open(os.environ["FAKE_MCP_PIDFILE"], "w") as pidfile:
            pidfile.write(str(os.getpid()))
    server.run("stdio")
