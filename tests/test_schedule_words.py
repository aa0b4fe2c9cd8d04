"""The scheduling fast path: a table of phrasings with zero wrong schedules, and properties over many more."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.schedule.parse import parse_schedule
from appliance.understanding.schedule_words import CancelAsk, ScheduleAsk, Unclear, understand_schedule
from tests.test_intent import HOME

BRUSSELS = ZoneInfo("Europe/Brussels")
NOW = datetime(2026, 11, 24, 10, 0, 40, tzinfo=BRUSSELS)  # a Tuesday, 40 seconds past 10:00
Expected = ScheduleAsk | CancelAsk | Unclear | None


def msg(schedule: str, message: str) -> ScheduleAsk:
    return ScheduleAsk(schedule, "message", message=message)


def dev(schedule: str, device: str, value: str) -> ScheduleAsk:
    return ScheduleAsk(schedule, "device", device=device, value=value)


def prm(schedule: str, prompt: str) -> ScheduleAsk:
    return ScheduleAsk(schedule, "prompt", prompt=prompt)


BINS = "take the bins out"
ABSOLUTE = [
    ("remind me at 7 to take the bins out", msg("once 2026-11-24 19:00", BINS)),  # 07:00 has passed: 19:00
    ("remind me to take the bins out at 7", msg("once 2026-11-24 19:00", BINS)),
    ("at 7 remind me to take the bins out", msg("once 2026-11-24 19:00", BINS)),
    ("Remind me at 11 to call mum.", msg("once 2026-11-24 11:00", "call mum")),  # 11:00 is still ahead
    ("remind me at 10 to call mum", msg("once 2026-11-24 22:00", "call mum")),  # 10:00 passed 40 s ago
    ("at 19:30 remind me to call mum", msg("once 2026-11-24 19:30", "call mum")),
    ("remind me at 9:00 to stretch", msg("once 2026-11-24 21:00", "stretch")),  # a bare 9 with minutes
    ("remind me at 09:00 to stretch", msg("once 2026-11-25 09:00", "stretch")),  # 24-hour: past today
    ("remind me at 7pm to call mum", msg("once 2026-11-24 19:00", "call mum")),
    ("remind me at 7:15 am to call mum", msg("once 2026-11-25 07:15", "call mum")),
    ("remind me at 7 p.m. to eat", msg("once 2026-11-24 19:00", "eat")),
    ("remind me at 12 am to sleep", msg("once 2026-11-25 00:00", "sleep")),
    ("remind me at noon to eat", msg("once 2026-11-24 12:00", "eat")),
    ("remind me at midnight to sleep", msg("once 2026-11-25 00:00", "sleep")),
    ("remind me tomorrow at 7 to take the bins out", msg("once 2026-11-25 07:00", BINS)),
    ("remind me at 7 tomorrow to take the bins out", msg("once 2026-11-25 07:00", BINS)),
    ("remind me tomorrow evening at 7 to call mum", msg("once 2026-11-25 19:00", "call mum")),
    ("remind me tonight at 9 to lock the door", msg("once 2026-11-24 21:00", "lock the door")),
    ("remind me tonight at midnight to sleep", msg("once 2026-11-25 00:00", "sleep")),
    ("remind me at 7 in the morning to run", msg("once 2026-11-25 07:00", "run")),
    ("remind me at 7 in the evening to run", msg("once 2026-11-24 19:00", "run")),
    ("remind me on Friday at 18:00 to buy wine", msg("once 2026-11-27 18:00", "buy wine")),
    ("on friday at 9 remind me to pay", msg("once 2026-11-27 09:00", "pay")),
    ("remind me on fri at 9 to pay", msg("once 2026-11-27 09:00", "pay")),
    ("remind me at 9 on Monday to pay", msg("once 2026-11-30 09:00", "pay")),
    ("remind me on 3 December at 9 to pay rent", msg("once 2026-12-03 09:00", "pay rent")),
    ("remind me December 3rd at 9 to pay rent", msg("once 2026-12-03 09:00", "pay rent")),
    ("remind me on 1 November at 9 to pay rent", msg("once 2027-11-01 09:00", "pay rent")),  # passed: next year
    ("remind me on the 3rd at 9 to pay rent", msg("once 2026-12-03 09:00", "pay rent")),  # the next 3rd
    ("remind me on the 30th at 9 to pay rent", msg("once 2026-11-30 09:00", "pay rent")),
    ("remind me on the first at 9 to pay rent", msg("once 2026-12-01 09:00", "pay rent")),
    ("remind me on 29 February at 9 to check", msg("once 2028-02-29 09:00", "check")),
    ("remind me on 2026-12-03 at 09:30 to pay", msg("once 2026-12-03 09:30", "pay")),
    ("remind me at half past 7 to eat", msg("once 2026-11-24 19:30", "eat")),
    ("remind me at quarter to 8 to eat", msg("once 2026-11-24 19:45", "eat")),
    ("remind me at seven thirty to eat", msg("once 2026-11-24 19:30", "eat")),
    ("remind me at 7.30 to eat", msg("once 2026-11-24 19:30", "eat")),
    ("remind me to call Bob on Friday at 7", msg("once 2026-11-27 07:00", "call Bob")),
    ("remind me at 0 to eat", msg("once 2026-11-25 00:00", "eat")),
    ("remind me at 7 o'clock to eat", msg("once 2026-11-24 19:00", "eat")),
    ("remind me in twenty five minutes to eat", msg("once 2026-11-24 10:26", "eat")),
    ("set a reminder for 7 to take the bins out", msg("once 2026-11-24 19:00", BINS)),
    ("can you remind me at 7 to take the bins out?", msg("once 2026-11-24 19:00", BINS)),
    ("hey, remind me at 7 that the plumber comes, thanks", msg("once 2026-11-24 19:00", "that the plumber comes")),
    ("remind me at 7 to turn on the fan", msg("once 2026-11-24 19:00", "turn on the fan")),  # a reminder, not an act
    ("turn the fan on at 7pm", dev("once 2026-11-24 19:00", "fan", "on")),
    ("please switch the porch light off tonight at 11", dev("once 2026-11-24 23:00", "porch_light", "off")),
    ("set the kitchen light to 40% at 7pm", dev("once 2026-11-24 19:00", "kitchen_light", "40%")),
    (
        "tomorrow at 6:45 tell me the living room temperature",
        prm("once 2026-11-25 06:45", "tell me the living room temperature"),
    ),
]
RELATIVE = [
    ("remind me in 10 minutes to check the oven", msg("once 2026-11-24 10:11", "check the oven")),  # rounded up
    ("in 10 minutes remind me to check the oven", msg("once 2026-11-24 10:11", "check the oven")),
    ("remind me in 10 min to eat", msg("once 2026-11-24 10:11", "eat")),
    ("remind me in an hour to stretch", msg("once 2026-11-24 11:01", "stretch")),
    ("remind me in 2 hours to stretch", msg("once 2026-11-24 12:01", "stretch")),
    ("remind me in two hours to stretch", msg("once 2026-11-24 12:01", "stretch")),
    ("remind me in half an hour to stretch", msg("once 2026-11-24 10:31", "stretch")),
    ("remind me in an hour and a half to stretch", msg("once 2026-11-24 11:31", "stretch")),
    ("remind me in 90 seconds to stretch", msg("once 2026-11-24 10:03", "stretch")),
    ("in 10 minutes switch the porch light off", dev("once 2026-11-24 10:11", "porch_light", "off")),
    ("turn off the fan in 20 minutes", dev("once 2026-11-24 10:21", "fan", "off")),
]
RECURRING = [
    ("every day at 7:30 turn the fan on", dev("daily 07:30", "fan", "on")),
    ("every morning at 7:30 turn the fan on", dev("daily 07:30", "fan", "on")),
    ("daily at 7:30 turn the fan on", dev("daily 07:30", "fan", "on")),
    ("every weekday at 7:30 turn the fan on", dev("30 7 * * 1-5", "fan", "on")),
    ("turn the fan on every weekday at 7:30", dev("30 7 * * 1-5", "fan", "on")),
    ("on weekdays at 7:30 turn the fan on", dev("30 7 * * 1-5", "fan", "on")),
    ("every weekend at 9 give me a morning briefing", prm("0 9 * * 0,6", "give me a morning briefing")),
    ("every Monday at 8 remind me to put the bins out", msg("0 8 * * 1", "put the bins out")),
    ("every Monday and Thursday at 8 remind me to water the plants", msg("0 8 * * 1,4", "water the plants")),
    ("remind me every sunday at 6pm to call mum", msg("0 18 * * 0", "call mum")),
    ("every evening at 7 turn on the porch light", dev("daily 19:00", "porch_light", "on")),
    ("every night at midnight turn off the porch light", dev("daily 00:00", "porch_light", "off")),
    ("every friday night at midnight turn off the porch light", dev("0 0 * * 6", "porch_light", "off")),
    ("dim the kitchen light to 20% every evening at 8", dev("daily 20:00", "kitchen_light", "20%")),
    ("every day at 7 and 19 remind me to take my pills", msg("0 7,19 * * *", "take my pills")),
    (
        "check the soil every two hours and tell me when it is dry",
        prm("every 2h", "check the soil and tell me when it is dry"),
    ),
    ("every 2 hours check the soil", prm("every 2h", "check the soil")),
    ("every 15 minutes tell me the living room temperature", prm("every 15m", "tell me the living room temperature")),
    ("every hour check the soil", prm("every 1h", "check the soil")),
    ("every half hour check the soil", prm("every 30m", "check the soil")),
    ("every 90 minutes check the soil", prm("every 90m", "check the soil")),
    ("brief me every morning at 7:30", prm("daily 07:30", "brief me")),
    ("every day at noon and midnight check the soil", prm("0 0,12 * * *", "check the soil")),
    ("every sunday morning at 10 give me a briefing", prm("0 10 * * 0", "give me a briefing")),
    ("turn on fan at 7:30 every weekday", dev("30 7 * * 1-5", "fan", "on")),
]
CANCELS = [
    ("cancel the 7:30 fan", CancelAsk("7:30 fan")),
    ("cancel my bins reminder", CancelAsk("bins")),
    ("stop the soil check", CancelAsk("soil check")),
    ("delete the reminder about the bins", CancelAsk("bins")),
    ("stop reminding me about the bins", CancelAsk("bins")),
    ("please cancel the morning fan", CancelAsk("morning fan")),
    ("stop the fan", None),  # a device command: the intent fast path's
    ("cancel it", None),  # what is "it"? the conversation knows
    ("cancel all reminders", None),  # many at once: the model asks
    ("cancel my dentist appointment", None),  # not a job
]
ASK_BACK = [
    ("remind me later", Unclear("When should I remind you?")),
    ("remind me sometime to call mum", Unclear("When should I remind you?")),
    ("remind me to call mum", Unclear("When should I remind you?")),
    ("remind me tomorrow to call mum", Unclear("At what time tomorrow?")),
    ("remind me at 7", Unclear("What should I remind you of?")),
    ("every morning turn on the fan", Unclear("At what time every morning?")),
    ("remind me at 25:00 to eat", Unclear("25:00 is not a time of day: at what time?")),
    ("remind me at 7:60 to eat", Unclear("7:60 is not a time of day: at what time?")),
    ("remind me on 2026-02-30 at 9 to eat", Unclear("There is no date 2026-02-30: which day?")),
    ("remind me in the morning to call mum", Unclear("At what time in the morning?")),
    ("remind me to water the plants on Friday", Unclear("At what time on Friday?")),
    ("remind me on 31 February to eat", Unclear("February has no day 31: which day?")),
    ("every 0 minutes check the soil", Unclear("An interval must be longer than 0: how often should it run?")),
    ("every 30 seconds check the soil", Unclear("That is more often than once a minute: how often should it run?")),
    ("remind me today at 07:00 to eat", Unclear("Today at 07:00 has passed: when should it be?")),
    ("remind me on Tuesday at 9 to eat", Unclear("Today or next Tuesday?")),  # said on a Tuesday
    ("remind me tomorrow at midnight to eat", Unclear("Midnight at the start or at the end of tomorrow?")),
    ("remind me at 7 pm in the morning to eat", Unclear("7 pm is not in the morning: at what time?")),
    ("turn on the light at 7", Unclear("which light: porch or kitchen?")),
    ("remind me next friday at 9 to eat", Unclear("Which day do you mean by next friday? Please give the date.")),
]
FOR_THE_MODEL = [
    ("in 10 minutes", None),  # a time alone: most likely an answer to a question
    ("every morning", None),
    ("don't remind me at 7", None),
    ("never turn on the fan at 7", None),
    ("what is scheduled at 7?", None),
    ("turn the fan on at 7?", None),  # "should I?"
    ("I turned on the fan at 7", None),
    ("turn on the fan at 7 if it is hot", None),  # a condition
    ("at 7 turn on the fan and the light", None),  # two devices
    ("at 7 check the soil and turn on the fan", None),  # a prompt and a device command
    ("every day at 7 turn on the radio", None),  # no such device
    ("turn on the fan at 25 degrees", None),
    ("remind me to call bob at 7 and at 9", None),  # two jobs
    ("remind me every weekday at 7:30 and 18:00 to eat", None),  # two cron jobs
    ("every 2 days check the soil", None),
    ("every other day check the soil", None),
    ("remind me what the wifi password is", None),
    ("tell me the weather tomorrow", None),  # a day as the subject, not a time
    ("tell me what happened at 7", None),  # the past
    ("living room temperature at 7", None),  # now, or the one at 7?
    ("remind me at 7 to call bob at 9", None),  # two times
    ("turn on the fan", None),  # no time: the device fast path's
    ("what's the humidity in the living room", None),
    ("write me a poem about the sea", None),
    ("tell me a story about a girl who wakes up every morning at 7", None),  # the girl's time, not a job's
    ("give me the weather for tomorrow at 9", None),  # the weather's time
    ("remind me to prepare for tomorrow at 9", None),  # at 9, or for the 9 o'clock thing?
    ("remind me at 7 to call Bob on Friday", None),  # two times
    ("tell me at 7", None),  # tell what?
    ("check every plant at 7", None),  # "every" is not a time here
    ("set an alarm for 7", None),
]
TABLE: list[tuple[str, Expected]] = ABSOLUTE + RELATIVE + RECURRING + CANCELS + ASK_BACK + FOR_THE_MODEL


@pytest.mark.parametrize(("text", "expected"), TABLE, ids=[t for t, _ in TABLE])
def test_phrasing(text: str, expected: Expected) -> None:
    assert understand_schedule(text, NOW, HOME) == expected


def test_the_table_is_big_enough() -> None:
    asks = sum(isinstance(e, ScheduleAsk) for _, e in TABLE)
    refused = sum(e is None or isinstance(e, Unclear) for _, e in TABLE)
    assert len(TABLE) >= 60 and asks >= 40 and refused >= 30, (len(TABLE), asks, refused)


def test_zero_wrong_schedules_over_the_table() -> None:
    """No job where none was meant, and none with another time or another action than the table's."""
    wrong = [
        f"{text!r} -> {got}"
        for text, expected in TABLE
        if isinstance(got := understand_schedule(text, NOW, HOME), ScheduleAsk | CancelAsk) and got != expected
    ]
    assert not wrong, f"{len(wrong)} wrong schedule(s) in {len(TABLE)} phrasings:\n" + "\n".join(wrong)


