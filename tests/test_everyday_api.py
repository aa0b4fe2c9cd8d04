"""Issue 32's ten everyday questions through POST /api/chat: each right or honestly declined, none by the model.

The packaged model answered every one of them confidently and wrongly ("It's 20:15 in the morning.",
"I'm a little guy named Max", "smartphones and tablets, laptops, gaming consoles"). Here the model is
scripted to give exactly those wrong answers: a question that reached it would show one, so each reply
is checked for what a right answer says and for the wrong answer, and the model must not have run.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import Automation, WebState
from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.helpers import automation_on

WRONG = "It's 20:15 in the morning. I'm a little guy named Max and I control smartphones and tablets."


@pytest.fixture
def site(config: Config) -> Iterator[tuple[WebState, ScriptedModel, str]]:
    config.scheduler.timezone = "Europe/Brussels"
    model = ScriptedModel()
    automation: Automation | None = None  # built on the runtime's database; the agent reads it late, as the daemon's
    runtime = Runtime.open(
        config,
        model=model,
        cron=lambda: automation.cron if automation is not None else None,
        tasks=lambda: automation.tasks if automation is not None else None,
    )

    async def run_job(job: Any) -> str:
        return "ran"

    automation = automation_on(runtime.db, run_job)  # a real Scheduler with the job "water" (daily 07:00) and tasks
    auth = Auth(runtime.db)
    state = WebState(runtime, auth, automation=automation)
    yield state, model, auth.add_token("phone", scope="devices")
    runtime.close()


def test_the_ten_everyday_questions_are_right_or_declined_and_none_reaches_the_model(
    site: tuple[WebState, ScriptedModel, str],
) -> None:
    state, model, token = site
    model.enqueue(*[WRONG] * 20)

    async def main() -> dict[str, dict[str, Any]]:
        answers: dict[str, dict[str, Any]] = {}
        async with TestClient(TestServer(build_app(state))) as client:
            for question in QUESTIONS:
                reply = await client.post(
                    "/api/chat",
                    json={"message": question, "session": "everyday"},
                    headers={"Authorization": f"Bearer {token}"},
                )
                assert reply.status == 200, await reply.text()
                answers[question] = await reply.json()
        return answers

    before = dt.datetime.now(dt.UTC).astimezone(dt.timezone(dt.timedelta(hours=1)))
    answers = asyncio.run(main())
    brussels = [before.astimezone(_BRUSSELS) + dt.timedelta(minutes=m) for m in (0, 1)]
    for question, record in answers.items():
        text = record["text"]
        assert record["route"] == "intent" and record["why"] == "grounded", (question, record["route"], text)
        assert "20:15" not in text and "Max" not in text and "smartphone" not in text, (question, text)
        assert re.search(QUESTIONS[question](brussels), text, re.IGNORECASE), (question, text)
    assert model.history == [], "no question of the ten may reach the model"


_BRUSSELS = __import__("zoneinfo").ZoneInfo("Europe/Brussels")

# question -> (the minute it was asked, and the next) -> a pattern a right or honestly declining reply matches
QUESTIONS: dict[str, Any] = {
    "what time is it?": lambda at: "|".join(f"{t:%H:%M}" for t in at),
    "what day of the week is it?": lambda at: f"{at[0]:%A}",
    "is it going to rain tomorrow?": lambda at: r"no weather source|weather\.",
    "who are you?": lambda at: r"^I'm Pico, a private assistant running on this Raspberry Pi",
    "which devices do you control?": lambda at: r"porch light \(switch\)",
    "what can you do for me?": lambda at: r"porch light \(switch\).*reminders",
    "what did I ask you earlier?": lambda at: r"“what can you do for me\?”",
    "what reminders do I have?": lambda at: r"ask me “water the plants” (?:today|tomorrow|on) ",
    "what is 17 times 23?": lambda at: r"\b391\b",
    "how much memory do you have free?": lambda at: r"\d+(?:\.\d+)? ?(?:MiB|GiB|MB|GB)",
}
