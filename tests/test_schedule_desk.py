"""Schedules from chat, end to end: a message makes the job with no model, the job runs at its time on a
hand-moved clock (after a restart of the scheduler), and its result reaches the owner's channel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from appliance.config import Config, CronJob
from appliance.llm.scripted import ScriptedModel
from appliance.notify import Notifier, recent
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from appliance.schedule.jobs import make_job_runner
from appliance.schedule.said import every_words
from appliance.schedule.scheduler import Scheduler
from tests.fakes.chat_platform import MemoryChannel, platform_class
from tests.fakes.clock import ManualClock
from tests.helpers import eventually

BRUSSELS = ZoneInfo("Europe/Brussels")
OWNER = "owner-1"


def local(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=BRUSSELS)


@dataclass
class Home:
    runtime: Runtime
    model: ScriptedModel
    clock: ManualClock
    channel: MemoryChannel
    notifier: Notifier
    crons: list[Scheduler]  # the schedulers made, in turn; the agent's desk uses the last (a new one is a restart)

    def scheduler(self, place: tuple[float, float] | None = None) -> Scheduler:
        """A scheduler as the daemon builds one (a new one is a restart), the chat fast path's too."""
        cron = Scheduler(
            [],
            tz="Europe/Brussels",
            run_job=make_job_runner(self.runtime.agent, self.runtime.devices, None),
            notify=self.notifier.notify,
            db=self.runtime.db,
            clock=self.clock,
            devices=list(self.runtime.config.devices),
            place=place,
        )
        self.crons.append(cron)
        return cron

    async def say(self, text: str) -> tuple[str, str, str]:
        record = await self.runtime.agent.turn(text, channel="memory", chat_id=OWNER)
        return record.text, record.route, record.reason


@asynccontextmanager
async def home(config: Config, at: str) -> AsyncIterator[Home]:
    config.scheduler.timezone = "Europe/Brussels"
    config.discord.allow_from = [OWNER]
    clock = ManualClock(local(at))
    model = ScriptedModel()
    crons: list[Scheduler] = []
    runtime = Runtime.open(config, model=model, cron=lambda: crons[-1] if crons else None)
    outbox = Outbox(runtime.db, clock=clock)
    channel = platform_class("memory")(config.discord, runtime, outbox, clock=clock)
    try:
        await channel.start()
        notifier = Notifier(outbox, {"memory": channel}, lambda: ["memory"], clock=clock)
        yield Home(runtime, model, clock, channel, notifier, crons)
    finally:
        await channel.stop()
        runtime.close()


def test_a_reminder_and_a_device_job_from_chat_run_at_their_time_after_a_restart(config: Config) -> None:
    async def main() -> None:
        async with home(config, "2026-11-24 18:00") as h:
            first = h.scheduler()
            await first.tick()
            assert h.runtime.devices is not None
            await h.runtime.devices.set("fan", "on", requested_by="test")
            text, route, reason = await h.say("remind me in 10 minutes to take the bins out")
            assert (text, route) == ("Reminder set: take the bins out, today at 18:10 (Tue 24 Nov).", "intent")
            assert "job bins_1810" in reason and "(no model)" in reason
            text, route, reason = await h.say("in 10 minutes switch the fan off")
            assert (text, route) == ("Scheduled: fan off, today at 18:10 (Tue 24 Nov).", "intent")
            assert "job fan_1810" in reason
            assert h.model.history == []  # no model ran
            # Stored like any turn: the person's words and the reply with its route.
            conversation = h.runtime.db.conversation("memory", OWNER)
            stored = [(m.role, m.route) for m in h.runtime.db.recent_messages(conversation, 10)]
            assert stored == [("user", None), ("assistant", "intent")] * 2

            # The daemon restarts at 18:05, before they are due; the new scheduler runs them at 18:10.
            h.clock.set(local("2026-11-24 18:05"))
            again = h.scheduler()
            assert [r.job_id for r in await again.tick()] == []
            h.clock.set(local("2026-11-24 18:10"))
            assert sorted(r.job_id for r in await again.tick()) == ["bins_1810", "fan_1810"]
            await eventually(lambda: len(h.channel.delivered) == 2, what="both results delivered")
            assert (OWNER, "Reminder: take the bins out") in h.channel.delivered
            assert any(text.startswith("fan_1810: ") for _, text in h.channel.delivered)
            readings = await h.runtime.devices.read("fan")
            assert readings[0].value is False
            assert {item["kind"] for item in recent(h.runtime.db)} == {"reminder", "cron"}
            assert again.list_jobs() == []  # one-time jobs are gone once they ran ...
            assert (await again.runs("bins_1810"))[0]["ok"] is True  # ... and their runs stay

    asyncio.run(main())


