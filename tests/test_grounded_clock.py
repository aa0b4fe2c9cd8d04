"""The clock topic: which phrasings it takes, and what a person reads back (from a fixed clock)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from appliance.config import Config
from appliance.grounded.base import Answer, Ask, Facts
from appliance.grounded.clock import CLOCK, ClockTopic, clock_synced, zone_name

BRUSSELS = ZoneInfo("Europe/Brussels")
FRIDAY = datetime(2026, 11, 27, 14, 5, tzinfo=BRUSSELS)  # a Friday afternoon, week 48


def facts(config: Config, now: datetime = FRIDAY) -> Facts:
    """Facts whose clock reads ``now``."""
    return Facts(config=config, now=lambda: now)


SYNCED = dataclasses.replace(CLOCK, synced=lambda: True)  # whatever the machine running the tests says


def answer(text: str, config: Config, now: datetime = FRIDAY, clock: ClockTopic = SYNCED) -> Answer | None:
    """The clock's answer to ``text`` as its words rule takes it (None: not taken)."""
    ask = clock.match(text)
    return None if ask is None else asyncio.run(clock.answer(ask, facts(config, now)))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("what time is it?", "It's 14:05 (Europe/Brussels)."),
        ("What's the time?", "It's 14:05 (Europe/Brussels)."),
        ("hey pico, what time is it now?", "It's 14:05 (Europe/Brussels)."),
        ("can you tell me the time please", "It's 14:05 (Europe/Brussels)."),
        ("do you know what time it is", "It's 14:05 (Europe/Brussels)."),
        ("do you have the time?", "It's 14:05 (Europe/Brussels)."),
        ("time?", "It's 14:05 (Europe/Brussels)."),
        ("what's the date today?", "Today is Friday 27 November 2026."),
        ("What’s today’s date", "Today is Friday 27 November 2026."),
        ("tell me the date", "Today is Friday 27 November 2026."),
        ("what's the date tomorrow", "Tomorrow is Saturday 28 November 2026."),
        ("what is tomorrow's date?", "Tomorrow is Saturday 28 November 2026."),
        ("what date is it tomorrow", "Tomorrow is Saturday 28 November 2026."),
        ("what was the date yesterday", "Yesterday was Thursday 26 November 2026."),
        ("what day is it", "Today is Friday 27 November 2026."),
        ("what day of the week is it?", "Today is Friday 27 November 2026."),
        ("I'd like to know which day of the week it is today", "Today is Friday 27 November 2026."),
        ("what day was yesterday", "Yesterday was Thursday 26 November 2026."),
        ("What day was it yesterday?", "Yesterday was Thursday 26 November 2026."),
        ("Is today a weekday or the weekend?", "A weekday: today is Friday."),
        ("what day is it tomorrow", "Tomorrow is Saturday 28 November 2026."),
        ("what day is the day after tomorrow", "The day after tomorrow is Sunday 29 November 2026."),
        ("how many days until Christmas?", "Christmas is in 28 days (Friday 25 December 2026)."),
        ("how many days until 24 December", "24 December 2026 is in 27 days (Thursday)."),
        ("how long till December 24th?", "24 December 2026 is in 27 days (Thursday)."),
        ("how long until new year's eve", "New Year's Eve is in 34 days (Thursday 31 December 2026)."),
        ("how many sleeps until christmas eve", "Christmas Eve is in 27 days (Thursday 24 December 2026)."),
        ("days until halloween", "Halloween is in 338 days (Sunday 31 October 2027)."),  # this year's has gone
        ("how many days till friday", "Friday is in 7 days (Friday 4 December 2026)."),
        ("how many days until 28 november", "28 November 2026 is tomorrow (Saturday)."),
        ("what day of the week is 1 January 2000", "1 January 2000 was a Saturday."),
        ("what day is christmas this year", "Christmas (25 December 2026) is a Friday."),
        ("what week number is it", "It's week 48 of 2026 (ISO weeks, which start on Monday)."),
        ("what's the current week of the year", "It's week 48 of 2026"),
        ("which day are we today", "Today is Friday 27 November 2026."),
        ("which week of the year is it?", "It's week 48 of 2026"),
        ("is it the weekend?", "No: today is Friday, a weekday; the weekend starts tomorrow."),
        ("is it weekend yet", "No: today is Friday, a weekday; the weekend starts tomorrow."),
        ("is tomorrow the weekend", "Yes: tomorrow is Saturday."),
        ("is tomorrow a weekday", "No: tomorrow is Saturday."),
        ("is it friday today", "Yes: today is Friday."),
        ("is it monday", "No: today is Friday."),
        ("what time zone are you in", "I'm on Europe/Brussels time (CET, UTC+01:00)."),
        ("what's your timezone?", "I'm on Europe/Brussels time (CET, UTC+01:00)."),
        ("what year is it", "It's 2026."),
        ("whats the time now", "It's 14:05 (Europe/Brussels)."),
        ("How late is it?", "It's 14:05 (Europe/Brussels)."),
        ("what's the time in your time zone", "It's 14:05 (Europe/Brussels)."),
        ("Is it morning or afternoon?", "It's afternoon: 14:05 (Europe/Brussels)."),
        ("is it evening yet", "No: it's afternoon, 14:05 (Europe/Brussels)."),
        ("Is it past midday yet?", "Yes: it's 14:05 (Europe/Brussels)."),
        ("is it before noon", "No: it's 14:05 (Europe/Brussels)."),
        ("How many days are there in this month?", "November 2026 has 30 days."),
        ("how many days in february", "February 2027 has 28 days (29 in a leap year; the next is 2028)."),
        ("Is this a leap year?", "No: 2026 is not a leap year; the next is 2028."),
        ("is 2028 a leap year", "Yes: 2028 is a leap year (February has 29 days)."),
        ("Which day of the month is it?", "Today is Friday 27 November 2026."),
        ("Which month are we in?", "It's November 2026."),
        ("what's next month", "Next month is December 2026."),
        ("What's the date next Monday?", "Next Monday is 30 November 2026."),
        ("what was the date last friday", "Last Friday was 20 November 2026."),
        ("what's the date on friday", "Friday is 27 November 2026."),  # the coming one: today
        ("is next saturday the weekend", "Yes: next Saturday is Saturday."),
        ("which month is it", "It's November 2026."),
    ],
)
def test_the_clock_answers_what_it_is_asked(text: str, said: str, config: Config) -> None:
    reply = answer(text, config)
    assert reply is not None, f"{text!r} was not taken"
    assert reply.text.startswith(said), reply.text
    assert (reply.kind, reply.basis) == ("time", "the Pi's clock (Europe/Brussels)")


