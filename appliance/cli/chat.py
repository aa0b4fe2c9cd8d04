"""`picoagent chat`: the assistant in the terminal, in this process (no network, no daemon); while a daemon serves
this data dir, through it (chat_daemon.py)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from appliance.cli.common import load, print_json

if TYPE_CHECKING:
    from appliance.cli.chat_daemon import DaemonChat
    from appliance.runtime import Runtime


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `chat` command."""
    chat = sub.add_parser("chat", parents=[common], help="chat in the terminal (through the daemon when one runs)")
    chat.add_argument("-m", "--message", metavar="TEXT", help="answer this one message and exit")
    chat.add_argument("--json", action="store_true", help="print the reply record as JSON")
    chat.add_argument("--session", default="default", help="conversation name (default: default)")
    chat.set_defaults(handler=cmd_chat)


def cmd_chat(args: argparse.Namespace) -> int:
    """Terminal chat, or one answer with -m."""
    import asyncio

    from appliance.channels.terminal import TerminalChat
    from appliance.cli.chat_daemon import DaemonChat
    from appliance.runtime import Runtime

    if args.message is None and args.json:
        print("error: --json goes with -m TEXT", file=sys.stderr)
        return 2
    config = load(args)
    through = DaemonChat.find(config, session=args.session)
    if through is not None:  # the daemon owns the pins and the model: its turns, not ours (chat_daemon.py)
        return _through_daemon(through, args)
    runtime = Runtime.open(config, start_model=True)
    try:
        _schedule_tools(runtime)
        chat = TerminalChat(runtime, session=args.session)
        if args.message is None:
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


def _through_daemon(chat: DaemonChat, args: argparse.Namespace) -> int:
    """The chat, or one answer with -m, through the running daemon: the whole reply, then the same footer."""
    if args.message is None:
        return chat.interactive()
    if args.json:
        print_json(chat.ask_json(args.message))
        return 0
    record = chat.ask(args.message)
    print(record.text)
    if sys.stderr.isatty():
        print(chat.footer(record), file=sys.stderr)
    return 0


def _schedule_tools(runtime: Runtime) -> None:
    """The model's schedule and task tools, on a scheduler of this process that only writes the database.

    Jobs and tasks made here are run by the daemon (it reads them within a minute; tasks within seconds),
    or by the next one to start; nothing runs in this process.
    """
    from appliance.cli.automation import local_scheduler
    from appliance.tasks import TaskStore
    from appliance.tasks.capable import can_work
    from appliance.tools import scheduling

    cron = local_scheduler(runtime.config, runtime.db, lenient=True)
    store = TaskStore(runtime.db)
    scheduling.register(runtime.tools, cron, store, can_work=lambda: can_work(runtime))
    runtime.agent.desk.cron = cron  # the chat fast path's "remind me at 7 ..." (appliance/agent/schedule_desk.py)
    runtime.agent.grounding.cron, runtime.agent.grounding.tasks = cron, store  # "what reminders do I have?"
