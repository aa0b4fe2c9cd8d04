"""Cron jobs and the heartbeat: schedules in a time zone, missed runs, results recorded and delivered.

Schedules (:func:`parse_schedule`):

- ``every 30m`` / ``every 2h`` / ``every 45s`` / ``every 1d``: elapsed real time. The slots are the
  multiples of the interval since the Unix epoch, so daylight saving never moves them and a restart
  keeps the rhythm (``every 30m`` falls on :00 and :30; ``every 1d`` is midnight UTC, use ``daily``
  for a time of day).
- ``daily 09:00``: the fixed-time cron job ``0 9 * * *``. ``hourly :15``: the wildcard job ``15 * * * *``.
- ``startup``: once each time the scheduler starts.
- ``m h dom mon dow``: Vixie cron. ``*``, lists, ranges, steps (``*/15``, ``1-30/5``), names (``jan``,
  ``mon``; Sunday is 0 or 7). When both day fields are restricted a day matches either (OR); a field
  starting with ``*`` (even ``*/2``) counts as unrestricted, and then both must match.

Daylight saving follows Vixie cron, which tells jobs apart by their minute and hour fields:

- fixed-time jobs (neither field starts with ``*``: ``daily 02:30``, ``30 2 * * *``): a local time
  skipped by the spring-forward jump runs once at the first instant after the gap (02:30 -> 03:00);
  a local time that happens twice at fall-back runs once, at its first occurrence.
- wildcard jobs (``hourly :15``, ``15 * * * *``, ``*/10 * * * *``): follow the clock as it goes. A
  skipped local time does not run and a repeated one runs both times, so ``hourly :15`` fires every
  real hour: 23 times on the spring-forward day, 25 on the fall-back day.
"""

from __future__ import annotations

import asyncio
import calendar
import dataclasses
import difflib
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from datetime import time as dtime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from appliance.config import CronJob
from appliance.errors import ConfigError, PicoagentError, UsageError
from appliance.llm.base import ChatMessage, ChatModel, GenerationRequest
from appliance.memory.db import Database

if TYPE_CHECKING:
    from appliance.agent.record import ReplyRecord
    from appliance.hardware.devices import DeviceAccess

log = logging.getLogger(__name__)

FORMS = 'use "every 30m" (s, m, h or d), "daily 09:00", "hourly :15", "startup" or a cron expression "0 7 * * 1-5"'
MAX_SLEEP_S = 60.0  # wake at least this often: the wall clock can jump (NTP after boot) while we sleep
JOB_TIMEOUT_S = 900.0
RESULT_CHARS = 2000  # the longest result kept in schedule_runs
_SEARCH_DAYS = 366 * 9  # Feb 29 on a given weekday can be 8 years away (no leap year in 2100)
_MONTH_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # the most each month can have
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_JOB_ID = re.compile(r"[a-z][a-z0-9_]{0,39}")


# --- schedules -----------------------------------------------------------------------------------


class Schedule:
    """When a job runs."""

    text: str

    def next_after(self, t: datetime) -> datetime | None:
        """The first run strictly after ``t`` (aware), in ``t``'s zone; None when it never runs again."""
        raise NotImplementedError


@dataclass(frozen=True)
class Startup(Schedule):
    """Once each time the scheduler starts, never on a clock."""

    text: str

    def next_after(self, t: datetime) -> datetime | None:
        """Never: startup jobs run only at start."""
        return None


