"""The terminal chat: works with no network and no daemon; replies stream as they are generated."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from appliance.agent.record import ReplyRecord
from appliance.channels.core import footer

if TYPE_CHECKING:
    from appliance.runtime import Runtime

HELP = """Commands:
  /help           this help
  /cloud TEXT     ask the cloud model (when routing allows it); /local TEXT keeps the message on the Pi
  /private on|off this chat never leaves the Pi (on), or routes as configured again (off)
  /reset          forget this conversation (it stays in the database) and start a new one
  /quit           leave (Ctrl-D works too)
Ctrl-C while a reply is streaming stops it."""
# A chat channel's commands a person may type here too: the shell command that does it on this machine.
ELSEWHERE = {
    "/memory": "picoagent memory search WORDS",
    "/devices": "picoagent devices list",
    "/read": "picoagent devices read NAME",
    "/toggle": "picoagent devices set NAME on|off",
    "/status": "picoagent status",
    "/tasks": "picoagent tasks list",
    "/schedule": "picoagent cron list",
    "/approve": "picoagent approvals list",
    "/deny": "picoagent approvals list",
}


def unknown_command(command: str) -> str:
    """What the terminal chat says of a /command it does not have: the shell command for a chat channel's."""
    if command in ELSEWHERE:
        return f"{command} is a chat channel's command; in a shell here: {ELSEWHERE[command]} (/help lists this chat's)"
    return f"unknown command {command}; /help lists them"


class TerminalFace:
    """What both terminal chats share: this in-process one, and ``picoagent chat`` through a running daemon
    (appliance/cli/chat_daemon.py). Where they write, the dimmed footer, what /private says, and the
    /commands, each chat saying only how it resets and marks the conversation private."""

    def __init__(self, *, session: str, out: TextIO | None) -> None:
        self.session = session
        self.out = out or sys.stdout  # the stdout of now, not of when the module was imported
        self.color = self.out.isatty()

    def _dim(self, text: str) -> str:
        return f"\033[2m{text}\033[0m" if self.color else text

    def footer(self, record: ReplyRecord) -> str:
        """The line under a reply: which path served it, how fast (the shared footer, detailed and dimmed)."""
        return self._dim(footer(record, detailed=True))

    @staticmethod
    def private_said(private: bool, mode: str) -> str:
        """What /private answers: whether this chat stays on the Pi, or how it is routed (``routing.mode``)."""
        from appliance.channels.commands import routed

        return "(this chat stays on the Pi)" if private else f"(this chat is routed as configured: {routed(mode)})"

    def run_command(self, text: str, reset: Callable[[], object], private: Callable[[list[str]], str]) -> bool:
        """A /command of the chat (``reset`` forgets the conversation, ``private`` answers /private's words);
        True for /quit."""
        command = text.split()[0].lower()
        if command in ("/quit", "/exit"):
            return True
        if command == "/help":
            self.out.write(HELP + "\n")
        elif command == "/reset":
            reset()
            self.out.write("(conversation reset)\n")
        elif command == "/private":
            self.out.write(private(text.split()[1:]) + "\n")
        else:
            self.out.write(unknown_command(command) + "\n")
        return False


class TerminalChat(TerminalFace):
    """Reads lines, runs turns, prints the streamed reply and a one-line footer per reply."""

    def __init__(self, runtime: Runtime, *, session: str = "default", out: TextIO | None = None) -> None:
        super().__init__(session=session, out=out)
        self.runtime = runtime

    def _on_event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "text":
            self.out.write(data["delta"])
            self.out.flush()
        elif kind == "tool_call":
            args = json.dumps(data["arguments"], ensure_ascii=False)
            self.out.write(self._dim(f"[tool {data['tool']}({args})]") + "\n")
        elif kind == "tool_result":
            shown = data["result"] if data["ok"] else f"error: {data['error']}"
            self.out.write(self._dim(f"[-> {str(shown)[:200]}]") + "\n")
        elif kind == "reroute":
            where = "asking the cloud" if data["route"] == "cloud" else "answering on the Pi"
            self.out.write("\n" + self._dim(f"[{data['reason']}: {where}]") + "\n")
        self.out.flush()

    async def ask(self, text: str, *, stream: bool = True) -> ReplyRecord:
        """One turn; streams to the terminal when ``stream``."""
        return await self.runtime.agent.turn(
            text, channel="terminal", chat_id=self.session, on_event=self._on_event if stream else None
        )

    async def ask_once(self, text: str, *, stream: bool = True) -> ReplyRecord:
        """One turn, then close the cloud connection (``chat -m``: the event loop ends with it)."""
        try:
            await self.runtime.start_mcp()  # MCP servers live as long as this event loop
            return await self.ask(text, stream=stream)
        finally:
            await self.runtime.stop_mcp()
            await self.runtime.close_cloud()

    async def private(self, words: list[str]) -> str:
        """/private on|off: keep this chat on the Pi, or not; without a word, say which it is."""
        db = self.runtime.db
        if words and words[0].lower() in ("on", "off"):
            await db.call(db.set_private, "terminal", self.session, words[0].lower() == "on")
        private = await db.call(db.is_private, "terminal", self.session)
        return self.private_said(private, self.runtime.config.routing.mode)

    def interactive(self, read: Any = None) -> int:
        """The chat loop; returns the exit status."""
        name, session = self.runtime.model.name, self.session
        self.out.write(f"picoagent · local model {name} · session {session} · /help for commands\n")
        with asyncio.Runner() as runner:
            try:
                runner.run(self.runtime.start_mcp())
                return chat_loop(
                    self.out,
                    read,
                    lambda text: self.command(text, runner),
                    lambda text: self._turn(text, runner),
                    speaker=self.runtime.config.agent.name,
                    stopped=self._dim("\n[stopped]"),
                )
            finally:
                runner.run(self.runtime.stop_mcp())
                runner.run(self.runtime.close_cloud())

    def _turn(self, text: str, runner: asyncio.Runner) -> str:
        record = runner.run(self.ask(text))  # streamed as it comes: only the footer is left to print
        return "\n" + self.footer(record)

    def command(self, text: str, runner: asyncio.Runner) -> bool:
        """A /command of the chat; True for /quit."""
        return self.run_command(
            text,
            lambda: runner.run(self.runtime.agent.reset("terminal", self.session)),
            lambda words: runner.run(self.private(words)),
        )


def chat_loop(
    out: TextIO,
    read: Any,
    command: Callable[[str], bool],
    turn: Callable[[str], str],
    *,
    speaker: str,
    stopped: str,
) -> int:
    """The terminal chat's loop, in process or through the daemon: a line a turn (``turn`` runs it after
    "``speaker``> " and returns what to print under it; Ctrl-C during it prints ``stopped``), a /command to
    ``command`` (True ends the chat; /cloud and /local are turns); Ctrl-C at the prompt says how to leave,
    Ctrl-D leaves; ``read`` is input() by default. Returns the exit status."""
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    read = read or input  # looked up now: a test's stand-in for input() is seen
    while True:
        try:
            line = read("you> ")
        except EOFError:
            out.write("\n")
            return 0
        except KeyboardInterrupt:
            out.write("\n(Ctrl-D or /quit to leave)\n")
            continue
        text = line.strip()
        if not text:
            continue
        if text.startswith("/") and text.split()[0].lower() not in ("/cloud", "/local"):
            if command(text):
                return 0
            continue
        out.write(f"{speaker}> ")
        out.flush()
        try:
            said = turn(text)
        except KeyboardInterrupt:
            said = stopped
        out.write(said + "\n")
        out.flush()
