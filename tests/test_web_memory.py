"""What the assistant remembers, over /api/memory with the real store (sqlite-vec, FTS5) and the real MiniLM
embedding model: browse and search, edit (found by its new words, not its old), forget one, forget everything
about X (shown before it deletes; the vectors and keywords gone, counted in their tables), export, and the
conversations; a read token reads and changes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import WebState
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.test_web_settings import copy_of_shipped

FACTS = [
    "My sister Anna lives in Lisbon",
    "The garage door code is 4711",
    "I prefer tea over coffee",
    "Anna's birthday is on the ninth of May",
]


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    opened = Runtime.open(copy_of_shipped(tmp_path), model=ScriptedModel())
    assert opened.memory is not None
    for fact in FACTS:
        opened.memory.add(fact, source="telegram")
    yield opened
    opened.close()


def rows(runtime: Runtime, sql: str) -> int:
    """A count, read through the appliance's own connection (it has sqlite-vec loaded)."""
    return int(runtime.db.rows(sql)[0][0])


def test_memory_is_seen_edited_and_forgotten_with_its_vectors_and_keywords(runtime: Runtime) -> None:
    auth = Auth(runtime.db)
    owner = {"Authorization": f"Bearer {auth.add_token('owner', scope='admin')}"}
    reader = {"Authorization": f"Bearer {auth.add_token('reader', scope='read')}"}

    async def main() -> None:
        async with TestClient(TestServer(build_app(WebState(runtime, auth)))) as client:
            await scenario(client)

    async def get(client: TestClient[Any, Any], path: str, headers: dict[str, str] = owner) -> Any:
        answer = await client.get(path, headers=headers)
        assert answer.status == 200, await answer.text()
        return await answer.json()

    async def scenario(client: TestClient[Any, Any]) -> None:
        browsed = await get(client, "/api/memory", reader)
        assert browsed["total"] == 4 and [m["text"] for m in browsed["memories"]] == FACTS[::-1]
        assert browsed["memories"][0]["source"] == "telegram" and "embedded_with" not in browsed["memories"][0]
        found = await get(client, "/api/memory?q=where does my sister live")
        assert found["mode"] == "hybrid" and found["memories"][0]["text"] == FACTS[0]

        tea = next(m for m in browsed["memories"] if m["text"] == FACTS[2])
        refused = await client.patch(f"/api/memory/{tea['id']}", json={"text": "x"}, headers=reader)
        assert refused.status == 403
        edited = await client.patch(
            f"/api/memory/{tea['id']}", json={"text": "I drink espresso every morning"}, headers=owner
        )
        now = await edited.json()
        assert edited.status == 200 and now["text"] == "I drink espresso every morning" and now["id"] != tea["id"]
        assert now["created_at"] == tea["created_at"] and now["source"] == "telegram"  # its age and origin kept
        by_new = await get(client, "/api/memory?q=espresso")
        assert by_new["memories"][0]["id"] == now["id"] and "keyword" in by_new["memories"][0]["matched_by"]
        by_old = await get(client, "/api/memory?q=tea")
        assert all(m["id"] != tea["id"] and "keyword" not in m["matched_by"] for m in by_old["memories"])
        assert (await client.patch(f"/api/memory/{tea['id']}", json={"text": "y"}, headers=owner)).status == 404

        preview = await (await client.post("/api/memory/forget", json={"about": "Anna"}, headers=owner)).json()
        named = sorted(m["text"] for m in preview["would_forget"])
        assert preview["deleted"] == 0 and FACTS[0] in named and FACTS[3] in named, preview
        assert FACTS[1] not in named  # the garage code is not about Anna
        assert (await get(client, "/api/memory"))["total"] == 4  # the preview deleted nothing
        ids = [m["id"] for m in preview["would_forget"] if "Anna" in m["text"]]
        body = {"about": "Anna", "ids": ids, "confirm": True}
        gone = await (await client.post("/api/memory/forget", json=body, headers=owner)).json()
        assert gone["deleted"] == 2
        after = await get(client, "/api/memory?q=Anna Lisbon sister birthday")
        assert all("Anna" not in m["text"] for m in after["memories"])
        assert rows(runtime, "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'Anna'") == 0
        assert rows(runtime, "SELECT count(*) FROM memory_vec") == rows(runtime, "SELECT count(*) FROM memories") == 2

        garage = next(m for m in (await get(client, "/api/memory"))["memories"] if "garage" in m["text"])
        assert (await client.delete(f"/api/memory/{garage['id']}", headers=owner)).status == 200
        assert (await client.delete(f"/api/memory/{garage['id']}", headers=owner)).status == 404
        assert rows(runtime, "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH '4711'") == 0

        exported = await client.get("/api/memory/export?format=md", headers=owner)
        text = await exported.text()
        assert exported.status == 200 and text.startswith("# Memory") and "espresso" in text and "Anna" not in text
        assert len((await get(client, "/api/memory/export?format=json"))["memories"]) == 1
        assert (await client.get("/api/memory/export?format=pdf", headers=owner)).status == 400

        conversation = await asyncio.to_thread(runtime.db.conversation, "telegram", "42")
        await asyncio.to_thread(runtime.db.add_message, conversation, "user", "remember my sister")
        listed = (await get(client, "/api/conversations", reader))["conversations"]
        assert listed[0]["id"] == conversation and listed[0]["messages"] == 1
        assert (await client.delete(f"/api/conversations/{conversation}", headers=reader)).status == 403
        deleted = await (await client.delete(f"/api/conversations/{conversation}", headers=owner)).json()
        assert deleted == {"deleted": conversation, "messages": 1}
        assert rows(runtime, f"SELECT count(*) FROM messages WHERE conversation_id = {conversation}") == 0
        assert (await client.delete(f"/api/conversations/{conversation}", headers=owner)).status == 404
        audit = [c["message"] for c in (await get(client, "/api/settings/audit"))["changes"]]
        assert any("forgot 2 about 'Anna'" in said for said in audit), audit

    asyncio.run(main())
