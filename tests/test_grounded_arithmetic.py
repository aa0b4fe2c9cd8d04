"""Arithmetic and unit conversions: which phrasings they take, and the exact figures a person reads back."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from appliance.config import Config
from appliance.grounded.arithmetic import ARITHMETIC, digits_for_words, expression_of
from appliance.grounded.base import Answer, Ask, Facts, Topic
from appliance.grounded.units import UNITS, shown


def reply(topic: Topic, text: str, config: Config) -> Answer | None:
    """The topic's answer to ``text`` as its words rule takes it (None: not taken)."""
    ask = topic.match(text)
    facts = Facts(config=config, now=lambda: datetime(2026, 11, 27, 14, 5, tzinfo=UTC))
    return None if ask is None else asyncio.run(topic.answer(ask, facts))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("what is 17 times 23?", "17 times 23 is 391."),
        ("17*23", "17*23 is 391."),
        ("What's 17 x 23", "17 x 23 is 391."),
        ("how much is 15 percent of 80", "15 percent of 80 is 12."),
        ("what's 15% of 80?", "15% of 80 is 12."),
        ("what's 2 to the power of 10", "2 to the power of 10 is 1024."),
        ("2^10", "2^10 is 1024."),
        ("what is 12 squared", "12 squared is 144."),
        ("square root of 144", "Square root of 144 is 12."),
        ("what is the square root of 2?", "The square root of 2 is about 1.414213562."),
        ("1/3 + 1/6", "1/3 + 1/6 is 0.5."),
        ("what is 1 divided by 3", "1 divided by 3 is 1/3, about 0.3333333333."),
        ("what is 0.1 + 0.2", "0.1 + 0.2 is 0.3."),  # exact, not 0.30000000000000004
        ("What's 1,000 x 3?", "1000 x 3 is 3000."),
        ("what is 123456789 times 987654321", "123456789 times 987654321 is 121932631112635269."),
        ("calculate (17 + 4) * 3", "(17 + 4) * 3 is 63."),
        ("hey pico, what's 7 plus 8 minus 3?", "7 plus 8 minus 3 is 12."),
        ("what does 45 divided by 9 make", "45 divided by 9 is 5."),
        ("how much is 3.5 times 4", "3.5 times 4 is 14."),
        ("what is seventeen times twenty-three", "Seventeen times twenty-three is 391."),
        ("what's one hundred and five plus a thousand", "One hundred and five plus a thousand is 1105."),
        ("what is 24/12", "24/12 is 2."),  # asked for as a sum, a date-like pair is one
        ("multiply 17 by 23", "17 × 23 is 391."),
        ("can you divide 100 by 8", "100 ÷ 8 is 12.5."),
        ("subtract 3 from 10", "10 − 3 is 7."),
        (
            "could you work out 15 percent of 80 for me?",
            "15 percent of 80 is 12.",
        ),  # asked for as a sum, a date-like pair is one
        ("what is 10 divided by 0", "I cannot work that out: division by zero."),
        ("what is 2 ** 1000", "I cannot work that out: exponent too large (at most 100)."),
        ("split 120 euros between 7 people", "About 17.14 euros each (120 / 7 = 17.1429…)."),
        ("split €90 between 3 people", "30 euros each."),
        ("split the bill of 100 dollars among 8", "12.50 dollars each."),
        ("split 100 between 3", "100/3, about 33.33333333 each."),
        ("split 60 euros by 4 people", "15 euros each."),
        ("If 4 people split 84 euros, how much does each pay?", "21 euros each."),
        ("What's 85 minus 20 percent?", "85 minus 20 percent is 68."),  # 85 less a fifth of it, not 65
        ("what is 80 plus 15%", "80 plus 15% is 92."),
        ("20% off 50", "20% off 50 is 40."),
        ("what is a third of 90", "A third of 90 is 30."),
        ("what's half of 250", "Half of 250 is 125."),
        ("what is two thirds of 90", "Two thirds of 90 is 60."),
    ],
)
def test_arithmetic_is_worked_out_exactly(text: str, said: str, config: Config) -> None:
    answer = reply(ARITHMETIC, text, config)
    assert answer is not None, f"{text!r} was not taken"
    assert answer.text == said
    assert (answer.kind, answer.basis) == ("arithmetic", "calculated on the Pi")


