"""Reflection after tasks: lessons in workspace/LEARNINGS.md (bounded, deduplicated, recalled like
memories) and skills proposed from a repeated procedure, accepted only by a person.

The runtime is the real one (database, memory store with its embedding model, workspace, the task
runner and its default agent step) with a scripted model playing the task's steps and the reflection.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.agent import proposed_skills
from appliance.agent.context import TOOL_CALL_START, Workspace
from appliance.agent.reflection import LEARNINGS_FILE, Learnings, make_reflector, normalise, tool_sequence
from appliance.cli import main as cli_main
from appliance.config import Config
from appliance.errors import NotFound
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from appliance.tasks import Task, TaskRunner, TaskStore, make_agent_step

SOIL = "Read the soil sensor before watering: it reads 0 when it is unplugged."


def reflection(*lessons: str, reusable: bool = False, **skill: str) -> str:
    return json.dumps({"lessons": list(lessons), "reusable": reusable, **skill})


@pytest.fixture
def rt(config: Config) -> Iterator[Runtime]:
    config.memory.extract_after_messages = 0  # no background model calls between the scripted ones
    runtime = Runtime.open(config, model=ScriptedModel())
    yield runtime
    runtime.close()


def model(rt: Runtime) -> ScriptedModel:
    assert isinstance(rt.model, ScriptedModel)
    return rt.model


def learnings(rt: Runtime) -> list[str]:
    path = rt.workspace.root / LEARNINGS_FILE
    return [line for line in path.read_text().splitlines() if line.startswith("- ")] if path.exists() else []


def lesson_memories(rt: Runtime) -> list[str]:
    return [r[0] for r in rt.db.rows("SELECT text FROM memories WHERE source = 'lesson' ORDER BY id")]


def run_task(rt: Runtime, goal: str, *replies: str) -> Task:
    """Add a task and run it to its end with the runner and its reflection (the daemon's wiring)."""
    store = TaskStore(rt.db)
    store.add(goal)
    model(rt).enqueue("1. Do it.", *replies)  # a task's first turn writes its plan
    reflect = make_reflector(rt.agent, rt.workspace.root, memory=rt.memory, tasks=store)
    ended = asyncio.run(TaskRunner(store, make_agent_step(rt.agent), on_end=reflect).run_once())
    assert ended is not None
    return ended


def calculate(expression: str, said: str) -> tuple[str, str, str]:
    """A step that calls the calculator: the call, then what the model says after its answer."""
    return TOOL_CALL_START, json.dumps({"name": "calculator", "arguments": {"expression": expression}}), said


def test_a_lesson_is_written_with_its_date_and_task_and_recalled_in_a_later_turn(rt: Runtime) -> None:
    ended = run_task(rt, "water the plants", "DONE: watered", reflection(SOIL))
    assert ended.state == "done"
    [line] = learnings(rt)
    assert line.endswith(f"· task {ended.id} · {SOIL}") and line[2:6].isdigit()  # - 2026-05-01 · task 1 · ...
    assert lesson_memories(rt) == [f"Lesson: {SOIL}"]
    # A later turn's prompt recalls it, as it recalls any memory.
    asyncio.run(rt.agent.turn("Should I water the plants now? Check the soil sensor", channel="test", chat_id="t"))
    prompt = "\n".join(m.content for m in model(rt).history[-1].messages)
    assert SOIL in prompt


def test_a_failed_task_is_reflected_on_too_and_a_bad_reflection_learns_nothing(rt: Runtime) -> None:
    rt.config.agent.reflection.enabled = True
    store = TaskStore(rt.db)
    store.add("read the attic sensor")

    async def failing_step(task: Task, steps: list) -> None:  # type: ignore[type-arg]
        raise RuntimeError("the attic sensor did not answer on I2C bus 1")

    model(rt).enqueue(reflection("The attic sensor drops off I2C bus 1; check its wiring first."))
    reflect = make_reflector(rt.agent, rt.workspace.root, memory=rt.memory, tasks=store)
    ended = asyncio.run(TaskRunner(store, failing_step, on_end=reflect).run_once())  # type: ignore[arg-type]
    assert ended is not None and ended.state == "error"
    assert "Ended error: step 1 failed" in model(rt).history[-1].messages[-1].content
    assert len(learnings(rt)) == 1
    again = run_task(rt, "say hello", "DONE: hello", "this is not JSON")
    assert again.state == "done" and len(learnings(rt)) == 1  # nothing learned, nothing broken


def test_duplicates_are_not_written_again_by_words_or_by_meaning(rt: Runtime) -> None:
    run_task(rt, "water the plants", "DONE: watered", reflection(SOIL))
    same_words = "read the SOIL sensor before watering -- it reads 0 when it is unplugged!"
    assert normalise(same_words) == normalise(SOIL)
    assert rt.memory is not None and rt.memory.has_vectors()
    same_meaning = "Before watering, read the soil sensor: when it is unplugged it reads 0."
    run_task(rt, "water the plants again", "DONE: watered", reflection(same_words, same_meaning))
    assert len(learnings(rt)) == 1 and len(lesson_memories(rt)) == 1
    other = "The pump relay needs two seconds before the water flows."
    run_task(rt, "water the tomatoes", "DONE: watered", reflection(other))
    assert [line.rsplit(" · ", 1)[1] for line in learnings(rt)] == [SOIL, other]


def test_the_file_keeps_the_newest_lessons_and_memory_forgets_the_dropped_ones(rt: Runtime) -> None:
    config = rt.config.agent.reflection
    config.max_lessons, config.duplicate_distance = 3, 0.0
    kept = Learnings(rt.workspace.root, config, rt.memory)
    topics = ["pump", "fan", "heater", "porch light", "soil sensor"]
    for n, topic in enumerate(topics, 1):
        kept.add([f"Check the {topic} first."], n, 1_800_000_000.0)
    assert [lesson.text for lesson in kept.read()] == [
        "Check the heater first.",
        "Check the porch light first.",
        "Check the soil sensor first.",
    ]
    assert lesson_memories(rt) == [f"Lesson: Check the {t} first." for t in topics[2:]]
    config.max_lessons, config.max_bytes = 50, 400
    for n in range(6, 20):
        kept.add([f"Lesson number {n} about the garden hose and the timer."], n, 1_800_000_000.0)
    assert len((rt.workspace.root / LEARNINGS_FILE).read_bytes()) <= 400
    assert kept.read()[-1].task_id == 19 and len(lesson_memories(rt)) == len(kept.read())


def test_a_repeated_procedure_is_proposed_and_becomes_a_skill_only_when_accepted(
    rt: Runtime, config: Config, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first = run_task(rt, "add up the invoices", *calculate("12+30", "That is 42."), "DONE: 42", reflection())
    assert first.state == "done" and proposed_skills.proposals(rt.workspace.root) == []  # once is not a procedure
    steps = TaskStore(rt.db).logs(first.id)
    assert tool_sequence(steps) == ("calculator",)
    second = run_task(rt, "add up the invoices for May", *calculate("7+8", "That is 15."), "DONE: 15", reflection())
    [proposal] = proposed_skills.proposals(rt.workspace.root)
    assert proposal.name == "add-up-the-invoices-for" and proposal.skill is not None
    body = proposal.skill.body
    assert f"task(s) {first.id}, {second.id}" in body and "calculator" in body and "Result: 15" in body
    # Not active: the skills loader does not read proposals, and says nothing about them either.
    live = Workspace(rt.workspace.root)
    assert proposal.name not in live.skills.skills and live.skills.problems == ()

    path = tmp_path / "cli.yaml"
    path.write_text(f"data_dir: {config.resolve_path(config.data_dir)}\n")
    assert cli_main(["--config", str(path), "skills", "proposed"]) == 0
    assert proposal.name in capsys.readouterr().out
    assert cli_main(["--config", str(path), "skills", "accept", proposal.name]) == 0
    assert (rt.workspace.root / "skills" / proposal.name / "SKILL.md").is_file()
    assert proposal.name in Workspace(rt.workspace.root).skills.skills
    assert proposed_skills.proposals(rt.workspace.root) == []


def test_the_model_may_call_a_procedure_reusable_and_a_person_may_reject_it(rt: Runtime) -> None:
    answer = reflection(reusable=True, skill_name="Morning check", skill_description="Read every sensor at 7.")
    run_task(rt, "read every sensor", "DONE: all fine", answer)
    [proposal] = proposed_skills.proposals(rt.workspace.root)
    assert proposal.name == "morning-check" and proposal.skill is not None
    assert proposal.skill.description == "Read every sensor at 7."
    proposed_skills.reject(rt.workspace.root, "morning-check")
    assert proposed_skills.proposals(rt.workspace.root) == []
    with pytest.raises(NotFound) as unknown:
        proposed_skills.accept(rt.workspace.root, "morning-check")
    assert unknown.value.fix is not None and "skills proposed" in unknown.value.fix