# --- the calendar: DST, the end of a year, times that have passed ---------------------------------

CALENDAR = [
    # spring forward in Brussels on Sunday 2027-03-28: 02:30 does not exist; the scheduler runs it at 03:00
    (datetime(2027, 3, 27, 10, 0, tzinfo=BRUSSELS), "remind me tomorrow at 2:30 to check", "once 2027-03-28 02:30"),
    (datetime(2027, 3, 28, 1, 30, tzinfo=BRUSSELS), "remind me in an hour to check", "once 2027-03-28 03:30"),
    (datetime(2027, 3, 28, 1, 59, 30, tzinfo=BRUSSELS), "remind me in 1 minute to check", "once 2027-03-28 03:01"),
    # fall back on Sunday 2026-10-25: 02:00-03:00 happens twice
    (datetime(2026, 10, 25, 1, 30, tzinfo=BRUSSELS), "remind me in an hour to check", "once 2026-10-25 02:30"),
    (datetime(2026, 10, 24, 20, 0, tzinfo=BRUSSELS), "every day at 2:30 check the soil", "daily 02:30"),
    # the end of a month and of a year
    (datetime(2026, 12, 31, 10, 0, tzinfo=BRUSSELS), "remind me tomorrow at 7 to call mum", "once 2027-01-01 07:00"),
    (datetime(2026, 12, 31, 23, 55, tzinfo=BRUSSELS), "remind me in 10 minutes to toast", "once 2027-01-01 00:05"),
    (datetime(2026, 12, 31, 23, 0, tzinfo=BRUSSELS), "remind me at midnight to toast", "once 2027-01-01 00:00"),
    (datetime(2026, 12, 31, 10, 0, tzinfo=BRUSSELS), "remind me on the 3rd at 9 to pay", "once 2027-01-03 09:00"),
    (datetime(2026, 11, 30, 10, 0, tzinfo=BRUSSELS), "remind me on the 31st at 9 to pay", "once 2026-12-31 09:00"),
    (datetime(2027, 2, 28, 22, 0, tzinfo=BRUSSELS), "remind me tomorrow at 8 to pay", "once 2027-03-01 08:00"),
    # times that have passed today
    (datetime(2026, 11, 24, 22, 0, tzinfo=BRUSSELS), "remind me at 9 to run", "once 2026-11-25 09:00"),
    (datetime(2026, 11, 24, 22, 0, tzinfo=BRUSSELS), "remind me at 21:30 to run", "once 2026-11-25 21:30"),
    (datetime(2026, 11, 24, 19, 0, tzinfo=BRUSSELS), "remind me at 7 to run", "once 2026-11-25 07:00"),
    (datetime(2026, 11, 24, 18, 59, 59, tzinfo=BRUSSELS), "remind me at 7 to run", "once 2026-11-24 19:00"),
    (
        datetime(2026, 11, 27, 19, 0, tzinfo=BRUSSELS),
        "remind me on 27 November at 18:00 to run",
        "once 2027-11-27 18:00",
    ),
]


