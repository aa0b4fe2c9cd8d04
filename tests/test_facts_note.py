"""The time the model is told comes after the system prompt, so the KV cache's prefix holds across turns.

Injecting the date into the system prompt is a known way to break prefix caches: every minute the first
tokens would change and every turn would read the whole prompt cold. Here the system prompt stays byte
for byte the same at any time of day, and the packaged model's second turn finds it in its cache.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from zoneinfo import ZoneInfo

from appliance.agent.context import facts_note
from appliance.config import Config
from appliance.llm.local import LocalModel
from appliance.llm.scripted import ScriptedModel
from tests.agents import make_agent

LISBON = ZoneInfo("Europe/Lisbon")
FRIDAY_NOON = datetime(2026, 11, 27, 12, 41, tzinfo=LISBON)
SATURDAY_EVENING = datetime(2026, 11, 28, 19, 5, tzinfo=LISBON)


def test_the_note_says_the_day_date_time_zone_and_place() -> None:
    note = facts_note(FRIDAY_NOON)
    assert note.role == "system" and note.content == "Now: Friday 27 November 2026, 12:41 (Europe/Lisbon time)."
    named = facts_note(FRIDAY_NOON, "Lisbon")
    assert named.content == "Now: Friday 27 November 2026, 12:41 (Europe/Lisbon time). Here: Lisbon."
    utc = facts_note(datetime(2026, 11, 27, 12, 41, tzinfo=ZoneInfo("Etc/UTC")))
    assert utc.content == "Now: Friday 27 November 2026, 12:41 (UTC time)."


def test_the_system_prompt_is_byte_identical_at_different_times(config: Config, local_model: LocalModel) -> None:
    model = ScriptedModel()
    model.enqueue("It is lunchtime.", "It is evening.")
    config.weather.place = "Lisbon"
    agent = make_agent(config, model)  # type: ignore[arg-type]
    for now, question in ((FRIDAY_NOON, "Is it lunchtime?"), (SATURDAY_EVENING, "And now?")):
        agent.clock = lambda now=now: now
        asyncio.run(agent.turn(question))
    first, second = (request.messages for request in model.history)
    assert first[0] == second[0] and first[0].role == "system"  # the system prompt, unchanged
    assert first[1] == facts_note(FRIDAY_NOON, "Lisbon") and second[1] == facts_note(SATURDAY_EVENING, "Lisbon")
    # As the packaged model reads them (its chat template): the same bytes up to the end of the system prompt.
    local_model.count_tokens(first)  # loads it: the template comes with the model file
    one, two = local_model.render(first), local_model.render(second)
    same = next((i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b), min(len(one), len(two)))
    shared = one[:same]
    assert first[0].content in shared and "12:41" not in shared
    assert shared == one[: one.index("Now: ") + len("Now: ")]  # they differ first at the note's day and time


def test_the_second_turn_finds_the_system_prompt_in_the_kv_cache(config: Config, local_model: LocalModel) -> None:
    config.agent.max_reply_tokens = 8
    config.agent.temperature = 0.0
    agent = make_agent(config, local_model)
    system = agent.prefix_messages()
    system_tokens = local_model.count_tokens(system) - local_model.count_tokens([])  # less the reply's opening
    agent.clock = lambda: FRIDAY_NOON
    asyncio.run(agent.turn("Tell me about the moon."))
    agent.clock = lambda: SATURDAY_EVENING  # a day and six hours later: a different note
    second = asyncio.run(agent.turn("And tell me about the sea."))  # a request: the model answers it
    assert second.timings.cached_tokens >= system_tokens, (second.timings.cached_tokens, system_tokens)
    assert second.timings.cached_tokens < second.timings.prompt_tokens  # the note and what follows were read
