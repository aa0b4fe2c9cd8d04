"""Persistent tasks: the state machine, atomic steps, the agent step, and resuming after kill -9 (the runner:
tests/test_task_runner.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from appliance.agent.context import Workspace
from appliance.agent.loop import Agent
from appliance.agent.record import ReplyRecord
from appliance.config import Config, TasksConfig
from appliance.errors import DatabaseError, PicoagentError, UsageError
from appliance.llm.scripted import ScriptedModel
from appliance.memory.db import Database
from appliance.tasks import (
    DeepWork,
    Step,
    StepOutcome,
    Task,
    TaskError,
    TaskRunner,
    TaskStore,
    UnknownTaskError,
    make_agent_step,
    task_prompt,
)
from appliance.tools.registry import ToolRegistry
from appliance.tools.result import Action
from tests import task_fixtures
from tests.agents import MeteredModel
from tests.task_fixtures import ROOT, Notes, counter_agrees, in_state

store = task_fixtures.store  # the shared fixture, taken by this module's tests


# --- the state machine ---------------------------------------------------------------------------

# (operation, from state) -> the new state, or the refusal's message.
TRANSITIONS: dict[tuple[str, str], str] = {
    ("pause", "pending"): "paused",
    ("pause", "running"): "paused",
    ("pause", "paused"): "task {id} is already paused",
    ("pause", "done"): "task {id} is done; only a pending or running task can be paused",
    ("pause", "error"): "task {id} has failed; only a pending or running task can be paused",
    ("resume", "paused"): "pending",
    ("resume", "pending"): "task {id} is already pending",
    ("resume", "running"): "task {id} is running; only a paused task can be resumed",
    ("resume", "done"): "task {id} is done; only a paused task can be resumed",
    ("resume", "error"): "task {id} has failed; only a paused task can be resumed",
    ("finish", "running"): "done",
    ("finish", "pending"): "task {id} is pending; only a running task can finish",
    ("finish", "paused"): "task {id} is paused; only a running task can finish",
    ("finish", "done"): "task {id} is done; only a running task can finish",
    ("finish", "error"): "task {id} has failed; only a running task can finish",
    ("fail", "running"): "error",
    ("fail", "pending"): "task {id} is pending; only a running task can fail",
    ("fail", "paused"): "task {id} is paused; only a running task can fail",
    ("fail", "done"): "task {id} is done; only a running task can fail",
    ("fail", "error"): "task {id} has failed; only a running task can fail",
}


def apply(store: TaskStore, operation: str, task_id: int) -> Task:
    if operation == "finish":
        return store.finish(task_id, "the plants are watered")
    if operation == "fail":
        return store.fail(task_id, "the pump is stuck")
    moved: Task = getattr(store, operation)(task_id)
    return moved


@pytest.mark.parametrize(("operation", "start"), list(TRANSITIONS))
def test_every_transition_is_allowed_or_refused_with_its_message(store: TaskStore, operation: str, start: str) -> None:
    task = in_state(store, start)
    expected = TRANSITIONS[(operation, start)]
    if " " not in expected:
        moved = apply(store, operation, task.id)
        assert moved.state == expected == store.get(task.id).state
        assert moved.updated_at > task.updated_at
        if expected == "done":
            assert moved.result == "the plants are watered"
        if expected == "error":
            assert moved.error == "the pump is stuck"
        return
    with pytest.raises(TaskError) as refused:
        apply(store, operation, task.id)
    assert str(refused.value) == expected.format(id=task.id)
    assert refused.value.fix  # every refusal says what to do
    assert isinstance(refused.value, UsageError)
    assert store.get(task.id) == task  # a refusal changes nothing


@pytest.mark.parametrize("operation", ["get", "pause", "resume", "finish", "fail", "logs", "record_step"])
def test_unknown_ids_are_named(store: TaskStore, operation: str) -> None:
    with pytest.raises(UnknownTaskError, match=r"^no task 42$") as refused:
        if operation == "record_step":
            store.record_step(42, "thought", "hm")
        elif operation in ("finish", "fail"):
            getattr(store, operation)(42, "x")
        else:
            getattr(store, operation)(42)
    assert "picoagent tasks list" in (refused.value.fix or "")
    assert isinstance(refused.value, LookupError) and isinstance(refused.value, PicoagentError)


def test_add_needs_a_goal_and_list_filters_by_a_known_state(store: TaskStore) -> None:
    with pytest.raises(UsageError, match="a task needs a goal"):
        store.add("   ")
    first = store.add("  water the plants  ")
    second = in_state(store, "paused")
    assert first.goal == "water the plants" and first.state == "pending" and first.steps_done == 0
    assert [t.id for t in store.list()] == [first.id, second.id]
    assert store.list("paused") == [second]
    assert store.list("done") == []
    with pytest.raises(UsageError, match="no task state 'finished'; the states are pending, running, done"):
        store.list("finished")


def test_claim_next_takes_the_oldest_pending_task_once(store: TaskStore) -> None:
    assert store.claim_next() is None
    paused = in_state(store, "paused")
    first, second = store.add("first"), store.add("second")
    claimed = [store.claim_next(), store.claim_next(), store.claim_next()]
    assert [t.id if t else None for t in claimed] == [first.id, second.id, None]
    assert all(t is not None and t.state == "running" for t in claimed[:2])
    assert store.get(paused.id).state == "paused"


def test_claim_next_is_atomic_across_connections(tmp_path: Path) -> None:
    """Four processes' worth of connections race for ten tasks: each task is claimed exactly once."""
    path = tmp_path / "race.db"
    setup = Database(path)
    TaskStore(setup).add("warm up the schema")
    ids = [TaskStore(setup).add(f"task {i}").id for i in range(10)]
    setup.close()
    claims: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        db = Database(path)
        store = TaskStore(db)
        while (task := store.claim_next()) is not None:
            with lock:
                claims.append(task.id)
        db.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(claims) == sorted([1, *ids])


