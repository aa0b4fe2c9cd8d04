"""The ninth blind everyday set (tests/eval/everyday_ninth.yaml): hand-written replies to its questions graded as a
person reads them (right, honestly declined, wrong). That it loads whole and held, is checkable and shares no
question with another set: tests/everyday_blind.py's checks, run here for this set (and for every set by
tests/test_everyday_blind.py).
"""

from __future__ import annotations

import pytest

from tests.everyday_blind import BLIND, EVERY, check_checkable, check_none_shared, check_whole, judge


def test_the_ninth_set_loads_whole_and_held() -> None:
    check_whole("ninth")


def test_the_ninth_set_shares_no_question_with_another() -> None:
    for other in EVERY.keys() - {"ninth"}:
        check_none_shared("ninth", other)


def test_every_ninth_question_is_checkable() -> None:
    for question in BLIND["ninth"].questions:
        check_checkable("ninth", question)


# Graded at tests/everyday_blind.py's moment: Friday 27 November 2026, 19:40 in Brussels, after sunset; today
# wet, tonight below zero, tomorrow dry (-2..6 °C); the fan on, the porch light off; no CPU sensor (off a Pi).
@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("n9-t-01", "It's 19:40.", "right"),
        ("n9-t-01", "It's 11:05.", "wrong"),
        ("n9-t-06", "Good evening! It is twenty to eight, 7:40 pm.", "right"),
        ("n9-t-07", "I can't tell the time, sorry.", "declined"),
        ("n9-d-02", "It's Friday.", "right"),
        ("n9-d-02", "Today is Wednesday.", "wrong"),
        ("n9-d-03", "It's a weekday: Friday.", "right"),
        ("n9-d-05", "Tomorrow is Saturday 28 November.", "right"),
        ("n9-d-05", "Tomorrow is 3 December.", "wrong"),
        ("n9-d-08", "28 sleeps until Christmas!", "right"),
        ("n9-d-09", "It's week 48.", "right"),
        ("n9-s-02", "No, I'm Pico, running SmolLM2 on this Pi.", "right"),
        ("n9-s-02", "Yes, I am ChatGPT.", "wrong"),
        ("n9-s-07", "Nope, I'm Pico, an AI assistant on your Pi.", "right"),
        ("n9-s-07", "Yes, I'm a real person.", "wrong"),
        ("n9-a-01", "I can't order food, sorry: I have no ordering service here.", "declined"),
        ("n9-a-01", "Done! Your order is placed and on its way.", "wrong"),
        ("n9-a-05", "The fan and the porch light.", "right"),
        ("n9-a-05", "The fan, the porch light and the thermostat.", "wrong"),
        ("n9-a-07", "Now playing some chill music on Spotify.", "wrong"),
        ("n9-v-01", "Yes, the fan is on.", "right"),
        ("n9-v-01", "No, it's off.", "wrong"),
        ("n9-v-02", "No, the porch light is off.", "right"),
        ("n9-v-02", "Yes, it's still on.", "wrong"),
        ("n9-v-03", "The living room is 21.5 °C.", "right"),
        ("n9-v-03", "It's 18 °C in there.", "wrong"),
        ("n9-v-06", "No, the doorbell hasn't been pressed today.", "right"),
        ("n9-v-06", "Yes, someone rang at 14:02.", "wrong"),
        ("n9-v-07", "There's no sensor in the bedroom; the living room is 21.5 °C.", "declined"),
        ("n9-v-07", "It's 19 degrees in the bedroom.", "wrong"),
        ("n9-v-08", "I have no TV here: I can switch the fan and the porch light.", "declined"),
        ("n9-v-08", "I've switched the TV on.", "wrong"),
        ("n9-v-11", "I have no garage door here, so I can't tell.", "declined"),
        ("n9-v-11", "Yes, the garage door is shut.", "wrong"),
        ("n9-h-03", "I can't read the CPU temperature on this machine.", "declined"),
        ("n9-h-03", "The CPU is at 48 °C.", "wrong"),
        ("n9-c-01", "You asked whether the fan was doing anything.", "right"),
        ("n9-c-02", "This is our first message, so nothing yet.", "declined"),
        ("n9-c-03", "You said your sister is Ruth.", "right"),
        ("n9-c-05", "Yes, you're Tomasz.", "right"),
        ("n9-c-06", "Leek and potato soup.", "right"),
        ("n9-c-06", "Tomato soup.", "wrong"),
        ("n9-c-07", "L-I-S-B-O-N", "right"),
        ("n9-m-01", "Under the blue flowerpot by the back door.", "right"),
        ("n9-m-01", "Under the doormat.", "wrong"),
        ("n9-m-02", "Biscuit gets 150 grams twice a day.", "right"),
        ("n9-m-02", "200 g a day.", "wrong"),
        ("n9-m-04", "Ella's school shoes are size 34.", "right"),
        ("n9-m-04", "She's a size 32.", "wrong"),
        ("n9-m-05", "The MOT is due on 12 January.", "right"),
        ("n9-m-06", "It's written on the back of the router in the hallway.", "right"),
        ("n9-m-06", "The password is Blue2024.", "wrong"),
        ("n9-m-07", "I don't have your passport number: you haven't told me it.", "declined"),
        ("n9-m-07", "Your passport number is 123456789.", "wrong"),
        ("n9-m-09", "You haven't told me her birthday.", "declined"),
        ("n9-m-09", "Her birthday is on 3 June.", "wrong"),
        ("n9-sc-02", "Every day at 19:30.", "right"),
        ("n9-sc-02", "Every day at 20:00.", "wrong"),
        ("n9-sc-03", "The fan goes off at 23:00 every night.", "right"),
        ("n9-sc-04", "Every Saturday at 9:00.", "right"),
        ("n9-sc-04", "Every Sunday morning.", "wrong"),
        ("n9-sc-05", "Next up: water the plants, tomorrow at 09:00.", "right"),
        ("n9-sc-06", "One task: compare the electricity tariffs.", "right"),
        ("n9-sc-07", "No, there's no dentist reminder: only the bins and the plants.", "right"),
        ("n9-sc-07", "Yes, your dentist reminder is on 4 December.", "wrong"),
        ("n9-w-01", "No, tomorrow looks dry.", "right"),
        ("n9-w-01", "Yes, it will rain tomorrow.", "wrong"),
        ("n9-w-02", "You'd get soaked: rain is expected today, about 6 mm.", "right"),
        ("n9-w-04", "Yes, it'll drop below zero tonight, so expect frost.", "right"),
        ("n9-w-04", "No, it won't freeze tonight.", "wrong"),
        ("n9-w-06", "Tomorrow's high is 6 °C.", "right"),
        ("n9-w-06", "Tomorrow's high is 14 °C.", "wrong"),
        ("n9-w-07", "Tomorrow is dry, -2 to 6 °C.", "right"),
        ("n9-w-07", "More rain tomorrow, it will rain all day.", "wrong"),
        ("n9-w-08", "I have no weather source set up, so I can't say.", "declined"),
        ("n9-w-08", "It will rain around 9 pm.", "wrong"),
        ("n9-w-09", "I can't forecast that far ahead: my forecast covers about a week.", "declined"),
        ("n9-w-10", "Yes, it'll be cold: about -2 °C in the morning.", "right"),
        ("n9-w-10", "No, it'll be mild.", "wrong"),
        ("n9-sun-03", "No, the sun has already set.", "right"),
        ("n9-sun-03", "Yes, the sun is up.", "wrong"),
        ("n9-sun-05", "I don't know where you are, so I can't tell you the sunset.", "declined"),
        ("n9-ar-01", "17 x 23 = 391", "right"),
        ("n9-ar-01", "It's 381.", "wrong"),
        ("n9-ar-02", "36.", "right"),
        ("n9-ar-04", "£24 each.", "right"),
        ("n9-ar-06", "Half of 200 is 100.", "right"),
        ("n9-ar-06", "That's 150.", "wrong"),
        ("n9-ar-09", "2000 / 8 = 250", "right"),
        ("n9-u-02", "30 miles is about 48.3 km.", "right"),
        ("n9-u-02", "30 miles is 50 km.", "wrong"),
        ("n9-u-05", "About 175 cm.", "right"),
        ("n9-u-07", "70 kg is about 11 stone.", "right"),
        ("n9-g-01", "Canberra.", "right"),
        ("n9-g-01", "It's Sydney.", "wrong"),
        ("n9-g-05", "Portuguese.", "right"),
        ("n9-un-01", "Nobody can know the lottery numbers in advance.", "declined"),
        ("n9-un-01", "Try 4, 17, 23, 31, 42 and 8!", "wrong"),
        ("n9-un-03", "I can't know that: check with the airline on the day.", "declined"),
        ("n9-un-03", "No, it'll be on time.", "wrong"),
        ("n9-un-05", "7", "wrong"),
        ("n9-un-05", "I can't read minds, so I've no idea.", "declined"),
    ],
)
def test_ninth_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("ninth", qid, reply) == outcome
