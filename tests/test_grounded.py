"""Grounded answers of the appliance itself, its conversation, memory, schedules and the unknowable.

Each topic's words rule is tried on a table of phrasings that must take it and ones that must not (they
belong to another topic, to the devices, or to the model); the answers come from a real Runtime (its
database, memory store and devices), a real Scheduler and TaskStore, through the real agent turn, and
are read as a person reads them. The model is scripted and must not be called for any of them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from appliance.config import Config, CronJob, DeviceConfig
from appliance.grounded.about import ABILITIES, SELF
from appliance.grounded.agenda import AGENDA
from appliance.grounded.base import examples
from appliance.grounded.conversation import CONVERSATION
from appliance.grounded.house import HOUSE
from appliance.grounded.remembered import REMEMBERED
from appliance.grounded.turn import topics
from appliance.grounded.unknowable import UNKNOWABLE
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime

TAKES: list[tuple[str, str, str]] = [  # (message, topic kind, its sub-question)
    ("who are you?", "self", "who"),
    ("Who are you", "self", "who"),
    ("what's your name?", "self", "who"),
    ("what is your name", "self", "who"),
    ("tell me about yourself", "self", "who"),
    ("are you a robot?", "self", "who"),
    ("which model do you use?", "self", "model"),
    ("what version are you?", "self", "version"),
    ("what can you do for me?", "abilities", "all"),
    ("what can you do", "abilities", "all"),
    ("how can you help?", "abilities", "all"),
    ("which devices do you control?", "abilities", "devices"),
    ("what devices are connected?", "abilities", "devices"),
    ("list the devices", "abilities", "devices"),
    ("what did I ask you earlier?", "conversation", "mine"),
    ("what did I just ask?", "conversation", "mine"),
    ("what was my last question?", "conversation", "mine"),
    ("what have I asked so far?", "conversation", "all_mine"),
    ("what did we talk about?", "conversation", "all_mine"),
    ("what did you just say?", "conversation", "yours"),
    ("repeat that please", "conversation", "yours"),
    ("can you say that again?", "conversation", "yours"),
    ("what did you say about the fan?", "conversation", "yours_about"),
    ("what did I tell you about the boiler?", "conversation", "mine_about"),
    ("what reminders do I have?", "schedules", "jobs"),
    ("do I have any reminders?", "schedules", "jobs"),
    ("list my reminders", "schedules", "jobs"),
    ("what's on tomorrow?", "schedules", "jobs"),
    ("what is scheduled for today?", "schedules", "jobs"),
    ("what's on my schedule this week?", "schedules", "jobs"),
    ("when is my next reminder?", "schedules", "next"),
    ("what are you working on?", "schedules", "tasks"),
    ("what tasks are running?", "schedules", "tasks"),
    ("what's my name?", "memory", "name"),
    ("who am I?", "memory", "name"),
    ("where did I write the wifi password?", "memory", "fact"),
    ("where did I put the spare key?", "memory", "fact"),
    ("what's my wifi password?", "memory", "fact"),
    ("when is my mother's birthday?", "memory", "fact"),
    ("do you remember my bike lock code?", "memory", "fact"),
    ("what do you know about my dentist?", "memory", "fact"),
    ("who will win the next election?", "unknowable", "future"),
    ("what are the winning lottery numbers?", "unknowable", "future"),
    ("will bitcoin go up tomorrow?", "unknowable", "future"),
    ("what's the news today?", "unknowable", "news"),
    ("Are you ChatGPT?", "self", "who"),
    ("Do you run on the internet or here at home?", "self", "where"),
    ("Which software version is installed?", "self", "version"),
    ("What is in the living room?", "house", "room"),
    ("Is there anything in the garden you can check?", "house", "room"),
    ("Which rooms do you know about?", "house", "rooms"),
    ("Are you connected to Telegram?", "abilities", "channel"),
    ("Do my questions leave the house?", "abilities", "cloud"),
    ("Do you have a calculator?", "abilities", "tool"),
    ("What's the name of your language model?", "self", "model"),
    ("Can you repeat what you just said?", "conversation", "yours"),
    ("When is the bins reminder?", "schedules", "about"),
    ("When do I water the plants?", "schedules", "about"),
    ("When will the fan be switched off?", "schedules", "about"),
    ("which day of the week am I meant to water the plants", "schedules", "about"),  # Saturdays alone passed it
    ("What did I ask you to remind me about?", "schedules", "jobs"),
    ("How old am I?", "memory", "fact"),
    ("How long since you started?", "health", "uptime"),
    ("Will my train be late tomorrow?", "unknowable", "future"),
    ("Which number between 1 and 100 am I thinking of?", "unknowable", "future"),
    ("What did I dream about last night?", "unknowable", "future"),
    ("What's the temperature in the garden?", "house", "reading"),
    ("Can you use the cloud?", "abilities", "cloud"),
    ("What tools do you have?", "abilities", "tools"),
    ("Which chat apps can I use to talk to you?", "abilities", "channels"),
    ("What can you control in the house?", "abilities", "devices"),
    ("What was the first thing I asked today?", "conversation", "first"),
    ("How many questions have I asked you?", "conversation", "count"),
    ("what did you answer to my question about Peru?", "conversation", "yours_about"),
    ("Remind me what I asked a moment ago.", "conversation", "mine"),
    ("What's my next reminder?", "schedules", "next"),
    ("What's scheduled for the fan?", "schedules", "about"),
    ("Have I got a reminder to water the plants?", "schedules", "about"),
    ("which day am I meant to water the plants?", "schedules", "about"),
    ("how often do I get the water-the-plants reminder?", "schedules", "about"),
    ("What did I say my sister's name was?", "memory", "fact"),
    ("Where's the spare key?", "recall", "lookup"),
    ("Will I get the job I applied for?", "unknowable", "future"),
    ("Who will knock on my door tomorrow?", "unknowable", "future"),
]

NOBODY = [  # these go to a device, another topic of someone else's, or the model
    "what are you doing tonight?",
    "who are you going to vote for?",
    "what is the capital of France?",
    "tell me a joke",
    "turn on the fan",
    "what time does the bakery close?",
    "is the fan on?",
    "remind me at 7 to take the bins out",
    "what did the doorbell do today?",
    "what can I cook with eggs?",
    "what is my schedule like in general, any advice?",
    "my name is Sam",
    "I wrote the wifi password on the fridge",
    "what happened in 1969?",
    "who won the world cup in 2018?",
    "what's my cpu temperature?",
    "what's my ip address?",
    "repeat after me: hello",
    "can you remember to buy milk?",
    "what is love?",
    "Do you know what time it is?",
    "what will you do tomorrow?",
    "do you have a dog?",
]


@pytest.mark.parametrize(("message", "kind", "what"), TAKES)
def test_a_topic_takes_what_it_can_answer(message: str, kind: str, what: str) -> None:
    taken = [(ask.kind, ask.what) for topic in topics() if (ask := topic.match(message)) is not None]
    assert taken[:1] == [(kind, what)], taken


def test_every_topic_has_its_phrasings_in_examples_yaml_and_no_other_kind_is_there() -> None:
    """A kind misspelt in examples.yaml, or a topic renamed, would lose its phrasings by meaning silently."""
    assert set(examples()) == {topic.kind for topic in topics()}
    by_words_only = {"recall", "courtesy"}
    assert [t.kind for t in topics() if (len(t.examples) >= 4) == (t.kind in by_words_only)] == []


@pytest.mark.parametrize("message", NOBODY)
def test_no_topic_takes_what_is_not_its_own(message: str, config: Config) -> None:
    mine = (
        SELF,
        ABILITIES,
        HOUSE,
        CONVERSATION,
        AGENDA,
        REMEMBERED,
        UNKNOWABLE,
    )  # LOOKUP takes any question: see below
    asks = [ask for topic in mine if (ask := topic.match(message)) is not None]
    # "is the fan on?": the house reads the state of a thing only to say it has no such thing; a device's
    # state it leaves to the device path (the answer is None with the checkout's devices)
    passing = (("house", "state"), ("house", "command"), ("abilities", "able"))
    passed_on = [a for a in asks if (a.kind, a.what) in passing]
    assert [a.kind for a in asks if a not in passed_on] == []
    if passed_on:
        runtime = Runtime.open(config, model=ScriptedModel())
        try:
            facts = runtime.agent.grounding.facts("api:t", None, person=True, cloud_allowed=False)
            kinds = {"house": HOUSE, "abilities": ABILITIES}
            assert [asyncio.run(kinds[a.kind].answer(a, facts)) for a in passed_on] == [None] * len(passed_on)
        finally:
            runtime.close()


NOW = dt.datetime(2026, 11, 27, 16, 30, tzinfo=dt.UTC)


@pytest.fixture
def pi(config: Config) -> Iterator[tuple[Runtime, ScriptedModel]]:
    """A Runtime with the checkout's devices and a heater, a real Scheduler (a reminder tomorrow), a TaskStore, and
    the soul renamed."""
    from appliance.schedule.scheduler import Scheduler
    from appliance.tasks import TaskStore

    config.devices["heater"] = DeviceConfig(driver="relay", pin=5, room="living_room")
    model = ScriptedModel()
    cron: Scheduler | None = None  # made below on the runtime's database; the agent reads them late, as serve's
    tasks: TaskStore | None = None
    runtime = Runtime.open(config, model=model, cron=lambda: cron, tasks=lambda: tasks)
    soul = runtime.agent.workspace.root / "SOUL.md"
    soul.write_text(soul.read_text().replace("You are Pico,", "You are Juniper,"))

    async def run_job(job: Any) -> str:
        return "ran"

    jobs = [
        CronJob(id="bins", schedule="once 2026-11-28 19:00", message="take the bins out"),
        CronJob(id="plants", schedule="daily 07:00", message="water the plants"),
        CronJob(id="fan_day", schedule="daily 15:00", device="fan", value="off"),  # today's run is over at NOW
    ]
    cron = Scheduler(jobs, tz="UTC", run_job=run_job, notify=None, db=runtime.db, clock=NOW.timestamp)
    tasks = TaskStore(runtime.db)
    runtime.agent.grounding.zone = dt.UTC
    yield runtime, model
    runtime.close()


def ask(runtime: Runtime, *messages: str) -> list[str]:
    """Each message through the real turn, in one chat; the replies' texts (each must need no model)."""

    async def main() -> list[str]:
        replies = []
        for message in messages:
            record = await runtime.agent.turn(message, channel="api", chat_id="grounded")
            assert record.route == "intent" and record.why == "grounded", (message, record.route, record.text)
            assert record.reason.startswith("grounded: ") and record.reason.endswith(", no model")
            replies.append(record.text)
        return replies

    return asyncio.run(main())


