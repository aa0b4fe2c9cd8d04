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
import sys
from collections.abc import Callable, Sequence
from typing import Any

from appliance import __version__

Handler = Callable[[argparse.Namespace], int]


def _common() -> argparse.ArgumentParser:
    """--config and --data-dir, accepted before or after the command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help="config file (default: see README)")
    common.add_argument(
        "--data-dir", metavar="PATH", default=argparse.SUPPRESS, help="state folder, overrides data_dir"
    )
    return common


def _top(common: argparse.ArgumentParser) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction[Any]]:
    parser = argparse.ArgumentParser(
        prog="picoagent",
        description="A private AI assistant that lives on a Raspberry Pi.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"picoagent {__version__}")
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    from appliance.cli import access, automation, channels, chat, devices, memory, models, routing, system, tasks, tools

    common = _common()
    parser, sub = _top(common)
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


def _daemon_parser() -> argparse.ArgumentParser:
    """The parser of `serve` (and `status`) alone: the same top level, without the other command groups.

    A daemon runs for months; the other groups' modules (their handlers, the update and OTA code) would stay
    imported in it for nothing: measured with the serve_idle_rss bench, see README "Memory".
    """
    from appliance.cli import system

    common = _common()
    parser, sub = _top(common)
    system.add_daemon_parsers(sub, common)
    return parser


_VALUED = ("--config", "--data-dir")  # the top-level options that take a value (the others: -h, --version)


def _runs_daemon(argv: Sequence[str]) -> bool:
    """Whether argparse would read `serve` as the command of ``argv``.

    Only --config and --data-dir (spelled out) may come before it; anything else (an abbreviation, -h,
    --version, a mistake) gets the full parser, which answers it exactly as before.
    """
    args = iter(argv)
    for arg in args:
        if arg in _VALUED:
            next(args, None)
        elif not arg.startswith(tuple(f"{option}=" for option in _VALUED)):
            return arg == "serve"
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; expected failures print a message and a fix, never a traceback."""
    words = sys.argv[1:] if argv is None else argv
    parser = _daemon_parser() if _runs_daemon(words) else build_parser()
    args = parser.parse_args(words)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    from appliance.errors import exit_for_people

    del parser  # the parsers of every command: `serve` runs for months, and needs none of them
    return exit_for_people(lambda: handler(args))
