"""A question near a topic, where the model may not be trusted with it: the topic's overview or an honest
sentence, never the small model's guess; and the courtesy around a question does not hide it.

The desk (appliance/grounded/desk.py) takes a question by meaning that is only *near* a topic (NEAR..MEANING),
or that is a paraphrase the topic cannot answer exactly, when the cloud may not answer it (the packaged
model would invent: issue 32's blind set found 28 such replies). The topic's general answer says that it is
not sure it understood; a topic with no general answer (sums, conversions, memory) says so in one sentence;
a topic with nothing fit to say near it (the Pi's health: "how long is a marathon") leaves it to the model,
as does any near question when the cloud may answer.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from appliance.config import Config
from appliance.grounded.base import Ask, plain
from appliance.grounded.desk import GroundedDesk
from appliance.grounded.turn import Grounding, topics
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime

BRUSSELS = ZoneInfo("Europe/Brussels")


@pytest.mark.parametrize(
    ("said", "question"),
    [
        ("sorry to bother you, have you got the time?", "have you got the time?"),
        ("Hey Juniper, what can you do?", "what can you do?"),
        ("quick question: what's 12 times 12?", "what's 12 times 12?"),
        ("ok so, excuse me, which day is it", "which day is it"),
        ("what year is it, do you know?", "what year is it"),
        ("convert 5 miles to km please", "convert 5 miles to km"),
        ("what time is it", "what time is it"),
        ("thanks", "thanks"),
        ("please", ""),
    ],
)
def test_the_courtesy_around_a_question_is_not_the_question(said: str, question: str) -> None:
    assert plain(said) == question


@pytest.mark.parametrize(
    ("message", "kind", "what"),
    [  # each missed by the words rules before (the courtesy, or a phrasing they did not have)
        ("excuse me, have you got the time?", "time", "time"),
        ("hey Juniper, what are you able to help with?", "abilities", "all"),
        ("would you say it's morning or evening now?", "time", "part_of_day"),
        ("and the day after tomorrow is which day?", "time", "weekday"),
        ("which year are we in?", "time", "year"),
        ("are you able to set reminders?", "abilities", "able"),
        ("could you turn the heater on if I asked?", "abilities", "able"),
        ("can you turn up the thermostat?", "abilities", "able"),
        ("are you a real human?", "self", "who"),
        ("what's the name of your language model?", "self", "model"),
        ("what was it I asked you a few minutes ago?", "conversation", "mine"),
        ("what did you say it was?", "conversation", "yours"),
        ("when am I meant to take the bins out?", "schedules", "about"),
        ("does the porch light turn itself on in the evening?", "schedules", "about"),
        ("what's on my to-do list?", "schedules", "tasks"),
        ("will the housing market go down next year?", "unknowable", "future"),
        ("can I win the jackpot on Saturday?", "unknowable", "future"),
        ("what did I eat for lunch yesterday?", "memory", "fact"),
        ("where do we keep the ladder again?", "memory", "fact"),
        ("how much daylight will we get tomorrow?", "sun", "length"),
        ("we split a 90 euro bill between 3 of us, how much each?", "arithmetic", "split"),
        # chat spellings, emoji, a second clause, a trailing "according to you"
        ("wat year r we in", "time", "year"),
        ("time pls", "time", "time"),
        ("r u siri", "self", "who"),
        ("what are the lotto numbers this week? 🤞", "unknowable", "future"),
        ("who's gonna win the election?", "unknowable", "future"),
        ("running late. what's the date today?", "time", "date"),
        ("when is the bin reminder, in your opinion?", "schedules", "about"),
        ("who am I chatting with?", "self", "who"),
        ("how long has the pi been up since its last reboot?", "health", "uptime"),
        ("do my messages get sent to a server on the internet?", "abilities", "cloud"),
        ("can you order me a taxi", "abilities", "able"),
        ("if I tell you something, will you remember it?", "abilities", "able"),
        ("is the garage door open?", "house", "state"),
        ("what does the plants reminder actually say?", "schedules", "about"),
        ("add up 4.50, 3.25 and 10", "arithmetic", "sum"),
        ("12 times 1.5 = ?", "arithmetic", "sum"),
        ("do I need to bring a brolly tomorrow?", "weather", "umbrella"),
        ("is the sun up right now?", "sun", "up"),
    ],
)
def test_a_topic_now_takes_these_phrasings(message: str, kind: str, what: str) -> None:
    desk = GroundedDesk(topics())
    taken = [(ask.kind, ask.what) for ask in desk.by_words(message)]
    assert taken[:1] == [(kind, what)], taken


def test_numbers_with_a_half_and_an_overnight_frost_are_read() -> None:
    from appliance.grounded.units import UNITS
    from appliance.grounded.weather import WEATHER

    units = UNITS.match("how many minutes are there in two and a half hours?")
    assert units is not None and units.details["n"] == "2.5"
    frost = WEATHER.match("will it freeze overnight?")
    assert frost is not None and frost.details["when"] == "tonight"
    assert WEATHER.match("how cold does it get on Mars?") is None


@pytest.fixture
def pi(config: Config) -> Iterator[tuple[Runtime, ScriptedModel]]:
    model = ScriptedModel()
    runtime = Runtime.open(config, model=model)
    runtime.agent.grounding.zone = BRUSSELS
    yield runtime, model
    runtime.close()


def turn(runtime: Runtime, message: str) -> tuple[str, str]:
    record = asyncio.run(runtime.agent.turn(message, channel="api", chat_id="near"))
    return record.text, record.route


def test_a_question_about_the_clock_it_cannot_answer_exactly_gets_the_time_and_date_saying_so(
    pi: tuple[Runtime, ScriptedModel],
) -> None:
    runtime, model = pi
    text, route = turn(runtime, "what time is it there, do you know?")
    now = datetime.now(BRUSSELS)
    assert route == "intent" and model.history == []
    assert text.startswith("I'm not sure I understood the question, so here is what I know: It's ")
    assert f"{now.day} {now:%B %Y}" in text and "(Europe/Brussels)" in text
    assert re.search(r"It's \d\d:\d\d on ", text)


def test_a_question_near_what_it_controls_gets_its_devices(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, model = pi
    text, route = turn(runtime, "which gadgets in the house are you hooked up to?")
    assert route == "intent" and model.history == []
    assert "porch light (switch)" in text and "fan (switch)" in text
    assert not re.search(r"thermostat|camera|smart ?phone", text, re.IGNORECASE)


def test_a_hypothetical_or_a_missing_device_is_answered_and_a_real_command_is_done(
    pi: tuple[Runtime, ScriptedModel],
) -> None:
    runtime, model = pi
    yes, _ = turn(runtime, "could you switch the porch light on for me if I asked?")
    no, _ = turn(runtime, "can you turn up the thermostat?")
    assert yes.startswith("Yes: I can switch the porch light here.")
    assert no.startswith("No: I have no thermostat here.") and "porch light (switch)" in no
    assert model.history == []
    assert runtime.devices is not None
    assert asyncio.run(runtime.devices.read("porch_light"))[0].value is False  # nothing was switched
    done, route = turn(runtime, "can you turn the porch light on?")
    assert route == "intent" and asyncio.run(runtime.devices.read("porch_light"))[0].value is True, done


def test_what_is_near_no_topic_fit_to_answer_it_still_reaches_the_model(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, model = pi
    messages = ["how long is a marathon?", "tell me about the Raspberry Pi", "who won the world cup in 2018?"]
    for message in messages:
        model.enqueue("A model's answer.")
        text, route = turn(runtime, message)
        assert (text, route) == ("A model's answer.", "local"), message
    assert len(model.history) == len(messages)


def test_a_sum_it_cannot_read_is_declined_in_one_sentence_not_guessed(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, _ = pi
    grounding = runtime.agent.grounding
    facts = grounding.facts("api:near", None, person=True, cloud_allowed=False)
    near = Ask("arithmetic", text="how much is a lot of money split fairly?", by_meaning=True, near=True)
    answer = asyncio.run(grounding.desk.answer_ask(near, facts, near=True))
    assert answer is not None and answer.text.startswith("I could not read a sum in that, and I won't guess")
    mind = Ask("unknowable", text="who won the world cup in 2018?", by_meaning=True, near=True)
    assert asyncio.run(grounding.desk.answer_ask(mind, facts, near=True)) is None  # no sentence fits the past too


def test_where_the_cloud_may_answer_a_near_question_is_left_to_routing(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, _ = pi
    grounding: Grounding = runtime.agent.grounding
    question = "which gadgets in the house are you hooked up to?"

    async def reply(cloud: bool) -> str | None:
        facts = grounding.facts("api:near", None, person=True, cloud_allowed=cloud)
        record = await grounding.reply(question, facts, time.perf_counter(), meaning=True, near=True)
        return record.text if record is not None else None

    assert asyncio.run(reply(cloud=True)) is None
    local_only = asyncio.run(reply(cloud=False))
    assert local_only is not None and "porch light" in local_only


def test_a_thing_that_is_none_of_the_devices_is_said_so_and_a_device_is_left_to_the_device_path(
    pi: tuple[Runtime, ScriptedModel],
) -> None:
    runtime, model = pi
    garage, _ = turn(runtime, "could you open the garage door")
    bedroom, _ = turn(runtime, "is the bedroom light on")
    assert garage.startswith("No: I have no garage door here.")
    assert bedroom.startswith("I have no bedroom light here, so I can't tell.") and "porch light (switch)" in bedroom
    fan, route = turn(runtime, "is the fan on?")
    assert route == "intent" and fan in ("The fan is off.", "The fan is on."), fan  # read by the device path
    # a request to a thing none of the devices is: the model had said "turning on: the light in your kitchen"
    for request, thing in (
        ("turn on the kitchen light", "kitchen light"),
        ("dim the kitchen light to 40%", "kitchen light"),
        ("put the dishwasher on pls", "dishwasher"),
        ("switch the telly off please, nobody's watching", "telly"),
    ):
        said, route = turn(runtime, request)
        assert route == "intent" and said.startswith(f"I have no {thing} here, so I did nothing. I have 5 devices")
    done, route = turn(runtime, "turn on the fan")
    assert route == "intent" and "fan" in done and "I have no" not in done  # a device: the device path acts
    assert model.history == []


def test_the_forecast_for_a_city_typed_in_lower_case_is_not_answered_for_here() -> None:
    from appliance.grounded.weather import _elsewhere

    assert _elsewhere("whats the forecast for new york tomorrow", "Brussels") == "new york"
    assert _elsewhere("what's the forecast for the next few days", "Brussels") == ""
    assert _elsewhere("what's the weather for my run tomorrow", "Brussels") == ""
    assert _elsewhere("what time is it getting dark this evening? want to get a run in before", "Brussels") == ""
    assert _elsewhere("how much daylight is there today, in hours and minutes?", "Brussels") == ""


@pytest.mark.parametrize(
    "message",
    [
        "can you start a timer",
        "can you stop the music",
        "are you awake?",
        "turn left at the lights",
        "turn the page",
        "switch it off",
        "switch everything off",
        "open a new tab",
    ],
)
def test_what_is_no_device_verb_or_no_thing_is_not_read_as_one(message: str) -> None:
    """ "No: I have no a timer here." and "I have no you awake here" were what the first cut said."""
    desk = GroundedDesk(topics())
    assert [(a.kind, a.what) for a in desk.by_words(message)] == []
