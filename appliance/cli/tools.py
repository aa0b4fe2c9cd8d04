"""`picoagent tools`, `skills` (appliance/cli/skills.py) and `mcp`: the model's tools, run by hand or served to
another program."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from appliance.cli import skills
from appliance.cli.common import action, command_group, load, open_db, print_json

if TYPE_CHECKING:
    from appliance.config import Config


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `tools` and `skills` command groups and the `mcp` command."""
    tsub = command_group(sub, common, "tools", "list and run the model's tools")
    action(tsub, common, "list", "the tools and their arguments", cmd_tools_list)
    run = action(tsub, common, "run", "run a tool as the model would", cmd_tools_run)
    run.add_argument("name")
    run.add_argument("--args", default="{}", metavar="JSON", help="arguments as a JSON object, e.g. '{\"a\": 1}'")

    skills.add_parser(sub, common)

    action(sub, common, "mcp", "serve the tools to another program as an MCP server (stdio)", cmd_mcp)


def cmd_tools_list(args: argparse.Namespace) -> int:
    """The tools the model may call (the MCP servers' too: they are started to ask them)."""
    import asyncio

    config = load(args)
    registry, _lazy, db = _cli_tools(config)
    asyncio.run(_with_mcp(config, registry, asyncio.sleep(0)))  # the MCP servers' tools join the list
    for tool in registry:
        params = ", ".join(
            f"{name}: {spec.get('type', 'value')}" + ("" if name in tool.parameters["required"] else "?")
            for name, spec in tool.parameters["properties"].items()
        )
        print(f"{tool.name}({params})\n    {tool.description}")
    db.close()
    return 0


def cmd_tools_run(args: argparse.Namespace) -> int:
    """Run one tool with JSON arguments and print its result."""
    import asyncio

    from appliance.errors import UsageError

    config = load(args)
    try:
        arguments = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args is not valid JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(arguments, dict):
        raise UsageError('--args must be a JSON object, e.g. \'{"expression": "2+2"}\'')
    registry, lazy, db = _cli_tools(config)

    async def run() -> Any:
        if args.name == "message" and "message" not in registry.tools:  # walk 10: "no tool named 'message'"
            from appliance.errors import UnknownToolError

            raise UnknownToolError(
                "the message tool is the daemon's: it delivers through the channels that `picoagent serve` runs, "
                "so `tools run` (like `chat -m`) has no one to send it to",
                fix="ask the running daemon in a chat, or send a notification with a cron job's --message",
            )
        registry.get(args.name)  # unknown tool: an error with the known names
        return await registry.execute(args.name, arguments, timeout_s=config.agent.tool_timeout_s)

    try:
        # Not one of ours: it may be an MCP server's (they are started to know).
        result = asyncio.run(run() if args.name in registry.tools else _with_mcp(config, registry, run()))
    finally:
        lazy.close()
        db.close()
    print_json(result.as_dict())
    return 0 if result.ok else 1


async def _with_mcp(config: Config, registry: Any, work: Any) -> Any:
    """Start the MCP servers into ``registry``, await ``work``, stop them (all on one event loop)."""
    from appliance.config import data_dir
    from appliance.runtime import mcp_clients

    clients = mcp_clients(config, registry, data_dir(config) / "workspace")
    if clients is None:
        return await work
    await clients.start()
    try:
        return await work
    finally:
        await clients.stop()
        for server, problem in clients.problems.items():
            print(f"note: the tools of MCP server {server} are missing: {problem}", file=sys.stderr)


def _cli_tools(config: Config) -> tuple[Any, Any, Any]:
    """The tool registry as the `tools` command sees it (devices open only if a device tool runs)."""
    from appliance.runtime import cli_tool_registry

    db = open_db(config)
    registry, lazy = cli_tool_registry(config, db)
    return registry, lazy, db


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the tools over stdio as an MCP server until the input ends."""
    import asyncio

    from appliance.mcp.server import serve_stdio

    # stdout carries protocol messages only: anything else printed (a plugin, a library) goes to stderr.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    config = load(args)
    registry, lazy, db = _cli_tools(config)  # MCP servers' own tools are not passed on (no loops)
    if config.tools.require_approval:
        from appliance.runtime import approval_store
        from appliance.tools.approvals import ToolApprovals

        # Another program's model calls these: tools.require_approval holds its calls for a person too,
        # and the daemon runs them when approved.
        ToolApprovals(approval_store(config, db), registry, config.tools.require_approval, requested_by="an MCP client")
    try:
        asyncio.run(serve_stdio(registry, sys.stdin.buffer, protocol_out, timeout_s=config.agent.tool_timeout_s))
    finally:
        lazy.close()
        db.close()
    return 0
