"""The web edge answers each expected failure with its error class's status, never by reading the message.

Every status here is one the API gave before the statuses moved onto the error classes (issue 17); these
tests pin the ones no other test checked: a device's write limit (429), an expired approval (409), a
device that stops answering (502), an appliance without devices (404), a model too large for the free
memory (503). A scripted model stands in for the chat model: none of these reach it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import Automation, WebState
from appliance.config import Config, DeviceConfig
from appliance.errors import (
    ConfigError,
    Conflict,
    ModelError,
    ModelTooLargeError,
    NotFound,
    PicoagentError,
    PolicyError,
    RateLimited,
    UnknownDeviceError,
    UsageError,
)
from appliance.hardware.approvals import ApprovalError, UnknownApprovalError
from appliance.hardware.buses import HardwareError
from appliance.llm.base import Generation, GenerationRequest
from appliance.llm.local import LocalModel
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.helpers import eventually

Scenario = Callable[[TestClient[Any, Any], dict[str, str]], Awaitable[None]]


@pytest.fixture
def runtime(config: Config) -> Iterator[Runtime]:
    config.devices["gate"] = DeviceConfig(driver="relay", pin=5, approval="required")
    opened = Runtime.open(config, model=ScriptedModel())
    yield opened
    opened.close()


def serve(runtime: Runtime, scenario: Scenario) -> None:
    """Serve the daemon's app for the runtime and run the scenario with an admin token's headers."""

    async def main() -> None:
        auth = Auth(runtime.db)
        headers = {"Authorization": f"Bearer {auth.add_token('tests', scope='admin')}"}
        async with TestClient(TestServer(build_app(WebState(runtime, auth)))) as client:
            await scenario(client, headers)

    asyncio.run(main())


def test_each_error_class_carries_its_status_and_keeps_its_builtin() -> None:
    """The status is the class's; a new status class keeps the old `except` clauses catching it."""
    assert PicoagentError("x").http_status == 500 and ModelError("x").http_status == 500
    assert UsageError("x").http_status == ConfigError("x").http_status == 400
    assert isinstance(UnknownDeviceError("x"), NotFound | LookupError) and UnknownDeviceError.http_status == 404
    assert issubclass(RateLimited, PolicyError) and issubclass(RateLimited, PermissionError)
    assert (PolicyError.http_status, RateLimited.http_status) == (403, 429)
    assert issubclass(ModelTooLargeError, ModelError) and issubclass(ModelTooLargeError, MemoryError)
    assert ModelTooLargeError.http_status == 503
    assert issubclass(ApprovalError, Conflict) and issubclass(ApprovalError, UsageError)
    assert (ApprovalError.http_status, ApprovalError.exit_code) == (409, 2)
    assert issubclass(UnknownApprovalError, ApprovalError) and issubclass(UnknownApprovalError, LookupError)
    assert (UnknownApprovalError.http_status, UnknownApprovalError.exit_code) == (404, 2)
    assert HardwareError.http_status == 502


def test_a_device_switched_too_often_is_a_429_with_its_fix(config: Config, runtime: Runtime) -> None:
    assert runtime.devices is not None
    runtime.devices.devices["fan"].limiter.limit = 1

    async def scenario(client: TestClient[Any, Any], headers: dict[str, str]) -> None:
        first = await client.post("/api/devices/fan", json={"value": "on"}, headers=headers)
        assert first.status == 200
        second = await client.post("/api/devices/fan", json={"value": "off"}, headers=headers)
        assert second.status == 429
        body = await second.json()
        assert "times in the last minute" in body["error"] and "writes_per_minute" in body["fix"]
        metrics = await (await client.get("/metrics")).text()
        assert 'picoagent_http_requests_total{code="4xx"} 1' in metrics

    serve(runtime, scenario)


def test_an_expired_approval_is_a_409_and_an_unknown_one_a_404(runtime: Runtime) -> None:
    assert runtime.devices is not None
    approvals = runtime.devices.approvals

    async def scenario(client: TestClient[Any, Any], headers: dict[str, str]) -> None:
        asked = await client.post("/api/devices/gate", json={"value": "on"}, headers=headers)
        pending = (await asked.json())["pending_approval"]
        approvals.clock = lambda: time.time() + 3600  # past approval_timeout_s
        late = await client.post(f"/api/approvals/{pending['id']}/approve", headers=headers)
        assert late.status == 409 and (await late.json())["error"] == f"approval {pending['id']} expired; ask again"
        unknown = await client.post("/api/approvals/a-nothing/deny", headers=headers)
        assert unknown.status == 404
        assert await unknown.json() == {
            "error": "no approval 'a-nothing'",
            "fix": "picoagent approvals list shows the pending ones",
        }

    serve(runtime, scenario)


def test_a_sensor_that_stops_answering_is_a_502(runtime: Runtime) -> None:
    assert runtime.devices is not None
    bus = runtime.devices.backend.i2c(1)
    chip = bus.chips.pop(0x76)  # type: ignore[attr-defined]  # the simulated bus: the sensor is unplugged

    async def scenario(client: TestClient[Any, Any], headers: dict[str, str]) -> None:
        response = await client.get("/api/devices/living_room", headers=headers)
        assert response.status == 502
        assert await response.json() == {"error": "no device answers at I2C address 0x76 on bus 1", "fix": None}
        bus.chips[0x76] = chip  # type: ignore[attr-defined]
        assert (await client.get("/api/devices/living_room", headers=headers)).status == 200

    serve(runtime, scenario)


