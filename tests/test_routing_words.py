"""What the README's "Cloud escalation" promises a program that asks for a route over the API.

A real aiohttp server on the shipped config (``routing.mode: local_only``, no provider) and a scripted
chat model: the reply record is read as the program reads it, route and reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import WebState
from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime


@pytest.fixture
def runtime(config: Config) -> Iterator[Runtime]:
    opened = Runtime.open(config, model=ScriptedModel())
    yield opened
    opened.close()


def chat(runtime: Runtime, body: dict[str, Any]) -> dict[str, Any]:
    """POST /api/chat as a program with an API token; the reply record."""
    answer: dict[str, Any] = {}

    async def main() -> None:
        auth = Auth(runtime.db)
        headers = {"Authorization": f"Bearer {auth.add_token('script', scope='chat')}"}
        async with TestClient(TestServer(build_app(WebState(runtime, auth)))) as client:
            response = await client.post("/api/chat", json=body, headers=headers)
            assert response.status == 200, await response.text()
            answer.update(await response.json())

    asyncio.run(main())
    return answer


def test_asking_the_api_for_the_cloud_in_local_only_is_a_fallback_that_says_why(runtime: Runtime) -> None:
    assert runtime.config.routing.mode == "local_only"
    record = chat(runtime, {"message": "Explain quantum tunnelling.", "route": "cloud"})
    assert record["route"] == "local_fallback" and record["why"] == "user_cloud" and record["blocked"] == "local_only"
    assert record["reason"] == (
        'you asked for the cloud ("route": "cloud"), but routing.mode is local_only: answered locally'
    )
    assert "/cloud" not in record["reason"]


def test_forcing_the_local_model_over_the_api_is_reported_as_the_callers_choice(runtime: Runtime) -> None:
    record = chat(runtime, {"message": "Explain quantum tunnelling.", "route": "local"})
    assert record["route"] == "local" and record["why"] == "user_local"
    assert record["reason"].startswith('you asked for the local model ("route": "local")')


def test_a_cloud_request_inside_the_message_quotes_the_command(runtime: Runtime) -> None:
    record = chat(runtime, {"message": "/cloud Explain quantum tunnelling."})
    assert record["route"] == "local_fallback"
    assert record["reason"].startswith("you asked for the cloud (/cloud), but routing.mode is local_only")


def test_each_way_of_asking_is_quoted_as_it_was_asked() -> None:
    from appliance.agent.router import asked_with

    assert asked_with("cloud", "api", in_text=False) == '"route": "cloud"'
    assert asked_with("cloud", "api", in_text=True) == "/cloud"  # the message itself said /cloud
    assert asked_with("local", "telegram", in_text=False) == "/local"  # the chat's /local command
    assert asked_with("cloud", "task", in_text=False) == "the task's --route cloud"
