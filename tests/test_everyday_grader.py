"""The everyday set's grader, on replies written by hand: right, declined and wrong as a person reads them.

The set itself is checked too (enough questions, every class, the split rule of its header, the ten
questions of issue 32's table), and the placeholders are filled from a fixed moment, so what "right" means
for "what time is it" is exact here.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.eval.everyday import (
    CLASSES,
    MIN_QUESTIONS,
    Fill,
    Question,
    grade,
    load_set,
)
from tests.eval.everyday_quantities import quantities
from tests.eval.everyday_values import (
    FORECAST_NAMES,
    INVENTED_DEVICES,
    SUN_NAMES,
    WEATHER_CLAIM,
    clock_fills,
    forecast_fills,
    sun_fills,
)

EVERYDAY = load_set()
BRUSSELS = ZoneInfo("Europe/Brussels")
FRIDAY = datetime(2026, 11, 27, 12, 44, 30, tzinfo=BRUSSELS)  # the "it was 12:4x, a Friday in November"
VALUES = clock_fills(FRIDAY, FRIDAY.replace(minute=45)) | {
    "living_room_temperature": Fill(r"(?<![\d.])(?:21\.5|21|22)(?![\d])", (21.5,)),
    "memory_available_mb": Fill(numbers=(412.0,)),
    "cpu_temperature": Fill(),  # off a Pi: not known, only a decline is right
    "weather_claim": Fill(WEATHER_CLAIM),
    "invented_devices": Fill(INVENTED_DEVICES),
    "tomorrow_rain": Fill(skip="no weather fake on this branch"),
}


def judge(qid: str, reply: str) -> str:
    question = EVERYDAY.by_id(qid)[0]
    return grade(question, reply, VALUES, EVERYDAY.declines)[0]


def test_the_set_is_whole_and_split_by_its_rule() -> None:
    questions = EVERYDAY.questions
    assert len(questions) >= MIN_QUESTIONS
    assert {q.cls for q in questions} == set(CLASSES)
    tune, held = EVERYDAY.half("tune"), EVERYDAY.half("held")
    assert abs(len(tune) - len(held)) <= len(CLASSES)  # about half each
    table = [q.q for q in questions if q.table]
    assert len(table) == 10 and "what time is it?" in table and "what is 17 times 23?" in table
    assert all(q.split == "held" for q in questions if q.table)  # make bench reports every one of them
    # Both setups: weather and sun with a place, and with none (must be declined).
    bare = [q for q in questions if q.setup == "bare"]
    assert bare and all(q.expect == "decline" and q.cls in ("weather", "sun") for q in bare)
    for half in (tune, held):  # each half asks both: a forecast to give and one to decline
        for cls in ("weather", "sun"):
            assert {q.setup for q in half if q.cls == cls} == {"home", "bare"}, cls


def test_a_set_breaking_its_rules_is_refused_with_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "everyday.yaml"
    bad.write_text(
        "declines: ['I don''t know']\nquestions:\n"
        "  - {id: a, class: time, split: held, q: 'time?', any_of: ['{clock}']}\n"
        "  - {id: a, class: weather, split: tune, q: 'rain?', expect: decline, any_of: ['rain']}\n"
        "  - {id: c, class: nonsense, split: tune, q: 'x', colour: red}\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError) as refused:
        load_set(bad)
    message = str(refused.value)
    for problem in (
        "unknown placeholder {clock}",
        "a: split should be tune",
        "a decline question has only must_not",
        "class 'nonsense'",
        "unknown key 'colour'",
        "id used 2 times",
        "at least 220",
    ):
        assert problem in message, problem


@pytest.mark.parametrize(
    ("qid", "reply", "outcome"),
    [
        # the clock: the right minute (either side of its turn), in 24 h or 12 h; another time is wrong
        ("time-02", "It's 12:45.", "right"),
        ("time-02", "It is 12.44 pm", "right"),
        ("time-02", "It's 20:15 in the morning.", "wrong"),
        ("time-02", "The bins go out on Tuesday evenings.", "wrong"),
        ("time-02", "I don't know what time it is.", "declined"),
        ("time-02", "It's 12:45 (or maybe 13:10).", "wrong"),
        ("time-02", "It's 12:45. I don't know the weather though.", "right"),  # the decline is another sentence's
        ("time-02", "I'm not sure, but it's 12:45.", "declined"),  # hedged in the same breath: not an answer
        ("dev-01", "The fan is on.", "right"),
        ("dev-01", "echo: Is the fan on?", "wrong"),  # the question said back answers nothing
        ("dev-01", "I can't tell whether the fan is on.", "declined"),
        ("date-02", "It's Friday.", "right"),
        ("date-02", "It's Wednesday, 14th of March.", "wrong"),
        ("date-01", "Today is Friday 27 November 2026.", "right"),
        ("date-01", "It's November 27th.", "right"),
        ("date-01", "It's the 14th of March.", "wrong"),
        ("date-05", "It is 2026.", "right"),
        ("date-05", "It's 2023.", "wrong"),
        # arithmetic: the number it adds to the question's, first or last
        ("math-02", "17 × 23 = 391", "right"),
        ("math-02", "409", "wrong"),
        ("math-03", "144 divided by 12 is 11.", "wrong"),  # the question's 12 does not count
        ("math-03", "144 divided by 12 is 12.", "right"),  # ... but the answer may be one of its numbers
        ("math-19", "256 / 16 = 16", "right"),
        ("unit-07", "24 × 60 × 60 = 86,400 seconds.", "right"),
        ("unit-02", "100 km is about 62.14 miles (1 km = 0.621 mi).", "right"),
        ("unit-15", "0 °F is −17.78 °C.", "right"),
        # a sensor's value within its tolerance
        ("dev-03", "living_room: temperature: 21.5 °C.", "right"),
        ("dev-03", "It's 25 degrees in the living room.", "wrong"),
        ("health-02", "About 0.4 GB of 1 GB is free.", "right"),
        ("health-02", "I'm currently using 128GB of RAM.", "wrong"),
        # a value not knowable here (no CPU sensor off a Pi): only an honest decline is right
        ("health-04", "My CPU is at 48 °C.", "wrong"),
        ("health-04", "I can't read a CPU temperature on this machine.", "declined"),
        # must-decline questions: a decline is declined, a claim is wrong, a non-answer is wrong
        ("unk-03", "You haven't told me your name.", "declined"),
        ("unk-03", "Your name is Max.", "wrong"),
        ("unk-03", "Hello there!", "wrong"),
        ("wx-02", "I have no weather source: set a place in the config.", "declined"),
        ("wx-02", "It's going to rain tomorrow. I'm not sure though.", "wrong"),
        ("wx-02", "I'm not sure, but it will rain.", "wrong"),
        # invented devices and tool signatures are wrong even beside right words
        ("abil-04", "I control the porch light and the fan.", "right"),
        ("abil-04", "smartphones and tablets, laptops, gaming consoles", "wrong"),
        ("abil-04", "The porch light, the fan and your smartphone.", "wrong"),
    ],
)
def test_replies_are_graded_as_a_person_reads_them(qid: str, reply: str, outcome: str) -> None:
    assert judge(qid, reply) == outcome


def test_a_question_without_its_source_is_skipped_with_the_reason() -> None:
    question = EVERYDAY.by_id("wx-01")[0]
    assert grade(question, "Yes, it will rain.", VALUES, EVERYDAY.declines) == (
        "skipped",
        "no weather fake on this branch",
    )


def test_placeholders_are_filled_from_the_moment() -> None:
    late = clock_fills(
        datetime(2026, 12, 31, 23, 59, 50, tzinfo=BRUSSELS), datetime(2027, 1, 1, 0, 0, 5, tzinfo=BRUSSELS)
    )
    question = Question("t", "time", "tune", "what time is it?", any_of=("{time}",), must_not=("{other_time}",))
    declines = EVERYDAY.declines
    assert grade(question, "It's 23:59.", late, declines)[0] == "right"
    assert grade(question, "It's 00:00.", late, declines)[0] == "right"  # the minute turned while it answered
    assert grade(question, "It's 23:58.", late, declines)[0] == "wrong"
    assert VALUES["days_to_christmas"].pattern == r"\b28\b"
    assert VALUES["tomorrow_weekday"].pattern == r"\b(?:Saturday)\b"
    assert "CET" in (VALUES["timezone"].pattern or "")


def test_quantities_are_read_in_their_units() -> None:
    assert quantities("sunset is at 4:44 pm, sunrise 08:18", "clock") == [16 * 60 + 44, 8 * 60 + 18, 20 * 60 + 18]
    assert quantities("up 2 hours and 5 minutes", "duration")[-1] == 125
    assert quantities("1.5 GB free of 2048 MiB", "megabytes") == [1500.0, 2048.0]
    assert quantities("21.5 °C inside, 70 °F outside", "celsius") == [21.5]


def test_the_sun_and_the_forecast_are_computed_independently() -> None:
    sun = sun_fills(FRIDAY, 50.85, 4.35)
    # Brussels, 27 November 2026: sunrise 08:17, sunset 16:43 (published tables; within two minutes)
    assert abs(sun["sunset"].numbers[0] - (16 * 60 + 43)) <= 2
    assert abs(sun["next_sunrise"].numbers[1] - (8 * 60 + 19)) <= 2
    assert sun["sun_up"].pattern is not None and "yes" in sun["sun_up"].pattern
    payload = {
        "current": {"temperature_2m": 7.5},
        "daily": {
            "time": ["2026-11-27", "2026-11-28"],
            "temperature_2m_max": [9.0, 6.0],
            "temperature_2m_min": [3.0, -2.0],
            "precipitation_sum": [6.0, 0.0],
            "precipitation_probability_max": [80, 5],
        },
    }
    weather = forecast_fills(payload, FRIDAY)
    assert set(weather) == set(FORECAST_NAMES) and set(sun) == set(SUN_NAMES)
    frost = Question("f", "weather", "tune", "frost tonight?", any_of=("{freeze_tonight}",))
    assert grade(frost, "It will drop to -2 °C tonight.", weather, EVERYDAY.declines)[0] == "right"
    umbrella = Question("u", "weather", "tune", "umbrella?", any_of=("{today_rain}",), must_not=("{today_rain_wrong}",))
    assert grade(umbrella, "An 80% chance of rain today, 6 mm.", weather, EVERYDAY.declines)[0] == "right"
    assert grade(umbrella, "A 10% chance of rain.", weather, EVERYDAY.declines)[0] == "wrong"
    assert grade(umbrella, "No, it will stay dry.", weather, EVERYDAY.declines)[0] == "wrong"
    assert weather["outside_temperature"].numbers == (7.5,)
    assert weather["tomorrow_low"].numbers == (-2.0,)
    rain = Question(
        "w", "weather", "tune", "rain tomorrow?", any_of=("{tomorrow_rain}",), must_not=("{tomorrow_rain_wrong}",)
    )
    assert grade(rain, "No, tomorrow stays dry.", weather, EVERYDAY.declines)[0] == "right"
    assert grade(rain, "Yes, it will rain tomorrow.", weather, EVERYDAY.declines)[0] == "wrong"
    assert grade(rain, "It isn't going to rain.", weather, EVERYDAY.declines)[0] == "right"