@dataclass(frozen=True)
class Interval(Schedule):
    """Every N seconds of real time, on multiples of N since the epoch."""

    text: str
    seconds: int

    def next_after(self, t: datetime) -> datetime | None:
        """The next multiple of the interval after ``t``."""
        zone = _zone_of(t)
        return datetime.fromtimestamp((int(t.timestamp() // self.seconds) + 1) * self.seconds, zone)


@dataclass(frozen=True)
class CronSchedule(Schedule):
    """A 5-field cron expression, matched against local wall-clock time (DST rules: module docstring)."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_star: bool  # the day-of-month field starts with *
    weekdays_star: bool
    wildcard: bool  # the minute or hour field starts with *: follows the clock through DST changes

    def next_after(self, t: datetime) -> datetime | None:
        """The first matching instant after ``t``."""
        zone = _zone_of(t)
        after = t.astimezone(UTC)
        # Start a day early: a skipped time moved to the end of its gap can land on the next date.
        day = t.astimezone(zone).date() - timedelta(days=1)
        for _ in range(_SEARCH_DAYS):
            if self._matches(day):
                for instant in self._instants(day, zone):
                    if instant > after:
                        return instant.astimezone(zone)
            day += timedelta(days=1)
        return None

    def _matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.weekday() + 1) % 7 in self.weekdays
        return (dom and dow) if self.days_star or self.weekdays_star else (dom or dow)

    def _instants(self, day: date, zone: tzinfo) -> list[datetime]:
        """This day's runs as UTC instants, sorted (a repeated hour interleaves them)."""
        found: set[datetime] = set()
        for hour in self.hours:
            for minute in self.minutes:
                found.update(_wall_instants(datetime.combine(day, dtime(hour, minute)), zone, self.wildcard))
        return sorted(found)


def _zone_of(t: datetime) -> tzinfo:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError("next_after needs an aware datetime (with its time zone)")
    return t.tzinfo


def _wall_instants(wall: datetime, zone: tzinfo, wildcard: bool) -> list[datetime]:
    """The UTC instants a naive local time stands for, by the DST rules of the module docstring."""
    first = wall.replace(tzinfo=zone)
    utc = first.astimezone(UTC)
    if utc.astimezone(zone).replace(tzinfo=None) != wall:  # skipped by a forward jump
        return [] if wildcard else [_gap_end(wall, zone)]
    second = wall.replace(tzinfo=zone, fold=1)
    if wildcard and second.utcoffset() != first.utcoffset():  # happens twice
        return [utc, second.astimezone(UTC)]
    return [utc]


def _gap_end(wall: datetime, zone: tzinfo) -> datetime:
    """The first instant after the gap a skipped local time falls in (the moment the clock jumped)."""
    # In a gap, fold=1 reads the time with the offset after the jump, which lands before the jump,
    # and fold=0 with the offset before it, which lands after: the jump lies between the two.
    lo = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    hi = int(wall.replace(tzinfo=zone, fold=0).timestamp())
    offset_after = datetime.fromtimestamp(hi, zone).utcoffset()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, zone).utcoffset() == offset_after:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, UTC)


def _bad(text: str, why: str) -> UsageError:
    return UsageError(f'schedule "{text}": {why}', fix=FORMS)


def parse_schedule(text: str) -> Schedule:
    """A schedule from its text (forms: module docstring), or a UsageError saying what is wrong."""
    spec = " ".join(str(text).split())
    lowered = spec.lower()
    if not spec:
        raise _bad(text, "it is empty")
    if lowered == "startup":
        return Startup(spec)
    if lowered in _MACROS:
        return _cron(_MACROS[lowered].split(" "), spec)
    word, _, rest = lowered.partition(" ")
    if word == "every":
        match = re.fullmatch(r"(\d+) ?([smhd])", rest)
        if not match:
            raise _bad(text, 'expected a number and a unit (s, m, h or d) after "every", e.g. "every 30m"')
        seconds = int(match.group(1)) * _UNITS[match.group(2)]
        if seconds <= 0:
            raise _bad(text, "the interval must be more than 0")
        return Interval(spec, seconds)
    if word == "daily":
        match = re.fullmatch(r"(\d{1,2}):(\d{2})", rest)
        if not match:
            raise _bad(text, 'expected a time HH:MM after "daily", e.g. "daily 09:00"')
        hour, minute = int(match.group(1)), int(match.group(2))
        if hour > 23 or minute > 59:
            raise _bad(text, "the time must be from 00:00 to 23:59")
        return _cron([str(minute), str(hour), "*", "*", "*"], spec)
    if word == "hourly":
        match = re.fullmatch(r":(\d{2})", rest)
        if not match or int(match.group(1)) > 59:
            raise _bad(text, 'expected the minute after "hourly", from :00 to :59, e.g. "hourly :15"')
        return _cron([match.group(1), "*", "*", "*", "*"], spec)
    fields = spec.split(" ")
    if len(fields) == 5:
        return _cron(fields, spec)
    if len(fields) > 2 and all(re.fullmatch(r"[\w*/,-]+", f) for f in fields):
        raise _bad(text, f"a cron expression has 5 fields (minute hour day month weekday), this has {len(fields)}")
    raise _bad(text, "not a schedule picoagent knows")


_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)


