"""Devices offered from the links in the Settings page's devices tab: Home Assistant's entities (the fake Home
Assistant's REST API, GET /api/states), the kinds picoagent drives only, those configured already marked; one
added through POST /api/settings is then a device of the config."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import StatusSources, WebState
from appliance.config import load_config
from appliance.hardware.remote.hass import HomeAssistantClient
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.fakes.homeassistant import FakeHomeAssistant
from tests.helpers import started
from tests.mqtt_broker import Broker, Watcher
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
            assert await answer.json() == {"homeassistant": None, "mqtt": None}

    try:
        asyncio.run(main())
    finally:
        runtime.close()


def test_things_announced_on_the_broker_are_offered_as_mqtt_devices(tmp_path: Path, broker: Broker) -> None:
    """A Zigbee2MQTT lamp's and a Tasmota plug's discovery configs (retained, one abbreviated as Home Assistant
    allows), and a camera picoagent cannot drive: the two are offered as ready mqtt devices, picoagent's own
    announcements are not, and one added through POST /api/settings is a device of the file."""
    from appliance.daemon import Daemon
    from tests.test_mqtt_devices import write_config

    lamp = {
        "name": "Garage light",
        "state_topic": "zigbee2mqtt/garage_light",
        "command_topic": "zigbee2mqtt/garage_light/set",
        "value_template": "{{ value_json.state }}",
        "brightness_command_topic": "zigbee2mqtt/garage_light/set/brightness",
        "brightness_scale": 254,
    }
    plug = {"name": "Kettle plug", "~": "tasmota/kettle", "stat_t": "~/stat/POWER", "cmd_t": "~/cmnd/POWER"}
    watcher = Watcher(broker, "#")
    watcher.publish("homeassistant/light/0x00158d/light/config", json.dumps(lamp), retain=True)
    watcher.publish("homeassistant/switch/kettle_plug/config", json.dumps(plug), retain=True)
    watcher.publish("homeassistant/camera/door/config", json.dumps({"topic": "cam/door"}), retain=True)
    config = load_config(write_config(tmp_path, broker.port, devices=""), data_dir=tmp_path / "data", environ={})

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        try:
            await started(daemon, served)
            assert daemon.state is not None
            token = daemon.state.auth.add_token("owner", scope="admin")
            async with aiohttp.ClientSession(
                f"http://127.0.0.1:{daemon.web.port}", headers={"Authorization": f"Bearer {token}"}
            ) as http:
                offered = (await (await http.get("/api/devices/offered")).json())["mqtt"]
                by_name = {thing["name"]: thing for thing in offered}
                assert set(by_name) == {"Garage light", "Kettle plug"}, offered  # not the camera, not picoagent's
                assert by_name["Kettle plug"]["device"] == {
                    "driver": "mqtt",
                    "kind": "switch",
                    "state_topic": "tasmota/kettle/stat/POWER",
                    "command_topic": "tasmota/kettle/cmnd/POWER",
                }
                light = by_name["Garage light"]
                assert light["kind"] == "light" and light["device"]["brightness_scale"] == 254
                version = (await (await http.get("/api/settings")).json())["version"]
                change = {"devices.garage_light": {**light["device"], "room": "garage"}}
                async with http.post("/api/settings", json={"version": version, "set": change}) as saved:
                    assert saved.status == 200, await saved.text()
                again = (await (await http.get("/api/devices/offered")).json())["mqtt"]
                assert {t["name"]: t["configured"] for t in again} == {"Garage light": True, "Kettle plug": False}
        finally:
            daemon.stopping.set()
            await served

    try:
        asyncio.run(main())
    finally:
        watcher.close()
    assert config.source is not None
    saved = load_config(config.source, data_dir=tmp_path / "data", environ={})
    assert saved.devices["garage_light"].command_topic == "zigbee2mqtt/garage_light/set"
