"""Deep work and subtasks: budgets, the plan, notes, the 80 % warning, the cloud route, spawn, cancel."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, cast

import pytest

import appliance.memory.db as db_module
from appliance.agent.context import TOOL_CALL_START, Workspace
from appliance.agent.escalation import CloudRoute
from appliance.agent.loop import Agent
from appliance.config import Config, ProviderConfig, TasksConfig
from appliance.errors import UsageError
from appliance.memory.db import Database
from appliance.tasks import (
    DeepWork,
    Step,
    StepOutcome,
    Task,
    TaskError,
    TaskRunner,
    TaskStore,
    check_route,
    spawn,
)
from appliance.tools import builtin, scheduling
from appliance.tools.registry import TaskScope, ToolRegistry, ToolTurn, task_scope
from tests.agents import MeteredModel
from tests.fakes.cloud_api import FakeCloud


class Notes:
    """A notify function that keeps what it was told."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def __call__(self, text: str, kind: str) -> None:
        self.sent.append(text)


def call(tool: str, **arguments: Any) -> list[str]:
    """What the scripted model says to call a tool: the opening tag, then the call under the grammar."""
    return [TOOL_CALL_START, json.dumps({"name": tool, "arguments": arguments})]


def agent_for(config: Config, model: MeteredModel, tools: ToolRegistry | None = None, **kw: Any) -> Agent:
    data = config.resolve_path(config.data_dir)
    workspace = Workspace(data / "workspace")
    workspace.ensure(config.agent.name)
    return Agent(config, model, Database(data / "picoagent.db"), tools or ToolRegistry(), workspace, **kw)


def cloud_agent(config: Config, model: MeteredModel, fake: FakeCloud) -> tuple[Agent, CloudRoute]:
    """An agent on ``model`` that may escalate to the fake cloud provider (the config names it ``fake``)."""
    data = config.resolve_path(config.data_dir)
    db = Database(data / "picoagent.db")
    cloud = CloudRoute(config, db, fake.provider())
    workspace = Workspace(data / "workspace")
    workspace.ensure(config.agent.name)
    return Agent(config, model, db, ToolRegistry(), workspace, cloud=cloud), cloud


def ledger_tokens(db: Database, route: str, provider: str = "local") -> int:
    total = db.value(
        "SELECT sum(prompt_tokens + completion_tokens) FROM usage WHERE route = ? AND provider = ?", (route, provider)
    )
    return int(total or 0)


# --- the store -------------------------------------------------------------------------------------


def test_add_takes_budgets_route_tools_and_the_config_defaults(db: Database) -> None:
    store = TaskStore(db, settings=TasksConfig(max_steps=12, budget_tokens=3000))
    plain = store.add("water the plants")
    assert (plain.max_steps, plain.budget_tokens, plain.tokens_used, plain.route) == (12, 3000, 0, "auto")
    assert (plain.parent_id, plain.plan, plain.tools, plain.partial) == (None, None, None, False)
    own = store.add(
        "research tomatoes", budget_tokens=500, max_steps=3, route="cloud", tools=["web_fetch", "web_fetch"]
    )
    assert (own.budget_tokens, own.max_steps, own.route, own.tools) == (500, 3, "cloud", ["web_fetch"])
    assert set(own.as_dict()) >= {"budget_tokens", "max_steps", "tokens_used", "route", "parent_id", "plan", "tools"}
    assert TaskStore(db).add("no budget").budget_tokens is None  # the default config: 0 = none
    for bad, message in (
        ({"budget_tokens": 0}, "a token budget must be at least 1"),
        ({"max_steps": 0}, "max_steps must be at least 1"),
        ({"route": "moon"}, "no task route 'moon'"),
        ({"parent_id": 99}, "no task 99"),
    ):
        with pytest.raises(UsageError, match=message):
            store.add("x", **bad)
    assert len(store.list()) == 3  # a refusal stored nothing


