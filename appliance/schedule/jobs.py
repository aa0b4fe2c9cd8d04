"""What a cron job is once loaded, and what running one does: a prompt goes to the agent, a device is
set, a persistent task is started.

A job itself is :class:`appliance.config.CronJob`, from the config's ``scheduler.jobs`` or
``workspace/cron.yaml`` (:func:`load_jobs`). Here: how they are read and checked, how one run is
recorded (:class:`JobRun`, :class:`LastRun`, kept in the ``schedule_runs`` table), how long it may
take, and the default ``run_job`` the scheduler calls.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from appliance.config import CronJob
from appliance.errors import ConfigError, UsageError
from appliance.schedule.parse import parse_schedule

if TYPE_CHECKING:
    from appliance.agent.record import ReplyRecord
    from appliance.hardware.devices import DeviceAccess

JOB_TIMEOUT_S = 900.0  # a job still running after this long is stopped, its run a failure
RESULT_CHARS = 2000  # the longest result kept in schedule_runs
_JOB_ID = re.compile(r"[a-z][a-z0-9_]{0,39}")

# --- jobs from the config and workspace/cron.yaml ------------------------------------------------

_JOB_KEYS = [f.name for f in dataclasses.fields(CronJob)]


def check_job(job: CronJob, where: str, devices: Collection[str] | None = None) -> None:
    """A job's id, what it does and its schedule are valid (ConfigError naming ``where`` otherwise)."""
    if not _JOB_ID.fullmatch(job.id):
        raise ConfigError(f"{where}: id {job.id!r}: lower-case letters, digits and _ (at most 40)")
    if len([k for k in ("prompt", "device", "task") if getattr(job, k)]) != 1:
        raise ConfigError(f"{where}: a job has exactly one of prompt, device (with value) or task")
    if job.device and not job.value:
        raise ConfigError(f"{where}: device {job.device} needs a value: on, off or a brightness like 40%")
    if job.device and devices is not None and job.device not in devices:
        raise ConfigError(f"{where}: no device named {job.device!r}", fix="known devices: " + ", ".join(devices))
    try:
        parse_schedule(job.schedule)
    except UsageError as exc:
        raise ConfigError(f"{where}: {exc.message}", fix=exc.fix) from None


def _job_from(raw: object, where: str) -> CronJob:
    """One cron.yaml entry as a CronJob (types checked; ${NAME} references are not resolved here)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with id, schedule and prompt, device or task")
    for key in raw:
        if key not in _JOB_KEYS:
            close = difflib.get_close_matches(str(key), _JOB_KEYS, n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"{where}: {key}: unknown key{hint}", fix="known keys: " + ", ".join(_JOB_KEYS))
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "deliver" and not isinstance(value, bool):
            raise ConfigError(f"{where}: deliver: expected true or false, got {value!r}")
        if key == "missed" and value not in ("skip", "run_once"):
            raise ConfigError(f'{where}: missed: expected "skip" or "run_once", got {value!r}')
        if key == "value" and isinstance(value, bool):
            value = "on" if value else "off"  # YAML reads a bare on/off as true/false
        if key not in ("deliver", "missed"):
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise ConfigError(f"{where}: {key}: expected a string, got {value!r}")
            value = str(value)
        values[key] = value
    missing = [key for key in ("id", "schedule") if key not in values]
    if missing:
        raise ConfigError(f"{where}: {' and '.join(missing)} missing")
    return CronJob(**values)


def load_jobs(config_jobs: Sequence[CronJob], workspace: Path, devices: Collection[str] | None = None) -> list[CronJob]:
    """The config's jobs and those of ``workspace/cron.yaml`` (a YAML list of the same fields), checked."""
    import yaml  # lazy, like the config loader

    jobs = list(config_jobs)
    for i, job in enumerate(jobs):
        check_job(job, f"scheduler.jobs[{i}] ({job.id})", devices)
    path = workspace / "cron.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return jobs
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark else ""
        raise ConfigError(f"{path}{line}: {getattr(exc, 'problem', None) or 'invalid YAML'}") from None
    if raw is None:
        return jobs
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: expected a list of jobs (- id: ..., schedule: ...)")
    ids = {job.id: "the config (scheduler.jobs)" for job in jobs}
    for n, entry in enumerate(raw, 1):
        name = entry.get("id") if isinstance(entry, dict) else None
        where = f"{path}, entry {n}" + (f" ({name})" if isinstance(name, str) else "")
        job = _job_from(entry, where)
        check_job(job, where, devices)
        if job.id in ids:
            raise ConfigError(f"{where}: the id {job.id!r} is already used in {ids[job.id]}", fix="rename one of them")
        ids[job.id] = f"{path.name} entry {n}"
        jobs.append(job)
    return jobs


RunReason = Literal["schedule", "startup", "missed", "manual"]


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
    return f"task: {job.task}"


class _Agent(Protocol):
    async def turn(self, text: str, *, channel: str = ..., chat_id: str = ...) -> ReplyRecord: ...


def make_job_runner(
    agent: _Agent | None,
    devices: DeviceAccess | None,
    tasks_start: Callable[[str], Awaitable[str]] | None,
) -> Callable[[CronJob], Awaitable[str]]:
    """The default ``run_job``: a prompt goes to the agent, a device is set, a task is started."""

    async def run_job(job: CronJob) -> str:
        if job.prompt:
            if agent is None:
                raise UsageError(f"cron job {job.id}: no agent to answer the prompt here")
            record = await agent.turn(job.prompt, channel="cron", chat_id=job.id)
            return record.text
        if job.device:
            if devices is None:
                raise UsageError(f"cron job {job.id}: no devices are configured")
            result = await devices.set(job.device, job.value, requested_by=f"cron:{job.id}")
            return result.describe()
        if tasks_start is None:
            raise UsageError(f"cron job {job.id}: tasks run only inside the daemon")
        return await tasks_start(job.task)

    return run_job