@pytest.mark.parametrize(("now", "text", "schedule"), CALENDAR, ids=[f"{n:%Y-%m-%d %H:%M} {t}" for n, t, _ in CALENDAR])
def test_calendar(now: datetime, text: str, schedule: str) -> None:
    got = understand_schedule(text, now, HOME)
    assert isinstance(got, ScheduleAsk) and got.schedule == schedule, got


def test_the_second_pass_of_a_repeated_hour_is_asked_about() -> None:
    # 02:10 (first pass, +02:00) plus an hour is 02:10 again (second pass, +01:00): "once" names the first
    now = datetime(2026, 10, 25, 2, 10, tzinfo=BRUSSELS)
    assert understand_schedule("remind me in an hour to check", now, HOME) == Unclear(
        "02:10 happens twice that night (the clocks go back): which one?"
    )


def test_the_time_zone_is_nows() -> None:
    tokyo = NOW.astimezone(ZoneInfo("Asia/Tokyo"))  # the same instant: 18:00:40 in Tokyo
    assert understand_schedule("remind me at 7 to eat", tokyo, HOME) == msg("once 2026-11-24 19:00", "eat")
    assert understand_schedule("remind me in 10 minutes to eat", tokyo, HOME) == msg("once 2026-11-24 18:11", "eat")


