"""`picoagent cron`: scheduled jobs (the daemon runs them when it runs; `tasks` is in cli/tasks.py)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from appliance.cli.common import action, command_group, load, open_db, print_json
from appliance.cli.daemon_client import daemon_get

if TYPE_CHECKING:
    from appliance.config import Config
    from appliance.memory.db import Database
    from appliance.schedule.scheduler import Scheduler

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `cron` command group."""
    csub = command_group(sub, common, "cron", "scheduled jobs: list, add, run, pause, resume, cancel")
    clist = action(csub, common, "list", "the jobs with their next and last runs", cmd_cron_list)
    clist.add_argument("--json", action="store_true", help="print the jobs as JSON")
    action(csub, common, "run", "run a job now (in the daemon when it runs)", cmd_cron_run).add_argument("id")
    cadd = action(csub, common, "add", "add a job (stored in the database, like jobs made in chat)", cmd_cron_add)
    cadd.add_argument("schedule", help='e.g. "once 2026-11-24 19:00", "daily 07:30", "every 2h", "30 7 * * 1-5"')
    what = cadd.add_mutually_exclusive_group(required=True)
    what.add_argument("--message", help="a text sent to you as it is (a reminder)")
    what.add_argument("--prompt", help="a message for the agent; its reply is sent to you")
    what.add_argument("--device", help="a device to set (with --value)")
    what.add_argument("--task", help="a persistent task's goal to start")
    cadd.add_argument("--value", default="", help="the device's value: on, off, 40%%")
    cadd.add_argument("--id", default="", help="the job's id (default: made from what it does and when)")
    for move, text in (
        ("pause", "pause a job (any job): it does not run until resumed"),
        ("resume", "resume a paused job at its next slot"),
        ("cancel", "remove a job made in chat or with `cron add`"),
    ):
        action(csub, common, move, text, cmd_cron_move, move=move).add_argument("id")
    clogs = action(csub, common, "logs", "a job's last runs, newest first", cmd_cron_logs)
    clogs.add_argument("id")
    clogs.add_argument("--limit", type=int, default=20, help="how many runs (default 20)")
    clogs.add_argument("--json", action="store_true", help="print the runs as JSON")


def local_scheduler(config: Config, db: Database, run_job: Any = None, *, lenient: bool = False) -> Scheduler:
    """The jobs as a scheduler in this process sees them (not run here unless asked): config, cron.yaml, database.

    ``lenient``: a broken workspace/cron.yaml is logged and left out (chat goes on), not raised.
    """
    from appliance.config import data_dir, load_jobs
    from appliance.errors import ConfigError
    from appliance.schedule.jobs import make_job_runner
    from appliance.schedule.scheduler import Scheduler

    try:
        jobs = load_jobs(config.scheduler.jobs, data_dir(config) / "workspace", config.devices)
    except ConfigError as exc:
        if not lenient:
            raise
        log.error("cron jobs: %s; the config's jobs only", exc.for_people())
        jobs = list(config.scheduler.jobs)
    return Scheduler(
        jobs,
        tz=config.scheduler.timezone,
        run_job=run_job or make_job_runner(None, None, None),
        notify=None,
        db=db,
        file_ids={job.id for job in jobs[len(config.scheduler.jobs) :]},
        devices=list(config.devices),
        place=config.weather.coordinates,
    )


def cmd_cron_list(args: argparse.Namespace) -> int:
    """The scheduled jobs, from the daemon when it runs."""
    config = load(args)
    answer = daemon_get(config, "/api/cron")
    if answer is None:
        db = open_db(config)
        try:
            answer = {"jobs": local_scheduler(config, db).list_jobs()}
        finally:
            db.close()
    if args.json:
        print_json(answer["jobs"])
        return 0
    if not answer["jobs"]:
        print("no cron jobs (add them in chat, with `cron add`, under scheduler.jobs or in workspace/cron.yaml)")
    # columns as wide as their longest entry: a chat-made id ("water_0900_sat") or "sunset -30m weekdays" ran over
    id_width = max([16, *(len(job["id"]) for job in answer["jobs"])])  # a list: no jobs at all is max([16])
    schedule_width = max([18, *(len(job["schedule"]) for job in answer["jobs"])])
    for job in answer["jobs"]:
        print(_job_lines(job, id_width, schedule_width))
    return 0


def _job_lines(job: dict[str, Any], id_width: int = 16, schedule_width: int = 18) -> str:
    from appliance.schedule.jobs import made

    last = "never run"
    if job["last_run"] is not None:
        lines = (job["last_result"] or "").splitlines()
        outcome = "ok" if job["last_ok"] else "FAILED"
        last = f"last {job['last_run']} {outcome}" + (f": {lines[0][:70]}" if lines else "")
    source = job.get("made") or made(job.get("source", "config"), job.get("created_by") or "")
    next_run = "PAUSED" if job.get("paused") else f"next {job['next_run'] or 'at start'}"
    head = f"{job['id']:{id_width}} {job['schedule']:{schedule_width}} {next_run}"
    return f"{head}\n    {job['does']} ({source})\n    {last}"