NEITHER = [
    "what is love",
    "I have 2 cats",
    "turn the fan on for 5 minutes",
    "remind me in 20 minutes",
    "set the light to 50 percent",
    "call me at 555 1234",
    "555-1234",
    "what is 5G",
    "24/12",
    "24/12/2026",
    "2026-11-27",
    "how many people live in Paris",
    "what is 42",
    "what is 5 minus",
    "what is x",
    "times are hard",
    "what is the time",
    "how many days in a month",
    "how many grams of sugar in a coke",
    "what is 3 plus the number of planets",
    "what is one direction",
    "one two three",
    "what is 50 percent",
    "what's a half",
    "2026-11-24 18:00",  # a time stamp, a cron line, a register, a screen size: not sums
    "30 7 * * 1-5",
    "0x76",
    "1280x900",
    "+3",
]


@pytest.mark.parametrize("text", NEITHER)
def test_what_is_not_a_sum_or_a_conversion_is_left_alone(text: str, config: Config) -> None:
    assert ARITHMETIC.match(text) is None and UNITS.match(text) is None
    facts = Facts(config=config, now=lambda: datetime(2026, 11, 27, tzinfo=UTC))
    # brought by meaning, the answers turn it down too
    assert asyncio.run(ARITHMETIC.answer(Ask("arithmetic", text=text, by_meaning=True), facts)) is None
    assert asyncio.run(UNITS.answer(Ask("units", text=text, by_meaning=True), facts)) is None


@pytest.mark.parametrize(
    ("text", "said", "basis"),
    [
        ("how many feet in 3 meters", "3 metres is about 9.843 feet.", "conversion factor 1 ft = 0.3048 m"),
        ("convert 70 F to celsius", "70 °F is about 21.1 °C.", "conversion °F = °C × 9/5 + 32"),
        ("how many grams in a pound?", "1 pound is 453.59237 grams.", "conversion factor 1 lb = 453.59237 g"),
        ("5 km in miles", "5 kilometres is about 3.107 miles.", "conversion factor 1 mi = 1.609344 km"),
        ("what's 20 degrees celsius in fahrenheit", "20 °C is 68 °F.", "conversion °F = °C × 9/5 + 32"),
        ("convert 98.6 f to c", "98.6 °F is 37 °C.", "conversion °F = °C × 9/5 + 32"),
        ("-40 c to f", "-40 °C is -40 °F.", "conversion °F = °C × 9/5 + 32"),
        ("300 K in celsius", "300 kelvin is about 26.8 °C.", "conversion K = °C + 273.15"),
        ("-500 c in f", "-500 °C is below absolute zero (-273.15 °C): no temperature is.", "°F = °C × 9/5 + 32"),
        ("how many tablespoons in a cup", "1 US cup is 16 US tablespoons.", "conversion factor 1 US cup = 16 US tbsp"),
        ("how many ml in a cup", "1 US cup is 236.5882365 millilitres.", "conversion factor 1 US cup = 236.5882365 ml"),
        ("how many teaspoons in 2 tablespoons", "2 US tablespoons is 6 US teaspoons.", "1 US tbsp = 3 US tsp"),
        ("how many litres is a gallon", "1 US gallon is 3.785411784 litres.", "1 US gal = 3.785411784 l"),
        ("what is 100 kilometres per hour in mph", "100 kilometres per hour is about 62.14 miles per hour.", "mph"),
        ("2 m/s in km/h", "2 metres per second is 7.2 kilometres per hour.", "1 m/s = 3.6 km/h"),
        ("how many seconds are there in a day", "1 day is 86400 seconds.", "1 d = 86400 s"),
        ("how many minutes in 2.5 hours", "2.5 hours is 150 minutes.", "1 h = 60 min"),
        ("convert 2 GB to MB", "2 gigabytes is 2000 megabytes.", "1 GB = 1000 MB"),
        ("1 GiB in MB", "1 gibibyte is 1073.741824 megabytes.", "1 GiB = 1073.741824 MB"),
        ("how many ounces in a kilo", "1 kilogram is about 35.27 ounces.", "1 oz = 0.028349523125 kg"),
        ("6 foot in cm", "6 feet is 182.88 centimetres.", "1 ft = 30.48 cm"),
        ("what is 1,000 metres in km", "1000 metres is 1 kilometre.", "1 km = 1000 m"),
        ("how many inches in a foot", "1 foot is 12 inches.", "1 ft = 12 in"),
        ("how many feet in three metres", "3 metres is about 9.843 feet.", "1 ft = 0.3048 m"),
    ],
)
def test_conversions_say_the_figure_the_unit_and_the_definition(
    text: str, said: str, basis: str, config: Config
) -> None:
    answer = reply(UNITS, text, config)
    assert answer is not None, f"{text!r} was not taken"
    assert answer.text == said
    assert answer.kind == "units" and basis in answer.basis


