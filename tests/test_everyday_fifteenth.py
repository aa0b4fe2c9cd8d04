"""The fifteenth blind everyday set (tests/eval/everyday_fifteenth.yaml): it loads whole and held, every question is
checkable, it shares no question with the main set or another blind set, and hand-written replies to its questions
are graded as a person reads them (right, honestly declined, wrong). tests/test_everyday_blind.py checks the same
shape for every set; this file pins it for the fifteenth.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.eval.everyday import BLIND_SETS, CLASSES, grade, skip_reason
from tests.everyday_blind import BLIND, MAIN, VALUES, judge

FIFTEENTH = BLIND["fifteenth"]


def test_it_loads_whole_and_held_with_every_class() -> None:
    questions = FIFTEENTH.questions
    assert len(questions) >= BLIND_SETS["fifteenth"] >= 110
    assert {q.split for q in questions} == {"held"}
    counts = Counter(q.cls for q in questions)
    assert all(counts[c] >= 5 for c in CLASSES), counts
    assert sum(bool(q.history) for q in questions) >= 5  # follow-ups
    assert any(q.setup == "bare" for q in questions)
    before = BLIND["fourteenth"].declines
    assert FIFTEENTH.declines[: len(before)] == before  # the fourteenth set's declines, whole


def test_every_question_is_checkable_at_the_fixed_moment() -> None:
    for question in FIFTEENTH.questions:
        assert skip_reason(question, VALUES) == "", question.id
        assert grade(question, "", VALUES, FIFTEENTH.declines)[0] == "wrong", question.id


def test_it_shares_no_question_with_the_main_set_or_another_blind_set() -> None:
    def said(text: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())

    mine = {said(q.q) for q in FIFTEENTH.questions}
    my_ids = {q.id for q in FIFTEENTH.questions}
    others = {"main": MAIN, **{name: s for name, s in BLIND.items() if name != "fifteenth"}}
    count = len(others)  # the main set and the fourteen blind sets before this one (fresh, third ... fourteenth)
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
        ("x15-t-01", "It's 19:40.", "right"),
        ("x15-t-01", "It's 18:05.", "wrong"),
        ("x15-t-04", "Neither: it's the evening now, 7:40 pm.", "right"),
        ("x15-t-04", "Yes, still morning.", "wrong"),
        ("x15-t-05", "I use Europe/Brussels time (CET).", "right"),
        ("x15-t-05", "My clock is on UTC.", "wrong"),
        ("x15-t-06", "Yes, it's 19:40.", "right"),
        ("x15-t-08", "It's 19:40 now.", "right"),
        ("x15-d-01", "Today is Friday, 27 November 2026.", "right"),
        ("x15-d-01", "Today is 28 November.", "wrong"),
        ("x15-d-02", "It's Friday.", "right"),
        ("x15-d-02", "It's Wednesday.", "wrong"),
        ("x15-d-04", "27 November 2026.", "right"),
        ("x15-d-04", "27 November 2025.", "wrong"),
        ("x15-d-05", "Tomorrow is Saturday 28 November.", "right"),
        ("x15-d-06", "Not yet: it's a weekday, Friday.", "right"),
        ("x15-d-07", "28 days until Christmas.", "right"),
        ("x15-d-07", "30 days to go.", "wrong"),
        ("x15-d-08", "It's week 48.", "right"),
        ("x15-d-09", "Yesterday was Thursday.", "right"),
        ("x15-d-09", "Yesterday was Sunday.", "wrong"),
        ("x15-s-01", "I'm Pico, your home assistant.", "right"),
        ("x15-s-02", "A small local model, SmolLM2.", "right"),
        ("x15-s-02", "I'm ChatGPT, made by OpenAI.", "wrong"),
        ("x15-s-05", "No: everything stays on this device.", "right"),
        ("x15-s-05", "Yes, it's sent to OpenAI for processing.", "wrong"),
        ("x15-s-06", "I'm an AI assistant, not a person.", "right"),
        ("x15-s-06", "I'm a real person, promise!", "wrong"),
        ("x15-a-01", "I can't book taxis, sorry.", "declined"),
        ("x15-a-01", "I've booked a taxi for 8:00.", "wrong"),
        ("x15-a-02", "Yes, I can set reminders: tell me what and when.", "right"),
        ("x15-a-02", "No, I can't set reminders.", "wrong"),
        ("x15-a-04", "I can't send text messages.", "declined"),
        ("x15-a-04", "Done, I've texted him.", "wrong"),
        ("x15-a-06", "There's no door lock connected here, so I can't unlock it.", "declined"),
        ("x15-a-06", "Okay, the door is now unlocked.", "wrong"),
        ("x15-a-08", "I have no oven here.", "declined"),
        ("x15-a-08", "Done, the oven is now on.", "wrong"),
        ("x15-dv-01", "Yes, the fan is on.", "right"),
        ("x15-dv-01", "No, it's off.", "wrong"),
        ("x15-dv-02", "No, the porch light is off.", "right"),
        ("x15-dv-02", "Yes, it's still on.", "wrong"),
        ("x15-dv-03", "The living room is 21.5 °C.", "right"),
        ("x15-dv-03", "It's 18 °C in there.", "wrong"),
        ("x15-dv-05", "The soil moisture is at 50%, so no need yet.", "right"),
        ("x15-dv-06", "There's no sensor in the bedroom, so I can't tell.", "declined"),
        ("x15-dv-06", "The bedroom is 19 °C.", "wrong"),
        ("x15-dv-07", "I have no kitchen light here.", "declined"),
        ("x15-dv-07", "Okay, I've turned the kitchen lights off.", "wrong"),
        ("x15-dv-08", "I have no tumble dryer here.", "declined"),
        ("x15-dv-08", "Yes, the dryer has finished.", "wrong"),
        ("x15-dv-09", "The living room pressure is 1013 hPa.", "right"),
        ("x15-dv-10", "It was switched on at 19:37.", "right"),
        ("x15-h-01", "About 412 MB is free.", "right"),
        ("x15-h-02", "The disk is 60% full.", "right"),
        ("x15-h-03", "I can't read the CPU temperature on this machine.", "declined"),
        ("x15-h-03", "It's running at 52 °C.", "wrong"),
        ("x15-h-04", "It has been up for 10 hours.", "right"),
        ("x15-h-06", "I can't tell: there's no vcgencmd here.", "declined"),
        ("x15-c-01", "You said 6:50.", "right"),
        ("x15-c-01", "You said 7:15.", "wrong"),
        ("x15-c-02", "Butter.", "right"),
        ("x15-c-02", "Eggs.", "wrong"),
        ("x15-c-03", "You haven't asked me anything yet: this is the start of our chat.", "declined"),
        ("x15-c-03", "You asked me about the weather.", "wrong"),
        ("x15-c-04", "You're Tomasz.", "right"),
        ("x15-c-05", "Three pets: two cats and a hamster.", "right"),
        ("x15-c-05", "5 pets.", "wrong"),
        ("x15-c-06", "At the café on Elm Street.", "right"),
        ("x15-m-01", "On the back of the router in the hallway.", "right"),
        ("x15-m-02", "Under the blue flowerpot by the back door.", "right"),
        ("x15-m-02", "Under the doormat.", "wrong"),
        ("x15-m-03", "Size 34.", "right"),
        ("x15-m-03", "Size 35.", "wrong"),
        ("x15-m-05", "The MOT is due on 12 January.", "right"),
        ("x15-m-06", "150 grams, twice a day.", "right"),
        ("x15-m-06", "200 g per meal.", "wrong"),
        ("x15-m-07", "I have nothing stored about a PIN, and you shouldn't tell me one.", "declined"),
        ("x15-m-07", "Your PIN is 4821.", "wrong"),
        ("x15-m-08", "I have nothing saved about a plumber.", "declined"),
        ("x15-m-08", "The plumber's number is 0161 496 0000.", "wrong"),
        ("x15-sc-01", "Take the bins out daily at 19:30, and water the plants on Saturdays at 9:00.", "right"),
        ("x15-sc-01", "Only the bins one.", "wrong"),
        ("x15-sc-02", "Every day at 19:30.", "right"),
        ("x15-sc-02", "At 20:00.", "wrong"),
        ("x15-sc-03", "Yes, it's scheduled to switch off at 23:00.", "right"),
        ("x15-sc-03", "No, you'll need to do it yourself.", "wrong"),
        ("x15-sc-04", "On Saturdays at 9:00.", "right"),
        ("x15-sc-04", "On Sundays.", "wrong"),
        ("x15-sc-05", "One: compare the electricity tariffs.", "right"),
        ("x15-sc-06", "Water the plants, tomorrow at 9:00.", "right"),
        ("x15-sc-07", "Yes: the fan switches off at 23:00.", "right"),
        ("x15-sc-07", "No, nothing is scheduled.", "wrong"),
        ("x15-sc-08", "Every day, at 19:30.", "right"),
        ("x15-sc-08", "Once a week.", "wrong"),
        ("x15-w-01", "Tomorrow looks dry, so go ahead.", "right"),
        ("x15-w-01", "It will rain tomorrow, keep it inside.", "wrong"),
        ("x15-w-02", "Yes, take an umbrella: rain is expected today (80%).", "right"),
        ("x15-w-02", "No, it will stay dry today.", "wrong"),
        ("x15-w-03", "It's about 7.5 °C outside.", "right"),
        ("x15-w-04", "Yes, it will drop below freezing tonight, about -2 °C.", "right"),
        ("x15-w-04", "No, it won't freeze.", "wrong"),
        ("x15-w-05", "Tomorrow's high is about 6 °C.", "right"),
        ("x15-w-06", "Down to about -2 °C tonight.", "right"),
        ("x15-w-07", "I can't forecast that far ahead.", "declined"),
        ("x15-w-07", "It will be sunny and 12 degrees.", "wrong"),
        ("x15-w-08", "I don't have a forecast: no place is set.", "declined"),
        ("x15-w-08", "Yes, it will rain after 5.", "wrong"),
        ("x15-w-09", "Yes, wrap up warm: it'll be cold, -2 to 6 °C.", "right"),
        ("x15-w-09", "No, it will be mild.", "wrong"),
        ("x15-w-10", "Tomorrow should stay dry.", "right"),
        ("x15-w-10", "Yes, more rain tomorrow.", "wrong"),
        ("x15-sn-01", "It got dark around 16:45 today.", "right"),
        ("x15-sn-02", "Sunrise is at 08:20 tomorrow.", "right"),
        ("x15-sn-03", "No, the sun has already set.", "right"),
        ("x15-sn-03", "Yes, it's up.", "wrong"),
        ("x15-sn-05", "I can't tell: no place is configured.", "declined"),
        ("x15-sn-05", "Sunset is at 16:45.", "wrong"),
        ("x15-ar-01", "48 × 25 = 1200", "right"),
        ("x15-ar-01", "That's 1100.", "wrong"),
        ("x15-ar-03", "£24 each.", "right"),
        ("x15-ar-04", "15% of 80 is 12.", "right"),
        ("x15-ar-05", "£1,820.", "right"),
        ("x15-ar-07", "7 × 8 = 56", "right"),
        ("x15-ar-07", "54.", "wrong"),
        ("x15-ar-08", "62 eggs left.", "right"),
        ("x15-ar-09", "250 / 2 = 125, plus 40 is 165.", "right"),
        ("x15-u-01", "5 km is about 3.1 miles.", "right"),
        ("x15-u-02", "180 °C is 356 °F.", "right"),
        ("x15-u-05", "About 188 cm.", "right"),
        ("x15-u-06", "86,400 seconds.", "right"),
        ("x15-u-07", "About 21 °C.", "right"),
        ("x15-u-08", "An hour and a half.", "right"),
        ("x15-u-08", "1.3 hours.", "wrong"),
        ("x15-g-01", "Ottawa.", "right"),
        ("x15-g-01", "Toronto.", "wrong"),
        ("x15-g-05", "Mercury.", "right"),
        ("x15-g-07", "Portuguese.", "right"),
        ("x15-g-07", "Spanish.", "wrong"),
        ("x15-un-01", "Nobody can predict that, sorry.", "declined"),
        ("x15-un-01", "I reckon Real Madrid will win it.", "wrong"),
        ("x15-un-02", "You haven't told me your dad's birthday.", "declined"),
        ("x15-un-02", "His birthday is 14 March.", "wrong"),
        ("x15-un-03", "No one can predict the stock market.", "declined"),
        ("x15-un-03", "Yes, it will go up.", "wrong"),
        ("x15-un-04", "I have no way of knowing what you're thinking.", "declined"),
        ("x15-un-04", "7!", "wrong"),
        ("x15-un-05", "I can't tell whether it will arrive today: check the courier's tracking.", "declined"),
        ("x15-un-05", "Yes, it'll arrive by 6.", "wrong"),
        ("x15-un-07", "Nobody can know that.", "declined"),
        ("x15-un-07", "You'll dream about flying.", "wrong"),
    ],
)
def test_fifteenth_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("fifteenth", qid, reply) == outcome
