"""Subtasks: the ``spawn`` tool starts a child task and hands its result back to the parent's turn.

Only a task's turn can call it (the tool is ``task_only``: listed and callable inside
:func:`~appliance.tools.registry.task_scope` alone), and a child never gets more than its parent: the
tools it asks for must all be among the parent's (a request for any other is refused, naming it), and
its token budget is at most what the parent has left. The runner works one task at a time, and the
parent's step is waiting on this call, so the child is worked here, inline, by the same runner
(:meth:`~appliance.tasks.runner.TaskRunner.work_child`): its steps are recorded as its own, its tokens
are charged to the parent when it ends, and no second worker is needed. At most ``tasks.max_children``
subtasks run at once and they nest at most ``tasks.max_depth`` deep; cancelling a task cancels its
subtasks (:meth:`~appliance.tasks.store.TaskStore.cancel`), and the spawn call then returns that.

Taint follows the text both ways: a subtask spawned in a turn with outside text in it starts untrusted
(its goal, written by the model after that text, does not count as the owner's words: its parent's do),
and a subtask that read outside text makes the parent's turn untrusted when its result comes back.
"""

from __future__ import annotations

import asyncio
import logging

from appliance.errors import ToolError
from appliance.tasks.runner import TaskRunner
from appliance.tools.registry import ToolRegistry, current_turn, tool_from_function

log = logging.getLogger(__name__)

TOOL_NAME = "spawn"
SPAWN_TIMEOUT_S = 3600.0  # a whole subtask runs inside the call: minutes of local model turns on a Pi


def register(registry: ToolRegistry, runner: TaskRunner) -> None:
    """Add the spawn tool, working subtasks with ``runner`` (its store's ``tasks:`` settings bound them)."""
    store = runner.store
    settings = store.settings

    async def spawn(goal: str, tools: list[str], budget_tokens: int = 0, max_steps: int = 0) -> str:
        """Start a subtask with its own goal, tools and budget, and wait for its result.

        Examples: research this part on its own; ask a helper to look it up; split the work into a subtask

        Args:
            goal: what the subtask must find out or do, on its own
            tools: the names of the tools it may use, all among your own ([] for none)
            budget_tokens: most tokens it may use; 0: what is left of your budget (or the default)
            max_steps: most steps it may take; 0: the default
        """
        turn = current_turn()
        if turn is None or turn.task_id is None:
            raise ToolError("spawn works only inside a task's step")
        parent = await store.db.call(store.get, turn.task_id)
        depth = await store.db.call(store.depth, parent.id)
        if depth + 1 > settings.max_depth:
            raise ToolError(f"subtasks nest at most {settings.max_depth} deep (tasks.max_depth): do it yourself")
        if await store.db.call(store.running_children) >= settings.max_children:
            raise ToolError(
                f"{settings.max_children} subtasks run already (tasks.max_children): wait for one, or do it yourself"
            )
        mine = set(parent.tools) if parent.tools is not None else {t.name for t in registry.tools.values()}
        unknown = sorted(set(tools) - set(registry.tools))
        if unknown:
            raise ToolError(f"no tool named {', '.join(unknown)}; yours are {', '.join(sorted(mine)) or 'none'}")
        extra = sorted(set(tools) - mine)
        if extra:
            raise ToolError(
                f"task {parent.id} may not use {', '.join(extra)}, so its subtask may not either: a subtask gets "
                f"at most its parent's tools ({', '.join(sorted(mine)) or 'none'})"
            )
        budget = budget_tokens if budget_tokens > 0 else None
        if parent.budget_tokens is not None:
            left = parent.budget_tokens - parent.tokens_used
            if left <= 0:
                raise ToolError(f"task {parent.id} has no tokens left for a subtask")
            budget = min(budget or left, left)
        # Like task_create, spawn reads the turn's trust; a subtask, worked here with at most its parent's
        # tools and budget, can carry it on: it starts with the outside text in this turn, and a goal the
        # model wrote after reading it is not the owner's (the parent's words count instead).
        trust = turn.trust
        child = await store.db.call(
            store.add,
            goal,
            budget_tokens=budget,
            max_steps=max_steps if max_steps > 0 else None,
            route=parent.route,
            parent_id=parent.id,
            tools=sorted(set(tools)),
            outside=trust.sources,
            said=parent.owner_words if trust.untrusted else None,
        )
        log.info("task %d spawned subtask %d: %s", parent.id, child.id, child.goal)
        try:
            ended = await runner.work_child(child.id)
        except asyncio.CancelledError:
            # The parent's step was stopped (timeout, shutdown): nobody would ever claim this child again.
            await asyncio.shield(store.db.call(store.cancel, child.id, "its parent's step was stopped"))
            raise
        await store.db.call(store.charge, parent.id, ended.tokens_used)
        for source in ended.outside:  # its result (or its error) may pass on what it read
            trust.saw(source)
        used = f"{ended.tokens_used:,} tokens"
        if ended.state == "done":
            kind = "stopped with a partial result" if ended.partial else "done"
            took = f"{ended.steps_done} step{'s' * (ended.steps_done != 1)}"
            return f"subtask {ended.id} {kind} ({took}, {used}): {ended.result}"
        if ended.state == "cancelled":
            raise ToolError(f"subtask {ended.id} was cancelled ({used})")
        if ended.state == "error":
            raise ToolError(f"subtask {ended.id} failed ({used}): {ended.error}")
        raise ToolError(f"subtask {ended.id} is {ended.state} ({used}); its result is not ready")

    registry.add(tool_from_function(spawn, name=TOOL_NAME, timeout_s=SPAWN_TIMEOUT_S, task_only=True))
