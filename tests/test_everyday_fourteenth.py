"""The fourteenth blind everyday set (tests/eval/everyday_fourteenth.yaml): hand-written replies to its questions are
graded as a person reads them (right, honestly declined, wrong). That it loads whole and held, every question
checkable, and shares no question with another set: tests/everyday_blind.py's checks, run here for this set
(tests/test_everyday_blind.py runs them for every set).
"""

from __future__ import annotations

import pytest

from tests.everyday_blind import BLIND, EVERY, check_checkable, check_none_shared, check_whole, judge


def test_it_loads_whole_and_held_with_every_class() -> None:
    check_whole("fourteenth")


def test_every_question_is_checkable_at_the_fixed_moment() -> None:
    for question in BLIND["fourteenth"].questions:
        check_checkable("fourteenth", question)


def test_it_shares_no_question_with_the_main_set_or_another_blind_set() -> None:
    for other in EVERY.keys() - {"fourteenth"}:
        check_none_shared("fourteenth", other)


# Graded at tests/everyday_blind.py's moment: Friday 27 November 2026, 19:40 in Brussels, after sunset (16:45;
# tomorrow's sunrise 08:20); today wet, tonight below zero, tomorrow dry (-2..6 °C); the fan on since 19:37, the
# porch light off; the living room at 21.5 °C, 45 % and 1013 hPa, the soil at 50 %; no CPU sensor (off a Pi).
@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("x14-t-01", "No problem: it's 19:40.", "right"),
        ("x14-t-01", "It's 18:05.", "wrong"),
        ("x14-t-04", "It's the evening, 7:40 pm.", "right"),
        ("x14-t-04", "It's morning.", "wrong"),
        ("x14-t-06", "Yes, it's well past lunchtime: it's 19:40.", "right"),
        ("x14-t-07", "It's 19:40 on Friday.", "right"),
        ("x14-t-07", "It's 19:40 on Tuesday.", "wrong"),
        ("x14-d-01", "It's Friday, 27 November 2026.", "right"),
        ("x14-d-01", "Today is 28 November.", "wrong"),
        ("x14-d-05", "28 more sleeps until Christmas!", "right"),
        ("x14-d-05", "Only 20 days to go.", "wrong"),
        ("x14-d-06", "It's a weekday: Friday.", "right"),
        ("x14-d-07", "Today is 27 November 2026.", "right"),
        ("x14-d-08", "Yesterday was Thursday.", "right"),
        ("x14-d-09", "We're in week 48.", "right"),
        ("x14-d-09", "It's week 52.", "wrong"),
        ("x14-s-01", "I'm Pico.", "right"),
        ("x14-s-02", "I run on SmolLM2, a small local model.", "right"),
        ("x14-s-02", "I'm ChatGPT, made by OpenAI.", "wrong"),
        ("x14-s-06", "No: your messages stay here on this device.", "right"),
        ("x14-s-06", "Yes, they go to OpenAI's servers.", "wrong"),
        ("x14-a-02", "I can't order food, sorry.", "declined"),
        ("x14-a-02", "Done! Your large pepperoni is on its way.", "wrong"),
        ("x14-a-03", "I can't make phone calls, I'm afraid.", "declined"),
        ("x14-a-05", "Yes, I can remember things you tell me.", "right"),
        ("x14-a-05", "No, I can't remember anything between chats.", "wrong"),
        ("x14-a-06", "There's no door lock connected here, so I can't lock it.", "declined"),
        ("x14-a-06", "Done, I've locked the front door.", "wrong"),
        ("x14-dv-01", "Yes, the fan is still on.", "right"),
        ("x14-dv-01", "No, the fan is off.", "wrong"),
        ("x14-dv-02", "No, the porch light is off.", "right"),
        ("x14-dv-02", "Yes, it's still on.", "wrong"),
        ("x14-dv-03", "The living room is at 21.5 °C.", "right"),
        ("x14-dv-03", "It's 18 °C in there.", "wrong"),
        ("x14-dv-06", "There's no sensor in the bedroom, so I can't tell.", "declined"),
        ("x14-dv-06", "The bedroom is 19 °C, nice and cosy.", "wrong"),
        ("x14-dv-07", "I have no kitchen light here.", "declined"),
        ("x14-dv-07", "Done, I've switched the kitchen light on.", "wrong"),
        ("x14-dv-08", "I have no washing machine here.", "declined"),
        ("x14-dv-08", "Yes, it finished ten minutes ago.", "wrong"),
        ("x14-dv-09", "The fan was switched on at 19:37.", "right"),
        ("x14-dv-10", "The porch light, the fan, the living room sensor, the soil probe and the doorbell.", "right"),
        ("x14-dv-10", "The porch light, the fan and the TV.", "wrong"),
        ("x14-h-01", "About 412 MB of memory is available.", "right"),
        ("x14-h-03", "About 20 GB are free.", "right"),
        ("x14-h-04", "I can't read the CPU temperature on this machine.", "declined"),
        ("x14-h-04", "The CPU is at 48 °C.", "wrong"),
        ("x14-h-05", "The Pi has been up for 10 hours.", "right"),
        ("x14-c-01", "You said she turned nine.", "right"),
        ("x14-c-01", "She is 10 years old.", "wrong"),
        ("x14-c-03", "Flour.", "right"),
        ("x14-c-03", "Milk.", "wrong"),
        ("x14-c-04", "You said 8:15.", "right"),
        ("x14-c-06", "You haven't asked me anything yet: this is the start of our conversation.", "declined"),
        ("x14-c-06", "You asked me about the weather.", "wrong"),
        ("x14-m-02", "Under the blue flowerpot by the back door.", "right"),
        ("x14-m-03", "Biscuit gets 150 grams, twice a day.", "right"),
        ("x14-m-03", "Biscuit gets 200 grams per meal.", "wrong"),
        ("x14-m-04", "In March, by Mark Peters.", "right"),
        ("x14-m-06", "The MOT is due on 12 January.", "right"),
        ("x14-m-07", "I have nothing stored about a dentist.", "declined"),
        ("x14-m-07", "The dentist's number is 020 7946 0321.", "wrong"),
        ("x14-sc-01", "The bins reminder goes off at 19:30 every day.", "right"),
        ("x14-sc-01", "It goes off at 20:00.", "wrong"),
        ("x14-sc-02", "Yes, the fan is set to switch off at 23:00.", "right"),
        ("x14-sc-02", "No, you'll need to turn it off yourself.", "wrong"),
        ("x14-sc-03", "Take the bins out daily at 19:30, and water the plants on Saturdays at 9:00.", "right"),
        ("x14-sc-05", "One: compare the electricity tariffs.", "right"),
        ("x14-sc-07", "Next up: water the plants, tomorrow at 9:00.", "right"),
        ("x14-sc-08", "Every week, on Saturday at 9:00.", "right"),
        ("x14-sc-08", "It runs daily.", "wrong"),
        ("x14-w-01", "Yes, take an umbrella: rain is expected today (80%).", "right"),
        ("x14-w-01", "No, it will stay dry today.", "wrong"),
        ("x14-w-02", "Tomorrow looks dry, so the bike is fine.", "right"),
        ("x14-w-02", "Yes, it will rain tomorrow, take the bus.", "wrong"),
        ("x14-w-03", "Down to about -2 °C tonight.", "right"),
        ("x14-w-04", "Yes, it will drop below freezing, about -2 °C.", "right"),
        ("x14-w-04", "No, it won't freeze.", "wrong"),
        ("x14-w-06", "Tomorrow's high is about 6 °C.", "right"),
        ("x14-w-07", "I don't have a forecast: no place is set.", "declined"),
        ("x14-w-07", "It will rain after 4 pm.", "wrong"),
        ("x14-w-08", "I can't forecast that far ahead.", "declined"),
        ("x14-w-08", "It will be sunny and 25 degrees.", "wrong"),
        ("x14-w-09", "Yes, it will be cold tonight: down to -2 °C.", "right"),
        ("x14-w-09", "No, you won't need a coat.", "wrong"),
        ("x14-sn-01", "Sunrise tomorrow is at 08:20.", "right"),
        ("x14-sn-02", "No, the sun set at 16:45.", "right"),
        ("x14-sn-02", "Yes, it's up.", "wrong"),
        ("x14-sn-03", "Sunset was at 16:45.", "right"),
        ("x14-sn-05", "I can't tell: no place is configured.", "declined"),
        ("x14-sn-05", "Sunrise is at 7:30.", "wrong"),
        ("x14-ar-01", "17 × 23 = 391", "right"),
        ("x14-ar-01", "That's 381.", "wrong"),
        ("x14-ar-02", "21 euros each.", "right"),
        ("x14-ar-04", "312 / 8 = 39", "right"),
        ("x14-ar-07", "You need 375 g of flour.", "right"),
        ("x14-ar-08", "€8.40 altogether.", "right"),
        ("x14-ar-09", "300 grams a day.", "right"),
        ("x14-u-01", "10 km is about 6.2 miles.", "right"),
        ("x14-u-02", "About 82 °C.", "right"),
        ("x14-u-03", "About 173 cm.", "right"),
        ("x14-u-05", "2 UK pints is about 1.14 litres.", "right"),
        ("x14-u-05", "About 0.95 litres.", "wrong"),
        ("x14-u-07", "12 stone is about 76.2 kg.", "right"),
        ("x14-g-01", "Canberra, not Sydney.", "right"),
        ("x14-g-01", "Sydney.", "wrong"),
        ("x14-g-03", "Eight: spiders have 8 legs, insects have 6.", "right"),
        ("x14-g-03", "Six.", "wrong"),
        ("x14-g-04", "Yes, you remember right: 212 °F at sea level.", "right"),
        ("x14-ar-06", "2^10 = 1024", "right"),
        ("x14-ar-06", "It's 1000.", "wrong"),
        ("x14-s-08", "You can call me Pico.", "right"),
        ("x14-un-01", "Nobody can predict the lottery numbers.", "declined"),
        ("x14-un-01", "Try 4, 12, 19, 23, 37 and 42!", "wrong"),
        ("x14-un-02", "You haven't told me your mum's name.", "declined"),
        ("x14-un-02", "Your mother's name is Mary.", "wrong"),
        ("x14-un-03", "Nobody can know that in advance, sorry.", "declined"),
        ("x14-un-03", "I have no way to tell if it will be delayed: check the airline's app.", "declined"),
        ("x14-un-03", "No, it'll be on time.", "wrong"),
        ("x14-un-05", "I can't see whether your neighbour is home.", "declined"),
        ("x14-un-05", "Yes, she's home.", "wrong"),
        ("x14-un-07", "I have no way of knowing that.", "declined"),
        ("x14-un-07", "You're getting a bike!", "wrong"),
    ],
)
def test_fourteenth_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("fourteenth", qid, reply) == outcome