def test_no_task_takes_more_steps_than_tasks_max_steps_limit(db: Database) -> None:
    """The API, the CLI, the model's task_create and spawn all ask the store; the runner holds old tasks to it."""
    store = TaskStore(db, settings=TasksConfig(max_steps_limit=20))
    over = "a task may take at most 20 steps (tasks.max_steps_limit), not 5000"
    with pytest.raises(UsageError, match=re.escape(over)) as refused:
        store.add("research forever", max_steps=5000)
    assert refused.value.fix == "ask for 20 or fewer, or raise tasks.max_steps_limit in the config"
    assert store.add("research", max_steps=20).max_steps == 20

    async def think(task: Task, steps: list[Step]) -> StepOutcome:
        return StepOutcome("thought", "hm")

    tools = ToolRegistry()
    scheduling.register(tools, cast(Any, None), store)  # task_create needs no scheduler
    spawn.register(tools, TaskRunner(store, think))
    parent = store.add("parent")
    store.claim(parent.id)
    for name, arguments in (("task_create", {"goal": "g"}), ("spawn", {"goal": "g", "tools": []})):
        turn = ToolTurn(8, task_id=parent.id)
        result = asyncio.run(tools.execute(name, {**arguments, "max_steps": 5000}, turn=turn))
        assert not result.ok and (result.error or "").startswith(over), result.error
    assert [t.goal for t in store.list()] == ["research", "parent"]  # nothing over the limit was stored
    # A task stored with more steps than the limit allows now (the limit was lowered) stops at the limit.
    lowered = TaskStore(db, settings=TasksConfig(max_steps_limit=2))
    store.pause(parent.id)
    ended = asyncio.run(TaskRunner(lowered, think).run_once())
    assert ended is not None and (ended.goal, ended.steps_done, ended.partial) == ("research", 2, True)
    assert "it took its 2 steps" in (ended.result or "")


def test_cancel_cascades_to_the_subtasks_not_ended(db: Database) -> None:
    store = TaskStore(db)
    parent = store.add("plan the garden")
    store.claim(parent.id)
    running = store.add("find seeds", parent_id=parent.id)
    store.claim(running.id)
    pending = store.add("find pots", parent_id=parent.id)
    grandchild = store.add("measure the pots", parent_id=pending.id)
    done = store.add("find soil", parent_id=parent.id)
    store.claim(done.id)
    store.finish(done.id, "soil found")
    other = store.add("an unrelated task")
    cancelled = store.cancel(parent.id)
    assert cancelled.state == "cancelled"
    states = {t.id: t.state for t in store.list()}
    assert states == {
        parent.id: "cancelled",
        running.id: "cancelled",
        pending.id: "cancelled",
        grandchild.id: "cancelled",
        done.id: "done",  # an ended subtask keeps its end
        other.id: "pending",
    }
    with pytest.raises(TaskError, match=f"task {parent.id} is already cancelled"):
        store.cancel(parent.id)
    with pytest.raises(TaskError, match=f"task {done.id} is done; only a pending, running or paused task"):
        store.cancel(done.id)
    assert store.counts() == {"pending": 1, "running": 0, "done": 1, "error": 0, "paused": 0, "cancelled": 4}


def test_migration_13_keeps_old_tasks_and_their_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = list(db_module.MIGRATIONS)
    before = full[: [m.__name__ for m in full].index("_m13_deep_work")]  # a file made before migration 13
    monkeypatch.setattr(db_module, "MIGRATIONS", before)
    old = Database(tmp_path / "old.db")
    old.write("INSERT INTO tasks (goal, state, created_at, updated_at, steps_done) VALUES ('g', 'paused', 1, 2, 1)")
    old.write("INSERT INTO task_steps (task_id, n, at, kind, content) VALUES (1, 1, 1.5, 'thought', 'hm')")
    old.close()
    monkeypatch.setattr(db_module, "MIGRATIONS", full)
    new = Database(tmp_path / "old.db")
    store = TaskStore(new)
    task = store.get(1)
    assert (task.goal, task.state, task.steps_done, task.max_steps, task.tokens_used, task.route) == (
        "g",
        "paused",
        1,
        8,
        0,
        "auto",
    )
    assert store.logs(1) == [Step(1, 1, 1.5, "thought", "hm", 0)]
    assert store.cancel(1).state == "cancelled"
    assert new.rows("PRAGMA foreign_key_check") == []
    new.close()


