"""Schedules (appliance/schedule/parse.py): the forms that parse, the errors that name what is wrong, next_after
across the 2026 DST changes in Europe/Brussels, and cron's day semantics as vixie cron has them."""

from __future__ import annotations

import itertools
from datetime import date, datetime, timedelta
from typing import Any

import pytest

from appliance.errors import ConfigError, UsageError
from appliance.schedule.parse import FORMS, CronSchedule, Interval, Startup, parse_schedule, resolve_zone
from tests.schedule_times import BRUSSELS, local, runs_between, utc

# --- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"), [("every 30m", 1800), ("every 2h", 7200), ("every 45s", 45), ("every 1d", 86400)]
)
def test_intervals_parse(text: str, seconds: int) -> None:
    schedule = parse_schedule(text)
    assert isinstance(schedule, Interval)
    assert schedule.seconds == seconds


def test_the_word_forms_parse_to_cron_with_the_right_dst_kind() -> None:
    daily = parse_schedule("daily 09:00")
    assert isinstance(daily, CronSchedule)
    assert (daily.minutes, daily.hours, daily.wildcard) == ((0,), (9,), False)
    hourly = parse_schedule("hourly :15")
    assert isinstance(hourly, CronSchedule)
    assert (hourly.minutes, hourly.hours, hourly.wildcard) == ((15,), tuple(range(24)), True)
    assert isinstance(parse_schedule("startup"), Startup)
    assert isinstance(parse_schedule("  Every   30m "), Interval)
    assert _cron_fields("@daily") == _cron_fields("0 0 * * *")


def _cron_fields(text: str) -> tuple[Any, ...]:
    s = parse_schedule(text)
    assert isinstance(s, CronSchedule)
    return (s.minutes, s.hours, s.days, s.months, s.weekdays, s.days_star, s.weekdays_star, s.wildcard)


def test_cron_fields_steps_ranges_lists_and_names() -> None:
    minutes, *_ = _cron_fields("*/15 * * * *")
    assert minutes == (0, 15, 30, 45)
    minutes, *_ = _cron_fields("1-30/5 * * * *")
    assert minutes == (1, 6, 11, 16, 21, 26)
    _, hours, _, months, weekdays, *_ = _cron_fields("0 8,12-14 * jan,JUL mon-fri")
    assert hours == (8, 12, 13, 14)
    assert months == {1, 7}
    assert weekdays == {1, 2, 3, 4, 5}
    # Sunday is 0, 7 or sun.
    assert _cron_fields("0 0 * * 7") == _cron_fields("0 0 * * 0") == _cron_fields("0 0 * * sun")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "it is empty"),
        ("every", 'expected a number and a unit (s, m, h or d) after "every"'),
        ("every 30x", 'expected a number and a unit (s, m, h or d) after "every"'),
        ("every 0m", "the interval must be more than 0"),
        ("daily 9", 'expected a time HH:MM after "daily"'),
        ("daily 25:00", "the time must be from 00:00 to 23:59"),
        ("hourly 15", 'expected the minute after "hourly", from :00 to :59'),
        ("hourly :60", 'expected the minute after "hourly", from :00 to :59'),
        ("60 * * * *", "minute 60 is out of range (0-59)"),
        ("* 24 * * *", "hour 24 is out of range (0-23)"),
        ("0 0 0 * *", "day of month 0 is out of range (1-31)"),
        ("0 0 * 13 *", "month 13 is out of range (1-12)"),
        ("0 0 * * 8", "day of week 8 is out of range (0-7)"),
        ("0 0 * * funday", "day of week 'funday' is not a number from 0 to 7 or a name (sun, mon,"),
        ("0 0 * smarch *", "month 'smarch' is not a number from 1 to 12 or a name (jan, feb,"),
        ("5-1 * * * *", "minute field '5-1': the range runs backwards"),
        ("*/0 * * * *", "the step after / must be a whole number above 0"),
        ("5/10 * * * *", "a step goes after * or a range, e.g. */15 or 0-30/5"),
        ("1,,2 * * * *", "minute '' is not a number"),
        ("0 0 30 2 *", "that day never comes in those months"),
        ("0 0 * * * *", "a cron expression has 5 fields (minute hour day month weekday), this has 6"),
        ("tomorrow", "not a schedule picoagent knows"),
    ],
)
def test_bad_schedules_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_schedule(text)
    assert info.value.message.startswith(f'schedule "{text}": ')
    assert message in info.value.message
    assert info.value.fix == FORMS


def test_next_after_wants_an_aware_time_and_keeps_its_zone() -> None:
    with pytest.raises(ValueError, match="aware"):
        parse_schedule("daily 09:00").next_after(datetime(2026, 6, 1, 8, 0))
    after = parse_schedule("daily 09:00").next_after(local("2026-06-01 08:00"))
    assert after == local("2026-06-01 09:00")
    assert after is not None and after.tzinfo is BRUSSELS
    assert parse_schedule("startup").next_after(local("2026-06-01 08:00")) is None


def test_zones() -> None:
    assert resolve_zone("Europe/Brussels") is BRUSSELS
    assert resolve_zone("") is not None  # the system's (UTC when it has none)
    with pytest.raises(ConfigError, match="unknown time zone 'Mars/Olympus'"):
        resolve_zone("Mars/Olympus")


# --- next_after across the 2026 DST changes in Europe/Brussels -----------------------------------
# Spring forward: 2026-03-29 02:00 CET -> 03:00 CEST (01:00 UTC). Fall back: 2026-10-25 03:00 CEST -> 02:00 CET.


