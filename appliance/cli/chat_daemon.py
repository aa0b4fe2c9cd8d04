"""`picoagent chat` while a daemon serves this data dir: every turn is the daemon's.

The daemon owns the pins and the one model: a chat that ran its own turns beside it drove its own copy of
the devices (it said "the fan is off" while the daemon's stayed on; on a Pi, two processes on one GPIO)
and loaded a second model (on a 512 MB board, enough to run out of memory). So the chat asks the daemon,
as the device commands do (daemon_client.py: daemon.json and the local CLI's token): POST /api/chat with
``channel: terminal`` and the chat's session, the same conversation the chat keeps when no daemon runs.
Not streamed (a websocket client would need aiohttp in the command): the whole reply, then the footer
the in-process chat prints. Ctrl-C closes the request, and the daemon stops that turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from appliance.channels.terminal import TerminalFace, chat_loop
from appliance.cli.daemon_client import daemon_get

if TYPE_CHECKING:
    from appliance.agent.record import ReplyRecord
    from appliance.config import Config

TURN_TIMEOUT_S = 900.0  # a long local reply on a Pi Zero, queued behind others, takes minutes


class DaemonChat(TerminalFace):
    """The terminal chat with the running daemon's assistant, in the conversation ``terminal``/``session``."""

    def __init__(self, config: Config, *, session: str = "default", out: TextIO | None = None) -> None:
        super().__init__(session=session, out=out)
        self.config = config

    @classmethod
    def find(cls, config: Config, *, session: str = "default") -> DaemonChat | None:
        """The chat through the daemon serving this config's data dir, or None when none answers."""
        if daemon_get(config, "/healthz", timeout=5) is None:
            return None
        return cls(config, session=session)

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        from appliance.errors import Unavailable

        answer = daemon_get(self.config, path, body, timeout=TURN_TIMEOUT_S)
        if answer is None:  # it answered a moment ago: never fall back to a turn of our own (it could run twice)
            raise Unavailable("the daemon stopped answering", fix="see `picoagent status`, then try again")
        return answer

    def ask(self, text: str) -> ReplyRecord:
        """One turn, run by the daemon."""
        from appliance.agent.record import ReplyRecord

        body = {"message": text, "session": self.session, "channel": "terminal"}
        return ReplyRecord.from_dict(self._post("/api/chat", body))

    def ask_json(self, text: str) -> dict[str, Any]:
        """One turn's reply record as the daemon sent it (``chat -m --json``)."""
        answer: dict[str, Any] = self._post(
            "/api/chat", {"message": text, "session": self.session, "channel": "terminal"}
        )
        return answer

    def _private(self, words: list[str]) -> str:
        """/private on|off: the mark is in the database, which the daemon reads at each turn."""
        from appliance.cli.common import open_db

        db = open_db(self.config)
        try:
            if words and words[0].lower() in ("on", "off"):
                db.set_private("terminal", self.session, words[0].lower() == "on")
            private = db.is_private("terminal", self.session)
        finally:
            db.close()
        return self.private_said(private, self.config.routing.mode)

    def interactive(self, read: Any = None) -> int:
        """The chat loop (the in-process chat's: appliance/channels/terminal.py); returns the exit status."""
        status = daemon_get(self.config, "/api/status") or {}
        name = (status.get("model") or {}).get("name", "?")
        self.out.write(
            f"picoagent · through the running daemon · local model {name} · session {self.session} "
            "· /help for commands\n"
        )
        return chat_loop(
            self.out, read, self.command, self._turn, speaker=self.config.agent.name, stopped=self._dim("\n[stopped]")
        )

    def _turn(self, text: str) -> str:
        record = self.ask(text)  # the whole reply at once (not streamed), then the footer
        return record.text + "\n" + self.footer(record)

    def command(self, text: str) -> bool:
        """A /command of the chat; True for /quit."""
        return self.run_command(
            text, lambda: self._post("/api/reset", {"channel": "terminal", "session": self.session}), self._private
        )
