"""Reflection: after a task ends, one short model turn writes what worked or failed, and repeated
procedures are proposed as skills.

The task runner calls the reflector once per ended task (``TaskRunner(on_end=...)``). The local model
answers under a JSON schema with at most :data:`MAX_LESSONS_PER_TASK` one-line lessons and whether the
steps are a reusable procedure. Each new lesson is

- a line of ``workspace/LEARNINGS.md``: ``- 2026-05-01 · task 12 · <lesson>``, newest last, the file kept
  to ``agent.reflection.max_lessons`` lines and ``max_bytes`` (the oldest go first);
- a memory of its own (kind ``fact``, source ``lesson``, text ``Lesson: <lesson>``), so that the recall
  every turn does (:meth:`appliance.memory.keeper.MemoryKeeper.recall`) finds it by meaning and keyword
  like any fact. A lesson dropped from the file is forgotten from memory too: the file is the list.

Duplicates are not written: the same words (case, spacing and punctuation aside) as a kept lesson, or,
when the memory store has vectors (``memory.embedding_model``), a kept lesson within
``duplicate_distance`` (cosine) of it. Nothing here blocks the event loop: the file and the store are
used on threads, and a failure is logged, never raised into the task runner.

A task that read outside text (:attr:`~appliance.tasks.store.Task.outside`: a web page, a command's output)
teaches nothing: no lesson, no memory, no proposal, and its steps are never quoted into another's.

Proposals: when ``propose_after`` done tasks (this one among them) called the same tools in the same
order, or a done task's reflection says its steps are a reusable procedure, a skill is proposed in
``skills/proposed/NAME/SKILL.md`` (:mod:`appliance.agent.proposed_skills`), never active until accepted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.agent import proposed_skills
from appliance.config.schema import ReflectionConfig
from appliance.llm.base import ChatMessage, GenerationRequest

if TYPE_CHECKING:
    from appliance.agent.loop import Agent
    from appliance.memory.store import MemoryStore
    from appliance.tasks import Step, Task, TaskStore

log = logging.getLogger(__name__)

LEARNINGS_FILE = "LEARNINGS.md"
HEADER = (
    "# Learnings\n\nWhat past tasks taught, one lesson a line (date · task · lesson), newest last. Written after"
    " each task; the oldest go when the list is full.\n\n"
)
LESSON_SOURCE = "lesson"  # the memories' source: how a lesson is told from other facts
LESSON_PREFIX = "Lesson: "
MAX_LESSON_CHARS = 200
MAX_LESSONS_PER_TASK = 2
STEP_CHARS = 300  # a step as the reflection prompt quotes it
PROMPT_STEPS = 12  # the last this many steps go into the reflection prompt
HISTORY_TASKS = 20  # done tasks compared for a repeated procedure
REFLECTION_SCHEMA = {
    "type": "object",
    "properties": {
        "lessons": {
            "type": "array",
            "items": {"type": "string", "maxLength": MAX_LESSON_CHARS},
            "maxItems": MAX_LESSONS_PER_TASK,
        },
        "reusable": {"type": "boolean"},
        "skill_name": {"type": "string", "maxLength": 40},
        "skill_description": {"type": "string", "maxLength": 200},
    },
    "required": ["lessons", "reusable"],
    "additionalProperties": False,
}
INSTRUCTION = (
    "You review a task an assistant on a Raspberry Pi just finished. Write at most two short lessons, one"
    " line each, about what worked or failed that would help with the next such task: concrete (tools,"
    " devices, files, order of steps), not the result itself. No lesson when there is nothing to learn."
    " Set reusable true when the steps are a procedure worth repeating for similar goals, with a short"
    ' skill_name and a one-line skill_description. JSON: {"lessons": [...], "reusable": false}'
)
_LINE = re.compile(r"^- (\d{4}-\d{2}-\d{2}) · task (\d+) · (.+)$")
_TOOL_CALL = re.compile(r"(?:^|\[|; )([a-z_][a-z0-9_]*)\(\{")  # "[shell({...}) -> ...; read_file({...}) -> ...]"
_NORMAL = re.compile(r"[^a-z0-9]+")

Reflector = Callable[["Task", "list[Step]"], Awaitable[None]]


@dataclass(frozen=True)
class Lesson:
    """One line of LEARNINGS.md."""

    date: str
    task_id: int
    text: str

    def line(self) -> str:
        """As the file holds it."""
        return f"- {self.date} · task {self.task_id} · {self.text}"


def normalise(text: str) -> str:
    """A lesson as compared for duplicates: lowercase words only."""
    return " ".join(_NORMAL.sub(" ", text.lower()).split())


def one_line(text: str) -> str:
    """A lesson as kept: one line, at most MAX_LESSON_CHARS."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_LESSON_CHARS else line[: MAX_LESSON_CHARS - 1].rstrip() + "…"


