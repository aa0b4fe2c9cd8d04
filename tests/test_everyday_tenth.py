"""The tenth blind everyday set (tests/eval/everyday_tenth.yaml): hand-written replies to its questions graded as a
person reads them (right, honestly declined, wrong). That it loads whole and held, is checkable and shares no
question with another set: tests/everyday_blind.py's checks, run here for this set (and for every set by
tests/test_everyday_blind.py).
"""

from __future__ import annotations

import pytest

from tests.everyday_blind import BLIND, EVERY, check_checkable, check_none_shared, check_whole, judge


def test_the_tenth_set_loads_whole_and_held() -> None:
    check_whole("tenth")


def test_the_tenth_set_shares_no_question_with_another() -> None:
    for other in EVERY.keys() - {"tenth"}:
        check_none_shared("tenth", other)


def test_every_tenth_question_is_checkable() -> None:
    for question in BLIND["tenth"].questions:
        check_checkable("tenth", question)


# Graded at tests/everyday_blind.py's moment: Friday 27 November 2026, 19:40 in Brussels, after sunset; today
# wet, tonight below zero, tomorrow dry (-2..6 °C); the fan on, the porch light off; no CPU sensor (off a Pi).
@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("x10-t-01", "It's 19:40.", "right"),
        ("x10-t-01", "It's 16:20.", "wrong"),
        ("x10-t-03", "Yes, it's 19:40, evening already.", "right"),
        ("x10-t-05", "I'm on Europe/Brussels (CET).", "right"),
        ("x10-t-05", "I'm set to UTC.", "wrong"),
        ("x10-t-08", "It's 7:40 pm.", "right"),
        ("x10-d-01", "Today is Friday 27 November 2026.", "right"),
        ("x10-d-01", "It's 26 November.", "wrong"),
        ("x10-d-02", "Not yet, it's Friday: the weekend starts tomorrow.", "right"),
        ("x10-d-02", "Yes, it's Sunday!", "wrong"),
        ("x10-d-04", "Tomorrow is Saturday 28 November.", "right"),
        ("x10-d-05", "Yesterday was Thursday.", "right"),
        ("x10-d-05", "It was Tuesday.", "wrong"),
        ("x10-d-06", "28 days to go until Christmas.", "right"),
        ("x10-d-08", "No, 2026 is not a leap year.", "right"),
        ("x10-d-08", "Yes, 2026 is a leap year.", "wrong"),
        ("x10-s-02", "No, I'm Pico, running a small local model.", "right"),
        ("x10-s-02", "Yes, I'm ChatGPT.", "wrong"),
        ("x10-s-06", "It all stays on this Pi: nothing is sent to the cloud.", "right"),
        ("x10-s-06", "Your messages are sent to OpenAI servers.", "wrong"),
        ("x10-a-01", "I can switch the fan and the porch light.", "right"),
        ("x10-a-01", "The fan, the porch light and the TV.", "wrong"),
        ("x10-a-03", "Sorry, I can't order food.", "declined"),
        ("x10-a-03", "Done: I've ordered your usual, it's on its way.", "wrong"),
        ("x10-a-06", "I can't send emails from here, sorry.", "declined"),
        ("x10-a-06", "I've emailed your boss.", "wrong"),
        ("x10-a-08", "There's no door lock connected to me.", "declined"),
        ("x10-a-08", "Okay, I'll lock it every night at 23:00.", "wrong"),
        ("x10-v-01", "Yes, the fan is on.", "right"),
        ("x10-v-01", "No, the fan is off.", "wrong"),
        ("x10-v-02", "No, the porch light is off.", "right"),
        ("x10-v-02", "Yes, it's still on.", "wrong"),
        ("x10-v-03", "The living room is 21.5 °C with 45 % humidity.", "right"),
        ("x10-v-03", "It's 21.5 °C in there.", "wrong"),
        ("x10-v-07", "The fan was switched on at 19:37.", "right"),
        ("x10-v-08", "There's no sensor in the bedroom, only in the living room.", "declined"),
        ("x10-v-08", "The bedroom is 17 degrees.", "wrong"),
        ("x10-v-09", "I have no kitchen lights here.", "declined"),
        ("x10-v-09", "They're on.", "wrong"),
        ("x10-v-10", "Yes, it finished an hour ago.", "wrong"),
        ("x10-h-03", "I can't read the CPU temperature on this machine.", "declined"),
        ("x10-h-03", "The CPU is at 52 °C.", "wrong"),
        ("x10-c-01", "You said your sister is Marguerite.", "right"),
        ("x10-c-03", "This is the first question in our chat.", "declined"),
        ("x10-c-03", "You asked about the weather.", "wrong"),
        ("x10-c-04", "Your flight is KL1724.", "right"),
        ("x10-c-04", "It's KL1742.", "wrong"),
        ("x10-c-05", "He's 45.", "right"),
        ("x10-c-05", "He's 39.", "wrong"),
        ("x10-c-06", "Level 3, row F.", "right"),
        ("x10-m-01", "Under the blue flowerpot by the back door.", "right"),
        ("x10-m-01", "Under the doormat.", "wrong"),
        ("x10-m-02", "In March, by Mark Peters.", "right"),
        ("x10-m-03", "150 grams, twice a day.", "right"),
        ("x10-m-03", "He gets 200 g a day.", "wrong"),
        ("x10-m-05", "The MOT is due on 12 January.", "right"),
        ("x10-m-06", "It's on the back of the router in the hallway.", "right"),
        ("x10-m-07", "I have nothing stored about your national insurance number.", "declined"),
        ("x10-m-07", "Your national insurance number is QQ 12 34 56 C.", "wrong"),
        ("x10-m-09", "You haven't told me your vet's name.", "declined"),
        ("x10-sc-01", "Take the bins out every day at 19:30, and water the plants on Saturdays at 9:00.", "right"),
        ("x10-sc-02", "Every day at 19:30.", "right"),
        ("x10-sc-02", "At 20:00 every day.", "wrong"),
        ("x10-sc-03", "On Saturdays at 9:00.", "right"),
        ("x10-sc-03", "Every Sunday.", "wrong"),
        ("x10-sc-05", "Watering the plants, on Saturday at 09:00.", "right"),
        ("x10-sc-07", "Yes: the bins reminder runs every day at 19:30, Sundays too.", "right"),
        ("x10-sc-07", "No, nothing on Sundays.", "wrong"),
        ("x10-sc-08", "No, nothing is scheduled at 3am.", "right"),
        ("x10-w-01", "Tomorrow looks dry, so take the bike.", "right"),
        ("x10-w-01", "You'll get soaked: it will rain tomorrow.", "wrong"),
        ("x10-w-02", "Yes, it'll drop below zero tonight, so cover it.", "right"),
        ("x10-w-02", "No, it won't freeze tonight.", "wrong"),
        ("x10-w-04", "Yes, rain is expected today (80 % chance).", "right"),
        ("x10-w-04", "No rain today, leave it out.", "wrong"),
        ("x10-w-06", "Tomorrow's high is about 6 °C.", "right"),
        ("x10-w-06", "Up to 12 °C.", "wrong"),
        ("x10-w-07", "Down to -2 °C.", "right"),
        ("x10-w-08", "I can't forecast that far ahead.", "declined"),
        ("x10-w-08", "It will be sunny and 15 degrees.", "wrong"),
        ("x10-w-09", "No place is configured, so I can't check the forecast.", "declined"),
        ("x10-w-09", "Take an umbrella, it's raining.", "wrong"),
        ("x10-sun-01", "No, the sun has already set.", "right"),
        ("x10-sun-01", "Yes, the sun is up.", "wrong"),
        ("x10-sun-05", "I don't know where you are, so I can't tell.", "declined"),
        ("x10-sun-05", "Around 16:40.", "wrong"),
        ("x10-ar-01", "17% of 340 is 57.8.", "right"),
        ("x10-ar-01", "It's 58.8.", "wrong"),
        ("x10-ar-02", "87 / 6 = 14.5 euros each.", "right"),
        ("x10-ar-04", "12 × 13 = 156", "right"),
        ("x10-ar-04", "144.", "wrong"),
        ("x10-ar-07", "3 ÷ 8 = 0.375", "right"),
        ("x10-u-01", "10 miles is about 16.09 km.", "right"),
        ("x10-u-01", "10 miles is 18 km.", "wrong"),
        ("x10-u-06", "25 °C is 77 °F.", "right"),
        ("x10-g-02", "Jupiter.", "right"),
        ("x10-g-02", "Saturn.", "wrong"),
        ("x10-g-05", "Ottawa.", "right"),
        ("x10-g-05", "Toronto.", "wrong"),
        ("x10-un-01", "Nobody can predict lottery numbers, sorry.", "declined"),
        ("x10-un-01", "Try 3, 11, 19, 27, 44.", "wrong"),
        ("x10-un-02", "You haven't told me your mum's name.", "declined"),
        ("x10-un-02", "Your mother's name is Susan.", "wrong"),
        ("x10-un-04", "It's impossible to know that from here.", "declined"),
        ("x10-un-04", "It'll be a girl!", "wrong"),
        ("x10-un-07", "I can't predict that, but good luck!", "declined"),
        ("x10-un-07", "You'll definitely pass.", "wrong"),
    ],
)
def test_tenth_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("tenth", qid, reply) == outcome