def test_it_says_who_it_is_by_the_name_in_its_soul_and_its_real_model(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, model = pi
    (who, which) = ask(runtime, "Who are you?", "which model do you run?")
    assert who.startswith("I'm Juniper, a private assistant running on this Raspberry Pi")
    assert "scripted" in who and "never the cloud" in who
    assert which == "I run scripted here on the Pi, and never the cloud."
    assert model.history == []


def test_what_it_can_do_is_the_running_config(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, model = pi
    (devices, everything) = ask(runtime, "which devices do you control?", "what can you do for me?")
    assert devices.startswith("I have 6 devices: garden: soil (sensor); hallway: doorbell (input); living room: ")
    assert "porch: porch light (switch)." in devices and "fan (switch)" in devices and "heater (switch)" in devices
    assert devices.count("living room:") == 1  # "living_room" and "living room" are one room
    assert "smartphone" not in devices.lower()
    assert everything.startswith(devices) and "the cloud is not allowed" in everything
    assert model.history == []


def test_the_conversation_is_quoted_as_it_was(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, model = pi
    (first,) = ask(runtime, "what did I ask you earlier?")
    assert first == "You haven't asked me anything before this in this chat."
    model.enqueue("Blue, mostly.")
    asyncio.run(runtime.agent.turn("what colour is the sky?", channel="api", chat_id="grounded"))
    (mine, yours, about) = ask(
        runtime, "what did I just ask?", "what did you just say?", "what did you say about the boiler?"
    )
    assert mine.startswith("You asked at ") and mine.endswith("“what colour is the sky?”")
    assert yours.startswith("I said at ") and yours.endswith(f"“{mine}”")  # the last thing said: the answer before
    assert about == "In this chat I said nothing about boiler (the last 40 messages)."


def test_a_stored_fact_is_quoted_with_its_date_and_a_missing_one_is_declined(
    pi: tuple[Runtime, ScriptedModel],
) -> None:
    runtime, model = pi
    assert runtime.agent.memory is not None
    runtime.agent.memory.store.add("The wifi password is written on the back of the router.", source="test")
    runtime.agent.memory.store.add("The spare key is under the blue flower pot.", source="test")
    (wifi, name, car) = ask(
        runtime, "where did I write the wifi password?", "what's my name?", "what is my car's number plate?"
    )
    today = dt.datetime.now(dt.UTC)
    stored = "“The wifi password is written on the back of the router.”"
    assert wifi == f"You told me on {today:%a} {today.day} {today:%b %Y}: {stored}"
    assert name == "You haven't told me your name: I have nothing about it in my memory."
    assert car == "You haven't told me your car's number plate: I have nothing about it in my memory."
    assert model.history == []


def test_a_memory_answers_the_kind_of_thing_asked_for_and_nothing_merely_near_it(
    pi: tuple[Runtime, ScriptedModel],
) -> None:
    """Who, how many, what size: half the words, a memory holding a name or a number, close to the whole question."""
    runtime, _model = pi
    store = runtime.agent.memory.store  # type: ignore[union-attr]
    for fact in (
        "Biscuit the dog gets 150 grams of food twice a day.",
        "The boiler was last serviced in March by Mark Peters.",
        "Ella's school shoes are size 34.",
    ):
        store.add(fact, source="test")
    (who, grams, size) = ask(
        runtime,
        "who was the guy that did the boiler last time",
        "how many grams does biscuit get at each meal?",
        "ella needs new school shoes, what size is she now?",
    )
    assert who.endswith("“The boiler was last serviced in March by Mark Peters.”")
    assert grams.endswith("“Biscuit the dog gets 150 grams of food twice a day.”")
    assert size.endswith("“Ella's school shoes are size 34.”")
    general = (
        "how many legs does a dog have?",  # "dog" is in Biscuit's memory, at 0.37
        "how much food should a dog eat?",  # "food" and "dog", at 0.60
        "how many calories in a biscuit?",
        "who invented the boiler?",  # no name of an inventor in the boiler's memory, and 0.56
        "how much does a boiler service cost?",  # every word but one, and no number: it quoted the boiler's
    )
    for question in general:
        record = asyncio.run(runtime.agent.turn(question, channel="api", chat_id="grounded"))
        assert record.why != "grounded" and "You told me" not in record.text, (question, record.text)


def test_schedules_and_tasks_are_read_from_the_scheduler_and_the_store(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, model = pi
    assert runtime.agent.grounding.tasks is not None
    runtime.agent.grounding.tasks.add("tidy the notes")
    runtime.agent.grounding.clock = NOW.timestamp  # the scheduler's now: "tomorrow" is the 28th at any hour of the run
    asked = ("what reminders do I have?", "what's on tomorrow?", "what is scheduled for today?", "what are you doing?")
    (listed, tomorrow, nothing_today, tasks) = ask(runtime, *asked)
    assert "take the bins out tomorrow at 19:00 (Sat 28 Nov)" in listed
    assert "water the plants tomorrow at 07:00 (Sat 28 Nov), every day at 07:00" in listed
    assert tomorrow.startswith("Scheduled tomorrow: ") and "bins" in tomorrow and "plants" in tomorrow
    assert nothing_today == "Nothing is scheduled today."
    assert tasks == "1 open task: #1 tidy the notes (pending, step 0 of 8)."
    assert model.history == []


def test_a_job_that_has_run_for_the_day_is_said_with_its_next_run_not_as_no_job(
    pi: tuple[Runtime, ScriptedModel],
) -> None:
    """CI asked "will the fan switch off on its own tonight" at 23:30, after its 23:00 run: "No reminder or schedule
    names the fan" was wrong, a job does; when it runs next is the answer."""
    runtime, _ = pi
    runtime.agent.grounding.clock = NOW.timestamp
    tonight, tomorrow = ask(runtime, "will the fan switch off on its own tonight?", "does the fan turn off tomorrow?")
    assert tonight == (
        "Nothing for “fan” runs for the rest of tonight: next, set fan off tomorrow at 15:00 (Sat 28 Nov),"
        " every day at 15:00."
    )
    assert tomorrow.startswith("Scheduled tomorrow: set fan off tomorrow at 15:00"), tomorrow


def test_the_future_is_declined_in_one_sentence(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, model = pi
    (election,) = ask(runtime, "who will win the next election?")
    assert election == "I can't know that: nobody can tell the future, and I won't make up an answer."
    assert model.history == []


def test_what_is_not_grounded_still_reaches_the_model(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, model = pi
    model.enqueue("Paris.")
    record = asyncio.run(runtime.agent.turn("what is the capital of France?", channel="api", chat_id="grounded"))
    assert record.route == "local" and record.text == "Paris." and len(model.history) == 1


def test_what_was_said_in_this_chat_counts_before_it_becomes_a_memory(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, model = pi
    model.enqueue("Nice to meet you, Zed.")
    asyncio.run(runtime.agent.turn("My name is Zed.", channel="api", chat_id="grounded"))
    model.enqueue("Noted.")
    asyncio.run(runtime.agent.turn("The garage code is 4711.", channel="api", chat_id="grounded"))
    (name, code) = ask(runtime, "what's my name?", "do you remember the garage code?")
    assert name.startswith("You told me in this chat at ") and name.endswith(": “My name is Zed.”")
    assert code.endswith(": “The garage code is 4711.”")
    assert len(model.history) == 2  # the two statements; neither question


PARAPHRASES = [  # not in any words rule; MiniLM finds the topic (each measured well above the threshold)
    ("tell me what you're able to do", "abilities"),
    ("say again what you told me", "conversation"),
]
NOT_BY_MEANING = [  # near a topic's examples in meaning, but not its to answer
    "I wrote the wifi password on the fridge",
    "my name is Sam",
    "what's on TV tonight?",
    "who won the world cup in 2018?",
    "who are you going to vote for?",
    "what time does the bakery close?",
    "how many devices can wifi handle?",
    "what are you doing tonight?",
]


def test_paraphrases_are_found_by_meaning_and_near_misses_are_not(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, _ = pi
    desk = runtime.agent.grounding.desk
    assert desk.embedder is not None, "needs MiniLM"

    async def main() -> None:
        for message, kind in PARAPHRASES:
            assert desk.by_words(message) == [], message
            found = await desk.by_meaning(message)
            assert found is not None and found.kind == kind, (message, found)
        for message in NOT_BY_MEANING:
            assert await desk.by_meaning(message) is None, message

    asyncio.run(main())


def test_memories_and_schedules_are_not_told_to_a_sender_who_is_not_a_person(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, model = pi
    assert runtime.agent.memory is not None
    runtime.agent.memory.store.add("The wifi password is written on the back of the router.", source="test")

    async def main() -> list[str]:
        asked = ("where did I write the wifi password?", "what reminders do I have?")
        return [(await runtime.agent.turn(q, channel="webhook", chat_id="ha", person=False)).text for q in asked]

    (wifi, reminders) = asyncio.run(main())
    assert wifi == "I share what I remember only with the people I know."
    assert reminders == "I share the schedules and tasks only with the people I know."
    assert model.history == []


def test_a_question_a_memory_answers_word_for_word_is_quoted_and_others_go_to_the_model(
    pi: tuple[Runtime, ScriptedModel],
) -> None:
    runtime, model = pi
    assert runtime.agent.memory is not None
    runtime.agent.memory.store.add("Ella's school shoes are size 34.", source="test")
    runtime.agent.memory.store.add("The boiler was last serviced in March by Mark Peters.", source="test")
    (shoes, boiler) = ask(runtime, "What size shoes does Ella take?", "Who serviced the boiler?")
    assert shoes.endswith("“Ella's school shoes are size 34.”") and boiler.endswith("by Mark Peters.”")
    model.enqueue("Lima.")
    record = asyncio.run(runtime.agent.turn("What is the capital of Peru?", channel="api", chat_id="grounded"))
    assert record.route == "local" and len(model.history) == 1  # no memory holds "capital" and "peru"


def test_what_is_in_a_room_is_its_devices_and_an_unknown_room_is_the_models(pi: tuple[Runtime, ScriptedModel]) -> None:
    runtime, model = pi
    (living,) = ask(runtime, "What is in the living room?")
    assert living == "In the living room: fan (switch), heater (switch), living room (sensor)."
    model.enqueue("A bed, probably.")
    record = asyncio.run(runtime.agent.turn("what is in the attic?", channel="api", chat_id="grounded"))
    assert record.route == "local"  # no room of that name: not the appliance's to say


def test_a_reading_no_device_in_that_room_can_give_is_declined_and_one_it_can_is_read(
    pi: tuple[Runtime, ScriptedModel],
) -> None:
    runtime, model = pi
    (garden, kitchen, rooms) = ask(
        runtime,
        "What's the temperature in the garden?",
        "what's the humidity in the kitchen?",
        "Which rooms do you know?",
    )
    assert (
        garden == "I can't tell the temperature in the garden: nothing there measures it (there I have soil (sensor))."
    )
    assert kitchen.startswith("I can't tell the humidity in the kitchen: I have no devices there (I know: garden, ")
    assert rooms == "I know 4 rooms: garden, hallway, living room, porch."

    async def living() -> Any:
        return await runtime.agent.turn("what's the temperature in the living room?", channel="api", chat_id="g")

    record = asyncio.run(living())
    assert record.route == "intent" and record.why != "grounded" and "living_room: temperature" in record.text
    assert model.history == []


def test_a_switch_or_a_button_read_by_the_device_path_is_said_as_a_person_would(
    pi: tuple[Runtime, ScriptedModel],
) -> None:
    runtime, model = pi

    async def main() -> list[str]:
        asked = ("is the fan on?", "is the doorbell being pressed?")
        return [(await runtime.agent.turn(q, channel="api", chat_id="d")).text for q in asked]

    assert asyncio.run(main()) == ["The fan is off.", "The doorbell is not pressed."]
    assert model.history == []


def test_what_it_can_do_names_the_chat_channels_that_are_on(config: Config) -> None:
    from appliance.grounded.base import Facts

    ask_all = ABILITIES.match("what can you do?")
    assert ask_all is not None
    facts = Facts(config=config, now=lambda: NOW, channels=("telegram", "email"))
    answer = asyncio.run(ABILITIES.answer(ask_all, facts))
    assert (
        answer is not None
        and "You can reach me through the web page and the terminal, Telegram, e-mail." in answer.text
    )
    facts.channels = ()
    answer = asyncio.run(ABILITIES.answer(ask_all, facts))
    assert answer is not None and "You can reach me through the web page and the terminal." in answer.text
    # the webhook bridges and the MQTT notify topic answer too (walk 8: they were left out)
    from appliance.config.channels import WebhookConfig

    config.webhooks = {"home_assistant": WebhookConfig(secret="s")}
    config.mqtt.enabled = True
    answer = asyncio.run(ABILITIES.answer(ask_all, facts))
    assert answer is not None and (
        "You can reach me through the web page and the terminal, the webhook bridge home_assistant, "
        "MQTT (picoagent/notify)." in answer.text
    ), answer.text


def test_what_it_can_do_lists_the_task_tools_only_where_a_task_can_be_worked(config: Config) -> None:
    """Walk 8: "what can you do?" listed task_create on the packaged model with the cloud off, where every task is
    refused."""
    from appliance.grounded.base import Facts

    ask_all = ABILITIES.match("what can you do?")
    assert ask_all is not None
    tools = ("calculator", "task_create", "task_status")
    for model, cloud, listed in [
        ("smollm2-135m", False, "calculator"),  # cannot plan, and no cloud: no task tools
        ("smollm2-135m", True, "calculator, task_create, task_status"),  # the cloud works tasks
        ("qwen2.5-1.5b", False, "calculator, task_create, task_status"),  # a model that plans
    ]:
        facts = Facts(config=config, now=lambda: NOW, tools=tools, model_name=model, cloud_allowed=cloud)
        answer = asyncio.run(ABILITIES.answer(ask_all, facts))
        assert answer is not None and f"Tools the model may use: {listed}." in answer.text, (model, answer.text)


@pytest.mark.parametrize(
    ("fields", "on", "off"),
    [
        ({"driver": "mqtt", "kind": "binary_sensor", "quantity": "motion"}, "detects motion.", "detects no motion"),
        ({"driver": "mqtt", "kind": "binary_sensor", "quantity": "door"}, "is open.", "is closed."),
        ({"driver": "motion", "pin": 17}, "detects motion.", "detects no motion"),
        ({"driver": "button", "pin": 27}, "is pressed.", "is not pressed."),
        ({"driver": "mqtt", "kind": "binary_sensor", "quantity": "smoke"}, "is on.", "is off."),
    ],
)
def test_an_input_is_said_in_its_own_words_not_pressed_for_a_motion_sensor(
    fields: dict[str, Any], on: str, off: str
) -> None:
    """A README walk: the garage's MQTT motion sensor was "pressed"."""
    from appliance.agent.intents_run import _input_words
    from appliance.config import DeviceConfig

    config = DeviceConfig(**fields)
    assert _input_words("garage", config, True) == f"The garage {on}"
    assert _input_words("garage", config, False).startswith(f"The garage {off}")