def test_a_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        understand_schedule("remind me at 7 to eat", NOW.replace(tzinfo=None), HOME)


def test_without_devices_a_device_command_goes_to_the_model() -> None:
    assert understand_schedule("turn the fan on at 7pm", NOW) is None
    assert understand_schedule("remind me at 7pm to turn the fan on", NOW) == msg(
        "once 2026-11-24 19:00", "turn the fan on"
    )


@pytest.mark.parametrize(
    ("ask", "words"),
    [
        (msg("daily 07:00", BINS), "remind you to take the bins out"),
        (msg("daily 07:00", "about the plumber"), "remind you about the plumber"),
        (dev("daily 07:00", "porch_light", "off"), "turn the porch light off"),
        (dev("daily 07:00", "kitchen_light", "40%"), "set the kitchen light to 40%"),
        (prm("every 2h", "check the soil"), 'run "check the soil"'),
    ],
)
def test_describe(ask: ScheduleAsk, words: str) -> None:
    assert ask.describe() == words


# --- properties -----------------------------------------------------------------------------------

ONCE = re.compile(r"once (\d{4}-\d{2}-\d{2} \d{2}:\d{2})")


def assert_valid(ask: ScheduleAsk, now: datetime) -> None:
    """The schedule is one the scheduler takes, and a one-time job runs after ``now``."""
    schedule = parse_schedule(ask.schedule)
    if ONCE.fullmatch(ask.schedule):  # a one-time job: it runs once, after now
        first = schedule.next_after(now)
        assert first is not None and first > now, (ask, now)
        assert schedule.next_after(first) is None, ask
    assert sum(map(bool, (ask.message, ask.device, ask.prompt))) == 1, ask
    assert (ask.kind == "device") == bool(ask.value), ask