def test_cancel_by_words_one_several_or_none(config: Config) -> None:
    async def main() -> None:
        async with home(config, "2026-11-24 18:00") as h:
            cron = h.scheduler()
            await cron.add_job(CronJob(id="", schedule="30 7 * * 1-5", device="fan", value="on"), "test")
            await cron.add_job(CronJob(id="", schedule="daily 22:00", device="fan", value="off"), "test")
            await cron.add_job(CronJob(id="", schedule="once 2026-11-24 19:30", message="take the bins out"), "test")
            text, route, _ = await h.say("cancel the 7:30 fan")
            assert (text, route) == ("Cancelled fan_0730_weekdays (set fan on, next 2026-11-25 07:30).", "intent")
            record = await h.runtime.agent.turn("cancel the porch light schedule", channel="memory", chat_id=OWNER)
            assert record.text.startswith("Nothing scheduled matches")
            assert "fan_2200_daily (set fan off, next 2026-11-24 22:00)" in record.text
            await cron.add_job(CronJob(id="", schedule="daily 06:00", device="fan", value="on"), "test")
            record = await h.runtime.agent.turn("cancel the fan schedule", channel="memory", chat_id=OWNER)
            assert record.route == "intent" and record.choices == ["fan_2200_daily", "fan_0600_daily"]
            picked = await h.runtime.agent.turn("fan_0600_daily", channel="memory", chat_id=OWNER)
            assert picked.text == "Cancelled fan_0600_daily (set fan on, next 2026-11-25 06:00)."
            assert [row["id"] for row in cron.list_jobs()] == ["fan_2200_daily", "bins_1930"]
            # no schedule word: a job's when its words name one (a walk got "none of my devices or schedules")
            bins = await h.runtime.agent.turn("cancel the bins", channel="memory", chat_id=OWNER)
            assert bins.text == "Cancelled bins_1930 (take the bins out, next 2026-11-24 19:30)."
            fan = await h.runtime.agent.turn("cancel the fan", channel="memory", chat_id=OWNER)
            assert fan.text == "Cancelled fan_2200_daily (set fan off, next 2026-11-24 22:00)."
            assert cron.list_jobs() == []

    asyncio.run(main())


def test_which_one_takes_the_second_one_a_yes_and_an_answer_in_a_later_process(config: Config) -> None:
    """A README walk: "cancel the 7:30 fan" asked which, offering a config job chat cannot cancel, and then took
    neither "morning_fan" nor "the second one" (each `chat -m` a new process): the jobs stayed."""
    from appliance.agent.schedule_desk import ScheduleDesk

    async def main() -> None:
        async with home(config, "2026-11-24 18:00") as h:
            cron = h.scheduler()
            await cron.add_job(CronJob(id="", schedule="30 7 * * 1-5", device="fan", value="on"), "test")
            await cron.add_job(CronJob(id="", schedule="30 7 * * 0,6", device="fan", value="on"), "test")
            record = await h.runtime.agent.turn("cancel the 7:30 fan", channel="memory", chat_id=OWNER)
            assert record.choices == ["fan_0730_weekdays", "fan_0730_weekends"], record.text
            second = record.choices[1]
            # the next message comes from another process (chat -m): a new desk on the same database
            h.runtime.agent.desk = ScheduleDesk(h.runtime.agent.desk.devices, h.runtime.db, lambda: cron)
            picked = await h.runtime.agent.turn("the second one", channel="memory", chat_id=OWNER)
            assert picked.text.startswith(f"Cancelled {second} ("), picked.text
            assert [row["id"] for row in cron.list_jobs()] == [record.choices[0]]
            assert h.runtime.db.rows("SELECT key FROM settings WHERE key LIKE 'asked_back:%'") == []  # answered

    asyncio.run(main())


