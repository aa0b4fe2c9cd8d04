"""Schedules (DST included), the scheduler on a fake clock, missed runs, cron.yaml, and the heartbeat."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from appliance.agent.record import ReplyRecord
from appliance.config import CronJob, load_jobs
from appliance.errors import ConfigError, ModelError, PicoagentError, UsageError
from appliance.hardware.devices import SetResult
from appliance.hardware.drivers.base import Reading
from appliance.llm.scripted import ScriptedModel
from appliance.memory.db import Database
from appliance.schedule.heartbeat import HEARTBEAT_SCHEMA, Heartbeat, heartbeat_tasks
from appliance.schedule.jobs import JobRun, make_job_runner
from appliance.schedule.parse import FORMS, CronSchedule, Interval, Startup, parse_schedule, resolve_zone
from appliance.schedule.scheduler import Scheduler
from tests.fakes.clock import ManualClock

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


# --- the scheduler on a fake clock ---------------------------------------------------------------


class FakeClock(ManualClock):
    """Wall-clock time that moves only when a test says so (built from a datetime)."""


class FakeJobs:
    """A run_job that records what ran when, and fails the jobs it is told to."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[tuple[str, float]] = []
        self.failing: dict[str, Exception] = {}

    async def __call__(self, job: CronJob) -> str:
        self.calls.append((job.id, self.clock()))
        if job.id in self.failing:
            raise self.failing[job.id]
        return f"did {job.id}"

    def count(self, job_id: str) -> int:
        return sum(1 for name, _ in self.calls if name == job_id)


def make(
    db: Database, clock: FakeClock, *jobs: CronJob, fake: FakeJobs | None = None, **kw: Any
) -> tuple[Scheduler, FakeJobs, list[tuple[str, str]]]:
    fake = fake or FakeJobs(clock)
    sent: list[tuple[str, str]] = []
    scheduler = Scheduler(
        list(jobs),
        tz="Europe/Brussels",
        run_job=fake,
        notify=lambda text, kind: sent.append((text, kind)),
        db=db,
        clock=clock,
        **kw,
    )
    return scheduler, fake, sent


def simulate(scheduler: Scheduler, clock: FakeClock, until: datetime, step_s: float = 60) -> list[JobRun]:
    """Tick every ``step_s`` seconds of fake time until ``until`` (exclusive)."""

    async def go() -> list[JobRun]:
        runs = []
        while clock.now < until.timestamp():
            runs += await scheduler.tick()
            clock.now += step_s
        return runs

    return asyncio.run(go())


def rows(db: Database) -> dict[str, tuple[float, str, int]]:
    conn = sqlite3.connect(db.path)
    try:
        return {r[0]: (r[1], r[2], r[3]) for r in conn.execute("SELECT * FROM schedule_runs")}
    finally:
        conn.close()


def job(job_id: str, schedule: str, **kw: Any) -> CronJob:
    return CronJob(id=job_id, schedule=schedule, prompt=kw.pop("prompt", "do it"), **kw)


