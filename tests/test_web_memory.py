"""What the assistant remembers, over /api/memory with the real store (sqlite-vec, FTS5) and the real MiniLM
embedding model, through the real app with its auth: browse and search (each memory with where it came from),
edit (found by its new words and meaning, not its old ones), forget one, forget everything about X (shown with a
token before it deletes exactly those; the vectors and keywords gone, searched and counted in their tables),
export (MEMORY.md as `picoagent memory export` writes it), the conversations; a read token changes nothing; bad
ids are 404s and bad bodies 400s that say what is wrong."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web import memory as memory_routes
from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.openapi import openapi_document
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
Client = TestClient[Any, Any]


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    opened = Runtime.open(copy_of_shipped(tmp_path), model=ScriptedModel())
    assert opened.memory is not None
    for fact in FACTS:
        opened.memory.add(fact, source="telegram")
    yield opened
    opened.close()


def rows(runtime: Runtime, sql: str, params: tuple[Any, ...] = ()) -> int:
    """A count, read through the appliance's own connection (it has sqlite-vec loaded)."""
    return int(runtime.db.rows(sql, params)[0][0])


def traces(runtime: Runtime, memory_id: int) -> tuple[int, int, int, int]:
    """A memory's rows: in memories, memory_vec, memory_bits and the FTS index."""
    return (
        rows(runtime, "SELECT count(*) FROM memories WHERE id = ?", (memory_id,)),
        rows(runtime, "SELECT count(*) FROM memory_vec WHERE rowid = ?", (memory_id,)),
        rows(runtime, "SELECT count(*) FROM memory_bits WHERE rowid = ?", (memory_id,)),
        rows(runtime, "SELECT count(*) FROM memories_fts WHERE rowid = ?", (memory_id,)),
    )


def everything(runtime: Runtime) -> tuple[int, ...]:
    """Every memory table's row count: what a refused or previewing request must leave as it was."""
    tables = ("memories", "memory_vec", "memory_bits", "memories_fts", "memory_keys")
    return tuple(rows(runtime, f"SELECT count(*) FROM {table}") for table in tables)


class Api:
    """The app on a test server, asked as the owner (admin) or a reader (read scope)."""

    def __init__(self, client: Client, owner: str, reader: str) -> None:
        self.client = client
        self.owner = {"Authorization": f"Bearer {owner}"}
        self.reader = {"Authorization": f"Bearer {reader}"}

    async def call(self, method: str, path: str, body: Any = None, *, reader: bool = False) -> tuple[int, Any]:
        """The status and the JSON (or text) answer."""
        headers = self.reader if reader else self.owner
        answer = await self.client.request(method, path, json=body, headers=headers)
        is_json = answer.content_type == "application/json"
        return answer.status, await (answer.json() if is_json else answer.text())

    async def ok(self, method: str, path: str, body: Any = None, *, reader: bool = False) -> Any:
        """The answer of a request that must succeed."""
        status, answer = await self.call(method, path, body, reader=reader)
        assert status == 200, (method, path, status, answer)
        return answer

    async def ids(self, query: str) -> list[int]:
        """The ids a search answers, best first."""
        found = await self.ok("GET", f"/api/memory?q={query}&limit=10")
        return [m["id"] for m in found["memories"]]


def serve(runtime: Runtime, scenario: Callable[[Api], Awaitable[None]]) -> None:
    """Run a scenario against the real app with an admin and a read token."""
    auth = Auth(runtime.db)
    owner, reader = auth.add_token("owner", scope="admin"), auth.add_token("reader", scope="read")

    async def main() -> None:
        async with TestClient(TestServer(build_app(WebState(runtime, auth)))) as client:
            await scenario(Api(client, owner, reader))

    asyncio.run(main())


def id_of(listed: dict[str, Any], text: str) -> int:
    return next(int(m["id"]) for m in listed["memories"] if m["text"] == text)


