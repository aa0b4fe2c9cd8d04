"""Deep work: the step function that asks the agent for a task's next step, with a plan and notes.

A task's first step is its plan: one model turn, no tools, that writes a short numbered plan, stored
with the task and quoted in every later prompt. Each later step is one agent turn in the chat
``task:task-ID`` (reset every step: the prompt carries the recorded steps, and a stored conversation
would also hold a step that was never recorded). When the steps, as quoted, pass ``tasks.compact_share``
of the context, a turn summarises them into a ``notes`` step and later prompts quote the notes and the
steps after them only. Every turn's tokens (prompt + completion, local or cloud) are the step's, counted
with it; the agent counts them in the usage ledger as it does every turn.

A task's turns run in its :func:`~appliance.tools.registry.task_scope` (its tools only; the spawn tool
knows the task) and on its route: ``cloud`` forces the cloud (a step that could not use it fails the task
rather than run on the Pi unasked), ``local`` keeps it on the Pi.

Each turn's message is its prompt, which quotes the earlier steps' tool results: it is not the owner's
words. So the turn's trust (:class:`~appliance.tools.trust.TurnTrust`) is the task's, not the message's:
only the goal counts as said (its hosts stay fetchable), and once a step read outside text (kept with the
task, :attr:`~appliance.tasks.store.Task.outside`) every later turn starts untrusted: device writes wait
for a person, fetches go only to hosts the goal named, nothing lasting is written.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from appliance.config.tasks import TasksConfig
from appliance.errors import PicoagentError
from appliance.tasks.capable import check_task, task_route
from appliance.tasks.runner import StepFunction
from appliance.tasks.store import Step, StepOutcome, Task
from appliance.tools.registry import TaskScope, task_scope
from appliance.tools.trust import TurnTrust

if TYPE_CHECKING:
    from appliance.agent.escalation import Forced
    from appliance.agent.loop import Agent
    from appliance.agent.record import ReplyRecord
    from appliance.config import Config
    from appliance.tools.result import Action

log = logging.getLogger(__name__)

DONE_PREFIX = "DONE:"
PROMPT_STEP_CHARS = 600  # a step's content as quoted back to the model; keeps a small context from overflowing
CHARS_PER_TOKEN = 4  # the steps' size in tokens, estimated (a tokenizer call per step would cost more than it tells)
MIN_STEPS_TO_COMPACT = 2  # notes need something to sum up: never notes of notes alone


# The prompts' own sentences: a reply that says them back has leaked the prompt (:func:`scrub`).
WORKING = "You are working on a task, one step at a time."
DO_STEP = "use a tool if it helps. Do not repeat a step already done."
WHEN_DONE = f"When the goal is reached, reply starting with {DONE_PREFIX} followed by the result for the owner."
PLANNING = (
    "You will work on this task step by step.",
    "Before doing anything, write a short numbered plan: at most 5 steps, one line each. Reply with the plan only.",
)
NOTING = (
    "Write short notes that replace these steps: the facts found, the results, what was done and what is left. "
    "Keep names, numbers and file names exactly. Reply with the notes only."
)
SCAFFOLD = (WORKING, DO_STEP, WHEN_DONE, *PLANNING, NOTING, "Your plan:", "Steps so far:", "Steps since the notes:")
SCAFFOLD_RUN = 4  # words in a row from one of the prompts' sentences: the prompt said back
_STEP_LINE = re.compile(
    r"^\s*(?:\d+\.\s*)?\[(?:plan|notes|action|thought|result)\]|^\s*(?:Goal|Notes on steps[\d -]*):", re.I
)
_SENTENCES = re.compile(r"(?<=[^\d\s][.!?])\s+")  # "1. Find the tariffs" is one


def _grams(text: str) -> set[tuple[str, ...]]:
    said = [("#" if w.isdigit() else w) for w in re.findall(r"[a-z0-9]+", text.lower())]
    return {tuple(said[i : i + SCAFFOLD_RUN]) for i in range(len(said) - SCAFFOLD_RUN + 1)}


_SCAFFOLD_GRAMS = set().union(*(_grams(s) for s in SCAFFOLD), _grams(f"Do step 1 now; {DO_STEP}"))


def scrub(text: str) -> str:
    """A reply without the sentences that say the task's prompt back ("Do step 4 now; use a tool if it helps",
    "3. [thought] ...", "Goal: ..."): nothing of a prompt reaches a result, a note or a notification."""
    lines = []
    for line in text.strip().splitlines():
        if _STEP_LINE.match(line):
            continue
        kept = [s.strip() for s in _SENTENCES.split(line) if s.strip() and not (_grams(s) & _SCAFFOLD_GRAMS)]
        if kept:
            lines.append(" ".join(kept))
    return "\n".join(lines)


def _quote(step: Step) -> str:
    content = step.content if len(step.content) <= PROMPT_STEP_CHARS else step.content[:PROMPT_STEP_CHARS] + "…"
    return f"{step.n}. [{step.kind}] {content}"


def since_notes(steps: list[Step]) -> tuple[Step | None, list[Step]]:
    """The latest notes step (None: no notes yet) and the work steps after it, as the prompt quotes them."""
    last = max((i for i, s in enumerate(steps) if s.kind == "notes"), default=-1)
    notes = steps[last] if last >= 0 else None
    return notes, [s for s in steps[last + 1 :] if s.kind != "plan"]


def task_prompt(task: Task, steps: list[Step]) -> str:
    """The agent's prompt for a task's next step: the goal, the plan, the notes and steps since, the
    budget left, and how to say it is done."""
    lines = [f"{WORKING} Goal: {task.goal}", ""]
    if task.plan:
        lines += ["Your plan:", task.plan, ""]
    notes, recent = since_notes(steps)
    if notes is not None:
        lines += [f"Notes on steps 1-{notes.n - 1}: {notes.content}", ""]
    if recent:
        lines.append("Steps so far:" if notes is None else "Steps since the notes:")
        lines += [_quote(step) for step in recent]
    elif notes is None:
        lines.append("No steps yet.")
    if task.budget_tokens:
        lines += ["", f"Tokens used: {task.tokens_used:,} of {task.budget_tokens:,}; be brief."]
    lines += [
        "",
        f"Do step {steps[-1].n + 1 if steps else 1} now; {DO_STEP}",
        WHEN_DONE,
    ]
    return "\n".join(lines)


def plan_prompt(task: Task) -> str:
    """The prompt of a task's first turn: a short numbered plan, nothing done yet."""
    return f"{PLANNING[0]} Goal: {task.goal}\n\n{PLANNING[1]}"


