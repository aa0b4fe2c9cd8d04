"""Cron jobs made in chat, paused jobs and the run history: the tables of migration 12.

Jobs made in chat (the fast path's "remind me at 7 to take the bins out", the model's
``schedule_create``, ``POST /api/cron``, ``picoagent cron add``) live here, in the database, and not in
``workspace/cron.yaml``:

- the model's workspace tools can write ``cron.yaml``: a prompt-injected web page could plant a job
  there. A row here is written only by the scheduler's own code (``Scheduler.add_job``), which checks
  the job and refuses anything but a plain message once outside text is in the turn;
- rewriting a YAML file races a person editing it in an editor (one of the two edits is lost), and
  loses the person's comments; a row is one transaction;
- SQLite survives ``kill -9`` and power cuts mid-write; a half-written YAML file stops every job in it.

The config's and ``cron.yaml``'s jobs stay where they are (a person's files); their paused state is a
row of ``cron_paused`` by job id, so pausing one never rewrites a file. Every run lands in ``cron_runs``
(the last :data:`KEEP_RUNS` of each job) besides the one-row-per-job ``schedule_runs`` the scheduler
reads at start.

Another process (``picoagent chat`` beside the daemon, ``picoagent cron add``) writes the same tables;
the daemon's scheduler sees it within a minute: :meth:`JobStore.changed` is ``PRAGMA data_version``,
which reads no table and changes only when another connection committed something. Only then are these
two small tables read again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from appliance.errors import Conflict, UsageError

if TYPE_CHECKING:
    from appliance.config import CronJob
    from appliance.memory.db import Database

KEEP_RUNS = 50  # the runs kept per job in cron_runs
_FIELDS = ("id", "schedule", "prompt", "device", "value", "task", "message", "deliver", "missed")


class JobIdTaken(Conflict, UsageError):
    """A job already has this id (HTTP 409; on the command line a usage error)."""


@dataclass(frozen=True)
class StoredJob:
    """A job made in chat, as stored."""

    job: CronJob
    created_by: str
    created_at: float


class JobStore:
    """The cron_jobs, cron_paused and cron_runs tables; every change one transaction, safe across processes."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock
        self._version: int | None = None

    def jobs(self) -> list[StoredJob]:
        """Every job made in chat, oldest first."""
        from appliance.config import CronJob

        rows = self.db.rows(f"SELECT {', '.join(_FIELDS)}, created_by, created_at FROM cron_jobs ORDER BY created_at")
        found = []
        for row in rows:
            fields = dict(zip(_FIELDS, row[: len(_FIELDS)], strict=True))
            fields["deliver"] = bool(fields["deliver"])
            found.append(StoredJob(CronJob(**fields), row[-2], row[-1]))
        return found

    def paused(self) -> set[str]:
        """The ids of the paused jobs (of any source)."""
        return {r[0] for r in self.db.rows("SELECT job_id FROM cron_paused")}

    def add(self, job: CronJob, created_by: str) -> StoredJob:
        """Store a checked job (JobIdTaken when a chat job already has its id)."""
        now = self.clock()
        with self.db.transaction() as conn:
            if conn.execute("SELECT 1 FROM cron_jobs WHERE id = ?", (job.id,)).fetchone():
                raise JobIdTaken(f"a cron job named {job.id!r} exists already", fix="choose another id")
            values = [getattr(job, name) for name in _FIELDS]
            values[_FIELDS.index("deliver")] = int(job.deliver)
            conn.execute(
                f"INSERT INTO cron_jobs ({', '.join(_FIELDS)}, created_by, created_at)"
                f" VALUES ({', '.join('?' * (len(_FIELDS) + 2))})",
                (*values, created_by, now),
            )
            conn.execute("DELETE FROM cron_paused WHERE job_id = ?", (job.id,))  # a stale pause of an old job
        return StoredJob(job, created_by, now)

    def delete(self, job_id: str) -> bool:
        """Remove a chat job and its paused mark (its history stays); False when there was none."""
        with self.db.transaction() as conn:
            gone = conn.execute("DELETE FROM cron_jobs WHERE id = ?", (job_id,)).rowcount
            conn.execute("DELETE FROM cron_paused WHERE job_id = ?", (job_id,))
        return bool(gone)

    def set_paused(self, job_id: str, paused: bool, by: str = "") -> None:
        """Mark a job paused or not (any job id)."""
        if paused:
            self.db.write(
                "INSERT OR IGNORE INTO cron_paused (job_id, paused_at, paused_by) VALUES (?, ?, ?)",
                (job_id, self.clock(), by),
            )
        else:
            self.db.write("DELETE FROM cron_paused WHERE job_id = ?", (job_id,))

    def record(self, job_id: str, at: float, result: str, ok: bool, reason: str) -> None:
        """One run: the job's last run (schedule_runs) and its history (cron_runs, the last KEEP_RUNS)."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO schedule_runs (job_id, last_run_at, last_result, last_ok) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (job_id) DO UPDATE SET last_run_at = excluded.last_run_at,"
                " last_result = excluded.last_result, last_ok = excluded.last_ok",
                (job_id, at, result, int(ok)),
            )
            conn.execute(
                "INSERT INTO cron_runs (job_id, at, ok, result, reason) VALUES (?, ?, ?, ?, ?)",
                (job_id, at, int(ok), result, reason),
            )
            conn.execute(
                "DELETE FROM cron_runs WHERE job_id = ? AND id <= (SELECT id FROM cron_runs WHERE job_id = ?"
                " ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (job_id, job_id, KEEP_RUNS),
            )

    def runs(self, job_id: str, limit: int = 20) -> list[tuple[float, bool, str, str]]:
        """A job's runs, newest first: (at, ok, result, reason)."""
        rows = self.db.rows(
            "SELECT at, ok, result, reason FROM cron_runs WHERE job_id = ? ORDER BY id DESC LIMIT ?", (job_id, limit)
        )
        return [(r[0], bool(r[1]), r[2], r[3]) for r in rows]

    def changed(self) -> bool:
        """Whether another connection committed anything since the last call (the first call: True)."""
        version = int(self.db.value("PRAGMA data_version"))
        changed, self._version = version != self._version, version
        return changed
