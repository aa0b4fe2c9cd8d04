"""The scheduler on a fake clock, missed runs, cron.yaml and the default job runner (the schedules themselves:
tests/test_schedule_parse.py; the heartbeat: tests/test_heartbeat.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from appliance.agent.record import ReplyRecord
from appliance.config import CronJob, load_jobs
from appliance.errors import ConfigError, PicoagentError, UsageError
from appliance.hardware.devices import SetResult
from appliance.hardware.drivers.base import Reading
from appliance.memory.db import Database
from appliance.schedule.jobs import JobRun, make_job_runner
from appliance.schedule.scheduler import Scheduler
from tests.fakes.clock import ManualClock
from tests.schedule_times import local, utc

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
    assert asyncio.run(run(CronJob(id="bins", schedule="daily 19:00", message="take the bins out"))) == (
        "Reminder: take the bins out"
    )
    assert asyncio.run(run(CronJob(id="bins2", schedule="daily 19:00", message="Reminder: bins"))) == "Reminder: bins"
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
