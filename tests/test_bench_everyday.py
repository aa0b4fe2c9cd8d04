"""tests/bench/everyday.py at its smallest, on a scripted model: the harness really asks and really grades.

No goal is asserted (`make bench` reports the goal; a missed one must not fail `make test`). What is
checked: a known-wrong reply from the model is graded wrong, a decline declined, a device question the
fast path answers is right with no model call and a latency, the fixture's placeholders come from the
running appliance, and the rows come out whole.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from appliance.llm.base import Generation, GenerationRequest
from appliance.llm.scripted import ScriptedModel
from tests.bench.everyday import BLIND_SETS, bench_blind, bench_everyday, rows
from tests.eval.everyday import load_set
from tests.eval.everyday_home import ask_set, open_home

EVERYDAY = load_set()
FIELDS = {"bench", "value", "baseline", "ratio", "goal", "ok"}
# General knowledge goes to the model whatever the grounded answers learn; a device's state is the fast
# path's (no model); the unknowable and the sum are the model's or a grounded answer's, whichever serves.
ASKED = ("gen-01", "gen-02", "unk-01", "dev-02", "math-02")
ANSWERS = {
    "What is the capital of France?": "The capital of France is Lyon.",  # known wrong
    "Who wrote Hamlet?": "I'm not sure who wrote it.",  # an honest decline
    "Who will win the next World Cup?": "Brazil will win the next World Cup.",  # an invented claim
    "what is 17 times 23?": "17 times 23 is 409.",  # the wrong answer
}


class AnsweringModel(ScriptedModel):
    """A scripted model answering by the question it was asked (whatever the order of calls)."""

    async def generate(self, request: GenerationRequest) -> Generation:
        asked = [m.content for m in request.messages if m.role == "user"][-1]
        self.enqueue(ANSWERS.get(asked, "I don't know."))
        return await super().generate(request)


def test_the_harness_grades_what_it_asks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = AnsweringModel()
    questions = EVERYDAY.by_id(*ASKED)
    verdicts, alone = asyncio.run(ask_set(tmp_path, EVERYDAY, questions, model, alone=True))
    got = {v.id: v for v in verdicts}

    assert got["gen-01"].outcome == "wrong" and got["gen-01"].model_called
    assert "Lyon" in got["gen-01"].reply
    assert got["gen-02"].outcome == "declined" and got["gen-02"].model_called
    # The future: the model's invented winner is wrong; a grounded decline (no model) is declined.
    future = got["unk-01"]
    assert (future.outcome, future.model_called) in (("wrong", True), ("declined", False)), future
    porch = got["dev-02"]
    assert (porch.outcome, porch.model_called) == ("right", False), porch  # the fast path, or a grounded answer
    assert porch.latency_ms > 0  # measured (how fast is tests/bench's question, not this one's)
    # 17 x 23: the model's 409 is wrong; once a grounded answer serves it, it is right without the model.
    maths = got["math-02"]
    assert (maths.outcome, maths.model_called) in (("wrong", True), ("right", False)), maths
    # The baseline asks the same model alone: it always calls it, and grades its reply alike.
    assert [v.id for v in alone] == list(ASKED) and all(v.model_called for v in alone)
    assert {v.id: v.outcome for v in alone}["gen-01"] == "wrong"

    printed = rows(verdicts, alone, "given", model.name)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    names = ["everyday_right_or_declined", "everyday_general", "everyday_grounded_p50_ms"]
    assert [r["bench"] for r in printed] == [r["bench"] for r in lines] == names
    share, general, latency = printed
    assert all(r.keys() >= FIELDS and isinstance(r["ok"], bool) for r in printed)
    assert share["classes"]["devices"]["right"] == 1
    assert general["value"] == 0.0 and general["questions"] == 2 and general["classes"]["general"]["declined"] == 1
    quick = sorted(v.latency_ms for v in verdicts if not v.model_called)
    assert latency["answered_without_model"] == len(quick) >= 1
    assert quick[0] <= latency["value"] <= quick[-1]  # their median


def test_the_bench_runs_on_given_questions(capsys: pytest.CaptureFixture[str]) -> None:
    out = bench_everyday(model=AnsweringModel(), questions=EVERYDAY.by_id("dev-02", "gen-02"))
    assert [r["bench"] for r in out] == ["everyday_right_or_declined", "everyday_general", "everyday_grounded_p50_ms"]
    assert out[0]["split"] == "given" and out[0]["graded"] == 1 and out[0]["value"] == 1.0
    assert out[1]["classes"]["general"]["declined"] == 1


@pytest.mark.parametrize("name", BLIND_SETS)
def test_each_blind_set_runs_at_its_smallest_size(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """run.py's everyday_NAME rows at smoke size (one question a class) on the scripted model."""
    out = bench_blind(name, "smoke", model=AnsweringModel())
    names = [f"everyday_{name}_right_or_declined", f"everyday_{name}_general", f"everyday_{name}_grounded_p50_ms"]
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [r["bench"] for r in out] == [r["bench"] for r in printed] == names
    share, general, _ = out
    assert all(r.keys() >= FIELDS and isinstance(r["ok"], bool) and r["split"] == "held" for r in out)
    assert share["questions"] == 15 and general["questions"] == 1  # one a class, general apart
    assert share["graded"] + sum(c["skipped"] for c in share["classes"].values()) == 14


def test_the_fixture_fills_placeholders_from_the_running_appliance(tmp_path: Path) -> None:
    async def main() -> None:
        async with open_home(tmp_path, ScriptedModel()) as home:
            now = home.now()
            values = home.fills(now, now)
            assert values["living_room_temperature"].numbers == (21.5,)
            assert values["soil_level"].numbers == (50.0,)
            assert re.search(values["name"].pattern or "", "I'm Pico.")
            assert re.search(values["time"].pattern or "", f"It's {now:%H:%M}.")
            assert values["next_reminder"].pattern in (r"\bbins\b", r"\bplants\b")
            fan = values["fan_switched_on"].numbers[0]
            assert abs(fan - (now.hour * 60 + now.minute)) <= 1
            assert values["memory_available_mb"].numbers[0] > 0
            memories = home.runtime.memory
            assert memories is not None and memories.count() == 6
            if home.forecast is None:  # a branch without the weather source: skipped, saying why
                assert values["tomorrow_rain"].skip
            else:  # the fake's script: today wet, tonight below zero
                assert values["today_rain"].pattern and "yes" in values["today_rain"].pattern
                assert min(values["tonight_low"].numbers) <= 0
        async with open_home(tmp_path, ScriptedModel(), "bare") as bare:
            assert bare.zone is None and bare.now().tzinfo is not None
            assert isinstance(bare.now(), datetime)

    asyncio.run(main())