def test_without_devices_every_device_route_is_a_404(config: Config) -> None:
    config.devices.clear()
    runtime = Runtime.open(config, model=ScriptedModel())

    async def scenario(client: TestClient[Any, Any], headers: dict[str, str]) -> None:
        read = await client.get("/api/devices/fan", headers=headers)
        assert read.status == 404
        assert await read.json() == {"error": "unknown device 'fan'", "fix": "no devices are configured"}
        switched = await client.post("/api/devices/fan", json={"value": "on"}, headers=headers)
        assert switched.status == 404 and (await switched.json())["fix"] == "GET /api/devices lists the devices"
        decided = await client.post("/api/approvals/a-1/approve", headers=headers)
        assert decided.status == 404 and await decided.json() == {
            "error": "no approval 'a-1'",
            "fix": "picoagent approvals list shows the pending ones",
        }
        assert (await client.get("/api/devices", headers=headers)).status == 200

    try:
        serve(runtime, scenario)
    finally:
        runtime.close()


def test_a_model_too_large_for_free_memory_is_a_503(
    config: Config, model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real model refuses to load with 1 MB free, as on a Pi whose memory other programs hold."""
    monkeypatch.setattr("appliance.llm.local.available_memory_bytes", lambda: 2**20)
    model = LocalModel(model_path, context_tokens=2048, name="smollm2-135m")
    runtime = Runtime.open(config, model=model)

    async def scenario(client: TestClient[Any, Any], headers: dict[str, str]) -> None:
        request = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        response = await client.post("/v1/chat/completions", json=request, headers=headers)
        assert response.status == 503
        body = await response.json()
        assert "MB are free" in body["error"] and "pick a smaller model" in body["fix"]

    try:
        serve(runtime, scenario)
    finally:
        runtime.close()
        model.close()


class _FailingModel(ScriptedModel):
    """A model that fails every generation with the error it was given."""

    def __init__(self, error: PicoagentError) -> None:
        super().__init__()
        self.error = error

    async def generate(self, request: GenerationRequest) -> Generation:
        raise self.error


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ModelError("out of memory while decoding"), 500),  # the words do not decide: the class does
        (ModelTooLargeError("too large"), 503),
        (UsageError("nope"), 400),
    ],
)
def test_the_status_comes_from_the_class_not_the_words(config: Config, error: PicoagentError, status: int) -> None:
    runtime = Runtime.open(config, model=_FailingModel(error))

    async def scenario(client: TestClient[Any, Any], headers: dict[str, str]) -> None:
        request = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        response = await client.post("/v1/chat/completions", json=request, headers=headers)
        assert response.status == status
        assert await response.json() == {"error": error.message, "fix": None}

    try:
        serve(runtime, scenario)
    finally:
        runtime.close()


def test_aiohttp_s_own_errors_on_api_paths_are_json(runtime: Runtime) -> None:
    async def scenario(client: TestClient[Any, Any], headers: dict[str, str]) -> None:
        missing = await client.get("/api/nothing-here", headers=headers)
        assert missing.status == 404 and (await missing.json())["error"] == "Not Found"
        wrong = await client.delete("/api/devices/fan", headers=headers)
        assert wrong.status == 405 and "POST" in wrong.headers["Allow"]
        assert (await wrong.json())["error"] == "Method Not Allowed"

    serve(runtime, scenario)


def test_running_a_cron_job_answers_404_for_an_unknown_one_and_409_while_it_runs(runtime: Runtime) -> None:
    """`POST /api/cron/{id}/run`: no such job and a job already running are different answers."""
    from appliance.config import CronJob
    from appliance.schedule.scheduler import Scheduler

    release = asyncio.Event()

    async def run_job(job: CronJob) -> str:
        await release.wait()
        return "watered"

    async def main() -> None:
        auth = Auth(runtime.db)
        headers = {"Authorization": f"Bearer {auth.add_token('tests', scope='admin')}"}
        cron = Scheduler(
            [CronJob(id="water", schedule="daily 07:00", prompt="water")],
            tz="UTC",
            run_job=run_job,
            notify=None,
            db=runtime.db,
        )
        state = WebState(runtime, auth, automation=Automation(cron))
        async with TestClient(TestServer(build_app(state))) as client:
            unknown = await client.post("/api/cron/nope/run", headers=headers)
            assert unknown.status == 404
            assert (await unknown.json())["error"] == "no cron job named 'nope'"
            first = asyncio.ensure_future(client.post("/api/cron/water/run", headers=headers))
            await eventually(lambda: cron.is_running("water"), what="the first run")
            again = await client.post("/api/cron/water/run", headers=headers)
            assert again.status == 409
            assert (await again.json())["error"] == "cron job water is running now"
            release.set()
            done = await first
            assert done.status == 200 and (await done.json())["result"] == "watered"

    asyncio.run(main())