def tool_sequence(steps: Sequence[Step]) -> tuple[str, ...]:
    """The tools a task's action steps called, in order (as make_agent_step records them)."""
    return tuple(name for step in steps if step.kind == "action" for name in _TOOL_CALL.findall(step.content))


class Learnings:
    """workspace/LEARNINGS.md and the lesson memories that mirror it (blocking: call on a thread)."""

    def __init__(self, workspace: Path, config: ReflectionConfig, memory: MemoryStore | None = None) -> None:
        self.path = workspace / LEARNINGS_FILE
        self.config = config
        self.memory = memory

    def read(self) -> list[Lesson]:
        """The lessons in the file, oldest first (lines that are not lessons are ignored)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        found = []
        for line in text.splitlines():
            match = _LINE.match(line.strip())
            if match:
                found.append(Lesson(match.group(1), int(match.group(2)), match.group(3)))
        return found

    def is_duplicate(self, text: str, kept: Sequence[Lesson]) -> bool:
        """The same words as a kept lesson, or (with vectors) as close by meaning as duplicate_distance."""
        if normalise(text) in {normalise(lesson.text) for lesson in kept}:
            return True
        if self.memory is None or self.config.duplicate_distance <= 0:
            return False
        hits = self.memory.search(text, 5, kinds=("fact",))
        return any(
            hit.memory.source == LESSON_SOURCE
            and hit.distance is not None
            and hit.distance <= self.config.duplicate_distance
            for hit in hits
        )

    def add(self, texts: Sequence[str], task_id: int, when: float) -> list[Lesson]:
        """Keep the new lessons among ``texts`` (file and memory), then bound the file; returns those added."""
        kept = self.read()
        date = time.strftime("%Y-%m-%d", time.localtime(when))
        added: list[Lesson] = []
        for raw in texts:
            text = one_line(raw)
            if not normalise(text) or self.is_duplicate(text, kept + added):
                continue
            added.append(Lesson(date, task_id, text))
            if self.memory is not None:
                self.memory.add(LESSON_PREFIX + text, source=LESSON_SOURCE)
        if not added:
            return []
        lessons = kept + added
        dropped: list[Lesson] = []
        while len(lessons) > self.config.max_lessons or (
            len(lessons) > 1 and len(self._render(lessons).encode()) > self.config.max_bytes
        ):
            dropped.append(lessons.pop(0))
        self._write(lessons)
        self._forget(dropped)
        return added

    @staticmethod
    def _render(lessons: Sequence[Lesson]) -> str:
        return HEADER + "".join(lesson.line() + "\n" for lesson in lessons)

    def _write(self, lessons: Sequence[Lesson]) -> None:
        """Replace the file atomically (a reader never sees half of it)."""
        partial = self.path.with_name(f".{LEARNINGS_FILE}.tmp")
        partial.write_text(self._render(lessons), encoding="utf-8")
        partial.replace(self.path)

    def _forget(self, dropped: Sequence[Lesson]) -> None:
        """Lessons gone from the file go from memory too (unless a kept lesson has the same words)."""
        if self.memory is None or not dropped:
            return
        for lesson in dropped:
            for hit in self.memory.search(LESSON_PREFIX + lesson.text, 5, kinds=("fact",)):
                memory = hit.memory
                if memory.source == LESSON_SOURCE and normalise(memory.text) == normalise(LESSON_PREFIX + lesson.text):
                    self.memory.forget(memory.id)


def reflection_prompt(task: Task, steps: Sequence[Step]) -> str:
    """What the reflection turn reads: the goal, how it ended, the last steps."""
    ended = f"done: {task.result}" if task.state == "done" else f"{task.state}: {task.error or 'no result'}"
    lines = [f"Goal: {task.goal}", f"Ended {ended}", "Steps:"]
    for step in list(steps)[-PROMPT_STEPS:]:
        content = step.content if len(step.content) <= STEP_CHARS else step.content[:STEP_CHARS] + "…"
        lines.append(f"{step.n}. [{step.kind}] {content}")
    return "\n".join(lines)


def skill_body(tasks: Sequence[tuple[Task, Sequence[Step]]], tools: Sequence[str]) -> str:
    """A proposed skill's instructions: the procedure as the tasks did it."""
    ids = ", ".join(str(task.id) for task, _ in tasks)
    task, steps = tasks[-1]
    lines = [
        f"Proposed from task(s) {ids}, which reached their goal" + (f" calling {' → '.join(tools)}." if tools else "."),
        "Review it before you accept it: `picoagent skills accept NAME` makes it live.",
        "",
        f"Goal it served: {task.goal}",
        "",
        "Steps that worked:",
    ]
    for step in steps:
        if step.kind in ("action", "thought"):
            content = step.content if len(step.content) <= STEP_CHARS else step.content[:STEP_CHARS] + "…"
            lines.append(f"{step.n}. {' '.join(content.split())}")
    if task.result:
        lines += ["", f"Result: {task.result}"]
    return "\n".join(lines)


