"""The clock, arithmetic, units and the Pi's health through the real agent turn: answered, and no model asked.

Issue 32's table has four of these ("what time is it?", "what day of the week is it?", "what is 17 times
23?", "how much memory do you have free?"); the model answered each wrongly. Here each goes through
``Agent.turn`` of a real Runtime (its database, devices and grounded desk) with a scripted model that
must not be called, and the reply is read as a person reads it.
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime
from zoneinfo import ZoneInfo

from appliance.agent.record import ReplyRecord
from appliance.config import Config
from appliance.health import read_health
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime

BRUSSELS = ZoneInfo("Europe/Brussels")


def turns(config: Config, *messages: str) -> tuple[list[ReplyRecord], ScriptedModel]:
    """Each message through the real turn in one chat, the appliance on Brussels time."""
    model = ScriptedModel()
    runtime = Runtime.open(config, model=model)
    runtime.agent.grounding.zone = BRUSSELS

    async def main() -> list[ReplyRecord]:
        return [await runtime.agent.turn(m, channel="api", chat_id="topics") for m in messages]

    try:
        return asyncio.run(main()), model
    finally:
        runtime.close()


def test_the_issue_table_questions_are_answered_from_the_pi_without_a_model(config: Config) -> None:
    asked = (
        "what time is it?",
        "what day of the week is it?",
        "what is 17 times 23?",
        "how much memory do you have free?",
    )
    before = datetime.now(BRUSSELS)
    (clock, weekday, sum_, memory), model = turns(config, *asked)
    after = datetime.now(BRUSSELS)
    assert model.history == []  # no model asked
    for record in (clock, weekday, sum_, memory):
        assert (record.route, record.why) == ("intent", "grounded"), record
        assert record.reason.startswith("grounded: ") and record.reason.endswith(", no model")

    shown = re.fullmatch(r"It's (\d\d):(\d\d) \(Europe/Brussels\)\.(?: But my clock .*)?", clock.text)
    assert shown is not None, clock.text
    minutes = int(shown[1]) * 60 + int(shown[2])
    assert any(abs(minutes - (t.hour * 60 + t.minute)) <= 1 for t in (before, after))
    assert clock.reason.startswith("grounded: the Pi's clock (Europe/Brussels)")

    days = {f"Today is {t:%A} {t.day} {t:%B %Y}." for t in (before, after)}  # asked across midnight: either
    assert weekday.text.split(" But ")[0] in days, weekday.text

    assert sum_.text == "17 times 23 is 391." and "409" not in sum_.text
    assert sum_.reason == "grounded: calculated on the Pi, no model"

    free = re.match(r"(\d+(?:\.\d)?) (GB|MB) of my (\d+(?:\.\d)?) (GB|MB) memory is free", memory.text)
    assert free is not None, memory.text
    total_mb = float(free[3]) * (1024 if free[4] == "GB" else 1)
    assert abs(total_mb - read_health().memory_total_mb) <= 0.05 * total_mb  # this machine's, not "128GB"


def test_conversions_and_what_is_not_grounded_through_the_turn(config: Config) -> None:
    (miles, bakery), model = turns(config, "5 km in miles", "what time does the bakery close?")
    assert miles.text == "5 kilometres is about 3.107 miles."
    assert miles.reason == "grounded: conversion factor 1 mi = 1.609344 km, no model"
    assert bakery.why != "grounded" and len(model.history) == 1  # the bakery's hours go to the model
