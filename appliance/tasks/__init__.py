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
