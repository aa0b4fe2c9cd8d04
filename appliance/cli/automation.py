"""`picoagent cron` and `tasks`: scheduled jobs and persistent tasks (the daemon runs them when it runs)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from appliance.cli.common import load, open_db, print_json
from appliance.cli.daemon_client import daemon_get

if TYPE_CHECKING:
    from appliance.config import Config


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `cron` and `tasks` command groups."""
    cron = sub.add_parser("cron", parents=[common], help="scheduled jobs: list them, run one now")
    csub = cron.add_subparsers(dest="action", metavar="ACTION", required=True)
    clist = csub.add_parser("list", parents=[common], help="the jobs with their next and last runs")
    clist.add_argument("--json", action="store_true", help="print the jobs as JSON")
    clist.set_defaults(handler=cmd_cron_list)
    crun = csub.add_parser("run", parents=[common], help="run a job now (in the daemon when it runs)")
    crun.add_argument("id")
    crun.set_defaults(handler=cmd_cron_run)

    tasks = sub.add_parser("tasks", parents=[common], help="persistent tasks: a goal worked on step by step")
    tasub = tasks.add_subparsers(dest="action", metavar="ACTION", required=True)
    tadd = tasub.add_parser("add", parents=[common], help="queue a task (the daemon starts it within seconds)")
    tadd.add_argument("goal", nargs="+", help="what to do, e.g. water the plants when the soil is dry, then tell me")
    tadd.set_defaults(handler=cmd_tasks_add)
    tlist = tasub.add_parser("list", parents=[common], help="the tasks and their states")
    tlist.add_argument("--state", choices=["pending", "running", "done", "error", "paused"], help="only these")
    tlist.add_argument("--json", action="store_true", help="print the tasks as JSON")
    tlist.set_defaults(handler=cmd_tasks_list)
    tasub.add_parser("run", parents=[common], help="work the pending tasks here (when no daemon runs)").set_defaults(
        handler=cmd_tasks_run
    )
    for move, text in (("pause", "pause a task after its current step"), ("resume", "put a paused task back")):
        one = tasub.add_parser(move, parents=[common], help=text)
        one.add_argument("id", type=int)
        one.set_defaults(handler=cmd_tasks_move, move=move)
    tlogs = tasub.add_parser("logs", parents=[common], help="a task's steps")
    tlogs.add_argument("id", type=int)
    tlogs.add_argument("--json", action="store_true", help="print the task and its steps as JSON")
    tlogs.set_defaults(handler=cmd_tasks_logs)


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
            task = await runtime.db.call(TaskStore(runtime.db).add, goal)
            return f"task {task.id} queued: {task.goal} (`picoagent tasks run` works it here)"

        jobs = load_jobs(config.scheduler.jobs, runtime.workspace.root, config.devices)
        runner = make_job_runner(runtime.agent, runtime.devices, queue_task)
        scheduler = Scheduler(jobs, tz=config.scheduler.timezone, run_job=runner, notify=None, db=runtime.db)
        print(asyncio.run(scheduler.run_now(args.id)))
    finally:
        runtime.close()
    return 0


class _TaskTable:
    """The tasks in this process's own connection (safe beside the daemon's: WAL, one transaction per change)."""

    def __init__(self, config: Config) -> None:
        from appliance.tasks import TaskStore

        self.db = open_db(config)
        self.store = TaskStore(self.db)

    def __enter__(self) -> Any:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.db.close()


def cmd_tasks_add(args: argparse.Namespace) -> int:
    """Queue a task."""
    with _TaskTable(load(args)) as store:
        task = store.add(" ".join(args.goal))
    print(f"task {task.id} queued: {task.goal}")
    print("(the daemon starts it; without a daemon, `picoagent tasks run` works it here)", file=sys.stderr)
    return 0


def cmd_tasks_list(args: argparse.Namespace) -> int:
    """The tasks and their states."""
    with _TaskTable(load(args)) as store:
        tasks = store.list(args.state)
    if args.json:
        print_json([t.as_dict() for t in tasks])
        return 0
    if not tasks:
        print("no tasks" + (f" {args.state}" if args.state else ""))
    for task in tasks:
        print(task.describe())
    return 0


def cmd_tasks_move(args: argparse.Namespace) -> int:
    """Pause or resume a task."""
    with _TaskTable(load(args)) as store:
        task = store.pause(args.id) if args.move == "pause" else store.resume(args.id)
    if args.move == "pause":
        print(f"task {task.id} paused (a running task stops after its current step)")
    else:
        print(f"task {task.id} resumed: it goes on at step {task.steps_done + 1}")
    return 0


def cmd_tasks_logs(args: argparse.Namespace) -> int:
    """A task and its steps."""
    with _TaskTable(load(args)) as store:
        task = store.get(args.id)
        steps = store.logs(args.id)
    if args.json:
        print_json({"task": task.as_dict(), "steps": [s.as_dict() for s in steps]})
        return 0
    print(task.describe())
    for step in steps:
        print(step.describe())
    if not steps:
        print("  (no steps yet)")
    return 0


def cmd_tasks_run(args: argparse.Namespace) -> int:
    """Work the pending tasks in the foreground, one at a time, until none is left."""
    import asyncio

    from appliance.errors import UsageError
    from appliance.runtime import Runtime
    from appliance.tasks import Task, TaskRunner, TaskStore, make_agent_step

    config = load(args)
    if daemon_get(config, "/api/status") is not None:
        # Two runners would each recover() the other's running task and run it twice.
        raise UsageError("the daemon is running and works the tasks itself", fix="`picoagent tasks list` shows them")
    runtime = Runtime.open(config)
    try:
        store = TaskStore(runtime.db)
        store.recover()
        runner = TaskRunner(store, make_agent_step(runtime.agent), None)

        async def work() -> list[Task]:
            ended = []
            while (task := await runner.run_once()) is not None:
                print(task.describe(), flush=True)
                ended.append(task)
            return ended

        if not asyncio.run(work()):
            print("no pending tasks")
        return 0
    finally:
        runtime.close()