@pytest.mark.parametrize(
    ("day", "hours", "weekday_runs", "daily_at"),
    [
        ("2026-06-10", 24, 1, "2026-06-10 00:30"),  # a Wednesday
        ("2026-03-29", 23, 0, "2026-03-29 01:00"),  # Sunday, spring forward
        ("2026-10-25", 25, 0, "2026-10-25 00:30"),  # Sunday, fall back
    ],
)
def test_a_simulated_day_runs_each_job_when_it_should(
    db: Database, day: str, hours: int, weekday_runs: int, daily_at: str
) -> None:
    clock = FakeClock(local(f"{day} 00:00"))
    scheduler, fake, sent = make(
        db,
        clock,
        job("half_hour", "every 30m", deliver=False),
        job("hourly", "hourly :15"),
        job("nightly", "daily 02:30"),
        job("workday", "0 7 * * 1-5"),
    )
    runs = simulate(scheduler, clock, local(f"{day} 00:00") + timedelta(days=1))
    assert fake.count("half_hour") == 2 * hours
    assert fake.count("hourly") == hours
    assert fake.count("workday") == weekday_runs
    assert [at for name, at in fake.calls if name == "nightly"] == [utc(daily_at).timestamp()]
    assert {r.reason for r in runs} == {"schedule"} and all(r.ok for r in runs)
    # Only delivering jobs reach the owner, each run once, marked as cron.
    assert len(sent) == hours + 1 + weekday_runs
    assert {kind for _, kind in sent} == {"cron"}
    assert ("nightly: did nightly", "cron") in sent
    assert not any(text.startswith("half_hour") for text, _ in sent)
    recorded = rows(db)
    assert recorded["nightly"] == (utc(daily_at).timestamp(), "did nightly", 1)
    assert recorded["half_hour"][2] == 1
    assert ("workday" in recorded) == bool(weekday_runs)


def test_missed_run_once_runs_once_after_downtime_and_skip_does_not(db: Database) -> None:
    water = job("water", "daily 09:00", missed="run_once")
    report = job("report", "daily 09:00", missed="skip")
    fresh = job("fresh", "daily 09:00", missed="run_once")
    clock = FakeClock(local("2026-06-08 08:59"))
    first, fake, _ = make(db, clock, water, report)
    simulate(first, clock, local("2026-06-08 09:02"))
    assert fake.count("water") == fake.count("report") == 1

    # Off from Monday 09:02 until Thursday 12:00: the 9th, 10th and 11th at 09:00 were missed.
    clock.set(local("2026-06-11 12:00"))
    after, fake, sent = make(db, clock, water, report, fresh)
    runs = asyncio.run(after.tick())
    assert [(r.job_id, r.reason) for r in runs] == [("water", "missed")]  # once, not three times
    assert sent == [("water: did water", "cron")]
    simulate(after, clock, local("2026-06-12 09:30"))
    # Then both follow their schedule; a job that never ran has nothing to catch up.
    assert (fake.count("water"), fake.count("report"), fake.count("fresh")) == (2, 1, 1)


def test_a_restart_with_nothing_missed_runs_nothing(db: Database) -> None:
    water = job("water", "daily 09:00", missed="run_once")
    clock = FakeClock(local("2026-06-08 08:59"))
    first, _, _ = make(db, clock, water)
    simulate(first, clock, local("2026-06-08 09:02"))
    clock.set(local("2026-06-08 20:00"))
    again, _, _ = make(db, clock, water)
    assert asyncio.run(again.tick()) == []


def test_a_failing_job_is_recorded_and_the_others_still_run(db: Database) -> None:
    clock = FakeClock(local("2026-06-10 09:59"))
    scheduler, fake, sent = make(db, clock, job("bad", "hourly :00", deliver=False), job("good", "hourly :00"))
    fake.failing["bad"] = RuntimeError("pump jammed")
    runs = simulate(scheduler, clock, local("2026-06-10 10:01"))
    assert [(r.job_id, r.ok) for r in runs] == [("bad", False), ("good", True)]
    assert rows(db)["bad"][1:] == ("RuntimeError: pump jammed", 0)
    assert rows(db)["good"][1:] == ("did good", 1)
    # A failure is news even for a job that does not deliver its results.
    assert sent == [("bad failed: RuntimeError: pump jammed", "cron"), ("good: did good", "cron")]

    # Failing again is not news; recovering is recorded; failing after that is news again.
    fake.failing["bad"] = UsageError("the pump is offline", fix="check its plug")
    sent.clear()
    simulate(scheduler, clock, local("2026-06-10 11:01"))
    assert rows(db)["bad"][1:] == ("the pump is offline\n  fix: check its plug", 0)
    assert sent == [("good: did good", "cron")]
    del fake.failing["bad"]
    simulate(scheduler, clock, local("2026-06-10 12:01"))
    assert rows(db)["bad"][2] == 1
    fake.failing["bad"] = RuntimeError("again")
    sent.clear()
    simulate(scheduler, clock, local("2026-06-10 13:01"))
    assert ("bad failed: RuntimeError: again", "cron") in sent
    assert fake.count("good") == 4


