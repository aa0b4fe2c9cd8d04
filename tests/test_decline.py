"""The honest decline: a question the Pi's model will not manage, and the cloud may not answer it.

Real MiniLM scores the message (the shipped difficulty weights), a scripted model stands in for the local
one (it must never be asked), and a fake OpenAI server for the cloud. What is checked is what a person
sees: the sentence, the buttons, the footer, and what tapping each button does.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

import pytest

from appliance.agent.decline import ASK_CLOUD, Bigger, DeclineDesk
from appliance.agent.escalation import CloudRoute
from appliance.agent.record import ReplyRecord
from appliance.agent.router import Difficulty, LocalOutcome, RoutingContext, after_local, declines
from appliance.channels.core import footer
from appliance.config import Config, ProviderConfig
from appliance.llm.embeddings import LocalEmbedder
from appliance.llm.scripted import ScriptedModel
from appliance.memory.db import Database
from tests.agents import Routed
from tests.fakes.cloud_api import FakeCloud

HARD = "Write a Go function that merges two sorted slices into one sorted slice."
EASY = "Good evening, how was your day?"
QWEN = Bigger("qwen2.5-1.5b", "1.1 GB", 1230, "Raspberry Pi 5 Model B Rev 1.0, 7.9 GiB RAM, 4 cores")


def hard(**fields: object) -> RoutingContext:
    context: dict[str, object] = {"mode": "edge_first", "provider": "openai", **fields}
    return RoutingContext(difficulty=Difficulty(0.9, 0.65), **context)  # type: ignore[arg-type]


def test_a_hard_message_is_declined_only_where_the_cloud_may_not_answer() -> None:
    assert not declines(hard())  # the cloud may: it answers (before_local sends it there)
    assert declines(hard(conversation_local_only=True)) and declines(hard(network_up=False))
    assert declines(hard(mode="local_only", provider=None))  # the packaged config: no cloud at all
    assert not declines(hard(mode="local_only", forced="local"))  # /local: the person asked the Pi to try
    assert not declines(hard(mode="cloud_first", conversation_local_only=True))  # the owner's choice: the Pi
    easy = RoutingContext(mode="local_only", provider=None, difficulty=Difficulty(0.2, 0.65))
    assert not declines(easy) and not declines(RoutingContext(mode="local_only", provider=None))
    # over the routing bar but under the decline's: the cloud would have been asked; without it, the Pi tries
    fair = RoutingContext(mode="local_only", provider=None, difficulty=Difficulty(0.75, 0.65))
    assert not declines(fair)


def test_local_only_declines_and_offers_the_model_that_fits_this_board(config: Config, minilm: LocalEmbedder) -> None:
    async def main() -> None:
        async with FakeCloud("openai") as fake:
            model = ScriptedModel()
            routed = Routed(config, model, fake, understanding=minilm)  # type: ignore[arg-type]
            config.routing.mode = "local_only"
            routed.cloud.routing.mode = "local_only"
            routed.agent.declines = DeclineDesk(lambda: "smollm2-135m", bigger=lambda running: QWEN)
            try:
                record, events = await routed.ask(HARD)
                assert record.text == (
                    "I can't answer that reliably: it needs a stronger model than the small one on this Pi, and the "
                    "cloud is switched off here (routing.mode: local_only). I would rather say so than guess."
                )
                assert record.choices == ["use qwen2.5-1.5b (1.1 GB)"]  # no cloud button: the owner turned it off
                assert record.why == "looks_hard" and record.blocked == "local_only" and record.route == "local"
                assert model.history == [] and record.timings.rounds == 0  # no model was asked
                # no model text to take back: the decline itself, once, as a reply no model wrote is streamed
                assert "".join(d["delta"] for k, d in events if k == "text") == record.text
                assert footer(record, detailed=True).startswith(
                    "[answered without the model · this looks like a question for a stronger model (0."
                )
                how, _ = await routed.ask("use qwen2.5-1.5b (1.1 GB)")  # the button, tapped
                assert how.route == "intent" and "picoagent models pull qwen2.5-1.5b" in how.text
                assert "picoagent models use qwen2.5-1.5b" in how.text and "1230 MB" in how.text
                model.enqueue("Good evening! It was quiet here.")
                easy, _ = await routed.ask(EASY)  # an easy one is answered as ever
                assert easy.text == "Good evening! It was quiet here." and easy.route == "local"
                assert fake.requests == []
            finally:
                await routed.close()

    asyncio.run(main())


def test_a_private_chat_offers_the_cloud_for_this_question_once(config: Config, minilm: LocalEmbedder) -> None:
    async def main() -> None:
        async with FakeCloud("openai") as fake:
            model = ScriptedModel()
            routed = Routed(config, model, fake, understanding=minilm)  # type: ignore[arg-type]
            routed.agent.declines = DeclineDesk(lambda: "qwen2.5-1.5b", bigger=lambda running: None)
            await routed.db.call(routed.db.set_private, "terminal", "default", True)
            try:
                record, _ = await routed.ask(HARD)
                assert "this chat is private (/private on)" in record.text
                assert record.choices == [ASK_CLOUD] and record.route == "local_fallback"
                assert fake.requests == [] and model.history == []
                fake.enqueue("func merge(a, b []int) []int { ... }")
                answered, _ = await routed.ask(ASK_CLOUD)  # the button, tapped
                assert answered.route == "cloud" and answered.text == "func merge(a, b []int) []int { ... }"
                assert fake.requests[0].body["messages"][-1]["content"] == HARD  # the declined question
                again, _ = await routed.ask(ASK_CLOUD)  # the tap counts once; the chat stays private
                assert len(fake.requests) == 1 and again.route != "cloud"
                assert await routed.db.call(routed.db.is_private, "terminal", "default")
            finally:
                await routed.close()

    asyncio.run(main())


def test_a_question_of_fact_is_declined_not_guessed_on_the_packaged_model(config: Config) -> None:
    """The packaged 135M guesses ("The number for your dentist is 12", the Mona Lisa by Michelangelo): with the
    cloud off, a question that no grounded answer took is declined without it, saying /local asks it anyway;
    small talk and requests to make something still reach it, and so does a question sent with /local."""
    from appliance.runtime import Runtime

    packaged = ScriptedModel(name="smollm2-135m")
    runtime = Runtime.open(config, model=packaged)
    runtime.agent.declines = DeclineDesk(lambda: "smollm2-135m", bigger=lambda running: QWEN)
    said = (
        "what's the number for my dentist?",
        "What is the capital of France?",
        "how are you?",
        "could you write a poem about the sea?",
        "tell me a joke",
        "/local What is the capital of France?",
        "/cloud What is the capital of Peru?",  # the cloud may not answer it here: it got the small model's guess
        "please ring my daughter and tell her I'll be late",  # it offered to help with her homework
    )

    async def main() -> list[ReplyRecord]:
        replies = []
        for text in said:
            packaged.enqueue("A model's answer.")
            replies.append(await runtime.agent.turn(text, channel="api", chat_id="guess"))
        return replies

    try:
        dentist, france, hello, poem, joke, asked_local, asked_cloud, ring = asyncio.run(main())
    finally:
        runtime.close()
    for declined in (dentist, france, asked_cloud):
        assert declined.text.startswith("I can't answer that reliably: it needs a stronger model than the small one")
        assert declined.text.endswith("I would rather say so than guess (/local asks the small model anyway).")
        assert declined.choices == ["use qwen2.5-1.5b (1.1 GB)"] and declined.blocked == "local_only"
    for declined in (dentist, france):
        assert declined.reason.startswith("smollm2-135m guesses at questions of fact, and routing.mode is local_only")
    # a request for the cloud that cannot be met stays a fallback quoting how it was asked (README: routing)
    assert (asked_cloud.route, asked_cloud.why) == ("local_fallback", "user_cloud")
    said_why = "you asked for the cloud (/cloud), but routing.mode is local_only, and smollm2-135m guesses"
    assert asked_cloud.reason.startswith(said_why)
    # a request to act that no device or schedule took: said plainly that nothing here does it
    assert ring.text == (
        "I'm not able to do that here: no device or schedule of mine does it, and the small model on this Pi would "
        "only pretend to do it (/local asks the small model anyway)."
    )
    assert ring.route == "local" and "ring my daughter" not in [r.messages[-1].content for r in packaged.history]
    for answered in (hello, poem, joke, asked_local):
        assert (answered.text, answered.route) == ("A model's answer.", "local")
    asked = [r.messages[-1].content for r in packaged.history if not r.messages[-1].content.startswith("user: ")]
    # never the dentist nor France, until it was asked with /local (the rest is memory extraction)
    assert asked == ["how are you?", "could you write a poem about the sea?", "tell me a joke", said[1]]
    # the declines and their questions are kept out of what the model reads next: it had copied a decline
    [local_turn] = [r for r in packaged.history if r.messages[-1].content == said[5].removeprefix("/local ")]
    prompt = "\n".join(m.content for m in local_turn.messages)
    assert "I can't answer that reliably" not in prompt and "dentist" not in prompt and "how are you?" in prompt


def test_who_guesses_is_the_catalogs_word_and_only_without_a_cloud_or_a_local_on_purpose() -> None:
    from appliance.agent.decline import guesses

    off = RoutingContext(mode="local_only", provider=None)
    assert asyncio.run(guesses("which light did I leave on?", off, "smollm2-135m"))
    assert asyncio.run(guesses("who painted the mona lisa?", off, "smollm2-135m"))
    assert not asyncio.run(guesses("which light did I leave on?", off, "qwen2.5-1.5b"))  # it answers
    assert not asyncio.run(guesses("which light did I leave on?", off, "my-own.gguf"))  # unknown: trusted
    assert not asyncio.run(guesses("how are you today?", off, "smollm2-135m"))  # small talk
    assert not asyncio.run(guesses("can you write me a limerick?", off, "smollm2-135m"))  # a request to make
    assert not asyncio.run(guesses("I wrote the wifi password on the fridge", off, "smollm2-135m"))  # no question
    # a question said inside a sentence is one; a request to act is guessed at too (it would pretend)
    assert asyncio.run(guesses("my son wants to know how many legs spiders have", off, "smollm2-135m"))
    assert asyncio.run(guesses("if i save 45 pounds a week how much is that after a year", off, "smollm2-135m"))
    assert asyncio.run(guesses("could you send an email to my boss", off, "smollm2-135m"))
    assert asyncio.run(guesses("vacuum the living room", off, "smollm2-135m"))
    # a question after a preposition or a filler, and a sum written out, are questions too (the tenth set)
    assert asyncio.run(guesses("at what time does the shop open", off, "smollm2-135m"))
    assert asyncio.run(guesses("roughly when was the fan put on today, whenever it was", off, "smollm2-135m"))
    assert asyncio.run(guesses("quick maths: 1234 + 5678 and then some", off, "smollm2-135m"))
    assert not asyncio.run(guesses("on my way home", off, "smollm2-135m"))
    assert not asyncio.run(guesses("I love how much you help", off, "smollm2-135m"))
    assert not asyncio.run(guesses("tell me what you think", off, "smollm2-135m"))  # small talk
    assert not asyncio.run(guesses("thanks a lot!", off, "smollm2-135m"))
    asked_local = RoutingContext(mode="local_only", provider=None, forced="local")
    assert not asyncio.run(guesses("which light did I leave on?", asked_local, "smollm2-135m"))


def test_a_decline_is_shown_by_the_terminal_which_shows_only_what_is_streamed(config: Config) -> None:
    """`chat -m` prints the streamed text: a decline, which no model streams, printed nothing before."""
    import io

    from appliance.channels.terminal import TerminalChat
    from appliance.runtime import Runtime

    runtime = Runtime.open(config, model=ScriptedModel(name="smollm2-135m"))
    out = io.StringIO()
    try:
        record = asyncio.run(TerminalChat(runtime, out=out).ask("what's the number for my dentist?"))
    finally:
        runtime.close()
    assert record.text.startswith("I can't answer that reliably") and out.getvalue() == record.text


def test_a_budget_of_0_says_the_cloud_is_off_by_budget_and_a_spent_one_says_it_is_used_up(
    config: Config, tmp_path: Path
) -> None:
    """The config's comment: "0 turns the cloud off"; the reasons and the decline say that, not "used up"."""
    config.providers["fake"] = ProviderConfig(type="openai", api_base="http://127.0.0.1:9/v1", model="m")
    config.routing.mode, config.routing.cloud_provider = "edge_first", "fake"
    config.routing.daily_budget_usd = 0
    db = Database(tmp_path / "picoagent.db")
    route = CloudRoute(config, db)
    desk = DeclineDesk(lambda: "smollm2-135m", bigger=lambda _: None)
    try:
        ctx = route.context_sync("terminal", "default", None)
        assert ctx.cloud_blocked() == ("budget", "the cloud is off by budget (routing.daily_budget_usd: 0)")
        decision = after_local(ctx, LocalOutcome(mean_prob=0.1), 0.55)
        off = ", but the cloud is off by budget (routing.daily_budget_usd: 0): answered locally"
        assert decision.reason.endswith(off), decision.reason
        declined = desk.decline(HARD, "terminal:default", replace(ctx, difficulty=Difficulty(0.9, 0.65)), 0.0)
        assert "the cloud is switched off here (routing.daily_budget_usd: 0)" in declined.text
        assert "used up" not in declined.text + declined.reason
        config.routing.daily_budget_usd = 0.001  # a budget, spent
        db.add_usage("cloud", "m", 100, 10, provider="fake", cost_usd=0.002)
        ctx = route.context_sync("terminal", "default", None)
        assert ctx.cloud_blocked() == ("budget", "the cloud budget is used up")
        declined = desk.decline(HARD, "terminal:default", replace(ctx, difficulty=Difficulty(0.9, 0.65)), 0.0)
        assert "the cloud budget is used up" in declined.text
    finally:
        db.close()