def notes_prompt(task: Task, notes: Step | None, recent: list[Step]) -> str:
    """The prompt that sums up the steps so far into notes the later steps read instead."""
    lines = [f"You are working on a task. Goal: {task.goal}", ""]
    if notes is not None:
        lines += [f"Your notes so far: {notes.content}", ""]
    lines += ["The steps since:" if notes is not None else "The steps so far:", *[_quote(s) for s in recent], ""]
    lines.append(NOTING)
    return "\n".join(lines)


def _describe_action(action: Action) -> str:
    outcome = action.result if action.ok else f"ERROR: {action.error}"
    return f"{action.tool}({action.arguments}) -> {outcome}"


def check_route(config: Config, route: str) -> None:
    """Refuse a task route this config cannot serve (at add time: `--route cloud` with no cloud allowed)."""
    if route == "cloud":
        check_task(config, route, "")


class CloudNotUsed(PicoagentError):
    """A cloud-routed task's turn was answered on the Pi."""


def _again_on_the_pi(task: Task, model_name: str) -> str:
    """How a task that failed on the cloud can be worked on the Pi instead: added again on --route auto, where
    the Pi's model can plan (a failed task cannot be resumed, and its route cannot be changed: walk 10)."""
    from appliance.llm.models import plans

    if task.route != "cloud" or not plans(model_name):
        return ""
    return f'; or work it on the Pi: add it again with `picoagent tasks add "{task.goal}" --route auto`'


