"""The intent fast path: a table of phrasings, zero wrong actions over it, and negations that never act."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.errors import ConfigError
from appliance.hardware.device_info import DeviceInfo
from appliance.understanding.intent import SETTABLE, Intent, IntentMatcher

HOME = (
    DeviceInfo("porch_light", "switch", "porch", ("porch lamp", "outside light")),
    DeviceInfo("kitchen_light", "dimmer", "kitchen", ()),
    DeviceInfo("fan", "switch", "living room", ("ventilator",)),
    DeviceInfo("living_room", "sensor", "living room", (), ("temperature", "humidity", "pressure")),
    DeviceInfo("soil", "sensor", "garden", ("soil moisture",), ("level", "voltage")),
    DeviceInfo("doorbell", "input", "hallway", ()),
)
# One light only: "the light" is then unambiguous.
ONE_LIGHT = (
    DeviceInfo("hall_light", "switch", "hallway", ()),
    DeviceInfo("fan", "switch", "bedroom", ()),
)
# Two sensors measure temperature: "what's the temperature" must ask.
TWO_THERMOMETERS = (
    DeviceInfo("bedroom", "sensor", "bedroom", (), ("temperature", "humidity")),
    DeviceInfo("attic", "sensor", "attic", (), ("temp",)),
    DeviceInfo("attic_fan", "switch", "attic", ()),
    DeviceInfo("lux_meter", "sensor", "garden", (), ("illuminance",)),
)
MATCHERS = {"home": IntentMatcher(HOME), "one_light": IntentMatcher(ONE_LIGHT), "two": IntentMatcher(TWO_THERMOMETERS)}

LIGHTS = ("porch_light", "kitchen_light")
WHICH_LIGHT = "which light: porch or kitchen?"


def on(device: str) -> Intent:
    return Intent("set", device, True)


def off(device: str) -> Intent:
    return Intent("set", device, False)


def level(device: str, value: float) -> Intent:
    return Intent("set", device, value)


def read(device: str, quantity: str | None = None) -> Intent:
    return Intent("read", device, quantity=quantity)


def ask(question: str, options: tuple[str, ...], then: Intent) -> Intent:
    return Intent("ask", question=question, options=options, then=then)


COMMANDS = [
    ("home", "turn on the porch light", on("porch_light")),
    ("home", "switch the fan off", off("fan")),
    ("home", "fan on", on("fan")),
    ("home", "porch light on", on("porch_light")),
    ("home", "turn the porch lamp on", on("porch_light")),
    ("home", "can you turn off the fan?", off("fan")),
    ("home", "please switch on the outside light", on("porch_light")),
    ("home", "kill the fan", off("fan")),
    ("home", "shut off the fan", off("fan")),
    ("home", "Turn ON the Fan!", on("fan")),
    ("home", "turn off fan", off("fan")),
    ("home", "fan: off.", off("fan")),
    ("home", "the fan on", on("fan")),
    ("home", "switch off the ventilator please", off("fan")),
    ("home", "could you please switch the fan on for me?", on("fan")),
    ("home", "would you turn the porch light off", off("porch_light")),
    ("home", "hey, turn on the fan now, thanks", on("fan")),
    ("home", "turn on the living room fan", on("fan")),
    ("home", "turn on the fan in the living room", on("fan")),
    ("home", "turn off the light in the porch", off("porch_light")),
    ("home", "turn on the kitchen light", on("kitchen_light")),
    ("home", "turn on the kitchen lights", on("kitchen_light")),
    ("home", "turn off the lamp", off("porch_light")),
    ("home", "power down the fan", off("fan")),
    ("home", "shut the fan off", off("fan")),
    ("home", "flip on the porch light", on("porch_light")),
    ("home", "stop the fan", off("fan")),
    ("home", "start the ventilator", on("fan")),
    ("home", "turn on porch_light", on("porch_light")),
    ("home", "turn the fan on please", on("fan")),
    ("home", "please, please turn on the fan", on("fan")),
    ("one_light", "turn on the light", on("hall_light")),
    ("one_light", "lights off please", off("hall_light")),
    ("one_light", "switch the hall light off", off("hall_light")),
]
LEVELS = [
    ("home", "set the kitchen light to 40%", level("kitchen_light", 0.4)),
    ("home", "dim the kitchen light to 20 percent", level("kitchen_light", 0.2)),
    ("home", "set the kitchen light to half", level("kitchen_light", 0.5)),
    ("home", "set the kitchen light to 75", level("kitchen_light", 0.75)),
    ("home", "kitchen light to 30 %", level("kitchen_light", 0.3)),
    ("home", "kitchen light 40%", level("kitchen_light", 0.4)),
    ("home", "turn the kitchen light down to 20%", level("kitchen_light", 0.2)),
    ("home", "turn up the kitchen light to 80", level("kitchen_light", 0.8)),
    ("home", "brighten the kitchen light to full", level("kitchen_light", 1.0)),
    ("home", "set the brightness of the kitchen light to 40 percent", level("kitchen_light", 0.4)),
    ("home", "set the kitchen light's brightness to 60", level("kitchen_light", 0.6)),
    ("home", "set the kitchen light to 0", level("kitchen_light", 0.0)),
    ("home", "set the kitchen light to 12.5%", level("kitchen_light", 0.125)),
    ("home", "set the kitchen light to half brightness", level("kitchen_light", 0.5)),
    ("home", "set the kitchen light to 5%", level("kitchen_light", 0.05)),
    # no level, or no level this device can take: the model decides
    ("home", "brighter", None),
    ("home", "dim the kitchen light", None),
    ("home", "make the kitchen light dimmer", None),
    ("home", "turn up the kitchen light", None),
    ("home", "set the kitchen light to 5", None),  # 5 of 10, or 5 %?
    ("home", "set the kitchen light to 0.5", None),  # half, or half a percent?
    ("home", "set the kitchen light to 150%", None),
    ("home", "set the kitchen light to -5%", None),
    ("home", "set the fan to 40%", None),
    ("home", "set the porch light to 100%", None),
    ("home", "set the kitchen light to 40% in 10 minutes", None),
]
READS = [
    ("home", "is the porch light on?", read("porch_light")),
    ("home", "check the soil pls, looks dry", read("soil")),  # a reading asked in one clause, a remark beside it
    ("home", "looks dry. check the soil", read("soil")),
    ("home", "check the soil, turn on the fan", None),  # a command beside it: the model's to weigh
    ("home", "check the soil, is the fan on?", None),  # two readings: which one?
    ("home", "is the fan running", read("fan")),
    ("home", "is the fan still on", read("fan")),
    ("home", "is the fan on or off?", read("fan")),
    ("home", "is the doorbell pressed", read("doorbell")),
    ("home", "is the doorbell being pressed", read("doorbell")),
    ("home", "are the fans on", read("fan")),
    ("home", "status of the fan", read("fan")),
    ("home", "fan status", read("fan")),
    ("home", "what's the fan's status?", read("fan")),
    ("home", "what is the state of the kitchen light", read("kitchen_light")),
    ("home", "check the soil", read("soil")),
    ("home", "how is the fan", read("fan")),
    ("home", "living room temperature", read("living_room", "temperature")),
    ("home", "how warm is the living room", read("living_room", "temperature")),
    ("home", "how warm is it in the living room?", read("living_room", "temperature")),
    ("home", "what's the humidity in the living room", read("living_room", "humidity")),
    ("home", "how wet is the soil", read("soil", "level")),
    ("home", "how dry is the soil?", read("soil", "level")),
    ("home", "what is the pressure", read("living_room", "pressure")),
    ("home", "what's the air pressure?", read("living_room", "pressure")),
    ("home", "what's the temperature", read("living_room", "temperature")),
    ("home", "temperature?", read("living_room", "temperature")),
    ("home", "what is the living room's temperature", read("living_room", "temperature")),
    ("home", "tell me the temperature in the living room please", read("living_room", "temperature")),
    ("home", "soil moisture level", read("soil", "level")),
    ("home", "what's the soil voltage", read("soil", "voltage")),
    ("home", "what is the voltage of the soil", read("soil", "voltage")),
    ("home", "how humid is it", read("living_room", "humidity")),
    ("home", "what is the current temperature in the living room", read("living_room", "temperature")),
    ("two", "what's the temperature in the attic", read("attic", "temp")),
    ("two", "how cold is the bedroom", read("bedroom", "temperature")),
    ("two", "what is the humidity", read("bedroom", "humidity")),
    ("two", "what's the light level in the garden", read("lux_meter", "illuminance")),
    ("two", "how dark is it in the garden?", read("lux_meter", "illuminance")),
    ("one_light", "is the light on?", read("hall_light")),
    # nothing there measures it, or the device has no state: the model answers
    ("home", "what's the temperature in the kitchen", None),
    ("home", "how hot is the fan", None),
    ("home", "temperature in the garden", None),
    ("home", "is the living room on", None),
]
ASKS = [
    ("home", "turn on the light", ask(WHICH_LIGHT, LIGHTS, Intent("set", value=True))),
    ("home", "lights off please", ask(WHICH_LIGHT, LIGHTS, Intent("set", value=False))),
    ("home", "turn the lights off", ask(WHICH_LIGHT, LIGHTS, Intent("set", value=False))),
    ("home", "kill the lights", ask(WHICH_LIGHT, LIGHTS, Intent("set", value=False))),
    ("home", "set the light to 40%", ask(WHICH_LIGHT, LIGHTS, Intent("set", value=0.4))),
    ("home", "are the lights on?", ask(WHICH_LIGHT, LIGHTS, Intent("read"))),
    ("home", "status of the light", ask(WHICH_LIGHT, LIGHTS, Intent("read"))),
    (
        "two",
        "what's the temperature",
        ask("which temperature: bedroom or attic?", ("bedroom", "attic"), Intent("read", quantity="temperature")),
    ),
    (
        "two",
        "how warm is it?",
        ask("which temperature: bedroom or attic?", ("bedroom", "attic"), Intent("read", quantity="temperature")),
    ),
]
NOT_COMMANDS = [
    # negations
    ("home", "don't turn on the fan", None),
    ("home", "do not switch off the porch light", None),
    ("home", "never turn the fan on", None),
    ("home", "please dont turn on the fan", None),
    ("home", "could you not turn on the fan", None),
    ("home", "fan on? no", None),
    ("home", "isn't the fan on?", None),
    ("home", "don’t turn on the fan", None),
    ("home", "turn on the porch light... no wait", None),
    # statements, stories, questions about actions
    ("home", "I turned on the fan yesterday", None),
    ("home", "the fan turned on by itself", None),
    ("home", "should I turn on the fan?", None),
    ("home", "why is the fan on?", None),
    ("home", "what does turning on the fan do", None),
    ("home", "the porch light is beautiful", None),
    ("home", "the fan is on", None),
    ("home", "tell me a joke about fans", None),
    ("home", "did you turn on the fan?", None),
    ("home", "can I turn on the fan?", None),
    ("home", "turn on the fan?", None),
    ("home", "fan off?", None),
    ("home", "I want to turn on the fan", None),
    # scheduling and conditions
    ("home", "remind me to turn on the fan at 6", None),
    ("home", "turn on the fan in 10 minutes", None),
    ("home", "turn on the fan at 6", None),
    ("home", "if it gets hot turn on the fan", None),
    ("home", "turn on the fan when it gets hot", None),
    ("home", "turn off the porch light tomorrow", None),
    # unknown, missing, vague or several targets
    ("home", "turn on the radio", None),
    ("home", "turn on", None),
    ("home", "fan", None),
    ("home", "turn it on", None),
    ("home", "turn on the porch", None),
    ("home", "turn on the living room", None),
    ("home", "turn on the lamp in the kitchen", None),
    ("home", "turn on the fan in the kitchen", None),
    ("home", "turn on the kitchen fan", None),
    ("home", "turn on all the lights", None),
    ("home", "turn on the fan and the porch light", None),
    ("home", "turn the fan on and off", None),
    ("home", "turn off the fan, then the porch light", None),
    ("home", "turn on the fan 🚫", None),
    ("home", "switch on the doorbell", None),
    ("home", "turn on the soil", None),
    ("home", "", None),
    ("home", "please", None),
]
TABLE = COMMANDS + LEVELS + READS + ASKS + NOT_COMMANDS


@pytest.mark.parametrize(("fixture", "text", "expected"), TABLE, ids=[f"{f}:{t}" for f, t, _ in TABLE])
def test_phrasing(fixture: str, text: str, expected: Intent | None) -> None:
    got = MATCHERS[fixture].match(text)
    assert got == expected
    if expected is not None and expected.action == "set":
        assert type(got.value) is type(expected.value)  # True == 1.0 in Python, but not to a dimmer


def test_the_table_is_big_enough() -> None:
    negations = sum(1 for _, _, e in NOT_COMMANDS if e is None)
    asks = sum(1 for _, _, e in ASKS if e is not None and e.action == "ask")
    assert len(TABLE) >= 80 and negations >= 15 and asks >= 5, (len(TABLE), negations, asks)


def _wrong_action(got: Intent | None, expected: Intent | None) -> bool:
    """An action on the wrong device, with the wrong value, or where none (or a question) was expected."""
    if got is None or got.action != "set":
        return False
    if expected is None or expected.action != "set":
        return True
    return got.device != expected.device or type(got.value) is not type(expected.value) or got.value != expected.value


def test_zero_wrong_actions_over_the_table() -> None:
    wrong = [
        f"{text!r} -> {got}"
        for fixture, text, expected in TABLE
        if _wrong_action(got := MATCHERS[fixture].match(text), expected)
    ]
    assert not wrong, f"{len(wrong)} wrong action(s) in {len(TABLE)} phrasings:\n" + "\n".join(wrong)


# --- properties -----------------------------------------------------------------------------------

NEGATIONS = ["don't", "do not", "never", "not", "dont", "please don't", "never ever", "do NOT", "don’t"]
VERBS = [
    "turn on",
    "turn off",
    "switch on",
    "switch off",
    "kill",
    "shut off",
    "start",
    "stop",
    "set",
    "dim",
    "power on",
]
FILLERS = [
    "the",
    "fan",
    "porch light",
    "kitchen light",
    "lights",
    "ventilator",
    "outside light",
    "please",
    "now",
    "to 40%",
    "to half",
    "on",
    "off",
    "can you",
    "I",
    "and",
    "in the living room",
    ",",
    "!",
    "?",
]


@settings(max_examples=300, deadline=None)
@given(
    before=st.lists(st.sampled_from(FILLERS), max_size=3),
    negation=st.sampled_from(NEGATIONS),
    between=st.lists(st.sampled_from(FILLERS), max_size=2),
    verb=st.sampled_from(VERBS),
    after=st.lists(st.sampled_from(FILLERS), max_size=5),
)
def test_a_negation_before_the_verb_never_sets(
    before: list[str], negation: str, between: list[str], verb: str, after: list[str]
) -> None:
    text = " ".join([*before, negation, *between, verb, *after])
    got = MATCHERS["home"].match(text)
    assert got is None or got.action != "set", text
    assert got is None or got.then is None or got.then.action != "set", text


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80), st.lists(st.sampled_from([*FILLERS, *VERBS]), max_size=8).map(" ".join)))
def test_any_set_is_one_this_device_can_take(text: str) -> None:
    got = MATCHERS["home"].match(text)
    if got is not None and got.action == "set":
        device = next(d for d in HOME if d.name == got.device)
        assert device.kind in SETTABLE
        if isinstance(got.value, float):
            assert device.kind == "dimmer" and 0.0 <= got.value <= 1.0


# --- answering a question -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reply", "expected"),
    [
        ("turn on the light", "porch", on("porch_light")),
        ("turn on the light", "the kitchen one", on("kitchen_light")),
        ("turn on the light", "kitchen light please", on("kitchen_light")),
        ("turn on the light", "both", None),
        ("turn on the light", "the fan", None),
        ("turn on the light", "not the porch", None),
        ("set the light to 40%", "kitchen", level("kitchen_light", 0.4)),
        ("set the light to 40%", "porch", None),  # a relay has no level
        ("are the lights on?", "porch", read("porch_light")),
    ],
)
def test_answer_picks_one_option(text: str, reply: str, expected: Intent | None) -> None:
    matcher = MATCHERS["home"]
    pending = matcher.match(text)
    assert pending is not None and pending.action == "ask"
    assert matcher.answer(pending, reply) == expected


def test_answer_keeps_each_sensors_own_quantity_name() -> None:
    matcher = MATCHERS["two"]
    pending = matcher.match("what's the temperature")
    assert pending is not None
    assert matcher.answer(pending, "attic") == read("attic", "temp")
    assert matcher.answer(pending, "bedroom") == read("bedroom", "temperature")
    assert matcher.answer(read("attic"), "attic") is None  # only an "ask" can be answered


def test_two_devices_with_one_name_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="'fan'"):
        IntentMatcher([*HOME, DeviceInfo("fan", "switch", None, ())])


@pytest.mark.parametrize(
    ("intent", "words"),
    [
        (off("fan"), "set fan off"),
        (level("kitchen_light", 0.125), "set kitchen_light 12.5%"),
        (read("living_room", "temperature"), "read living_room temperature"),
        (read("fan"), "read fan"),
        (ask(WHICH_LIGHT, LIGHTS, Intent("set", value=True)), f"ask {WHICH_LIGHT}"),
    ],
)
def test_describe(intent: Intent, words: str) -> None:
    assert intent.describe() == words
