"""Persistent tasks over HTTP: the list with counts by state, adding one, pause / resume / cancel, its steps.

The daemon's one ``TaskStore`` answers (its methods are short SQLite calls, run on the database thread);
a task added or resumed here wakes the runner, so it starts now rather than at the next poll. A task that
cannot move (resume a running one, cancel a done one) is a 409 saying why, an unknown id a 404.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from appliance.channels.web.http import bad_request, read_json, running
from appliance.channels.web.state import AUTOMATION, RUNTIME, Automation
from appliance.errors import Conflict, NotFound
from appliance.tasks.capable import refusal

if TYPE_CHECKING:
    from appliance.memory.db import Database
    from appliance.tasks import Task, TaskStore

ROUTES = ("auto", "local", "cloud")
TASK_FIELDS = {"goal", "budget_tokens", "max_steps", "route"}
GOAL_CHARS = 4000
LIST_LIMIT = 50

routes = web.RouteTableDef()  # task routes, added to the app by app.build_app


def _store(request: web.Request) -> TaskStore:
    return running(request.app[AUTOMATION].tasks, "no task runner here", "tasks are kept and run by `picoagent serve`")


def _task_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise bad_request(f"{request.match_info['id']!r} is not a task id (a whole number)") from None


async def _move(request: web.Request, how: Callable[[TaskStore], Callable[[int], Task]]) -> Task:
    """Pause, resume or cancel a task; its refusals as 404 (no such task) and 409 (not in that state)."""
    from appliance.tasks import TaskError, UnknownTaskError

    store = _store(request)
    task_id = _task_id(request)
    try:
        return await request.app[RUNTIME].db.call(how(store), task_id)
    except UnknownTaskError as exc:
        raise NotFound(exc.message, fix=exc.fix or "GET /api/tasks lists the tasks") from None
    except TaskError as exc:
        raise Conflict(exc.message, fix=exc.fix) from None


def _positive(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise bad_request(f'"{name}" must be a whole number of at least 1')
    return value


async def recent_tasks(db: Database, automation: Automation, limit: int, wanted: str | None = None) -> dict[str, Any]:
    """``{"tasks": [...], "counts": {state: n}}``: the newest ``limit`` tasks (in state ``wanted``)."""
    store = automation.tasks
    if store is None:
        return {"tasks": [], "counts": {}}

    def read() -> dict[str, Any]:
        tasks = store.list(wanted)
        newest = sorted(tasks, key=lambda t: t.id, reverse=True)[:limit]
        return {"tasks": [t.as_dict() for t in newest], "counts": store.counts()}

    return await db.call(read)


@routes.get("/api/tasks")
async def list_tasks(request: web.Request) -> web.Response:
    """The newest tasks first (``?state=``, ``?limit=``, default 50), and how many are in each state."""
    try:
        limit = int(request.query.get("limit", str(LIST_LIMIT)))
    except ValueError:
        raise bad_request("limit: expected a whole number") from None
    if limit < 1:
        raise bad_request("limit: expected a whole number of at least 1")
    wanted = request.query.get("state") or None
    return web.json_response(await recent_tasks(request.app[RUNTIME].db, request.app[AUTOMATION], limit, wanted))


@routes.post("/api/tasks")
async def create_task(request: web.Request) -> web.Response:
    """Queue a task: {"goal", "budget_tokens"?, "max_steps"?, "route"?}; 201 with the task."""
    body = await read_json(request)
    unknown = sorted(set(body) - TASK_FIELDS)
    if unknown:
        raise bad_request(f"unknown field {unknown[0]!r}; a task takes {', '.join(sorted(TASK_FIELDS))}")
    goal = body.get("goal")
    if not isinstance(goal, str) or not goal.strip() or len(goal) > GOAL_CHARS:
        raise bad_request(f'expected "goal": what the task should do, 1 to {GOAL_CHARS} characters')
    route = body.get("route", "auto")
    if route not in ROUTES:
        raise bad_request(f'"route" must be one of {", ".join(ROUTES)}')
    runtime, store = request.app[RUNTIME], _store(request)
    budget, steps = _positive(body, "budget_tokens"), _positive(body, "max_steps")
    problem = refusal(runtime.config, route, runtime.agent.model.name)
    if problem is not None:  # the model here cannot plan and the cloud may not work it: said now, not after
        raise Conflict(problem.message, fix=problem.fix)

    task = await runtime.db.call(store.add, goal.strip(), budget_tokens=budget, max_steps=steps, route=route)
    runner = request.app[AUTOMATION].task_runner
    if runner is not None:
        runner.wake()
    return web.json_response(task.as_dict(), status=201)


@routes.post("/api/tasks/{id}/pause")
async def pause_task(request: web.Request) -> web.Response:
    """Pause a pending or running task (a running one stops after its step in flight)."""
    return web.json_response((await _move(request, lambda s: s.pause)).as_dict())


@routes.post("/api/tasks/{id}/resume")
async def resume_task(request: web.Request) -> web.Response:
    """Put a paused task back in the queue."""
    task = await _move(request, lambda s: s.resume)
    runner = request.app[AUTOMATION].task_runner
    if runner is not None:
        runner.wake()
    return web.json_response(task.as_dict())


@routes.post("/api/tasks/{id}/cancel")
async def cancel_task(request: web.Request) -> web.Response:
    """Cancel a task (and its unfinished children); its steps stay readable."""
    return web.json_response((await _move(request, lambda s: s.cancel)).as_dict())


@routes.get("/api/tasks/{id}/logs")
async def task_logs(request: web.Request) -> web.Response:
    """A task and its steps in order."""
    from appliance.tasks import UnknownTaskError

    db, store = request.app[RUNTIME].db, _store(request)
    task_id = _task_id(request)
    try:
        task = await db.call(store.get, task_id)
        steps = await db.call(store.logs, task_id)
    except UnknownTaskError as exc:
        raise NotFound(exc.message, fix=exc.fix or "GET /api/tasks lists the tasks") from None
    return web.json_response({"task": task.as_dict(), "steps": [s.as_dict() for s in steps]})
