"""Phrasings of the fifth to twelfth blind everyday sets that no rule took (read after each set was measured, as
their headers say): each is taken by the topic that knows the answer, and the answer is exact."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from appliance.config import Config
from appliance.grounded.arithmetic import ARITHMETIC
from appliance.grounded.base import Facts
from appliance.grounded.desk import GroundedDesk
from appliance.grounded.turn import topics
from appliance.grounded.units import UNITS


@pytest.mark.parametrize(
    ("message", "kind", "what"),
    [
        ("remind me what month we're in, I keep forgetting", "time", "month"),
        ("is the sun still up or has it gone down already?", "sun", "which"),  # either way round: said plainly
        ("how much daylight is there today, in hours and minutes?", "sun", "length"),  # "in hours" is no place
        ("what sort of things can you help me with around the house?", "abilities", "all"),
        ("so can you actually turn my lights on and off or not", "abilities", "able"),
        ("guess what number i'm thinking of", "unknowable", "future"),
        ("does the bins one go off on sundays as well?", "schedules", "about"),
        ("time check pls, 24 hour clock", "time", "time"),
        ("still morning or is it afternoon already?", "time", "part_of_day"),
        ("play some music in the kitchen please", "abilities", "play"),
        ("put on some music", "abilities", "play"),
        ("it's freezing in here, turn the heating up a couple of degrees", "house", "command"),
        ("feels like we get no daylight at all, how long is the day today from sunrise to sunset?", "sun", "length"),
        ("wait are you just chatgpt in a box or what", "self", "who"),
        ("how many degrees is it out there right now?", "weather", "temperature"),  # not the living room's sensor
        ("wait what number did you say", "conversation", "yours"),
        ("put some music on spotify for me, something chill", "abilities", "play"),
        ("do my messages go off to some cloud server or do they stay on the pi?", "abilities", "cloud"),  # no job's
        ("does the fan turn off at night", "schedules", "about"),
        ("have we gone past midday yet or is it still the morning", "time", "past_mark"),
        ("at what time do you nag me about putting the bins out", "schedules", "about"),
        ("which day do the plants get watered?", "schedules", "about"),  # not the soil sensor's reading
        ("quick maths: 1234 + 5678", "arithmetic", "sum"),  # what follows a short label
        ("bet you can't guess what i had for brekkie this morning", "unknowable", "unseen"),
        ("Could you remind me of the name of our dentist?", "memory", "fact"),  # a memory, not "I can set reminders"
        ("could you remind me what my wifi password is", "memory", "fact"),
        ("wats the time rn", "time", "time"),  # chat spellings: "wats" is "what's", "rn" is "right now"
        ("do i need a coat tonight?", "weather", "cold"),
        ("what kind of temperatures are we looking at today?", "weather", "temperature"),  # thirteenth set: a lookup
        ("bro what time is it", "time", "time"),  # a vocative before the question
        ("hang on am i chatting to an actual human or a computer programme here", "self", "who"),
        ("sqrt of 169 pls", "arithmetic", "sum"),
        ("what time do you nag me about the rubbish?", "schedules", "about"),
        ("remind me when the car's MOT is due, I always forget", "memory", "fact"),
        ("ok thanks", "courtesy", "thanks"),  # the 135M recited a memory to it (README walk 5)
        ("great, thank you so much!", "courtesy", "thanks"),
        ("good night", "courtesy", "bye"),
        ("thanks, bye", "courtesy", "both"),  # the 135M parroted it back (README walk 6)
        ("thank you, see you later", "courtesy", "both"),
        ("cheers, good night", "courtesy", "both"),
        ("ok bye then", "courtesy", "bye"),
        ("perfect", "courtesy", "noted"),  # the 135M read a memory back to each of these (README walk 6)
        ("got it", "courtesy", "noted"),
        ("cool", "courtesy", "noted"),  # and took this one for the temperature
        ("no that's it", "courtesy", "done"),
        ("cheers, that's all", "courtesy", "done"),
        ("that's all I wanted to know, thanks", "courtesy", "done"),
        ("nothing else, bye", "courtesy", "done_bye"),
        ("alright then", "courtesy", "noted"),  # README walk 7: the 135M said "alright, alright."
        ("that's great, ta", "courtesy", "thanks"),
        ("thanks, what time is it?", "time", "time"),  # the question first: thanks are last
        ("what's the time and the date?", "time", "now"),  # the fourteenth set: the date alone
        ("what day and time is it?", "time", "now"),
        ("clock check - hours and minutes please", "time", "time"),  # the fifteenth set: "I'm sorry for your loss."
        ("filling in a form, need the full date including the year", "time", "date"),  # the liar test, fifteenth set
        ("which gadgets can you actually control or read in this house?", "abilities", "devices"),  # not a sensor
    ],
)
def test_the_topic_that_knows_takes_it_first(message: str, kind: str, what: str) -> None:
    taken = [(a.kind, a.what) for a in GroundedDesk(topics()).by_words(message)]
    assert taken[:1] == [(kind, what)], taken


@pytest.mark.parametrize(
    "message",
    [
        "cheers. and what month was the boiler last looked at?",  # the eighth set's; "You're welcome." (session 41)
        "cheers. what's the actual date tomorrow?",  # the tenth's: the thanks was a clause of its own
        "thanks! also, who serviced the boiler?",
        "cool, what time is it?",
        "ok turn on the fan",
        "that's not it",
    ],
)
def test_thanks_before_a_question_is_never_answered_as_thanks(message: str) -> None:
    """The courtesy takes only a message that is all thanks: with a question after it, the question is answered
    (or declined), never "You're welcome." (a liar-model sweep over the blind sets found two)."""
    taken = [a.kind for a in GroundedDesk(topics()).by_words(message)]
    assert "courtesy" not in taken, taken


@pytest.mark.parametrize(
    ("message", "answer"),
    [
        ("if i take 387 away from 1000 what is left", "1000 − 387 is 613."),
        ("seven eighths as a decimal please", "7 / 8 is 0.875."),
        ("a quarter as a decimal", "1 / 4 is 0.25."),
        ("60 mph is what in km/h", "60 miles per hour is 96.56064 kilometres per hour."),
        ("im 180cm, whats that in feet and inches", "180 centimetres is 5 feet 10.9 inches (about 5.906 feet)."),
        ("1.5 litres is how many pints? uk pints", "1.5 litres is about 2.64 imperial pints."),
        ("twelve times eleven is what", "Twelve times eleven is 132."),
        ("12 times 11 is what", "12 times 11 is 132."),
        ("my height is 1.80 m, how much is that in feet", "1.8 metres is about 5 feet 11 inches (about 5.906 feet)."),
        ("convert 5 feet 8 inches to cm", "5 feet 8 inches is 172.72 centimetres."),  # fourteenth set: the model's
        ("5'10\" in cm", "5 feet 10 inches is 177.8 centimetres."),
        ("3 lb 2 oz in grams", "3 pounds 2 ounces is about 1417 grams."),
        ("how many kg is 11 stone 4", "11 stone 4 pounds is 71.66759446 kilograms."),
    ],
)
def test_sums_and_conversions_said_in_other_words_are_exact(message: str, answer: str) -> None:
    topic = next(t for t in (ARITHMETIC, UNITS) if t.match(message) is not None)
    ask = topic.match(message)
    assert ask is not None
    got = asyncio.run(topic.answer(ask, Facts(config=Config(), now=lambda: None)))  # type: ignore[arg-type,return-value]
    assert got is not None and got.text == answer


def test_a_sum_on_the_last_answer_goes_on_from_its_number(config: Config) -> None:
    """ "and add 6 to that" after "12 times 12 is 144.": the model had said 78; with no number before, it asks."""
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    model = ScriptedModel()
    runtime = Runtime.open(config, model=model)

    async def main() -> list[str]:
        said = []
        asked = [("a", "what's 12 times 12"), ("a", "and add 6 to that"), ("b", "and add 6 to that")]
        asked.append(("a", "and half of that, please?"))  # sixteenth blind set: the model repeated "12 times 4"
        for chat, text in asked:
            said.append((await runtime.agent.turn(text, channel="api", chat_id=chat)).text)
        return said

    try:
        times, added, nothing, half = asyncio.run(main())
    finally:
        runtime.close()
    assert (times, added, half) == ("12 times 12 is 144.", "144 + 6 is 150.", "150 ÷ 2 is 75.")
    assert nothing.startswith("I don't know which number you mean: my last answer gave none.")
    assert model.history == []


@pytest.mark.parametrize(
    ("message", "parts"),
    [
        ("what time is it and what day is it?", ("It's 10:00", "Today is Friday 27 November 2026.")),  # fourteenth
        ("what day is it and what time is it?", ("Today is Friday 27 November 2026.", "It's 10:00")),
        ("what time is it? is it the weekend?", ("It's 10:00", "No: today is Friday")),
    ],
)
def test_two_questions_in_one_message_get_both_answers(message: str, parts: tuple[str, ...]) -> None:
    """The first question alone answered the whole message as if it were all that was asked."""
    from zoneinfo import ZoneInfo

    now = datetime(2026, 11, 27, 10, 0, tzinfo=ZoneInfo("Europe/Brussels"))
    got = asyncio.run(GroundedDesk(topics()).answer(message, Facts(config=Config(), now=lambda: now), meaning=False))
    assert got is not None
    at = [got.text.index(part) for part in parts]
    assert at == sorted(at), got.text


def test_one_question_and_another_the_appliance_cannot_answer_is_not_answered_by_halves() -> None:
    """ "what time is it and who won the match?": the second is not the appliance's to answer by words, so the
    message is not taken as two (the words pass answers the first and the model's guard the rest)."""
    now = datetime(2026, 11, 27, 10, 0)
    desk = GroundedDesk(topics())
    assert (
        asyncio.run(desk._each_question("what time is it and who won the match?", Facts(Config(), lambda: now))) is None
    )


@pytest.mark.parametrize(
    ("session", "where"), [("terminal:default", "`picoagent cron list`"), ("telegram:1", "/schedule")]
)
def test_a_day_lists_each_job_once_and_points_where_the_rest_is(session: str, where: str) -> None:
    """A README walk: "what's on tomorrow?" named a 2-hourly task seven times, then "(and 5 more: /schedule)" in the
    terminal, which has no /schedule."""
    from zoneinfo import ZoneInfo

    from appliance.grounded.agenda import AGENDA, LISTED

    zone = ZoneInfo("Europe/Brussels")
    now = datetime(2026, 11, 27, 10, 0, tzinfo=zone)
    jobs = [
        {
            "id": "check",
            "schedule": "0 */2 * * *",
            "does": "task: check the soil",
            "next_run": "2026-11-27T12:00:00+01:00",
        }
    ]
    jobs += [
        {
            "id": f"r{i}",
            "schedule": f"daily {8 + i:02d}:30",
            "does": f"message: thing {i}",
            "next_run": "2026-11-28T08:30:00+01:00",
        }
        for i in range(LISTED + 1)
    ]

    class Cron:
        def list_jobs(self) -> list[dict[str, object]]:
            return jobs

    facts = Facts(config=Config(), now=lambda: now, session=session, cron=Cron())  # type: ignore[arg-type]
    ask = AGENDA.match("what's on tomorrow?")
    assert ask is not None
    got = asyncio.run(AGENDA.answer(ask, facts))
    assert got is not None
    assert got.text.count("check the soil") == 1 and "(12 times tomorrow)" in got.text, got.text
    assert got.text.endswith(f"(and 2 more: {where})"), got.text
