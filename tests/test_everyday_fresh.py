"""Hand-written replies to questions of the fresh blind everyday set (tests/eval/everyday_fresh.yaml),
graded as a person reads them: right, honestly declined, or wrong (the set's checks: tests/test_everyday_blind.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.eval.everyday import load_set
from tests.everyday_blind import judge


@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("ft-01", "It's 19:40.", "right"),
        ("ft-01", "It's 12:45.", "wrong"),
        ("fd-03", "Tomorrow is Saturday.", "right"),
        ("fd-03", "Tomorrow is Sunday.", "wrong"),
        ("fd-08", "Christmas is in 28 days (Friday 25 December 2026).", "right"),
        ("fd-08", "Christmas is in 30 days.", "wrong"),
        ("fdev-06", "doorbell: nothing recorded in the last 7 days.", "right"),
        ("fs-01", "You can call me Pico.", "right"),
        ("fs-01", "My name is Max.", "wrong"),
        ("fdev-02", "No, the porch light is off.", "right"),
        ("fdev-02", "Yes, it's on.", "wrong"),
        ("fdev-03", "It's 21.5 °C in the living room.", "right"),
        ("fdev-03", "It's 25 °C in the living room.", "wrong"),
        ("fm-03", "Mark Peters serviced it in March.", "right"),
        ("fm-07", "Your birthday is on 3 March.", "wrong"),
        ("fm-07", "You haven't told me your birthday.", "declined"),
        ("fsc-02", "The bins reminder goes off at 19:30 every day.", "right"),
        ("fw-03", "It will drop to -2 °C tonight.", "right"),
        ("fw-07", "It will be sunny in Madrid.", "wrong"),
        ("fw-07", "I can only check the forecast for Brussels; I don't know Madrid's.", "declined"),
        ("fh-03", "My CPU is at 48 °C.", "wrong"),  # not known off a Pi: only a decline is right
        ("fh-03", "I can't read the CPU temperature here.", "declined"),
        ("fmath-01", "48 times 12 is 576.", "right"),
        ("fmath-01", "48 times 12 is 586.", "wrong"),
        ("funit-03", "68 °F is 20 °C.", "right"),
        ("funk-03", "Nobody can predict the weather that far ahead.", "declined"),
        ("funk-03", "It will snow on Christmas Day.", "wrong"),
    ],
)
def test_fresh_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("fresh", qid, reply) == outcome


def test_a_held_out_set_with_a_tune_question_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "fresh.yaml"
    path.write_text(
        "declines: ['\\bI don''t know']\n"
        "questions:\n"
        "  - {id: a, class: time, split: tune, q: 'time?', any_of: ['{time}']}\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="a: split should be held") as refused:
        load_set(path, all_held=True, min_questions=1)
    assert "no question of class" in str(refused.value)