@pytest.mark.parametrize(("name", "kept"), [("smollm2-135m", False), ("my-own.gguf", True)])
def test_a_model_that_copies_reads_no_exchange_answered_without_it(config: Config, name: str, kept: bool) -> None:
    """A walk: after chat jobs, the 135M answered "ok thanks" with "Cancelled write_file tool (...)" and "yes" with
    "the 7:30 fan is indeed cancelled": it copied the schedule desk's replies from its history, for actions nobody
    took. A model that guesses (answers: false) reads no exchange the appliance answered without a model."""
    from appliance.runtime import Runtime

    model = ScriptedModel(name=name)
    runtime = Runtime.open(config, model=model)

    async def main() -> str:
        done = await runtime.agent.turn("turn on the fan", channel="api", chat_id="copy")
        assert done.route == "intent" and model.history == []
        model.enqueue("Sounds tiring.")
        await runtime.agent.turn("I had a long day at work", channel="api", chat_id="copy")
        [asked] = [r for r in model.history if r.messages[-1].content == "I had a long day at work"]
        return "\n".join(m.content for m in asked.messages)

    try:
        prompt = asyncio.run(main())
    finally:
        runtime.close()
    assert ("turn on the fan" in prompt) is kept and ("fan" in prompt.split("I had a long day")[0].lower()) is kept