def _cron(fields: list[str], spec: str) -> CronSchedule:
    minutes, hours, days, months, weekdays = (
        _field(text, spec, *rule) for text, rule in zip(fields, _FIELDS, strict=True)
    )
    days_star, weekdays_star = fields[2].startswith("*"), fields[4].startswith("*")
    if weekdays_star and not any(day <= _MONTH_DAYS[m] for m in months for day in days):
        raise _bad(spec, "that day never comes in those months, so the job would never run")
    return CronSchedule(
        text=spec,
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset(d % 7 for d in weekdays),  # 7 is Sunday too
        days_star=days_star,
        weekdays_star=weekdays_star,
        wildcard=fields[0].startswith("*") or fields[1].startswith("*"),
    )


def _field(text: str, spec: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    """One cron field's values: * and lists of values, ranges and steps."""
    values: set[int] = set()
    for part in text.split(","):
        body, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit()) or int(step_text) == 0:
                raise _bad(spec, f"{name} field {text!r}: the step after / must be a whole number above 0")
            step = int(step_text)
        if body == "*":
            first, last = low, high
        else:
            start, dash, end = body.partition("-")
            first = _value(start, spec, name, low, high, names)
            last = _value(end, spec, name, low, high, names) if dash else first
            if slash and not dash:
                raise _bad(spec, f"{name} field {text!r}: a step goes after * or a range, e.g. */15 or 0-30/5")
            if first > last:
                raise _bad(spec, f"{name} field {text!r}: the range runs backwards")
        values.update(range(first, last + 1, step))
    return values


