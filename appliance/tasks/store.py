"""Persistent tasks: a goal worked on in steps, each step saved before the next one starts.

A task moves pending → running → done | error; a person may pause a pending or running task and
resume it (back to pending). Each step is one SQLite transaction that writes the step row *and*
moves the task's ``steps_done`` counter, so after a crash (power cut, kill -9) the log and the
counter agree: the task resumes at the first step not recorded, never repeats a recorded step and
never loses one. Only the step that was in flight when the process died runs again.

:class:`TaskStore` is the table; :class:`TaskRunner` works one task at a time with a step function,
by default :func:`make_agent_step`, which asks the agent for the next step.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import inspect
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from appliance.errors import PicoagentError, UsageError
from appliance.memory.db import Database

if TYPE_CHECKING:
    from appliance.agent.loop import Agent
    from appliance.agent.record import Action

log = logging.getLogger(__name__)

T = TypeVar("T")

TaskState = Literal["pending", "running", "done", "error", "paused"]
STATES: tuple[str, ...] = get_args(TaskState)
DONE_PREFIX = "DONE:"
PROMPT_STEP_CHARS = 600  # a step's content as quoted back to the model; keeps a small context from overflowing

_TASK_COLUMNS = "id, goal, state, created_at, updated_at, steps_done, result, error"
_LIST_FIX = "`picoagent tasks list` shows the tasks and their states"


class TaskError(UsageError):
    """A task cannot do that in its current state (pause a done task, resume a running one)."""


class UnknownTaskError(TaskError, LookupError):
    """No task has that id."""


@dataclass(frozen=True)
class Task:
    """One persistent task as stored."""

    id: int
    goal: str
    state: TaskState
    created_at: float
    updated_at: float
    steps_done: int
    result: str | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def describe(self) -> str:
        """One line for people."""
        outcome = f": {self.result}" if self.result else f": {self.error}" if self.error else ""
        return f"{self.id:>4}  {self.state:<7}  {self.steps_done} step(s)  {self.goal}{outcome}"


@dataclass(frozen=True)
class Step:
    """One recorded step of a task."""

    task_id: int
    n: int
    at: float
    kind: str
    content: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def describe(self) -> str:
        """One line for people."""
        return f"{self.n:>3}. [{self.kind}] {self.content}"


@dataclass(frozen=True)
class StepOutcome:
    """What one step produced; ``done`` ends the task with ``result`` (default: the content)."""

    kind: str
    content: str
    done: bool = False
    result: str | None = None


StepFunction = Callable[[Task, list[Step]], Awaitable[StepOutcome]]
NotifyFunction = Callable[[str, str], object]


def _is(state: str) -> str:
    """A state as people say it: "is running", "has failed"."""
    return "has failed" if state == "error" else f"is {state}"


class TaskStore:
    """The tasks and task_steps tables; every change is one transaction, safe across processes."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock

    @staticmethod
    def _row(conn: sqlite3.Connection, task_id: int) -> Task:
        row = conn.execute(f"SELECT {_TASK_COLUMNS} FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None:
            raise UnknownTaskError(f"no task {task_id}", fix=_LIST_FIX)
        return Task(*row)

    def add(self, goal: str) -> Task:
        """Store a new pending task."""
        goal = goal.strip()
        if not goal:
            raise UsageError("a task needs a goal, e.g. 'water the plants when the soil is dry, then tell me'")
        now = self.clock()
        with self.db.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO tasks (goal, state, created_at, updated_at) VALUES (?, 'pending', ?, ?)", (goal, now, now)
            )
            task = self._row(conn, int(cur.lastrowid or 0))
        log.info("task %d added: %s", task.id, goal)
        return task

    def get(self, task_id: int) -> Task:
        """One task by id (UnknownTaskError when there is none)."""
        with self.db.reading() as conn:
            return self._row(conn, task_id)

    def list(self, state: str | None = None) -> builtins.list[Task]:
        """The tasks, oldest first; only those in ``state`` when given."""
        if state is not None and state not in STATES:
            raise UsageError(f"no task state {state!r}; the states are {', '.join(STATES)}")
        where, params = ("WHERE state = ?", (state,)) if state is not None else ("", ())
        rows = self.db.rows(f"SELECT {_TASK_COLUMNS} FROM tasks {where} ORDER BY id", params)
        return [Task(*row) for row in rows]

    def logs(self, task_id: int) -> builtins.list[Step]:
        """A task's steps in order (UnknownTaskError when there is no such task)."""
        with self.db.reading() as conn:
            self._row(conn, task_id)
            rows = conn.execute(
                "SELECT task_id, n, at, kind, content FROM task_steps WHERE task_id = ? ORDER BY n", (task_id,)
            ).fetchall()
        return [Step(*row) for row in rows]

    def _move(self, task_id: int, to: TaskState, allowed: tuple[str, ...], refusal: str, **sets: str | None) -> Task:
        """Move a task to ``to`` if its state is in ``allowed``, else refuse with ``refusal``."""
        assignments = "".join(f", {column} = ?" for column in sets)
        with self.db.transaction() as conn:
            task = self._row(conn, task_id)
            if task.state == to and to in ("paused", "pending"):
                fix = f"`picoagent tasks resume {task_id}` when it should go on" if to == "paused" else _LIST_FIX
                raise TaskError(f"task {task_id} is already {to}", fix=fix)
            if task.state not in allowed:
                raise TaskError(f"task {task_id} {_is(task.state)}; {refusal}", fix=_LIST_FIX)
            conn.execute(
                f"UPDATE tasks SET state = ?, updated_at = ?{assignments} WHERE id = ?",
                (to, self.clock(), *sets.values(), task_id),
            )
            moved = self._row(conn, task_id)
        log.info("task %d: %s -> %s", task_id, task.state, to)
        return moved

    def pause(self, task_id: int) -> Task:
        """Pause a pending or running task; a running one stops after the step in flight, keeping its steps."""
        return self._move(task_id, "paused", ("pending", "running"), "only a pending or running task can be paused")

    def resume(self, task_id: int) -> Task:
        """Put a paused task back in the queue; it continues at its first step not recorded."""
        return self._move(task_id, "pending", ("paused",), "only a paused task can be resumed")

    def finish(self, task_id: int, result: str) -> Task:
        """Mark a running task done with its result."""
        return self._move(task_id, "done", ("running",), "only a running task can finish", result=result)

    def fail(self, task_id: int, error: str) -> Task:
        """Mark a running task failed with the reason."""
        return self._move(task_id, "error", ("running",), "only a running task can fail", error=error)

    def claim_next(self) -> Task | None:
        """Move the oldest pending task to running and return it; None when nothing is pending."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT id FROM tasks WHERE state = 'pending' ORDER BY id LIMIT 1").fetchone()
            if row is None:
                return None
            conn.execute("UPDATE tasks SET state = 'running', updated_at = ? WHERE id = ?", (self.clock(), row[0]))
            task = self._row(conn, row[0])
        log.info("task %d: pending -> running (step %d next)", task.id, task.steps_done + 1)
        return task

    def recover(self) -> builtins.list[int]:
        """At start: tasks left running by a crash go back to pending, steps kept; returns their ids.

        Call it only where the one runner starts (the daemon, or `picoagent tasks run` with no daemon):
        a task running in another live process would otherwise be run twice.
        """
        with self.db.transaction() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM tasks WHERE state = 'running' ORDER BY id")]
            conn.execute("UPDATE tasks SET state = 'pending', updated_at = ? WHERE state = 'running'", (self.clock(),))
        for task_id in ids:
            log.warning("task %d was running when picoagent stopped; it resumes at its next step", task_id)
        return ids

    def _requeue(self, task_id: int) -> None:
        """A runner stopped mid-step (cancelled): back to pending, like recover() for one task."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE tasks SET state = 'pending', updated_at = ? WHERE id = ? AND state = 'running'",
                (self.clock(), task_id),
            )

    def record_step(self, task_id: int, kind: str, content: str, *, result: str | None = None) -> Step:
        """Append a step and move the counter in one transaction; with ``result`` the task is done in it too.

        A running task takes steps. So does a paused one, for the step that was in flight when the pause
        came: refusing it would lose work already done (a tool already called). Pending, done and error
        tasks refuse: their runner, if any, is stale.
        """
        if not kind.strip():
            raise UsageError("a step needs a kind, e.g. thought, action, observation or result")
        now = self.clock()
        with self.db.transaction() as conn:
            task = self._row(conn, task_id)
            if task.state not in ("running", "paused"):
                raise TaskError(
                    f"task {task_id} {_is(task.state)}; steps are recorded only while it runs", fix=_LIST_FIX
                )
            n = task.steps_done + 1
            conn.execute(
                "INSERT INTO task_steps (task_id, n, at, kind, content) VALUES (?, ?, ?, ?, ?)",
                (task_id, n, now, kind, content),
            )
            conn.execute("UPDATE tasks SET steps_done = ?, updated_at = ? WHERE id = ?", (n, now, task_id))
            if result is not None:
                conn.execute("UPDATE tasks SET state = 'done', result = ? WHERE id = ?", (result, task_id))
        if result is not None:
            log.info("task %d: %s -> done after %d step(s)", task_id, task.state, n)
        return Step(task_id, n, now, kind, content)


