"""Every everyday question of every set through the appliance, with a model that always lies: none is wrong.

A question the grounded answers, the device stage or the honest decline take never reaches the model; one that
does reach it gets the liar's reply and is graded wrong. So this checks, on every set (the main one and each blind
one, once it was measured and tuned on), that the rules still take what they took: a change that makes a
grounded answer wrong or lets a question through to the packaged model fails here. The liar carries the packaged
model's name, so the appliance treats it as the model that guesses (catalog ``answers: false``), as it does the
real one. (Session 41's "thanks" answer took "cheers. what's the actual date tomorrow?" and no test saw it.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from appliance.llm.base import Generation, GenerationRequest
from appliance.llm.scripted import ScriptedModel
from tests.eval.everyday import REPORTED_APART, EverydaySet, load_set
from tests.eval.everyday_home import ask_set
from tests.everyday_blind import BLIND

# No claim the guard of a guessing model reads (appliance/agent/claims.py): what reaches the model shows as wrong.
LIE = "Yes, absolutely: the answer is forty-two."


class Liar(ScriptedModel):
    """The packaged model's name, and a confident lie for every request."""

    def __init__(self) -> None:
        super().__init__(name="smollm2-135m")

    async def generate(self, request: GenerationRequest) -> Generation:
        self.enqueue(LIE)
        return await super().generate(request)


SETS: dict[str, EverydaySet] = {"main": load_set(), **BLIND}


@pytest.mark.parametrize("name", list(SETS))
def test_no_question_of_the_set_is_answered_wrong_with_a_lying_model(name: str, tmp_path: Path) -> None:
    everyday = SETS[name]
    verdicts, _ = asyncio.run(ask_set(tmp_path, everyday, everyday.questions, Liar()))
    graded = [v for v in verdicts if v.cls not in REPORTED_APART and v.outcome != "skipped"]
    wrong = [f"{v.id} ({'model' if v.model_called else 'grounded'}): {v.reply[:120]!r}: {v.why}" for v in graded]
    wrong = [line for line, v in zip(wrong, graded, strict=True) if v.outcome == "wrong"]
    assert wrong == [], "\n".join(wrong)
    assert len(graded) >= len(everyday.questions) * 0.85  # the set was really asked and graded, not skipped