def test_browse_and_search_say_what_each_memory_is_and_where_it_came_from(runtime: Runtime) -> None:
    async def scenario(api: Api) -> None:
        conversation = await runtime.db.call(runtime.db.conversation, "telegram", "42")
        assert runtime.memory is not None
        await asyncio.to_thread(
            runtime.memory.add,
            "The shed key hangs by the back door",
            source="conversation",
            conversation_id=conversation,
        )
        browsed = await api.ok("GET", "/api/memory", reader=True)
        assert browsed["total"] == 5 and [m["text"] for m in browsed["memories"][1:]] == FACTS[::-1]
        shed = browsed["memories"][0]
        assert {k: shed[k] for k in ("kind", "source", "conversation_id", "channel", "chat_id")} == {
            "kind": "fact",
            "source": "conversation",
            "conversation_id": conversation,
            "channel": "telegram",
            "chat_id": "42",
        }
        assert browsed["memories"][1]["channel"] is None and "embedded_with" not in shed
        assert isinstance(shed["created_at"], float)
        paged = await api.ok("GET", "/api/memory?limit=2&offset=1&kind=fact")
        assert [m["text"] for m in paged["memories"]] == FACTS[::-1][:2] and paged["total"] == 5
        assert (await api.ok("GET", "/api/memory?kind=summary"))["total"] == 0

        found = await api.ok("GET", "/api/memory?q=where does my sister live", reader=True)
        assert found["mode"] == "hybrid" and found["memories"][0]["text"] == FACTS[0]
        assert found["memories"][0]["similarity"] > 0.2 and "vector" in found["memories"][0]["matched_by"]
        second = await api.ok("GET", "/api/memory?q=where does my sister live&limit=1&offset=1")
        assert [m["id"] for m in second["memories"]] == [found["memories"][1]["id"]]

        for query, said in [
            ("kind=opinion", "kind: fact or summary"),
            ("limit=many", "limit"),
            ("offset=-1", "offset"),
        ]:
            status, error = await api.call("GET", f"/api/memory?{query}")
            assert status == 400 and said in error["error"], error

    serve(runtime, scenario)


def test_an_edit_is_found_by_its_new_words_and_meaning_not_its_old_ones(runtime: Runtime) -> None:
    async def scenario(api: Api) -> None:
        tea = id_of(await api.ok("GET", "/api/memory"), FACTS[2])
        before = await api.ok("GET", "/api/memory?q=what do I like to drink")
        assert before["memories"][0]["id"] == tea and before["memories"][0]["similarity"] > 0.4
        listed = await api.ok("GET", "/api/memory")
        old = next(m for m in listed["memories"] if m["id"] == tea)

        edited = await api.ok("PATCH", f"/api/memory/{tea}", {"text": "The bins go out on Tuesday"})
        assert edited["id"] == tea and edited["text"] == "The bins go out on Tuesday"
        assert (edited["created_at"], edited["source"]) == (old["created_at"], "telegram")  # its age and origin kept
        assert traces(runtime, tea) == (1, 1, 1, 1)

        by_words = await api.ok("GET", "/api/memory?q=bins Tuesday")
        assert by_words["memories"][0]["id"] == tea and "keyword" in by_words["memories"][0]["matched_by"]
        by_meaning = await api.ok("GET", "/api/memory?q=which day is the rubbish collected")
        top = by_meaning["memories"][0]
        assert top["id"] == tea and top["matched_by"] == ["vector"] and top["similarity"] > 0.4
        for old_query in ("tea over coffee", "what do I like to drink"):  # its old words, then its old meaning
            hits = (await api.ok("GET", f"/api/memory?q={old_query}"))["memories"]
            mine = next(m for m in hits if m["id"] == tea)
            assert "keyword" not in mine["matched_by"] and mine["similarity"] < 0.2, (old_query, mine)
        assert rows(runtime, "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'coffee'") == 0

        garage = id_of(await api.ok("GET", "/api/memory"), FACTS[1])
        merged = await api.ok("PATCH", f"/api/memory/{garage}", {"text": "the bins go out on tuesday"})
        assert merged["id"] == tea and traces(runtime, garage) == (0, 0, 0, 0)  # the same text twice: kept once

    serve(runtime, scenario)


