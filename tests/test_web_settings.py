"""/api/settings through a real aiohttp server on a copy of the shipped config: the forms made from the schema,
a save with its errors beside the field, the version check, secrets never sent back, the audit list, scopes."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import typing
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import Settings, WebState
from appliance.config import Config, load_config
from appliance.config.form import NOT_IN_SETTINGS, PAGES, settings_form
from appliance.config.load import CHECKOUT_CONFIG
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.test_web_api import PASSWORD, login

Scenario = Callable[[TestClient[Any, Any], dict[str, str], WebState], Awaitable[None]]


def copy_of_shipped(tmp_path: Path, *, for_a_daemon: bool = False) -> Config:
    """A config loaded from a copy of the shipped file (never the checkout's own: a save writes the file).
    ``for_a_daemon``: the data dir and ``llm.preload: false`` written into the file itself, so that the reload
    after a save (which reads the file) finds the daemon's own values and changes nothing else."""
    path = tmp_path / "etc" / "picoagent.yaml"
    path.parent.mkdir()
    shutil.copy(CHECKOUT_CONFIG, path)
    if for_a_daemon:
        text = path.read_text().replace("data_dir: ../.data", f"data_dir: {tmp_path / 'data'}", 1)
        path.write_text(text.replace("  preload: true", "  preload: false", 1))
    return load_config(path, data_dir=tmp_path / "data")


@pytest.fixture
def copied(tmp_path: Path) -> Config:
    return copy_of_shipped(tmp_path)


@pytest.fixture
def runtime(copied: Config) -> Iterator[Runtime]:
    opened = Runtime.open(copied, model=ScriptedModel())
    yield opened
    opened.close()


def serve(runtime: Runtime, scenario: Scenario, reload: Callable[[], dict[str, Any]] | None = None) -> None:
    auth = Auth(runtime.db)
    auth.set_password(PASSWORD)
    state = WebState(runtime, auth, settings=Settings(reload=reload))

    async def main() -> None:
        token = auth.add_token("owner-script", scope="admin")
        async with TestClient(TestServer(build_app(state))) as client:
            await scenario(client, {"Authorization": f"Bearer {token}"}, state)

    asyncio.run(main())


def rows(pages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every field of the forms by key."""
    found: dict[str, dict[str, Any]] = {}

    def walk(items: list[dict[str, Any]]) -> None:
        for row in items:
            found[row["key"]] = row
            walk(row.get("fields", []))
            for entry in row.get("entries", {}).values():
                walk(entry)

    for page in pages:
        walk(page["sections"])
    return found


def test_every_section_a_person_changes_has_a_form_or_a_reason() -> None:
    """The issue's check: the schema's sections listed, each on a Settings tab or named in NOT_IN_SETTINGS."""
    sections = [f.name for f in dataclasses.fields(Config) if not f.metadata.get("internal")]
    on_pages = [name for names in PAGES.values() for name in names]
    missing = [name for name in sections if name not in on_pages and name not in NOT_IN_SETTINGS]
    assert not missing, f"sections with neither a form nor a reason in appliance/config/form.py: {missing}"
    assert len(on_pages) == len(set(on_pages)) and set(on_pages) <= set(sections)
    for key, reason in NOT_IN_SETTINGS.items():
        assert reason, key
        node: Any = Config
        for part in key.split("."):  # every reason is about a key that exists
            hints = typing.get_type_hints(node)
            assert part in hints, key
            node = hints[part]


def test_the_forms_come_from_the_schema_with_its_words_ranges_and_choices(copied: Config) -> None:
    found = rows(settings_form(copied))
    port = found["web.port"]
    assert (port["type"], port["value"], port["low"], port["high"]) == ("integer", 8080, 1, 65_535)
    assert port["doc"].startswith("TCP port")
    assert found["llm.kv_type"]["choices"] == ["auto", "f16", "q8_0"]
    assert found["llm.threads"]["also"] == ["auto"] and found["llm.threads"]["type"] == "integer"
    assert found["weather.latitude"]["optional"] is True
    assert found["agent.reflection.enabled"]["type"] == "bool"  # a nested section's field
    assert found["devices"]["type"] == "collection" and "porch_light" in found["devices"]["entries"]
    assert found["devices.porch_light.pin"]["value"] == 17
    by_driver = found["devices"]["by_driver"]  # each driver's form shows what it reads
    assert by_driver["bme280"][:3] == ["driver", "bus", "address"] and "pin" not in by_driver["bme280"]
    assert "active_high" in by_driver["relay"] and "state_topic" in by_driver["mqtt"]
    assert found["telegram.token"] == found["telegram.token"] | {"secret": True, "set": False}
    assert "value" not in found["telegram.token"]
    assert "scheduler.jobs" not in found and "tools.mcp" not in found  # their reasons are in NOT_IN_SETTINGS


def test_a_save_is_written_applied_and_audited(runtime: Runtime) -> None:
    path = runtime.config.source
    assert path is not None and path != CHECKOUT_CONFIG
    reloads: list[str] = []

    def reload() -> dict[str, Any]:
        reloads.append(path.read_text())
        return {"restart_needed": ["web.session_days"], "refused": ""}

    async def scenario(client: TestClient[Any, Any], owner: dict[str, str], state: WebState) -> None:
        doc = await (await client.get("/api/settings", headers=owner)).json()
        body = {"version": doc["version"], "set": {"agent.name": "Juniper", "web.session_days": 9}}
        answer = await client.post("/api/settings", json=body, headers=owner)
        said = await answer.json()
        assert answer.status == 200, said
        assert said["changed"] == ["agent.name", "web.session_days"]
        assert said["applied"] == ["agent.name"] and said["restart_needed"] == ["web.session_days"]
        assert len(reloads) == 1 and "name: Juniper" in reloads[0]  # applied after the file was written
        events = await (await client.get("/api/events", headers=owner)).json()
        config_events = [e for e in events["events"] if e["kind"] == "config"]
        assert config_events[0]["message"] == "settings changed by token:owner-script: agent.name, web.session_days"
        audit = await (await client.get("/api/settings/audit", headers=owner)).json()
        assert audit["changes"][0]["data"] == {"keys": ["agent.name", "web.session_days"], "by": "token:owner-script"}
        # The version moved on: a save from the first read is refused with what changed, and writes nothing.
        stale = await client.post(
            "/api/settings", json={"version": doc["version"], "set": {"agent.name": "X"}}, headers=owner
        )
        conflict = await stale.json()
        assert stale.status == 409 and conflict["changed"] == ["agent.name", "web.session_days"], conflict
        assert conflict["version"] == said["version"]
        assert load_config(path, data_dir=runtime.config.data_dir).agent.name == "Juniper"

    serve(runtime, scenario, reload)


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"devices.desk_lamp": {"driver": "relay", "pin": 17}}, "devices.desk_lamp.pin", "GPIO 17 is already used"),
        ({"devices.air": {"driver": "bme280", "bus": 1, "address": 0x99}}, "devices.air.address", ""),
        ({"scheduler.timezone": "Europe/Atlantis"}, "scheduler.timezone", "unknown time zone"),
        ({"web.port": "eighty"}, "web.port", "expected an integer"),
        ({"routing.mode": "sometimes"}, "routing.mode", 'expected one of "local_only"'),
    ],
)
def test_bad_input_is_answered_beside_its_field_and_saves_nothing(
    runtime: Runtime, change: dict[str, Any], key: str, words: str
) -> None:
    path = runtime.config.source
    assert path is not None
    before = path.read_text()

    async def scenario(client: TestClient[Any, Any], owner: dict[str, str], state: WebState) -> None:
        doc = await (await client.get("/api/settings", headers=owner)).json()
        answer = await client.post("/api/settings", json={"version": doc["version"], "set": change}, headers=owner)
        said = await answer.json()
        assert answer.status == 400 and said["key"] == key and words in said["error"], said
        events = await (await client.get("/api/settings/audit", headers=owner)).json()
        assert events["changes"] == []

    serve(runtime, scenario)
    assert path.read_text() == before


def test_a_secret_is_never_sent_back_and_a_browser_needs_the_password_again(runtime: Runtime) -> None:
    async def scenario(client: TestClient[Any, Any], owner: dict[str, str], state: WebState) -> None:
        csrf = await login(client)
        browser = {"X-CSRF-Token": csrf}
        doc = await (await client.get("/api/settings")).json()
        body: dict[str, Any] = {"version": doc["version"], "set": {"telegram.token": "4242:very-secret"}}
        refused = await client.post("/api/settings", json=body, headers=browser)
        assert refused.status == 403 and (await refused.json())["key"] == "telegram.token"
        refused = await client.post("/api/settings", json=body | {"password": "wrong one"}, headers=browser)
        assert refused.status == 403
        no_csrf = await client.post("/api/settings", json=body | {"password": PASSWORD})
        assert no_csrf.status == 403
        saved = await client.post("/api/settings", json=body | {"password": PASSWORD}, headers=browser)
        assert saved.status == 200, await saved.text()
        text = await (await client.get("/api/settings")).text()
        assert "4242:very-secret" not in text
        assert rows((await (await client.get("/api/settings")).json())["pages"])["telegram.token"]["set"] is True
        events = await (await client.get("/api/events")).text()
        assert "very-secret" not in events and "telegram.token" in events

    serve(runtime, scenario)
    assert "4242:very-secret" not in (runtime.config.source or Path()).read_text()


def test_only_the_owner_reads_or_changes_settings(runtime: Runtime) -> None:
    async def scenario(client: TestClient[Any, Any], owner: dict[str, str], state: WebState) -> None:
        for scope in ("read", "devices", "chat"):
            token = state.auth.add_token(f"t-{scope}", scope=scope)
            narrow = {"Authorization": f"Bearer {token}"}
            assert (await client.get("/api/settings", headers=narrow)).status == 403
            assert (await client.post("/api/settings", json={}, headers=narrow)).status == 403
            assert (await client.get("/settings", headers=narrow)).status == 403

    serve(runtime, scenario)
