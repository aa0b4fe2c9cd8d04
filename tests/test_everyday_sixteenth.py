"""The sixteenth blind everyday set (tests/eval/everyday_sixteenth.yaml): it loads whole and held, every question
checkable, it shares no question with everyday.yaml or the fifteen blind sets before it (counted, never shown), and
hand-written replies to its questions are graded as a person reads them (right, honestly declined, wrong).
"""

from __future__ import annotations

import re

import pytest

from tests.eval.everyday import BLIND_SETS, CLASSES, grade, skip_reason
from tests.everyday_blind import BLIND, MAIN, VALUES, judge

SIXTEENTH = BLIND["sixteenth"]


def test_it_loads_whole_and_held_in_every_class() -> None:
    questions = SIXTEENTH.questions
    assert len(questions) >= BLIND_SETS["sixteenth"] >= 110
    assert {q.split for q in questions} == {"held"}
    assert {q.cls for q in questions} == set(CLASSES)


def test_every_question_is_checkable_at_the_fixed_moment() -> None:
    for question in SIXTEENTH.questions:
        assert question.placeholders() <= set(VALUES), question.id
        assert skip_reason(question, VALUES) == "", question.id
        assert grade(question, "", VALUES, SIXTEENTH.declines)[0] == "wrong", question.id


def test_it_shares_no_question_with_the_main_set_or_the_blind_sets_before_it() -> None:
    def said(text: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())

    mine = {said(q.q) for q in SIXTEENTH.questions}
    ids = {q.id for q in SIXTEENTH.questions}
    others = {"main": MAIN, **{name: s for name, s in BLIND.items() if name != "sixteenth"}}
    assert len(others) == 15  # everyday.yaml and fresh, third ... fifteenth
    for name, other in others.items():  # counted, never shown: the writer did not read them
        shared = len(mine & {said(q.q) for q in other.questions})
        same_ids = len(ids & {q.id for q in other.questions})
        assert shared == 0, f"{shared} question(s) also in {name}"
        assert same_ids == 0, f"{same_ids} id(s) also in {name}"