def _value(text: str, spec: str, name: str, low: int, high: int, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not (text.isascii() and text.isdigit()):
        known = f" or a name ({', '.join(names)})" if names else ""
        raise _bad(spec, f"{name} {text!r} is not a number from {low} to {high}{known}")
    if not low <= int(text) <= high:
        raise _bad(spec, f"{name} {text} is out of range ({low}-{high})")
    return int(text)


def resolve_zone(name: str) -> tzinfo:
    """The IANA zone ``name``, or the system's local zone when it is empty (UTC when none is set)."""
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise ConfigError(f"scheduler.timezone: unknown time zone {name!r}", fix='e.g. "Europe/Brussels"') from None
    key = os.environ.get("TZ", "").lstrip(":")
    try:
        # Raspberry Pi OS: /etc/localtime links into /usr/share/zoneinfo, and the link names the zone.
        key = key or os.readlink("/etc/localtime").split("zoneinfo/", 1)[1]
        return ZoneInfo(key)
    except (OSError, IndexError, ValueError, ZoneInfoNotFoundError):
        pass
    try:
        with open("/etc/localtime", "rb") as f:
            return ZoneInfo.from_file(f, key="localtime")
    except (OSError, ValueError):
        return UTC


# --- jobs from the config and workspace/cron.yaml ------------------------------------------------

_JOB_KEYS = [f.name for f in dataclasses.fields(CronJob)]


def check_job(job: CronJob, where: str, devices: Collection[str] | None = None) -> None:
    """A job's id, what it does and its schedule are valid (ConfigError naming ``where`` otherwise)."""
    if not _JOB_ID.fullmatch(job.id):
        raise ConfigError(f"{where}: id {job.id!r}: lower-case letters, digits and _ (at most 40)")
    if len([k for k in ("prompt", "device", "task") if getattr(job, k)]) != 1:
        raise ConfigError(f"{where}: a job has exactly one of prompt, device (with value) or task")
    if job.device and not job.value:
        raise ConfigError(f"{where}: device {job.device} needs a value: on, off or a brightness like 40%")
    if job.device and devices is not None and job.device not in devices:
        raise ConfigError(f"{where}: no device named {job.device!r}", fix="known devices: " + ", ".join(devices))
    try:
        parse_schedule(job.schedule)
    except UsageError as exc:
        raise ConfigError(f"{where}: {exc.message}", fix=exc.fix) from None


def _job_from(raw: object, where: str) -> CronJob:
    """One cron.yaml entry as a CronJob (types checked; ${NAME} references are not resolved here)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with id, schedule and prompt, device or task")
    for key in raw:
        if key not in _JOB_KEYS:
            close = difflib.get_close_matches(str(key), _JOB_KEYS, n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"{where}: {key}: unknown key{hint}", fix="known keys: " + ", ".join(_JOB_KEYS))
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "deliver" and not isinstance(value, bool):
            raise ConfigError(f"{where}: deliver: expected true or false, got {value!r}")
        if key == "missed" and value not in ("skip", "run_once"):
            raise ConfigError(f'{where}: missed: expected "skip" or "run_once", got {value!r}')
        if key == "value" and isinstance(value, bool):
            value = "on" if value else "off"  # YAML reads a bare on/off as true/false
        if key not in ("deliver", "missed"):
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise ConfigError(f"{where}: {key}: expected a string, got {value!r}")
            value = str(value)
        values[key] = value
    missing = [key for key in ("id", "schedule") if key not in values]
    if missing:
        raise ConfigError(f"{where}: {' and '.join(missing)} missing")
    return CronJob(**values)


def load_jobs(config_jobs: Sequence[CronJob], workspace: Path, devices: Collection[str] | None = None) -> list[CronJob]:
    """The config's jobs and those of ``workspace/cron.yaml`` (a YAML list of the same fields), checked."""
    import yaml  # lazy, like the config loader

    jobs = list(config_jobs)
    for i, job in enumerate(jobs):
        check_job(job, f"scheduler.jobs[{i}] ({job.id})", devices)
    path = workspace / "cron.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return jobs
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark else ""
        raise ConfigError(f"{path}{line}: {getattr(exc, 'problem', None) or 'invalid YAML'}") from None
    if raw is None:
        return jobs
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: expected a list of jobs (- id: ..., schedule: ...)")
    ids = {job.id: "the config (scheduler.jobs)" for job in jobs}
    for n, entry in enumerate(raw, 1):
        name = entry.get("id") if isinstance(entry, dict) else None
        where = f"{path}, entry {n}" + (f" ({name})" if isinstance(name, str) else "")
        job = _job_from(entry, where)
        check_job(job, where, devices)
        if job.id in ids:
            raise ConfigError(f"{where}: the id {job.id!r} is already used in {ids[job.id]}", fix="rename one of them")
        ids[job.id] = f"{path.name} entry {n}"
        jobs.append(job)
    return jobs


# --- the scheduler -------------------------------------------------------------------------------

RunReason = Literal["schedule", "startup", "missed", "manual"]


@dataclass(frozen=True)
class JobRun:
    """One run of a job."""

    job_id: str
    at: float
    ok: bool
    result: str
    reason: RunReason


@dataclass(frozen=True)
class LastRun:
    """A job's row of schedule_runs."""

    at: float | None
    result: str | None
    ok: bool | None


@dataclass
class _Entry:
    job: CronJob
    schedule: Schedule
    next_at: float | None = None
    pending: RunReason | None = None  # run at the next tick whatever the clock says


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
    ) -> None:
        self.zone = resolve_zone(tz)
        self.run_job = run_job
        self.notify = notify
        self.db = db
        self.clock = clock
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
            await asyncio.sleep(self.seconds_to_next())

    async def run_now(self, job_id: str) -> str:
        """Run a job now, as its schedule would (recorded, delivered); its result, or the failure raised."""
        entry = self._entries.get(job_id)
        if entry is None:
            known = ", ".join(sorted(self._entries)) or "none: add them under scheduler.jobs or in workspace/cron.yaml"
            raise UsageError(f"no cron job named {job_id!r}", fix=f"known jobs: {known}")
        if job_id in self._running:
            raise UsageError(f"cron job {job_id} is running now", fix="wait for it to finish")
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
                    "does": _does(job),
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


def _does(job: CronJob) -> str:
    if job.prompt:
        return f"prompt: {job.prompt}"
    if job.device:
        return f"set {job.device} {job.value}"
    return f"task: {job.task}"


