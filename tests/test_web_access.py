"""The Settings page's access and updates tabs through a real aiohttp server: the password (the current one
needed), API tokens made, re-scoped and revoked, other browsers signed out, each change in the events list
without a secret; the rollback button outside an installed release says why not, and inside one leaves the
request that systemd's picoagent-rollback.path acts on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web import updates
from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import WebState
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.test_web_api import PASSWORD, login
from tests.test_web_settings import copy_of_shipped


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    opened = Runtime.open(copy_of_shipped(tmp_path), model=ScriptedModel())
    yield opened
    opened.close()


def serve(runtime: Runtime, scenario: Any) -> None:
    auth = Auth(runtime.db)
    auth.set_password(PASSWORD)
    state = WebState(runtime, auth)

    async def main() -> None:
        async with TestClient(TestServer(build_app(state))) as client:
            await scenario(client, state)

    asyncio.run(main())


def test_the_password_tokens_and_sessions_from_the_access_tab(runtime: Runtime) -> None:
    async def scenario(client: TestClient[Any, Any], state: WebState) -> None:
        csrf = {"X-CSRF-Token": await login(client)}
        other = await asyncio.to_thread(state.auth.create_session)  # another browser
        wrong = await client.post("/api/access/password", json={"current": "nope", "password": "x" * 12}, headers=csrf)
        assert wrong.status == 403 and (await wrong.json())["key"] == "current"
        short = await client.post("/api/access/password", json={"current": PASSWORD, "password": "short"}, headers=csrf)
        assert short.status == 400 and (await short.json())["key"] == "password"
        done = await client.post(
            "/api/access/password", json={"current": PASSWORD, "password": "a brand new one"}, headers=csrf
        )
        assert done.status == 200
        assert state.auth.session(other[0]) is None  # the other browser is signed out; this one is not
        csrf = {"X-CSRF-Token": (await (await client.get("/api/session")).json())["csrf"]}
        made = await client.post("/api/access/tokens", json={"name": "grafana", "scope": "read"}, headers=csrf)
        token = (await made.json())["token"]
        assert made.status == 201 and token.startswith("pat_")
        listed = await (await client.get("/api/access")).json()
        assert [(t["name"], t["scope"]) for t in listed["tokens"]] == [("grafana", "read")]
        assert token not in str(listed) and set(listed["scopes"]) == {"chat", "read", "devices", "admin"}
        bad = await client.post("/api/access/tokens/grafana", json={"scope": "root"}, headers=csrf)
        assert bad.status == 400 and (await bad.json())["key"] == "scope"
        assert (await client.post("/api/access/tokens/grafana", json={"scope": "devices"}, headers=csrf)).status == 200
        assert (await client.post("/api/access/tokens/nobody", json={"scope": "read"}, headers=csrf)).status == 404
        assert (await client.get("/api/devices", headers={"Authorization": f"Bearer {token}"})).status == 200
        assert (await client.delete("/api/access/tokens/grafana", headers=csrf)).status == 200
        assert (await client.get("/api/devices", headers={"Authorization": f"Bearer {token}"})).status == 401
        await asyncio.to_thread(state.auth.create_session)
        ended = await (await client.post("/api/access/sessions/end", headers=csrf)).json()
        assert ended == {"ended": 1} and (await client.get("/api/session")).status == 200
        events = await (await client.get("/api/settings/audit")).json()
        said = [c["message"].split(": ", 1)[1] for c in events["changes"]]
        assert said == [
            "access.sessions (others signed out)",
            "access.tokens.grafana (revoked)",
            "access.tokens.grafana (scope devices)",
            "access.tokens.grafana (scope read)",
            "access.password",
        ]
        assert token not in str(events) and "a brand new one" not in str(events)

    serve(runtime, scenario)


def test_the_rollback_button_outside_a_release_says_why_and_inside_one_leaves_the_request(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag = runtime.config.resolve_path(runtime.config.data_dir) / updates.REQUEST

    async def scenario(client: TestClient[Any, Any], state: WebState) -> None:
        csrf = {"X-CSRF-Token": await login(client)}
        assert (await (await client.get("/api/update")).json()) == {"update": None, "rollback_requested": False}
        refused = await client.post("/api/update/rollback", headers=csrf)
        assert refused.status == 409 and "does not run from an installed release" in (await refused.json())["error"]
        monkeypatch.setattr(updates, "_status", lambda: {"version": "0.2.0", "previous": None, "releases": ["0.2.0"]})
        alone = await client.post("/api/update/rollback", headers=csrf)
        assert alone.status == 409 and (await alone.json())["error"] == "there is no other release to roll back to"
        assert not flag.exists()
        releases = {"version": "0.2.0", "previous": "0.1.0", "releases": ["0.1.0", "0.2.0"]}
        monkeypatch.setattr(updates, "_status", lambda: releases)
        asked = await client.post("/api/update/rollback", headers=csrf)
        assert asked.status == 202 and await asked.json() == {"rolling_back_to": "0.1.0", "from": "0.2.0"}
        assert flag.read_text() == "0.1.0\n"
        assert (await (await client.get("/api/update")).json())["rollback_requested"] is True

    serve(runtime, scenario)