def test_two_kinds_of_quantity_are_not_converted(config: Config) -> None:
    answer = reply(UNITS, "how many grams in a cup", config)
    assert answer is not None
    assert "volume" in answer.text and "weight" in answer.text and "depends" not in answer.basis
    assert not any(ch.isdigit() for ch in answer.text)  # no figure invented for flour, sugar or water


def test_shown_rounds_only_what_is_not_exact() -> None:
    from fractions import Fraction

    assert shown(Fraction("453.59237")) == ("453.59237", True)
    assert shown(Fraction(1, 3)) == ("0.3333", False)
    assert shown(Fraction("0.000621371192237")) == ("0.0006214", False)  # more than ten digits
    assert shown(Fraction(1000, 1609344)) == ("0.0006214", False)
    assert shown(Fraction(62137119, 1000)) == ("62137.119", True)
    assert shown(Fraction(10**11, 1609344)) == ("62137", False)  # 100 000 km in miles: whole digits kept


def test_the_words_become_the_expression_the_calculator_reads() -> None:
    assert expression_of("17 times 23") == "17 * 23"
    assert expression_of("15 percent of 80") == "15 /100* 80"
    assert expression_of("the square root of 144 plus 1") == "sqrt(144) + 1"
    assert expression_of("2 to the power of 10") == "2 ** 10"
    assert expression_of("2 cats") is None
    assert expression_of("555 1234 + 1") is None  # two numbers side by side are not one
    assert expression_of("-7") is None  # a number with its sign is no sum
    assert digits_for_words("seventeen times twenty-three") == "17 times 23"
    assert digits_for_words("two thousand three hundred and forty five") == "2345"
    assert digits_for_words("one two") == "1 2"  # two numbers said, not twelve or three


def test_a_message_brought_by_meaning_is_read_by_the_same_rule(config: Config) -> None:
    facts = Facts(config=config, now=lambda: datetime(2026, 11, 27, tzinfo=UTC))
    answer = asyncio.run(ARITHMETIC.answer(Ask("arithmetic", text="what's 6 times 7", by_meaning=True), facts))
    assert answer is not None and answer.text == "6 times 7 is 42."
    # by meaning, a sum within the message is found: the longest run of words that is one
    within = Ask("arithmetic", text="so what do I get if I multiply 17 by 23", by_meaning=True)
    answer = asyncio.run(ARITHMETIC.answer(within, facts))
    assert answer is not None and answer.text == "17 × 23 is 391."
    within = Ask("arithmetic", text="I was born on 24/12, can you believe it", by_meaning=True)
    assert asyncio.run(ARITHMETIC.answer(within, facts)) is None
    converted = asyncio.run(UNITS.answer(Ask("units", text="5 km in miles", by_meaning=True), facts))
    assert converted is not None and "3.107 miles" in converted.text


def test_examples_are_messages_the_words_rules_take() -> None:
    for topic in (ARITHMETIC, UNITS):
        assert len(topic.examples) >= 12
        assert [e for e in topic.examples if topic.match(e) is None] == []
