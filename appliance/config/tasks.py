"""The ``tasks:`` section: the defaults and limits of persistent tasks (deep work and subtasks)."""

from __future__ import annotations

from dataclasses import dataclass

from appliance.config.fields import COUNT, doc

SHARE = "a share from 0.05 to 1"


@dataclass
class TasksConfig:
    """Persistent tasks: step and token budgets, note compaction, subtasks."""

    max_steps: int = doc(
        "most work steps a task takes when it names none (the plan and the notes do not count); then it stops "
        "with a partial result",
        8,
        low=1,
        high=10_000,
        expected="a whole number from 1 to 10000",
    )
    max_steps_limit: int = doc(
        "the most work steps any task may ask for (task_create, spawn, --max-steps, the API); a bigger "
        "number is refused, and a task stored with one stops here",
        100,
        low=1,
        high=10_000,
        expected="a whole number from 1 to 10000",
    )
    budget_tokens: int = doc(
        "most tokens (prompt + reply, every turn of the task) a task may use when it names none; 0: no budget "
        "(then only its steps and the cloud's daily and monthly limits bound what it spends)",
        0,
        low=0,
        high=1_000_000_000,
        expected="0 (no budget) or more tokens",
    )
    warn_share: float = doc(
        "tell the owner once when a task has used this share of its token budget", 0.8, low=0.05, high=1, expected=SHARE
    )
    compact_share: float = doc(
        "when a task's steps, as quoted in its prompt, pass this share of llm.context_tokens, a model turn "
        "summarises them into notes that later steps read instead",
        0.5,
        low=0.05,
        high=1,
        expected=SHARE,
    )
    max_children: int = doc(
        "most subtasks (made with the spawn tool) running at once", 2, low=1, high=100, expected=COUNT
    )
    max_depth: int = doc(
        "how deep subtasks may nest: 1 lets a task spawn subtasks that cannot spawn their own",
        2,
        low=1,
        high=10,
        expected="a whole number from 1 to 10",
    )