class TaskRunner:
    """Works the queue one task at a time: claim, step, record, until done, failed, paused or out of steps."""

    def __init__(
        self,
        store: TaskStore,
        step: StepFunction,
        notify: NotifyFunction | None = None,
        *,
        max_steps: int = 8,
    ) -> None:
        if max_steps < 1:
            raise UsageError(f"max_steps must be at least 1, not {max_steps}")
        self.store = store
        self.step = step
        self.notify = notify
        self.max_steps = max_steps
        self._wake = asyncio.Event()

    async def _db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.store.db.call(fn, *args, **kwargs)

    def wake(self) -> None:
        """Look for pending tasks now rather than at the next poll (call it after adding one)."""
        self._wake.set()

    async def run_once(self) -> Task | None:
        """Claim the next pending task and work it until it stops; returns it as it ended (None: queue empty)."""
        task: Task | None = await self._db(self.store.claim_next)
        if task is None:
            return None
        try:
            return await self._work(task)
        except asyncio.CancelledError:
            # Stopped from outside (daemon shutdown, Ctrl-C): the step in flight is not recorded; run it again later.
            await asyncio.shield(self._db(self.store._requeue, task.id))
            log.warning("task %d stopped mid-step; it resumes at its first step not recorded", task.id)
            raise

    async def _work(self, task: Task) -> Task:
        steps: list[Step] = await self._db(self.store.logs, task.id)
        while True:
            if len(steps) >= self.max_steps:
                return await self._fail(task, f"gave up after {len(steps)} steps without reaching the goal")
            try:
                outcome = await self.step(task, list(steps))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = exc.message if isinstance(exc, PicoagentError) else f"{type(exc).__name__}: {exc}"
                log.warning("task %d: step %d failed: %s", task.id, len(steps) + 1, error)
                return await self._fail(task, f"step {len(steps) + 1} failed: {error}")
            result = (outcome.result or outcome.content) if outcome.done else None
            try:
                step = await self._db(self.store.record_step, task.id, outcome.kind, outcome.content, result=result)
            except TaskError as exc:
                # Resumed or changed by someone while the step ran; its outcome is dropped and the step redone.
                log.warning("task %d: step %d not recorded: %s", task.id, len(steps) + 1, exc.message)
                current: Task = await self._db(self.store.get, task.id)
                return current
            steps.append(step)
            task = await self._db(self.store.get, task.id)
            if result is not None:
                await self._tell(f"Task {task.id} done: {result}")
                return task
            if task.state != "running":
                log.info("task %d is %s after step %d; it stops here", task.id, task.state, step.n)
                return task

    async def _fail(self, task: Task, error: str) -> Task:
        try:
            failed: Task = await self._db(self.store.fail, task.id, error)
        except TaskError as exc:
            # Paused while the failing step ran: leave it paused; resuming retries the step.
            log.warning("task %d: %s (not marked failed: %s)", task.id, error, exc.message)
            current: Task = await self._db(self.store.get, task.id)
            return current
        await self._tell(f"Task {task.id} failed: {error}")
        return failed

    async def _tell(self, text: str) -> None:
        if self.notify is None:
            log.info("%s", text)
            return
        try:
            if inspect.iscoroutinefunction(self.notify):
                await self.notify(text, "task")
            else:
                # On the database thread: the Notifier writes the outbox, a blocking SQLite write.
                await self._db(self.notify, text, "task")
        except Exception:
            log.exception("could not notify: %s", text)

    async def run_forever(self, poll_s: float = 5.0) -> None:
        """Work the queue until cancelled; between tasks, wait ``poll_s`` or until :meth:`wake`."""
        while True:
            try:
                task = await self.run_once()
            except PicoagentError as exc:
                log.error("task runner: %s", exc.for_people())
                task = None
            except Exception:
                # A bug must not stop every later task; the task it hit stays running until recover().
                log.exception("task runner failed")
                task = None
            if task is not None:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), poll_s)
            self._wake.clear()


