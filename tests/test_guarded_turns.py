"""Whole turns with a scripted model that loops and one that recites its prompt: neither reaches the person.

What a person would see is checked twice: the reply record (what the API returns, what is stored for the
next turn's history) and the streamed events (what the terminal printed and the chat channels showed
while it was written). With the cloud allowed, a guard trip escalates like any unsure local answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from appliance.agent.reply_guard import DECLINE, GUESSED
from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from tests.agents import Routed, make_agent, run
from tests.fakes.cloud_api import FakeCloud

LOOP = " ".join(["The weather is lovely today and the sun is out."] * 20)
# What SmolLM2-135M wrote for "Say hello." in the routing tests: a greeting, then its own tool instructions.
LEAK = (
    "Hello, I'm Pico. You can use tools. To use one, reply with only a tool call and nothing else: "
    '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call> The result comes back in <tool_response>.'
)
BOTH = (
    "You can use tools. To use one, reply with only a tool call and nothing else: get_time(zone: string) "
    + " ".join(["I can help you with that."] * 10)
)


def shown(events: list[tuple[str, dict[str, Any]]]) -> str:
    """The text the person saw stream, as a channel shows it (a reroute replaces what came before)."""
    text = ""
    for kind, data in events:
        if kind == "text":
            text += data["delta"]
        elif kind == "reroute":
            text = ""
    return text.strip()


def test_a_looping_answer_is_stopped_and_only_its_first_sentence_is_shown(config: Config) -> None:
    model = ScriptedModel()
    model.enqueue(LOOP)
    agent = make_agent(config, model)  # type: ignore[arg-type]
    record, events = run(agent, "Describe a summer day.")
    assert record.text == "The weather is lovely today and the sun is out."
    assert shown(events) == record.text  # streamed: the sentence once, never again
    assert record.why == "guarded" and "repeated itself" in record.reason and record.route == "local"
    assert record.timings.completion_tokens < len(LOOP.split())  # the generation was stopped, not run out
    stored = agent.db.recent_messages(agent.db.conversation("terminal", "default"), 10)
    assert [m.content for m in stored if m.role == "assistant"] == [record.text]  # the next prompt never sees it


def test_an_answer_reciting_its_prompt_keeps_only_what_came_before_or_becomes_the_honest_sentence(
    config: Config,
) -> None:
    model = ScriptedModel()
    model.enqueue(LEAK, BOTH)
    agent = make_agent(config, model)  # type: ignore[arg-type]
    for question, reply in (("Say hello.", "Hello, I'm Pico."), ("Tell me about owls.", DECLINE)):
        record, events = run(agent, question)
        assert record.text == reply and shown(events) == reply
        seen = record.text + " ".join(d["delta"] for k, d in events if k == "text")
        for leaked in ("tool", "reply with only", "TOOL_NAME", "get_time", "I can help"):
            assert leaked not in seen  # nothing of the prompt, the made-up signature or the loop
        assert record.why == "guarded" and record.route == "local"
        assert "recited its own instructions" in record.reason
    stored = agent.db.recent_messages(agent.db.conversation("terminal", "default"), 10)
    assert [m.content for m in stored if m.role == "assistant"] == ["Hello, I'm Pico.", DECLINE]


def test_a_good_answer_is_untouched(config: Config) -> None:
    model = ScriptedModel()
    answer = "Here are three:\n- Apples\n- Pears\n- Plums\n\nEach is good in a pie."
    model.enqueue(answer)
    record, events = run(make_agent(config, model), "Name three fruits.")  # type: ignore[arg-type]
    assert record.text == answer and shown(events) == answer and record.why != "guarded"


def test_with_the_cloud_allowed_a_guard_trip_escalates(config: Config) -> None:
    async def main() -> None:
        async with FakeCloud("openai") as fake:
            model = ScriptedModel()
            model.enqueue(BOTH)
            routed = Routed(config, model, fake)  # type: ignore[arg-type]
            try:
                fake.enqueue("Owls hunt at night and can turn their heads a long way.")
                record, events = await routed.ask("Tell me about owls.")
            finally:
                await routed.close()
            assert record.route == "cloud" and record.why == "guarded"
            assert record.reason == "the local answer recited its own instructions"
            assert shown(events) == record.text == "Owls hunt at night and can turn their heads a long way."
            before = "".join(d["delta"] for k, d in events[: [k for k, _ in events].index("reroute")] if k == "text")
            assert before == ""  # nothing of the bad local answer showed before the reroute either
            assert len(fake.requests) == 1

    asyncio.run(main())


# Replies like those the packaged model gave the blind everyday sets' messages that reached it ("The time is 12
# January.", "At 12:04 PM, I'm at the front desk."), to messages no grounded answer takes (appliance/agent/claims.py)
GUESSES = {
    "just got home": "Welcome home! The porch light is on for you.",
    "so tired": "Sure! It's 3 pm, a good time for a nap.",
    "busy week ahead": "Good luck! Today is Monday, 12 January.",
}


def test_a_model_that_guesses_states_no_time_date_or_device_it_cannot_know(config: Config) -> None:
    """The packaged model (catalog ``answers: false``) with the cloud off: a reply stating a time, a date or a
    device is the honest sentence instead, all of it (its "Sure!" was no answer either), streamed as such."""
    model = ScriptedModel(name="smollm2-135m")
    model.enqueue(*GUESSES.values())
    agent = make_agent(config, model)  # type: ignore[arg-type]
    for message in GUESSES:
        record, events = run(agent, message)
        assert record.text == GUESSED and shown(events) == GUESSED, (message, record.text)
        assert record.why == "guarded" and "stated what it cannot know" in record.reason
    assert len(model.history) == len(GUESSES)  # the model ran: it was its reply that went


def test_a_guessing_model_still_chats_makes_things_up_on_request_and_answers_for_local(config: Config) -> None:
    """Small talk without a claim, a poem asked for (fiction by request) and /local (the small model asked on
    purpose) keep the model's words; a model the catalog says answers is not read for claims at all."""
    model = ScriptedModel(name="smollm2-135m")
    replies = {
        "feeling a bit bored": "Sorry to hear that! Maybe a short walk would help.",
        "write a short poem about the rain": "Soft rain on the roof, the garden drinks at noon.",
        "/local so tired": "It's 3 pm, a good time for a nap.",
    }
    model.enqueue(*replies.values())
    agent = make_agent(config, model)  # type: ignore[arg-type]
    for message, reply in replies.items():
        record, _ = run(agent, message)
        assert record.text == reply, (message, record.text)
    answers = ScriptedModel(name="qwen2.5-1.5b")
    answers.enqueue("It's 3 pm, a good time for a nap.")
    record, _ = run(make_agent(config, answers), "so tired")  # type: ignore[arg-type]
    assert record.text == "It's 3 pm, a good time for a nap."