def test_startup_jobs_run_once_at_start(db: Database) -> None:
    clock = FakeClock(local("2026-06-10 10:00"))
    scheduler, _, _ = make(db, clock, job("hello", "startup"))
    runs = simulate(scheduler, clock, local("2026-06-11 10:00"), step_s=300)
    assert [(r.job_id, r.reason) for r in runs] == [("hello", "startup")]
    assert scheduler.list_jobs()[0]["next_run"] is None
    again, _, _ = make(db, clock, job("hello", "startup"))
    assert [r.reason for r in asyncio.run(again.tick())] == ["startup"]


def test_run_now_and_list_jobs(db: Database) -> None:
    clock = FakeClock(local("2026-06-10 08:00"))
    scheduler, fake, sent = make(db, clock, job("water", "daily 09:00"), job("broken", "every 1h"))
    listed = scheduler.list_jobs()
    assert listed[0] | {"does": None} == {
        "id": "water",
        "schedule": "daily 09:00",
        "does": None,
        "next_run": "2026-06-10T09:00:00+02:00",
        "last_run": None,
        "last_result": None,
        "last_ok": None,
        "deliver": True,
        "missed": "skip",
        "paused": False,
        "source": "config",
        "once": False,
        "created_by": "",
        "made": "from the config",
    }
    assert asyncio.run(scheduler.run_now("water")) == "did water"
    assert sent == [("water: did water", "cron")]
    assert scheduler.list_jobs()[0]["last_run"] == "2026-06-10T08:00:00+02:00"
    assert scheduler.list_jobs()[0]["last_ok"] is True
    assert rows(db)["water"] == (clock.now, "did water", 1)
    with pytest.raises(UsageError) as info:
        asyncio.run(scheduler.run_now("nope"))
    assert info.value.message == "no cron job named 'nope'"
    assert info.value.fix == "known jobs: broken, water"
    fake.failing["broken"] = RuntimeError("boom")
    with pytest.raises(PicoagentError, match="cron job broken failed: RuntimeError: boom"):
        asyncio.run(scheduler.run_now("broken"))
    assert rows(db)["broken"][2] == 0
    assert scheduler.seconds_to_next() == 60.0  # capped: the wall clock may jump while asleep


class _Stop(Exception):
    pass


def test_run_sleeps_until_each_slot_and_wakes_at_least_every_minute(db: Database) -> None:
    clock = FakeClock(local("2026-06-10 09:50"))
    naps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        naps.append(seconds)
        clock.now += seconds
        if clock.now >= local("2026-06-10 12:30").timestamp():
            raise _Stop

    scheduler, fake, _ = make(db, clock, job("hourly", "hourly :00"), job("hello", "startup"), sleep=fake_sleep)
    with pytest.raises(_Stop):
        asyncio.run(scheduler.run())
    assert fake.calls == [
        ("hello", local("2026-06-10 09:50").timestamp()),
        ("hourly", local("2026-06-10 10:00").timestamp()),
        ("hourly", local("2026-06-10 11:00").timestamp()),
        ("hourly", local("2026-06-10 12:00").timestamp()),
    ]
    assert max(naps) == 60.0


