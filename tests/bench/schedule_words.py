"""The scheduling fast path's decision time per message, against the floor of merely splitting the message."""

from __future__ import annotations

import statistics

from appliance.understanding.schedule_words import understand_schedule
from tests.bench.common import per_message_ms, percentile, report
from tests.bench.intent import PHRASINGS as OTHER  # device commands and chat: mostly no schedule at all
from tests.test_schedule_words import HOME, NOW, TABLE  # the phrasing table and the devices it is written for

PHRASINGS = tuple(text for text, _ in TABLE)


def bench_schedule_words(reps: int) -> None:
    """p50 time to decide one message of the table (schedule, cancel, ask back, or hand to the model)."""

    def decide(text: str) -> object:
        return understand_schedule(text, NOW, HOME)

    per_message_ms(decide, PHRASINGS, 3)  # warm up: the matcher cache, re's caches
    ours = per_message_ms(decide, PHRASINGS, reps)
    floor = per_message_ms(lambda text: text.lower().split(), PHRASINGS, reps)
    other = per_message_ms(decide, OTHER, reps)
    p50_ms = statistics.median(ours)
    report(
        "schedule_decision_p50_ms",
        p50_ms,
        statistics.median(floor),
        "value <= 2 ms",
        p50_ms <= 2.0,
        p99_ms=round(percentile(ours, 0.99), 4),
        max_ms=round(max(ours), 4),
        other_messages_p50_ms=round(statistics.median(other), 4),
        phrasings=len(PHRASINGS),
        other_phrasings=len(OTHER),
        reps=reps,
    )
