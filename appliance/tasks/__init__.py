"""Persistent tasks: a goal worked on in steps, each step saved before the next one starts.

- :mod:`~appliance.tasks.store`: the tables, the state machine (pending → running → done | error, paused,
  cancelled), atomic steps that count their tokens: kill -9 safe.
- :mod:`~appliance.tasks.runner`: works one task at a time within its step and token budgets, warns the
  owner near the budget, stops with a partial result at it, calls ``on_end`` when a task ends.
- :mod:`~appliance.tasks.deep_work`: the default step function: a plan first, one agent turn per step,
  notes when the steps grow long, the task's route and tools.
- :mod:`~appliance.tasks.spawn`: the spawn tool: subtasks with a subset of their parent's tools.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from appliance.tasks.deep_work import (
        DONE_PREFIX,
        PROMPT_STEP_CHARS,
        DeepWork,
        check_route,
        make_agent_step,
        task_prompt,
    )
    from appliance.tasks.runner import EndHook, NotifyFunction, StepFunction, TaskRunner, partial_result
    from appliance.tasks.store import (
        ENDED,
        ROUTES,
        STATES,
        Step,
        StepOutcome,
        Task,
        TaskError,
        TaskState,
        TaskStore,
        UnknownTaskError,
    )

# Imported on first use: `picoagent --help` and the CLI's parsers need only store.py's constants, and the
# runner and deep work bring asyncio, the agent's prompt and the config (~45 ms at every command's start).
_HOME = {
    "DONE_PREFIX": "deep_work",
    "ENDED": "store",
    "PROMPT_STEP_CHARS": "deep_work",
    "ROUTES": "store",
    "STATES": "store",
    "DeepWork": "deep_work",
    "EndHook": "runner",
    "NotifyFunction": "runner",
    "Step": "store",
    "StepFunction": "runner",
    "StepOutcome": "store",
    "Task": "store",
    "TaskError": "store",
    "TaskRunner": "runner",
    "TaskState": "store",
    "TaskStore": "store",
    "UnknownTaskError": "store",
    "check_route": "deep_work",
    "make_agent_step": "deep_work",
    "partial_result": "runner",
    "task_prompt": "deep_work",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'appliance.tasks' has no attribute {name!r}")
    return getattr(importlib.import_module(f"appliance.tasks.{_HOME[name]}"), name)


__all__ = [
    "DONE_PREFIX",
    "ENDED",
    "PROMPT_STEP_CHARS",
    "ROUTES",
    "STATES",
    "DeepWork",
    "EndHook",
    "NotifyFunction",
    "Step",
    "StepFunction",
    "StepOutcome",
    "Task",
    "TaskError",
    "TaskRunner",
    "TaskState",
    "TaskStore",
    "UnknownTaskError",
    "check_route",
    "make_agent_step",
    "partial_result",
    "task_prompt",
]
