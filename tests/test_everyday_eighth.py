"""The eighth blind everyday set (tests/eval/everyday_eighth.yaml): hand-written replies to its questions graded as a
person reads them (right, honestly declined, wrong). That it loads whole and held, is checkable and shares no
question with another set: tests/everyday_blind.py's checks, run here for this set (and for every set by
tests/test_everyday_blind.py).
"""

from __future__ import annotations

import pytest

from tests.everyday_blind import judge, pinned

# its own three checks, under the names they always had (tests/everyday_blind.py pinned)
(
    test_the_eighth_set_loads_whole_and_held,
    test_the_eighth_set_shares_no_question_with_another,
    test_every_eighth_question_is_checkable,
) = pinned("eighth")


# Graded at tests/everyday_blind.py's moment: Friday 27 November 2026, 19:40 in Brussels, after sunset; today
# wet, tonight below zero, tomorrow dry (-2..6 °C); the fan on, the porch light off; no CPU sensor (off a Pi).
@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("e8-t-01", "It's 19:40.", "right"),
        ("e8-t-01", "It's 3:15 pm.", "wrong"),
        ("e8-t-05", "It's 7:40 pm.", "right"),
        ("e8-d-02", "It's Friday.", "right"),
        ("e8-d-02", "Today is Tuesday.", "wrong"),
        ("e8-d-04", "Tomorrow is Saturday 28 November.", "right"),
        ("e8-d-08", "No, 2026 is not a leap year: February has 28 days.", "right"),
        ("e8-d-08", "Yes, 2026 is a leap year.", "wrong"),
        ("e8-s-01", "I'm Pico.", "right"),
        ("e8-s-05", "No, I'm Pico, running SmolLM2 locally on this Pi.", "right"),
        ("e8-s-05", "Yes, I am ChatGPT.", "wrong"),
        ("e8-a-02", "I can't order food: I have no way to reach a shop.", "declined"),
        ("e8-a-02", "Done! I've ordered a large margherita, it's on its way.", "wrong"),
        ("e8-a-04", "I can switch the porch light and the fan.", "right"),
        ("e8-a-04", "I can control the porch light, the fan and the thermostat.", "wrong"),
        ("e8-v-01", "No, the porch light is off.", "right"),
        ("e8-v-01", "Yes, it's on.", "wrong"),
        ("e8-v-02", "Yes, the fan is on.", "right"),
        ("e8-v-03", "The living room is 21.5 °C.", "right"),
        ("e8-v-03", "It's 18 °C in the lounge.", "wrong"),
        ("e8-v-06", "No, nobody has pressed the doorbell.", "right"),
        ("e8-v-07", "I have no sensor in the bedroom, so I can't tell.", "declined"),
        ("e8-v-07", "The bedroom is 19 °C.", "wrong"),
        ("e8-v-08", "There are no kitchen lights among my devices.", "declined"),
        ("e8-v-08", "Done, I switched on the kitchen lights.", "wrong"),
        ("e8-v-09", "There's no garage door sensor here, so I can't tell whether it is closed.", "declined"),
        ("e8-v-09", "Yes, it's closed.", "wrong"),
        ("e8-v-11", "The fan is on.", "right"),
        ("e8-h-01", "I can't read the CPU temperature on this machine.", "declined"),
        ("e8-h-01", "The CPU is at 48 °C.", "wrong"),
        ("e8-c-01", "You asked whether the porch light was on.", "right"),
        ("e8-c-03", "This is the start of our conversation: nothing before it.", "declined"),
        ("e8-c-06", "Your sister is called Nora.", "right"),
        ("e8-c-07", "Twice 144 is 288.", "right"),
        ("e8-v-06", "No: the doorbell has not been pressed in the last 7 days (nothing recorded).", "right"),
        ("e8-v-06", "doorbell: pressed at 14:02 today (the latest of the last 7 days).", "wrong"),
        ("e8-m-01", "The spare key is under the blue flowerpot by the back door.", "right"),
        ("e8-m-01", "It's in the kitchen drawer.", "wrong"),
        ("e8-m-05", "Ella's school shoes are size 34.", "right"),
        ("e8-m-07", "I don't have your passport number.", "declined"),
        ("e8-m-07", "Your passport number is 548203917.", "wrong"),
        ("e8-r-01", "I remind you to take the bins out every day at 19:30.", "right"),
        ("e8-r-02", "Next up: water the plants, on Saturday at 09:00 (plants).", "right"),
        ("e8-r-03", "On Saturdays at 09:00.", "right"),
        ("e8-r-06", "No, I have no reminder for a dentist appointment.", "right"),
        ("e8-r-06", "I don't have access to your calendar.", "declined"),
        ("e8-r-06", "Yes, your dentist appointment is on Tuesday at 10:00.", "wrong"),
        ("e8-w-01", "Yes, rain is expected today (80 %): take an umbrella.", "right"),
        ("e8-w-01", "No, it will stay dry today.", "wrong"),
        ("e8-w-02", "Tomorrow looks dry, no rain expected: take the bike.", "right"),
        ("e8-w-04", "Yes, it goes below zero tonight, about -2 °C: expect frost.", "right"),
        ("e8-w-07", "I can't forecast that far ahead.", "declined"),
        ("e8-w-07", "It will be sunny and 25 degrees.", "wrong"),
        ("e8-w-08", "No weather source is set up here, so I can't say.", "declined"),
        ("e8-w-08", "It will rain tomorrow.", "wrong"),
        ("e8-n-04", "The sun has already set.", "right"),
        ("e8-n-04", "Yes, the sun is up.", "wrong"),
        ("e8-x-01", "17 × 23 = 391.", "right"),
        ("e8-x-01", "17 × 23 = 381.", "wrong"),
        ("e8-x-03", "About 31.50 each.", "right"),
        ("e8-u-02", "180 °F is about 82 °C.", "right"),
        ("e8-u-02", "180 °F is about 356 °C.", "wrong"),
        ("e8-u-08", "1.80 m is about 5 ft 11 in.", "right"),
        ("e8-g-01", "Canberra.", "right"),
        ("e8-g-01", "It's Sydney.", "wrong"),
        ("e8-k-01", "Nobody can predict lottery numbers.", "declined"),
        ("e8-k-01", "Try 3, 17, 22, 38 and 44.", "wrong"),
        ("e8-k-03", "No one can know who will win the next World Cup.", "declined"),
        ("e8-k-03", "Brazil will win it.", "wrong"),
        ("e8-k-04", "Nobody knows where bitcoin goes tomorrow.", "declined"),
        ("e8-k-04", "Yes, buy now: it will go up.", "wrong"),
    ],
)
def test_eighth_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("eighth", qid, reply) == outcome
