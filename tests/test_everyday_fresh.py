"""The fresh, blind held-out everyday set (tests/eval/everyday_fresh.yaml): it loads, every question is held
and checkable, and the grader reads a few hand-written replies to it as a person would.

"Checkable": every placeholder a question names is one the fixture fills (tests/eval/everyday.py
PLACEHOLDERS), and, filled from a fixed moment, the home's values, the sun and a forecast like the
fixture's, every pattern is a regular expression and no question is left without a source (skipped).
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.eval.everyday import (
    CLASSES,
    FRESH_MIN_QUESTIONS,
    PLACEHOLDERS,
    Fill,
    Question,
    fill,
    grade,
    load_fresh,
    load_set,
    skip_reason,
)
from tests.eval.everyday_values import (
    INVENTED_DEVICES,
    INVENTED_TOOLS,
    WEATHER_CLAIM,
    clock_fills,
    forecast_fills,
    sun_fills,
)

FRESH = load_fresh()
MAIN = load_set()
BRUSSELS = ZoneInfo("Europe/Brussels")
EVENING = datetime(2026, 11, 27, 19, 40, 10, tzinfo=BRUSSELS)  # a Friday evening, after sunset
FORECAST = {  # the fixture's script: today wet, tonight below zero, tomorrow dry and cold
    "current": {"temperature_2m": 7.5},
    "hourly": {"time": [f"2026-11-28T{h:02d}:00" for h in range(0, 6)], "temperature_2m": [-1.0, -2.0] * 3},
    "daily": {
        "time": ["2026-11-27", "2026-11-28"],
        "temperature_2m_max": [9.0, 6.0],
        "temperature_2m_min": [3.0, -2.0],
        "precipitation_sum": [6.0, 0.0],
        "precipitation_probability_max": [80, 5],
    },
}
HOME = {  # what the fixture reads from the running appliance (tests/eval/everyday_home.py), fixed here
    "name": Fill(r"\bPico\b"),
    "model": Fill(r"SmolLM2|smollm2"),
    "version": Fill(r"(?<![\d.])0\.1\.0(?![\d.])"),
    "uptime": Fill(numbers=(3.0,)),
    "tool": Fill(r"\bset_device\b"),
    "invented_tools": Fill(INVENTED_TOOLS),
    "invented_devices": Fill(INVENTED_DEVICES),
    "fan_switched_on": Fill(numbers=(19 * 60 + 37,)),
    "living_room_temperature": Fill(r"(?<![\d.])(?:21\.5|21|22)(?![\d])", (21.5,)),
    "living_room_humidity": Fill(r"\b45\b", (45.0,)),
    "living_room_pressure": Fill(r"\b1013(?:\.25)?\b", (1013.25,)),
    "soil_level": Fill(r"\b50\b", (50.0,)),
    "memory_available_mb": Fill(numbers=(412.0,)),
    "memory_total_mb": Fill(numbers=(3796.0,)),
    "disk_free_mb": Fill(numbers=(20_000.0,)),
    "disk_percent": Fill(numbers=(60.0, 40.0)),
    "cpu_temperature": Fill(),  # off a Pi: only a decline is right
    "load": Fill(numbers=(0.4,)),
    "throttled_answer": Fill(),
    "pi_uptime": Fill(numbers=(600.0,)),
    "next_reminder": Fill(r"\bplants\b"),
    "weather_claim": Fill(WEATHER_CLAIM),
}
VALUES = (
    clock_fills(EVENING, EVENING.replace(minute=41))
    | HOME
    | sun_fills(EVENING, 50.85, 4.35)
    | forecast_fills(FORECAST, EVENING)
)


def judge(qid: str, reply: str) -> str:
    question = FRESH.by_id(qid)[0]
    return grade(question, reply, VALUES, FRESH.declines)[0]


def test_the_fresh_set_is_whole_held_and_shaped_like_the_main_one() -> None:
    questions = FRESH.questions
    assert len(questions) >= FRESH_MIN_QUESTIONS
    assert {q.split for q in questions} == {"held"} and FRESH.half("tune") == []
    assert {q.cls for q in questions} == set(CLASSES)
    mine, main = Counter(q.cls for q in questions), Counter(q.cls for q in MAIN.questions)
    for cls in CLASSES:  # about the same proportions (within 3 questions of the main set's share)
        assert abs(mine[cls] - len(questions) * main[cls] / len(MAIN.questions)) <= 3, cls
    assert any(q.expect == "decline" for q in questions if q.cls in ("memory", "weather", "unknowable"))
    assert any(q.setup == "bare" for q in questions)
    assert FRESH.declines == MAIN.declines  # the same honest declines count


def test_no_fresh_question_is_one_of_the_main_sets() -> None:
    def said(text: str) -> str:
        return " ".join(text.lower().strip(" ?.!").split())

    assert not {said(q.q) for q in FRESH.questions} & {said(q.q) for q in MAIN.questions}
    assert not {q.id for q in FRESH.questions} & {q.id for q in MAIN.questions}


@pytest.mark.parametrize("question", FRESH.questions, ids=lambda q: q.id)
def test_every_fresh_question_is_checkable(question: Question) -> None:
    assert question.placeholders() <= set(PLACEHOLDERS)
    assert question.placeholders() <= set(VALUES), question.placeholders() - set(VALUES)
    assert skip_reason(question, VALUES) == ""
    for near in question.near:  # a quantity's placeholder has numbers, or is unknown here (declined is right)
        name = str(near.value).strip("{}")
        got = VALUES.get(name, Fill()) if str(near.value).startswith("{") else Fill(numbers=(1.0,))
        assert got.numbers or not got.known, f"{near.value} is a pattern, not a number: use any_of"
    for pattern in (*question.any_of, *question.all_of, *question.must_not):
        filled = fill(pattern, VALUES)
        if filled is not None:  # None: a value the fixture cannot know here (declined is right)
            re.compile(filled)
    # an empty reply is never right, and neither is a reply made only of a wrong claim
    assert grade(question, "", VALUES, FRESH.declines)[0] == "wrong"


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
    assert judge(qid, reply) == outcome


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