def test_a_job_from_the_config_is_not_offered_for_cancelling_and_a_single_choice_takes_yes(config: Config) -> None:
    async def main() -> None:
        async with home(config, "2026-11-24 18:00") as h:
            cron = Scheduler(
                [CronJob(id="morning_fan", schedule="30 7 * * *", device="fan", value="on")],
                tz="Europe/Brussels",
                run_job=make_job_runner(h.runtime.agent, h.runtime.devices, None),
                notify=h.notifier.notify,
                db=h.runtime.db,
                clock=h.clock,
                devices=list(h.runtime.config.devices),
            )
            h.crons.append(cron)
            await cron.add_job(CronJob(id="", schedule="30 7 * * 1-5", device="fan", value="on"), "test")
            record = await h.runtime.agent.turn("cancel the 7:30 fan", channel="memory", chat_id=OWNER)
            assert record.choices == ["fan_0730_weekdays"], record.text
            assert record.text.startswith("Cancel fan_0730_weekdays (set fan on, next 2026-11-25 07:30)?")
            config_job = "morning_fan (set fan on, next 2026-11-25 07:30) comes from the config's scheduler.jobs"
            assert config_job in record.text
            picked = await h.runtime.agent.turn("yes", channel="memory", chat_id=OWNER)
            assert picked.text == "Cancelled fan_0730_weekdays (set fan on, next 2026-11-25 07:30)."
            assert [row["id"] for row in cron.list_jobs()] == ["morning_fan"]
            only = await h.runtime.agent.turn("cancel the 7:30 fan", channel="memory", chat_id=OWNER)
            assert only.text.startswith("Nothing to cancel here: morning_fan") and only.choices == []

    asyncio.run(main())


def test_repeating_schedules_are_said_in_words() -> None:
    assert every_words("30 7 * * 1-5") == "every weekday at 07:30"
    assert every_words("daily 09:00") == "every day at 09:00"
    assert every_words("0 19 * * 2") == "every Tuesday at 19:00"
    assert every_words("every 2h") == "every 2 hours"
    assert every_words("every 1d") == "every day"
    assert every_words("*/5 * * * *") == "every 5 minutes"
    assert every_words("0 */2 * * *") == "every 2 hours, on the hour"  # it read "on the schedule 0 */2 * * *"
    assert every_words("15 * * * *") == "every hour, at 15 past"
    assert every_words("0 7,19 * * *") == "every day at 07:00 and 19:00"
    # a cron line no sentence here fits: quoted, with what its fields are
    assert every_words("0 8-18 1 * 1-5") == 'on the cron schedule "0 8-18 1 * 1-5" (minute, hour, day, month, weekday)'


def test_in_the_daemon_a_telegram_message_makes_the_job_and_its_run_reaches_telegram(config: Config) -> None:
    from appliance.daemon import Daemon
    from tests.fakes.telegram_api import FakeTelegram
    from tests.helpers import started

    owner = 111

    async def main() -> None:
        async with FakeTelegram("123:TEST") as fake:
            fake.add_chat(owner)
            tg = config.telegram
            tg.enabled, tg.token, tg.api_base_url, tg.allow_from = True, "123:TEST", fake.base_url, [owner]
            config.llm.preload = False
            config.scheduler.heartbeat_minutes = 0
            daemon = Daemon(config, host="127.0.0.1", port=0)
            served = asyncio.ensure_future(daemon.run())
            await started(daemon, served)
            assert {"schedule_create", "schedule_list", "schedule_cancel", "task_create", "task_status"} <= set(
                daemon.runtime.tools.tools
            )
            fake.push_message(owner, owner, "remind me in 10 minutes to take the bins out")
            await eventually(lambda: any("Reminder set" in t for t in fake.sent_texts(owner)), 20, "the confirmation")
            assert daemon.cron is not None
            (row,) = daemon.cron.list_jobs()
            assert (row["source"], row["once"], row["created_by"]) == ("chat", True, f"telegram:{owner}")
            # Its time comes (run now rather than wait ten minutes): the reminder arrives on Telegram.
            tried = await daemon.cron.run_now(row["id"])
            # a one-time job run by hand still runs at its time (walk 9: the README's "removed after it ran")
            assert tried.startswith(f"Reminder: take the bins out\n(run by hand: {row['id']} still runs once at ")
            assert tried.endswith(f", then it is removed; `picoagent cron cancel {row['id']}` removes it now)")
            assert [r["id"] for r in daemon.cron.list_jobs()] == [row["id"]]
            await eventually(lambda: "Reminder: take the bins out" in fake.sent_texts(owner), 20, "the reminder")
            daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())