# --- steps -----------------------------------------------------------------------------------------


def test_steps_are_numbered_and_the_counter_agrees(store: TaskStore, db: Database) -> None:
    task = in_state(store, "running")
    for i, kind in enumerate(["thought", "action", "observation"], start=1):
        step = store.record_step(task.id, kind, f"content {i}")
        assert (step.n, step.kind, step.task_id) == (i, kind, task.id)
        assert store.get(task.id).steps_done == i
        counter_agrees(db, task.id)
    assert [s.describe() for s in store.logs(task.id)] == [
        "  1. [thought] content 1",
        "  2. [action] content 2",
        "  3. [observation] content 3",
    ]
    final = store.record_step(task.id, "result", "watered", result="the plants are watered")
    assert final.n == 4
    done = store.get(task.id)
    assert (done.state, done.result, done.steps_done) == ("done", "the plants are watered", 4)


@pytest.mark.parametrize("state", ["pending", "done", "error"])
def test_a_task_that_is_not_running_refuses_steps(store: TaskStore, db: Database, state: str) -> None:
    task = in_state(store, state)
    words = "has failed" if state == "error" else f"is {state}"
    with pytest.raises(TaskError, match=rf"^task {task.id} {words}; steps are recorded only while it runs$"):
        store.record_step(task.id, "thought", "too late")
    assert store.logs(task.id) == []
    counter_agrees(db, task.id)


def test_a_paused_task_keeps_the_step_that_was_in_flight(store: TaskStore) -> None:
    task = in_state(store, "running")
    store.pause(task.id)  # a person pauses while the step runs
    step = store.record_step(task.id, "action", "pump on for 5 s")
    assert step.n == 1
    assert store.get(task.id).state == "paused"
    assert store.get(task.id).steps_done == 1


def test_a_step_needs_a_kind(store: TaskStore) -> None:
    task = in_state(store, "running")
    with pytest.raises(UsageError, match="a step needs a kind"):
        store.record_step(task.id, " ", "x")


