"""The intent fast path's decision time per message, against the floor of merely splitting the message."""

from __future__ import annotations

import statistics

from appliance.understanding.intent import IntentMatcher
from tests.bench.common import per_message_ms, percentile, report
from tests.test_intent import HOME as DEVICES  # the same six devices the phrasing table is written for

PHRASINGS = (
    # commands
    "turn on the porch light",
    "switch the fan off",
    "fan on",
    "porch light off please",
    "turn the porch lamp on",
    "can you turn off the fan?",
    "please switch on the outside light",
    "kill the fan",
    "shut off the fan",
    "turn on the living room fan",
    "set the kitchen light to 40%",
    "dim the kitchen light to 20 percent",
    "set the brightness of the kitchen light to half",
    "turn the kitchen light down to 20%",
    # questions
    "is the porch light on?",
    "is the fan running",
    "status of the fan",
    "living room temperature",
    "how warm is the living room",
    "what's the humidity in the living room",
    "how wet is the soil",
    "what is the pressure",
    "what is the current temperature in the living room",
    "soil moisture level",
    # ambiguous
    "turn on the light",
    "lights off please",
    "are the lights on?",
    # for the model
    "don't turn on the fan",
    "I turned on the fan yesterday",
    "should I turn on the fan?",
    "why is the fan on?",
    "remind me to turn on the fan at 6",
    "turn on the fan in 10 minutes",
    "if it gets hot turn on the fan",
    "tell me a joke about fans",
    "turn on the radio",
    "turn on the fan and the porch light",
    "what does turning on the fan do",
    "Could you write me a short poem about the garden in spring, with a rhyme on every second line?",
    "the porch light is beautiful",
)


def bench_intent(reps: int) -> None:
    """p50 time for the matcher to decide one message (act, read, ask, or hand to the model)."""
    matcher = IntentMatcher(DEVICES)
    per_message_ms(matcher.match, PHRASINGS, 5)  # warm up: first calls pay for lazy caches in re and the interpreter
    ours = per_message_ms(matcher.match, PHRASINGS, reps)
    floor = per_message_ms(lambda text: text.lower().split(), PHRASINGS, reps)
    p50_ms = statistics.median(ours)
    report(
        "intent_decision_p50_ms",
        p50_ms,
        statistics.median(floor),
        "value <= 2 ms",
        p50_ms <= 2.0,
        p99_ms=round(percentile(ours, 0.99), 4),
        max_ms=round(max(ours), 4),
        phrasings=len(PHRASINGS),
        reps=reps,
    )
