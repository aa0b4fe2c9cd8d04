"""The cron loop: runs each job on its schedule, records every run, delivers the results.

One asyncio task runs every job. Each pass (:meth:`Scheduler.tick`) runs the jobs that are due, one
after another, then sleeps until the next slot, but never longer than a minute: the wall clock can
jump while it sleeps (NTP setting the time after a boot without network), and a slot is a wall-clock
instant. Idle, that is one wake-up a minute and no database access: each job's last run is read
once at construction and kept in memory, and written (one upsert into ``schedule_runs``) per run.
Its sleep is a constructor argument, so tests drive the loop on a fake clock.

- Missed runs: at start, a job whose last recorded run is older than its previous slot missed a run
  while the Pi was off; ``missed: run_once`` runs it once now (however many slots passed), ``skip``
  waits for the next slot. A job that never ran has missed nothing.
- A job never runs twice at once: one still running (``cron run`` by hand) comes due again at the
  next tick. A job running past its timeout is stopped.
- A failure is a result, recorded and sent to the owner, never an exception that stops the other
  jobs; a job that fails again is not news, so only the first failure in a row is sent.

When the schedules fire (time zones, daylight saving): :mod:`appliance.schedule.parse`. What a job
does: :mod:`appliance.schedule.jobs`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from appliance.errors import ConfigError, Conflict, NotFound, PicoagentError, UsageError
from appliance.schedule.jobs import JOB_TIMEOUT_S, RESULT_CHARS, JobRun, LastRun, RunReason, does
from appliance.schedule.parse import Schedule, Startup, parse_schedule, resolve_zone

if TYPE_CHECKING:
    from appliance.config import CronJob
    from appliance.memory.db import Database

log = logging.getLogger(__name__)

MAX_SLEEP_S = 60.0  # wake at least this often: the wall clock can jump (NTP after boot) while we sleep


@dataclass
class _Entry:
    job: CronJob
    schedule: Schedule
    next_at: float | None = None
    pending: RunReason | None = None  # run at the next tick whatever the clock says


class UnknownJobError(NotFound, UsageError):
    """No job has this id (HTTP 404; on the command line a usage error)."""


class JobRunningError(Conflict, UsageError):
    """The job is running already and is not started twice (HTTP 409; on the command line a usage error)."""


class Scheduler:
    """Runs the jobs on their schedules, records each run in schedule_runs, delivers the results."""

    def __init__(
        self,
        jobs: list[CronJob],
        *,
        tz: str,
        run_job: Callable[[CronJob], Awaitable[str]],
        notify: Callable[[str, str], object] | None,
        db: Database,
        clock: Callable[[], float] = time.time,
        job_timeout_s: float = JOB_TIMEOUT_S,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.zone = resolve_zone(tz)
        self.run_job = run_job
        self.notify = notify
        self.db = db
        self.clock = clock
        self.sleep = sleep  # run()'s naps: tests pass one that moves their fake clock instead
        self.job_timeout_s = job_timeout_s
        self._entries: dict[str, _Entry] = {}
        for job in jobs:
            if job.id in self._entries:
                raise ConfigError(f"cron job id {job.id!r} is used twice", fix="give each job its own id")
            try:
                self._entries[job.id] = _Entry(job, parse_schedule(job.schedule))
            except UsageError as exc:
                raise ConfigError(f"cron job {job.id}: {exc.message}", fix=exc.fix) from None
        self._running: set[str] = set()
        self._started = False
        # One small read at construction: `cron list` needs it even when nothing runs.
        rows = db.rows("SELECT job_id, last_run_at, last_result, last_ok FROM schedule_runs")
        self._last = {r[0]: LastRun(r[1], r[2], None if r[3] is None else bool(r[3])) for r in rows}

    def _next(self, schedule: Schedule, ts: float) -> float | None:
        after = schedule.next_after(datetime.fromtimestamp(ts, self.zone))
        return None if after is None else after.timestamp()

    def _iso(self, ts: float | None) -> str | None:
        return None if ts is None else datetime.fromtimestamp(ts, self.zone).isoformat(timespec="seconds")

    def _start(self) -> None:
        """Plan the first runs: startup jobs now, missed runs by each job's policy, the rest on schedule."""
        self._started = True
        now = self.clock()
        for entry in self._entries.values():
            if isinstance(entry.schedule, Startup):
                entry.pending = "startup"
                continue
            # A slot at the very instant of start is due, not missed.
            entry.next_at = self._next(entry.schedule, now - 0.001)
            last = self._last.get(entry.job.id)
            if last is None or last.at is None:
                continue  # never ran: its history starts now, nothing was missed
            missed = self._next(entry.schedule, last.at)
            if missed is None or missed >= now:
                continue
            if entry.job.missed == "run_once":
                log.info("cron %s: missed its run at %s; running it once now", entry.job.id, self._iso(missed))
                entry.pending = "missed"
                entry.next_at = self._next(entry.schedule, now)
            else:
                log.info("cron %s: missed its run at %s; skipped (missed: skip)", entry.job.id, self._iso(missed))

    async def tick(self) -> list[JobRun]:
        """Run every job due at the clock's time (the first call: startup jobs and missed runs too)."""
        if not self._started:
            self._start()
        now = self.clock()
        due = [
            e
            for e in self._entries.values()
            if (e.pending or (e.next_at is not None and e.next_at <= now)) and e.job.id not in self._running
        ]  # a job still running (run_now) comes due again at the next tick
        due.sort(key=lambda e: (e.pending is None, e.next_at or 0.0))
        runs = []
        for entry in due:
            reason: RunReason = entry.pending or "schedule"
            entry.pending = None
            runs.append(await self._run(entry.job, reason))
            if reason == "schedule":
                # After now: slots that passed while it ran are not run again.
                entry.next_at = self._next(entry.schedule, max(now, self.clock()))
        return runs

    def seconds_to_next(self) -> float:
        """How long run() sleeps before the next tick."""
        soonest = min((e.next_at for e in self._entries.values() if e.next_at is not None), default=None)
        if soonest is None:
            return MAX_SLEEP_S
        return min(MAX_SLEEP_S, max(0.01, soonest - self.clock()))

    async def run(self) -> None:
        """Run the jobs forever (startup jobs and missed runs first)."""
        if not self._entries:
            return
        while True:
            try:
                await self.tick()
            except Exception:  # jobs' own failures are results; this is a bug, and must not end every job
                log.exception("cron: the scheduler tick failed")
            await self.sleep(self.seconds_to_next())

    def is_running(self, job_id: str) -> bool:
        """Whether the job runs now (by its schedule or by hand)."""
        return job_id in self._running

    async def run_now(self, job_id: str) -> str:
        """Run a job now, as its schedule would (recorded, delivered); its result, or the failure raised."""
        entry = self._entries.get(job_id)
        if entry is None:
            known = ", ".join(sorted(self._entries)) or "none: add them under scheduler.jobs or in workspace/cron.yaml"
            raise UnknownJobError(f"no cron job named {job_id!r}", fix=f"known jobs: {known}")
        if self.is_running(job_id):
            raise JobRunningError(f"cron job {job_id} is running now", fix="wait for it to finish")
        run = await self._run(entry.job, "manual")
        if not run.ok:
            raise PicoagentError(f"cron job {job_id} failed: {run.result}")
        return run.result

    def list_jobs(self) -> list[dict[str, Any]]:
        """Every job: id, schedule, what it does, next run (ISO, in the zone), last run and result."""
        now = self.clock()
        rows = []
        for entry in self._entries.values():
            job = entry.job
            next_at = entry.next_at
            if not self._started and not isinstance(entry.schedule, Startup):
                next_at = self._next(entry.schedule, now - 0.001)
            last = self._last.get(job.id, LastRun(None, None, None))
            rows.append(
                {
                    "id": job.id,
                    "schedule": job.schedule,
                    "does": does(job),
                    "next_run": self._iso(next_at),
                    "last_run": self._iso(last.at),
                    "last_result": last.result,
                    "last_ok": last.ok,
                    "deliver": job.deliver,
                    "missed": job.missed,
                }
            )
        return rows

    async def _run(self, job: CronJob, reason: RunReason) -> JobRun:
        """Run one job; a failure is a result (recorded, notified), never an exception."""
        started = self.clock()
        self._running.add(job.id)
        try:
            result, ok = await asyncio.wait_for(self.run_job(job), self.job_timeout_s), True
        except PicoagentError as exc:
            result, ok = exc.for_people(), False
        except TimeoutError:
            result, ok = f"still running after {self.job_timeout_s:.0f} s; stopped", False
        except Exception as exc:  # a job's bug must not stop the other jobs
            log.exception("cron %s: unexpected error", job.id)
            result, ok = f"{type(exc).__name__}: {exc}", False
        finally:
            self._running.discard(job.id)
        result = str(result).strip()
        previous = self._last.get(job.id)
        self._last[job.id] = LastRun(started, result[:RESULT_CHARS], ok)
        try:
            await self.db.call(self._record, job.id, started, result[:RESULT_CHARS], ok)
        except PicoagentError as exc:
            log.error("cron %s: cannot record the run: %s", job.id, exc.message)
        if ok:
            log.info("cron %s: ran (%s)", job.id, reason)
            if job.deliver and result:
                self._notify(f"{job.id}: {result}")
        else:
            log.warning("cron %s: failed (%s): %s", job.id, reason, result)
            # Failures are news even for jobs that do not deliver; a job failing again is not.
            if previous is None or previous.ok is not False:
                self._notify(f"{job.id} failed: {result}")
        return JobRun(job.id, started, ok, result, reason)

    def _record(self, job_id: str, at: float, result: str, ok: bool) -> None:
        self.db.write(
            "INSERT INTO schedule_runs (job_id, last_run_at, last_result, last_ok) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (job_id) DO UPDATE SET last_run_at = excluded.last_run_at,"
            " last_result = excluded.last_result, last_ok = excluded.last_ok",
            (job_id, at, result, int(ok)),
        )

    def _notify(self, text: str) -> None:
        if self.notify is None:
            return
        try:
            self.notify(text, "cron")
        except Exception:  # delivery trouble must not stop the jobs
            log.exception("cannot queue a cron notification")
