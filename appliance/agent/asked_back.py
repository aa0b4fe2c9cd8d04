"""The device question a chat was asked ("Turn the porch light on? (yes or no)"), kept until it is answered.

In memory for the process that asked, and in the database's settings so the next process sees it too: each
`picoagent chat -m` without a daemon is a process of its own, and its "yes" went to the model, which said "Yes."
while the light stayed off (README walk 5). The schedule desk keeps its "which one?" the same way.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from appliance.agent.intent import Intent
from appliance.errors import PicoagentError

if TYPE_CHECKING:
    from appliance.memory.db import Database

KEY = "asked_back:device:"  # + session


def _intent(data: dict[str, Any]) -> Intent:
    then = data.get("then")
    return Intent(**{**data, "options": tuple(data.get("options") or ()), "then": _intent(then) if then else None})


class AskedBack:
    """Per chat: the open device question and when it was asked (epoch seconds)."""

    def __init__(self, db: Database | None) -> None:
        self.db = db
        self._open: dict[str, tuple[Intent, float]] = {}

    def get(self, session: str) -> tuple[Intent, float] | None:
        """The open question of ``session``, from this process or the database."""
        if session in self._open:
            return self._open[session]
        if self.db is None:
            return None
        try:
            rows = self.db.rows("SELECT value FROM settings WHERE key = ?", (KEY + session,))
            kept = json.loads(rows[0][0]) if rows else None
            return (_intent(kept["intent"]), float(kept["at"])) if kept else None
        except (PicoagentError, ValueError, KeyError, TypeError):
            return None

    def put(self, session: str, intent: Intent) -> None:
        """Keep ``intent`` as the question ``session`` waits on."""
        self._open[session] = (intent, time.time())
        self._write(session, json.dumps({"intent": asdict(intent), "at": self._open[session][1]}))

    def pop(self, session: str) -> tuple[Intent, float] | None:
        """The open question of ``session``, no longer open."""
        found = self.get(session)
        self._open.pop(session, None)
        if found is not None:
            self._write(session, None)
        return found

    def _write(self, session: str, value: str | None) -> None:
        if self.db is None:
            return
        try:
            if value is None:
                self.db.write("DELETE FROM settings WHERE key = ?", (KEY + session,))
            else:
                self.db.write(
                    "INSERT INTO settings (key, value) VALUES (?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (KEY + session, value),
                )
        except PicoagentError:
            pass  # kept in this process only: the answer still works here
