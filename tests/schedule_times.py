"""Times the schedule suites write their cases in: UTC instants, Brussels wall-clock times, and every run of a
schedule between two instants (tests/test_schedule_parse.py, tests/test_scheduler.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from appliance.schedule.parse import parse_schedule

BRUSSELS = ZoneInfo("Europe/Brussels")


def utc(text: str) -> datetime:
    """A UTC instant from "2026-03-29 01:00"."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def local(text: str) -> datetime:
    """A Brussels wall-clock time (first occurrence when it happens twice)."""
    return datetime.fromisoformat(text).replace(tzinfo=BRUSSELS)


def runs_between(text: str, start: datetime, end: datetime) -> list[str]:
    """Every run of a schedule in [start, end), as "MM-DD HH:MM" UTC."""
    schedule = parse_schedule(text)
    out = []
    t: datetime | None = start.astimezone(BRUSSELS) - timedelta(microseconds=1)
    while True:
        assert t is not None
        t = schedule.next_after(t)
        if t is None or t >= end:
            return out
        out.append(t.astimezone(UTC).strftime("%m-%d %H:%M"))
