"""/api/cron and /api/tasks through a real aiohttp server: list, create, pause, resume, cancel, logs.

A real Scheduler on a manual clock and a real TaskStore on a real SQLite file; a scripted model stands in
for the chat model (no job here reaches it). Browser sessions need the CSRF token like every other POST.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import WebState
from appliance.config import Config, CronJob
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.helpers import automation_on

PASSWORD = "correct horse battery"

Scenario = Callable[[TestClient[Any, Any], dict[str, str], WebState], Awaitable[None]]


@pytest.fixture
def runtime(config: Config) -> Iterator[Runtime]:
    opened = Runtime.open(config, model=ScriptedModel())
    yield opened
    opened.close()


def serve(runtime: Runtime, scenario: Scenario) -> list[str]:
    """Serve the app with a scheduler (one config job) and a task store; returns the jobs' outputs."""

    ran: list[str] = []

    async def run_job(job: CronJob) -> str:
        ran.append(job.id)
        return job.message or f"ran {job.id}"

    async def main() -> None:
        auth = Auth(runtime.db)
        auth.set_password(PASSWORD)
        headers = {"Authorization": f"Bearer {auth.add_token('tests', scope='admin')}"}
        state = WebState(runtime, auth, automation=automation_on(runtime.db, run_job))
        async with TestClient(TestServer(build_app(state))) as client:
            await scenario(client, headers, state)

    asyncio.run(main())
    return ran


def test_jobs_are_created_paused_resumed_run_and_cancelled(runtime: Runtime) -> None:
    async def scenario(client: TestClient[Any, Any], headers: dict[str, str], state: WebState) -> None:
        made = await client.post(
            "/api/cron", json={"schedule": "daily 19:00", "message": "take the bins out"}, headers=headers
        )
        assert made.status == 201, await made.text()
        job = await made.json()
        assert job["source"] == "chat" and job["paused"] is False and job["does"]
        assert job["next_run"].startswith("2026-11-18T19:00")
        assert job["created_by"] == "web (token tests)"
        listed = (await (await client.get("/api/cron", headers=headers)).json())["jobs"]
        assert {j["id"] for j in listed} == {"water", job["id"]}

        paused = await (await client.post(f"/api/cron/{job['id']}/pause", headers=headers)).json()
        assert paused["paused"] is True and paused["next_run"] is None
        resumed = await (await client.post(f"/api/cron/{job['id']}/resume", headers=headers)).json()
        assert resumed["paused"] is False and resumed["next_run"].startswith("2026-11-18T19:00")

        ran = await client.post(f"/api/cron/{job['id']}/run", headers=headers)
        assert (await ran.json())["result"] == "take the bins out"
        logs = await (await client.get(f"/api/cron/{job['id']}/logs", headers=headers)).json()
        assert [(r["ok"], r["result"], r["reason"]) for r in logs["runs"]] == [(True, "take the bins out", "manual")]

        cancelled = await client.post(f"/api/cron/{job['id']}/cancel", headers=headers)
        assert cancelled.status == 200 and (await cancelled.json())["id"] == job["id"]
        assert [j["id"] for j in (await (await client.get("/api/cron", headers=headers)).json())["jobs"]] == ["water"]
        # The config's job: paused, yes; cancelled, no (it would come back at the next start).
        refused = await client.post("/api/cron/water/cancel", headers=headers)
        assert refused.status == 409
        assert "pause it" in (await refused.json())["fix"]
        unknown = await client.post("/api/cron/nope/pause", headers=headers)
        assert unknown.status == 404 and (await unknown.json())["error"] == "no cron job named 'nope'"

    assert len(serve(runtime, scenario)) == 1  # the run by hand; nothing ran by its schedule


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"message": "hi"}, 'expected "schedule"'),
        ({"schedule": "daily 07:00"}, "say what the job does"),
        ({"schedule": "daily 07:00", "message": 3}, '"message" must be a string'),
        ({"schedule": "daily 07:00", "message": "hi", "colour": "red"}, "unknown field 'colour'"),
        ({"schedule": "at teatime", "message": "hi"}, "teatime"),
        ({"schedule": "daily 07:00", "device": "kettle", "value": "on"}, "kettle"),
        ({"schedule": "daily 07:00", "message": "hi", "missed": "sometimes"}, '"missed" must be'),
    ],
)
def test_a_bad_job_is_a_400_that_says_what_is_wrong(runtime: Runtime, body: dict[str, Any], error: str) -> None:
    async def scenario(client: TestClient[Any, Any], headers: dict[str, str], state: WebState) -> None:
        answer = await client.post("/api/cron", json=body, headers=headers)
        assert answer.status == 400, await answer.text()
        assert error in (await answer.json())["error"]
        assert len(state.automation.cron.list_jobs()) == 1  # type: ignore[union-attr]  # nothing was added

    serve(runtime, scenario)


