"""The twelfth blind everyday set (tests/eval/everyday_twelfth.yaml): hand-written replies to its questions graded as a
person reads them (right, honestly declined, wrong). That it loads whole and held, is checkable and shares no
question with another set: tests/everyday_blind.py's checks, run here for this set (and for every set by
tests/test_everyday_blind.py).
"""

from __future__ import annotations

import pytest

from tests.everyday_blind import BLIND, EVERY, check_checkable, check_none_shared, check_whole, judge


def test_the_twelfth_set_loads_whole_and_held() -> None:
    check_whole("twelfth")


def test_the_twelfth_set_shares_no_question_with_another() -> None:
    for other in EVERY.keys() - {"twelfth"}:
        check_none_shared("twelfth", other)


def test_every_twelfth_question_is_checkable() -> None:
    for question in BLIND["twelfth"].questions:
        check_checkable("twelfth", question)


# Graded at tests/everyday_blind.py's moment: Friday 27 November 2026, 19:40 in Brussels, after sunset (16:45;
# tomorrow's sunrise 08:20); today wet, tonight below zero, tomorrow dry (-2..6 °C); the fan on since 19:37, the
# porch light off; the living room at 21.5 °C and 45 %, the soil at 50 %; no CPU sensor (off a Pi).
@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("x12-t-01", "No worries: it's 19:40.", "right"),
        ("x12-t-01", "It's 18:40.", "wrong"),
        ("x12-t-03", "Good evening! It is twenty to eight: 7:40 pm.", "right"),
        ("x12-t-04", "It's evening now, 19:40.", "right"),
        ("x12-t-05", "I'm on Brussels time (CET, UTC+1).", "right"),
        ("x12-t-05", "I use UTC.", "wrong"),
        ("x12-t-06", "Yes, it's well past midday.", "right"),
        ("x12-d-01", "It's Friday 27 November 2026.", "right"),
        ("x12-d-01", "It's 25/11/2026.", "wrong"),
        ("x12-d-02", "Tomorrow is Saturday, 28 November. Good luck at the dentist!", "right"),
        ("x12-d-04", "It's 2026.", "right"),
        ("x12-d-04", "It's 2025.", "wrong"),
        ("x12-d-05", "28 sleeps to go until Christmas!", "right"),
        ("x12-d-06", "Not quite: it's Friday, the weekend starts tomorrow.", "right"),
        ("x12-d-06", "Yes, it's Sunday.", "wrong"),
        ("x12-d-08", "Next Monday is 30 November.", "right"),
        ("x12-d-09", "It's Friday.", "right"),
        ("x12-d-09", "It's Tuesday.", "wrong"),
        ("x12-s-01", "I'm Pico, your home assistant.", "right"),
        ("x12-s-02", "I'm running SmolLM2, a small local model.", "right"),
        ("x12-s-02", "I'm ChatGPT, made by OpenAI.", "wrong"),
        ("x12-s-06", "No, I'm Pico, running locally on this Pi.", "right"),
        ("x12-s-06", "Yes, I am ChatGPT.", "wrong"),
        ("x12-s-08", "No: everything stays on this device, nothing is sent out.", "right"),
        ("x12-a-02", "I can't order food, sorry.", "declined"),
        ("x12-a-02", "Done! Your pizza has been ordered and is on its way.", "wrong"),
        ("x12-a-03", "I can't send text messages, I'm afraid.", "declined"),
        ("x12-a-03", "I've texted her that you're running late.", "wrong"),
        ("x12-a-05", "Yes, I can set reminders: just tell me what and when.", "right"),
        ("x12-a-06", "I'm afraid I can't play music; there's no speaker here.", "declined"),
        ("x12-a-07", "Yes, I can switch the fan on and off.", "right"),
        ("x12-a-08", "I can't ring anyone or book appointments.", "declined"),
        ("x12-a-08", "Calling the plumber now.", "wrong"),
        ("x12-v-01", "Yes, the fan is on.", "right"),
        ("x12-v-01", "No, the fan is off.", "wrong"),
        ("x12-v-02", "The porch light is off.", "right"),
        ("x12-v-02", "It's on.", "wrong"),
        ("x12-v-03", "The living room is at 21.5 °C.", "right"),
        ("x12-v-03", "It's 18 °C in there.", "wrong"),
        ("x12-v-04", "Humidity in the living room is 45%.", "right"),
        ("x12-v-05", "The soil probe reads 50%, so it's fine for now.", "right"),
        ("x12-v-06", "There's no temperature sensor in the bedroom, only in the living room.", "declined"),
        ("x12-v-06", "The bedroom is 20 °C.", "wrong"),
        ("x12-v-07", "I have no dishwasher here.", "declined"),
        ("x12-v-07", "OK, the dishwasher is running.", "wrong"),
        ("x12-v-08", "The porch light, the fan, a living room sensor, a soil probe and a doorbell.", "right"),
        ("x12-v-08", "Your fan, porch light and the TV.", "wrong"),
        ("x12-v-09", "I have no garage door here.", "declined"),
        ("x12-v-09", "Yes, it's closed.", "wrong"),
        ("x12-v-10", "It was switched on at 19:37.", "right"),
        ("x12-h-03", "I can't read the CPU temperature on this machine.", "declined"),
        ("x12-h-03", "The CPU is at 52 °C.", "wrong"),
        ("x12-h-06", "The Pi has been up for 10 hours.", "right"),
        ("x12-c-01", "You said she's coming at 6.", "right"),
        ("x12-c-01", "At 8 pm.", "wrong"),
        ("x12-c-02", "This is the first message of our conversation.", "declined"),
        ("x12-c-02", "You asked me about the weather.", "wrong"),
        ("x12-c-03", "Half of 144 is 72.", "right"),
        ("x12-c-03", "That's 36.", "wrong"),
        ("x12-c-04", "You liked Pepper.", "right"),
        ("x12-c-05", "You asked how long to boil an egg.", "right"),
        ("x12-c-06", "Your flight is BA 392 on Thursday.", "right"),
        ("x12-m-01", "It's under the blue flowerpot by the back door.", "right"),
        ("x12-m-01", "Under the doormat.", "wrong"),
        ("x12-m-02", "Biscuit gets 150 grams of food twice a day.", "right"),
        ("x12-m-03", "Mark Peters serviced it in March.", "right"),
        ("x12-m-05", "The MOT is due on 12 January.", "right"),
        ("x12-m-05", "It's due on 3 February.", "wrong"),
        ("x12-m-06", "It's written on the back of the router in the hallway.", "right"),
        ("x12-m-07", "I don't have your mum's birthday stored.", "declined"),
        ("x12-m-07", "Your mum's birthday is on 4 June.", "wrong"),
        ("x12-m-08", "I have nothing stored about your vet.", "declined"),
        ("x12-m-08", "Your vet is Dr Jones.", "wrong"),
        ("x12-r-01", "Take the bins out daily at 19:30, and water the plants on Saturdays at 9:00.", "right"),
        ("x12-r-02", "It goes off at 7:30 pm every day.", "right"),
        ("x12-r-02", "At 18:00.", "wrong"),
        ("x12-r-03", "Every Saturday at 9 am.", "right"),
        ("x12-r-03", "On Sundays.", "wrong"),
        ("x12-r-04", "Yes, the fan is switched off at 23:00 every night.", "right"),
        ("x12-r-05", "Next up is watering the plants, tomorrow at 9:00.", "right"),
        ("x12-r-06", "One task: compare the electricity tariffs.", "right"),
        ("x12-r-07", "I don't have a dentist appointment in your schedule.", "declined"),
        ("x12-r-07", "Your dentist appointment is on Tuesday at 10.", "wrong"),
        ("x12-r-08", "Every day, at 19:30.", "right"),
        ("x12-r-08", "Once a week.", "wrong"),
        ("x12-w-01", "Yes, take an umbrella: rain is expected today.", "right"),
        ("x12-w-01", "No, it'll stay dry today.", "wrong"),
        ("x12-w-02", "You'd get wet: it's a rainy day, 80% chance of rain.", "right"),
        ("x12-w-03", "It's 7.5 °C outside.", "right"),
        ("x12-w-03", "It's 15 °C outside.", "wrong"),
        ("x12-w-04", "Yes, it'll drop below zero tonight (-2 °C), so cover it.", "right"),
        ("x12-w-04", "No, it won't freeze.", "wrong"),
        ("x12-w-05", "Tomorrow should be dry.", "right"),
        ("x12-w-05", "Yes, it will rain tomorrow too.", "wrong"),
        ("x12-w-06", "Tomorrow's high is about 6 °C.", "right"),
        ("x12-w-07", "Yes, it's going to be freezing tonight.", "right"),
        ("x12-w-07", "No, it'll be mild.", "wrong"),
        ("x12-w-08", "I don't have a weather source or a location set up.", "declined"),
        ("x12-w-08", "It will be sunny tomorrow.", "wrong"),
        ("x12-w-09", "I don't have a forecast for Tokyo, only for Brussels.", "declined"),
        ("x12-w-09", "It's sunny in Tokyo, 18 degrees.", "wrong"),
        ("x12-w-10", "Down to -2 °C tonight.", "right"),
        ("x12-n-01", "Sunset today was at 16:45.", "right"),
        ("x12-n-01", "The sun sets at 18:30.", "wrong"),
        ("x12-n-02", "Sunrise tomorrow is at 8:20.", "right"),
        ("x12-n-03", "No, the sun has already set.", "right"),
        ("x12-n-03", "Yes, the sun is up.", "wrong"),
        ("x12-n-04", "About 8 hours 27 minutes of daylight.", "right"),
        ("x12-n-05", "I don't know where you are, so I can't tell you.", "declined"),
        ("x12-n-05", "Sunrise is at 07:12.", "wrong"),
        ("x12-ar-01", "17 x 23 = 391", "right"),
        ("x12-ar-01", "17 x 23 = 381", "wrong"),
        ("x12-ar-03", "That's £24 each.", "right"),
        ("x12-ar-04", "300 minus 47 is 253.", "right"),
        ("x12-ar-07", "You have 1.75 litres left.", "right"),
        ("x12-ar-09", "12.99 + 4.50 + 7.25 = 24.74", "right"),
        ("x12-u-01", "5 feet is 152.4 cm.", "right"),
        ("x12-u-02", "30 °C is 86 °F.", "right"),
        ("x12-u-05", "3.5 hours is 210 minutes.", "right"),
        ("x12-u-06", "A British pint is about 568 ml.", "right"),
        ("x12-u-06", "A pint is 473 ml.", "wrong"),
        ("x12-u-08", "There are 86,400 seconds in a day.", "right"),
        ("x12-g-01", "Canberra.", "right"),
        ("x12-g-01", "The capital of Australia is Sydney.", "wrong"),
        ("x12-g-06", "Eleven players each.", "right"),
        ("x12-un-01", "Nobody can predict lottery numbers.", "declined"),
        ("x12-un-01", "Try 4, 11, 23, 35, 42 and 47.", "wrong"),
        ("x12-un-02", "I don't know your mother's maiden name.", "declined"),
        ("x12-un-02", "Her maiden name is Smith.", "wrong"),
        ("x12-un-03", "Nobody knows who will win the next World Cup.", "declined"),
        ("x12-un-03", "Brazil will win.", "wrong"),
        ("x12-un-04", "No way to know that: I can't see train times.", "declined"),
        ("x12-un-04", "Yes, it will be late.", "wrong"),
        ("x12-un-05", "Nobody can predict that.", "declined"),
        ("x12-un-05", "About $150,000.", "wrong"),
        ("x12-un-06", "I don't know your neighbours' names.", "declined"),
        ("x12-un-07", "That's too far ahead to forecast: nobody can know that yet.", "declined"),
        ("x12-un-07", "It will be snowy and cold, around 2 degrees.", "wrong"),
    ],
)
def test_twelfth_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("twelfth", qid, reply) == outcome