def test_forgetting_one_removes_it_from_both_searches_and_every_table(runtime: Runtime) -> None:
    async def scenario(api: Api) -> None:
        garage = id_of(await api.ok("GET", "/api/memory"), FACTS[1])
        assert garage in (await api.ids("4711"))[:1] and garage in (await api.ids("how do I open the garage"))[:1]
        assert traces(runtime, garage) == (1, 1, 1, 1)
        assert await api.ok("DELETE", f"/api/memory/{garage}") == {"forgotten": [garage]}
        assert traces(runtime, garage) == (0, 0, 0, 0)
        assert garage not in await api.ids("garage door code 4711")  # by its words
        assert garage not in await api.ids("how do I open the garage")  # by its meaning
        assert everything(runtime)[:4] == (3, 3, 3, 3)
        status, error = await api.call("DELETE", f"/api/memory/{garage}")
        assert status == 404 and error["error"] == f"no memory {garage}" and "GET /api/memory" in error["fix"]

    serve(runtime, scenario)


def test_forget_about_shows_first_then_deletes_exactly_the_ids_it_showed(runtime: Runtime) -> None:
    async def scenario(api: Api) -> None:
        before = everything(runtime)
        preview = await api.ok("POST", "/api/memory/forget", {"about": "Anna"})
        named = sorted(m["text"] for m in preview["would_forget"])
        assert named == sorted([FACTS[0], FACTS[3]]) and preview["deleted"] == 0 and preview["token"]
        assert everything(runtime) == before  # the preview deleted nothing
        ids = [m["id"] for m in preview["would_forget"]]

        wrong = {"about": "Anna", "ids": [*ids, id_of(await api.ok("GET", "/api/memory"), FACTS[1])]}
        status, error = await api.call(
            "POST", "/api/memory/forget", {**wrong, "token": preview["token"], "confirm": True}
        )
        assert status == 409 and "not the ones the preview" in error["error"] and everything(runtime) == before
        status, error = await api.call("POST", "/api/memory/forget", {"about": "Anna", "ids": ids, "confirm": True})
        assert status == 400 and '"token"' in error["error"] and everything(runtime) == before

        confirm = {"about": "Anna", "ids": ids[::-1], "token": preview["token"], "confirm": True}
        assert (await api.ok("POST", "/api/memory/forget", confirm))["deleted"] == 2
        assert all(traces(runtime, i) == (0, 0, 0, 0) for i in ids)
        assert everything(runtime)[:4] == (2, 2, 2, 2)
        for query in ("Anna Lisbon birthday", "where does my sister live", "when is her birthday"):
            assert not set(ids) & set(await api.ids(query)), query  # neither by words nor by meaning
        again = await api.ok("POST", "/api/memory/forget", {"about": "Anna"})
        assert again["would_forget"] == []
        audit = [c["message"] for c in (await api.ok("GET", "/api/settings/audit"))["changes"]]
        assert any("forgot 2 about 'Anna'" in said for said in audit), audit

    serve(runtime, scenario)


