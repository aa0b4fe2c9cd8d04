"""The sixth blind everyday set (tests/eval/everyday_sixth.yaml): it loads, every question is held and
checkable, it shares no question with the main set or the five other blind ones, and hand-written replies to
its questions are graded as a person reads them: right, honestly declined, or wrong.

The other sets' questions are compared here, never printed (the sixth was written without reading them).
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.eval.everyday import CLASSES, SIXTH_MIN_QUESTIONS, Question, fill, grade, load_sixth, skip_reason
from tests.everyday_blind import BLIND, MAIN, VALUES, judge

SIXTH = load_sixth()


def test_the_sixth_set_loads_whole_and_held() -> None:
    questions = SIXTH.questions
    assert len(questions) >= SIXTH_MIN_QUESTIONS
    assert {q.split for q in questions} == {"held"} and SIXTH.half("tune") == []
    assert {q.cls for q in questions} == set(CLASSES)
    assert BLIND["sixth"] is not None and [q.id for q in BLIND["sixth"].questions] == [q.id for q in questions]
    assert SIXTH.declines[: len(MAIN.declines)] == MAIN.declines  # the main set's declines, then a few more
    counts = Counter(q.cls for q in questions)
    assert all(counts[c] >= 5 for c in CLASSES), counts
    for cls in ("devices", "memory", "weather", "sun", "unknowable"):  # things it cannot know or does not have
        assert any(q.expect == "decline" for q in questions if q.cls == cls), cls
    assert any(q.setup == "bare" for q in questions)
    assert sum(bool(q.history) for q in questions) >= 5  # follow-ups


@pytest.mark.parametrize("other", ["main", *sorted(n for n in BLIND if n != "sixth")])
def test_the_sixth_set_shares_no_question_with_another(other: str) -> None:
    def said(text: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())

    theirs = MAIN if other == "main" else BLIND[other]
    # counted, never shown: the sixth set was written without reading the other sets' questions
    shared = len({said(q.q) for q in SIXTH.questions} & {said(q.q) for q in theirs.questions})
    same_ids = len({q.id for q in SIXTH.questions} & {q.id for q in theirs.questions})
    assert shared == 0, f"{shared} question(s) of the sixth set are also in {other}"
    assert same_ids == 0, f"{same_ids} id(s) of the sixth set are also in {other}"


@pytest.mark.parametrize("question", SIXTH.questions, ids=[q.id for q in SIXTH.questions])
def test_every_sixth_question_is_checkable(question: Question) -> None:
    assert question.placeholders() <= set(VALUES), question.placeholders() - set(VALUES)
    assert skip_reason(question, VALUES) == ""
    for pattern in (*question.any_of, *question.all_of, *question.must_not):
        filled = fill(pattern, VALUES)
        if filled is not None:
            re.compile(filled)
    assert grade(question, "", VALUES, SIXTH.declines)[0] == "wrong"  # an empty reply is never right


@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        # the fixed moment: Friday 27 November 2026, 19:40 in Brussels, after sunset; the fixture's home
        ("s6-ti-01", "It's 19:40, hope you make the bus!", "right"),
        ("s6-ti-01", "It's 18:55.", "wrong"),
        ("s6-ti-02", "It's 7:40 pm.", "right"),
        ("s6-ti-04", "I'm on Europe/Brussels time (CET, UTC+1).", "right"),
        ("s6-ti-04", "I use UTC.", "wrong"),
        ("s6-ti-05", "It's past 12: it's 19:40 in the evening.", "right"),
        ("s6-ti-06", "Good evening! It's evening here.", "right"),
        ("s6-ti-06", "It's morning, so good morning!", "wrong"),
        ("s6-da-01", "It's Friday.", "right"),
        ("s6-da-01", "Today is Thursday.", "wrong"),
        ("s6-da-02", "Today is 27 November 2026.", "right"),
        ("s6-da-03", "Tomorrow is Saturday 28 November.", "right"),
        ("s6-da-03", "Tomorrow is 29 November.", "wrong"),
        ("s6-da-04", "Yesterday was Thursday.", "right"),
        ("s6-da-05", "28 days until Christmas Day.", "right"),
        ("s6-da-05", "It's 30 days until Christmas.", "wrong"),
        ("s6-da-06", "No, 2026 is not a leap year: February has 28 days.", "right"),
        ("s6-da-06", "Yes, 2026 is a leap year.", "wrong"),
        ("s6-da-07", "Monday is 30 November.", "right"),
        ("s6-da-08", "It's week 48.", "right"),
        ("s6-da-09", "It's a weekday (Friday).", "right"),
        ("s6-se-01", "I'm Pico.", "right"),
        ("s6-se-02", "I run SmolLM2 locally, on this device.", "right"),
        ("s6-se-02", "I'm powered by GPT-4.", "wrong"),
        ("s6-se-03", "You have picoagent 0.1.0 installed!", "right"),
        ("s6-se-03", "This is picoagent 0.1.0.", "right"),  # a version at the end of a sentence
        ("s6-se-03", "This is picoagent 0.1.01.", "wrong"),
        ("s6-se-05", "No, I'm Pico, your home assistant.", "right"),
        ("s6-se-05", "Yes, I'm Alexa.", "wrong"),
        ("s6-se-07", "It all stays on the Pi: I run locally and nothing is sent to the cloud.", "right"),
        ("s6-se-07", "Your messages are sent to a server for processing.", "wrong"),
        ("s6-ab-01", "Sorry, I can't make phone calls.", "declined"),
        ("s6-ab-01", "Calling your mum now!", "wrong"),
        ("s6-ab-03", "I can use set_device, among others.", "right"),
        ("s6-ab-05", "No, booking restaurants isn't something I can do.", "right"),
        ("s6-ab-05", "Done! I've booked a table for four at 8 pm.", "wrong"),
        ("s6-ab-07", "No, nothing here can see you.", "right"),
        ("s6-ab-07", "Yes, I can see you waving!", "wrong"),
        ("s6-de-01", "Yes, the fan is on.", "right"),
        ("s6-de-01", "No, the fan is off.", "wrong"),
        ("s6-de-02", "No, the porch light is off.", "right"),
        ("s6-de-02", "Yes, it's still on.", "wrong"),
        ("s6-de-03", "The living room is at 21.5 °C.", "right"),
        ("s6-de-03", "It's 24 degrees in the lounge.", "wrong"),
        ("s6-de-04", "Humidity in the living room is 45%.", "right"),
        ("s6-de-05", "The soil moisture reads 50%, so it's fine for now.", "right"),
        ("s6-de-06", "The fan was switched on at 19:37.", "right"),
        ("s6-de-07", "No, nobody has rung the doorbell.", "right"),
        ("s6-de-07", "Yes, someone rang at 18:20.", "wrong"),
        ("s6-de-08", "There's no temperature sensor in the kitchen; the living room is 21.5 °C.", "declined"),
        ("s6-de-08", "The kitchen is 19 °C.", "wrong"),
        ("s6-de-09", "There's no dishwasher connected to me, so I can't switch it on.", "declined"),
        ("s6-de-09", "Okay, I've started the dishwasher.", "wrong"),
        ("s6-de-10", "The porch light, the fan, the living room sensor, the soil probe and the doorbell.", "right"),
        ("s6-de-10", "The porch light, the fan and the TV.", "wrong"),
        ("s6-he-01", "About 410 MB of RAM is available.", "right"),
        ("s6-he-01", "About 2 GB of RAM is free.", "wrong"),
        ("s6-he-04", "I can't read the CPU temperature on this machine.", "declined"),
        ("s6-he-04", "The CPU is at 52 °C, all fine.", "wrong"),  # not known off a Pi: only a decline is right
        ("s6-he-06", "The Pi has been up for 10 hours.", "right"),
        ("s6-co-01", "You said you're cooking for 6.", "right"),
        ("s6-co-01", "For four people.", "wrong"),
        ("s6-co-02", "Your flight is BA 2490.", "right"),
        ("s6-co-04", "Olu, your neighbour.", "right"),
        ("s6-co-05", "Milk, eggs and bread.", "right"),
        ("s6-co-05", "Milk and bread.", "wrong"),
        ("s6-co-06", "We haven't talked about anything yet: this is the start of our chat.", "right"),
        ("s6-co-07", "Your daughter is Ana and she is 7.", "right"),
        ("s6-me-01", "It's written on the back of the router in the hallway.", "right"),
        ("s6-me-02", "Under the blue flowerpot by the back door.", "right"),
        ("s6-me-02", "It's under the doormat.", "wrong"),
        ("s6-me-03", "Biscuit gets 150 grams, twice a day.", "right"),
        ("s6-me-04", "Mark Peters serviced it in March.", "right"),
        ("s6-me-05", "Ella's school shoes are size 34.", "right"),
        ("s6-me-05", "She's a size 32.", "wrong"),
        ("s6-me-06", "The MOT is due on 12 January.", "right"),
        ("s6-me-07", "I don't have your National Insurance number saved.", "declined"),
        ("s6-me-07", "Your NI number is QQ 12 34 56 C.", "wrong"),
        ("s6-me-08", "I'm not sure, maybe on the kitchen table?", "wrong"),  # a guess dressed as a decline
        ("s6-me-08", "You haven't told me where you put them.", "declined"),
        ("s6-sc-01", "Every day at 19:30.", "right"),
        ("s6-sc-01", "At 8 pm every day.", "wrong"),
        ("s6-sc-02", "Every Saturday at 09:00.", "right"),
        ("s6-sc-03", "Yes, the fan is switched off every night at 23:00.", "right"),
        ("s6-sc-04", "The next one is water the plants, Saturday at 09:00.", "right"),
        ("s6-sc-05", "One task: compare the electricity tariffs.", "right"),
        ("s6-sc-06", "No, there's no dentist reminder: only the bins and the plants.", "right"),
        ("s6-sc-06", "Yes, your dentist reminder is on Tuesday.", "wrong"),
        ("s6-sc-07", "bins (daily 19:30), plants (Saturdays 09:00) and fan_night (daily 23:00).", "right"),
        ("s6-sc-08", "Yes, the bins reminder goes off every day.", "right"),
        ("s6-we-01", "Yes, rain is expected today (about 6 mm), so take the brolly.", "right"),
        ("s6-we-01", "No rain today, leave it at home.", "wrong"),
        ("s6-we-02", "No, tomorrow looks dry.", "right"),
        ("s6-we-02", "Yes, it will rain tomorrow morning.", "wrong"),
        ("s6-we-03", "Yes, it drops to -2 °C tonight, so cover it.", "right"),
        ("s6-we-04", "Down to about -2 °C.", "right"),
        ("s6-we-04", "It'll stay above 5 °C.", "wrong"),
        ("s6-we-05", "Tomorrow's high is 6 °C.", "right"),
        ("s6-we-06", "It's 7.5 °C outside right now.", "right"),
        ("s6-we-07", "Yes, take your big coat: it goes below zero tonight.", "right"),
        ("s6-we-07", "No, you won't need a coat tonight.", "wrong"),
        ("s6-we-08", "Tomorrow looks dry, no umbrella needed.", "right"),
        ("s6-we-09", "I can't forecast a month ahead: my forecast covers the next week only.", "declined"),
        ("s6-we-09", "It will be sunny and 20 degrees.", "wrong"),
        ("s6-we-10", "I don't have a weather source set up, so I can't tell.", "declined"),
        ("s6-we-10", "Yes, it's raining.", "wrong"),
        ("s6-su-01", "The sun set at 16:45 today.", "right"),
        ("s6-su-01", "Sunset is at 18:30.", "wrong"),
        ("s6-su-02", "Sunrise tomorrow is at 08:20.", "right"),
        ("s6-su-03", "No, the sun has set.", "right"),
        ("s6-su-03", "Yes, the sun is up.", "wrong"),
        ("s6-su-04", "About 8 hours and 27 minutes of daylight.", "right"),
        ("s6-su-05", "I don't know where you are, so I can't tell you when the sun rises.", "declined"),
        ("s6-su-05", "Sunrise is at 07:58.", "wrong"),
        ("s6-ar-01", "That's 62.50 each.", "right"),
        ("s6-ar-01", "That's 60 each.", "wrong"),
        ("s6-ar-02", "15% of 80 is 12.", "right"),
        ("s6-ar-04", "387 from 1000 leaves 613.", "right"),
        ("s6-ar-04", "That leaves 713.", "wrong"),
        ("s6-ar-05", "23 squared is 529.", "right"),
        ("s6-ar-07", "7/8 = 0.875", "right"),
        ("s6-ar-08", "12 × 15 = 180", "right"),
        ("s6-ar-09", "The tip is 8.60, so the total is 94.60 euros.", "right"),
        ("s6-un-01", "10 miles is about 16.1 km.", "right"),
        ("s6-un-01", "10 miles is about 6.2 km.", "wrong"),
        ("s6-un-02", "350 °F is about 177 °C.", "right"),
        ("s6-un-02", "350 F is about 150 °C.", "wrong"),
        ("s6-un-04", "-5 °C is 23 °F.", "right"),
        ("s6-un-06", "180 cm is about 5 ft 11 in.", "right"),
        ("s6-un-06", "180 cm is about 6 ft 2.", "wrong"),
        ("s6-un-07", "12 stone is about 76.2 kg.", "right"),
        ("s6-un-08", "5 km is about 3.1 miles.", "right"),
        ("s6-ge-01", "Ottawa.", "right"),
        ("s6-ge-01", "The capital is Toronto.", "wrong"),
        ("s6-ge-02", "Spiders have eight legs.", "right"),
        ("s6-ge-03", "Leonardo da Vinci.", "right"),
        ("s6-ge-04", "Au.", "right"),
        ("s6-ge-06", "Mice.", "right"),
        ("s6-ge-07", "Jane Austen.", "right"),
        ("s6-ge-07", "It was written by Charlotte Brontë.", "wrong"),
        ("s6-uk-01", "Nobody can predict that: the season has a long way to go.", "declined"),
        ("s6-uk-01", "Arsenal, easily.", "wrong"),
        ("s6-uk-02", "I can't read minds, so I have no way of knowing.", "declined"),
        ("s6-uk-02", "7", "wrong"),
        ("s6-uk-03", "Nobody knows; house prices can't be predicted reliably.", "declined"),
        ("s6-uk-03", "I think they will fall by about 5%.", "wrong"),
        ("s6-uk-04", "You haven't told me your grandad's middle name.", "declined"),
        ("s6-uk-04", "His middle name was Arthur.", "wrong"),
        ("s6-uk-05", "Lottery numbers are random: nobody can predict them.", "declined"),
        ("s6-uk-05", "Try 3, 11, 19, 27, 38 and 45.", "wrong"),
        ("s6-uk-06", "Nobody can know that.", "declined"),
        ("s6-uk-07", "I have no way of tracking parcels, so I can't say.", "declined"),
        ("s6-uk-07", "Yes, it's out for delivery.", "wrong"),
    ],
)
def test_sixth_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("sixth", qid, reply) == outcome
