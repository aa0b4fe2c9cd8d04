"""What a cron job is once loaded, and what running one does: a prompt goes to the agent, a device is
set, a persistent task is started, a message goes to the owner as it is ("Reminder: ...", no model).

A job itself is :class:`appliance.config.CronJob`, from the config's ``scheduler.jobs`` or
``workspace/cron.yaml``; both are read and checked by :func:`appliance.config.load_jobs`, with the
same code. Here: how one run is recorded (:class:`JobRun`, :class:`LastRun`, kept in the
``schedule_runs`` table), how long it may take, and the default ``run_job`` the scheduler calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from appliance.errors import UsageError

if TYPE_CHECKING:
    from appliance.agent.record import ReplyRecord
    from appliance.config import CronJob
    from appliance.hardware.devices import DeviceAccess

JOB_TIMEOUT_S = 900.0  # a job still running after this long is stopped, its run a failure
RESULT_CHARS = 2000  # the longest result kept in schedule_runs

RunReason = Literal["schedule", "startup", "missed", "manual"]
REMINDER = "Reminder: "  # what a message job's text arrives as


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


def does(job: CronJob) -> str:
    """What a job does, in a few words (`cron list`)."""
    if job.prompt:
        return f"prompt: {job.prompt}"
    if job.device:
        return f"set {job.device} {job.value}"
    if job.message:
        return f"message: {job.message}"
    return f"task: {job.task}"


def task_queued(task_id: int, goal: str, *, first: str = "") -> str:
    """A task job's result: the job only queues the task, so it says where the task's outcome will be (a README
    walk read "task 3 queued" in `cron logs` for a task that had since failed). ``first``: a step before that."""
    # the pointer before the goal: `cron logs` and `cron list` cut a result's line, and cut it off (walk 7)
    return f"task {task_id} queued ({first}see `picoagent tasks logs {task_id}`): {goal}"


class _Agent(Protocol):
    async def turn(self, text: str, *, channel: str = ..., chat_id: str = ...) -> ReplyRecord: ...


def make_job_runner(
    agent: _Agent | None,
    devices: DeviceAccess | Callable[[], DeviceAccess | None] | None,
    tasks_start: Callable[[str], Awaitable[str]] | None,
) -> Callable[[CronJob], Awaitable[str]]:
    """The default ``run_job``: a prompt goes to the agent, a device is set, a task is started, a message
    is the result itself (the scheduler delivers it). ``devices``: or a function giving them at each run (the
    daemon's: a config reload may open the first device)."""

    async def run_job(job: CronJob) -> str:
        if job.message:
            said = job.message  # "Reminder: ..." written out already is not said twice (walk 8: "Reminder: Reminder:")
            return said if said.lower().startswith(REMINDER.strip().lower()) else REMINDER + said
        if job.prompt:
            if agent is None:
                raise UsageError(f"cron job {job.id}: no agent to answer the prompt here")
            record = await agent.turn(job.prompt, channel="cron", chat_id=job.id)
            return record.text
        if job.device:
            access = devices() if callable(devices) else devices
            if access is None:
                raise UsageError(f"cron job {job.id}: no devices are configured")
            result = await access.set(job.device, job.value, requested_by=f"cron:{job.id}")
            said = result.describe()
            return said[:1].upper() + said[1:]  # the job's result is a notification of its own
        if tasks_start is None:
            raise UsageError(f"cron job {job.id}: tasks run only inside the daemon")
        return await tasks_start(job.task)

    return run_job


CLI_TOKEN = "local-cli"  # the token `picoagent` commands use with a running daemon (web/server.py's CLI_TOKEN_NAME)


def made(source: str, created_by: str) -> str:
    """Where a job comes from, in words (``cron list`` and the status page): who made one in the database.

    ``created_by`` is what the scheduler was told: "cli" for ``picoagent cron add`` with no daemon, "web
    (token local-cli)" for the same through the daemon, "web (token NAME)" for a program, "model" for the
    model's ``schedule_create``, and ``channel:user`` for the words of a chat.
    """
    if source == "config":
        return "from the config"
    if source == "file":
        return "from workspace/cron.yaml"
    token = created_by.removeprefix("web (token ").removesuffix(")") if created_by.startswith("web (token ") else None
    if created_by == "cli" or token == CLI_TOKEN:
        return "made with `picoagent cron add`"
    if token is not None:
        return f"made over the API, token {token}"
    if created_by.startswith("web"):
        return "made over the API, from the owner's browser"
    if created_by == "model":
        return "made in chat, by the model"
    return f"made in chat ({created_by})" if created_by else "made in chat"