def test_a_preview_token_expires(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario(api: Api) -> None:
        preview = await api.ok("POST", "/api/memory/forget", {"about": "the garage door"})
        ids = [m["id"] for m in preview["would_forget"]]
        assert ids, preview
        monkeypatch.setattr(memory_routes, "PREVIEW_S", -1)
        body = {"about": "the garage door", "ids": ids, "token": preview["token"], "confirm": True}
        status, error = await api.call("POST", "/api/memory/forget", body)
        assert status == 409 and "minutes old" in error["error"] and rows(runtime, "SELECT count(*) FROM memories") == 4

    serve(runtime, scenario)


def test_a_read_token_changes_nothing_and_bad_requests_say_why(runtime: Runtime) -> None:
    async def scenario(api: Api) -> None:
        conversation = await runtime.db.call(runtime.db.conversation, "telegram", "42")
        await runtime.db.call(runtime.db.add_message, conversation, "user", "remember my sister")
        tea = id_of(await api.ok("GET", "/api/memory"), FACTS[2])
        before = everything(runtime)
        for method, path, body in [
            ("PATCH", f"/api/memory/{tea}", {"text": "x"}),
            ("DELETE", f"/api/memory/{tea}", None),
            ("POST", "/api/memory/forget", {"about": "tea"}),
            ("POST", "/api/memory/forget", {"about": "tea", "ids": [tea], "confirm": True}),
            ("DELETE", f"/api/conversations/{conversation}", None),
        ]:
            status, _ = await api.call(method, path, body, reader=True)
            assert status == 403, (method, path)
        assert everything(runtime) == before and rows(runtime, "SELECT count(*) FROM messages") == 1

        for method, path in [("PATCH", "/api/memory/999"), ("PATCH", "/api/memory/abc"), ("DELETE", "/api/memory/-3")]:
            status, error = await api.call(method, path, {"text": "x"})
            assert status == 404 and "no memory" in error["error"], (method, path, error)
        status, _ = await api.call("DELETE", "/api/conversations/x1")
        assert status == 404

        cases: list[tuple[str, str, Any, str]] = [
            ("PATCH", f"/api/memory/{tea}", {}, '{"text"'),
            ("PATCH", f"/api/memory/{tea}", {"text": 5}, '{"text"'),
            ("PATCH", f"/api/memory/{tea}", {"text": "   "}, "not empty"),
            ("PATCH", f"/api/memory/{tea}", ["text"], "JSON object"),
            ("POST", "/api/memory/forget", {}, '{"about"'),
            ("POST", "/api/memory/forget", {"about": "tea", "ids": [tea]}, '"confirm": true'),
            ("POST", "/api/memory/forget", {"about": "tea", "confirm": "yes"}, '"confirm": true'),
            ("POST", "/api/memory/forget", {"about": "tea", "confirm": True}, '"ids"'),
            ("POST", "/api/memory/forget", {"about": "tea", "ids": ["1"], "confirm": True}, '"ids"'),
        ]
        for method, path, body, said in cases:
            status, error = await api.call(method, path, body)
            assert status == 400 and said in error["error"], (body, error)
        answer = await api.client.patch(f"/api/memory/{tea}", data=b"{text", headers=api.owner)
        assert answer.status == 400 and "not valid JSON" in (await answer.json())["error"]
        assert everything(runtime) == before

    serve(runtime, scenario)


def test_export_and_conversations(runtime: Runtime, tmp_path: Path) -> None:
    async def scenario(api: Api) -> None:
        assert runtime.memory is not None
        await asyncio.to_thread(runtime.memory.add, "We talked about the garden", kind="summary", source="web")
        exported = await api.client.get("/api/memory/export?format=md", headers=api.reader)
        written, _ = await asyncio.to_thread(runtime.memory.export_markdown, tmp_path / "workspace")
        assert exported.status == 200 and await exported.text() == written.read_text()  # what the CLI writes
        assert "attachment" in exported.headers["Content-Disposition"]
        as_json = await api.ok("GET", "/api/memory/export?format=json")
        assert sorted(m["text"] for m in as_json["memories"]) == sorted([*FACTS, "We talked about the garden"])
        status, error = await api.call("GET", "/api/memory/export?format=pdf")
        assert status == 400 and "md or json" in error["error"]

        conversation = await runtime.db.call(runtime.db.conversation, "telegram", "42")
        await runtime.db.call(runtime.db.add_message, conversation, "user", "remember my sister")
        await runtime.db.call(runtime.db.add_message, conversation, "assistant", "I will")
        listed = (await api.ok("GET", "/api/conversations", reader=True))["conversations"]
        assert listed[0]["id"] == conversation and listed[0]["messages"] == 2 and listed[0]["channel"] == "telegram"
        deleted = await api.ok("DELETE", f"/api/conversations/{conversation}")
        assert deleted == {"deleted": conversation, "messages": 2}
        assert rows(runtime, "SELECT count(*) FROM messages WHERE conversation_id = ?", (conversation,)) == 0
        status, _ = await api.call("DELETE", f"/api/conversations/{conversation}")
        assert status == 404

    serve(runtime, scenario)


def test_the_openapi_document_describes_the_memory_routes() -> None:
    paths = openapi_document()["paths"]
    assert paths["/api/memory"]["get"]["x-scope"] == "read"
    assert paths["/api/memory/export"]["get"]["x-scope"] == "read"
    forget = paths["/api/memory/forget"]["post"]
    assert forget["x-scope"] == "admin" and {"about", "ids", "token", "confirm"} <= set(
        forget["requestBody"]["content"]["application/json"]["schema"]["properties"]
    )
    assert paths["/api/memory/{id}"]["patch"]["x-scope"] == paths["/api/memory/{id}"]["delete"]["x-scope"] == "admin"
    assert paths["/api/conversations/{id}"]["delete"]["x-scope"] == "admin"
