"""API conversations over HTTP: a program's chat, its history and its reset, as the README and OpenAPI say.

Through the real aiohttp app and middleware with real tokens and a real database; the model is the scripted
one (it echoes), since what is checked is which conversation each request reads or resets, not an answer.
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
from appliance.channels.web.openapi import openapi_document
from appliance.channels.web.state import WebState
from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime

PASSWORD = "correct horse battery"
Client = TestClient[Any, Any]


@pytest.fixture
def runtime(config: Config) -> Iterator[Runtime]:
    opened = Runtime.open(config, model=ScriptedModel())
    yield opened
    opened.close()


def serve(runtime: Runtime, scenario: Callable[[Client, Auth], Awaitable[None]]) -> None:
    auth = Auth(runtime.db)
    auth.set_password(PASSWORD)

    async def main() -> None:
        async with TestClient(TestServer(build_app(WebState(runtime, auth)))) as client:
            await scenario(client, auth)

    asyncio.run(main())


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def said(client: Client, token: str, query: str = "") -> list[str]:
    """What a person reads in a conversation's history: its messages' text, oldest first."""
    answer = await client.get(f"/api/history{query}", headers=bearer(token))
    assert answer.status == 200, await answer.text()
    return [m["content"] for m in (await answer.json())["messages"]]


def test_a_program_reads_and_resets_its_api_conversation_with_what_the_readme_shows(runtime: Runtime) -> None:
    async def scenario(client: Client, auth: Auth) -> None:
        token = auth.add_token("script", scope="devices")  # chats and reads
        for body in ({"message": "first"}, {"message": "other", "session": "kitchen"}):
            assert (await client.post("/api/chat", json=body, headers=bearer(token))).status == 200
        # No query: the conversation POST /api/chat keeps by default; ?session= names another.
        assert await said(client, token) == ["first", "echo: first"]
        assert await said(client, token, "?session=kitchen") == ["other", "echo: other"]
        # A POST with no body resets the default API conversation (the body is optional, says the OpenAPI).
        reset = await client.post("/api/reset", headers=bearer(token))
        assert reset.status == 200, await reset.text()
        assert await reset.json() == {"reset": "api", "channel": "api"}
        assert await said(client, token) == []
        assert await said(client, token, "?session=kitchen") == ["other", "echo: other"]
        reset = await client.post("/api/reset", json={"session": "kitchen"}, headers=bearer(token))
        assert await reset.json() == {"reset": "kitchen", "channel": "api"}
        assert await said(client, token, "?session=kitchen") == []
        # ?session= names it too, as for /api/history (it reset the default conversation, a README walk found)
        assert (await client.post("/api/chat", json={"message": "again", "session": "hall"}, headers=bearer(token))).ok
        assert (await client.post("/api/chat", json={"message": "more"}, headers=bearer(token))).ok
        reset = await client.post("/api/reset?session=hall", headers=bearer(token))
        assert await reset.json() == {"reset": "hall", "channel": "api"}
        assert await said(client, token, "?session=hall") == []
        assert await said(client, token) == ["more", "echo: more"]  # the default one was left alone

    serve(runtime, scenario)


def test_a_chat_token_reads_and_resets_only_its_own_conversations(runtime: Runtime) -> None:
    owner = runtime.db.conversation("api", "kitchen")
    runtime.db.add_message(owner, "user", "The door code is 4711.")

    async def scenario(client: Client, auth: Auth) -> None:
        token = auth.add_token("openai-client")  # scope chat, the default
        chat = await client.post("/api/chat", json={"message": "hello", "session": "kitchen"}, headers=bearer(token))
        assert chat.status == 200
        assert await said(client, token, "?session=kitchen") == ["hello", "echo: hello"]
        assert await said(client, token, "?session=web&channel=web") == []  # the owner's web chat is not its own
        assert (await client.post("/api/reset", json={"session": "kitchen"}, headers=bearer(token))).status == 200
        assert await said(client, token, "?session=kitchen") == []
        reader = auth.add_token("grafana", scope="read")
        assert await said(client, reader, "?session=kitchen") == ["The door code is 4711."]
        refused = await client.post("/api/reset", json={"session": "kitchen"}, headers=bearer(reader))
        assert refused.status == 403  # a read token writes nothing

    serve(runtime, scenario)
    kept = runtime.db.recent_messages(runtime.db.conversation("api", "kitchen"), 10)
    assert [m.content for m in kept] == ["The door code is 4711."]


def test_the_browser_chat_keeps_its_web_session_by_default(runtime: Runtime) -> None:
    web = runtime.db.conversation("web", "web")
    runtime.db.add_message(web, "user", "from the web chat")

    async def scenario(client: Client, auth: Auth) -> None:
        page = await client.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', await page.text())
        assert csrf is not None
        await client.post("/login", data={"password": PASSWORD, "csrf": csrf.group(1), "next": "/"})
        session = await (await client.get("/api/session")).json()
        history = await (await client.get("/api/history")).json()
        assert [m["content"] for m in history["messages"]] == ["from the web chat"]
        reset = await client.post("/api/reset", headers={"X-CSRF-Token": session["csrf"]})
        assert await reset.json() == {"reset": "web", "channel": "web"}
        assert (await (await client.get("/api/history")).json())["messages"] == []

    serve(runtime, scenario)


def test_the_openapi_document_names_the_channel_and_its_defaults() -> None:
    paths = openapi_document()["paths"]
    history = {p["name"]: p for p in paths["/api/history"]["get"]["parameters"]}
    assert "api for a token" in history["channel"]["description"]
    reset = paths["/api/reset"]["post"]
    assert reset["requestBody"]["required"] is False
    assert set(reset["requestBody"]["content"]["application/json"]["schema"]["properties"]) == {"session", "channel"}
