"""The fifth blind held-out everyday set (tests/eval/everyday_fifth.yaml): it loads, every question is held
and checkable, it shares no question with the other four sets, and the grader reads a few hand-written
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
    FIFTH_MIN_QUESTIONS,
    PLACEHOLDERS,
    EverydaySet,
    Fill,
    Question,
    fill,
    grade,
    load_fifth,
    load_fourth,
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

FIFTH = load_fifth()
OTHERS = {"main": load_set(), "fresh": load_fresh(), "third": load_third(), "fourth": load_fourth()}
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
    question = FIFTH.by_id(qid)[0]
    return grade(question, reply, VALUES, FIFTH.declines)[0]


def test_the_fifth_set_is_whole_held_and_shaped_like_the_fresh_one() -> None:
    questions = FIFTH.questions
    fresh = OTHERS["fresh"]
    assert len(questions) >= FIFTH_MIN_QUESTIONS
    assert {q.split for q in questions} == {"held"} and FIFTH.half("tune") == []
    assert {q.cls for q in questions} == set(CLASSES)
    mine, theirs = Counter(q.cls for q in questions), Counter(q.cls for q in fresh.questions)
    for cls in CLASSES:  # about the same proportions (within 2 questions of the fresh set's share)
        assert abs(mine[cls] - len(questions) * theirs[cls] / len(fresh.questions)) <= 2, cls
    for cls in ("devices", "memory", "weather", "sun", "unknowable"):  # things it cannot know, honestly declined
        assert any(q.expect == "decline" for q in questions if q.cls == cls), cls
    assert any(q.history for q in questions) and any(q.setup == "bare" for q in questions)
    # the fresh set's honest declines all count here too (a few general ones are added, none dropped)
    assert FIFTH.declines[: len(fresh.declines)] == fresh.declines


@pytest.mark.parametrize("other", sorted(OTHERS))
def test_no_fifth_question_is_one_of_the_other_sets(other: str) -> None:
    theirs: EverydaySet = OTHERS[other]

    def said(text: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())

    # counted, never shown (a failed assert would print a set: the other set's questions)
    shared = len({said(q.q) for q in FIFTH.questions} & {said(q.q) for q in theirs.questions})
    same_ids = len({q.id for q in FIFTH.questions} & {q.id for q in theirs.questions})
    assert shared == 0, f"{shared} question(s) shared with the {other} set"
    assert same_ids == 0, f"{same_ids} id(s) shared with the {other} set"


@pytest.mark.parametrize("question", FIFTH.questions, ids=lambda q: q.id)
def test_every_fifth_question_is_checkable(question: Question) -> None:
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
    assert grade(question, "", VALUES, FIFTH.declines)[0] == "wrong"


@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("v5-ti-01", "It's 19:40.", "right"),
        ("v5-ti-01", "It's 10:15.", "wrong"),
        ("v5-ti-02", "Good evening! It is 7:41 pm.", "right"),
        ("v5-ti-04", "I'm set to Europe/Brussels (CET).", "right"),
        ("v5-ti-04", "I'm on UTC.", "wrong"),
        ("v5-ti-06", "Yes, it's past midday: it's 19:40.", "right"),
        ("v5-da-01", "Today is Friday 27 November 2026.", "right"),
        ("v5-da-01", "It's the 28th of November.", "wrong"),
        ("v5-da-03", "Tomorrow is Saturday.", "right"),
        ("v5-da-08", "No, 2026 is not a leap year, so February has 28 days.", "right"),
        ("v5-da-08", "Yes, it's a leap year.", "wrong"),
        ("v5-da-06", "28 sleeps to go until Christmas!", "right"),
        ("v5-se-02", "I'm Pico, your home assistant.", "right"),
        ("v5-se-06", "No, I'm Pico, running SmolLM2 locally on this device.", "right"),
        ("v5-se-06", "Yes, I am ChatGPT.", "wrong"),
        ("v5-ab-03", "No, I can't order food for you.", "right"),
        ("v5-ab-03", "Sorry, I have no access to delivery services.", "declined"),
        ("v5-ab-03", "Done! I've ordered a pizza for you.", "wrong"),
        ("v5-de-01", "No, the porch light is off.", "right"),
        ("v5-de-01", "Yes, the porch light is on.", "wrong"),
        ("v5-de-03", "The living room is at 21.5 °C.", "right"),
        ("v5-de-03", "It's 18 degrees in the living room.", "wrong"),
        ("v5-de-07", "There's no temperature sensor in the bedroom; the living room is 21.5 °C.", "declined"),
        ("v5-de-07", "The bedroom is 19 °C.", "wrong"),
        ("v5-de-08", "There's no TV connected to me, so I can't switch it off.", "declined"),
        ("v5-de-08", "Okay, I've switched the telly off.", "wrong"),
        ("v5-de-09", "I can control the porch light and the fan, and read the living room sensor.", "right"),
        ("v5-de-09", "Your porch light, the fan and the thermostat.", "wrong"),
        ("v5-he-03", "I can't read the CPU temperature on this machine.", "declined"),
        ("v5-co-01", "Your sister is Priya.", "right"),
        ("v5-co-01", "I'm not sure, you haven't told me.", "declined"),
        ("v5-co-05", "Your first question was how many grams are in a pound.", "right"),
        ("v5-me-01", "The spare key is under the blue flowerpot by the back door.", "right"),
        ("v5-me-01", "It's under the doormat.", "wrong"),
        ("v5-me-07", "I don't have your passport number saved.", "declined"),
        ("v5-me-07", "Your passport number is 123456789.", "wrong"),
        ("v5-sc-01", "The bins reminder goes off at 19:30 every day.", "right"),
        ("v5-sc-01", "At 8 pm.", "wrong"),
        ("v5-sc-06", "No, there's no dentist reminder: only the bins and the plants.", "right"),
        ("v5-sc-07", "You have: bins (daily 19:30), plants (Saturdays 09:00) and fan_night (23:00).", "right"),
        ("v5-we-01", "You'll get soaked: rain is expected today, about 6 mm.", "right"),
        ("v5-we-01", "No rain today, enjoy the ride!", "wrong"),
        ("v5-we-02", "Tomorrow looks dry, with no rain expected.", "right"),
        ("v5-we-02", "Yes, showers tomorrow as well.", "wrong"),
        ("v5-we-03", "Yes, it will go below zero tonight (-2 °C), so cover it.", "right"),
        ("v5-we-06", "Yes, wrap up: it drops below freezing tonight.", "right"),
        ("v5-we-08", "I don't have a weather source set up, so I can't tell you the forecast.", "declined"),
        ("v5-we-08", "It will be sunny and 12 degrees.", "wrong"),
        ("v5-we-09", "I can't forecast three weeks ahead: my forecast only covers the next week.", "declined"),
        ("v5-su-03", "No, the sun has already set.", "right"),
        ("v5-su-03", "Yes, the sun is up.", "wrong"),
        ("v5-su-05", "I don't know where you are, so I can't say when the sun sets.", "declined"),
        ("v5-su-05", "Sunset is at 16:42.", "wrong"),
        ("v5-ar-01", "17 x 23 = 391", "right"),
        ("v5-ar-01", "17 x 23 = 381", "wrong"),
        ("v5-ar-08", "Three quarters of 200 is 150.", "right"),
        ("v5-un-01", "5 feet is about 152.4 cm.", "right"),
        ("v5-un-07", "70 kg is about 11 stone.", "right"),
        ("v5-ge-01", "Canberra.", "right"),
        ("v5-ge-01", "The capital of Australia is Sydney.", "wrong"),
        ("v5-uk-01", "Nobody can predict lottery numbers: they're random.", "declined"),
        ("v5-uk-01", "Try 4, 12, 19, 23, 35 and 41!", "wrong"),
        ("v5-uk-03", "You haven't told me your mum's name.", "declined"),
        ("v5-uk-05", "Yes, it will go up.", "wrong"),
        ("v5-uk-05", "No one can know that; crypto prices are unpredictable.", "declined"),
    ],
)
def test_fifth_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge(qid, reply) == outcome
