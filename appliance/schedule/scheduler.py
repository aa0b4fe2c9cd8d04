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
- Jobs come from three places (a row's ``source``): the config's ``scheduler.jobs`` ("config"),
  ``workspace/cron.yaml`` ("file"), and the database ("chat": made in chat, by the API or
  ``picoagent cron add``). Why chat-made jobs live in the database and never in ``cron.yaml`` (a
  prompt-injected page could plant a job through the model's file tools; a YAML rewrite races a person
  editing it; SQLite survives ``kill -9``): :mod:`appliance.schedule.store`. Any job can be paused (the
  mark is a row, so no file is rewritten); only chat-made ones can be cancelled.
- A paused job neither runs nor counts as missed; resumed, it waits for its next slot. A one-time job
  (``once 2026-11-24 19:00``) is removed after it ran, its run kept in the history (``cron_runs``);
  one whose time passed while the Pi was off runs once at start, late, whatever ``missed`` says.
- A job made by another process (``picoagent chat`` in a terminal beside the daemon) is picked up within
  a minute: each tick asks SQLite's ``PRAGMA data_version`` (no table read) at most once a minute, and
  reads the two small job tables again only when another connection committed something.

When the schedules fire (time zones, daylight saving): :mod:`appliance.schedule.parse`. What a job
does: :mod:`appliance.schedule.jobs`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from appliance.errors import ConfigError, Conflict, NotFound, PicoagentError, UsageError, known
from appliance.schedule.jobs import JOB_TIMEOUT_S, RESULT_CHARS, JobRun, LastRun, RunReason, does, made
from appliance.schedule.parse import Once, Schedule, Startup, SunSchedule, parse_schedule, resolve_zone
from appliance.schedule.store import JobIdTaken, JobStore, StoredJob

if TYPE_CHECKING:
    from appliance.config import CronJob
    from appliance.memory.db import Database

log = logging.getLogger(__name__)

MAX_SLEEP_S = 60.0  # wake at least this often: the wall clock can jump (NTP after boot) while we sleep
POLL_S = 60.0  # look for jobs another process added, paused or cancelled this often (one PRAGMA)
Source = Literal["config", "file", "chat"]
_LIST_FIX = "`picoagent cron list` shows the jobs"


@dataclass
class _Entry:
    job: CronJob
    schedule: Schedule
    source: Source = "config"
    created_by: str = ""
    next_at: float | None = None
    pending: RunReason | None = None  # run at the next tick whatever the clock says


def _entries(jobs: list[CronJob], file_ids: Collection[str], parse: Callable[[str], Schedule]) -> dict[str, _Entry]:
    """The config's and cron.yaml's jobs (those in ``file_ids``) by id, their schedules parsed (a sun schedule
    bound to the place)."""
    entries: dict[str, _Entry] = {}
    for job in jobs:
        if job.id in entries:
            raise ConfigError(f"cron job id {job.id!r} is used twice", fix="give each job its own id")
        try:
            schedule = parse(job.schedule)
        except UsageError as exc:
            raise ConfigError(f"cron job {job.id}: {exc.message}", fix=exc.fix) from None
        entries[job.id] = _Entry(job, schedule, "file" if job.id in file_ids else "config")
    return entries


def _bind(schedule: Schedule, place: tuple[float, float] | None) -> Schedule:
    """A sun schedule bound to ``place`` (a UsageError without one); any other schedule as it is."""
    if not isinstance(schedule, SunSchedule):
        return schedule
    if place is None:
        from appliance.config.weather import PLACE_FIX

        raise UsageError(f'schedule "{schedule.text}": {schedule.event} needs to know where I am', fix=PLACE_FIX)
    return schedule.at_place(*place)


class UnknownJobError(NotFound, UsageError):
    """No job has this id (HTTP 404; on the command line a usage error)."""


class JobRunningError(Conflict, UsageError):
    """The job is running already and is not started twice (HTTP 409; on the command line a usage error)."""


class JobNotOursError(Conflict, UsageError):
    """A job of the config or of workspace/cron.yaml cannot be cancelled here: it lives in a person's file."""


class Scheduler:
    """Runs the jobs on their schedules, records each run, delivers the results; adds, pauses and cancels jobs."""

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
        file_ids: Collection[str] = (),
        devices: Collection[str] | None = None,
        place: tuple[float, float] | None = None,
    ) -> None:
        """``jobs``: the config's and cron.yaml's (those in ``file_ids``); the database's are read here.

        ``devices``: the device names a new job may set (None: not checked). ``place``: latitude and
        longitude for the ``sunset`` / ``sunrise`` schedules (weather.latitude/longitude; None: they are refused).
        """
        self.zone = resolve_zone(tz)
        self.place = place
        self.run_job = run_job
        self.notify = notify
        self.db = db
        self.clock = clock
        self.sleep = sleep  # run()'s naps: tests pass one that moves their fake clock instead
        self.job_timeout_s = job_timeout_s
        self.devices = devices
        self.store = JobStore(db, clock)
        self._entries: dict[str, _Entry] = _entries(jobs, file_ids, self._parse)
        self._running: set[str] = set()
        self._started = False
        self._polled_at: float | None = None
        self._reread = False  # read the chat jobs at the next poll even if no one changed them (a new place)
        self._placed_at = 0.0  # when a reload last changed the place: no sun slot before it was missed
        # Small reads at construction: `cron list` needs them even when nothing runs.
        self.store.changed()  # the baseline: later only other processes' commits count
        for stored in self.store.jobs():
            self._adopt(stored)
        self._paused = self.store.paused()
        rows = db.rows("SELECT job_id, last_run_at, last_result, last_ok FROM schedule_runs")
        self._last = {r[0]: LastRun(r[1], r[2], None if r[3] is None else bool(r[3])) for r in rows}

    def reload(
        self,
        jobs: list[CronJob],
        *,
        tz: str,
        file_ids: Collection[str] = (),
        place: tuple[float, float] | None,
    ) -> None:
        """The config's and cron.yaml's jobs, the time zone and the place again (SIGHUP): a new or changed job is
        planned from now, one gone is dropped, an unchanged one keeps its plan; jobs made in chat stay (a sun
        job of theirs follows a new place; one that could not run without a place is taken in at the next poll)."""
        # All checked before anything changes.
        wanted = _entries(jobs, file_ids, lambda text: _bind(parse_schedule(text), place))
        zone = resolve_zone(tz)
        rezoned, self.zone = zone != self.zone, zone
        relocated, self.place = place != self.place, place
        for job_id, held in list(self._entries.items()):
            if held.source != "chat" and job_id not in wanted:
                del self._entries[job_id]
                log.info("cron %s: no longer in the config", job_id)
        for job_id, entry in wanted.items():
            kept = self._entries.get(job_id)
            moved = rezoned or (relocated and isinstance(entry.schedule, SunSchedule))
            if kept is not None and kept.source == entry.source and kept.job == entry.job and not moved:
                continue
            if kept is not None and kept.source == "chat":
                log.error(
                    "cron %s: a job made in chat has the id of a %s job, which runs instead", job_id, entry.source
                )
            if self._started and not isinstance(entry.schedule, Startup):
                entry.next_at = self._next(entry.schedule, self.clock() - 0.001)
            self._entries[job_id] = entry
            log.info("cron %s: %s", job_id, "planned again" if kept is not None else "added from the config")
        if relocated:
            # A chat job refused for want of a place is in the database: the next poll adopts it, from now on.
            self._reread, self._placed_at = True, self.clock()
        for job_id, held in list(self._entries.items()):
            if held.source != "chat" or isinstance(held.schedule, Startup):
                continue
            moved = relocated and isinstance(held.schedule, SunSchedule)
            if moved:
                try:
                    held.schedule = self._parse(held.job.schedule)
                except UsageError as exc:  # the place was taken out of the config
                    del self._entries[job_id]
                    log.error("cron %s: %s; not run", job_id, exc.message)
                    continue
            if (rezoned or moved) and self._started:  # a slot moved: planned again from now
                held.next_at = self._next(held.schedule, self.clock() - 0.001)

    def _adopt(self, stored: StoredJob) -> _Entry | None:
        """Take a chat-made job in (not started yet: _start plans it); None when it cannot run here."""
        job = stored.job
        held = self._entries.get(job.id)
        if held is not None and held.source != "chat":
            log.error("cron %s: a job made in chat has the id of a %s job, which runs instead", job.id, held.source)
            return None
        try:
            schedule = self._parse(job.schedule)
        except UsageError as exc:
            log.error("cron %s: %s; not run", job.id, exc.message)
            return None
        entry = self._entries[job.id] = _Entry(job, schedule, "chat", stored.created_by)
        if self._started:
            # Made by another process a moment ago: the first slot after it was made (now, if that passed); a sun
            # job made before the place was known could not have run before it was.
            made_at = stored.created_at
            if isinstance(schedule, SunSchedule):
                made_at = max(made_at, self._placed_at)
            entry.next_at = self._next(schedule, made_at - 0.001)
            if entry.next_at is None and isinstance(schedule, Once):
                entry.pending = "missed"
        return entry

    def _parse(self, text: str) -> Schedule:
        """A job's schedule, a sun schedule bound to the place; a UsageError when it is wrong or has no place."""
        return _bind(parse_schedule(text), self.place)

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
                entry.pending = None if entry.job.id in self._paused else "startup"
                continue
            # A slot at the very instant of start is due, not missed.
            entry.next_at = self._next(entry.schedule, now - 0.001)
            if entry.job.id in self._paused:
                continue  # paused: nothing it skipped counts as missed
            last = self._last.get(entry.job.id)
            if isinstance(entry.schedule, Once):
                at = entry.schedule.at(self.zone).timestamp()
                if at < now and (last is None or last.at is None or last.at < at):
                    # It would never run otherwise: late beats never, whatever `missed` says.
                    log.info("cron %s: its one time %s passed while off; running it now", entry.job.id, self._iso(at))
                    entry.pending = "missed"
                continue
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
        await self._poll()
        now = self.clock()
        due = [
            e
            for e in self._entries.values()
            if (e.pending or (e.next_at is not None and e.next_at <= now))
            and e.job.id not in self._running
            and e.job.id not in self._paused
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
            if isinstance(entry.schedule, Once) and reason in ("schedule", "missed"):
                await self._forget(entry)
        return runs

    async def _forget(self, entry: _Entry) -> None:
        """A one-time job has run: a chat-made one is removed (its history stays), any other stays idle."""
        entry.next_at = None
        if entry.source == "chat" and self._entries.get(entry.job.id) is entry:
            del self._entries[entry.job.id]
            self._paused.discard(entry.job.id)
            await self.db.call(self.store.delete, entry.job.id)

    async def refresh(self) -> None:
        """Take in other processes' changes now, not at the next minute (one PRAGMA when there are none):
        before a listing or a lookup, so a job just made by `picoagent chat` beside the daemon is there."""
        self._polled_at = None
        await self._poll()

    async def _know(self, job_id: str) -> None:
        """A job id not held here may be one another process has just made: look before calling it unknown."""
        if job_id not in self._entries:
            await self.refresh()

    async def _poll(self, force: bool = False) -> None:
        """Take in what other processes changed (at most once a minute, one PRAGMA when nothing did)."""
        now = self.clock()
        force = force or self._reread
        if not force and self._polled_at is not None and 0 <= now - self._polled_at < POLL_S:
            return
        self._polled_at = now
        try:
            if not await self.db.call(self.store.changed) and not force:
                return
            stored, paused = await self.db.call(lambda: (self.store.jobs(), self.store.paused()))
        except PicoagentError as exc:
            log.error("cron: cannot read the jobs made in chat: %s", exc.message)
            return
        self._reread = False
        by_id = {s.job.id: s for s in stored}
        for job_id, held in list(self._entries.items()):
            if held.source == "chat" and job_id not in by_id:
                log.info("cron %s: cancelled by another process", job_id)
                del self._entries[job_id]
        for job_id, found in by_id.items():
            entry = self._entries.get(job_id)
            fresh = entry is None or (entry.source == "chat" and entry.job != found.job)
            if fresh and self._adopt(found) is not None:
                log.info("cron %s: added by %s", job_id, found.created_by or "another process")
        for job_id in self._paused - paused:
            self._resumed(job_id)
        self._paused = paused

    def _resumed(self, job_id: str) -> None:
        entry = self._entries.get(job_id)
        if entry is None or not self._started:
            return
        if isinstance(entry.schedule, Startup):
            return
        entry.next_at = self._next(entry.schedule, self.clock() - 0.001)
        if entry.next_at is None and isinstance(entry.schedule, Once) and self._last.get(job_id) is None:
            entry.pending = "missed"  # its one time passed while paused: it runs now, once

    def seconds_to_next(self) -> float:
        """How long run() sleeps before the next tick."""
        soonest = min(
            (e.next_at for e in self._entries.values() if e.next_at is not None and e.job.id not in self._paused),
            default=None,
        )
        if soonest is None:
            return MAX_SLEEP_S
        return min(MAX_SLEEP_S, max(0.01, soonest - self.clock()))

    async def run(self) -> None:
        """Run the jobs forever (startup jobs and missed runs first); jobs may come later, from chat."""
        while True:
            try:
                await self.tick()
            except Exception:  # jobs' own failures are results; this is a bug, and must not end every job
                log.exception("cron: the scheduler tick failed")
            await self.sleep(self.seconds_to_next())

    def is_running(self, job_id: str) -> bool:
        """Whether the job runs now (by its schedule or by hand)."""
        return job_id in self._running

    def _entry(self, job_id: str) -> _Entry:
        entry = self._entries.get(job_id)
        if entry is None:
            jobs = known(self._entries, "none: add them under scheduler.jobs or in workspace/cron.yaml")
            raise UnknownJobError(f"no cron job named {job_id!r}", fix=f"known jobs: {jobs}")
        return entry

    async def run_now(self, job_id: str) -> str:
        """Run a job now, as its schedule would (recorded, delivered); its result, or the failure raised."""
        await self._know(job_id)
        entry = self._entry(job_id)
        if self.is_running(job_id):
            raise JobRunningError(f"cron job {job_id} is running now", fix="wait for it to finish")
        run = await self._run(entry.job, "manual")
        if not run.ok:
            raise PicoagentError(f"cron job {job_id} failed: {run.result}")
        if isinstance(entry.schedule, Once):  # a run by hand is a try: the job still runs at its time (walk 9)
            at = entry.schedule.at(self.zone)
            now = "" if entry.source == "config" else f"; `picoagent cron cancel {job_id}` removes it now"
            later = f"still runs once at {at:%Y-%m-%d %H:%M}, then it is removed{now}"
            return f"{run.result}\n(run by hand: {job_id} {later})"
        return run.result

    # --- jobs made in chat, pausing, the history -------------------------------------------------

    def checked(self, job: CronJob) -> CronJob:
        """The job as it would be added: an id given when it has none; a UsageError saying what is wrong."""
        from appliance.config.checks import check_job
        from appliance.schedule.naming import new_job_id  # here: the idle daemon never needs it

        schedule = self._parse(job.schedule)
        if not job.id:
            job = replace(job, id=new_job_id(job, schedule, self._entries))
        elif job.id in self._entries:
            raise JobIdTaken(f"a cron job named {job.id!r} exists already", fix="choose another id, or leave it out")
        try:
            check_job(job, f"cron job {job.id}", f"cron job {job.id}: ", self.devices)
        except ConfigError as exc:
            raise UsageError(exc.message, fix=exc.fix) from None
        now = self.clock()
        if isinstance(schedule, Once) and schedule.at(self.zone).timestamp() <= now:
            raise UsageError(
                f"cron job {job.id}: {schedule.text} has passed (it is {self._iso(now)} here)",
                fix="give a time still to come",
            )
        return replace(job, schedule=schedule.text) if isinstance(schedule, Once) else job

    async def add_job(self, job: CronJob, created_by: str) -> dict[str, Any]:
        """Store a job (the database: it survives restarts) and schedule it now; its row (see list_jobs)."""
        await self._poll(force=True)  # ids other processes took since the last look
        job = self.checked(job)
        stored = await self.db.call(self.store.add, job, created_by)
        entry = self._adopt(stored)
        assert entry is not None
        if self._started:
            entry.next_at, entry.pending = self._next(entry.schedule, self.clock() - 0.001), None
        self._paused.discard(job.id)
        log.info("cron %s: added by %s (%s, %s)", job.id, created_by, job.schedule, does(job))
        return self._row(entry)

    async def pause(self, job_id: str, by: str = "") -> dict[str, Any]:
        """Pause any job (persisted): it neither runs nor counts as missed until resumed."""
        await self._know(job_id)
        entry = self._entry(job_id)
        await self.db.call(self.store.set_paused, job_id, True, by)
        self._paused.add(job_id)
        log.info("cron %s: paused%s", job_id, f" by {by}" if by else "")
        return self._row(entry)

    async def resume(self, job_id: str) -> dict[str, Any]:
        """Resume a paused job: it runs at its next slot (a one-time job whose time passed: now)."""
        await self._know(job_id)
        entry = self._entry(job_id)
        await self.db.call(self.store.set_paused, job_id, False)
        if job_id in self._paused:
            self._paused.discard(job_id)
            self._resumed(job_id)
            log.info("cron %s: resumed", job_id)
        return self._row(entry)

    async def cancel(self, job_id: str) -> dict[str, Any]:
        """Remove a job made in chat (its history stays); the config's and cron.yaml's are refused."""
        await self._know(job_id)
        entry = self._entry(job_id)
        if entry.source != "chat":
            where = "the config's scheduler.jobs" if entry.source == "config" else "workspace/cron.yaml"
            raise JobNotOursError(
                f"cron job {job_id} comes from {where}, so it is not cancelled here",
                fix=f"remove it from {where}, or pause it (`picoagent cron pause {job_id}`)",
            )
        row = self._row(entry)
        await self.db.call(self.store.delete, job_id)
        self._entries.pop(job_id, None)
        self._paused.discard(job_id)
        log.info("cron %s: cancelled", job_id)
        return row

    async def runs(self, job_id: str, limit: int = 20) -> list[dict[str, Any]]:
        """A job's runs, newest first: at (ISO, in the zone), ok, result, reason (a removed job's too)."""
        await self._know(job_id)
        if not 1 <= limit <= 1000:
            raise UsageError(f"limit {limit}: expected 1 to 1000")
        found = await self.db.call(self.store.runs, job_id, limit)
        if not found and job_id not in self._entries:
            self._entry(job_id)  # raises UnknownJobError with the known ids
        return [{"at": self._iso(at), "ok": ok, "result": result, "reason": reason} for at, ok, result, reason in found]

    def find(self, words: str) -> list[dict[str, Any]]:
        """The rows of the jobs ``words`` point at ("7:30 fan", "bins reminder"; see naming.matches)."""
        from appliance.schedule.naming import matches

        if words.strip() in self._entries:  # an id, as a person taps it from a list
            return [self._row(self._entries[words.strip()])]
        return [self._row(e) for e in self._entries.values() if matches(words, e.job, e.schedule)]

    def _row(self, entry: _Entry) -> dict[str, Any]:
        job = entry.job
        next_at = entry.next_at
        if not self._started and not isinstance(entry.schedule, Startup):
            next_at = self._next(entry.schedule, self.clock() - 0.001)
        paused = job.id in self._paused
        last = self._last.get(job.id, LastRun(None, None, None))
        return {
            "id": job.id,
            "schedule": job.schedule,
            "does": does(job),
            "next_run": None if paused else self._iso(next_at),
            "last_run": self._iso(last.at),
            "last_result": last.result,
            "last_ok": last.ok,
            "deliver": job.deliver,
            "missed": job.missed,
            "paused": paused,
            "source": entry.source,
            "once": isinstance(entry.schedule, Once),
            "created_by": entry.created_by,
            "made": made(entry.source, entry.created_by),
        }

    def list_jobs(self) -> list[dict[str, Any]]:
        """Every job: id, schedule, what it does, next and last run (ISO, in the zone), paused, source."""
        return [self._row(entry) for entry in self._entries.values()]

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
            await self.db.call(self.store.record, job.id, started, result[:RESULT_CHARS], ok, reason)
        except PicoagentError as exc:
            log.error("cron %s: cannot record the run: %s", job.id, exc.message)
        if ok:
            log.info("cron %s: ran (%s)", job.id, reason)
            if job.deliver and result and job.message:
                self._notify(result, "reminder")  # the owner's own words ("Reminder: ..."), as they are
            elif job.deliver and result:
                self._notify(f"{job.id}: {result}")
        else:
            log.warning("cron %s: failed (%s): %s", job.id, reason, result)
            # Failures are news even for jobs that do not deliver; a job failing again is not.
            if previous is None or previous.ok is not False:
                self._notify(f"{job.id} failed: {result}")
        return JobRun(job.id, started, ok, result, reason)

    def _notify(self, text: str, kind: str = "cron") -> None:
        if self.notify is None:
            return
        try:
            self.notify(text, kind)
        except Exception:  # delivery trouble must not stop the jobs
            log.exception("cannot queue a cron notification")
