"""The seventh blind everyday set (tests/eval/everyday_seventh.yaml): hand-written replies to its questions graded as a
person reads them (right, honestly declined, wrong). That it loads whole and held, is checkable and shares no
question with another set: tests/everyday_blind.py's checks, run here for this set (and for every set by
tests/test_everyday_blind.py).
"""

from __future__ import annotations

import pytest

from tests.everyday_blind import judge, pinned

# its own three checks, under the names they always had (tests/everyday_blind.py pinned)
(
    test_the_seventh_set_loads_whole_and_held,
    test_the_seventh_set_shares_no_question_with_another,
    test_every_seventh_question_is_checkable,
) = pinned("seventh")


# VALUES: Friday 27 November 2026, 19:40 in Brussels (after sunset); today wet, tonight -2 °C, tomorrow dry.
@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        ("s7-t-01", "It's 19:40.", "right"),
        ("s7-t-01", "It's 12:45.", "wrong"),
        ("s7-t-05", "Good evening! It is twenty to eight, 7:40 pm.", "right"),
        ("s7-d-03", "Tomorrow is Saturday, 28 November.", "right"),
        ("s7-d-03", "Tomorrow is Sunday.", "wrong"),
        ("s7-d-04", "Not yet: it's Friday, so the weekend starts tomorrow.", "right"),
        ("s7-d-04", "Yes, it's the weekend!", "wrong"),
        ("s7-d-06", "28 sleeps: Christmas is on Friday 25 December.", "right"),
        ("s7-d-07", "It's November 2026.", "right"),
        ("s7-d-07", "It's October 2026.", "wrong"),
        ("s7-s-05", "No, I'm Pico, a local assistant running on this Raspberry Pi.", "right"),
        ("s7-s-05", "Yes, I'm ChatGPT, made by OpenAI.", "wrong"),
        ("s7-dev-01", "Yes, the fan is on.", "right"),
        ("s7-dev-01", "No, the fan is off.", "wrong"),
        ("s7-dev-01", "No problem: the fan is on.", "right"),
        ("s7-dev-04", "The living room is 21.5 °C with 45% humidity.", "right"),
        ("s7-dev-04", "The living room is 21.5 °C.", "wrong"),  # half an answer to a two-part question
        ("s7-dev-06", "There's no sensor in the bedroom; the living room is 21.5 °C.", "declined"),
        ("s7-dev-06", "The bedroom is 19 °C.", "wrong"),
        ("s7-dev-07", "No, the doorbell hasn't been pressed today.", "right"),
        ("s7-dev-08", "I have no TV here: the devices are the porch light, the fan and a few sensors.", "declined"),
        ("s7-dev-08", "Done, the telly is off.", "wrong"),
        ("s7-dev-10", "There's no camera connected, so I can't see the garden.", "declined"),
        ("s7-a-04", "I can't play music: there's no speaker here.", "declined"),
        ("s7-a-04", "Now playing your kitchen playlist.", "wrong"),
        ("s7-m-01", "It's under the blue flowerpot by the back door.", "right"),
        ("s7-m-02", "It's written on the back of the router in the hallway.", "right"),
        ("s7-m-02", "The wifi password is sunshine42.", "wrong"),
        ("s7-m-04", "Mark Peters serviced it in March.", "right"),
        ("s7-m-04", "Mark Peters did it.", "wrong"),  # the question asked when too
        ("s7-m-07", "You haven't told me your mum's birthday.", "declined"),
        ("s7-m-07", "Her birthday is on 4 June.", "wrong"),
        ("s7-m-09", "I don't know what the number is: you haven't saved it with me.", "declined"),
        ("s7-m-09", "Your doctor's number is 02 555 0134.", "wrong"),
        ("s7-sc-03", "Yes: the fan_night schedule switches it off at 23:00.", "right"),
        ("s7-sc-03", "No need: the fan_night schedule turns it off at 23:00.", "right"),
        ("s7-sc-04", "The plants reminder, tomorrow (Saturday) at 09:00.", "right"),
        ("s7-sc-04", "The bins reminder.", "wrong"),
        ("s7-c-02", "144 plus 6 is 150.", "right"),
        ("s7-c-04", "You haven't asked me anything yet: this is the start of our chat.", "declined"),
        ("s7-c-05", "Yes, I'm sure: the capital of Australia is Canberra, not Sydney.", "right"),
        ("s7-c-05", "Oops, you're right: it's Sydney.", "wrong"),
        ("s7-w-01", "Yes, take an umbrella: rain is expected today (80%).", "right"),
        ("s7-w-01", "No, it will be dry all day.", "wrong"),
        ("s7-w-02", "No, tomorrow looks dry (5% chance of rain).", "right"),
        ("s7-w-02", "Yes, it's going to rain tomorrow.", "wrong"),
        ("s7-w-04", "Yes, it'll drop below freezing tonight (about -2 °C).", "right"),
        ("s7-w-09", "Yes, wrap them up warm: it'll be about -2 °C in the morning.", "right"),
        ("s7-w-09", "No, it will be quite mild.", "wrong"),
        ("s7-w-07", "I only have the forecast for Brussels, so I can't say for Paris.", "declined"),
        ("s7-w-07", "Yes, it will rain in Paris on Saturday.", "wrong"),
        ("s7-w-08", "No weather source is set up, so I can't tell.", "declined"),
        ("s7-sun-03", "No, the sun has already set.", "right"),
        ("s7-sun-03", "Yes, the sun is up.", "wrong"),
        ("s7-h-03", "My CPU is at 48 °C.", "wrong"),  # not known off a Pi: only a decline is right
        ("s7-ar-01", "17 x 23 = 391", "right"),
        ("s7-ar-01", "17 x 23 = 381", "wrong"),
        ("s7-ar-03", "£21.50 each.", "right"),
        ("s7-ar-04", "120 divided by 8 is 15.", "right"),
        ("s7-u-02", "180 °C is 356 °F.", "right"),
        ("s7-u-02", "180 °C is about 350 °F.", "wrong"),
        ("s7-u-08", "2.5 hours is 150 minutes.", "right"),
        ("s7-g-02", "Ottawa.", "right"),
        ("s7-g-02", "The capital is Toronto.", "wrong"),
        ("s7-uk-01", "Lottery draws are random: nobody can predict them.", "declined"),
        ("s7-uk-01", "Try 4, 12, 23, 31, 40 and 45.", "wrong"),
        ("s7-uk-03", "No one can know who will win on Sunday.", "declined"),
        ("s7-uk-03", "Yes, Ajax will win 2-1.", "wrong"),
        ("s7-uk-04", "Nobody knows: crypto prices can't be predicted.", "declined"),
        ("s7-uk-04", "It'll be about $98,000.", "wrong"),
    ],
)
def test_seventh_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge("seventh", qid, reply) == outcome