def test_a_job_never_runs_twice_at_once(db: Database) -> None:
    clock = FakeClock(local("2026-06-10 09:00"))
    release = asyncio.Event()
    calls: list[str] = []

    async def slow(job: CronJob) -> str:
        calls.append(job.id)
        await release.wait()
        return "done"

    scheduler = Scheduler(
        [job("water", "daily 09:00")], tz="Europe/Brussels", run_job=slow, notify=None, db=db, clock=clock
    )

    async def go() -> None:
        manual = asyncio.ensure_future(scheduler.run_now("water"))
        await asyncio.sleep(0)
        assert await scheduler.tick() == []  # due, but the manual run is still going
        with pytest.raises(UsageError, match="cron job water is running now"):
            await scheduler.run_now("water")
        release.set()
        assert await manual == "done"
        assert [r.reason for r in await scheduler.tick()] == ["schedule"]

    asyncio.run(go())
    assert calls == ["water", "water"]


def test_a_bad_schedule_or_a_duplicate_id_stops_the_scheduler_with_the_job_named(db: Database) -> None:
    clock = FakeClock(local("2026-06-10 08:00"))
    with pytest.raises(ConfigError, match='cron job water: schedule "daily 9am"'):
        make(db, clock, job("water", "daily 9am"))
    with pytest.raises(ConfigError, match="'water' is used twice"):
        make(db, clock, job("water", "daily 09:00"), job("water", "every 1h"))


# --- jobs from workspace/cron.yaml ---------------------------------------------------------------


def test_cron_yaml_adds_jobs(tmp_path: Path) -> None:
    (tmp_path / "cron.yaml").write_text(
        "- id: lamp_on\n  schedule: '0 19 * * *'\n  device: lamp\n  value: on\n  deliver: false\n"
        "- id: digest\n  schedule: daily 08:00\n  prompt: Summarise the night\n  missed: run_once\n",
        encoding="utf-8",
    )
    jobs = load_jobs([job("water", "every 2h")], tmp_path, devices=["lamp"])
    assert [j.id for j in jobs] == ["water", "lamp_on", "digest"]
    assert jobs[1] == CronJob(id="lamp_on", schedule="0 19 * * *", device="lamp", value="on", deliver=False)
    assert jobs[2].missed == "run_once"
    assert load_jobs([], tmp_path / "missing") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- id: x\n  schedule: every 5x\n  prompt: hi\n", 'entry 1 (x): schedule "every 5x": expected a number'),
        (
            "- id: x\n  schedul: daily 09:00\n  prompt: hi\n",
            "entry 1 (x): schedul: unknown key (did you mean schedule?)",
        ),
        ("- schedule: daily 09:00\n  prompt: hi\n", "entry 1: id: required, but missing"),
        (
            "- id: x\n  schedule: daily 09:00\n",
            "entry 1 (x): a job has exactly one of prompt, device (with value), task or message",
        ),
        (
            "- id: x\n  schedule: daily 09:00\n  prompt: hi\n  missed: sometimes\n",
            'entry 1 (x): missed: expected one of "skip", "run_once", got "sometimes"',
        ),
        ("- id: x\n  schedule: daily 09:00\n  device: pump\n  value: on\n", "entry 1 (x): no device named 'pump'"),
        ("- id: x\n  schedule: daily 09:00\n  device: lamp\n", "device lamp needs a value"),
        (
            "- id: Bad Id\n  schedule: daily 09:00\n  prompt: hi\n",
            "entry 1 (Bad Id): id: lower-case letters, digits and _ (at most 40)",
        ),
        ("- id: x\n  schedule: daily 09:00\n  prompt: [1, 2]\n", "entry 1 (x): prompt: expected a string, got a list"),
        ("id: x\n", "expected a list of jobs"),
        ("- [1, 2]\n", "entry 1: expected a mapping, got a list"),
        ("- id: x\n  schedule: [\n", "(line 3)"),
        (
            "- id: water\n  schedule: daily 09:00\n  prompt: hi\n",
            "entry 1 (water): id: 'water' is already used in the config (scheduler.jobs[0])",
        ),
        (
            "- id: x\n  schedule: startup\n  prompt: a\n- id: x\n  schedule: startup\n  prompt: b\n",
            "entry 2 (x): id: 'x' is already used in cron.yaml entry 1",
        ),
    ],
)
def test_a_bad_cron_yaml_entry_is_a_clear_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "cron.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_jobs([job("water", "every 2h")], tmp_path, devices=["lamp"])
    assert info.value.message.startswith(str(path))
    assert message in info.value.message


