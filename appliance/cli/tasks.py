"""`picoagent tasks`: persistent tasks (the daemon works them when it runs; `tasks run` works them here).

Every command but `run` reads and writes the database through this process's own connection (WAL, one
transaction per change), so it works beside the daemon: a task added here starts there within seconds, a
task cancelled here stops there after its step in flight.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from appliance.cli.common import action, command_group, load, open_db, print_json
from appliance.cli.daemon_client import daemon_get

if TYPE_CHECKING:
    from appliance.config import Config

FOLLOW_POLL_S = 0.5  # `tasks logs --follow` looks for new steps this often


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `tasks` command group."""
    from appliance.tasks.states import ROUTES, STATES

    tasub = command_group(sub, common, "tasks", "persistent tasks: a goal worked on step by step")
    tadd = action(tasub, common, "add", "queue a task (the daemon starts it within seconds)", cmd_tasks_add)
    tadd.add_argument("goal", nargs="+", help="what to do, e.g. water the plants when the soil is dry, then tell me")
    tadd.add_argument("--budget-tokens", type=int, metavar="N", help="most tokens it may use (default: tasks:)")
    tadd.add_argument("--max-steps", type=int, metavar="N", help="most work steps it may take (default: tasks:)")
    tadd.add_argument(
        "--route", choices=ROUTES, default="auto", help="auto: as routing decides; local: on the Pi; cloud: the cloud"
    )
    tlist = action(tasub, common, "list", "the tasks, their states and tokens", cmd_tasks_list)
    tlist.add_argument("--state", choices=STATES, help="only these")
    tlist.add_argument("--json", action="store_true", help="print the tasks as JSON")
    tstatus = action(tasub, common, "status", "how many tasks are in each state", cmd_tasks_status)
    tstatus.add_argument("--json", action="store_true", help="print the counts as JSON")
    trun = action(tasub, common, "run", "work the pending tasks here (when no daemon runs)", cmd_tasks_run)
    trun.add_argument("--task", type=int, metavar="ID", help="work this one task only")
    for move, text in (
        ("pause", "pause a task after its current step"),
        ("resume", "put a paused task back"),
        ("cancel", "cancel a task and its subtasks (a running one stops after its current step)"),
    ):
        action(tasub, common, move, text, cmd_tasks_move, move=move).add_argument("id", type=int)
    tlogs = action(tasub, common, "logs", "a task's steps", cmd_tasks_logs)
    tlogs.add_argument("id", type=int)
    tlogs.add_argument("--json", action="store_true", help="print the task and its steps as JSON")
    tlogs.add_argument("--follow", "-f", action="store_true", help="print new steps as they come until it ends")


class _TaskTable:
    """The tasks in this process's own connection (safe beside the daemon's: WAL, one transaction per change)."""

    def __init__(self, config: Config) -> None:
        from appliance.tasks.store import TaskStore

        self.db = open_db(config)
        self.store = TaskStore(self.db, settings=config.tasks)

    def __enter__(self) -> Any:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.db.close()


def cmd_tasks_add(args: argparse.Namespace) -> int:
    """Queue a task, with its budgets and route."""
    from appliance.llm.choice import model_spec
    from appliance.tasks.capable import check_task

    config = load(args)
    check_task(config, args.route, model_spec(config, fallback=True))  # the model `serve` would work it with
    with _TaskTable(config) as store:
        task = store.add(
            " ".join(args.goal), budget_tokens=args.budget_tokens, max_steps=args.max_steps, route=args.route
        )
    budget = f"{task.budget_tokens:,} tokens" if task.budget_tokens else "no token budget"
    print(f"task {task.id} queued: {task.goal}")
    print(f"  at most {task.max_steps} step{'s' * (task.max_steps != 1)}, {budget}, route {task.route}")
    print("(the daemon starts it; without a daemon, `picoagent tasks run` works it here)", file=sys.stderr)
    return 0


def cmd_tasks_list(args: argparse.Namespace) -> int:
    """The tasks, their states and their tokens."""
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


def cmd_tasks_status(args: argparse.Namespace) -> int:
    """How many tasks are in each state."""
    with _TaskTable(load(args)) as store:
        counts = store.counts()
    if args.json:
        print_json(counts)
        return 0
    print("  ".join(f"{state} {n}" for state, n in counts.items()))
    return 0


def cmd_tasks_move(args: argparse.Namespace) -> int:
    """Pause, resume or cancel a task."""
    with _TaskTable(load(args)) as store:
        task = getattr(store, args.move)(args.id)
        children = [t.id for t in store.children(args.id) if t.state == "cancelled"] if args.move == "cancel" else []
    if args.move == "pause":
        print(f"task {task.id} paused (a running task stops after its current step)")
    elif args.move == "resume":
        print(f"task {task.id} resumed: it goes on at step {task.steps_done + 1}")
    else:
        also = f", with its subtask(s) {', '.join(map(str, children))}" if children else ""
        print(f"task {task.id} cancelled{also} (a running task stops after its current step)")
    return 0


def cmd_tasks_logs(args: argparse.Namespace) -> int:
    """A task and its steps; with --follow, new steps as they are recorded until the task ends."""
    from appliance.tasks.states import ENDED

    with _TaskTable(load(args)) as store:
        task = store.get(args.id)
        steps = store.logs(args.id)
        if args.json:
            print_json({"task": task.as_dict(), "steps": [s.as_dict() for s in steps]})
            return 0
        print(task.describe(whole=True), flush=True)  # the whole error: its fix is at the end
        for step in steps:
            print(step.describe(), flush=True)
        if not args.follow:
            if not steps:
                print("  (no steps yet)")
            return 0
        if task.state in ENDED:
            return 0
        seen = steps[-1].n if steps else 0
        try:
            while task.state not in ENDED:
                time.sleep(FOLLOW_POLL_S)
                task = store.get(args.id)
                for step in store.logs(args.id, after=seen):
                    print(step.describe(), flush=True)
                    seen = step.n
        except KeyboardInterrupt:
            return 0  # Ctrl-C ends following; the task goes on
        print(task.describe(whole=True), flush=True)  # how it ended
    return 0


def cmd_tasks_run(args: argparse.Namespace) -> int:
    """Work the pending tasks in the foreground, one at a time, until none is left (or the one named)."""
    import asyncio

    from appliance.errors import UsageError
    from appliance.runtime import Runtime
    from appliance.tasks import Task, TaskRunner, TaskStore, make_agent_step, spawn

    config = load(args)
    if daemon_get(config, "/api/status") is not None:
        # Two runners would each recover() the other's running task and run it twice.
        raise UsageError("the daemon is running and works the tasks itself", fix="`picoagent tasks list` shows them")
    runtime = Runtime.open(config)
    try:
        store = TaskStore(runtime.db, settings=config.tasks)
        store.recover()
        runner = TaskRunner(store, make_agent_step(runtime.agent), None)
        spawn.register(runtime.tools, runner)

        async def work() -> list[Task]:
            try:
                if args.task is not None:
                    one = await runner.run_task(args.task)
                    print(one.describe(), flush=True)
                    return [one]
                ended = []
                while (task := await runner.run_once()) is not None:
                    print(task.describe(), flush=True)
                    ended.append(task)
                return ended
            finally:  # on the loop that opened it: after asyncio.run it would be left "Unclosed"
                await runtime.close_cloud()

        if not asyncio.run(work()):
            print("no pending tasks")
        return 0
    finally:
        runtime.close()
