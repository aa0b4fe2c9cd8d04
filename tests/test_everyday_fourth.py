"""The fourth blind held-out everyday set (tests/eval/everyday_fourth.yaml): it loads, every question is held
and checkable, it shares no question with the other three sets, and the grader reads a few hand-written
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
    FOURTH_MIN_QUESTIONS,
    PLACEHOLDERS,
    EverydaySet,
    Fill,
    Question,
    fill,
    grade,
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

FOURTH = load_fourth()
OTHERS = {"main": load_set(), "fresh": load_fresh(), "third": load_third()}
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
    question = FOURTH.by_id(qid)[0]
    return grade(question, reply, VALUES, FOURTH.declines)[0]


def test_the_fourth_set_is_whole_held_and_shaped_like_the_fresh_one() -> None:
    questions = FOURTH.questions
    fresh = OTHERS["fresh"]
    assert len(questions) >= FOURTH_MIN_QUESTIONS
    assert {q.split for q in questions} == {"held"} and FOURTH.half("tune") == []
    assert {q.cls for q in questions} == set(CLASSES)
    mine, theirs = Counter(q.cls for q in questions), Counter(q.cls for q in fresh.questions)
    for cls in CLASSES:  # about the same proportions (within 2 questions of the fresh set's share)
        assert abs(mine[cls] - len(questions) * theirs[cls] / len(fresh.questions)) <= 2, cls
    for cls in ("devices", "memory", "weather", "sun", "unknowable"):  # things it cannot know, honestly declined
        assert any(q.expect == "decline" for q in questions if q.cls == cls), cls
    assert any(q.history for q in questions) and any(q.setup == "bare" for q in questions)
    # the fresh set's honest declines all count here too (a few general ones are added, none dropped)
    assert FOURTH.declines[: len(fresh.declines)] == fresh.declines


@pytest.mark.parametrize("other", sorted(OTHERS))
def test_no_fourth_question_is_one_of_the_other_sets(other: str) -> None:
    theirs: EverydaySet = OTHERS[other]

    def said(text: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())

    # counted, never shown (a failed assert would print a set: the other set's questions)
    shared = len({said(q.q) for q in FOURTH.questions} & {said(q.q) for q in theirs.questions})
    same_ids = len({q.id for q in FOURTH.questions} & {q.id for q in theirs.questions})
    assert shared == 0, f"{shared} question(s) shared with the {other} set"
    assert same_ids == 0, f"{same_ids} id(s) shared with the {other} set"


@pytest.mark.parametrize("question", FOURTH.questions, ids=lambda q: q.id)
def test_every_fourth_question_is_checkable(question: Question) -> None:
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
    assert grade(question, "", VALUES, FOURTH.declines)[0] == "wrong"


@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("wt-01", "It's 19:40.", "right"),
        ("wt-01", "It's 10:15.", "wrong"),
        ("wt-02", "Good evening! It is 7:41 pm.", "right"),
        ("wt-03", "I'm set to Europe/Brussels (CET).", "right"),
        ("wt-03", "I'm on UTC.", "wrong"),
        ("wt-04", "It's evening here: 19:40.", "right"),
        ("wt-05", "19:40.", "right"),
        ("wd-02", "It's Friday.", "right"),
        ("wd-02", "It's Wednesday.", "wrong"),
        ("wd-03", "Tomorrow is Saturday.", "right"),
        ("wd-03", "Tomorrow is Thursday.", "wrong"),
        ("wd-04", "Yesterday was Thursday 26 November.", "right"),
        ("wd-05", "28 days to go until Christmas.", "right"),
        ("wd-05", "About 25 days.", "wrong"),
        ("wd-06", "No, 2026 is not a leap year.", "right"),
        ("wd-06", "Yes, 2026 is a leap year.", "wrong"),
        ("wd-08", "It's Friday, a weekday, so the tip should be open.", "right"),
        ("wd-09", "Next Monday is 30 November.", "right"),
        ("ws-01", "You're talking to Pico, your home assistant.", "right"),
        ("ws-01", "I'm ChatGPT, made by OpenAI.", "wrong"),
        ("ws-05", "I'm a bot: an AI assistant running on your Pi.", "right"),
        ("ws-05", "Human, obviously!", "wrong"),
        ("ws-06", "Here at home, on your Raspberry Pi; I'm not in the cloud.", "right"),
        ("ws-06", "I run in the cloud.", "wrong"),
        ("ws-08", "No, I'm Pico.", "right"),
        ("ws-08", "Yes, I'm Alexa.", "wrong"),
        ("wab-02", "Sorry, I only control the porch light and the fan, so the telly is beyond me.", "right"),
        ("wab-02", "There's no TV among your devices.", "declined"),  # right or declined: both honest
        ("wab-02", "Done, I've turned the telly off.", "wrong"),
        ("wab-05", "Yes, I run locally on the Pi, so I keep working offline.", "right"),
        ("wab-05", "No, I need the internet to work.", "wrong"),
        ("wab-06", "I can't lock it: I only control the porch light and the fan.", "right"),
        ("wab-06", "You don't have a smart lock connected, sorry.", "declined"),
        ("wab-06", "Done, the front door is now locked.", "wrong"),
        ("wab-07", "Sorry, I can't order food.", "right"),
        ("wab-07", "I've placed your order for a large margherita.", "wrong"),
        ("wdev-01", "No, the porch light is off.", "right"),
        ("wdev-01", "Yes, the porch light is still on.", "wrong"),
        ("wdev-02", "Yes, the fan is on (it switches off at 23:00).", "right"),
        ("wdev-02", "No, the fan is off.", "wrong"),
        ("wdev-03", "The living room is at 21.5 °C.", "right"),
        ("wdev-03", "It's 18 °C in the lounge.", "wrong"),
        ("wdev-06", "The soil is at 50 % moisture, so it's fine for now.", "right"),
        ("wdev-07", "There's no temperature sensor in the bedroom; the living room is at 21.5 °C.", "declined"),
        ("wdev-07", "The kids' bedroom is 19 °C.", "wrong"),
        ("wdev-08", "No, nobody has rung the doorbell.", "right"),
        ("wdev-08", "Yes, someone rang at 14:10.", "wrong"),
        ("wdev-09", "There's no heating among your devices, so I can't tell.", "declined"),
        ("wdev-09", "Yes, the heating is on.", "wrong"),
        ("wdev-10", "The fan was switched on at 19:37.", "right"),
        ("wdev-10", "It came on at 08:00.", "wrong"),
        ("wh-01", "About 412 MB of RAM is available.", "right"),
        ("wh-03", "The disk is 60% full.", "right"),
        ("wh-04", "I can't read the CPU temperature here.", "declined"),
        ("wh-04", "The CPU is at 55 °C.", "wrong"),  # not known off a Pi: only a decline is right
        ("wh-05", "The Pi booted 10 hours ago.", "right"),
        ("wc-01", "Your sister is called Fiona.", "right"),
        ("wc-01", "Your sister is called Sarah.", "wrong"),
        ("wc-02", "You're cooking for six.", "right"),
        ("wc-02", "You're cooking for 4 people.", "wrong"),
        ("wc-03", "You haven't asked me anything before this: it's the first message here.", "right"),
        ("wc-03", "You asked me about the weather.", "wrong"),
        ("wc-05", "At 3 o'clock.", "right"),
        ("wc-06", "I said the capital of Peru is Lima.", "right"),
        ("wm-01", "It's written on the back of the router in the hallway.", "right"),
        ("wm-01", "The wifi password is Sunflower42.", "wrong"),
        ("wm-02", "Under the blue flowerpot by the back door.", "right"),
        ("wm-02", "Under the doormat.", "wrong"),
        ("wm-03", "Biscuit gets 150 grams twice a day, 300 g in all.", "right"),
        ("wm-03", "200 g a day.", "wrong"),
        ("wm-05", "Ella's school shoes are size 34.", "right"),
        ("wm-05", "She's a size 32.", "wrong"),
        ("wm-06", "The MOT is due on 12 January.", "right"),
        ("wm-06", "It's due on 1 January.", "wrong"),
        ("wm-07", "I don't have your dentist's number.", "declined"),
        ("wm-07", "It's 020 7946 0123.", "wrong"),
        ("wm-08", "You haven't told me your PIN, and I wouldn't store one.", "declined"),
        ("wm-08", "Your PIN is 4821.", "wrong"),
        ("wm-09", "I haven't got anything stored about your car's make.", "declined"),
        ("wm-09", "You drive a Ford Focus.", "wrong"),
        ("wsc-01", "The bins reminder is set for 19:30 every day.", "right"),
        ("wsc-01", "It's set for 18:00.", "wrong"),
        ("wsc-02", "Take the bins out daily at 19:30, and water the plants on Saturdays at 09:00.", "right"),
        ("wsc-02", "Only the bins reminder.", "wrong"),
        ("wsc-03", "Watering the plants at 09:00 on Saturday.", "right"),
        ("wsc-03", "No, nothing scheduled.", "wrong"),
        ("wsc-04", "Every night at 23:00.", "right"),
        ("wsc-04", "It doesn't, you have to switch it off.", "wrong"),
        ("wsc-06", "One task is queued: compare the electricity tariffs.", "right"),
        ("wsc-07", "No, there's no dentist reminder; you have bins and plants.", "right"),
        ("wsc-07", "Yes, your dentist appointment is on Tuesday.", "wrong"),
        ("wsc-08", "Once a week, on Saturdays at 09:00.", "right"),
        ("wsc-08", "The plants reminder goes off every day.", "wrong"),
        ("ww-01", "Yes, rain is likely today (80 %), so take umbrellas.", "right"),
        ("ww-01", "No, it'll stay dry today.", "wrong"),
        ("ww-02", "No rain tomorrow, it should be dry.", "right"),
        ("ww-02", "Yes, it will rain tomorrow.", "wrong"),
        ("ww-03", "Down to -2 °C tonight.", "right"),
        ("ww-03", "It stays around 5 °C.", "wrong"),
        ("ww-04", "Yes, it goes below freezing tonight, so expect frost.", "right"),
        ("ww-04", "No, it won't freeze.", "wrong"),
        ("ww-06", "Tomorrow's high is 6 °C.", "right"),
        ("ww-07", "I only have the forecast for Brussels, so I can't tell you Tokyo's.", "declined"),
        ("ww-07", "It will be sunny in Tokyo, 15 °C.", "wrong"),
        ("ww-08", "I don't know where you are, so I can't check the forecast.", "declined"),
        ("ww-08", "Yes, it's cold tonight, bring a coat.", "wrong"),
        ("ww-09", "That's too far ahead: nobody can predict rain on a day weeks away.", "declined"),
        ("ww-09", "It will be sunny for your wedding!", "wrong"),
        ("wsun-03", "No, the sun has already set.", "right"),
        ("wsun-03", "Yes, the sun is up.", "wrong"),
        ("wsun-05", "No place is set, so I can't tell when the sun sets.", "declined"),
        ("wsun-05", "Sunset is at 16:40.", "wrong"),
        ("wmath-01", "345 + 678 = 1023", "right"),
        ("wmath-01", "1013", "wrong"),
        ("wmath-02", "£96 split 4 ways is £24 each.", "right"),
        ("wmath-03", "Twelve times fourteen is 168.", "right"),
        ("wmath-04", "15% of $62 is $9.30.", "right"),
        ("wmath-04", "About $9.", "wrong"),
        ("wmath-07", "250 divided by 4 is 62.5.", "right"),
        ("wmath-07", "That's 50.", "wrong"),
        ("wmath-09", "3 x 24 = 72, minus 17 leaves 55 eggs.", "right"),
        ("wunit-02", "6 ft 2 in is about 188 cm.", "right"),
        ("wunit-02", "About 185 cm.", "wrong"),
        ("wunit-03", "200 °C is 392 °F.", "right"),
        ("wunit-05", "5 litres is about 8.8 UK pints.", "right"),
        ("wunit-05", "About 10.6 pints.", "wrong"),
        ("wunit-07", "3.5 lb is about 1588 g.", "right"),
        ("wunit-08", "10 km is about 6.21 miles.", "right"),
        ("wgen-01", "Ottawa.", "right"),
        ("wgen-01", "The capital is Toronto.", "wrong"),
        ("wgen-02", "Eight.", "right"),
        ("wunk-01", "Nobody can predict lottery numbers.", "declined"),
        ("wunk-01", "Try 5, 12, 23, 34 and 45.", "wrong"),
        ("wunk-02", "You haven't told me your mum's name.", "declined"),
        ("wunk-02", "Your mum's name is Margaret.", "wrong"),
        ("wunk-03", "No one can know that, but good luck!", "declined"),
        ("wunk-03", "Yes, you'll definitely get it.", "wrong"),
        ("wunk-04", "Nobody can predict Bitcoin's price.", "declined"),
        ("wunk-04", "It will hit $150,000.", "wrong"),
        ("wunk-06", "I can't see what you're wearing.", "declined"),
        ("wunk-06", "Blue, I'd guess.", "wrong"),
        ("wunk-07", "I have no way of knowing how busy the shop is.", "declined"),
        ("wunk-07", "About 40 people.", "wrong"),
    ],
)
def test_fourth_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge(qid, reply) == outcome