class TaskReflector:
    """What runs when a task ends: lessons, then maybe a proposal. Never raises."""

    def __init__(
        self,
        agent: Agent,
        workspace: Path,
        *,
        config: ReflectionConfig,
        memory: MemoryStore | None = None,
        tasks: TaskStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.model = agent.model
        self.workspace = workspace
        self.config = config
        self.learnings = Learnings(workspace, config, memory)
        self.tasks = tasks
        self.clock = clock

    async def __call__(self, task: Task, steps: list[Step]) -> None:
        """Reflect on an ended task (the TaskRunner's on_end)."""
        if not self.config.enabled or task.parent_id is not None or task.state == "cancelled":
            return  # a subtask's lessons are its parent's to draw; a person stopped a cancelled one
        if task.outside:
            # Its steps carry what a page (or a command's output) told the model: a lesson or a proposed
            # skill drawn from them would be recalled into every later turn as the assistant's own.
            log.info("task %d read %s: no lesson is drawn from it", task.id, " and ".join(task.outside))
            return
        try:
            answer = await self._ask(task, steps)
            lessons = [str(x) for x in answer.get("lessons", []) if isinstance(x, str)][:MAX_LESSONS_PER_TASK]
            added = await asyncio.to_thread(self.learnings.add, lessons, task.id, self.clock())
            if added:
                log.info("task %d: %d lesson(s) learned", task.id, len(added))
            if task.state == "done":
                await self._maybe_propose(task, steps, answer)
        except Exception:  # reflecting is a bonus: it must never stop the task runner
            log.exception("task %d: reflection failed", task.id)

    async def _ask(self, task: Task, steps: Sequence[Step]) -> dict[str, Any]:
        request = GenerationRequest(
            messages=[ChatMessage("system", INSTRUCTION), ChatMessage("user", reflection_prompt(task, steps))],
            max_tokens=160,
            temperature=0.0,
            json_schema=REFLECTION_SCHEMA,
            client=f"task:{task.id}",
        )
        generation = await self.model.generate(request)
        try:
            answer = json.loads(generation.text)
        except json.JSONDecodeError:
            log.info("task %d: the reflection was not JSON; nothing learned", task.id)
            return {}
        return answer if isinstance(answer, dict) else {}

    async def _maybe_propose(self, task: Task, steps: Sequence[Step], answer: dict[str, Any]) -> None:
        tools = tool_sequence(steps)
        same: list[tuple[Task, Sequence[Step]]] = []
        if tools and self.tasks is not None:
            same = await self._same_procedure(task, tools)
        repeated = len(same) + 1 >= self.config.propose_after
        if not repeated and not answer.get("reusable"):
            return
        name = str(answer.get("skill_name") or "") or task.goal
        description = str(answer.get("skill_description") or "") or f"How to: {task.goal}"
        body = skill_body([*same, (task, steps)], tools)
        path = await asyncio.to_thread(proposed_skills.propose, self.workspace, name, description, body)
        if path is not None:
            log.warning("task %d: proposed a skill: %s (picoagent skills accept to use it)", task.id, path.parent.name)

    async def _same_procedure(self, task: Task, tools: tuple[str, ...]) -> list[tuple[Task, Sequence[Step]]]:
        """Earlier done tasks whose action steps called the same tools in the same order."""
        assert self.tasks is not None
        store = self.tasks
        done = [t for t in await store.db.call(store.list, "done") if t.id != task.id]
        same = []
        for other in sorted(done, key=lambda t: t.id, reverse=True)[:HISTORY_TASKS]:
            if other.outside:
                continue  # its steps are not quoted into a skill
            steps = await store.db.call(store.logs, other.id)
            if tool_sequence(steps) == tools:
                same.append((other, steps))
        return list(reversed(same))


def make_reflector(
    agent: Agent,
    workspace: Path,
    *,
    config: ReflectionConfig | None = None,
    memory: MemoryStore | None = None,
    tasks: TaskStore | None = None,
    clock: Callable[[], float] = time.time,
) -> Reflector:
    """The TaskRunner's ``on_end``: reflect on each ended task (lessons, proposals); never raises."""
    return TaskReflector(
        agent, workspace, config=config or agent.config.agent.reflection, memory=memory, tasks=tasks, clock=clock
    )
