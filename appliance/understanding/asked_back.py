"""Questions the appliance asked a chat back, kept until they are answered: the device question ("Turn the porch
light on? (yes or no)", :class:`AskedBack`) and the schedule desk's "which one?" (:class:`Kept` of job ids).

In memory for the process that asked, and in the database's settings so the next process sees them too: each
`picoagent chat -m` without a daemon is a process of its own, and its "yes" went to the model, which said "Yes."
while the light stayed off (README walk 5).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from appliance.errors import PicoagentError
from appliance.understanding.intent import Intent

if TYPE_CHECKING:
    from appliance.memory.db import Database


class Kept:
    """Per chat: one open question's data (JSON) and when it was asked (epoch seconds), under settings key
    ``prefix`` + session."""

    def __init__(self, db: Database | None, prefix: str) -> None:
        self.db = db
        self.prefix = prefix
        self._open: dict[str, tuple[Any, float]] = {}

    def get(self, session: str) -> tuple[Any, float] | None:
        """The open question of ``session`` and when it was asked, from this process or the database."""
        if session in self._open:
            return self._open[session]
        if self.db is None:
            return None
        try:
            rows = self.db.rows("SELECT value FROM settings WHERE key = ?", (self.prefix + session,))
            kept = json.loads(rows[0][0]) if rows else None
            return (kept["data"], float(kept["at"])) if kept else None
        except (PicoagentError, ValueError, KeyError, TypeError):
            return None

    def put(self, session: str, data: Any) -> None:
        """Keep ``data`` as the question ``session`` waits on, asked now."""
        self._open[session] = (data, time.time())
        self._write(session, json.dumps({"data": data, "at": self._open[session][1]}))

    def pop(self, session: str) -> tuple[Any, float] | None:
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
                self.db.write("DELETE FROM settings WHERE key = ?", (self.prefix + session,))
            else:
                self.db.write(
                    "INSERT INTO settings (key, value) VALUES (?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (self.prefix + session, value),
                )
        except PicoagentError:
            pass  # kept in this process only: the answer still works here


def _intent(data: dict[str, Any]) -> Intent:
    then = data.get("then")
    return Intent(**{**data, "options": tuple(data.get("options") or ()), "then": _intent(then) if then else None})


class AskedBack:
    """Per chat: the open device question (an :class:`Intent`) and when it was asked."""

    def __init__(self, db: Database | None) -> None:
        self._kept = Kept(db, "asked_back:device:")

    def get(self, session: str) -> tuple[Intent, float] | None:
        found = self._kept.get(session)
        return (_intent(found[0]), found[1]) if found else None

    def put(self, session: str, intent: Intent) -> None:
        self._kept.put(session, asdict(intent))

    def pop(self, session: str) -> tuple[Intent, float] | None:
        found = self.get(session)
        self._kept.pop(session)
        return found
