"""The task runner: a task worked step by step to its end, its failures, max_steps, pause and resume, cancel,
the queue."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from appliance.errors import UsageError
from appliance.tasks import (
    Step,
    StepOutcome,
    Task,
    TaskRunner,
    TaskStore,
)
from tests import task_fixtures
from tests.task_fixtures import Notes, in_state

store = task_fixtures.store  # the shared fixture, taken by this module's tests


# --- the runner ------------------------------------------------------------------------------------


class ScriptedSteps:
    """A step function that plays a script: each entry is an outcome to return or an exception to raise.

    It records every call (the task and the steps it was shown) and can run a hook during a step,
    which is how a test pauses a task while its step is in flight.
    """

    def __init__(self, *script: StepOutcome | Exception) -> None:
        self.script = list(script)
        self.calls: list[tuple[int, list[int]]] = []
        self.during: dict[int, Any] = {}  # call number (1-based) -> a hook run inside that call

    async def __call__(self, task: Task, steps: list[Step]) -> StepOutcome:
        self.calls.append((task.id, [s.n for s in steps]))
        hook = self.during.get(len(self.calls))
        if hook is not None:
            hook(task)
        entry = self.script.pop(0) if self.script else StepOutcome("thought", "still thinking")
        if isinstance(entry, Exception):
            raise entry
        return entry


def three_steps_then_done() -> ScriptedSteps:
    return ScriptedSteps(
        StepOutcome("thought", "check the soil first"),
        StepOutcome("action", "read soil: 12 % (dry)"),
        StepOutcome("observation", "pump ran 5 s; soil 35 %"),
        StepOutcome("result", "watered", done=True, result="the plants are watered (soil 35 %)"),
    )


def test_runner_works_a_task_to_done_and_tells_the_owner(store: TaskStore) -> None:
    task = store.add("water the plants when the soil is dry, then tell me")
    steps, notes = three_steps_then_done(), Notes()
    ended = asyncio.run(TaskRunner(store, steps, notes).run_once())
    assert ended is not None
    assert (ended.id, ended.state, ended.steps_done) == (task.id, "done", 4)
    assert ended.result == "the plants are watered (soil 35 %)"
    assert [s.kind for s in store.logs(task.id)] == ["thought", "action", "observation", "result"]
    assert steps.calls == [(task.id, []), (task.id, [1]), (task.id, [1, 2]), (task.id, [1, 2, 3])]
    assert notes.sent == [(f"Task {task.id} done: the plants are watered (soil 35 %)", "task")]
    assert asyncio.run(TaskRunner(store, steps, notes).run_once()) is None  # the queue is empty


def test_a_done_step_without_a_result_finishes_with_its_content(store: TaskStore) -> None:
    task = store.add("say hello")
    ended = asyncio.run(TaskRunner(store, ScriptedSteps(StepOutcome("result", "hello", done=True))).run_once())
    assert ended is not None and ended.id == task.id and ended.result == "hello"


def test_an_exception_in_a_step_fails_the_task_and_keeps_the_steps_before(store: TaskStore) -> None:
    task = store.add("water the plants")
    steps = ScriptedSteps(StepOutcome("thought", "read the soil"), RuntimeError("the soil sensor is unplugged"))
    notes = Notes()
    ended = asyncio.run(TaskRunner(store, steps, notes).run_once())
    assert ended is not None
    assert ended.state == "error"
    assert ended.error == "step 2 failed: RuntimeError: the soil sensor is unplugged"
    assert [s.content for s in store.logs(task.id)] == ["read the soil"]
    assert notes.sent == [(f"Task {task.id} failed: step 2 failed: RuntimeError: the soil sensor is unplugged", "task")]


def test_a_picoagent_error_in_a_step_is_reported_by_its_message(store: TaskStore) -> None:
    """Its message and its fix, as the command line says an error (walk 8: a queued task lost the fix)."""
    store.add("water the plants")
    steps = ScriptedSteps(UsageError("no device named pump", fix="declare it"))
    ended = asyncio.run(TaskRunner(store, steps).run_once())
    assert ended is not None and ended.error == "step 1 failed: no device named pump (fix: declare it)"


def test_the_runner_stops_at_max_steps_with_a_partial_result(store: TaskStore) -> None:
    task = store.add("find the meaning of life", max_steps=3)
    notes = Notes()
    ended = asyncio.run(TaskRunner(store, ScriptedSteps(), notes).run_once())
    assert ended is not None
    assert (ended.state, ended.partial, ended.steps_done, ended.error) == ("done", True, 3, None)
    assert ended.result == (
        "Partial result: stopped because it took its 3 steps, before the goal was reached.\n"
        "Last step (3): still thinking"
    )
    assert notes.sent == [
        (f"Task {task.id} stopped with a partial result (it took its 3 steps): {ended.result}", "task")
    ]
    assert "partial" in ended.describe()
    # The runner's own cap wins over a task's larger max_steps.
    capped = store.add("count the stars")
    ended = asyncio.run(TaskRunner(store, ScriptedSteps(), max_steps=2).run_once())
    assert ended is not None and ended.id == capped.id and (ended.partial, ended.steps_done) == (True, 2)
    with pytest.raises(UsageError, match="max_steps must be at least 1"):
        TaskRunner(store, ScriptedSteps(), max_steps=0)


def test_max_steps_counts_the_steps_from_before_a_restart(store: TaskStore) -> None:
    task = in_state(store, "running")
    for i in range(3):
        store.record_step(task.id, "thought", f"before the crash {i}")
    store.recover()
    steps = ScriptedSteps()
    ended = asyncio.run(TaskRunner(store, steps, max_steps=4).run_once())
    assert ended is not None and ended.state == "done" and ended.partial and ended.steps_done == 4
    assert steps.calls == [(task.id, [1, 2, 3])]


def test_a_pause_stops_the_task_after_its_current_step_and_resume_goes_on(store: TaskStore) -> None:
    task = store.add("water the plants")
    steps, notes = three_steps_then_done(), Notes()
    steps.during[2] = lambda t: store.pause(t.id)  # a person pauses while step 2 runs
    runner = TaskRunner(store, steps, notes)
    paused = asyncio.run(runner.run_once())
    assert paused is not None
    assert (paused.state, paused.steps_done) == ("paused", 2)  # step 2 landed; step 3 never started
    assert len(steps.calls) == 2 and notes.sent == []
    assert asyncio.run(runner.run_once()) is None  # a paused task is not claimed
    store.resume(task.id)
    ended = asyncio.run(runner.run_once())
    assert ended is not None and ended.state == "done" and ended.steps_done == 4
    assert steps.calls[2:] == [(task.id, [1, 2]), (task.id, [1, 2, 3])]
    assert [s.n for s in store.logs(task.id)] == [1, 2, 3, 4]


def test_paused_and_resumed_during_one_step_drops_that_outcome_and_redoes_it(store: TaskStore) -> None:
    task = store.add("water the plants")
    steps = three_steps_then_done()

    def pause_and_resume(t: Task) -> None:
        store.pause(t.id)
        store.resume(t.id)

    steps.during[2] = pause_and_resume
    runner = TaskRunner(store, steps)
    stopped = asyncio.run(runner.run_once())
    assert stopped is not None and (stopped.state, stopped.steps_done) == ("pending", 1)
    ended = asyncio.run(runner.run_once())
    assert ended is not None and ended.state == "done"
    assert [c[1] for c in steps.calls] == [[], [1], [1], [1, 2]]  # step 2 ran again, nothing repeated in the log
    assert [s.n for s in store.logs(task.id)] == [1, 2, 3]


def test_a_step_that_fails_while_paused_leaves_the_task_paused(store: TaskStore) -> None:
    task = store.add("water the plants")
    steps = ScriptedSteps(RuntimeError("timeout"))
    steps.during[1] = lambda t: store.pause(t.id)
    notes = Notes()
    ended = asyncio.run(TaskRunner(store, steps, notes).run_once())
    assert ended is not None and (ended.state, ended.steps_done, ended.error) == ("paused", 0, None)
    assert notes.sent == []
    assert store.get(task.id).state == "paused"


def test_a_broken_notify_does_not_undo_the_task(store: TaskStore) -> None:
    def broken(text: str, kind: str) -> None:
        raise OSError("outbox gone")

    store.add("say hello")
    ended = asyncio.run(TaskRunner(store, ScriptedSteps(StepOutcome("result", "hi", done=True)), broken).run_once())
    assert ended is not None and ended.state == "done"


def test_an_async_notify_is_awaited(store: TaskStore) -> None:
    sent: list[str] = []

    async def notify(text: str, kind: str) -> None:
        sent.append(text)

    task = store.add("say hello")
    asyncio.run(TaskRunner(store, ScriptedSteps(StepOutcome("result", "hi", done=True)), notify).run_once())
    assert sent == [f"Task {task.id} done: hi"]


def test_cancelling_the_runner_mid_step_puts_the_task_back(store: TaskStore) -> None:
    task = store.add("wait for the rain")
    started = asyncio.Event()

    async def forever(task: Task, steps: list[Step]) -> StepOutcome:
        started.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def scenario() -> None:
        running = asyncio.ensure_future(TaskRunner(store, forever).run_once())
        await started.wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(scenario())
    assert store.get(task.id).state == "pending"
    assert store.logs(task.id) == []


def test_run_forever_works_the_queue_and_wakes_for_new_tasks(store: TaskStore) -> None:
    notes = Notes()

    async def scenario() -> None:
        done = StepOutcome("result", "ok", done=True)
        runner = TaskRunner(store, ScriptedSteps(done, done, done), notes)
        store.add("one")
        store.add("two")
        forever = asyncio.ensure_future(runner.run_forever(poll_s=60))
        for _ in range(200):
            if len(notes.sent) == 2:
                break
            await asyncio.sleep(0.01)
        third = store.add("three")
        runner.wake()  # without it the runner would sleep for poll_s
        for _ in range(200):
            if len(notes.sent) == 3:
                break
            await asyncio.sleep(0.01)
        forever.cancel()
        with pytest.raises(asyncio.CancelledError):
            await forever
        assert store.get(third.id).state == "done"

    asyncio.run(scenario())
    assert [text for text, _ in notes.sent] == ["Task 1 done: ok", "Task 2 done: ok", "Task 3 done: ok"]
