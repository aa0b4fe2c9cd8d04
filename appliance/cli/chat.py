"""`picoagent chat`: the assistant in the terminal, in this process (no network, no daemon); while a daemon serves
this data dir, through it (chat_daemon.py)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from appliance.cli.common import action, load, print_json

if TYPE_CHECKING:
    from appliance.cli.chat_daemon import DaemonChat
    from appliance.config import Config
    from appliance.runtime import Runtime
    from appliance.schedule.scheduler import Scheduler
    from appliance.tasks import TaskStore


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `chat` command."""
    chat = action(sub, common, "chat", "chat in the terminal (through the daemon when one runs)", cmd_chat)
    chat.add_argument("-m", "--message", metavar="TEXT", help="answer this one message and exit")
    chat.add_argument("--json", action="store_true", help="print the reply record as JSON")
    chat.add_argument("--session", default="default", help="conversation name (default: default)")


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
    if args.message is not None and _command(args.message):
        return _command_once(args, config, through)  # "chat -m /help": a command of the chat, never a question
    if through is not None:  # the daemon owns the pins and the model: its turns, not ours (chat_daemon.py)
        _other_config(config)
        return _through_daemon(through, args)
    # The chat's "remind me at 7" and "what reminders do I have?" read the scheduler and task store made below on
    # the runtime's database: handed to the agent late-bound, through these two names.
    cron: Scheduler | None = None
    store: TaskStore | None = None
    runtime = Runtime.open(config, start_model=True, cron=lambda: cron, tasks=lambda: store)
    try:
        cron, store = _schedule_tools(runtime)
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


def _command(text: str) -> str:
    """The chat command a message is ("/help"), or "" (a question; /cloud and /local choose its route)."""
    word = text.strip().split()[0].lower() if text.strip() else ""
    return word if word.startswith("/") and word not in ("/cloud", "/local") else ""


def _command_once(args: argparse.Namespace, config: Config, through: DaemonChat | None) -> int:
    """`chat -m "/help"` (or /reset, /private): the command, as the interactive chat runs it."""
    import asyncio

    from appliance.channels.terminal import HELP, unknown_command

    command, words = _command(args.message), args.message.split()[1:]
    if command == "/help":
        print(HELP)
        return 0
    if command not in ("/reset", "/private"):
        print(f"error: {unknown_command(command)}", file=sys.stderr)
        return 2
    if through is not None:
        through.command(args.message.strip())
        return 0
    from appliance.channels.terminal import TerminalChat
    from appliance.runtime import Runtime

    runtime = Runtime.open(config)
    try:
        chat = TerminalChat(runtime, session=args.session)
        if command == "/reset":
            asyncio.run(runtime.agent.reset("terminal", args.session))
            print("(conversation reset)")
        else:
            print(asyncio.run(chat.private(words)))
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


def _schedule_tools(runtime: Runtime) -> tuple[Scheduler, TaskStore]:
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
    return cron, store


def _other_config(config: Config) -> None:
    """Say so when the daemon serving this data dir runs on another config file than the one given: its config
    applies to the chat (a walk's `--config config/try.yaml` with the cloud on was answered "cloud switched off")."""
    import json

    from appliance.channels.web.server import DaemonInfo
    from appliance.config import data_dir

    try:
        theirs = str(json.loads(DaemonInfo.path(data_dir(config)).read_text()).get("config") or "")
    except (OSError, ValueError, AttributeError):
        return
    ours = str(getattr(config, "source", "") or "")
    if theirs and ours and theirs != ours:
        print(
            f"note: the daemon serving this data dir runs on {theirs}; this chat is its turn, so its config applies,"
            f" not {ours} (give that config its own data_dir, or stop the daemon, to try it)",
            file=sys.stderr,
        )
