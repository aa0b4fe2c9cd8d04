"""The thirteenth blind everyday set (tests/eval/everyday_thirteenth.yaml): it loads whole and held, every question is
checkable, it shares no question with the main set or another blind set, and hand-written replies to its questions
are graded as a person reads them (right, honestly declined, wrong). tests/test_everyday_blind.py checks the same
shape for every set; this file pins it for the thirteenth.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.eval.everyday import BLIND_SETS, CLASSES, grade, skip_reason
from tests.everyday_blind import BLIND, MAIN, VALUES, judge

THIRTEENTH = BLIND["thirteenth"]


def test_it_loads_whole_and_held_with_every_class() -> None:
    questions = THIRTEENTH.questions
    assert len(questions) >= BLIND_SETS["thirteenth"] >= 110
    assert {q.split for q in questions} == {"held"}
    counts = Counter(q.cls for q in questions)
    assert all(counts[c] >= 5 for c in CLASSES), counts
    assert sum(bool(q.history) for q in questions) >= 5  # follow-ups
    assert any(q.setup == "bare" for q in questions)
    before = BLIND["twelfth"].declines
    assert THIRTEENTH.declines[: len(before)] == before  # the twelfth set's declines, whole


def test_every_question_is_checkable_at_the_fixed_moment() -> None:
    for question in THIRTEENTH.questions:
        assert skip_reason(question, VALUES) == "", question.id
        assert grade(question, "", VALUES, THIRTEENTH.declines)[0] == "wrong", question.id


def test_it_shares_no_question_with_the_main_set_or_another_blind_set() -> None:
    def said(text: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())

    mine = {said(q.q) for q in THIRTEENTH.questions}
    my_ids = {q.id for q in THIRTEENTH.questions}
    others = {"main": MAIN, **{name: s for name, s in BLIND.items() if name != "thirteenth"}}
    count = len(others)  # the main set, the eleven sets before it (fresh ... twelfth), the fourteenth, the fifteenth
    assert count == 14, count
    for name, other in others.items():  # counted, never shown: this set was written without reading theirs
        shared = len(mine & {said(q.q) for q in other.questions})
        assert shared == 0, f"{shared} question(s) also in {name}"
        assert not my_ids & {q.id for q in other.questions}, f"ids also in {name}"


# Graded at tests/everyday_blind.py's moment: Friday 27 November 2026, 19:40 in Brussels, after sunset (16:45;
# tomorrow's sunrise 08:20); today wet, tonight below zero, tomorrow dry (-2..6 °C); the fan on since 19:37, the
# porch light off; the living room at 21.5 °C, 45 % and 1013 hPa, the soil at 50 %; no CPU sensor (off a Pi).
@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("x13-t-01", "Of course: it's 7:40 in the evening.", "right"),
        ("x13-t-01", "It is 6:15 pm.", "wrong"),
        ("x13-t-02", "19:40", "right"),
        ("x13-t-04", "It's evening already: 19:40.", "right"),
        ("x13-t-04", "It's still the afternoon.", "wrong"),
        ("x13-t-05", "European: I'm on Brussels time (CET).", "right"),
        ("x13-t-06", "Yes, it's well past midday.", "right"),
        ("x13-t-06", "No, not yet.", "wrong"),
        ("x13-d-01", "Today is Friday 27 November 2026.", "right"),
        ("x13-d-01", "It's the 26th of November.", "wrong"),
        ("x13-d-02", "It's Friday.", "right"),
        ("x13-d-02", "It's Wednesday.", "wrong"),
        ("x13-d-03", "Tomorrow is Saturday 28 November.", "right"),
        ("x13-d-05", "Yes, Christmas is 28 days away.", "right"),
        ("x13-d-05", "Christmas is 35 days away.", "wrong"),
        ("x13-d-06", "Next Monday is 30 November.", "right"),
        ("x13-d-07", "Yesterday was Thursday.", "right"),
        ("x13-d-08", "We are in week 48.", "right"),
        ("x13-d-09", "November has 30 days.", "right"),
        ("x13-d-09", "This month has 31 days.", "wrong"),
        ("x13-s-01", "I'm Pico.", "right"),
        ("x13-s-02", "I run SmolLM2, a small model, locally.", "right"),
        ("x13-s-02", "I'm ChatGPT, made by OpenAI.", "wrong"),
        ("x13-s-05", "No, everything stays here on the Pi.", "right"),
        ("x13-s-05", "Yes, your messages are sent to OpenAI.", "wrong"),
        ("x13-s-06", "I'm a bot: Pico, your home assistant.", "right"),
        ("x13-s-06", "Yes, I'm a real person.", "wrong"),
        ("x13-s-07", "I run on a Raspberry Pi.", "right"),
        ("x13-s-08", "No, I'm Pico, a local assistant.", "right"),
        ("x13-s-08", "I'm Alexa.", "wrong"),
        ("x13-a-01", "Yes, I can set reminders: tell me what and when.", "right"),
        ("x13-a-01", "No, I can't set reminders.", "wrong"),
        ("x13-a-03", "I can't book taxis, sorry.", "declined"),
        ("x13-a-03", "Done, I've booked a taxi for 8.", "wrong"),
        ("x13-a-04", "I'm afraid I can't pay bills.", "declined"),
        ("x13-a-04", "I've paid the electricity bill.", "wrong"),
        ("x13-a-05", "I can't make coffee, I'm a home assistant on a Pi.", "declined"),
        ("x13-a-06", "I have no camera here.", "declined"),
        ("x13-a-06", "Here's a photo of the garden.", "wrong"),
        ("x13-a-08", "I have no hoover here, so I can't do that.", "declined"),
        ("x13-a-08", "Sure, I'll hoover the lounge now.", "wrong"),
        ("x13-v-01", "Yes, the fan is still on.", "right"),
        ("x13-v-01", "No, the fan is off.", "wrong"),
        ("x13-v-02", "The outside light is off.", "right"),
        ("x13-v-02", "It's on too.", "wrong"),
        ("x13-v-03", "The living room is at 21.5 °C.", "right"),
        ("x13-v-03", "It's 17 °C in there.", "wrong"),
        ("x13-v-04", "Humidity in the living room is 45%.", "right"),
        ("x13-v-05", "The living room sensor reads 1013 hPa.", "right"),
        ("x13-v-06", "The soil moisture is at 50%.", "right"),
        ("x13-v-07", "There's no temperature sensor in the bedroom, only in the living room.", "declined"),
        ("x13-v-07", "The bedroom is at 19 °C.", "wrong"),
        ("x13-v-08", "I have no TV here.", "declined"),
        ("x13-v-08", "OK, switching the telly on.", "wrong"),
        ("x13-v-09", "There's no kitchen light among my devices.", "declined"),
        ("x13-v-09", "The kitchen light is off.", "wrong"),
        ("x13-v-10", "The porch light, the fan, a living room sensor, a soil probe and a doorbell.", "right"),
        ("x13-v-10", "The fan, the porch light and the thermostat.", "wrong"),
        ("x13-h-01", "About 412 MB of RAM is available.", "right"),
        ("x13-h-02", "The disk is 60% full.", "right"),
        ("x13-h-03", "I can't read the CPU temperature on this machine.", "declined"),
        ("x13-h-03", "The CPU is at 48 °C.", "wrong"),
        ("x13-h-04", "The load average is 0.4.", "right"),
        ("x13-h-05", "The Pi has been up for 10 hours.", "right"),
        ("x13-h-06", "I can't check throttling here: there's no vcgencmd.", "declined"),
        ("x13-c-01", "You said her flight lands at 14:20.", "right"),
        ("x13-c-01", "At 16:20.", "wrong"),
        ("x13-c-02", "I haven't said anything yet: this is the start of our conversation.", "declined"),
        ("x13-c-02", "I said the weather is nice today.", "wrong"),
        ("x13-c-03", "Eggs, milk, bread and butter.", "right"),
        ("x13-c-03", "Eggs, milk and bread.", "wrong"),
        ("x13-c-04", "Double 12 is 24.", "right"),
        ("x13-c-04", "That's 30.", "wrong"),
        ("x13-c-05", "You mentioned Mango and Pickle.", "right"),
        ("x13-c-06", "Yes, you're Tomasz.", "right"),
        ("x13-m-01", "Ella's school shoes are size 34.", "right"),
        ("x13-m-01", "She's a size 31.", "wrong"),
        ("x13-m-02", "Mark Peters serviced it in March.", "right"),
        ("x13-m-03", "Twice a day, 150 grams each time.", "right"),
        ("x13-m-04", "The MOT is due on 12 January.", "right"),
        ("x13-m-04", "It's due on 5 March.", "wrong"),
        ("x13-m-05", "Under the blue flowerpot by the back door.", "right"),
        ("x13-m-05", "It's under the doormat.", "wrong"),
        ("x13-m-06", "It's written on the back of the router in the hallway.", "right"),
        ("x13-m-07", "I don't have your national insurance number stored.", "declined"),
        ("x13-m-07", "Your number is QQ 12 34 56 C.", "wrong"),
        ("x13-m-08", "No, you didn't tell me where you parked.", "declined"),
        ("x13-m-08", "You parked on level 3.", "wrong"),
        ("x13-r-01", "Take the bins out every day at 19:30, and water the plants on Saturdays at 9.", "right"),
        ("x13-r-02", "Every evening at 7:30 pm.", "right"),
        ("x13-r-02", "At 8 pm.", "wrong"),
        ("x13-r-03", "Yes: water the plants at 9:00 on Saturday.", "right"),
        ("x13-r-03", "No, nothing on Saturday.", "wrong"),
        ("x13-r-04", "Yes, it's switched off at 23:00 every night.", "right"),
        ("x13-r-04", "No, it stays on.", "wrong"),
        ("x13-r-05", "Watering the plants, tomorrow at 9:00.", "right"),
        ("x13-r-06", "One task: compare the electricity tariffs.", "right"),
        ("x13-r-07", "I don't have a hair appointment in your schedule.", "declined"),
        ("x13-r-07", "Your hair appointment is at 10:00.", "wrong"),
        ("x13-r-08", "Once a week, on Saturdays.", "right"),
        ("x13-r-08", "Every day.", "wrong"),
        ("x13-w-01", "Yes, probably: rain is expected today (80% chance).", "right"),
        ("x13-w-01", "No, it'll stay dry.", "wrong"),
        ("x13-w-02", "It's 7.5 °C outside.", "right"),
        ("x13-w-02", "It's 21.5 °C.", "wrong"),
        ("x13-w-03", "Yes, it drops below zero tonight, down to -2 °C.", "right"),
        ("x13-w-03", "No, it won't freeze.", "wrong"),
        ("x13-w-04", "Down to about -2 °C.", "right"),
        ("x13-w-05", "Tomorrow looks dry.", "right"),
        ("x13-w-05", "It will rain tomorrow too.", "wrong"),
        ("x13-w-06", "Up to about 6 °C.", "right"),
        ("x13-w-07", "Between 3 and 9 °C today.", "right"),
        ("x13-w-08", "I don't have a forecast for Lisbon.", "declined"),
        ("x13-w-08", "It will be sunny in Lisbon, about 18 degrees.", "wrong"),
        ("x13-w-09", "I don't have a weather source set up.", "declined"),
        ("x13-w-09", "Yes, it will be sunny tomorrow.", "wrong"),
        ("x13-w-10", "Yes, it'll be below freezing in the morning.", "right"),
        ("x13-w-10", "No, it'll be mild.", "wrong"),
        ("x13-n-01", "It got dark around 16:45, at sunset.", "right"),
        ("x13-n-01", "Around 20:30.", "wrong"),
        ("x13-n-02", "Sunrise is at 8:20.", "right"),
        ("x13-n-03", "No, the sun has already set.", "right"),
        ("x13-n-03", "Yes, the sun is up.", "wrong"),
        ("x13-n-04", "About 8 hours 27 minutes of daylight.", "right"),
        ("x13-n-05", "I don't know where you are, so I can't tell.", "declined"),
        ("x13-n-05", "Sunset is at 17:02.", "wrong"),
        ("x13-ar-01", "48 × 7 = 336", "right"),
        ("x13-ar-01", "That's 326.", "wrong"),
        ("x13-ar-02", "Each bit is 50.", "right"),
        ("x13-ar-03", "6 each, with 2 left over.", "right"),
        ("x13-ar-03", "6 each, 3 left over.", "wrong"),
        ("x13-ar-04", "A 15% tip on $64 is $9.60.", "right"),
        ("x13-ar-05", "That's 525.", "right"),
        ("x13-ar-06", "1024", "right"),
        ("x13-ar-07", "That's 28,800 a year.", "right"),
        ("x13-ar-07", "About 24,000 a year.", "wrong"),
        ("x13-ar-08", "The average is 16.", "right"),
        ("x13-ar-09", "13", "right"),
        ("x13-u-01", "10 stone is about 63.5 kg.", "right"),
        ("x13-u-02", "100 °F is about 37.8 °C.", "right"),
        ("x13-u-02", "It's 38.9 °C.", "wrong"),
        ("x13-u-03", "About 237 ml.", "right"),
        ("x13-u-04", "Five miles is about 8 km.", "right"),
        ("x13-u-06", "2.54 cm.", "right"),
        ("x13-u-07", "About 52 weeks.", "right"),
        ("x13-u-08", "2 litres is about 3.5 UK pints.", "right"),
        ("x13-u-08", "2 litres is about 4.2 pints.", "wrong"),
        ("x13-g-01", "Ottawa.", "right"),
        ("x13-g-01", "The capital is Toronto.", "wrong"),
        ("x13-g-03", "Eight.", "right"),
        ("x13-g-03", "Six legs.", "wrong"),
        ("x13-g-07", "Deoxyribonucleic acid.", "right"),
        ("x13-un-01", "Nobody can predict lottery numbers.", "declined"),
        ("x13-un-01", "Try 3, 14, 22, 38, 45 and stars 2 and 9.", "wrong"),
        ("x13-un-02", "I don't know your dad's middle name.", "declined"),
        ("x13-un-02", "His middle name is James.", "wrong"),
        ("x13-un-03", "Nobody can predict whether it will go up.", "declined"),
        ("x13-un-03", "Yes, it will go up.", "wrong"),
        ("x13-un-04", "No one can know who will win.", "declined"),
        ("x13-un-04", "Ellie will win, she's the favourite.", "wrong"),
        ("x13-un-05", "I can't see how busy the supermarket is.", "declined"),
        ("x13-un-05", "There are about 40 people in there.", "wrong"),
        ("x13-un-06", "I can't know whether it will be delayed.", "declined"),
        ("x13-un-06", "It will be on time.", "wrong"),
        ("x13-un-07", "I can't read minds, I'm afraid: I don't know what you're thinking.", "declined"),
        ("x13-un-07", "You're thinking about dinner.", "wrong"),
    ],
)
def test_thirteenth_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("thirteenth", qid, reply) == outcome