def test_every_schedule_in_the_tables_is_valid() -> None:
    asks = [(got, NOW) for text, _ in TABLE if isinstance(got := understand_schedule(text, NOW, HOME), ScheduleAsk)]
    asks += [(got, n) for n, text, _ in CALENDAR if isinstance(got := understand_schedule(text, n, HOME), ScheduleAsk)]
    assert len(asks) >= 70
    for ask, now in asks:
        assert_valid(ask, now)


WHENS = [
    *("at 7", "at 12", "at 0:30", "at 23:59", "at 7pm", "at 12 pm", "at noon", "at midnight", "tonight at 11"),
    *("tomorrow at 7", "at 9 tomorrow", "on friday at 18:00", "on 3 december at 9", "on the 31st at 8"),
    *("this evening at 8", "at 7:15 in the morning", "at 3 at night"),
    *("in 10 minutes", "in an hour", "in 90 seconds", "in half an hour", "in 3 days", "every day at 7:30"),
    *("every weekday at 6", "every 2 hours", "every 15 minutes", "every hour", "every monday and friday at 8 pm"),
    *("every night at 12", "daily at 5", "at 7 and 19", "every day at 7 and 19"),
]
ACTIONS = ["remind me to take the bins out", "turn the fan on", "check the soil", "set the kitchen light to 40%"]


