"""Home Assistant's devices in picoagent: ``driver: homeassistant`` against a fake Home Assistant that speaks
the documented REST and WebSocket payloads (tests/fakes/homeassistant.py), through the same policy, intent
fast path, approvals, rate limits, events and device lists as a GPIO relay."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.config import CHECKOUT_CONFIG, Config, load_config
from appliance.errors import ConfigError, PicoagentError, RateLimited
from appliance.hardware.buses import HardwareError
from appliance.hardware.drivers.base import Reading
from tests.fakes.homeassistant import TOKEN, FakeHomeAssistant, ServiceCall
from tests.helpers import eventually, free_port, picoagent, started

ROOT = Path(__file__).resolve().parent.parent

DEVICES = """  kitchen_light:
    driver: homeassistant
    entity: light.kitchen
    room: kitchen
  kettle:
    driver: homeassistant
    entity: switch.kettle
    room: kitchen
    approval: required
  outdoor:
    driver: homeassistant
    entity: sensor.outdoor_temperature
    room: garden
  front_door:
    driver: homeassistant
    entity: binary_sensor.front_door
    room: hallway
"""


def hass_yaml(url: str, devices: str = DEVICES, token: str = "${HASS_TOKEN}") -> str:
    """The shipped config with the homeassistant: section enabled at ``url`` and ``devices`` added."""
    text = CHECKOUT_CONFIG.read_text(encoding="utf-8").replace("preload: true", "preload: false")
    section = "homeassistant:\n  # Reach Home Assistant at all"
    assert section in text and "  enabled: false\n  # Home Assistant's base URL" in text
    text = text.replace(
        "  enabled: false\n  # Home Assistant's base URL (no /api).\n  url: http://homeassistant.local:8123",
        f"  enabled: true\n  # Home Assistant's base URL (no /api).\n  url: {url}",
    )
    never = "here, never the token itself.\n  token: "
    text = text.replace(never + '""', never + token)
    text = text.replace("  timeout_s: 10\n", "  timeout_s: 3\n")
    marker = "\n# Sensor conditions"
    return text.replace(marker, devices + marker, 1)


def write_config(folder: Path, url: str, devices: str = DEVICES, token: str = "${HASS_TOKEN}") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "secrets.env").write_text(f"HASS_TOKEN={TOKEN}\n")
    path = folder / "picoagent.yaml"
    path.write_text(hass_yaml(url, devices, token))
    return path


def hass_config(tmp_path: Path, url: str, devices: str = DEVICES) -> Config:
    return load_config(write_config(tmp_path, url, devices), data_dir=tmp_path / "data", environ={})


@pytest.fixture
def fake() -> Iterator[FakeHomeAssistant]:
    with FakeHomeAssistant() as hass:
        hass.add_entity("light.kitchen", "off", friendly_name="Kitchen", supported_color_modes=["brightness"])
        hass.add_entity("switch.kettle", "off", friendly_name="Kettle")
        hass.add_entity(
            "sensor.outdoor_temperature",
            "12.5",
            unit_of_measurement="°C",
            device_class="temperature",
            state_class="measurement",
        )
        hass.add_entity("binary_sensor.front_door", "off", device_class="door")
        yield hass


@pytest.fixture
def config(tmp_path: Path, fake: FakeHomeAssistant) -> Config:
    return hass_config(tmp_path, fake.url)


# --- the config ------------------------------------------------------------------------------------------


def test_the_entity_domain_makes_the_kind_and_every_caller_sees_it(config: Config) -> None:
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    runtime = Runtime.open(config, model=ScriptedModel())
    try:
        assert runtime.devices is not None
        kinds = {d["name"]: (d["kind"], d["where"]) for d in runtime.devices.describe()}
        assert kinds["kitchen_light"] == ("dimmer", "homeassistant light.kitchen")
        assert kinds["kettle"] == ("switch", "homeassistant switch.kettle")
        assert kinds["outdoor"] == ("sensor", "homeassistant sensor.outdoor_temperature")
        assert kinds["front_door"] == ("input", "homeassistant binary_sensor.front_door")
        assert kinds["porch_light"] == ("switch", "gpio 17") and kinds["living_room"][1] == "i2c-1 0x76"
        infos = {i.name: i for i in runtime.devices.infos()}
        assert infos["outdoor"].quantities == ("temperature",) and infos["kitchen_light"].allowed == ("read", "set")
        assert infos["front_door"].allowed == ("read",)
    finally:
        runtime.close()


@pytest.mark.parametrize(
    ("devices", "enabled", "message"),
    [
        ("  x:\n    driver: homeassistant\n", True, "devices.x.entity: a homeassistant device needs an entity"),
        ("  x:\n    driver: homeassistant\n    entity: kitchen\n", True, "devices.x.entity: expected a Home Assistant"),
        ("  x:\n    driver: homeassistant\n    entity: climate.hall\n", True, "does not drive climate entities"),
        ("  x:\n    driver: homeassistant\n    entity: light.k\n    pin: 5\n", True, "devices.x.pin: a homeassistant"),
        ("  x:\n    driver: homeassistant\n    entity: light.k\n", False, "needs the homeassistant: section enabled"),
        ("  x:\n    driver: relay\n    pin: 5\n    entity: light.k\n", True, "devices.x.entity: only a homeassistant"),
        (
            "  x:\n    driver: homeassistant\n    entity: sensor.t\n    allow: [read, set]\n",
            True,
            "devices.x.allow: sensor.t cannot be set",
        ),
    ],
)
def test_bad_homeassistant_devices_are_refused_by_key(
    tmp_path: Path, devices: str, enabled: bool, message: str
) -> None:
    text = hass_yaml("http://127.0.0.1:9", devices)
    if not enabled:
        on = "  enabled: true\n  # Home Assistant's base URL"
        text = text.replace(on, on.replace("true", "false"))
    path = tmp_path / "picoagent.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={"HASS_TOKEN": TOKEN})
    assert message in caught.value.message and TOKEN not in caught.value.for_people()


def test_an_enabled_section_needs_a_token(tmp_path: Path) -> None:
    path = tmp_path / "picoagent.yaml"
    path.write_text(hass_yaml("http://127.0.0.1:9", "", token='""'))
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert caught.value.message.startswith("homeassistant.token:") and "${HASS_TOKEN}" in (caught.value.fix or "")


# --- the intent fast path, dimming, reading ------------------------------------------------------------------


def test_turn_on_the_kitchen_light_calls_light_turn_on_once_with_no_model(
    config: Config, fake: FakeHomeAssistant
) -> None:
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    model = ScriptedModel()
    runtime = Runtime.open(config, model=model)
    try:
        record = asyncio.run(runtime.agent.turn("turn on the kitchen light"))
        assert record.route == "intent", record.text
        assert fake.calls == [ServiceCall("light", "turn_on", {"entity_id": "light.kitchen"})]
        assert record.actions[0].arguments == {"name": "kitchen_light", "value": "on"} and record.actions[0].ok
        assert fake.states["light.kitchen"]["state"] == "on"
        assert model.history == []  # no model call at all

        dimmed = asyncio.run(runtime.agent.turn("set the kitchen light to 40%"))
        assert dimmed.route == "intent", dimmed.text
        assert fake.calls[1] == ServiceCall("light", "turn_on", {"entity_id": "light.kitchen", "brightness_pct": 40})
        assert runtime.devices is not None
        state = runtime.devices.read_sync("kitchen_light")
        assert state == [Reading("state", True, ""), Reading("brightness", 40.0, "%")]
        assert len(fake.calls) == 2
    finally:
        runtime.close()


def test_a_sensor_reads_its_value_with_the_unit_and_quantity_home_assistant_gives(
    config: Config, fake: FakeHomeAssistant
) -> None:
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    runtime = Runtime.open(config, model=ScriptedModel())
    try:
        assert runtime.devices is not None
        assert runtime.devices.read_sync("outdoor") == [Reading("temperature", 12.5, "°C")]
        record = asyncio.run(runtime.agent.turn("what is the outdoor temperature?"))
        assert record.route == "intent" and "12.5" in record.text and "°C" in record.text, record.text
        assert fake.calls == []  # reading calls no service
    finally:
        runtime.close()


# --- the policy: approvals and the rate limit ----------------------------------------------------------------


def test_a_homeassistant_device_needing_approval_waits_and_then_acts_once(
    config: Config, fake: FakeHomeAssistant
) -> None:
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    runtime = Runtime.open(config, model=ScriptedModel())
    try:
        devices = runtime.devices
        assert devices is not None
        result = devices.set_sync("kettle", "on", requested_by="test")
        assert not result.done and result.pending is not None
        assert fake.calls == [] and fake.states["switch.kettle"]["state"] == "off"  # nothing happened yet
        done = devices.decide_sync(result.pending.id, True, "owner")
        assert fake.calls == [ServiceCall("switch", "turn_on", {"entity_id": "switch.kettle"})]
        assert getattr(done, "state", None) == [Reading("state", True, "")]
    finally:
        runtime.close()


def test_writes_to_a_homeassistant_device_are_rate_limited(tmp_path: Path, fake: FakeHomeAssistant) -> None:
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    limited = DEVICES.replace("    room: kitchen\n  kettle:", "    room: kitchen\n    writes_per_minute: 2\n  kettle:")
    runtime = Runtime.open(hass_config(tmp_path, fake.url, limited), model=ScriptedModel())
    try:
        assert runtime.devices is not None
        runtime.devices.set_sync("kitchen_light", "on", requested_by="test")
        runtime.devices.set_sync("kitchen_light", "off", requested_by="test")
        with pytest.raises(RateLimited, match="kitchen_light was switched 2 times"):
            runtime.devices.set_sync("kitchen_light", "on", requested_by="test")
        assert [c.service for c in fake.calls] == ["turn_on", "turn_off"]
    finally:
        runtime.close()


def test_a_scheduled_job_dims_a_homeassistant_light(config: Config, fake: FakeHomeAssistant) -> None:
    from appliance.config import CronJob
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime
    from appliance.schedule.jobs import make_job_runner

    runtime = Runtime.open(config, model=ScriptedModel())
    try:
        run = make_job_runner(None, runtime.devices, None)
        said = asyncio.run(run(CronJob(id="evening", schedule="daily 19:00", device="kitchen_light", value="30%")))
        assert fake.calls == [ServiceCall("light", "turn_on", {"entity_id": "light.kitchen", "brightness_pct": 30})]
        assert said == "The kitchen light is on, brightness 30 %"  # stored as 76 of 255
    finally:
        runtime.close()


# --- failures are clear, never a crash -------------------------------------------------------------------------


def test_unreachable_refused_and_unknown_are_clear_errors(tmp_path: Path, fake: FakeHomeAssistant) -> None:
    from appliance.config import HomeAssistantConfig
    from appliance.hardware.remote.hass import AuthRefused, HomeAssistantClient

    down = HomeAssistantClient(HomeAssistantConfig(enabled=True, url=f"http://127.0.0.1:{free_port()}", token=TOKEN))
    with pytest.raises(HardwareError) as unreachable:
        down.fetch_state("light.kitchen")
    assert "cannot reach Home Assistant at http://127.0.0.1:" in unreachable.value.message
    assert "homeassistant.url" in (unreachable.value.fix or "")
    wrong = HomeAssistantClient(HomeAssistantConfig(enabled=True, url=fake.url, token="not-the-token-xyz"))
    with pytest.raises(AuthRefused) as refused:
        wrong.check_api()
    assert "refused the token (401)" in refused.value.message and "HASS_TOKEN" in (refused.value.fix or "")
    assert "not-the-token-xyz" not in refused.value.for_people()
    right = HomeAssistantClient(HomeAssistantConfig(enabled=True, url=fake.url, token=TOKEN))
    with pytest.raises(HardwareError, match=r"Home Assistant has no entity light\.nowhere"):
        right.fetch_state("light.nowhere")


def test_with_home_assistant_down_the_devices_show_as_unavailable(tmp_path: Path) -> None:
    from appliance.hardware.states import device_states
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    runtime = Runtime.open(hass_config(tmp_path, f"http://127.0.0.1:{free_port()}"), model=ScriptedModel())
    try:
        listed = {d["name"]: d for d in asyncio.run(device_states(runtime.devices, {}))}
        assert listed["kitchen_light"]["error"].startswith("cannot reach Home Assistant at http://127.0.0.1:")
        assert listed["porch_light"]["readings"]  # the Pi's own devices go on
        with pytest.raises(PicoagentError, match="cannot reach Home Assistant"):
            runtime.devices.set_sync("kitchen_light", "on", requested_by="test")  # type: ignore[union-attr]
    finally:
        runtime.close()


# --- the daemon: the WebSocket, events, the device list --------------------------------------------------------


def test_the_daemon_keeps_states_over_the_websocket_and_a_door_sensor_raises_its_event(
    tmp_path: Path, fake: FakeHomeAssistant
) -> None:
    from appliance.daemon import Daemon
    from appliance.hardware.events import device_history

    config = hass_config(tmp_path, fake.url)

    async def main() -> Any:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        try:
            await started(daemon, served)
            assert "appliance.hardware.remote.hass" in sys.modules
            client = daemon.links["homeassistant"]
            await eventually(lambda: client.connected, 10, "the WebSocket subscribed")
            fake.set_state("binary_sensor.front_door", "on")
            db = daemon.runtime.db
            await eventually(lambda: device_history(db, "front_door"), 10, "the door's event")
            assert [e.data["event"] for e in device_history(db, "front_door")] == ["opened"]
            # A state Home Assistant pushed is what a read returns, with no request of its own.
            fake.set_state("sensor.outdoor_temperature", "14.0")
            await eventually(lambda: client.state("sensor.outdoor_temperature")["state"] == "14.0", 10, "the new state")
            assert daemon.runtime.devices is not None
            assert await daemon.runtime.devices.read("outdoor") == [Reading("temperature", 14.0, "°C")]
            # `picoagent devices list` through the daemon: where each device lives, as a person reads it.
            listed = await asyncio.to_thread(
                picoagent, "--config", config.source, "--data-dir", tmp_path / "data", "devices", "list", cwd=tmp_path
            )
            assert listed.returncode == 0, listed.stderr
            lines = listed.stdout.splitlines()
            kitchen = ["kitchen_light", "dimmer", "homeassistant", "light.kitchen"]
            assert any(line.split()[:4] == kitchen for line in lines)
            assert any(line.split()[:4] == ["porch_light", "switch", "gpio", "17"] for line in lines)
            assert "    outdoor: temperature: 14 °C" in lines
            shown = await asyncio.to_thread(
                picoagent, "--config", config.source, "--data-dir", tmp_path / "data", "status", cwd=tmp_path
            )
            assert f"home assistant: {fake.url} connected" in shown.stdout.splitlines(), shown.stdout
        finally:
            daemon.stopping.set()
            await served
        return client

    client = asyncio.run(main())
    assert not client.connected and fake.subscribers == []


def test_a_daemon_with_home_assistant_down_starts_serves_and_says_why(tmp_path: Path) -> None:
    from appliance.daemon import Daemon
    from appliance.hardware.states import device_states

    config = hass_config(tmp_path, f"http://127.0.0.1:{free_port()}")

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        try:
            await started(daemon, served)
            client = daemon.links["homeassistant"]
            await eventually(lambda: client.last_error, 10, "the failed connection noted")
            assert not client.connected and "Cannot connect" in client.status()["last_error"]
            listed = {d["name"]: d for d in await device_states(daemon.runtime.devices, {})}
            assert "cannot reach Home Assistant" in listed["kitchen_light"]["error"]
            assert listed["fan"]["readings"] and not served.done()  # the rest goes on
            # `picoagent status` says so, as a person reads it.
            shown = await asyncio.to_thread(
                picoagent, "--config", config.source, "--data-dir", tmp_path / "data", "status", cwd=tmp_path
            )
            assert shown.returncode == 0, shown.stderr
            line = next(x for x in shown.stdout.splitlines() if x.startswith("home assistant:"))
            assert (
                line.startswith(f"home assistant: {config.homeassistant.url} not connected (")
                and "Cannot connect" in line
            )
        finally:
            daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())


def test_the_websocket_comes_back_after_home_assistant_restarts_and_reports_what_changed_meanwhile(
    fake: FakeHomeAssistant,
) -> None:
    from appliance.config import HomeAssistantConfig
    from appliance.hardware.remote.hass import HomeAssistantClient

    client = HomeAssistantClient(HomeAssistantConfig(enabled=True, url=fake.url, token=TOKEN))
    changes: list[tuple[str | None, str]] = []
    client.watch("binary_sensor.front_door", lambda old, new: changes.append((old and old["state"], new["state"])))

    async def main() -> None:
        await client.start()
        try:
            await eventually(lambda: client.connected, 10, "the first connection")
            await asyncio.to_thread(fake.stop)  # Home Assistant restarts
            await eventually(lambda: not client.connected, 10, "the connection seen lost")
            assert client.fetch_state is not None and "cannot reach" in _error_of(client)
            fake.add_entity("binary_sensor.front_door", "on", device_class="door")  # opened while it was down
            await asyncio.to_thread(fake.start)  # on the same port
            await eventually(lambda: client.connected, 15, "the connection back")
            await eventually(lambda: changes, 5, "the change made while disconnected")
        finally:
            await client.stop()

    asyncio.run(main())
    assert changes == [("off", "on")] and client.reconnects >= 1


def _error_of(client: Any) -> str:
    """What a read says while Home Assistant is down (REST, since the WebSocket is not connected)."""
    try:
        client.state("binary_sensor.front_door")
    except HardwareError as exc:
        return exc.message
    return ""


# --- the command line: devices list and doctor -------------------------------------------------------------------


def test_devices_list_without_a_daemon_says_where_each_device_lives(tmp_path: Path, fake: FakeHomeAssistant) -> None:
    config = write_config(tmp_path, fake.url)
    out = picoagent("--config", config, "--data-dir", tmp_path / "data", "devices", "list", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split()[1:4] for line in out.stdout.splitlines() if not line.startswith(" ")}
    assert rows["porch_light"] == ["switch", "gpio", "17"]
    assert rows["living_room"] == ["sensor", "i2c-1", "0x76"]
    assert rows["soil"] == ["sensor", "spi", "0.0"] and " spi 0.0 ch0 " in out.stdout
    assert rows["kitchen_light"] == ["dimmer", "homeassistant", "light.kitchen"]
    assert rows["outdoor"] == ["sensor", "homeassistant", "sensor.outdoor_temperature"]
    assert "    outdoor: temperature: 12.5 °C" in out.stdout.splitlines()


def test_doctor_checks_the_api_the_token_and_every_entity(tmp_path: Path, fake: FakeHomeAssistant) -> None:
    good = picoagent("--config", write_config(tmp_path / "good", fake.url), "doctor", cwd=tmp_path)
    assert f"[ok  ] home assistant: {fake.url}: API running." in good.stdout, good.stdout
    assert "[ok  ] device kitchen_light: light.kitchen is off" in good.stdout

    missing = DEVICES + "  garage:\n    driver: homeassistant\n    entity: cover_switch.garage\n"
    missing = missing.replace("cover_switch.garage", "switch.garage")
    out = picoagent("--config", write_config(tmp_path / "missing", fake.url, missing), "doctor", cwd=tmp_path)
    assert "[FAIL] device garage: Home Assistant has no entity switch.garage" in out.stdout, out.stdout

    wrong = write_config(tmp_path / "wrong", fake.url, token="wrong-token-abcdef")
    out = picoagent("--config", wrong, "doctor", cwd=tmp_path)
    assert f"[FAIL] home assistant: Home Assistant at {fake.url} refused the token (401)" in out.stdout, out.stdout
    assert "fix: make a long-lived access token" in out.stdout and "wrong-token-abcdef" not in out.stdout

    down = write_config(tmp_path / "down", f"http://127.0.0.1:{free_port()}")
    out = picoagent("--config", down, "doctor", cwd=tmp_path)
    assert "[FAIL] home assistant: cannot reach Home Assistant at http://127.0.0.1:" in out.stdout, out.stdout
    assert "fix: check homeassistant.url" in out.stdout and out.returncode == 1
