"""/tasks and /schedule on every chat channel: the tasks and the scheduled jobs, with Pause, Resume, Cancel.

Plugged into :class:`~appliance.channels.commands.ChatCommands` (its handlers and button handlers), so a
channel that has /status has these too. One message per task or job, its buttons under it; a tap answers
with a notice and rewrites that message (``job:pause:bins_1900_daily``, ``task:cancel:7``). A channel
without buttons shows each as the command that does the same (``/schedule pause bins_1900_daily``,
``/tasks cancel 7``; see ``base.button_command``). The daemon attaches its one Scheduler and TaskStore
(:meth:`AutomationCommands.attach`); until then the commands say where jobs and tasks run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from appliance.channels.commands import Button, CommandCall, Said, Tap, Tapped, parse_button
from appliance.errors import PicoagentError

if TYPE_CHECKING:
    from appliance.memory.db import Database
    from appliance.schedule.scheduler import Scheduler
    from appliance.tasks import Task, TaskStore

ACTIVE = ("pending", "running", "paused")
SHOWN = 8  # tasks or jobs listed at most, one message each
ENDED_SHOWN = 3  # the latest ended tasks shown after the active ones
NOT_HERE = "Jobs and tasks run inside `picoagent serve`; this chat is not connected to it."
DONE = {"pause": "Paused", "resume": "Resumed", "cancel": "Cancelled"}


def typed_command(kind: str, verb: str, target: str) -> str:
    """What a person types instead of a job or task button ("" for any other button)."""
    if verb not in DONE:
        return ""
    if kind == "job":
        return f"/schedule {verb} {target}"
    if kind == "task":
        return f"/tasks {verb} {target}"
    return ""


def _when(iso: str | None) -> str:
    if not iso:
        return "–"
    try:
        at = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    return at.strftime("%a %d %b %H:%M")


class AutomationCommands:
    """/tasks and /schedule, and the taps on their buttons."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.cron: Scheduler | None = None
        self.tasks: TaskStore | None = None
        self.wake: Callable[[], None] | None = None

    def attach(self, cron: Scheduler | None, tasks: TaskStore | None, wake: Callable[[], None] | None) -> None:
        """The daemon's scheduler and task store (and how to wake its task runner)."""
        self.cron, self.tasks, self.wake = cron, tasks, wake

    def handlers(self) -> dict[str, Callable[[CommandCall], Awaitable[list[Said]]]]:
        """Command name -> handler."""
        return {"tasks": self.tasks_command, "schedule": self.schedule_command}

    def button_handlers(self) -> dict[str, Callable[[Tap], Awaitable[Tapped | None]]]:
        """Button kind -> handler."""
        return {"job": self.job_button, "task": self.task_button}

    # --- /schedule ---------------------------------------------------------------------------------

    async def schedule_command(self, call: CommandCall) -> list[Said]:
        """/schedule: every job with its next run; /schedule pause|resume|cancel ID does what its button does."""
        if call.words:
            return await self._typed(call, "job", "schedule")
        if self.cron is None:
            return [Said(NOT_HERE)]
        await self.cron.refresh()  # jobs made by `picoagent chat` beside the daemon, listed at once
        jobs = self.cron.list_jobs()
        if not jobs:
            return [Said('Nothing is scheduled. Try "remind me at 7 to take the bins out".')]
        more = f" (the first {SHOWN} of {len(jobs)})" if len(jobs) > SHOWN else ""
        return [Said(f"Scheduled: {len(jobs)} job{'s' if len(jobs) != 1 else ''}{more}.")] + [
            self._job_card(job) for job in jobs[:SHOWN]
        ]

    def _job_card(self, job: dict[str, Any]) -> Said:
        state = "paused" if job.get("paused") else f"next {_when(job.get('next_run'))}"
        lines = [f"{job['id']} · {job['schedule']} · {state}", str(job.get("does") or "")]
        if job.get("last_run"):
            outcome = "ok" if job.get("last_ok") else "failed"
            lines.append(f"Last run {_when(job['last_run'])}: {outcome}, {str(job.get('last_result') or '')[:120]}")
        verb = "resume" if job.get("paused") else "pause"
        buttons = [Button(verb.capitalize(), f"job:{verb}:{job['id']}")]
        if job.get("source") == "chat":
            buttons.append(Button("Cancel", f"job:cancel:{job['id']}"))
        return Said("\n".join(line for line in lines if line), [buttons])

    async def job_button(self, tap: Tap) -> Tapped | None:
        """Pause, Resume or Cancel one job; the job's message shows it afterwards."""
        _, verb, job_id = parse_button(tap.data)
        if self.cron is None:
            return Tapped(NOT_HERE, alert=True)
        try:
            if verb == "pause":
                row = await self.cron.pause(job_id, by=tap.user)
            elif verb == "resume":
                row = await self.cron.resume(job_id)
            elif verb == "cancel":
                row = await self.cron.cancel(job_id)
                return Tapped("Cancelled", edit=Said(f"Cancelled by {tap.name}: {row['id']} ({row['does']})."))
            else:
                return Tapped("That button is no longer valid.")
        except PicoagentError as exc:
            return Tapped(exc.for_people(), alert=True)
        return Tapped(DONE[verb], edit=self._job_card(row))

    # --- /tasks ------------------------------------------------------------------------------------

    async def tasks_command(self, call: CommandCall) -> list[Said]:
        """/tasks: the tasks at work and the latest ended; /tasks pause|resume|cancel ID does what its button does."""
        if call.words:
            return await self._typed(call, "task", "tasks")
        store = self.tasks
        if store is None:
            return [Said(NOT_HERE)]
        tasks, counts = await self.db.call(lambda: (store.list(), store.counts()))
        if not tasks:
            return [Said("No tasks. `picoagent tasks add GOAL` starts one.")]
        newest = sorted(tasks, key=lambda t: t.id, reverse=True)
        active = [t for t in newest if t.state in ACTIVE][:SHOWN]
        ended = [t for t in newest if t.state not in ACTIVE][:ENDED_SHOWN]
        summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()) if n)
        return [Said(f"Tasks: {summary}.")] + [self._task_card(t) for t in [*active, *ended]]

    def _task_card(self, task: Task) -> Said:
        steps = f"{task.steps_done} of {task.max_steps} steps"
        tokens = (
            f"{task.tokens_used} of {task.budget_tokens} tokens" if task.budget_tokens else f"{task.tokens_used} tokens"
        )
        lines = [f"#{task.id} {task.state} · {steps} · {tokens}", task.goal]
        if task.result:
            lines.append(f"Result: {task.result[:300]}")
        if task.error:
            lines.append(f"Error: {task.error[:300]}")
        buttons: list[Button] = []
        if task.state == "paused":
            buttons.append(Button("Resume", f"task:resume:{task.id}"))
        elif task.state in ("pending", "running"):
            buttons.append(Button("Pause", f"task:pause:{task.id}"))
        if task.state in ACTIVE:
            buttons.append(Button("Cancel", f"task:cancel:{task.id}"))
        return Said("\n".join(lines), [buttons] if buttons else [])

    async def task_button(self, tap: Tap) -> Tapped | None:
        """Pause, Resume or Cancel one task; the task's message shows it afterwards."""
        _, verb, target = parse_button(tap.data)
        store = self.tasks
        if store is None:
            return Tapped(NOT_HERE, alert=True)
        if verb not in DONE or not target.isdigit():
            return Tapped("That button is no longer valid.")
        move = {"pause": store.pause, "resume": store.resume, "cancel": store.cancel}[verb]
        try:
            task = await self.db.call(move, int(target))
        except PicoagentError as exc:
            return Tapped(exc.for_people(), alert=True)
        if verb == "resume" and self.wake is not None:
            self.wake()
        return Tapped(DONE[verb], edit=self._task_card(task))

    # --- typed out ---------------------------------------------------------------------------------

    async def _typed(self, call: CommandCall, kind: str, command: str) -> list[Said]:
        """``/tasks cancel 7``: the button's handler, answered as text."""
        verb = call.words[0].lower()
        if verb not in DONE or len(call.words) < 2:
            return [Said(f"Say /{command} to list them, or /{command} pause|resume|cancel ID.")]
        tap = Tap(f"{kind}:{verb}:{call.words[1]}", call.user, call.name or call.user)
        tapped = await (self.job_button(tap) if kind == "job" else self.task_button(tap))
        if tapped is None:
            return []
        if tapped.edit is None:
            return [Said(tapped.notice)]
        return [Said(f"{tapped.notice}: {tapped.edit.text}" if tapped.edit.buttons else tapped.edit.text)]