def task_prompt(task: Task, steps: list[Step]) -> str:
    """The agent's prompt for a task's next step: the goal, the steps so far, and how to say it is done."""
    lines = [f"You are working on a task, one step at a time. Goal: {task.goal}", ""]
    if steps:
        lines.append("Steps so far:")
        for step in steps:
            content = step.content if len(step.content) <= PROMPT_STEP_CHARS else step.content[:PROMPT_STEP_CHARS] + "…"
            lines.append(f"{step.n}. [{step.kind}] {content}")
    else:
        lines.append("No steps yet.")
    lines += [
        "",
        f"Do step {len(steps) + 1} now; use a tool if it helps. Do not repeat a step already done.",
        f"When the goal is reached, reply starting with {DONE_PREFIX} followed by the result for the owner.",
    ]
    return "\n".join(lines)


def _describe_action(action: Action) -> str:
    outcome = action.result if action.ok else f"ERROR: {action.error}"
    return f"{action.tool}({action.arguments}) -> {outcome}"


def make_agent_step(agent: Agent) -> StepFunction:
    """The default step function: one agent turn per step, in the chat ``task:task-ID``."""

    async def step(task: Task, steps: list[Step]) -> StepOutcome:
        chat_id = f"task-{task.id}"
        # The prompt carries the recorded steps; a stored conversation would also hold a step that was
        # never recorded (killed mid-step) and repeat every step log, so each step starts a fresh chat.
        await agent.db.call(agent.db.reset, "task", chat_id)
        record = await agent.turn(task_prompt(task, steps), channel="task", chat_id=chat_id, client=f"task:{task.id}")
        reply = record.text.strip()
        if reply[: len(DONE_PREFIX)].upper() == DONE_PREFIX:
            result = reply[len(DONE_PREFIX) :].strip() or "the goal is reached"
            return StepOutcome("result", result, done=True, result=result)
        if record.actions:
            done = "; ".join(_describe_action(a) for a in record.actions)
            return StepOutcome("action", f"{reply}\n[{done}]" if reply else f"[{done}]")
        return StepOutcome("thought", reply)

    return step
