"""The `picoagent` command: the only place that prints for people and chooses exit codes.

This module only builds the parser and runs a command. Each command group is a module of this package
that owns its sub-parser (``add_parser(sub, common)``) and its ``cmd_*`` handlers; what they share is
``common.py`` (the config, the database, JSON output) and ``daemon_client.py`` (asking the running daemon).

Imports are lazy so that `picoagent --help` answers at once: the group modules import only argparse and
each other at the top, and heavy modules (llama.cpp, numpy, YAML, aiohttp) load only inside the handler
that needs them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from appliance import __version__
from appliance.cli import access, automation, channels, chat, devices, memory, models, routing, system, tasks, tools

Handler = Callable[[argparse.Namespace], int]


def _common() -> argparse.ArgumentParser:
    """--config and --data-dir, accepted before or after the command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help="config file (default: see README)")
    common.add_argument(
        "--data-dir", metavar="PATH", default=argparse.SUPPRESS, help="state folder, overrides data_dir"
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    common = _common()
    parser = argparse.ArgumentParser(
        prog="picoagent",
        description="A private AI assistant that lives on a Raspberry Pi.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"picoagent {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # In the order `picoagent --help` lists the commands, which interleaves some groups.
    chat.add_parser(sub, common)  # chat
    system.add_daemon_parsers(sub, common)  # serve, status
    access.add_parser(sub, common)  # passwd, tokens
    devices.add_parser(sub, common)  # devices, hw, approvals
    system.add_doctor_parser(sub, common)  # doctor
    models.add_parser(sub, common)  # models
    tools.add_parser(sub, common)  # tools, skills, mcp
    memory.add_parser(sub, common)  # memory
    access.add_telegram_parser(sub, common)  # telegram
    channels.add_parser(sub, common)  # channels, notifications
    automation.add_parser(sub, common)  # cron
    tasks.add_parser(sub, common)  # tasks
    routing.add_parser(sub, common)  # providers, usage, routing
    system.add_upkeep_parsers(sub, common)  # update, selftest
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; expected failures print a message and a fix, never a traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    from appliance.errors import exit_for_people

    del parser  # the parsers of every command: `serve` runs for months, and needs none of them
    return exit_for_people(lambda: handler(args))