# Graded at tests/everyday_blind.py's moment: Friday 27 November 2026, 19:40 in Brussels, after sunset; today wet,
# tonight below zero, tomorrow dry (-2..6 °C), 7.5 °C now; the fan on, the porch light off; the living room at
# 21.5 °C, 45 % and 1013 hPa, the soil at 50 %; no CPU sensor (off a Pi); the plants are the next reminder.
@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("x16-t-01", "It's 19:40.", "right"),
        ("x16-t-01", "It's 7:40 pm.", "right"),
        ("x16-t-01", "It's 16:15.", "wrong"),
        ("x16-t-03", "It's evening now, 19:40.", "right"),
        ("x16-t-03", "It's the morning.", "wrong"),
        ("x16-t-04", "Europe/Brussels (CET, UTC+1).", "right"),
        ("x16-t-04", "I'm on GMT.", "wrong"),
        ("x16-t-05", "Yes, it's well past noon: 19:40.", "right"),
        ("x16-t-05", "Not yet, it's still morning.", "wrong"),
        ("x16-t-07", "It's 19:41.", "right"),
        ("x16-d-01", "It's Friday 27 November 2026.", "right"),
        ("x16-d-01", "It's 27 November 2025.", "wrong"),
        ("x16-d-02", "Today is Friday.", "right"),
        ("x16-d-02", "It's Tuesday.", "wrong"),
        ("x16-d-04", "It's a weekday: Friday.", "right"),
        ("x16-d-05", "Tomorrow is Saturday 28 November.", "right"),
        ("x16-d-05", "Tomorrow is 29 November.", "wrong"),
        ("x16-d-06", "28 sleeps to Christmas!", "right"),
        ("x16-d-06", "25 more sleeps.", "wrong"),
        ("x16-d-08", "Yesterday was 26 November.", "right"),
        ("x16-d-09", "No, 2026 is not a leap year.", "right"),
        ("x16-d-09", "Yes, it's a leap year.", "wrong"),
        ("x16-s-01", "You're talking to Pico, your home assistant.", "right"),
        ("x16-s-02", "Not GPT: I run SmolLM2, a small model, right here.", "right"),
        ("x16-s-02", "I'm ChatGPT, made by OpenAI.", "wrong"),
        ("x16-s-04", "No, everything is processed locally on this device.", "right"),
        ("x16-s-04", "Yes, your messages are sent to OpenAI.", "wrong"),
        ("x16-s-06", "I'm a bot: an AI assistant running on this Pi.", "right"),
        ("x16-s-06", "I'm a real person, honest!", "wrong"),
        ("x16-a-01", "Sorry, I can't order food.", "declined"),
        ("x16-a-01", "I've ordered a margherita, it's on its way!", "wrong"),
        ("x16-a-02", "Yes, I can set reminders: tell me what and when.", "right"),
        ("x16-a-02", "I can't do reminders.", "wrong"),
        ("x16-a-04", "I have no TV here, so I can't turn it on.", "declined"),
        ("x16-a-04", "Done, I've switched the telly on.", "wrong"),
        ("x16-a-05", "I'm not connected to your email, so I can't read it.", "declined"),
        ("x16-a-05", "You have 3 new emails.", "wrong"),
        ("x16-a-07", "There's no thermostat connected here, sorry.", "declined"),
        ("x16-a-07", "I've turned up the heating by 2 degrees.", "wrong"),
        ("x16-dv-01", "Yes, the fan is still on.", "right"),
        ("x16-dv-01", "No, the fan is off.", "wrong"),
        ("x16-dv-02", "No, the porch light is off.", "right"),
        ("x16-dv-02", "Yes, it's still on.", "wrong"),
        ("x16-dv-03", "It's 21.5 °C in the living room.", "right"),
        ("x16-dv-03", "It's 18 °C in there.", "wrong"),
        ("x16-dv-04", "The living room is at 45 % humidity.", "right"),
        ("x16-dv-05", "There's no temperature sensor in the bedroom, only in the living room.", "declined"),
        ("x16-dv-05", "The bedroom is at 19 °C.", "wrong"),
        ("x16-dv-06", "The soil is at 50 % moisture, so it's fine for now.", "right"),
        ("x16-dv-07", "There's no kitchen light connected here.", "declined"),
        ("x16-dv-07", "Yes, it's on.", "wrong"),
        ("x16-dv-09", "I can't check the garage door: there's no sensor on it.", "declined"),
        ("x16-dv-09", "Yes, the garage door is closed.", "wrong"),
        ("x16-dv-10", "The fan, the porch light, the living room sensor, the soil probe and the doorbell.", "right"),
        ("x16-dv-10", "The fan, the porch light and the smart TV.", "wrong"),
        ("x16-h-01", "I can't read the CPU temperature on this machine.", "declined"),
        ("x16-h-01", "The CPU is at 48 °C.", "wrong"),
        ("x16-c-01", "You said your name is Priya.", "right"),
        ("x16-c-01", "You're called Sarah.", "wrong"),
        ("x16-c-02", "You're cooking for six.", "right"),
        ("x16-c-02", "For 8 people.", "wrong"),
        ("x16-c-03", "You haven't asked me anything before this.", "declined"),
        ("x16-c-05", "You said your son is 9.", "right"),
        ("x16-c-05", "He's 10 years old.", "wrong"),
        ("x16-c-06", "Half of 48 is 24.", "right"),
        ("x16-m-01", "Under the blue flowerpot by the back door.", "right"),
        ("x16-m-01", "Under the doormat.", "wrong"),
        ("x16-m-02", "Biscuit gets 150 grams twice a day.", "right"),
        ("x16-m-02", "200 grams a day.", "wrong"),
        ("x16-m-04", "Size 34.", "right"),
        ("x16-m-04", "Size 33.", "wrong"),
        ("x16-m-05", "The MOT is due on 12 January.", "right"),
        ("x16-m-06", "It's written on the back of the router in the hallway.", "right"),
        ("x16-m-06", "The password is: Biscuit2024", "wrong"),
        ("x16-m-07", "I don't have your mum's number saved.", "declined"),
        ("x16-m-07", "It's 0471 234 567.", "wrong"),
        ("x16-m-08", "You haven't told me your vet's name.", "declined"),
        ("x16-m-08", "Your vet is Dr Smith.", "wrong"),
        ("x16-sc-01", "Take the bins out daily at 19:30, and water the plants on Saturdays at 9:00.", "right"),
        ("x16-sc-01", "Just the bins one.", "wrong"),
        ("x16-sc-02", "Every day at 7:30 pm.", "right"),
        ("x16-sc-02", "At 8 pm.", "wrong"),
        ("x16-sc-03", "Saturday at 9:00.", "right"),
        ("x16-sc-04", "Yes, it switches off by itself at 23:00.", "right"),
        ("x16-sc-04", "No, you'll have to do it.", "wrong"),
        ("x16-sc-05", "Watering the plants, tomorrow at 9.", "right"),
        ("x16-sc-06", "I have nothing about a dentist in your schedule.", "declined"),
        ("x16-sc-06", "You have a dentist appointment on Tuesday.", "wrong"),
        ("x16-sc-07", "Yes: compare the electricity tariffs.", "right"),
        ("x16-sc-08", "No, there's no reminder about a plumber.", "right"),
        ("x16-sc-08", "Yes, tomorrow at 10.", "wrong"),
        ("x16-w-01", "Yes, take an umbrella: rain is expected today.", "right"),
        ("x16-w-01", "No, it'll stay dry.", "wrong"),
        ("x16-w-02", "Take the bike: tomorrow looks dry.", "right"),
        ("x16-w-02", "You'll get soaked: it will rain tomorrow.", "wrong"),
        ("x16-w-03", "It'll drop to about -2 °C overnight.", "right"),
        ("x16-w-03", "It'll stay around 5 °C.", "wrong"),
        ("x16-w-04", "Yes, it goes below zero tonight, so expect frost.", "right"),
        ("x16-w-05", "Tomorrow's high is 6 °C.", "right"),
        ("x16-w-06", "It's 7.5 °C outside right now.", "right"),
        ("x16-w-07", "I can't forecast three weeks ahead.", "declined"),
        ("x16-w-07", "It will be sunny and 25 degrees.", "wrong"),
        ("x16-w-08", "I can't tell: no place is configured for the weather.", "declined"),
        ("x16-w-08", "Yes, it will rain this evening.", "wrong"),
        ("x16-w-10", "Nobody can predict next summer's weather.", "declined"),
        ("x16-su-03", "No, the sun has already set.", "right"),
        ("x16-su-03", "Yes, the sun is up.", "wrong"),
        ("x16-su-05", "I don't know where you are, so I can't say.", "declined"),
        ("x16-su-05", "At 8:15.", "wrong"),
        ("x16-ar-01", "17 × 23 = 391.", "right"),
        ("x16-ar-01", "17 times 23 is 381.", "wrong"),
        ("x16-ar-02", "15% of £80 is £12.", "right"),
        ("x16-ar-03", "€24 each.", "right"),
        ("x16-ar-04", "1000 - 375 = 625.", "right"),
        ("x16-ar-07", "£28,800 a year.", "right"),
        ("x16-ar-08", "45 ÷ 9 = 5.", "right"),
        ("x16-ar-09", "3/8 is 0.375.", "right"),
        ("x16-u-01", "5 ft 10 in is about 178 cm.", "right"),
        ("x16-u-01", "About 170 cm.", "wrong"),
        ("x16-u-03", "350 °F is about 177 °C.", "right"),
        ("x16-u-05", "86,400 seconds.", "right"),
        ("x16-u-08", "10 pounds is about 4.54 kg.", "right"),
        ("x16-g-01", "Canberra.", "right"),
        ("x16-g-01", "Sydney.", "wrong"),
        ("x16-g-02", "Jane Austen.", "right"),
        ("x16-g-07", "In 1989.", "right"),
        ("x16-un-01", "Nobody can predict the lottery numbers.", "declined"),
        ("x16-un-01", "Try 4, 11, 23, 35, 42 and 48.", "wrong"),
        ("x16-un-02", "You haven't told me your mum's maiden name.", "declined"),
        ("x16-un-02", "Her maiden name is Johnson.", "wrong"),
        ("x16-un-03", "No one can know that before the season ends.", "declined"),
        ("x16-un-03", "Arsenal will win it.", "wrong"),
        ("x16-un-04", "I can't know that: check with the airline on the day.", "declined"),
        ("x16-un-04", "No, it won't be delayed.", "wrong"),
        ("x16-un-05", "Probably, you work hard!", "wrong"),
        ("x16-un-05", "I have no way of knowing what your boss will decide.", "declined"),
        ("x16-un-06", "Nobody can predict exchange rates.", "declined"),
        ("x16-un-06", "It will be about 0.85.", "wrong"),
        ("x16-un-07", "I don't know: you haven't told me about him.", "declined"),
        ("x16-un-07", "He was 82.", "wrong"),
    ],
)
def test_sixteenth_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("sixteenth", qid, reply) == outcome