@pytest.mark.parametrize(
    "text",
    [
        "what time does the bakery close",
        "remind me at 7 to call mum",
        "turn the fan on at 19:00",
        "what time is sunset",
        "what time is sunrise tomorrow",
        "it's time to go",
        "do you have time",
        "what happened today",
        "last time I asked you",
        "the time machine movie",
        "what time zone is Tokyo in",
        "what time is it in Tokyo",
        "what's the time in New York",
        "what date is my dentist appointment",
        "how many days until my birthday",
        "what day is the bin collection",
        "set a timer for 5 minutes",
        "time to wake up",
        "what is the date of the next full moon",
        "how long until the washing machine is done",
    ],
)
def test_the_words_rule_leaves_what_is_not_about_the_clock(text: str, config: Config) -> None:
    assert CLOCK.match(text) is None
    # brought by meaning, the answer turns it down too
    assert asyncio.run(CLOCK.answer(Ask("time", text=text, by_meaning=True), facts(config))) is None


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("could you possibly let me know the current time mate", "It's 14:05"),
        ("i need to know the date tomorrow please, cheers", "Tomorrow is Saturday 28 November 2026."),
        ("would you mind telling me what the date is today", "Today is Friday 27 November 2026."),
        ("what date will it be in 3 days", None),  # a day the phrase did not take in: not a guess at today
        ("what was the date a week ago, roughly", None),
    ],
)
def test_a_message_brought_by_meaning_is_answered_only_when_it_is_about_now(
    text: str, said: str | None, config: Config
) -> None:
    reply = asyncio.run(SYNCED.answer(Ask("time", text=text, by_meaning=True), facts(config)))
    if said is None:
        assert reply is None
    else:
        assert reply is not None and reply.text.startswith(said), reply


def test_an_unset_clock_is_said_so_rather_than_read_out(config: Config) -> None:
    booted = datetime(1970, 1, 1, 0, 0, 42, tzinfo=UTC)
    for text in ("what time is it", "what's the date", "how many days until christmas"):
        reply = answer(text, config, booted)
        assert reply is not None
        assert "not set (it reads 1 January 1970)" in reply.text and "00:00" not in reply.text
        assert reply.basis == "the Pi's clock (UTC), not set"


def test_a_clock_not_synchronised_since_boot_says_it_may_be_off(config: Config, tmp_path: Path) -> None:
    unsynced = dataclasses.replace(CLOCK, synced=lambda: False)
    reply = answer("what time is it", config, clock=unsynced)
    assert reply is not None
    assert reply.text == (
        "It's 14:05 (Europe/Brussels). "
        "But my clock has not reached a time server since the Pi started, so it may be off."
    )
    assert reply.basis == "the Pi's clock (Europe/Brussels), not synchronised since boot"
    # timesyncd's flag: its folder while it runs, "synchronized" in it once it has synchronised
    assert clock_synced(tmp_path / "absent") is None  # no timesyncd: nothing known, nothing said
    (tmp_path / "timesync").mkdir()
    assert clock_synced(tmp_path / "timesync") is False
    (tmp_path / "timesync" / "synchronized").touch()
    assert clock_synced(tmp_path / "timesync") is True


def test_the_zone_is_named_however_the_clock_holds_it(config: Config) -> None:
    assert zone_name(datetime(2026, 7, 1, 9, 0, tzinfo=ZoneInfo("America/New_York"))) == "America/New_York"
    assert zone_name(datetime(2026, 7, 1, 9, 0, tzinfo=UTC)) == "UTC"
    assert zone_name(datetime(2026, 7, 1, 9, 0, tzinfo=timezone(timedelta(hours=5, minutes=30)))) == "UTC+05:30"
    summer = answer("what time zone are you in", config, datetime(2026, 7, 1, 9, 0, tzinfo=BRUSSELS))
    assert summer is not None and summer.text == "I'm on Europe/Brussels time (CEST, UTC+02:00)."
    kolkata = answer("what time is it", config, datetime(2026, 7, 1, 9, 30, tzinfo=timezone(timedelta(hours=5.5))))
    assert kolkata is not None and kolkata.text == "It's 09:30 (UTC+05:30)."


def test_christmas_day_itself_and_a_leap_day(config: Config) -> None:
    christmas = datetime(2026, 12, 25, 8, 0, tzinfo=BRUSSELS)
    reply = answer("how many days until christmas", config, christmas)
    assert reply is not None and reply.text == "Christmas is today (Friday 25 December 2026)."
    leap = answer("how many days until 29 February", config)
    assert leap is not None and leap.text == "29 February 2028 is in 459 days (Tuesday)."
    assert answer("how many days until 31 February", config) is None  # no such day: not answered


def test_examples_are_questions_the_words_rule_takes() -> None:
    assert len(CLOCK.examples) >= 12
    assert all(CLOCK.match(example) is not None for example in CLOCK.examples)