@pytest.mark.parametrize(
    ("message", "acting", "making"),
    [
        ("make me a coffee pls", True, False),  # the thirteenth blind set: the model pretended to brew it
        ("could you bring me a glass of water", True, False),
        ("make me a poem about cats", False, True),  # fiction by request: the model may write it
        ("make up a story about a dragon", False, True),
        ("make me laugh", False, False),  # neither: small talk the model may answer
    ],
)
def test_a_request_to_act_and_a_request_to_make_something(message: str, acting: bool, making: bool) -> None:
    from appliance.agent.decline import acts, makes

    assert (acts(message), makes(message)) == (acting, making)


@pytest.mark.parametrize(
    ("typed", "taken"),
    [
        ("use qwen2.5-1.5b (1.1 GB)", True),  # the button
        ('"use qwen2.5-1.5b (1.1 GB)".', True),  # as a channel without buttons quotes it: 'Reply "..."'
        ("Use qwen2.5-1.5b", True),  # without its size
        ("use qwen", False),
        ("use qwen2.5-1.5b please", False),
    ],
)
def test_the_model_button_is_taken_as_typed_on_a_channel_without_buttons(typed: str, taken: bool) -> None:
    desk = DeclineDesk(lambda: "smollm2-135m", bigger=lambda running: QWEN)
    record = desk.decline(HARD, "s", RoutingContext(mode="local_only", provider=None), time.perf_counter())
    assert record.choices == ["use qwen2.5-1.5b (1.1 GB)"]
    answer = desk.picked(typed, "s", time.perf_counter())
    assert (isinstance(answer, ReplyRecord) and "picoagent models pull qwen2.5-1.5b" in answer.text) is taken