def test_a_failed_step_write_leaves_neither_the_step_nor_the_counter(store: TaskStore, db: Database) -> None:
    """The step row is inserted before the counter moves; when moving it fails, the row goes too."""
    task = in_state(store, "running")
    store.record_step(task.id, "thought", "one")
    db.write(
        "CREATE TEMP TRIGGER counter_breaks BEFORE UPDATE OF steps_done ON tasks"
        " BEGIN SELECT RAISE(ABORT, 'the disk is on fire'); END"
    )
    with pytest.raises(DatabaseError, match="database write failed: the disk is on fire"):
        store.record_step(task.id, "action", "two")
    assert [s.n for s in store.logs(task.id)] == [1]
    counter_agrees(db, task.id)
    db.write("DROP TRIGGER counter_breaks")
    with db.reading() as conn:
        assert not conn.in_transaction
    assert store.record_step(task.id, "action", "two").n == 2
    counter_agrees(db, task.id)


def test_concurrent_writers_never_skip_or_repeat_a_step_number(tmp_path: Path) -> None:
    path = tmp_path / "steps.db"
    setup = Database(path)
    task = in_state(TaskStore(setup), "running")
    setup.close()

    def writer(name: str) -> None:
        db = Database(path)
        store = TaskStore(db)
        for i in range(40):
            store.record_step(task.id, "thought", f"{name} {i}")
        db.close()

    threads = [threading.Thread(target=writer, args=(name,)) for name in "abc"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check = Database(path)
    assert [s.n for s in TaskStore(check).logs(task.id)] == list(range(1, 121))
    counter_agrees(check, task.id)
    check.close()


def test_recover_puts_running_tasks_back_with_their_steps(store: TaskStore) -> None:
    running = in_state(store, "running")
    store.record_step(running.id, "thought", "one")
    store.record_step(running.id, "action", "two")
    others = {state: in_state(store, state).id for state in ("done", "error", "paused", "pending")}
    assert store.recover() == [running.id]
    recovered = store.get(running.id)
    assert (recovered.state, recovered.steps_done) == ("pending", 2)
    assert [s.content for s in store.logs(running.id)] == ["one", "two"]
    assert {state: store.get(i).state for state, i in others.items()} == {s: s for s in others}
    assert store.recover() == []
    claimed = store.claim_next()
    assert claimed is not None and claimed.id == running.id and claimed.steps_done == 2


# --- the agent step ------------------------------------------------------------------------------


class RecordingAgent:
    """Stands in for Agent.turn: answers from a list of replies and keeps every call."""

    def __init__(self, db: Database, *replies: ReplyRecord, model: str = "recording") -> None:
        self.db = db
        self.config = Config()  # local only: a model that cannot plan has no cloud to turn to
        self.model = ScriptedModel(name=model)  # a name the catalog does not know: trusted to plan
        self.replies = list(replies)
        self.calls: list[dict[str, Any]] = []

    async def turn(self, text: str, **kwargs: Any) -> ReplyRecord:
        self.calls.append({"text": text, **kwargs})
        return self.replies.pop(0)


def reply(text: str, actions: list[Action] | None = None) -> ReplyRecord:
    return ReplyRecord(text=text, route="local", reason="test", actions=actions or [])


def test_task_prompt_carries_the_goal_the_steps_and_how_to_finish() -> None:
    task = Task(7, "water the plants", "running", 0.0, 0.0, 2)
    steps = [Step(7, 1, 0.0, "thought", "read the soil"), Step(7, 2, 0.0, "action", "x" * 2000)]
    prompt = task_prompt(task, steps)
    assert "Goal: water the plants" in prompt
    assert "1. [thought] read the soil" in prompt
    assert "2. [action] " + "x" * 600 + "…" in prompt and "x" * 601 not in prompt
    assert "Do step 3 now" in prompt
    assert "reply starting with DONE:" in prompt
    assert "No steps yet." in task_prompt(task, [])


def test_agent_step_plans_then_asks_in_the_task_chat_and_reads_done(db: Database) -> None:
    action = Action(tool="set_device", arguments={"name": "pump"}, ok=True, result="pump: on")
    agent = RecordingAgent(
        db,
        reply("1. Read the soil.\n2. Water."),
        reply("I will check the soil."),
        reply("Turned the pump on.", [action]),
        reply("  done: the plants are watered"),
    )
    step = DeepWork(agent, TasksConfig(), context_tokens=2048)  # type: ignore[arg-type]
    task = Task(3, "water the plants", "running", 0.0, 0.0, 0)
    plan = asyncio.run(step(task, []))
    assert plan == StepOutcome("plan", "1. Read the soil.\n2. Water.", plan="1. Read the soil.\n2. Water.")
    assert agent.calls[0]["tool_choice"] == "none" and "numbered plan" in agent.calls[0]["text"]
    task = replace(task, plan=plan.content, steps_done=1)
    steps = [Step(3, 1, 0.0, "plan", plan.content)]
    first = asyncio.run(step(task, steps))
    assert first == StepOutcome("thought", "I will check the soil.")
    steps.append(Step(3, 2, 0.0, first.kind, first.content))
    second = asyncio.run(step(task, steps))
    assert second.kind == "action" and not second.done
    assert second.content == "Turned the pump on.\n[set_device({'name': 'pump'}) -> pump: on]"
    third = asyncio.run(step(task, steps))
    assert third == StepOutcome("result", "the plants are watered", done=True, result="the plants are watered")
    assert {(c["channel"], c["chat_id"], c["client"]) for c in agent.calls} == {("task", "task-3", "task:3")}
    assert {c["force"] for c in agent.calls} == {None}  # route auto: routing decides
    assert "Your plan:\n1. Read the soil.\n2. Water." in agent.calls[2]["text"]
    assert "2. [thought] I will check the soil." in agent.calls[2]["text"]
    assert "[plan]" not in agent.calls[2]["text"]  # the plan is quoted once, as the plan


def test_agent_steps_through_a_real_agent_to_done(config: Config, tmp_path: Path) -> None:
    """The runner, the default step and a real Agent (a scripted model): the prompt reaches the model."""
    data = config.resolve_path(config.data_dir)
    workspace = Workspace(data / "workspace")
    workspace.ensure(config.agent.name)
    database = Database(data / "picoagent.db")
    model = MeteredModel(prompt_tokens=300, completion_tokens=20)
    model.enqueue("1. Look at the soil.", "The soil is dry; I would water it.", "DONE: watered the plants")
    agent = Agent(config, model, database, ToolRegistry(), workspace)
    store = TaskStore(database)
    task = store.add("water the plants")
    notes = Notes()
    ended = asyncio.run(TaskRunner(store, make_agent_step(agent), notes).run_once())
    logs = store.logs(task.id)
    database.close()
    assert ended is not None and ended.state == "done" and ended.result == "watered the plants"
    assert notes.sent == [(f"Task {task.id} done: watered the plants", "task")]
    assert ended.plan == "1. Look at the soil." and [s.kind for s in logs] == ["plan", "thought", "result"]
    third_prompt = [m.content for m in model.history[2].messages if m.role == "user"]
    # One user message: the step log is in the prompt and the chat was reset, so nothing is said twice.
    assert len(third_prompt) == 1
    assert "2. [thought] The soil is dry; I would water it." in third_prompt[0]
    # Every turn's tokens, as the model reported them, are the task's.
    assert len(model.generated) == 3 and ended.tokens_used == 3 * 320
    assert [s.tokens for s in logs] == [320, 320, 320]


# --- kill -9 mid-step --------------------------------------------------------------------------------

KILL_STEP = 3
LAST_STEP = 5

# Runs the task; every step execution is appended (O_APPEND) to the executions file before anything
# else. With ``hang`` = before/during/after, step 3 writes the marker file and sleeps: before its
# record is written, inside the record's transaction (after the step row, before the counter), or
# just after the record committed.
CHILD = r"""
import asyncio, os, sys, time
from pathlib import Path

from appliance.memory.db import Database
from appliance.tasks import StepOutcome, TaskRunner, TaskStore

db_path, executions, marker, hang = sys.argv[1:5]
KILL_STEP, LAST_STEP = int(sys.argv[5]), int(sys.argv[6])
armed = False


def stall():
    Path(marker).write_text(str(os.getpid()))
    time.sleep(120)


class Store(TaskStore):
    def record_step(self, task_id, kind, content, **kw):
        step = super().record_step(task_id, kind, content, **kw)
        if hang == "after" and step.n == KILL_STEP:
            stall()
        return step


def trace(sql):
    if hang == "during" and armed and sql.startswith("UPDATE tasks SET steps_done"):
        stall()


async def step(task, steps):
    global armed
    n = len(steps) + 1
    fd = os.open(executions, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, f"{n}\n".encode())
    os.close(fd)
    armed = n == KILL_STEP
    if hang == "before" and n == KILL_STEP:
        stall()
    done = n == LAST_STEP
    return StepOutcome("action", f"did step {n}", done=done, result="all steps done" if done else None)


db = Database(Path(db_path))
with db.reading() as conn:
    conn.set_trace_callback(trace)
store = Store(db)
print("recovered", store.recover(), flush=True)
task = asyncio.run(TaskRunner(store, step, max_steps=LAST_STEP + 2).run_once())
print("ended", task.state if task else None, flush=True)
db.close()
"""


def run_child(tmp_path: Path, hang: str) -> subprocess.Popen[str]:
    args = [str(tmp_path / "tasks.db"), str(tmp_path / "executions"), str(tmp_path / "marker"), hang]
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args, str(KILL_STEP), str(LAST_STEP)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def executions(tmp_path: Path) -> Counter[int]:
    return Counter(int(line) for line in (tmp_path / "executions").read_text().split())


@pytest.mark.parametrize("hang", ["before", "during", "after"])
def test_a_task_killed_mid_step_resumes_at_its_first_unrecorded_step(tmp_path: Path, hang: str) -> None:
    setup = Database(tmp_path / "tasks.db")
    task = TaskStore(setup).add("five steps, killed in the third")
    setup.close()

    first = run_child(tmp_path, hang)
    marker = tmp_path / "marker"
    deadline = time.monotonic() + 30
    while not marker.exists():
        if first.poll() is not None or time.monotonic() > deadline:
            first.kill()
            out, err = first.communicate()
            pytest.fail(f"the first run never reached step {KILL_STEP}:\n{out}\n{err}")
        time.sleep(0.01)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=10)
    assert first.returncode == -signal.SIGKILL

    # What the crash left: still running, and the step log and counter agree.
    raw = sqlite3.connect(tmp_path / "tasks.db")
    state, steps_done = raw.execute("SELECT state, steps_done FROM tasks WHERE id = ?", (task.id,)).fetchone()
    numbers = [r[0] for r in raw.execute("SELECT n FROM task_steps WHERE task_id = ? ORDER BY n", (task.id,))]
    raw.close()
    recorded_before_kill = KILL_STEP if hang == "after" else KILL_STEP - 1
    assert state == "running"
    assert steps_done == recorded_before_kill
    assert numbers == list(range(1, recorded_before_kill + 1))

    marker.unlink()
    second = run_child(tmp_path, "none")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert f"recovered [{task.id}]" in out and "ended done" in out

    check = Database(tmp_path / "tasks.db")
    store = TaskStore(check)
    done = store.get(task.id)
    logs = store.logs(task.id)
    check.close()
    assert (done.state, done.steps_done, done.result) == ("done", LAST_STEP, "all steps done")
    assert [s.n for s in logs] == list(range(1, LAST_STEP + 1))  # no gap, no repeat
    assert [s.content for s in logs] == [f"did step {n}" for n in range(1, LAST_STEP + 1)]  # the full history
    ran = executions(tmp_path)
    assert set(ran) == set(range(1, LAST_STEP + 1))
    for n in range(1, LAST_STEP + 1):
        # Every recorded step ran exactly once, but the killed one, which ran once more unrecorded.
        killed_unrecorded = n == KILL_STEP and hang != "after"
        assert ran[n] == (2 if killed_unrecorded else 1), (n, ran)


def test_tasks_logs_shows_the_whole_error_where_the_list_cuts_it(store: TaskStore) -> None:
    """A walk: `tasks logs 1` cut the error at "(routing.cloud_provider…", so its fix was never shown."""
    task = store.add("compare the tariffs")
    assert store.claim_next() is not None
    why = "step 1 failed: the cloud was not used (" + "because " * 40 + "); fix: set routing.cloud_provider"
    store.fail(task.id, why)
    ended = store.get(task.id)
    assert ended.describe().endswith(f"… (all of it: tasks logs {task.id})")  # the list points there (walk 9)
    assert "set routing.cloud_provider" not in ended.describe()
    assert ended.describe(whole=True).endswith(": " + " ".join(why.split()))
