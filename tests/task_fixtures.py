"""What the task suites share (tests/test_tasks.py, tests/test_task_runner.py): a task store on a clock that
moves a second per reading, a task brought to any state through the public transitions, the check that a
task's step counter agrees with its steps, and a notify function that keeps what it was told."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.memory.db import Database
from appliance.tasks import (
    Task,
    TaskStore,
)
from tests.fakes.clock import ManualClock

ROOT = Path(__file__).resolve().parent.parent


class FakeClock(ManualClock):
    """A clock that moves one second per reading."""

    def __init__(self) -> None:
        super().__init__(step=1.0)


@pytest.fixture
def store(db: Database) -> TaskStore:
    return TaskStore(db, clock=FakeClock())


def in_state(store: TaskStore, state: str) -> Task:
    """A fresh task brought to ``state`` through the public transitions."""
    task = store.add(f"a task that ends {state}")
    if state in ("running", "done", "error"):
        claimed = store.claim_next()
        assert claimed is not None and claimed.id == task.id
    if state == "paused":
        store.pause(task.id)
    elif state == "done":
        store.finish(task.id, "finished")
    elif state == "error":
        store.fail(task.id, "broken")
    task = store.get(task.id)
    assert task.state == state
    return task


def counter_agrees(db: Database, task_id: int) -> None:
    """The task's counter, its step count and its highest step number are one number; steps are 1..N."""
    steps_done = db.value("SELECT steps_done FROM tasks WHERE id = ?", (task_id,))
    numbers = [r[0] for r in db.rows("SELECT n FROM task_steps WHERE task_id = ? ORDER BY n", (task_id,))]
    assert numbers == list(range(1, steps_done + 1))


class Notes:
    """A notify function that keeps what it was told."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def __call__(self, text: str, kind: str) -> int:
        self.sent.append((text, kind))
        return len(self.sent)
