"""The tasks and task_steps tables: a task's state machine, its budgets, and atomic steps.

A task moves pending → running → done | error; a person may pause a pending or running task and
resume it (back to pending), or cancel it (and its subtasks) unless it ended. Each step is one SQLite
transaction that writes the step row *and* moves the task's ``steps_done`` counter and ``tokens_used``,
so after a crash (power cut, kill -9) the log, the counter and the tokens agree: the task resumes at the
first step not recorded, never repeats a recorded step and never loses one. Only the step that was in
flight when the process died runs again.

A task that reaches its step or token budget before its goal ends ``done`` with ``partial`` set and a
result that says so and why: it did not fail, it stopped where it was told to, with what it has.

A task that read outside text (a web page, shell output: see :mod:`appliance.tools.trust`) keeps that in
its ``outside`` column, written with the step that read it: every later step quotes that step, so every
later turn starts untrusted, across a restart too, and so do the subtasks it spawns.
"""

from __future__ import annotations

import builtins
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from appliance.config.tasks import TasksConfig
from appliance.errors import NotFound, UsageError
from appliance.memory.db import Database
from appliance.tasks.states import ENDED, ROUTES, STATES, TaskState

log = logging.getLogger(__name__)

BOOKKEEPING = ("plan", "notes")  # steps that are not work: they do not count against max_steps

LINE_CHARS = 200  # a result as `tasks list` shows it; `tasks logs ID` and --json show all of it
_TASK_COLUMNS = (
    "id, goal, state, created_at, updated_at, steps_done, result, error,"
    " budget_tokens, max_steps, tokens_used, route, parent_id, plan, tools, partial, outside, said"
)
_LIST_FIX = "`picoagent tasks list` shows the tasks and their states"


class TaskError(UsageError):
    """A task cannot do that in its current state (pause a done task, resume a running one)."""


class UnknownTaskError(NotFound, TaskError):
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
    budget_tokens: int | None = None  # None: no token budget
    max_steps: int = 8  # work steps (the plan and the notes do not count)
    tokens_used: int = 0  # prompt + completion of every turn, its subtasks' included
    route: str = "auto"  # auto | local | cloud (every turn forced there)
    parent_id: int | None = None  # the task that spawned it
    plan: str | None = None  # the numbered plan of its first step
    tools: list[str] | None = None  # the tools its turns may use; None: every tool
    partial: bool = False  # done at its step or token budget, before the goal
    outside: list[str] = field(default_factory=list)  # outside text its steps read ("a web page"): untrusted for good
    said: str | None = None  # the owner's words its turns act on; None: its goal (see :attr:`owner_words`)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Task:
        """A task from a row of ``_TASK_COLUMNS``."""
        values = dict(zip((f.name for f in fields(cls)), row, strict=True))
        values["tools"] = json.loads(values["tools"]) if values["tools"] is not None else None
        values["partial"] = bool(values["partial"])
        values["outside"] = json.loads(values["outside"]) if values["outside"] else []
        return cls(**values)

    @property
    def owner_words(self) -> str:
        """What counts as said in its turns (the hosts it names stay fetchable): its goal, unless it is a
        subtask whose goal the model wrote after reading outside text; then its parent's words."""
        return self.goal if self.said is None else self.said

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def usage(self) -> str:
        """Tokens used, against the budget when there is one: "1,234/5,000 tokens"."""
        if self.budget_tokens:
            return f"{self.tokens_used:,}/{self.budget_tokens:,} tokens"
        return f"{self.tokens_used:,} tokens"

    def describe(self, *, whole: bool = False) -> str:
        """One line for people (``whole``: the result or error not cut at :data:`LINE_CHARS`: `tasks logs`)."""
        said = " ".join((self.result or self.error or "").split())  # one line: a result may hold several
        cut = len(said) > LINE_CHARS and not whole
        outcome = f": {said[:LINE_CHARS]}… (all of it: tasks logs {self.id})" if cut else f": {said}" if said else ""
        state = "partial" if self.partial else self.state
        parent = f"  (subtask of {self.parent_id})" if self.parent_id is not None else ""
        return f"{self.id:>4}  {state:<9}  {self.steps_done} step(s)  {self.usage()}  {self.goal}{parent}{outcome}"