def test_tasks_are_queued_listed_with_counts_paused_resumed_and_cancelled(runtime: Runtime) -> None:
    async def scenario(client: TestClient[Any, Any], headers: dict[str, str], state: WebState) -> None:
        made = await client.post(
            "/api/tasks",
            json={"goal": "research tomato planting", "budget_tokens": 5000, "max_steps": 6},
            headers=headers,
        )
        assert made.status == 201, await made.text()
        task = await made.json()
        assert task["state"] == "pending" and task["budget_tokens"] == 5000 and task["max_steps"] == 6
        other = await (await client.post("/api/tasks", json={"goal": "tidy notes"}, headers=headers)).json()

        listed = await (await client.get("/api/tasks", headers=headers)).json()
        assert [t["id"] for t in listed["tasks"]] == [other["id"], task["id"]]  # newest first
        assert listed["counts"]["pending"] == 2

        paused = await (await client.post(f"/api/tasks/{task['id']}/pause", headers=headers)).json()
        assert paused["state"] == "paused"
        again = await client.post(f"/api/tasks/{task['id']}/pause", headers=headers)
        assert again.status == 409 and "already paused" in (await again.json())["error"]
        resumed = await (await client.post(f"/api/tasks/{task['id']}/resume", headers=headers)).json()
        assert resumed["state"] == "pending"
        cancelled = await (await client.post(f"/api/tasks/{other['id']}/cancel", headers=headers)).json()
        assert cancelled["state"] == "cancelled"
        counts = (await (await client.get("/api/tasks", headers=headers)).json())["counts"]
        assert counts["pending"] == 1 and counts["cancelled"] == 1

        logs = await (await client.get(f"/api/tasks/{task['id']}/logs", headers=headers)).json()
        assert logs["task"]["goal"] == "research tomato planting" and logs["steps"] == []
        assert (await client.post("/api/tasks/999/pause", headers=headers)).status == 404
        assert (await client.get("/api/tasks/abc/logs", headers=headers)).status == 400
        for bad in ({"goal": ""}, {"goal": "x", "route": "moon"}, {"goal": "x", "max_steps": 0}, {"goal": "x", "y": 1}):
            assert (await client.post("/api/tasks", json=bad, headers=headers)).status == 400, bad
        status = await (await client.get("/api/status", headers=headers)).json()
        assert [t["id"] for t in status["tasks"]["tasks"]] == [other["id"], task["id"]]
        assert [j["id"] for j in status["jobs"]] == ["water"] and status["approvals"] == []

    serve(runtime, scenario)


def test_a_browser_session_needs_the_csrf_token_and_a_read_token_cannot_change_jobs(runtime: Runtime) -> None:
    async def scenario(client: TestClient[Any, Any], headers: dict[str, str], state: WebState) -> None:
        page = await client.get("/login")
        field = re.search(r'name="csrf" value="([^"]+)"', await page.text())
        assert field is not None
        await client.post("/login", data={"password": PASSWORD, "csrf": field.group(1), "next": "/"})
        csrf = (await (await client.get("/api/session")).json())["csrf"]
        refused = await client.post("/api/cron/water/pause")
        assert refused.status == 403 and (await refused.json())["error"] == "missing or wrong CSRF token"
        cron = state.automation.cron
        assert cron is not None and not cron.list_jobs()[0]["paused"]
        paused = await client.post("/api/cron/water/pause", headers={"X-CSRF-Token": csrf})
        assert paused.status == 200 and (await paused.json())["paused"] is True

        reader = {"Authorization": f"Bearer {state.auth.add_token('dashboard', scope='read')}"}
        assert (await client.get("/api/tasks", headers=reader)).status == 200
        assert (await client.get("/api/cron/water/logs", headers=reader)).status == 200
        for path in ("/api/cron/water/resume", "/api/tasks"):
            assert (await client.post(path, json={"goal": "x"}, headers=reader)).status == 403, path

    serve(runtime, scenario)


def test_on_a_model_that_cannot_plan_a_task_is_a_409_saying_which_model_it_needs(config: Config) -> None:
    packaged = Runtime.open(config, model=ScriptedModel(name="smollm2-135m"))  # as `serve` runs the packaged model

    async def scenario(client: TestClient[Any, Any], headers: dict[str, str], state: WebState) -> None:
        made = await client.post("/api/tasks", json={"goal": "compare the electricity tariffs"}, headers=headers)
        assert made.status == 409, await made.text()
        body = await made.json()
        assert body["error"].startswith("tasks need a model that can plan and use tools, and smollm2-135m")
        assert "picoagent models pull qwen2.5-1.5b" in body["fix"]
        assert (await (await client.get("/api/tasks", headers=headers)).json())["tasks"] == []  # nothing queued

    try:
        serve(packaged, scenario)
    finally:
        packaged.close()