# --- the default job runner ----------------------------------------------------------------------


class FakeAgent:
    def __init__(self) -> None:
        self.turns: list[tuple[str, str, str]] = []

    async def turn(self, text: str, *, channel: str = "terminal", chat_id: str = "default") -> ReplyRecord:
        self.turns.append((text, channel, chat_id))
        return ReplyRecord(text="Good morning: 21 °C inside.", route="local", reason="model")


class FakeDevices:
    def __init__(self) -> None:
        self.writes: list[tuple[str, Any, str]] = []

    def describe(self) -> list[dict[str, Any]]:
        return [{"name": "lamp", "allowed": ["read", "set"]}, {"name": "soil", "allowed": ["read"]}]

    async def read(self, name: str) -> list[Reading]:
        return [Reading("level", 27.0, "%")] if name == "soil" else [Reading("state", True, "")]

    async def set(self, name: str, value: Any, *, requested_by: str) -> SetResult:
        self.writes.append((name, value, requested_by))
        return SetResult(name, True, True, [Reading("state", True, "")])


def test_the_default_runner_sends_each_kind_of_job_where_it_belongs() -> None:
    agent, devices, started = FakeAgent(), FakeDevices(), []

    async def tasks_start(goal: str) -> str:
        started.append(goal)
        return "task 7 started"

    run = make_job_runner(agent, devices, tasks_start)
    assert asyncio.run(run(CronJob(id="morning", schedule="daily 07:00", prompt="Weather?"))) == (
        "Good morning: 21 °C inside."
    )
    assert agent.turns == [("Weather?", "cron", "morning")]
    assert asyncio.run(run(CronJob(id="lights", schedule="daily 19:00", device="lamp", value="on"))) == (
        "The lamp is on"
    )
    assert devices.writes == [("lamp", "on", "cron:lights")]
    assert asyncio.run(run(CronJob(id="tidy", schedule="daily 03:00", task="tidy the notes"))) == "task 7 started"
    assert started == ["tidy the notes"]
    with pytest.raises(UsageError, match="tasks run only inside the daemon"):
        asyncio.run(make_job_runner(agent, devices, None)(CronJob(id="t", schedule="startup", task="x")))


# --- the heartbeat -------------------------------------------------------------------------------


class Outside:
    """A stand-in cloud: an escalation hook and the other model behind it (both must stay untouched)."""

    def __init__(self) -> None:
        self.other = ScriptedModel("cloud")
        self.escalated: list[str] = []

    async def escalate(self, prompt: str) -> str | None:
        from appliance.llm.base import ChatMessage, GenerationRequest

        self.escalated.append(prompt)
        await self.other.generate(GenerationRequest([ChatMessage("user", prompt)]))
        return None


def heartbeat(
    tmp_path: Path, text: str | None, *replies: str, escalate: Any = None
) -> tuple[Heartbeat, ScriptedModel, list[tuple[str, str]]]:
    path = tmp_path / "workspace" / "HEARTBEAT.md"
    if text is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    model = ScriptedModel("local")
    model.enqueue(*replies)
    sent: list[tuple[str, str]] = []

    async def readings() -> str:
        return "soil: level: 27 %"

    beat = Heartbeat(
        path,
        model,
        lambda t, k: sent.append((t, k)),
        readings=readings,
        every_minutes=30,
        tz="Europe/Brussels",
        clock=lambda: local("2026-06-10 18:30").timestamp(),
        escalate=escalate,
    )
    return beat, model, sent