# --- budgets, plan, notes --------------------------------------------------------------------------


def test_a_token_budget_stops_the_task_with_a_partial_result_counted_in_the_ledger(config: Config) -> None:
    """Each model call costs 1,000 tokens: plan + 4 steps reach the 5,000 budget; 80 % is told once."""
    model = MeteredModel(prompt_tokens=900, completion_tokens=100)
    model.enqueue(
        "1. Read about tomatoes.\n2. Sum up.", *(f"Read source {i}: plant after the frost." for i in range(9))
    )
    agent = agent_for(config, model)
    store = TaskStore(agent.db, settings=config.tasks)
    task = store.add("research the best time to plant tomatoes here", budget_tokens=5000)
    notes, ends = Notes(), []

    async def on_end(ended: Task, steps: list[Step]) -> None:
        ends.append((ended.state, len(steps)))

    ended = asyncio.run(TaskRunner(store, DeepWork(agent), notes, on_end=on_end).run_once())
    steps = store.logs(task.id)
    assert ended is not None
    assert (ended.state, ended.partial, ended.tokens_used, ended.steps_done) == ("done", True, 5000, 5)
    assert [s.kind for s in steps] == ["plan", "thought", "thought", "thought", "thought"]
    assert [s.tokens for s in steps] == [1000] * 5 and len(model.generated) == 5  # no turn after the budget
    assert ended.plan == "1. Read about tomatoes.\n2. Sum up."
    assert ended.result is not None and ended.result.startswith(
        "Partial result: stopped because it used its 5,000-token budget (5,000 tokens), before the goal was reached."
    )
    assert "Last step (5): Read source 3: plant after the frost." in ended.result
    assert notes.sent == [
        f"Task {task.id} has used 80 % of its 5,000-token budget (4,000 tokens): it stops with what it has at 100 %",
        f"Task {task.id} stopped with a partial result (it used its 5,000-token budget (5,000 tokens)): "
        + ended.result,
    ]
    assert ends == [("done", 5)]
    # Every turn is in the usage ledger, as every chat turn is: the same 5,000 tokens.
    assert ledger_tokens(agent.db, "local") == 5000
    # The plan is in every later prompt; the plan turn offered no tools.
    assert "Your plan:\n1. Read about tomatoes." in model.history[1].messages[-1].content
    assert "Tokens used: 1,000 of 5,000" in model.history[1].messages[-1].content
    agent.db.close()


def test_the_warning_is_told_once_across_a_restart(db: Database) -> None:
    store = TaskStore(db)
    task = store.add("count", budget_tokens=1000)
    notes = Notes()
    script = [StepOutcome("thought", "a", tokens=850), StepOutcome("thought", "b", tokens=50)]

    async def steps(t: Task, s: list[Step]) -> StepOutcome:
        if not script:
            store.pause(t.id)  # stands in for a restart mid-run: the task goes on later
            return StepOutcome("thought", "c", tokens=10)
        return script.pop(0)

    asyncio.run(TaskRunner(store, steps, notes).run_once())
    store.resume(task.id)
    script.append(StepOutcome("result", "42", done=True, tokens=10))
    ended = asyncio.run(TaskRunner(store, steps, notes).run_once())
    assert ended is not None and ended.state == "done" and ended.tokens_used == 920
    assert [n for n in notes.sent if "80 %" in n] == [
        f"Task {task.id} has used 80 % of its 1,000-token budget (850 tokens): it stops with what it has at 100 %"
    ]


