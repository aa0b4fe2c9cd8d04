"""Devices offered from the links in the Settings page's devices tab: Home Assistant's entities (the fake Home
Assistant's REST API, GET /api/states), the kinds picoagent drives only, those configured already marked; one
added through POST /api/settings is then a device of the config."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import StatusSources, WebState
from appliance.config import load_config
from appliance.hardware.remote.hass import HomeAssistantClient
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.fakes.homeassistant import FakeHomeAssistant
from tests.test_homeassistant import fake, hass_config  # noqa: F401  (the fake Home Assistant fixture)


def test_home_assistants_entities_are_offered_and_one_is_added(tmp_path: Path, fake: FakeHomeAssistant) -> None:  # noqa: F811
    fake.add_entity("light.hall", "on", friendly_name="Hall ceiling")
    fake.add_entity("media_player.tv", "off", friendly_name="TV")  # a kind picoagent does not drive
    config = hass_config(tmp_path, fake.url)
    runtime = Runtime.open(config, model=ScriptedModel())
    auth = Auth(runtime.db)
    token = auth.add_token("owner", scope="admin")
    owner = {"Authorization": f"Bearer {token}"}
    state = WebState(runtime, auth, sources=StatusSources(homeassistant=HomeAssistantClient(config.homeassistant)))

    async def main() -> None:
        async with TestClient(TestServer(build_app(state))) as client:
            offered = (await (await client.get("/api/devices/offered", headers=owner)).json())["homeassistant"]
            by_entity = {e["entity"]: e for e in offered}
            assert "media_player.tv" not in by_entity
            assert by_entity["light.hall"] == {
                "entity": "light.hall",
                "name": "Hall ceiling",
                "kind": "dimmer",
                "suggested": "hall",
                "configured": False,
            }
            assert by_entity["light.kitchen"]["configured"] is True
            version = (await (await client.get("/api/settings", headers=owner)).json())["version"]
            change = {"devices.hall": {"driver": "homeassistant", "entity": "light.hall", "room": "hall"}}
            saved = await client.post("/api/settings", json={"version": version, "set": change}, headers=owner)
            assert saved.status == 200, await saved.text()

    try:
        asyncio.run(main())
    finally:
        runtime.close()
    assert config.source is not None
    assert load_config(config.source, data_dir=tmp_path / "data").devices["hall"].entity == "light.hall"


def test_without_home_assistant_nothing_is_offered(tmp_path: Path) -> None:
    from tests.test_web_settings import copy_of_shipped

    runtime = Runtime.open(copy_of_shipped(tmp_path), model=ScriptedModel())
    auth = Auth(runtime.db)
    token = auth.add_token("owner", scope="admin")

    async def main() -> None:
        async with TestClient(TestServer(build_app(WebState(runtime, auth)))) as client:
            answer = await client.get("/api/devices/offered", headers={"Authorization": f"Bearer {token}"})
            assert await answer.json() == {"homeassistant": None}

    try:
        asyncio.run(main())
    finally:
        runtime.close()