def test_with_only_comments_the_heartbeat_never_calls_the_model(tmp_path: Path) -> None:
    beat, model, sent = heartbeat(tmp_path, None)
    assert asyncio.run(beat.check()) is None
    template = beat.path.read_text(encoding="utf-8")
    assert "- remind me if the soil level is below 30%" in template
    assert "readings" in template
    assert heartbeat_tasks(template) == ([], [])
    assert model.history == []
    assert sent == []
    assert beat.last_decision == "no tasks"
    assert beat.last_run_at == local("2026-06-10 18:30").timestamp()


def test_heartbeat_tasks_are_the_lines_outside_comments() -> None:
    text = (
        "# Checks\n<!-- a note -->\n- soil below 30%\n* lamp on after 23:00 [cloud]\n\nwindow open\n<!-- unclosed\n- no"
    )
    assert heartbeat_tasks(text) == (["soil below 30%", "window open"], ["lamp on after 23:00"])


def test_nothing_to_report_is_silent(tmp_path: Path) -> None:
    outside = Outside()
    beat, model, sent = heartbeat(
        tmp_path,
        "- remind me if the soil level is below 30%\n",
        '{"notify": false, "message": ""}',
        escalate=outside.escalate,
    )
    assert asyncio.run(beat.check()) is None
    assert sent == []
    assert beat.last_decision == "nothing to report"
    (request,) = model.history
    assert request.json_schema == HEARTBEAT_SCHEMA
    assert request.client == "heartbeat"
    prompt = request.messages[-1].content
    assert "- remind me if the soil level is below 30%" in prompt
    assert "soil: level: 27 %" in prompt
    assert "Wednesday 2026-06-10 18:30 Europe/Brussels" in prompt
    assert outside.other.history == [] and outside.escalated == []


def test_something_to_report_is_one_notification_from_the_local_model(tmp_path: Path) -> None:
    outside = Outside()
    beat, model, sent = heartbeat(
        tmp_path,
        "- remind me if the soil level is below 30%\n",
        '{"notify": true, "message": "Soil is dry"}',
        escalate=outside.escalate,
    )
    assert asyncio.run(beat.check()) == "Soil is dry"
    assert sent == [("Soil is dry", "heartbeat")]
    assert beat.last_decision == "notified: Soil is dry"
    assert len(model.history) == 1 and model.history[0].json_schema is not None
    assert beat.local_model is model
    assert outside.other.history == [] and outside.escalated == []


@pytest.mark.parametrize(
    "reply", ['{"notify": true, "message": "  "}', '{"notify": "yes", "message": "hm"}', '{"notify": tru', "[]"]
)
def test_empty_or_unreadable_answers_stay_silent(tmp_path: Path, reply: str) -> None:
    beat, _, sent = heartbeat(tmp_path, "- check the soil\n", reply)
    assert asyncio.run(beat.check()) is None
    assert sent == []


def test_a_model_failure_is_silent_and_remembered(tmp_path: Path) -> None:
    beat, model, sent = heartbeat(tmp_path, "- check the soil\n")

    async def fail(request: Any) -> Any:
        raise ModelError("the model is not loaded")

    model.generate = fail  # type: ignore[method-assign]
    assert asyncio.run(beat.check()) is None
    assert sent == []
    assert beat.last_decision == "model failed: the model is not loaded"


def test_cloud_lines_stay_local_unless_an_escalation_hook_is_given(tmp_path: Path) -> None:
    text = "- check the soil\n- compare with the forecast [cloud]\n"
    beat, model, _ = heartbeat(tmp_path, text, '{"notify": false, "message": ""}')
    asyncio.run(beat.check())
    prompt = model.history[0].messages[-1].content
    assert "- check the soil" in prompt and "- compare with the forecast" in prompt and "[cloud]" not in prompt

    outside = Outside()
    beat, model, _ = heartbeat(tmp_path, text, '{"notify": false, "message": ""}', escalate=outside.escalate)
    asyncio.run(beat.check())
    assert "forecast" not in model.history[0].messages[-1].content
    (escalated,) = outside.escalated
    assert "- compare with the forecast" in escalated and "check the soil" not in escalated