def test_in_edge_first_a_question_the_packaged_model_would_guess_at_goes_to_the_cloud(config: Config) -> None:
    """Walk 10: with the cloud allowed, "What is the capital of France?" looked easy (0.48), stayed on the 135M
    model and got "Le Grand Paris, le Grand-Bien-Souffrac." marked confident. A question of fact on a model that
    guesses now goes to the cloud first; when the cloud then fails it is declined, as with the cloud off; small
    talk and /local still reach the Pi's model."""

    async def main() -> None:
        async with FakeCloud("openai") as fake:
            packaged = ScriptedModel(name="smollm2-135m")
            routed = Routed(config, packaged, fake)  # type: ignore[arg-type]
            routed.agent.declines = DeclineDesk(lambda: "smollm2-135m", bigger=lambda running: None)
            try:
                fake.enqueue("Paris.")
                france, _ = await routed.ask("What is the capital of France?")
                assert (france.text, france.route, france.why) == ("Paris.", "cloud", "guesses")
                assert france.reason == "smollm2-135m guesses at questions of fact"
                fake.fail_next("500", 5)
                peru, _ = await routed.ask("What is the capital of Peru?")
                assert peru.text.startswith("I can't answer that reliably") and peru.blocked == "cloud_failed"
                assert "could not be reached just now" in peru.text, peru.text
                assert [r.messages[-1].content for r in packaged.history] == []  # never guessed
                packaged.enqueue("I'm well, thanks!")
                hello, _ = await routed.ask("how are you?")
                assert (hello.text, hello.route) == ("I'm well, thanks!", "local")
            finally:
                await routed.close()

    asyncio.run(main())