@dataclass(frozen=True)
class Step:
    """One recorded step of a task."""

    task_id: int
    n: int
    at: float
    kind: str
    content: str
    tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def describe(self) -> str:
        """One line for people."""
        return f"{self.n:>3}. [{self.kind}] {self.content}"


@dataclass(frozen=True)
class StepOutcome:
    """What one step produced; ``done`` ends the task with ``result`` (default: the content).

    ``tokens``: what the step's model turns used (counted in the same transaction as the step);
    ``plan``: the task's plan, stored with it (a plan step); ``outside``: the outside text in the step's
    context (what it read, or the task had read before), kept with the task.
    """

    kind: str
    content: str
    done: bool = False
    result: str | None = None
    tokens: int = 0
    plan: str | None = None
    outside: tuple[str, ...] = ()


def _sources(outside: Sequence[str]) -> str | None:
    """The ``outside`` column: the sources in the order they came, once each (NULL: none)."""
    kept = list(dict.fromkeys(s for s in outside if s))
    return json.dumps(kept) if kept else None


def _is(state: str) -> str:
    """A state as people say it: "is running", "has failed"."""
    return "has failed" if state == "error" else f"is {state}"


class TaskStore:
    """The tasks and task_steps tables; every change is one transaction, safe across processes.

    ``settings``: the defaults a new task takes when it names no step or token budget.
    """

    def __init__(
        self, db: Database, clock: Callable[[], float] = time.time, *, settings: TasksConfig | None = None
    ) -> None:
        self.db = db
        self.clock = clock
        self.settings = settings or TasksConfig()

    def use_settings(self, settings: TasksConfig) -> None:
        """The defaults new tasks take from now (a reloaded config's ``tasks``)."""
        self.settings = settings

    @staticmethod
    def _row(conn: sqlite3.Connection, task_id: int) -> Task:
        row = conn.execute(f"SELECT {_TASK_COLUMNS} FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None:
            raise UnknownTaskError(f"no task {task_id}", fix=_LIST_FIX)
        return Task.from_row(row)

    def add(
        self,
        goal: str,
        *,
        budget_tokens: int | None = None,
        max_steps: int | None = None,
        route: str = "auto",
        parent_id: int | None = None,
        tools: Sequence[str] | None = None,
        outside: Sequence[str] = (),
        said: str | None = None,
    ) -> Task:
        """Store a new pending task; budgets left out take the ``tasks:`` config's defaults.

        ``outside``: outside text already in the turn that made it (a subtask's parent's): it starts untrusted.
        ``said``: the owner's words its turns act on instead of its goal (a goal the model wrote after such text).
        """
        goal = goal.strip()
        if not goal:
            raise UsageError("a task needs a goal, e.g. 'water the plants when the soil is dry, then tell me'")
        if budget_tokens is None:
            budget_tokens = self.settings.budget_tokens or None
        elif budget_tokens < 1:
            raise UsageError(f"a token budget must be at least 1, not {budget_tokens}", fix="leave it out for none")
        steps = self.settings.max_steps if max_steps is None else max_steps
        if steps < 1:
            raise UsageError(f"a task's max_steps must be at least 1, not {steps}")
        ceiling = self.settings.max_steps_limit
        if steps > ceiling:
            raise UsageError(
                f"a task may take at most {ceiling} steps (tasks.max_steps_limit), not {steps}",
                fix=f"ask for {ceiling} or fewer, or raise tasks.max_steps_limit in the config",
            )
        if route not in ROUTES:
            raise UsageError(f"no task route {route!r}", fix=f"use one of {', '.join(ROUTES)}")
        names = json.dumps(list(dict.fromkeys(tools))) if tools is not None else None
        now = self.clock()
        with self.db.transaction() as conn:
            if parent_id is not None:
                self._row(conn, parent_id)
            cur = conn.execute(
                "INSERT INTO tasks (goal, state, created_at, updated_at, budget_tokens, max_steps, route,"
                " parent_id, tools, outside, said) VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (goal, now, now, budget_tokens, steps, route, parent_id, names, _sources(outside), said),
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
        return [Task.from_row(row) for row in rows]

    def counts(self) -> dict[str, int]:
        """How many tasks are in each state (every state named, 0 included)."""
        found = dict(self.db.rows("SELECT state, count(*) FROM tasks GROUP BY state"))
        return {state: int(found.get(state, 0)) for state in STATES}

    def children(self, task_id: int) -> builtins.list[Task]:
        """The subtasks a task spawned, oldest first."""
        rows = self.db.rows(f"SELECT {_TASK_COLUMNS} FROM tasks WHERE parent_id = ? ORDER BY id", (task_id,))
        return [Task.from_row(row) for row in rows]

    def running_children(self) -> int:
        """How many subtasks run now (any parent)."""
        return int(self.db.value("SELECT count(*) FROM tasks WHERE parent_id IS NOT NULL AND state = 'running'"))

    def depth(self, task_id: int) -> int:
        """How many ancestors a task has: 0 for a task a person or a job started."""
        found = self.db.value(
            "WITH RECURSIVE up (id, parent_id, depth) AS ("
            " SELECT id, parent_id, 0 FROM tasks WHERE id = ?"
            " UNION ALL SELECT t.id, t.parent_id, up.depth + 1 FROM tasks t JOIN up ON t.id = up.parent_id)"
            " SELECT max(depth) FROM up",
            (task_id,),
        )
        if found is None:
            raise UnknownTaskError(f"no task {task_id}", fix=_LIST_FIX)
        return int(found)

    def logs(self, task_id: int, after: int = 0) -> builtins.list[Step]:
        """A task's steps in order, those numbered past ``after`` (UnknownTaskError when there is no such task)."""
        with self.db.reading() as conn:
            self._row(conn, task_id)
            rows = conn.execute(
                "SELECT task_id, n, at, kind, content, tokens FROM task_steps WHERE task_id = ? AND n > ? ORDER BY n",
                (task_id, after),
            ).fetchall()
        return [Step(*row) for row in rows]

    def _move(self, task_id: int, to: TaskState, allowed: tuple[str, ...], refusal: str, **sets: Any) -> Task:
        """Move a task to ``to`` if its state is in ``allowed``, else refuse with ``refusal``."""
        assignments = "".join(f", {column} = ?" for column in sets)
        with self.db.transaction() as conn:
            task = self._row(conn, task_id)
            if task.state == to and to in ("paused", "pending", "cancelled"):
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

    def finish(self, task_id: int, result: str, *, partial: bool = False) -> Task:
        """Mark a running task done with its result; ``partial``: it stopped at a budget, before the goal."""
        return self._move(
            task_id, "done", ("running",), "only a running task can finish", result=result, partial=int(partial)
        )

    def fail(self, task_id: int, error: str) -> Task:
        """Mark a running task failed with the reason."""
        return self._move(task_id, "error", ("running",), "only a running task can fail", error=error)

    def cancel(self, task_id: int, reason: str | None = None) -> Task:
        """Cancel a pending, running or paused task and every subtask of it not ended, in one transaction.

        A running task stops after the step in flight (that step is still recorded: its tokens were spent).
        """
        with self.db.transaction() as conn:
            task = self._row(conn, task_id)
            if task.state == "cancelled":
                raise TaskError(f"task {task_id} is already cancelled", fix=_LIST_FIX)
            if task.state in ENDED:
                raise TaskError(
                    f"task {task_id} {_is(task.state)}; only a pending, running or paused task can be cancelled",
                    fix=_LIST_FIX,
                )
            ids = [
                r[0]
                for r in conn.execute(
                    "WITH RECURSIVE down (id) AS (SELECT ?"
                    " UNION ALL SELECT t.id FROM tasks t JOIN down ON t.parent_id = down.id)"
                    " SELECT id FROM down",
                    (task_id,),
                )
            ]
            marks = ",".join("?" * len(ids))
            conn.execute(
                f"UPDATE tasks SET state = 'cancelled', updated_at = ?, error = coalesce(?, error)"
                f" WHERE id IN ({marks}) AND state IN ('pending', 'running', 'paused')",
                (self.clock(), reason, *ids),
            )
            cancelled = self._row(conn, task_id)
        log.info("task %d: %s -> cancelled (with %d subtask(s))", task_id, task.state, len(ids) - 1)
        return cancelled

    def claim(self, task_id: int) -> Task:
        """Move one pending task to running (to work it now, wherever the caller is)."""
        return self._move(task_id, "running", ("pending",), "only a pending task can be run")

    def claim_next(self) -> Task | None:
        """Move the oldest pending task to running and return it; None when nothing is pending.

        Subtasks are not claimed here: the spawn tool works each one inside its parent's step.
        """
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT id FROM tasks WHERE state = 'pending' AND parent_id IS NULL ORDER BY id LIMIT 1"
            ).fetchone()
            if row is None:
                return None
            conn.execute("UPDATE tasks SET state = 'running', updated_at = ? WHERE id = ?", (self.clock(), row[0]))
            task = self._row(conn, row[0])
        log.info("task %d: pending -> running (step %d next)", task.id, task.steps_done + 1)
        return task

    def recover(self) -> builtins.list[int]:
        """At start: tasks left running by a crash go back to pending, steps kept; returns their ids.

        A subtask left unfinished is cancelled instead: its parent's step runs again and spawns it anew.
        Call it only where the one runner starts (the daemon, or `picoagent tasks run` with no daemon):
        a task running in another live process would otherwise be run twice.
        """
        with self.db.transaction() as conn:
            ids = [
                r[0]
                for r in conn.execute("SELECT id FROM tasks WHERE state = 'running' AND parent_id IS NULL ORDER BY id")
            ]
            now = self.clock()
            conn.execute(
                "UPDATE tasks SET state = 'cancelled', updated_at = ?,"
                " error = 'stopped by a restart; its parent spawns it again' WHERE parent_id IS NOT NULL"
                " AND state IN ('running', 'pending')",
                (now,),
            )
            conn.execute("UPDATE tasks SET state = 'pending', updated_at = ? WHERE state = 'running'", (now,))
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

    def charge(self, task_id: int, tokens: int) -> Task:
        """Add tokens used on a task's behalf (by a subtask) to its count."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE tasks SET tokens_used = tokens_used + ? WHERE id = ?", (max(0, tokens), task_id))
            return self._row(conn, task_id)

    def warn_once(self, task_id: int) -> bool:
        """Mark the task as told it nears its budget; True only the first time (across restarts too)."""
        with self.db.transaction() as conn:
            cur = conn.execute("UPDATE tasks SET budget_warned = 1 WHERE id = ? AND budget_warned = 0", (task_id,))
            return cur.rowcount == 1

    def record_step(
        self,
        task_id: int,
        kind: str,
        content: str,
        *,
        result: str | None = None,
        tokens: int = 0,
        plan: str | None = None,
        outside: Sequence[str] = (),
    ) -> Step:
        """Append a step, move the counter and count its tokens in one transaction; with ``result`` the
        task is done in it too, with ``plan`` the task's plan is stored, with ``outside`` the outside text
        the step read is kept with the task (in the same transaction as the step that quotes it).

        A running task takes steps. So does a paused or cancelled one, for the step that was in flight when
        the pause or cancel came: refusing it would lose work already done (a tool already called) and the
        tokens spent; a cancelled task stays cancelled. Pending, done and error tasks refuse: their runner,
        if any, is stale.
        """
        if not kind.strip():
            raise UsageError("a step needs a kind, e.g. thought, action, observation or result")
        now = self.clock()
        with self.db.transaction() as conn:
            task = self._row(conn, task_id)
            if task.state not in ("running", "paused", "cancelled"):
                raise TaskError(
                    f"task {task_id} {_is(task.state)}; steps are recorded only while it runs", fix=_LIST_FIX
                )
            n = task.steps_done + 1
            conn.execute(
                "INSERT INTO task_steps (task_id, n, at, kind, content, tokens) VALUES (?, ?, ?, ?, ?, ?)",
                (task_id, n, now, kind, content, tokens),
            )
            conn.execute(
                "UPDATE tasks SET steps_done = ?, updated_at = ?, tokens_used = tokens_used + ?,"
                " plan = coalesce(?, plan), outside = ? WHERE id = ?",
                (n, now, tokens, plan, _sources([*task.outside, *outside]), task_id),
            )
            if result is not None and task.state != "cancelled":
                conn.execute("UPDATE tasks SET state = 'done', result = ? WHERE id = ?", (result, task_id))
        if result is not None and task.state != "cancelled":
            log.info("task %d: %s -> done after %d step%s", task_id, task.state, n, "s" * (n != 1))
        return Step(task_id, n, now, kind, content, tokens)
