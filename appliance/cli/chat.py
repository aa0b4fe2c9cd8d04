"""`picoagent chat`: the assistant in the terminal, in this process (no network, no daemon)."""

from __future__ import annotations

import argparse
import sys

from appliance.cli.common import load, print_json


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `chat` command."""
    chat = sub.add_parser("chat", parents=[common], help="chat in the terminal (no network, no daemon)")
    chat.add_argument("-m", "--message", metavar="TEXT", help="answer this one message and exit")
    chat.add_argument("--json", action="store_true", help="print the reply record as JSON")
    chat.add_argument("--session", default="default", help="conversation name (default: default)")
    chat.set_defaults(handler=cmd_chat)


def cmd_chat(args: argparse.Namespace) -> int:
    """Terminal chat, or one answer with -m."""
    import asyncio

    from appliance.channels.terminal import TerminalChat
    from appliance.runtime import Runtime

    config = load(args)
    runtime = Runtime.open(config)
    try:
        chat = TerminalChat(runtime, session=args.session)
        if args.message is None:
            if args.json:
                print("error: --json goes with -m TEXT", file=sys.stderr)
                return 2
            return chat.interactive()
        record = asyncio.run(chat.ask_once(args.message, stream=not args.json))
        if args.json:
            print_json(record.as_dict())
        else:
            print()
            if sys.stderr.isatty():
                print(chat.footer(record), file=sys.stderr)
        return 0
    finally:
        runtime.close()