@pytest.mark.parametrize("text", ["daily 02:30", "30 2 * * *"])
def test_a_fixed_time_in_the_spring_gap_runs_once_at_the_end_of_the_gap(text: str) -> None:
    runs = runs_between(text, utc("2026-03-27 12:00"), utc("2026-03-31 12:00"))
    # 02:30 CET, then 03:00 CEST (02:30 does not exist), then 02:30 CEST.
    assert runs == ["03-28 01:30", "03-29 01:00", "03-30 00:30", "03-31 00:30"]


@pytest.mark.parametrize("text", ["daily 02:30", "30 2 * * *"])
def test_a_fixed_time_in_the_autumn_repeat_runs_once_at_its_first_occurrence(text: str) -> None:
    runs = runs_between(text, utc("2026-10-23 12:00"), utc("2026-10-27 12:00"))
    # 02:30 CEST on the 24th and the 25th (the first 02:30 of the two), then 02:30 CET.
    assert runs == ["10-24 00:30", "10-25 00:30", "10-26 01:30", "10-27 01:30"]


def test_hourly_fires_every_real_hour_through_spring_forward() -> None:
    runs = runs_between("hourly :15", local("2026-03-29 00:00"), local("2026-03-30 00:00"))
    assert runs[:4] == ["03-28 23:15", "03-29 00:15", "03-29 01:15", "03-29 02:15"]  # 00:15, 01:15, 03:15, 04:15
    assert len(runs) == 23
    assert _steps(runs) == {3600}


def test_hourly_fires_at_both_2_15s_on_fall_back_day() -> None:
    runs = runs_between("hourly :15", local("2026-10-25 00:00"), local("2026-10-26 00:00"))
    # 00:15, 01:15, 02:15 CEST, 02:15 CET, 03:15 CET
    assert runs[:5] == ["10-24 22:15", "10-24 23:15", "10-25 00:15", "10-25 01:15", "10-25 02:15"]
    assert len(runs) == 25
    assert _steps(runs) == {3600}


@pytest.mark.parametrize(("day", "count"), [("2026-03-29", 46), ("2026-10-25", 50), ("2026-06-10", 48)])
def test_every_30m_is_real_elapsed_time(day: str, count: int) -> None:
    next_day = date.fromisoformat(day) + timedelta(days=1)
    runs = runs_between("every 30m", local(f"{day} 00:00"), local(f"{next_day} 00:00"))
    assert len(runs) == count
    assert _steps(runs) == {1800}
    assert runs_between("every 30m", utc("2026-03-29 00:10"), utc("2026-03-29 02:00")) == [
        "03-29 00:30",
        "03-29 01:00",
        "03-29 01:30",
    ]


def test_other_intervals_sit_on_multiples_of_themselves() -> None:
    assert runs_between("every 1d", utc("2026-03-28 12:00"), utc("2026-03-31 00:00")) == [
        "03-29 00:00",
        "03-30 00:00",
    ]
    assert runs_between("every 2h", utc("2026-03-29 00:00"), utc("2026-03-29 05:00")) == [
        "03-29 00:00",
        "03-29 02:00",
        "03-29 04:00",
    ]
    assert len(runs_between("every 45s", utc("2026-03-29 00:00"), utc("2026-03-29 01:00"))) == 80


def test_several_fixed_times_in_the_gap_collapse_into_one_run() -> None:
    assert runs_between("0,30 2 * * *", local("2026-03-29 00:00"), local("2026-03-30 00:00")) == ["03-29 01:00"]
    assert runs_between("0,30 2 * * *", local("2026-10-25 00:00"), local("2026-10-26 00:00")) == [
        "10-25 00:00",
        "10-25 00:30",
    ]


def test_a_minute_field_starting_with_star_follows_the_clock_like_vixie_cron() -> None:
    assert runs_between("*/30 2 * * *", local("2026-03-29 00:00"), local("2026-03-30 00:00")) == []
    assert runs_between("*/30 2 * * *", local("2026-10-25 00:00"), local("2026-10-26 00:00")) == [
        "10-25 00:00",
        "10-25 00:30",
        "10-25 01:00",
        "10-25 01:30",
    ]


def _steps(runs: list[str]) -> set[int]:
    instants = [datetime.strptime(f"2026-{r}", "%Y-%m-%d %H:%M") for r in runs]
    return {int((b - a).total_seconds()) for a, b in itertools.pairwise(instants)}


# --- cron day semantics --------------------------------------------------------------------------


def april_days(text: str) -> list[int]:
    """The days of April 2026 a schedule runs on (1 April 2026 is a Wednesday)."""
    return sorted({int(r[3:5]) for r in runs_between(text, local("2026-04-01 00:00"), local("2026-05-01 00:00"))})


def test_day_of_month_and_day_of_week_are_or_when_both_are_restricted() -> None:
    assert april_days("0 9 13 * fri") == [3, 10, 13, 17, 24]
    assert april_days("0 9 13 * *") == [13]
    assert april_days("0 9 * * 5") == [3, 10, 17, 24]


def test_a_day_field_starting_with_star_makes_it_and_like_vixie_cron() -> None:
    assert april_days("0 9 */2 * 5") == [3, 17]  # odd days that are Fridays


def test_weekdays_months_and_rare_days() -> None:
    assert april_days("0 7 * * 1-5") == [d for d in range(1, 31) if date(2026, 4, d).weekday() < 5]
    assert parse_schedule("0 0 1 jan *").next_after(local("2026-06-01 00:00")) == local("2027-01-01 00:00")
    assert parse_schedule("0 0 29 2 *").next_after(local("2026-03-01 00:00")) == local("2028-02-29 00:00")
