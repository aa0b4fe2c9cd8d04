"""`picoagent cron`: scheduled jobs (the daemon runs them when it runs; `tasks` is in cli/tasks.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from appliance.cli.common import load, open_db, print_json
from appliance.cli.daemon_client import daemon_get

if TYPE_CHECKING:
    pass


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `cron` command group."""
    cron = sub.add_parser("cron", parents=[common], help="scheduled jobs: list them, run one now")
    csub = cron.add_subparsers(dest="action", metavar="ACTION", required=True)
    clist = csub.add_parser("list", parents=[common], help="the jobs with their next and last runs")
    clist.add_argument("--json", action="store_true", help="print the jobs as JSON")
    clist.set_defaults(handler=cmd_cron_list)
    crun = csub.add_parser("run", parents=[common], help="run a job now (in the daemon when it runs)")
    crun.add_argument("id")
    crun.set_defaults(handler=cmd_cron_run)


def cmd_cron_list(args: argparse.Namespace) -> int:
    """The scheduled jobs, from the daemon when it runs."""
    config = load(args)
    answer = daemon_get(config, "/api/cron")
    if answer is None:
        from appliance.config import load_jobs
        from appliance.runtime import data_dir
        from appliance.schedule.jobs import make_job_runner
        from appliance.schedule.scheduler import Scheduler

        root = data_dir(config)
        db = open_db(config)
        try:
            jobs = load_jobs(config.scheduler.jobs, root / "workspace", config.devices)
            runner = make_job_runner(None, None, None)
            scheduler = Scheduler(jobs, tz=config.scheduler.timezone, run_job=runner, notify=None, db=db)
            answer = {"jobs": scheduler.list_jobs()}
        finally:
            db.close()
    if args.json:
        print_json(answer["jobs"])
        return 0
    if not answer["jobs"]:
        print("no cron jobs (add them under scheduler.jobs in the config or in workspace/cron.yaml)")
    for job in answer["jobs"]:
        last = "never run"
        if job["last_run"] is not None:
            lines = (job["last_result"] or "").splitlines()
            outcome = "ok" if job["last_ok"] else "FAILED"
            last = f"last {job['last_run']} {outcome}" + (f": {lines[0][:70]}" if lines else "")
        print(
            f"{job['id']:16} {job['schedule']:18} next {job['next_run'] or 'at start'}\n    {job['does']}\n    {last}"
        )
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
    from appliance.config import load_jobs
    from appliance.runtime import Runtime
    from appliance.schedule.jobs import make_job_runner
    from appliance.schedule.scheduler import Scheduler
    from appliance.tasks import TaskStore

    runtime = Runtime.open(config)
    try:

        async def queue_task(goal: str) -> str:
            task = await runtime.db.call(TaskStore(runtime.db, settings=config.tasks).add, goal)
            return f"task {task.id} queued: {task.goal} (`picoagent tasks run` works it here)"

        jobs = load_jobs(config.scheduler.jobs, runtime.workspace.root, config.devices)
        runner = make_job_runner(runtime.agent, runtime.devices, queue_task)
        scheduler = Scheduler(jobs, tz=config.scheduler.timezone, run_job=runner, notify=None, db=runtime.db)
        print(asyncio.run(scheduler.run_now(args.id)))
    finally:
        runtime.close()
    return 0
