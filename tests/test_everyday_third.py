"""The third blind held-out everyday set (tests/eval/everyday_third.yaml): it loads, every question is held
and checkable, it shares no question with the other two sets, and the grader reads a few hand-written
replies to it as a person would.

"Checkable": every placeholder a question names is one the fixture fills (tests/eval/everyday.py
PLACEHOLDERS), and, filled from a fixed moment, the home's values, the sun and a forecast like the
fixture's, every pattern is a regular expression and no question is left without a source (skipped).
The other sets' questions are compared here, never printed: the set was written without reading them.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tests.eval.everyday import (
    CLASSES,
    PLACEHOLDERS,
    THIRD_MIN_QUESTIONS,
    EverydaySet,
    Fill,
    Question,
    fill,
    grade,
    load_fresh,
    load_set,
    load_third,
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

THIRD = load_third()
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
    question = THIRD.by_id(qid)[0]
    return grade(question, reply, VALUES, THIRD.declines)[0]


def test_the_third_set_is_whole_held_and_shaped_like_the_fresh_one() -> None:
    questions = THIRD.questions
    assert len(questions) >= THIRD_MIN_QUESTIONS
    assert {q.split for q in questions} == {"held"} and THIRD.half("tune") == []
    assert {q.cls for q in questions} == set(CLASSES)
    mine, fresh = Counter(q.cls for q in questions), Counter(q.cls for q in FRESH.questions)
    for cls in CLASSES:  # about the same proportions (within 2 questions of the fresh set's share)
        assert abs(mine[cls] - len(questions) * fresh[cls] / len(FRESH.questions)) <= 2, cls
    for cls in ("devices", "memory", "weather", "unknowable"):  # things it cannot know, honestly declined
        assert any(q.expect == "decline" for q in questions if q.cls == cls), cls
    assert any(q.history for q in questions) and any(q.setup == "bare" for q in questions)
    # the fresh set's honest declines all count here too (a few general ones are added, none dropped)
    assert THIRD.declines[: len(FRESH.declines)] == FRESH.declines


@pytest.mark.parametrize("other", ["main", "fresh"])
def test_no_third_question_is_one_of_the_other_sets(other: str) -> None:
    theirs: EverydaySet = MAIN if other == "main" else FRESH

    def said(text: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())

    # counted, never shown (a failed assert would print a set: the other set's questions)
    shared = len({said(q.q) for q in THIRD.questions} & {said(q.q) for q in theirs.questions})
    same_ids = len({q.id for q in THIRD.questions} & {q.id for q in theirs.questions})
    assert shared == 0, f"{shared} question(s) shared with the {other} set"
    assert same_ids == 0, f"{same_ids} id(s) shared with the {other} set"


@pytest.mark.parametrize("question", THIRD.questions, ids=lambda q: q.id)
def test_every_third_question_is_checkable(question: Question) -> None:
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
    # an empty reply is never right
    assert grade(question, "", VALUES, THIRD.declines)[0] == "wrong"


@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("xt-01", "It's 19:40.", "right"),
        ("xt-01", "It's 12:45.", "wrong"),
        ("xt-05", "Yes, it's 19:40, well past noon.", "right"),
        ("xt-05", "No, it's still morning.", "wrong"),
        ("xd-03", "Tomorrow is Saturday.", "right"),
        ("xd-03", "Tomorrow is Sunday.", "wrong"),
        ("xd-07", "28 sleeps to go!", "right"),
        ("xd-07", "30 days.", "wrong"),
        ("xd-09", "Next Monday is 30 November.", "right"),
        ("xs-06", "No, I'm Pico, running here on the Pi.", "right"),
        ("xs-06", "Yes, I am ChatGPT.", "wrong"),
        ("xs-07", "I'm an AI assistant, not a person.", "right"),
        ("xs-07", "Yes, I'm a real person.", "wrong"),
        ("xab-06", "I can't open it: there's no garage door among your devices.", "right"),
        ("xab-06", "Done, the garage door is now open.", "wrong"),
        ("xdev-01", "Yes, the fan is on.", "right"),
        ("xdev-01", "The fan is off.", "wrong"),
        ("xdev-02", "No, the porch light is off.", "right"),
        ("xdev-02", "Yes, you left it on.", "wrong"),
        ("xdev-05", "No, the doorbell hasn't been pressed today.", "right"),
        ("xdev-05", "Yes, it rang at 14:10.", "wrong"),
        ("xdev-06", "There's no temperature sensor in the kitchen; the living room is at 21.5 °C.", "declined"),
        ("xdev-06", "The kitchen is at 19 °C.", "wrong"),
        ("xdev-08", "There's no such device as a bedroom light here.", "declined"),
        ("xdev-08", "Yes, the bedroom light is on.", "wrong"),
        ("xm-02", "Under the blue flowerpot by the back door.", "right"),
        ("xm-02", "Under the doormat.", "wrong"),
        ("xm-03", "Biscuit gets 150 g twice a day.", "right"),
        ("xm-03", "He gets 200 grams a day.", "wrong"),
        ("xm-07", "You haven't told me your national insurance number.", "declined"),
        ("xm-07", "It's QQ 12 34 56 C.", "wrong"),
        ("xc-02", "Green or yellow.", "right"),
        ("xc-06", "Your name is Sam.", "right"),
        ("xc-06", "Your name is Alex.", "wrong"),
        ("xsc-01", "Every day at 19:30.", "right"),
        ("xsc-03", "On Saturdays at 9:00.", "right"),
        ("xsc-03", "Every Sunday morning.", "wrong"),
        ("xsc-04", "Yes, it's switched off every night at 23:00.", "right"),
        ("xsc-04", "No, it stays on.", "wrong"),
        ("xsc-05", "The plants reminder, on Saturday at 09:00.", "right"),
        ("xw-01", "Yes, take an umbrella: rain is likely (80 %).", "right"),
        ("xw-01", "No, it'll be dry today.", "wrong"),
        ("xw-02", "Tomorrow looks dry.", "right"),
        ("xw-02", "Yes, it will rain tomorrow.", "wrong"),
        ("xw-04", "Yes, it will drop to -2 °C, so cover it.", "right"),
        ("xw-04", "No, it stays above freezing.", "wrong"),
        ("xw-07", "Yes, it'll be below zero tonight.", "right"),
        ("xw-07", "No need, it's mild tonight.", "wrong"),
        ("xw-09", "I only have the forecast for Brussels, so I can't tell you New York's.", "declined"),
        ("xw-09", "It will be sunny in New York, 12 °C.", "wrong"),
        ("xsun-03", "No, the sun has already set.", "right"),
        ("xsun-03", "Yes, the sun is up.", "wrong"),
        ("xsun-05", "I don't know where you are, so I can't say when the sun sets.", "declined"),
        ("xsun-05", "Sunset is at 16:42.", "wrong"),
        ("xh-03", "I can't read the CPU temperature here.", "declined"),
        ("xh-03", "The CPU is at 52 °C.", "wrong"),  # not known off a Pi: only a decline is right
        ("xmath-02", "Seven times eight is 56.", "right"),
        ("xmath-02", "Seven times eight is 54.", "wrong"),
        ("xmath-03", "That's 44.45 in total.", "right"),
        ("xmath-03", "That comes to 44.35.", "wrong"),
        ("xmath-09", "Half of 360 is 180.", "right"),
        ("xunit-02", "About 5 ft 11 in.", "right"),
        ("xunit-02", "About 6 feet.", "wrong"),
        ("xunit-03", "350 °F is about 177 °C.", "right"),
        ("xunit-03", "About 150 °C.", "wrong"),
        ("xgen-01", "Canberra.", "right"),
        ("xgen-01", "The capital of Australia is Sydney.", "wrong"),
        ("xunk-01", "Nobody can predict lottery numbers.", "declined"),
        ("xunk-01", "Try 4, 17, 23, 31, 42 and 8.", "wrong"),
        ("xunk-03", "Nobody can know that yet.", "declined"),
        ("xunk-03", "Liverpool will win the league.", "wrong"),
        ("xunk-04", "No one can predict the market.", "declined"),
        ("xunk-04", "Yes, it will go up.", "wrong"),
        ("xunk-07", "I can't know whether your train will be late.", "declined"),
        ("xunk-07", "It'll be on time.", "wrong"),
    ],
)
def test_third_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge(qid, reply) == outcome