class _Agent(Protocol):
    async def turn(self, text: str, *, channel: str = ..., chat_id: str = ...) -> ReplyRecord: ...


def make_job_runner(
    agent: _Agent | None,
    devices: DeviceAccess | None,
    tasks_start: Callable[[str], Awaitable[str]] | None,
) -> Callable[[CronJob], Awaitable[str]]:
    """The default ``run_job``: a prompt goes to the agent, a device is set, a task is started."""

    async def run_job(job: CronJob) -> str:
        if job.prompt:
            if agent is None:
                raise UsageError(f"cron job {job.id}: no agent to answer the prompt here")
            record = await agent.turn(job.prompt, channel="cron", chat_id=job.id)
            return record.text
        if job.device:
            if devices is None:
                raise UsageError(f"cron job {job.id}: no devices are configured")
            result = await devices.set(job.device, job.value, requested_by=f"cron:{job.id}")
            return result.describe()
        if tasks_start is None:
            raise UsageError(f"cron job {job.id}: tasks run only inside the daemon")
        return await tasks_start(job.task)

    return run_job


# --- the heartbeat -------------------------------------------------------------------------------

HEARTBEAT_TEMPLATE = """\
<!--
HEARTBEAT.md: things for picoagent to keep an eye on. Every few minutes (scheduler.heartbeat_minutes)
the local model reads the lines below, with the current time and every device's readings, and
messages you only when one of them needs you. List the checks one per line, for example:

- remind me if the soil level is below 30%
- tell me if the living room is warmer than 28 °C after 22:00

Text inside these comment marks is not read. With no lines outside them nothing runs at all.
Checks stay on the Pi. A line marked [cloud] is meant for a cloud model later; none is set up,
so it is checked here like the others.
-->
"""
HEARTBEAT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"notify": {"type": "boolean"}, "message": {"type": "string", "maxLength": 200}},
    "required": ["notify", "message"],
    "additionalProperties": False,
}
HEARTBEAT_SYSTEM = (
    "You check a short list of things for the owner of this home. Answer in JSON only. "
    'When a check needs the owner\'s attention now, answer {"notify": true, "message": "<one short sentence>"}; '
    'otherwise answer {"notify": false, "message": ""}.'
)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_BULLET = re.compile(r"^[-*+]\s+")
_CLOUD = re.compile(r"\s*\[cloud\]\s*", re.IGNORECASE)


def heartbeat_tasks(text: str) -> tuple[list[str], list[str]]:
    """The task lines of HEARTBEAT.md: (plain ones, ones marked [cloud]); comments and headings skipped."""
    text = _COMMENT.sub("", text).split("<!--")[0]  # an unclosed comment runs to the end
    plain: list[str] = []
    cloud: list[str] = []
    for raw in text.splitlines():
        line = _BULLET.sub("", raw.strip())
        if not line or line.startswith("#"):
            continue
        if _CLOUD.search(line):
            cloud.append(_CLOUD.sub(" ", line).strip())
        else:
            plain.append(line)
    return plain, cloud


async def device_readings(devices: DeviceAccess) -> str:
    """Every readable device's current readings, one line each (the heartbeat's view of the home)."""
    lines = []
    for device in devices.describe():
        if "read" not in device["allowed"]:
            continue
        try:
            readings = await devices.read(device["name"])
        except PicoagentError as exc:
            lines.append(f"{device['name']}: unavailable ({exc.message})")
            continue
        lines.append(f"{device['name']}: " + ", ".join(str(r) for r in readings))
    return "\n".join(lines)


