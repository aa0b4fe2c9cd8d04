"""Schedules: parsing the text of one, and when it next runs in a time zone. A leaf: it imports nothing
from appliance but the errors, so the config checks use it to validate jobs without the scheduler.

The forms (:func:`parse_schedule`):

- ``every 30m`` / ``every 2h`` / ``every 45s`` / ``every 1d``: elapsed real time. The slots are the
  multiples of the interval since the Unix epoch, so daylight saving never moves them and a restart
  keeps the rhythm (``every 30m`` falls on :00 and :30; ``every 1d`` is midnight UTC, use ``daily``
  for a time of day).
- ``daily 09:00``: the fixed-time cron job ``0 9 * * *``. ``hourly :15``: the wildcard job ``15 * * * *``.
- ``startup``: once each time the scheduler starts.
- ``once 2026-11-24 19:00``: one run at that local time (a reminder). It follows the fixed-time DST
  rules below: a time skipped by spring-forward runs at the first instant after the gap, a repeated
  one at its first occurrence. A job on it is removed once it ran (its run stays in the history).
- ``sunset`` / ``sunrise``, with an offset ``sunset-30m``, ``sunrise+1h`` (at most 6 h): every day at
  the sun's time for the place in ``weather.latitude``/``longitude``, computed on the Pi each day
  (:mod:`appliance.weather.sun`). Parsed here without the place; the scheduler binds it
  (:meth:`SunSchedule.at_place`) and refuses the job when there is none. A day with no sunset (a polar
  day or night) has no run: the next is on the first day the sun sets again.
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

:meth:`CronSchedule.next_after` walks forward one day at a time (at most nine years, for Feb 29 on a
given weekday) and builds only a matching day's instants, so a rare day is found without stepping
through minutes. The scheduler calls it once per run of a job, never per tick. Measured on an x86
server core (a Pi takes several times longer): ``daily 09:00`` 8 µs, ``0 0 29 2 *`` eight years out
0.9 ms, ``*/5 * * * *`` 1.9 ms (all 288 instants of two days); ``every 30m`` 1 µs; parsing 7 µs.
"""

from __future__ import annotations

import calendar
import os
import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta, tzinfo
from datetime import time as dtime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from appliance.errors import ConfigError, UsageError

FORMS = (
    'use "every 30m" (s, m, h or d), "daily 09:00", "hourly :15", "startup", "once 2026-11-24 19:00",'
    ' "sunset", "sunrise+15m" or a cron expression "0 7 * * 1-5"'
)
SUN_OFFSET_MAX_S = 6 * 3600
_SUN = re.compile(r"(sunrise|sunset)(?: ?([+-]) ?(\d+) ?([mh]))?")
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


def once_after(seconds: float, now: datetime) -> tuple[str, bool]:
    """The ``once`` form of ``now`` plus ``seconds`` in real time, rounded UP to the whole minute (a job never
    runs before the time asked: at 10:00:40 "in 10 minutes" is 10:11), and whether that local time happens
    twice (the clocks going back: the form names the first). The one resolver of "in N minutes": the schedule
    words (appliance/understanding/schedule_times.py) and the schedule tool (appliance/tools/scheduling.py)
    both ask it."""
    at = now.astimezone(UTC) + timedelta(seconds=seconds)
    if at.second or at.microsecond:
        at = at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    local = at.astimezone(now.tzinfo)
    return f"once {local:%Y-%m-%d %H:%M}", bool(local.fold)


@dataclass(frozen=True)
class Once(Schedule):
    """One run at a local wall-clock time, in the zone of the time it is asked about."""

    text: str
    wall: datetime  # naive: the local date and time as written

    def at(self, zone: tzinfo) -> datetime:
        """The instant it runs in ``zone`` (a skipped time: the end of the gap; a repeated one: the first)."""
        return _wall_instants(self.wall, zone, wildcard=False)[0].astimezone(zone)

    def next_after(self, t: datetime) -> datetime | None:
        """Its instant when that is after ``t``; else None (it has run, or its time has passed)."""
        instant = self.at(_zone_of(t))
        return instant if instant > t else None


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


@dataclass(frozen=True)
class SunSchedule(Schedule):
    """Every day at sunrise or sunset (plus an offset) at a place; unbound (no place) until the scheduler binds it."""

    text: str
    event: Literal["sunrise", "sunset"]
    offset_s: int = 0
    place: tuple[float, float] | None = None  # latitude, longitude

    def at_place(self, latitude: float, longitude: float) -> SunSchedule:
        """This schedule for a place."""
        return replace(self, place=(latitude, longitude))

    def next_after(self, t: datetime) -> datetime | None:
        """The next sunrise or sunset (plus the offset) after ``t``; None when the sun does neither for a year."""
        if self.place is None:
            raise ValueError(f"schedule {self.text!r} has no place (SunSchedule.at_place)")
        from appliance.weather.sun import next_event  # a leaf of pure arithmetic, loaded by sun jobs only

        _zone_of(t)
        found = next_event(self.event, t, self.place[0], self.place[1], self.offset_s)
        if found is None or (found.second == 0 and found.microsecond == 0):
            return found
        # On the whole minute, never before the sun's time: "next 16:45", as a person reads a schedule.
        return found.replace(second=0, microsecond=0) + timedelta(minutes=1)


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
    if lowered.startswith(("sunrise", "sunset")):
        return _sun(spec, lowered)
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
    if word == "once":
        match = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})[ t](\d{1,2}):(\d{2})", rest)
        if not match:
            raise _bad(text, 'expected a date and a time after "once", e.g. "once 2026-11-24 19:00"')
        try:
            year, month, day, hour, minute = (int(part) for part in match.groups())
            wall = datetime(year, month, day, hour, minute)
        except ValueError as exc:
            raise _bad(text, f"no such date or time ({exc})") from None
        return Once(f"once {wall:%Y-%m-%d %H:%M}", wall)
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


def _sun(spec: str, lowered: str) -> SunSchedule:
    match = _SUN.fullmatch(lowered)
    if not match:
        raise _bad(spec, 'expected sunset or sunrise, with an offset like "sunset-30m" or "sunrise+1h"')
    event: Literal["sunrise", "sunset"] = "sunrise" if match.group(1) == "sunrise" else "sunset"
    if match.group(2) is None:
        return SunSchedule(event, event)
    size = int(match.group(3)) * (60 if match.group(4) == "m" else 3600)
    if size > SUN_OFFSET_MAX_S:
        raise _bad(spec, f"the offset from {event} must be at most 6 hours")
    if size == 0:
        return SunSchedule(event, event)
    return SunSchedule(
        f"{event}{match.group(2)}{match.group(3)}{match.group(4)}", event, size * (-1 if match.group(2) == "-" else 1)
    )


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
