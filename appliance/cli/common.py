"""What every command group of the `picoagent` command shares: its parsers, the config it runs with, the
database, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from appliance.config import Config
    from appliance.memory.db import Database

Actions = argparse._SubParsersAction  # the actions of a command group (``picoagent GROUP ACTION``)


def command_group(
    sub: Actions[argparse.ArgumentParser], common: argparse.ArgumentParser, name: str, help: str, **more: Any
) -> Actions[argparse.ArgumentParser]:
    """A command group (``picoagent NAME ACTION``), to which its actions are added (:func:`action`)."""
    group = sub.add_parser(name, parents=[common], help=help, **more)
    return group.add_subparsers(dest="action", metavar="ACTION", required=True)


def action(
    actions: Actions[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    name: str,
    help: str,
    handler: Callable[[argparse.Namespace], int],
    **defaults: Any,
) -> argparse.ArgumentParser:
    """One action of a group, or one command (``actions`` then the top level's), run by ``handler``; its
    arguments are added to what it returns. ``defaults``: more values the handler reads (which move)."""
    parser = actions.add_parser(name, parents=[common], help=help)
    parser.set_defaults(handler=handler, **defaults)
    return parser


def load(args: argparse.Namespace, *, log_stream: Any = None) -> Config:
    """The config for this command, with logging set up from it (to stderr, or ``log_stream``)."""
    from appliance import logs
    from appliance.config import load_config

    config = load_config(getattr(args, "config", None), data_dir=getattr(args, "data_dir", None))
    logs.configure(config.log_level, log_stream or sys.stderr)
    return config


def open_db(config: Config) -> Database:
    """This process's own connection to the appliance's database (WAL: it works beside the daemon's)."""
    from appliance.config import data_dir
    from appliance.memory.db import Database

    return Database(data_dir(config) / "picoagent.db")


def print_json(data: Any) -> None:
    """Data as indented JSON on stdout."""
    print(json.dumps(data, indent=2, ensure_ascii=False))


def confirm(question: str, yes: bool, *, refused: str, fix: str) -> bool:
    """Whether the person said yes (``--yes`` says it for them); with no terminal to ask on (a pipe, a script),
    a UsageError saying ``refused`` (what was not done, and why) with ``fix``."""
    from appliance.errors import UsageError

    if yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError(refused, fix=fix)
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