def test_notes_replace_the_steps_when_they_pass_the_share_of_the_context(config: Config) -> None:
    model = MeteredModel(prompt_tokens=10, completion_tokens=5)
    long = "the soil reads 12 % at the north bed and 14 % at the south bed, both dry"
    model.enqueue("1. Read.", f"{long} (1)", f"{long} (2)", "NOTES: both beds dry (12 %, 14 %)", "DONE: water both")
    agent = agent_for(config, model)
    store = TaskStore(agent.db)
    task = store.add("check the beds")
    work = DeepWork(agent, TasksConfig(compact_share=0.1), context_tokens=256)  # ~100 characters of steps
    ended = asyncio.run(TaskRunner(store, work).run_once())
    steps = store.logs(task.id)
    assert ended is not None and ended.state == "done" and ended.result == "water both"
    assert [s.kind for s in steps] == ["plan", "thought", "thought", "notes", "result"]
    last_prompt = model.history[-1].messages[-1].content
    assert "Notes on steps 1-3: NOTES: both beds dry (12 %, 14 %)" in last_prompt
    assert long not in last_prompt  # the old steps are no longer quoted
    assert "Write short notes" in model.history[3].messages[-1].content
    agent.db.close()


# --- the cloud route -------------------------------------------------------------------------------


def test_route_cloud_is_refused_without_a_cloud_allowed(config: Config) -> None:
    check_route(config, "auto")
    with pytest.raises(UsageError, match="no cloud provider is configured") as refused:
        check_route(config, "cloud")
    assert "routing.cloud_provider" in (refused.value.fix or "")
    config.routing.cloud_provider = "fake"
    config.providers["fake"] = ProviderConfig(type="openai", api_base="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(UsageError, match=r"routing\.mode is local_only"):
        check_route(config, "cloud")
    config.routing.mode = "edge_first"
    check_route(config, "cloud")


def test_a_cloud_routed_task_runs_on_the_cloud_and_is_counted_under_it(config: Config) -> None:
    async def scenario() -> None:
        async with FakeCloud("openai") as fake:
            config.providers["fake"] = ProviderConfig(
                type="openai", api_base=fake.api_base, model=fake.model, api_key=fake.api_key
            )
            config.routing.mode = "edge_first"
            config.routing.cloud_provider = "fake"
            check_route(config, "cloud")
            model = MeteredModel()
            agent, cloud = cloud_agent(config, model, fake)
            db = agent.db
            fake.enqueue("1. Look it up.")
            fake.enqueue("DONE: plant tomatoes in mid-May")
            store = TaskStore(db)
            store.add("when to plant tomatoes", route="cloud")
            ended = await TaskRunner(store, DeepWork(agent)).run_once()
            assert ended is not None and (ended.state, ended.result) == ("done", "plant tomatoes in mid-May")
            assert model.generated == []  # the Pi's model never ran
            cloud_tokens = ledger_tokens(db, "cloud", "fake")
            assert cloud_tokens > 0 and ended.tokens_used == cloud_tokens
            assert ledger_tokens(db, "local") == 0
            await cloud.close()
            db.close()

    asyncio.run(scenario())


# --- subtasks --------------------------------------------------------------------------------------


def test_a_subtask_gets_at_most_its_parents_tools_and_cannot_call_others(config: Config) -> None:
    tools = builtin.default_registry()
    model = MeteredModel(prompt_tokens=90, completion_tokens=10)
    model.enqueue(
        "1. Ask a subtask to add.",
        # the parent's step: a subtask with a tool the parent lacks is refused, then one within its tools
        *call("spawn", goal="add 2 and 2", tools=["calculator", "current_time"]),
        *call("spawn", goal="add 2 and 2", tools=["calculator"], max_steps=3),
        # the subtask: its plan, then a call outside its tools (refused), then its answer
        "1. Add.",
        *call("current_time"),
        "DONE: 4",
        # the parent again: the subtask's result came back as the tool's result
        "The subtask says 4.",
        "DONE: 2 and 2 make 4",
    )
    agent = agent_for(config, model, tools)
    store = TaskStore(agent.db)
    runner = TaskRunner(store, DeepWork(agent), notes := Notes())
    spawn.register(tools, runner)
    parent = store.add("add 2 and 2 with help", tools=["calculator", "spawn"])
    ended = asyncio.run(runner.run_once())
    assert ended is not None and (ended.state, ended.result) == ("done", "2 and 2 make 4")
    [child] = store.children(parent.id)
    assert (child.parent_id, child.tools, child.state, child.result) == (parent.id, ["calculator"], "done", "4")
    assert set(child.tools or []) <= set(parent.tools or [])
    parent_action = store.logs(parent.id)[1].content
    assert (
        f"task {parent.id} may not use current_time, so its subtask may not either: a subtask gets at most its "
        "parent's tools (calculator, spawn)" in parent_action
    )
    assert f"subtask {child.id} done (2 steps, 400 tokens): 4" in parent_action
    child_steps = store.logs(child.id)
    assert [s.kind for s in child_steps] == ["plan", "result"]
    # The subtask's turn was shown its one tool and refused the other though the model asked for it.
    child_call = next(r for r in model.history if r.json_schema and "add 2 and 2" in r.messages[-1].content)
    assert "calculator" in json.dumps(child_call.json_schema) and "current_time" not in json.dumps(
        child_call.json_schema
    )
    refused = agent.db.rows("SELECT content, meta FROM messages WHERE role = 'assistant' AND content = 'DONE: 4'")
    assert refused and f"'current_time' is not among the tools of task {child.id} (calculator)" in refused[0][1]
    # The parent pays for its subtask; the owner hears of the parent only.
    assert ended.tokens_used == 7 * 100 + child.tokens_used and child.tokens_used == 400  # 7 calls + 4
    assert notes.sent == [f"Task {parent.id} done: 2 and 2 make 4"]
    agent.db.close()


def test_spawn_is_only_for_tasks_and_keeps_its_limits(db: Database) -> None:
    tools = ToolRegistry()
    store = TaskStore(db, settings=TasksConfig(max_children=1, max_depth=1))

    async def never(task: Task, steps: list[Step]) -> StepOutcome:
        raise AssertionError("no subtask should start")

    spawn.register(tools, TaskRunner(store, never))
    assert [t.name for t in tools] == []  # outside a task, spawn is not even listed
    with task_scope(TaskScope(1, None)):
        assert [t.name for t in tools] == ["spawn"]

    def run(task_id: int | None, **arguments: Any) -> str:
        turn = ToolTurn(8, task_id=task_id)
        result = asyncio.run(tools.execute("spawn", {"goal": "g", "tools": [], **arguments}, turn=turn))
        assert not result.ok
        return result.error or ""

    assert run(None).startswith("no tool named 'spawn'")
    parent = store.add("parent", budget_tokens=100)
    store.claim(parent.id)
    child = store.add("child", parent_id=parent.id)
    assert run(child.id) == "subtasks nest at most 1 deep (tasks.max_depth): do it yourself"
    store.claim(child.id)
    assert run(parent.id).startswith("1 subtasks run already (tasks.max_children)")
    store.finish(child.id, "done")
    assert run(parent.id, tools=["shell"]).startswith("no tool named shell")
    store.charge(parent.id, 100)
    assert run(parent.id) == f"task {parent.id} has no tokens left for a subtask"


def test_a_cancel_during_a_step_keeps_that_step_and_ends_the_task_cancelled(db: Database) -> None:
    store = TaskStore(db)
    store.add("wait for the rain")
    ends: list[str] = []

    async def steps(t: Task, s: list[Step]) -> StepOutcome:
        if len(s) == 1:
            store.cancel(t.id)  # a person cancels while step 2 runs
        return StepOutcome("thought", f"looked at the sky {len(s) + 1}", tokens=7)

    async def on_end(ended: Task, s: list[Step]) -> None:
        ends.append(ended.state)
        raise RuntimeError("a broken hook is logged, never raised")

    ended = asyncio.run(TaskRunner(store, steps, on_end=on_end).run_once())
    assert ended is not None and (ended.state, ended.steps_done, ended.tokens_used) == ("cancelled", 2, 14)
    assert ends == ["cancelled"]
    assert asyncio.run(TaskRunner(store, steps).run_once()) is None  # it stays cancelled


def test_a_subtask_whose_parent_step_is_stopped_is_cancelled_not_left_behind(db: Database) -> None:
    tools = ToolRegistry()
    store = TaskStore(db)
    started = asyncio.Event()

    async def hangs(task: Task, steps: list[Step]) -> StepOutcome:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    spawn.register(tools, TaskRunner(store, hangs))
    parent = store.add("parent")
    store.claim(parent.id)

    async def scenario() -> None:
        call = asyncio.ensure_future(
            tools.execute("spawn", {"goal": "wait", "tools": []}, turn=ToolTurn(8, task_id=parent.id))
        )
        await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(scenario())
    [child] = store.children(parent.id)
    assert (child.state, child.error) == ("cancelled", "its parent's step was stopped")


# --- a model that cannot plan ----------------------------------------------------------------------


def test_on_the_packaged_model_a_queued_task_fails_saying_which_model_it_needs_and_no_model_runs(
    config: Config,
) -> None:
    model = MeteredModel()
    model.name = "smollm2-135m"  # the packaged model, as `serve` names it
    agent = agent_for(config, model)
    store = TaskStore(agent.db)
    store.add("compare the electricity tariffs")  # queued by a schedule, say: nothing checked it then
    ended = asyncio.run(TaskRunner(store, DeepWork(agent), notes := Notes()).run_once())
    assert ended is not None and ended.state == "error" and model.generated == []
    assert notes.sent == [f"Task {ended.id} failed: {ended.error}"]
    assert ended.error is not None and ended.error.startswith(
        "step 1 failed: tasks need a model that can plan and use tools, and smollm2-135m, the model on this Pi, cannot"
    )
    assert "(fix: install a bigger model: `picoagent models pull" in ended.error  # as `tasks add` says it (walk 8)
    agent.db.close()


def test_an_auto_task_the_pis_model_cannot_plan_goes_to_the_cloud_when_it_may(config: Config) -> None:
    async def scenario() -> None:
        async with FakeCloud("openai") as fake:
            config.providers["fake"] = ProviderConfig(
                type="openai", api_base=fake.api_base, model=fake.model, api_key=fake.api_key
            )
            config.routing.mode, config.routing.cloud_provider = "edge_first", "fake"
            model = MeteredModel()
            model.name = "smollm2-135m"
            agent, cloud = cloud_agent(config, model, fake)
            db = agent.db
            fake.enqueue("1. Look at both tariffs.")
            fake.enqueue("DONE: the night tariff is cheaper")
            store = TaskStore(db)
            store.add("compare the electricity tariffs")  # route auto
            ended = await TaskRunner(store, DeepWork(agent)).run_once()
            assert ended is not None and (ended.state, ended.result) == ("done", "the night tariff is cheaper")
            assert model.generated == []  # the Pi's model never planned
            await cloud.close()
            db.close()

    asyncio.run(scenario())


def test_an_auto_task_whose_cloud_fails_does_not_say_the_person_asked_for_the_cloud(config: Config) -> None:
    async def scenario() -> None:
        async with FakeCloud("openai") as fake:
            config.providers["fake"] = ProviderConfig(
                type="openai", api_base=fake.api_base, model=fake.model, api_key=fake.api_key
            )
            config.routing.mode, config.routing.cloud_provider = "edge_first", "fake"
            model = MeteredModel()
            model.name = "smollm2-135m"
            agent, cloud = cloud_agent(config, model, fake)
            fake.fail_next("500", n=10)
            store = TaskStore(agent.db)
            store.add("What is 2+2?")  # route auto: the cloud works it, and fails
            ended = await TaskRunner(store, DeepWork(agent)).run_once()
            assert ended is not None and ended.state == "error" and ended.error is not None
            assert "you asked for the cloud" not in ended.error and "--route cloud" not in ended.error
            assert "the task's --route auto sends it to the cloud" in ended.error
            assert "smollm2-135m on this Pi cannot plan a task" in ended.error
            assert "answered locally" not in ended.error  # the Pi's fallback answer was not the step's (a walk)
            assert "the cloud failed (" in ended.error and "the cloud was not used" not in ended.error  # it was tried
            await cloud.close()
            agent.db.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(("model_name", "offered"), [("planner", True), ("smollm2-135m", False)])
def test_a_cloud_task_whose_cloud_fails_says_how_to_work_it_on_the_pi_only_where_it_can(
    config: Config, model_name: str, offered: bool
) -> None:
    """Walk 10: the fix said "the task can go on with --route auto", but a failed task cannot be resumed nor
    its route changed; it is added again, and only a model that plans can work it on the Pi."""

    async def scenario() -> None:
        async with FakeCloud("openai") as fake:
            config.providers["fake"] = ProviderConfig(
                type="openai", api_base=fake.api_base, model=fake.model, api_key=fake.api_key
            )
            config.routing.mode, config.routing.cloud_provider = "edge_first", "fake"
            model = MeteredModel()
            model.name = model_name
            agent, cloud = cloud_agent(config, model, fake)
            fake.fail_next("500", n=10)
            store = TaskStore(agent.db)
            store.add("compare the tariffs", route="cloud")
            ended = await TaskRunner(store, DeepWork(agent)).run_once()
            assert ended is not None and ended.state == "error" and ended.error is not None
            assert "can go on with" not in ended.error and "once it answers, add the task again" in ended.error
            again = 'add it again with `picoagent tasks add "compare the tariffs" --route auto`'
            assert (again in ended.error) is offered, ended.error
            await cloud.close()
            agent.db.close()

    asyncio.run(scenario())


def test_nothing_of_the_tasks_prompt_reaches_a_result_a_step_or_a_notification(config: Config) -> None:
    model = MeteredModel()
    model.enqueue(
        "You will work on this task step by step.\n1. Find the tariffs.\n2. Compare them.",
        "I looked at the tariffs. Do step 3 now; use a tool if it helps. Do not repeat a step already done.",
        "DONE: The night tariff is cheaper. When the goal is reached, reply starting with DONE: followed by the "
        "result for the owner.\n2. [thought] I looked at the tariffs.",
    )
    agent = agent_for(config, model)
    store = TaskStore(agent.db)
    task = store.add("compare the electricity tariffs")
    ended = asyncio.run(TaskRunner(store, DeepWork(agent), notes := Notes()).run_once())
    assert ended is not None and ended.state == "done"
    steps = store.logs(task.id)
    assert [s.content for s in steps] == [
        "1. Find the tariffs.\n2. Compare them.",
        "I looked at the tariffs.",
        "The night tariff is cheaper.",
    ]
    assert ended.plan == "1. Find the tariffs.\n2. Compare them."
    assert notes.sent == [f"Task {task.id} done: The night tariff is cheaper."]
    agent.db.close()


def test_the_models_task_create_is_refused_on_a_model_that_cannot_plan(db: Database, config: Config) -> None:
    from appliance.tasks.capable import check_task

    store = TaskStore(db)
    tools = ToolRegistry()
    scheduling.register(tools, cast(Any, None), store, can_work=lambda: check_task(config, "auto", "smollm2-135m"))
    result = asyncio.run(tools.execute("task_create", {"goal": "compare the electricity tariffs"}, turn=ToolTurn(9)))
    assert not result.ok and (result.error or "").startswith("tasks need a model that can plan and use tools")
    assert store.list() == []