class DeepWork:
    """The default step function: plan, then one agent turn per step, with notes when the steps grow long.

    ``context_tokens``: the context the notes must fit in (default: the agent's ``llm.context_tokens``).
    """

    def __init__(self, agent: Agent, settings: TasksConfig | None = None, *, context_tokens: int | None = None) -> None:
        self.agent = agent
        self.settings = settings or agent.config.tasks
        self.context_tokens = context_tokens or agent.config.llm.context_tokens

    def needs_notes(self, steps: list[Step]) -> bool:
        """Whether the steps since the last notes, as quoted, pass the compaction share of the context."""
        _, recent = since_notes(steps)
        if len(recent) < MIN_STEPS_TO_COMPACT:
            return False
        chars = sum(len(_quote(s)) for s in recent)
        return chars / CHARS_PER_TOKEN > self.settings.compact_share * self.context_tokens

    async def _turn(self, task: Task, text: str, *, tools: bool) -> tuple[ReplyRecord, int, tuple[str, ...]]:
        """One agent turn of the task: its reply, its tokens, and the outside text in its context."""
        chat_id = f"task-{task.id}"
        await self.agent.db.call(self.agent.db.reset, "task", chat_id)
        # a model that cannot plan never works a task: the cloud does (auto), or the task fails saying which it needs
        check_task(self.agent.config, task.route, self.agent.model.name)
        force: Forced = task_route(self.agent.config, task.route, self.agent.model.name)
        allowed = frozenset(task.tools) if task.tools is not None else None
        # The prompt quotes the earlier steps, tool results included: only the owner's words count as said,
        # and what the task read before is in the context from the start.
        trust = TurnTrust(task.owner_words, sources=list(task.outside))
        with task_scope(TaskScope(task.id, allowed, trust)):
            record = await self.agent.turn(
                text,
                channel="task",
                chat_id=chat_id,
                client=f"task:{task.id}",
                force=force,
                forced_by="" if task.route == force else f"the task's --route {task.route} sends it to the cloud",
                tool_choice="auto" if tools else "none",
            )
        tokens = record.timings.prompt_tokens + record.timings.completion_tokens
        if force == "cloud" and record.route != "cloud":
            why = "" if task.route == "cloud" else f"; {self.agent.model.name} on this Pi cannot plan a task"
            raise CloudNotUsed(
                # the Pi's fallback answer is not the step's: "answered locally" would say it was used
                f"{'the cloud failed' if record.blocked == 'cloud_failed' else 'the cloud was not used'}"
                f" ({record.reason.removesuffix(': answered locally')}){why}",
                fix="`picoagent providers --check` tries the provider; once it answers, add the task again (one that "
                "failed is not retried)" + _again_on_the_pi(task, self.agent.model.name),
            )
        return record, tokens, tuple(trust.sources)

    async def __call__(self, task: Task, steps: list[Step]) -> StepOutcome:
        """The task's next step: its plan, notes, or a step of work."""
        if task.plan is None and not any(s.kind == "plan" for s in steps):
            record, tokens, outside = await self._turn(task, plan_prompt(task), tools=False)
            plan = scrub(record.text) or "1. Work towards the goal."
            return StepOutcome("plan", plan, tokens=tokens, plan=plan, outside=outside)
        if self.needs_notes(steps):
            notes, recent = since_notes(steps)
            record, tokens, outside = await self._turn(task, notes_prompt(task, notes, recent), tools=False)
            log.info("task %d: steps %d-%d summed up into notes", task.id, recent[0].n, recent[-1].n)
            return StepOutcome("notes", scrub(record.text), tokens=tokens, outside=outside)
        record, tokens, outside = await self._turn(task, task_prompt(task, steps), tools=True)
        reply = record.text.strip()
        if reply[: len(DONE_PREFIX)].upper() == DONE_PREFIX:
            result = scrub(reply[len(DONE_PREFIX) :]) or "the goal is reached"
            return StepOutcome("result", result, done=True, result=result, tokens=tokens, outside=outside)
        reply = scrub(reply)
        if record.actions:
            done = "; ".join(_describe_action(a) for a in record.actions)
            content = f"{reply}\n[{done}]" if reply else f"[{done}]"
            return StepOutcome("action", content, tokens=tokens, outside=outside)
        return StepOutcome("thought", reply, tokens=tokens, outside=outside)


def make_agent_step(agent: Agent, settings: TasksConfig | None = None) -> StepFunction:
    """The default step function: :class:`DeepWork` on this agent."""
    return DeepWork(agent, settings)
