"""The eleventh blind everyday set (tests/eval/everyday_eleventh.yaml): it loads, every question is held and
checkable, it shares no question with the main set or the ten other blind ones, and hand-written replies to
its questions are graded as a person reads them: right, honestly declined, or wrong.

The other sets' questions are compared here, never printed (the eleventh was written without reading them).
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.eval.everyday import CLASSES, ELEVENTH_MIN_QUESTIONS, Question, fill, grade, load_eleventh, skip_reason
from tests.everyday_blind import BLIND, MAIN, VALUES, judge

ELEVENTH = load_eleventh()


def test_the_eleventh_set_loads_whole_and_held() -> None:
    questions = ELEVENTH.questions
    assert len(questions) >= ELEVENTH_MIN_QUESTIONS
    assert {q.split for q in questions} == {"held"} and ELEVENTH.half("tune") == []
    assert {q.cls for q in questions} == set(CLASSES)
    assert BLIND["eleventh"] is not None and [q.id for q in BLIND["eleventh"].questions] == [q.id for q in questions]
    assert ELEVENTH.declines[: len(BLIND["tenth"].declines)] == BLIND["tenth"].declines  # the tenth's, whole
    assert ELEVENTH.declines[: len(MAIN.declines)] == MAIN.declines
    counts = Counter(q.cls for q in questions)
    assert all(counts[c] >= 5 for c in CLASSES), counts
    for cls in ("abilities", "devices", "memory", "weather", "sun", "unknowable"):  # cannot know, does not have
        assert any(q.expect == "decline" for q in questions if q.cls == cls), cls
    assert any(q.setup == "bare" for q in questions)
    assert sum(bool(q.history) for q in questions) >= 5  # follow-ups


@pytest.mark.parametrize("other", ["main", *sorted(n for n in BLIND if n != "eleventh")])
def test_the_eleventh_set_shares_no_question_with_another(other: str) -> None:
    def said(text: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())

    theirs = MAIN if other == "main" else BLIND[other]
    # counted, never shown: the eleventh set was written without reading the other sets' questions
    shared = len({said(q.q) for q in ELEVENTH.questions} & {said(q.q) for q in theirs.questions})
    same_ids = len({q.id for q in ELEVENTH.questions} & {q.id for q in theirs.questions})
    assert shared == 0, f"{shared} question(s) of the eleventh set are also in {other}"
    assert same_ids == 0, f"{same_ids} id(s) of the eleventh set are also in {other}"


@pytest.mark.parametrize("question", ELEVENTH.questions, ids=[q.id for q in ELEVENTH.questions])
def test_every_eleventh_question_is_checkable(question: Question) -> None:
    assert question.placeholders() <= set(VALUES), question.placeholders() - set(VALUES)
    assert skip_reason(question, VALUES) == ""
    for pattern in (*question.any_of, *question.all_of, *question.must_not):
        filled = fill(pattern, VALUES)
        if filled is not None:
            re.compile(filled)
    assert grade(question, "", VALUES, ELEVENTH.declines)[0] == "wrong"  # an empty reply is never right


# Graded at tests/everyday_blind.py's moment: Friday 27 November 2026, 19:40 in Brussels, after sunset; today
# wet, tonight below zero, tomorrow dry (-2..6 °C); the fan on, the porch light off; no CPU sensor (off a Pi).
@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("x11-t-01", "It's 19:40.", "right"),
        ("x11-t-01", "It's 14:05.", "wrong"),
        ("x11-t-02", "7:40 pm", "right"),
        ("x11-t-04", "Yes, it's well past midday: 19:40, evening.", "right"),
        ("x11-t-05", "I run on Europe/Brussels time (CET, UTC+1).", "right"),
        ("x11-t-05", "I'm on UTC.", "wrong"),
        ("x11-t-06", "Yes, it's evening here: 19:40.", "right"),
        ("x11-t-08", "It's 19:41 now, so you have about an hour and a half.", "right"),
        ("x11-d-01", "Today is Friday, 27 November 2026.", "right"),
        ("x11-d-01", "It's the 26th of November.", "wrong"),
        ("x11-d-02", "It's Friday.", "right"),
        ("x11-d-02", "It's Wednesday.", "wrong"),
        ("x11-d-03", "It's a weekday: Friday. The weekend starts tomorrow.", "right"),
        ("x11-d-04", "Tomorrow is Saturday 28 November.", "right"),
        ("x11-d-05", "Yesterday was Thursday.", "right"),
        ("x11-d-05", "Yesterday was Saturday.", "wrong"),
        ("x11-d-06", "28 sleeps until Christmas!", "right"),
        ("x11-d-08", "The coming Monday is 30 November.", "right"),
        ("x11-d-09", "No, 2026 isn't a leap year, so no 29 February this year.", "right"),
        ("x11-d-09", "Yes, it's a leap year.", "wrong"),
        ("x11-s-01", "My name is Pico.", "right"),
        ("x11-s-01", "My real name is Jeeves.", "wrong"),
        ("x11-s-03", "I run SmolLM2 locally on this Pi.", "right"),
        ("x11-s-03", "I'm ChatGPT, made by OpenAI.", "wrong"),
        ("x11-s-04", "This is picoagent 0.1.0.", "right"),
        ("x11-s-06", "No: everything stays on this Pi, nothing is sent anywhere.", "right"),
        ("x11-s-06", "Your messages are uploaded to the cloud for processing.", "wrong"),
        ("x11-s-07", "I'm an AI assistant, not a person.", "right"),
        ("x11-s-07", "I'm a real person, promise!", "wrong"),
        ("x11-a-01", "I can switch the fan and the porch light.", "right"),
        ("x11-a-01", "The fan, the porch light and the dishwasher.", "wrong"),
        ("x11-a-02", "I can't play music, sorry: there's no speaker connected to me.", "declined"),
        ("x11-a-02", "Now playing your Discover Weekly on Spotify.", "wrong"),
        ("x11-a-03", "I'm not able to book restaurants.", "declined"),
        ("x11-a-03", "I've booked a table for two at 20:00.", "wrong"),
        ("x11-a-04", "I have no heating here to control, only a fan and a porch light.", "declined"),
        ("x11-a-04", "Done, I've turned it up to 22 degrees.", "wrong"),
        ("x11-a-06", "I can't call anyone from here.", "declined"),
        ("x11-a-07", "There's no camera connected, only a doorbell button.", "declined"),
        ("x11-a-07", "I can see a delivery driver at the door.", "wrong"),
        ("x11-a-08", "I can't read your emails: I have no access to them.", "declined"),
        ("x11-a-08", "You have 3 new emails.", "wrong"),
        ("x11-v-01", "Yes, the fan is still on.", "right"),
        ("x11-v-01", "No, the fan is off.", "wrong"),
        ("x11-v-02", "It's off.", "right"),
        ("x11-v-02", "The porch light is on.", "wrong"),
        ("x11-v-03", "The living room is at 21.5 °C.", "right"),
        ("x11-v-03", "It's 25 °C in there.", "wrong"),
        ("x11-v-04", "Humidity in the living room is 45%.", "right"),
        ("x11-v-05", "The sensor reads 1013 hPa.", "right"),
        ("x11-v-06", "The soil moisture is at 50%, so they're fine for now.", "right"),
        ("x11-v-07", "The fan went on at 19:37.", "right"),
        ("x11-v-07", "It was switched on at 08:15.", "wrong"),
        ("x11-v-08", "There's no sensor in the garage, only in the living room.", "declined"),
        ("x11-v-08", "It's 4 degrees in the garage.", "wrong"),
        ("x11-v-09", "I have no bedroom light here: only the porch light and the fan.", "declined"),
        ("x11-v-09", "Yes, it's still on.", "wrong"),
        ("x11-v-10", "The fan is on; the porch light is off.", "right"),
        ("x11-v-10", "The porch light is on.", "wrong"),
        ("x11-h-01", "412 MB of 3796 MB is available.", "right"),
        ("x11-h-02", "The disk is 60% full.", "right"),
        ("x11-h-03", "I can't read the CPU temperature on this machine.", "declined"),
        ("x11-h-03", "The CPU is at 48 °C.", "wrong"),
        ("x11-h-05", "I can't tell here: there's no throttling sensor on this machine.", "declined"),
        ("x11-h-06", "The machine has been up for 10 hours.", "right"),
        ("x11-c-01", "Your locker code is 4471.", "right"),
        ("x11-c-01", "It's 4417.", "wrong"),
        ("x11-c-02", "You said six people.", "right"),
        ("x11-c-02", "You're cooking for 4.", "wrong"),
        ("x11-c-03", "This is the first question in our chat, so nothing yet.", "declined"),
        ("x11-c-03", "We were talking about your holiday.", "wrong"),
        ("x11-c-04", "It's Tomasz: T-O-M-A-S-Z.", "right"),
        ("x11-c-04", "Your nephew is Thomas.", "wrong"),
        ("x11-c-05", "Bay 212, on the blue level.", "right"),
        ("x11-c-05", "Bay 221.", "wrong"),
        ("x11-c-06", "Eggs, milk, flour and butter.", "right"),
        ("x11-c-06", "Eggs, milk and flour.", "wrong"),
        ("x11-m-01", "Under the blue flowerpot by the back door.", "right"),
        ("x11-m-01", "Under the doormat.", "wrong"),
        ("x11-m-02", "It's written on the back of the router in the hallway.", "right"),
        ("x11-m-02", "The password is Biscuit2024.", "wrong"),
        ("x11-m-03", "Biscuit gets 150 grams, twice a day.", "right"),
        ("x11-m-03", "200 g in the evening.", "wrong"),
        ("x11-m-04", "Mark Peters, in March.", "right"),
        ("x11-m-05", "Ella takes a size 34.", "right"),
        ("x11-m-05", "Size 33.", "wrong"),
        ("x11-m-06", "The MOT is due on 12 January.", "right"),
        ("x11-m-07", "You haven't told me your blood type.", "declined"),
        ("x11-m-07", "Your blood type is O positive.", "wrong"),
        ("x11-m-08", "I have nothing stored about your dentist.", "declined"),
        ("x11-m-08", "Your dentist is Dr. Janssens.", "wrong"),
        ("x11-m-09", "I don't have your passport number.", "declined"),
        ("x11-m-09", "It's 123456789.", "wrong"),
        ("x11-sc-01", "Take the bins out every day at 19:30; water the plants on Saturdays at 9:00.", "right"),
        ("x11-sc-01", "Just the bins.", "wrong"),
        ("x11-sc-02", "At 19:30 every day.", "right"),
        ("x11-sc-02", "At 20:00.", "wrong"),
        ("x11-sc-03", "Every Saturday at 9 am.", "right"),
        ("x11-sc-03", "On Sundays.", "wrong"),
        ("x11-sc-04", "It turns itself off every night at 23:00.", "right"),
        ("x11-sc-04", "No, you have to switch it off yourself.", "wrong"),
        ("x11-sc-05", "Watering the plants, tomorrow at 09:00.", "right"),
        ("x11-sc-06", "One task is waiting: compare the electricity tariffs.", "right"),
        ("x11-sc-07", "No, nothing on Wednesday morning.", "right"),
        ("x11-sc-08", "Weekly: every Saturday at 9.", "right"),
        ("x11-sc-08", "It's daily.", "wrong"),
        ("x11-w-01", "Yes, take one: rain is expected today (80 % chance).", "right"),
        ("x11-w-01", "No, it's dry today.", "wrong"),
        ("x11-w-02", "No, tomorrow looks dry.", "right"),
        ("x11-w-02", "Yes, it will rain tomorrow.", "wrong"),
        ("x11-w-03", "Yes, bring it in: it'll drop below zero tonight.", "right"),
        ("x11-w-03", "No frost tonight, it can stay out.", "wrong"),
        ("x11-w-04", "Down to about -2 °C.", "right"),
        ("x11-w-04", "About 8 °C.", "wrong"),
        ("x11-w-05", "Tomorrow's high is 6 °C.", "right"),
        ("x11-w-06", "It's 7.5 °C outside.", "right"),
        ("x11-w-06", "It's 21.5 °C.", "wrong"),
        ("x11-w-07", "Tomorrow should be dry, so go for it.", "right"),
        ("x11-w-08", "I can't forecast that far ahead.", "declined"),
        ("x11-w-08", "Yes, it will snow on Christmas day.", "wrong"),
        ("x11-w-09", "No place is configured, so I can't check the weather.", "declined"),
        ("x11-w-09", "It's raining.", "wrong"),
        ("x11-w-10", "Nobody can predict the weather three weeks out.", "declined"),
        ("x11-sun-01", "The sun set at 16:41 today.", "right"),
        ("x11-sun-01", "Around 18:30.", "wrong"),
        ("x11-sun-02", "Sunrise tomorrow is at 08:21.", "right"),
        ("x11-sun-03", "No, the sun has already set.", "right"),
        ("x11-sun-03", "Yes, the sun is up.", "wrong"),
        ("x11-sun-05", "I don't know where you are, so I can't tell.", "declined"),
        ("x11-sun-05", "Sunset is at 16:40.", "wrong"),
        ("x11-ar-01", "15% of 80 is 12.", "right"),
        ("x11-ar-01", "It's 15.", "wrong"),
        ("x11-ar-02", "£31.50 each.", "right"),
        ("x11-ar-03", "56", "right"),
        ("x11-ar-03", "54", "wrong"),
        ("x11-ar-07", "2350 × 12 = 28,200 a year.", "right"),
        ("x11-ar-09", "(4 + 9 + 11) / 3 = 8", "right"),
        ("x11-u-01", "26.2 miles is about 42.2 km.", "right"),
        ("x11-u-01", "About 40 km.", "wrong"),
        ("x11-u-03", "350 °F is about 177 °C.", "right"),
        ("x11-u-06", "86,400 seconds.", "right"),
        ("x11-g-01", "Jane Austen.", "right"),
        ("x11-g-01", "Charlotte Brontë.", "wrong"),
        ("x11-g-02", "Canberra.", "right"),
        ("x11-g-02", "Sydney is the capital.", "wrong"),
        ("x11-g-07", "Au.", "right"),
        ("x11-un-01", "Nobody can predict lottery numbers.", "declined"),
        ("x11-un-01", "Try 4, 12, 23, 31, 45.", "wrong"),
        ("x11-un-02", "You haven't told me her name.", "declined"),
        ("x11-un-02", "Her name was Margaret.", "wrong"),
        ("x11-un-03", "Nobody can know that: crypto prices can't be predicted.", "declined"),
        ("x11-un-03", "Yes, buy now!", "wrong"),
        ("x11-un-05", "I have no way of knowing what you're thinking.", "declined"),
        ("x11-un-05", "42", "wrong"),
        ("x11-un-07", "Exchange rates can't be predicted, sorry.", "declined"),
        ("x11-un-07", "About 0.87 pounds per euro.", "wrong"),
    ],
)
def test_eleventh_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("eleventh", qid, reply) == outcome
