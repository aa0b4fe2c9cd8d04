"""How often each skill was used: a counter bumped each time ``load_skill`` serves it.

One row a skill in the ``skill_uses`` table (migration 17): an UPSERT per skill served, on the tool's
worker thread (the registry runs a plain function there, never on the event loop). SQLite rather than a
file in the workspace because the daemon and a `picoagent tools run load_skill` may count at the same time,
and its writer lock keeps both counts where a file rewritten by two processes would lose one; and the
skills folder stays what the prompt reads, untouched by use. A failed count is logged, never the tool's
failure: the model still gets its instructions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from appliance.errors import DatabaseError

if TYPE_CHECKING:
    from appliance.memory.db import Database

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SkillUse:
    """How often a skill was served, and when last (a Unix time)."""

    uses: int
    last_used: float


class SkillUses:
    """The counters of one database."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    def record(self, names: Iterable[str]) -> None:
        """Count one use of each skill in ``names`` (a skill and those it requires: each was served)."""
        now = self.clock()
        try:
            with self.db.transaction() as conn:
                conn.executemany(
                    "INSERT INTO skill_uses (name, uses, last_used) VALUES (?, 1, ?)"
                    " ON CONFLICT(name) DO UPDATE SET uses = uses + 1, last_used = excluded.last_used",
                    [(name, now) for name in dict.fromkeys(names)],
                )
        except DatabaseError as exc:
            log.warning("skill use not counted: %s", exc)

    def all(self) -> dict[str, SkillUse]:
        """Every counted skill by name."""
        rows = self.db.rows("SELECT name, uses, last_used FROM skill_uses")
        return {name: SkillUse(uses, last_used) for name, uses, last_used in rows}

    def forget(self, name: str) -> None:
        """Drop a removed skill's counter (installed again, it starts from nothing)."""
        self.db.write("DELETE FROM skill_uses WHERE name = ?", (name,))
