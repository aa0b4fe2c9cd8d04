"""The heartbeat (appliance/schedule/heartbeat.py): HEARTBEAT.md's lines outside comments, asked of the local
model; silent when there is nothing to report or the model fails; cloud lines only through an escalation hook."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from appliance.errors import ModelError
from appliance.llm.scripted import ScriptedModel
from appliance.schedule.heartbeat import HEARTBEAT_SCHEMA, Heartbeat, heartbeat_tasks
from tests.schedule_times import local

# --- the heartbeat -------------------------------------------------------------------------------


class Outside:
    """A stand-in cloud: an escalation hook and the other model behind it (both must stay untouched)."""

    def __init__(self) -> None:
        self.other = ScriptedModel("cloud")
        self.escalated: list[str] = []

    async def escalate(self, prompt: str) -> str | None:
        from appliance.llm.base import ChatMessage, GenerationRequest

        self.escalated.append(prompt)
        await self.other.generate(GenerationRequest([ChatMessage("user", prompt)]))
        return None


def heartbeat(
    tmp_path: Path, text: str | None, *replies: str, escalate: Any = None
) -> tuple[Heartbeat, ScriptedModel, list[tuple[str, str]]]:
    path = tmp_path / "workspace" / "HEARTBEAT.md"
    if text is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    model = ScriptedModel("local")
    model.enqueue(*replies)
    sent: list[tuple[str, str]] = []

    async def readings() -> str:
        return "soil: level: 27 %"

    beat = Heartbeat(
        path,
        model,
        lambda t, k: sent.append((t, k)),
        readings=readings,
        every_minutes=30,
        tz="Europe/Brussels",
        clock=lambda: local("2026-06-10 18:30").timestamp(),
        escalate=escalate,
    )
    return beat, model, sent


def test_with_only_comments_the_heartbeat_never_calls_the_model(tmp_path: Path) -> None:
    beat, model, sent = heartbeat(tmp_path, None)
    assert asyncio.run(beat.check()) is None
    template = beat.path.read_text(encoding="utf-8")
    assert "- remind me if the soil level is below 30%" in template
    assert "readings" in template
    assert "[cloud]" not in template  # promised a cloud model "later" that nothing sets up (README walk 6)
    assert heartbeat_tasks(template) == ([], [])
    assert model.history == []
    assert sent == []
    assert beat.last_decision == "no tasks"
    assert beat.last_run_at == local("2026-06-10 18:30").timestamp()


def test_heartbeat_tasks_are_the_lines_outside_comments() -> None:
    text = (
        "# Checks\n<!-- a note -->\n- soil below 30%\n* lamp on after 23:00 [cloud]\n\nwindow open\n<!-- unclosed\n- no"
    )
    assert heartbeat_tasks(text) == (["soil below 30%", "window open"], ["lamp on after 23:00"])


def test_nothing_to_report_is_silent(tmp_path: Path) -> None:
    outside = Outside()
    beat, model, sent = heartbeat(
        tmp_path,
        "- remind me if the soil level is below 30%\n",
        '{"notify": false, "message": ""}',
        escalate=outside.escalate,
    )
    assert asyncio.run(beat.check()) is None
    assert sent == []
    assert beat.last_decision == "nothing to report"
    (request,) = model.history
    assert request.json_schema == HEARTBEAT_SCHEMA
    assert request.client == "heartbeat"
    prompt = request.messages[-1].content
    assert "- remind me if the soil level is below 30%" in prompt
    assert "soil: level: 27 %" in prompt
    assert "Wednesday 2026-06-10 18:30 Europe/Brussels" in prompt
    assert outside.other.history == [] and outside.escalated == []


def test_something_to_report_is_one_notification_from_the_local_model(tmp_path: Path) -> None:
    outside = Outside()
    beat, model, sent = heartbeat(
        tmp_path,
        "- remind me if the soil level is below 30%\n",
        '{"notify": true, "message": "Soil is dry"}',
        escalate=outside.escalate,
    )
    assert asyncio.run(beat.check()) == "Soil is dry"
    assert sent == [("Soil is dry", "heartbeat")]
    assert beat.last_decision == "notified: Soil is dry"
    assert len(model.history) == 1 and model.history[0].json_schema is not None
    assert beat.local_model is model
    assert outside.other.history == [] and outside.escalated == []


@pytest.mark.parametrize(
    "reply", ['{"notify": true, "message": "  "}', '{"notify": "yes", "message": "hm"}', '{"notify": tru', "[]"]
)
def test_empty_or_unreadable_answers_stay_silent(tmp_path: Path, reply: str) -> None:
    beat, _, sent = heartbeat(tmp_path, "- check the soil\n", reply)
    assert asyncio.run(beat.check()) is None
    assert sent == []


def test_a_model_failure_is_silent_and_remembered(tmp_path: Path) -> None:
    beat, model, sent = heartbeat(tmp_path, "- check the soil\n")

    async def fail(request: Any) -> Any:
        raise ModelError("the model is not loaded")

    model.generate = fail  # type: ignore[method-assign]
    assert asyncio.run(beat.check()) is None
    assert sent == []
    assert beat.last_decision == "model failed: the model is not loaded"


def test_cloud_lines_stay_local_unless_an_escalation_hook_is_given(tmp_path: Path) -> None:
    text = "- check the soil\n- compare with the forecast [cloud]\n"
    beat, model, _ = heartbeat(tmp_path, text, '{"notify": false, "message": ""}')
    asyncio.run(beat.check())
    prompt = model.history[0].messages[-1].content
    assert "- check the soil" in prompt and "- compare with the forecast" in prompt and "[cloud]" not in prompt

    outside = Outside()
    beat, model, _ = heartbeat(tmp_path, text, '{"notify": false, "message": ""}', escalate=outside.escalate)
    asyncio.run(beat.check())
    assert "forecast" not in model.history[0].messages[-1].content
    (escalated,) = outside.escalated
    assert "- compare with the forecast" in escalated and "check the soil" not in escalated