class Heartbeat:
    """Every N minutes, the local model checks HEARTBEAT.md's tasks and speaks only when one needs the owner.

    ``local_model`` must be the on-device model (the runtime's FairScheduler in the daemon): the tasks and
    readings describe the home and never leave the Pi. ``escalate`` is the one way out, for later: it is
    called only with the lines marked ``[cloud]``, and only when given; without it those lines stay local.
    """

    def __init__(
        self,
        workspace_file: Path,
        local_model: ChatModel,
        notify: Callable[[str, str], object] | None,
        *,
        readings: Callable[[], Awaitable[str]] | None = None,
        every_minutes: int = 30,
        tz: str = "",
        clock: Callable[[], float] = time.time,
        escalate: Callable[[str], Awaitable[str | None]] | None = None,
        max_tokens: int = 128,
    ) -> None:
        if every_minutes < 1:
            raise ValueError("the heartbeat runs every 1 minute or more (0 turns it off: do not start it)")
        self.path = workspace_file
        self.local_model = local_model
        self.notify = notify
        self.readings = readings
        self.every_minutes = every_minutes
        self.zone = resolve_zone(tz)
        self.clock = clock
        self.escalate = escalate
        self.max_tokens = max_tokens
        self.last_run_at: float | None = None
        self.last_decision: str | None = None

    def ensure_file(self) -> bool:
        """Write the commented template on first run; True when it was created."""
        if self.path.exists():
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(HEARTBEAT_TEMPLATE, encoding="utf-8")
        log.info("created %s", self.path)
        return True

    async def check(self) -> str | None:
        """Check the tasks once; the message sent to the owner, or None when there is nothing to report."""
        self.ensure_file()
        self.last_run_at = self.clock()
        plain, cloud = heartbeat_tasks(self.path.read_text(encoding="utf-8"))
        if not plain and not cloud:
            self.last_decision = "no tasks"
            return None
        if self.escalate is None:
            plain, cloud = plain + cloud, []  # no way out configured: every check stays on the Pi
        when = datetime.fromtimestamp(self.last_run_at, self.zone)
        readings = await self._readings()
        messages = []
        decision = "nothing to report"
        if plain:
            found, decision = await self._ask_local(_heartbeat_prompt(plain, when, readings))
            if found:
                messages.append(found)
        if cloud and self.escalate is not None:
            found = await self.escalate(_heartbeat_prompt(cloud, when, readings))
            if found and found.strip():
                messages.append(found.strip())
        if not messages:
            self.last_decision = decision
            return None
        message = "\n".join(messages)
        self.last_decision = f"notified: {message}"
        if self.notify is not None:
            self.notify(message, "heartbeat")
        log.info("heartbeat: %s", message)
        return message

    async def _readings(self) -> str:
        if self.readings is None:
            return ""
        try:
            return await self.readings()
        except Exception as exc:  # the checks still run, without the readings
            log.warning("heartbeat: cannot read the devices: %s", exc)
            return "(device readings unavailable)"

    async def _ask_local(self, prompt: str) -> tuple[str | None, str]:
        """The local model's finding (None: nothing to report) and the decision, as last_decision shows it."""
        request = GenerationRequest(
            messages=[ChatMessage("system", HEARTBEAT_SYSTEM), ChatMessage("user", prompt)],
            max_tokens=self.max_tokens,
            temperature=0.0,
            json_schema=HEARTBEAT_SCHEMA,
            client="heartbeat",
        )
        try:
            generation = await self.local_model.generate(request)
        except PicoagentError as exc:
            log.warning("heartbeat: the model failed: %s", exc.message)
            return None, f"model failed: {exc.message}"
        try:
            answer = json.loads(generation.text)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            # Silent rather than wrong: a cut-off or garbled answer is not worth a message.
            log.warning("heartbeat: unreadable answer %r", generation.text[:200])
            return None, "unreadable answer"
        message = str(answer.get("message") or "").strip()
        if answer.get("notify") is True and message:
            return message, "notify"
        return None, "nothing to report"

    async def run(self) -> None:
        """Check every N minutes, forever (the first check after N minutes: the model may be loading)."""
        self.ensure_file()
        while True:
            await asyncio.sleep(self.every_minutes * 60)
            try:
                await self.check()
            except Exception:  # one bad check must not end the heartbeat
                log.exception("heartbeat check failed")


def _heartbeat_prompt(tasks: list[str], when: datetime, readings: str) -> str:
    zone = getattr(when.tzinfo, "key", None) or when.tzname() or ""
    return (
        f"Now: {when:%A %Y-%m-%d %H:%M} {zone}\n"
        f"Device readings:\n{readings or '(no devices)'}\n"
        "Checks:\n" + "\n".join(f"- {task}" for task in tasks)
    )
