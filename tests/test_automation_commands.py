"""/tasks and /schedule on the chat channels: Telegram's buttons (the real python-telegram-bot against the
fake Bot API) and a platform without buttons, where each button is the command that does the same.

A real Scheduler and TaskStore on the runtime's real SQLite file; a scripted model (no command reaches it).
"""

from __future__ import annotations

import asyncio
from typing import Any

from appliance.config import Config, CronJob
from appliance.runtime import Runtime
from appliance.schedule.scheduler import Scheduler
from appliance.tasks import TaskStore
from tests.telegram_harness import OWNER, STRANGER, Harness, buttons, telegram
from tests.test_channel_base import OWNER as MEMORY_OWNER
from tests.test_channel_base import board, dm, said_to

NOW = 1_800_000_000.0  # the Telegram harness's clock: 2027-01-15 08:00 UTC


async def _ran(job: CronJob) -> str:
    return job.message or "ran"


def automation(runtime: Runtime) -> tuple[Scheduler, TaskStore]:
    """The daemon's two: a config job, and the task store (the test adds the chat's)."""
    cron = Scheduler(
        [CronJob(id="water", schedule="daily 07:00", prompt="water the plants")],
        tz="UTC",
        run_job=_ran,
        notify=None,
        db=runtime.db,
        clock=lambda: NOW,
    )
    return cron, TaskStore(runtime.db)


def test_telegram_lists_jobs_and_tasks_and_their_buttons_pause_and_cancel(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        assert {"tasks", "schedule"} <= {c["command"] for c in h.fake.commands}  # in the bot's menu
        cron, store = automation(h.runtime)
        h.channel.commands.automation.attach(cron, store, None)
        bins = await cron.add_job(CronJob(id="bins", schedule="daily 19:00", message="take the bins out"), "tests")
        task = await h.runtime.db.call(store.add, "research tomato planting", budget_tokens=5000, max_steps=6)

        h.fake.push_message(OWNER, OWNER, "/schedule")
        header, water, chat_job = await h.reply_to(OWNER, 3)
        assert header["text"] == "Scheduled: 2 jobs."
        assert water["text"].startswith("water · daily 07:00 · next Sat 16 Jan 07:00")
        assert buttons(water) == {"job:pause:water": "Pause"}  # the config's job: no Cancel
        assert "bins · daily 19:00 · next Fri 15 Jan 19:00" in chat_job["text"]
        assert buttons(chat_job) == {"job:pause:bins": "Pause", "job:cancel:bins": "Cancel"}

        h.fake.push_callback(STRANGER, OWNER, chat_job["message_id"], "job:cancel:bins")
        await h.settle()
        assert [j["id"] for j in cron.list_jobs()] == ["water", "bins"]  # a stranger's tap changes nothing

        query = h.fake.push_callback(OWNER, OWNER, chat_job["message_id"], "job:pause:bins")
        await h.fake.wait_for(lambda: h.fake.callback_answers[query] is not None)
        await h.settle()
        assert h.fake.callback_answers[query]["text"] == "Paused"  # type: ignore[index]
        edited = h.fake.bot_messages(OWNER)[2]
        assert "bins · daily 19:00 · paused" in edited["text"]
        assert buttons(edited) == {"job:resume:bins": "Resume", "job:cancel:bins": "Cancel"}
        assert cron.list_jobs()[1]["paused"] is True

        query = h.fake.push_callback(OWNER, OWNER, chat_job["message_id"], "job:cancel:bins")
        await h.fake.wait_for(lambda: h.fake.callback_answers[query] is not None)
        await h.settle()
        assert h.fake.bot_messages(OWNER)[2]["text"] == f"Cancelled by User111: bins ({bins['does']})."
        assert [j["id"] for j in cron.list_jobs()] == ["water"]

        h.fake.push_message(OWNER, OWNER, "/tasks")
        messages = await h.reply_to(OWNER, 5)
        assert messages[3]["text"] == "Tasks: 1 pending."
        card = messages[4]
        assert card["text"] == f"#{task.id} pending · 0 of 6 steps · 0 of 5000 tokens\nresearch tomato planting"
        assert buttons(card) == {f"task:pause:{task.id}": "Pause", f"task:cancel:{task.id}": "Cancel"}
        query = h.fake.push_callback(OWNER, OWNER, card["message_id"], f"task:cancel:{task.id}")
        await h.fake.wait_for(lambda: h.fake.callback_answers[query] is not None)
        await h.settle()
        assert (await h.runtime.db.call(store.get, task.id)).state == "cancelled"
        edited = h.fake.bot_messages(OWNER)[4]
        assert edited["text"].startswith(f"#{task.id} cancelled") and buttons(edited) == {}

    async def main() -> None:
        async with telegram(config) as harness:
            await scenario(harness)

    asyncio.run(main())


def test_without_buttons_each_is_a_command_to_type(config: Config) -> None:
    async def main() -> None:
        async with board(config) as ch:
            cron, store = automation(ch.runtime)
            await ch.handle(dm(MEMORY_OWNER, "/tasks"))
            assert said_to(ch, f"dm-{MEMORY_OWNER}")[-1].startswith("Jobs and tasks run inside `picoagent serve`")
            ch.commands.automation.attach(cron, store, None)
            await cron.add_job(CronJob(id="bins", schedule="daily 19:00", message="take the bins out"), "tests")
            task = await ch.db.call(store.add, "tidy the notes")

            async def say(text: str) -> list[str]:
                before = len(said_to(ch, f"dm-{MEMORY_OWNER}"))
                await ch.handle(dm(MEMORY_OWNER, text))
                return said_to(ch, f"dm-{MEMORY_OWNER}")[before:]

            listed = await say("/schedule")
            assert listed[0] == "Scheduled: 2 jobs."
            assert "• Pause: reply /schedule pause water" in listed[1] and "/schedule cancel water" not in listed[1]
            assert "• Cancel: reply /schedule cancel bins" in listed[2]
            (paused,) = await say("/schedule pause bins")
            assert paused.startswith("Paused: bins · daily 19:00 · paused")
            (refused,) = await say("/schedule cancel water")
            assert "comes from the config's scheduler.jobs" in refused and "pause it" in refused
            (cancelled,) = await say("/schedule cancel bins")
            assert cancelled.startswith("Cancelled by U-Owner: bins")

            tasks = await say("/tasks")
            assert f"• Cancel: reply /tasks cancel {task.id}" in tasks[1]
            (done,) = await say(f"/tasks pause {task.id}")
            assert done.startswith(f"Paused: #{task.id} paused")
            (again,) = await say(f"/tasks pause {task.id}")
            assert "already paused" in again
            (unknown,) = await say("/tasks cancel 999")
            assert "999" in unknown
            (usage,) = await say("/tasks frobnicate")
            assert usage == "Say /tasks to list them, or /tasks pause|resume|cancel ID."
            states: Any = await ch.db.call(store.counts)
            assert states.get("paused") == 1

    asyncio.run(main())
