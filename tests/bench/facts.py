"""The time told to the model after the system prompt: does a second turn still find the prompt cached?

Two turns on the packaged model, an hour apart by the agent's clock, from a cold cache (as after a
restart), with the facts note (the appliance) and without it (the baseline, the same code path with
``Agent.clock`` None). The figure is the second turn's cached prompt tokens; the goal is that they cover
the whole system prompt with the note too. The first turn's time to the first token is the cold start a
person waits through (issue 32 measured 13.5 s for a four-word question on a busy Pi), reported beside it.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from appliance.llm.local import LocalModel
from tests.bench.common import report

NOON = datetime(2026, 11, 27, 12, 41, tzinfo=ZoneInfo("Europe/Lisbon"))


def _two_turns(model: LocalModel, noted: bool, rep: int) -> tuple[int, int, float, float]:
    """(cached tokens of turn 2, its prompt tokens, turn 1's first token, turn 2's first token)."""
    from appliance.agent.context import Workspace
    from appliance.agent.loop import Agent
    from appliance.config import CHECKOUT_CONFIG, load_config
    from appliance.memory.db import Database
    from appliance.tools import builtin

    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(CHECKOUT_CONFIG, data_dir=tmp)
        config.agent.max_reply_tokens = 16
        config.agent.temperature = 0.0
        workspace = Workspace(Path(tmp) / "workspace")
        workspace.ensure("Pico")
        db = Database(Path(tmp) / "picoagent.db")
        agent = Agent(config, model, db, builtin.default_registry(), workspace)
        if model.loaded:
            model._llm.reset()  # turn 1 starts cold, as after a restart
        agent.clock = (lambda: NOON) if noted else None
        one = asyncio.run(agent.turn("Tell me about the moon.", chat_id=f"r{rep}"))
        agent.clock = (lambda: NOON + timedelta(hours=1)) if noted else None
        two = asyncio.run(agent.turn("And about the sea?", chat_id=f"r{rep}"))
        db.close()
    return two.timings.cached_tokens, two.timings.prompt_tokens, one.timings.ttft_s, two.timings.ttft_s


def bench_facts_note(path: Path, reps: int) -> None:
    """One row: turn 2's cached prompt tokens with the facts note against without it."""
    from appliance.agent.context import Workspace, system_prompt
    from appliance.llm.base import ChatMessage
    from appliance.tools import builtin

    model = LocalModel(path)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Workspace(Path(tmp))
        workspace.ensure("Pico")
        system = [ChatMessage("system", system_prompt(workspace, builtin.default_registry()))]
        system_tokens = model.count_tokens(system) - model.count_tokens([])  # less the reply's opening
    runs: dict[bool, list[tuple[int, int, float, float]]] = {True: [], False: []}
    for rep in range(reps):
        for noted in (False, True):  # interleaved: a noisy neighbour hurts both sides alike
            runs[noted].append(_two_turns(model, noted, rep))
    model.close()
    cached = statistics.median(r[0] for r in runs[True])
    baseline = statistics.median(r[0] for r in runs[False])
    report(
        "facts_note_cache",
        cached,
        baseline,
        "turn 2 with the time note finds the whole system prompt cached",
        cached >= system_tokens,
        system_prompt_tokens=system_tokens,
        turn2_prompt_tokens=statistics.median(r[1] for r in runs[True]),
        cold_turn1_ttft_s=round(statistics.median(r[2] for r in runs[True]), 3),
        turn2_ttft_s=round(statistics.median(r[3] for r in runs[True]), 3),
        turn2_ttft_s_without_note=round(statistics.median(r[3] for r in runs[False]), 3),
        runs=reps,
    )
