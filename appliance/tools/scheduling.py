"""The model's tools for schedules and tasks: what the chat fast path does without the model, for what
it is not sure of ("remind me when the soil is dry, every couple of hours").

They talk to the cron scheduler (:class:`appliance.schedule.scheduler.Scheduler`): the daemon's own,
which schedules a job at once, or, in ``picoagent chat``, one of that process that only writes the
database, which the daemon reads within a minute. Jobs the model makes are stored like every chat job
(created_by ``model``) and checked the same way: a device must exist, and a write that needs approval
still waits for a person when the job runs (``devices.set`` asks then). Once outside text is in the
turn (a web page, shell output), only a plain reminder message may be scheduled: a prompt, a device
action or a task would run later in a turn of its own, carrying out what the page said, unseen. A task
that read outside text wrote its result after it: task_status hands it to the turn as outside text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any, Protocol

from appliance.errors import ToolError
from appliance.schedule.parse import once_after
from appliance.tools.registry import ToolRegistry, current_turn
from appliance.tools.trust import OutsideText

if TYPE_CHECKING:
    from appliance.config import CronJob
    from appliance.tasks.store import TaskStore

_SHOWN = ("id", "schedule", "does", "next_run", "last_run", "last_ok", "paused", "source")
_IN = re.compile(r"in (\d+) ?(m|min|mins|minutes?|h|hours?|d|days?)")
_AT = re.compile(r"(today|tomorrow|at)? ?(\d{1,2}):(\d{2})")


class CronDesk(Protocol):
    """What the tools need of the scheduler."""

    zone: tzinfo
    clock: Callable[[], float]

    async def add_job(self, job: CronJob, created_by: str) -> dict[str, Any]: ...
    async def cancel(self, job_id: str) -> dict[str, Any]: ...
    async def refresh(self) -> None: ...
    def list_jobs(self) -> list[dict[str, Any]]: ...
    def find(self, words: str) -> list[dict[str, Any]]: ...


def absolute(schedule: str, now: datetime) -> str:
    """A time the model may say ("in 10m", "tomorrow 07:30", "at 19:00") as a once schedule; others as given."""
    text = " ".join(schedule.lower().split())
    match = _IN.fullmatch(text)
    if match:
        unit = {"m": 60, "h": 3600, "d": 86400}[match.group(2)[0]]
        return once_after(int(match.group(1)) * unit, now)[0]  # rounded up, as the schedule words resolve it
    match = _AT.fullmatch(text)
    if match and int(match.group(2)) < 24 and int(match.group(3)) < 60:
        day = now.date() + timedelta(days=1 if match.group(1) == "tomorrow" else 0)
        at = datetime(day.year, day.month, day.day, int(match.group(2)), int(match.group(3)), tzinfo=now.tzinfo)
        if at <= now and match.group(1) != "today":
            at += timedelta(days=1)  # "at 07:30" said in the evening: tomorrow morning
        return f"once {at:%Y-%m-%d %H:%M}"
    return schedule


def _tally(store: TaskStore, listed: list[Any]) -> dict[str, int]:
    """How many tasks are in each state (counted from the list when the store cannot say)."""
    counts = getattr(store, "counts", None)
    tally: dict[str, int] = counts() if callable(counts) else {}
    if not tally:
        for task in listed:
            tally[task.state] = tally.get(task.state, 0) + 1
    return tally


def register(
    registry: ToolRegistry,
    cron: CronDesk,
    tasks: TaskStore | None = None,
    wake: Callable[[], None] | None = None,
    can_work: Callable[[], None] | None = None,
) -> None:
    """Register schedule_create, schedule_list, schedule_cancel, and task_create, task_status when ``tasks``;
    ``can_work`` raises when a task cannot be worked here (appliance/tasks/capable.py), before one is stored."""
    from appliance.config import CronJob

    async def schedule_create(
        schedule: str,
        message: str = "",
        prompt: str = "",
        device: str = "",
        value: str = "",
        task: str = "",
        id: str = "",
    ) -> str:
        """Schedule something: a reminder message, a prompt answered later, a device to set, or a task to start.

        Examples: remind me at 7pm to take the bins out; every weekday at 7:30 turn the fan on;
        check the soil every two hours and tell me when it is dry

        Args:
            schedule: "in 10m", "tomorrow 07:30", "once 2026-11-24 19:00", "daily 07:30", "every 2h", "30 7 * * 1-5",
                "sunset" or "sunrise-30m" (every day)
            message: a reminder sent to the owner as it is, e.g. "take the bins out"
            prompt: a request answered then, the answer sent to the owner: "check the soil, say if it is dry"
            device: a device to set then (with value)
            value: the device's value: "on", "off" or a brightness like "40%"
            task: a persistent task's goal to start then
            id: a short id (lower-case letters, digits, _); default: made from what and when
        """
        turn = current_turn()
        if turn is not None and turn.trust.untrusted and (prompt or device or task):
            raise turn.trust.refuse_lasting("schedule that job")
        now = datetime.fromtimestamp(cron.clock(), cron.zone)
        job = CronJob(
            id=id,
            schedule=absolute(schedule, now),
            message=message,
            prompt=prompt,
            device=device,
            value=value,
            task=task,
        )
        row = await cron.add_job(job, "model")
        return f"scheduled {row['id']}: {row['does']}; schedule {row['schedule']}; next run {row['next_run']}"

    async def schedule_list() -> list[dict[str, Any]]:
        """The scheduled jobs: id, schedule, what each does, next and last run, paused, where it comes from.

        Examples: what is scheduled; which reminders do I have; when does the fan go on
        """
        await cron.refresh()
        return [{key: row[key] for key in _SHOWN} for row in cron.list_jobs()]

    async def schedule_cancel(id: str) -> str:
        """Cancel a scheduled job made in chat (the config's jobs can only be paused).

        Examples: cancel the bins reminder; stop the 7:30 fan; delete that schedule

        Args:
            id: the job's id from schedule_list, or words naming it ("7:30 fan")
        """
        await cron.refresh()
        if id not in {row["id"] for row in cron.list_jobs()}:
            found = cron.find(id)
            if len(found) != 1:
                ids = ", ".join(row["id"] for row in (found or cron.list_jobs())) or "none"
                raise ToolError(f"{'several' if found else 'no'} jobs match {id!r}; the ids: {ids}")
            id = found[0]["id"]
        row = await cron.cancel(id)
        return f"cancelled {row['id']}: {row['does']} ({row['schedule']})"

    registry.register(schedule_create)
    registry.register(schedule_list, read_only=True)
    registry.register(schedule_cancel)
    if tasks is None:
        return
    store = tasks

    async def task_create(goal: str, budget_tokens: int = 0, max_steps: int = 0) -> str:
        """Start a persistent task: a goal worked on step by step in the background, its result sent to the owner.

        Examples: research the best time to plant tomatoes here;
        water the plants when the soil is dry, then tell me

        Args:
            goal: what to do, in a sentence
            budget_tokens: the most tokens it may use (0: the default)
            max_steps: the most steps it may take (0: the default)
        """
        turn = current_turn()
        if turn is not None and turn.trust.untrusted:
            raise turn.trust.refuse_lasting("start that task")
        budget = {k: v for k, v in (("budget_tokens", budget_tokens), ("max_steps", max_steps)) if v and v > 0}
        if can_work is not None:
            can_work()
        task = await store.db.call(store.add, goal, **budget)
        if wake is not None:
            wake()
        return f"task {task.id} queued: {task.goal}"

    def task_status(id: int = 0) -> dict[str, Any] | OutsideText:
        """A task's state, steps and result; without an id, every task and how many are in each state.

        Examples: how is the research going; which tasks are running; is task 3 done

        Args:
            id: the task's id (0: all tasks)
        """
        if id:
            shown = [store.get(id)]
            answer = shown[0].as_dict()
        else:
            listed = store.list()
            shown = listed[-20:]
            answer = {"counts": _tally(store, listed), "tasks": [t.as_dict() for t in shown]}
        read = list(dict.fromkeys(source for t in shown for source in getattr(t, "outside", ())))
        if read:  # a result written after reading a page may carry its orders into this turn
            return OutsideText(json.dumps(answer, default=str), f"the result of a task that read {' and '.join(read)}")
        return answer

    registry.register(task_create)
    registry.register(task_status, read_only=True)