@settings(max_examples=300, deadline=None)
@given(
    when=st.sampled_from(WHENS),
    action=st.sampled_from(ACTIONS),
    after=st.booleans(),
    now=st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2028, 12, 31)).map(
        lambda t: t.replace(tzinfo=BRUSSELS)
    ),
)
def test_any_schedule_is_valid_and_a_once_is_in_the_future(when: str, action: str, after: bool, now: datetime) -> None:
    text = f"{action} {when}" if after else f"{when} {action}"
    got = understand_schedule(text, now, HOME)
    if isinstance(got, ScheduleAsk):
        assert_valid(got, now)


@settings(max_examples=200, deadline=None)
# up to 2100: in year 2515 a float timestamp has lost the microsecond the check compares (Hypothesis found it)
@given(
    seconds=st.integers(min_value=60, max_value=3 * 86400),
    now=st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2100, 1, 1)),
)
def test_in_n_minutes_never_runs_early_nor_a_minute_late(seconds: int, now: datetime) -> None:
    now = now.replace(tzinfo=BRUSSELS)
    got = understand_schedule(f"remind me in {seconds} seconds to stretch", now, HOME)
    if isinstance(got, Unclear):  # the second pass of a repeated hour
        return
    assert isinstance(got, ScheduleAsk)
    wall = datetime.strptime(got.schedule, "once %Y-%m-%d %H:%M").replace(tzinfo=BRUSSELS)
    due = now.timestamp() + seconds
    assert due <= wall.timestamp() < due + 60, (now, seconds, got)


SCHEDULED = [text for text, expected in TABLE if isinstance(expected, ScheduleAsk)]


@settings(max_examples=200, deadline=None)
@given(text=st.sampled_from(SCHEDULED), negation=st.sampled_from(["don't", "do not", "never", "not", "don’t"]))
def test_a_negation_anywhere_never_schedules(text: str, negation: str) -> None:
    words = text.split()
    for at in range(len(words) + 1):
        assert understand_schedule(" ".join([*words[:at], negation, *words[at:]]), NOW, HOME) is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_text_is_a_clear_answer(text: str) -> None:
    got = understand_schedule(text, NOW, HOME)
    assert got is None or isinstance(got, CancelAsk | Unclear | ScheduleAsk)
    if isinstance(got, ScheduleAsk):
        assert_valid(got, NOW)


def test_messages_about_other_things_are_turned_away_before_parsing() -> None:
    for text in ("tell me a joke", "how warm is the living room", "write me a poem", "thanks!", "", "🙂"):
        assert understand_schedule(text, NOW, HOME) is None


def test_now_plus_the_delay_is_in_real_time() -> None:
    # "in 2 hours" across the spring-forward jump is two real hours: 01:30 +01:00 -> 04:30 +02:00
    now = datetime(2027, 3, 28, 1, 30, tzinfo=BRUSSELS)
    got = understand_schedule("in 2 hours remind me to check", now, HOME)
    assert isinstance(got, ScheduleAsk) and got.schedule == "once 2027-03-28 04:30"
