"""The task runner: claims a task and works it step by step until it ends, pauses or is cancelled.

One task at a time: the step function (by default :class:`appliance.tasks.deep_work.DeepWork`) is
called with the task and its recorded steps, and what it returns is recorded before the next one
starts. The runner keeps the budgets: a task's work steps against its ``max_steps``, its tokens against
its ``budget_tokens`` (the owner is told once at ``tasks.warn_share`` of it), and at either limit the
task stops cleanly, ``done`` with ``partial`` set and a result made of what it has. A turn is never cut
in the middle: the step that crosses the budget finishes, is recorded, and is the last.

A subtask (the spawn tool) is worked by the same runner inside its parent's step (:meth:`work_child`),
so the one-task-at-a-time loop never waits on itself. A cancel lands between steps: the step in flight
finishes and is recorded, then the task stops, cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, TypeVar

from appliance.errors import PicoagentError, UsageError
from appliance.tasks.store import BOOKKEEPING, ENDED, Step, StepOutcome, Task, TaskError, TaskStore

log = logging.getLogger(__name__)

T = TypeVar("T")

PARTIAL_CHARS = 600  # each piece of a partial result (the notes, the last step) is cut here

StepFunction = Callable[[Task, list[Step]], Awaitable[StepOutcome]]
NotifyFunction = Callable[[str, str], object]
EndHook = Callable[[Task, list[Step]], Awaitable[None]]


def work_steps(steps: list[Step]) -> int:
    """How many of the steps are work (the plan and the notes are not)."""
    return sum(1 for s in steps if s.kind not in BOOKKEEPING)


def _cut(text: str) -> str:
    return text if len(text) <= PARTIAL_CHARS else text[:PARTIAL_CHARS] + "…"


def partial_result(steps: list[Step], why: str) -> str:
    """What a task stopped at a budget has: it says it is partial and why, then its notes and last step."""
    text = f"Partial result: stopped because {why}, before the goal was reached."
    notes = next((s for s in reversed(steps) if s.kind == "notes"), None)
    last = next((s for s in reversed(steps) if s.kind not in BOOKKEEPING), None)
    if notes is not None:
        text += f"\nNotes so far: {_cut(notes.content)}"
    if last is not None and (notes is None or last.n > notes.n):
        text += f"\nLast step ({last.n}): {_cut(last.content)}"
    if notes is None and last is None:
        text += "\nNo step was done."
    return text


@dataclass(eq=False)
class TaskRunner:
    """Works the queue one task at a time: claim, step, record, until done, failed, paused, cancelled or
    out of budget.

    ``max_steps``: a cap over every task's own ``max_steps`` (None: each task's, at most
    ``tasks.max_steps_limit``). ``on_end``: awaited once
    when a task it worked ends (done, error, cancelled); its errors are logged, never raised.
    """

    store: TaskStore
    step: StepFunction
    notify: NotifyFunction | None = None
    _: KW_ONLY
    max_steps: int | None = None
    on_end: EndHook | None = None

    def __post_init__(self) -> None:
        if self.max_steps is not None and self.max_steps < 1:
            raise UsageError(f"max_steps must be at least 1, not {self.max_steps}")
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
        return await self._run(task)

    async def run_task(self, task_id: int) -> Task:
        """Claim one pending task (a subtask too) and work it until it stops; returns it as it ended."""
        task: Task = await self._db(self.store.claim, task_id)
        return await self._run(task)

    work_child = run_task  # the spawn tool works its subtask inline, inside the parent's step

    async def _run(self, task: Task) -> Task:
        try:
            ended, steps = await self._work(task)
        except asyncio.CancelledError:
            # Stopped from outside (daemon shutdown, Ctrl-C): the step in flight is not recorded; run it again later.
            await asyncio.shield(self._db(self.store._requeue, task.id))
            log.warning("task %d stopped mid-step; it resumes at its first step not recorded", task.id)
            raise
        if ended.state in ENDED and self.on_end is not None:
            try:
                await self.on_end(ended, steps)
            except Exception:
                log.exception("task %d: the on_end hook failed", ended.id)
        return ended

    def _limit(self, task: Task) -> int:
        # tasks.max_steps_limit holds for a task stored before it was lowered (or before it existed) too
        caps = (task.max_steps, self.store.settings.max_steps_limit, self.max_steps or task.max_steps)
        return min(caps)

    async def _work(self, task: Task) -> tuple[Task, list[Step]]:
        steps: list[Step] = await self._db(self.store.logs, task.id)
        while True:
            if task.budget_tokens is not None and task.tokens_used >= task.budget_tokens:
                why = f"it used its {task.budget_tokens:,}-token budget ({task.tokens_used:,} tokens)"
                return await self._stop(task, steps, why), steps
            limit = self._limit(task)
            if work_steps(steps) >= limit:
                why = f"it took its {limit} steps" if limit != 1 else "it took its one step"
                return await self._stop(task, steps, why), steps
            try:
                outcome = await self.step(task, list(steps))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = exc.message if isinstance(exc, PicoagentError) else f"{type(exc).__name__}: {exc}"
                if isinstance(exc, PicoagentError) and exc.fix:  # what would let it, as `tasks add` says (walk 8)
                    error += f" (fix: {exc.fix})"
                log.warning("task %d: step %d failed: %s", task.id, len(steps) + 1, error)
                return await self._fail(task, f"step {len(steps) + 1} failed: {error}"), steps
            result = (outcome.result or outcome.content) if outcome.done else None
            try:
                step = await self._db(
                    self.store.record_step,
                    task.id,
                    outcome.kind,
                    outcome.content,
                    result=result,
                    tokens=outcome.tokens,
                    plan=outcome.plan,
                    outside=outcome.outside,
                )
            except TaskError as exc:
                # Resumed or changed by someone while the step ran; its outcome is dropped and the step redone.
                log.warning("task %d: step %d not recorded: %s", task.id, len(steps) + 1, exc.message)
                current: Task = await self._db(self.store.get, task.id)
                return current, steps
            steps.append(step)
            task = await self._db(self.store.get, task.id)
            if result is not None and task.state == "done":
                await self._tell(task, f"Task {task.id} done: {result}")
                return task, steps
            if task.state != "running":
                log.info("task %d is %s after step %d; it stops here", task.id, task.state, step.n)
                return task, steps
            await self._warn(task)

    async def _warn(self, task: Task) -> None:
        """Tell the owner once when the task has used ``warn_share`` of its token budget (not yet all of it)."""
        budget = task.budget_tokens
        share = self.store.settings.warn_share
        if budget is None or not budget * share <= task.tokens_used < budget:
            return
        if await self._db(self.store.warn_once, task.id):
            await self._tell(
                task,
                f"Task {task.id} has used {round(share * 100)} % of its {budget:,}-token budget"
                f" ({task.tokens_used:,} tokens): it stops with what it has at 100 %",
            )

    async def _stop(self, task: Task, steps: list[Step], why: str) -> Task:
        """End the task at a budget: done, partial, with what it has."""
        result = partial_result(steps, why)
        try:
            stopped: Task = await self._db(self.store.finish, task.id, result, partial=True)
        except TaskError as exc:
            log.warning("task %d: %s (not stopped: %s)", task.id, why, exc.message)
            current: Task = await self._db(self.store.get, task.id)
            return current
        log.info("task %d stopped with a partial result: %s", task.id, why)
        await self._tell(task, f"Task {task.id} stopped with a partial result ({why}): {result}")
        return stopped

    async def _fail(self, task: Task, error: str) -> Task:
        try:
            failed: Task = await self._db(self.store.fail, task.id, error)
        except TaskError as exc:
            # Paused or cancelled while the failing step ran: leave it so; resuming retries the step.
            log.warning("task %d: %s (not marked failed: %s)", task.id, error, exc.message)
            current: Task = await self._db(self.store.get, task.id)
            return current
        await self._tell(task, f"Task {task.id} failed: {error}")
        return failed

    async def _tell(self, task: Task, text: str) -> None:
        if self.notify is None or task.parent_id is not None:
            # A subtask's news goes to its parent (the spawn tool's result), not to the owner.
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