def _with_scheduler(config: Config, work: Callable[[Scheduler], Coroutine[Any, Any, Any]]) -> Any:
    """Run ``work`` on a scheduler of this process (no daemon runs): it writes the database the daemon reads."""
    import asyncio

    db = open_db(config)
    try:
        return asyncio.run(work(local_scheduler(config, db)))
    finally:
        db.close()


def cmd_cron_add(args: argparse.Namespace) -> int:
    """Add a job: through the daemon when it runs (it schedules it at once), else into the database."""
    from appliance.config import CronJob

    config = load(args)
    fields: dict[str, str] = {k: getattr(args, k) or "" for k in ("message", "prompt", "device", "task")}
    job = CronJob(
        id=args.id, schedule=args.schedule, value=args.value, message=fields["message"], prompt=fields["prompt"],
        device=fields["device"], task=fields["task"],
    )  # fmt: skip
    if daemon_get(config, "/api/status") is not None:
        body = {"schedule": job.schedule, "id": job.id, **{k: v for k, v in fields.items() if v}}
        if job.device:
            body["value"] = str(job.value)
        answer = daemon_get(config, "/api/cron", body)
        row = answer.get("job", answer) if isinstance(answer, dict) else answer
    else:
        row = _with_scheduler(config, lambda cron: cron.add_job(job, "cli"))
    print(f"added {row['id']}: {row['does']}, next {row['next_run']}")
    if job.task:  # kept (the model may change before it runs), but said now, as `tasks add` refuses it at once
        from appliance.llm.choice import model_spec
        from appliance.tasks.capable import refusal

        problem = refusal(config, "auto", model_spec(config, fallback=True))
        if problem is not None:
            print(f"note: its task will fail at its first step: {problem.message}", file=sys.stderr)
            print(f"  fix: {problem.fix}", file=sys.stderr)
    return 0


def cmd_cron_move(args: argparse.Namespace) -> int:
    """Pause, resume or cancel a job: in the daemon when it runs, else in the database (it reads it within a minute)."""
    config = load(args)
    if daemon_get(config, "/api/status") is not None:
        answer = daemon_get(config, f"/api/cron/{args.id}/{args.move}", {})
        row = answer.get("job", answer) if isinstance(answer, dict) else answer
    else:
        row = _with_scheduler(config, lambda cron: getattr(cron, args.move)(args.id))
    done = {"pause": "paused", "resume": "resumed", "cancel": "cancelled"}[args.move]
    after = f", next {row['next_run']}" if args.move == "resume" and row.get("next_run") else ""
    print(f"{row['id']} {done}{after}")
    return 0


def cmd_cron_logs(args: argparse.Namespace) -> int:
    """A job's last runs."""
    config = load(args)
    answer = daemon_get(config, f"/api/cron/{args.id}/logs?limit={args.limit}")
    if answer is None:
        runs = _with_scheduler(config, lambda cron: cron.runs(args.id, args.limit))
    else:
        runs = answer.get("runs", []) if isinstance(answer, dict) else answer
    if args.json:
        print_json(runs)
        return 0
    if not runs:
        print(f"{args.id}: no runs yet")
    for run in runs:
        outcome = "ok" if run["ok"] else "FAILED"
        first = (run["result"] or "").splitlines()[:1]
        print(f"{run['at']} {outcome:6} ({run['reason']})" + (f": {first[0][:90]}" if first else ""))
    return 0


def cmd_cron_run(args: argparse.Namespace) -> int:
    """Run one job now: in the daemon when it runs (it owns the model and the devices), else here."""
    import asyncio

    from appliance.errors import PicoagentError
    from appliance.schedule.jobs import JOB_TIMEOUT_S

    config = load(args)
    if daemon_get(config, "/api/status") is not None:
        # Never also run it here: a slow answer does not mean it did not run.
        answer = daemon_get(config, f"/api/cron/{args.id}/run", {}, timeout=JOB_TIMEOUT_S + 30)
        if answer is None:
            raise PicoagentError(
                "the daemon did not answer", fix="the job may still be running: see `picoagent cron list`"
            )
        print(answer["result"])
        return 0
    from appliance.runtime import Runtime
    from appliance.schedule.jobs import make_job_runner, task_queued
    from appliance.tasks import TaskStore

    runtime = Runtime.open(config)
    try:

        async def queue_task(goal: str) -> str:
            task = await runtime.db.call(TaskStore(runtime.db, settings=config.tasks).add, goal)
            return task_queued(task.id, task.goal, first="`picoagent tasks run` works it here; ")

        async def run_now() -> str:
            try:
                return await local_scheduler(config, runtime.db, runner).run_now(args.id)
            finally:  # on the loop that opened it: after asyncio.run it would be left "Unclosed"
                await runtime.close_cloud()

        runner = make_job_runner(runtime.agent, runtime.devices, queue_task)
        print(asyncio.run(run_now()))
    finally:
        runtime.close()
    return 0
