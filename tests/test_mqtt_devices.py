"""Any MQTT device as a named device (``driver: mqtt``) against a real mosquitto: a Zigbee2MQTT-style lamp that
answers its commands, a JSON sensor, a motion sensor, through the same intent fast path, policy, approvals,
events and device list as a GPIO relay; and the value templates picoagent reads."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from appliance.config import CHECKOUT_CONFIG, Config, load_config
from appliance.errors import ConfigError
from appliance.hardware.buses import HardwareError
from appliance.hardware.drivers.base import Reading
from appliance.hardware.drivers.template import TemplateError, parse_template
from tests.helpers import eventually, free_port, picoagent, started
from tests.mqtt_broker import Broker, Watcher

DEVICES = """  garage_light:
    driver: mqtt
    kind: light
    state_topic: zigbee2mqtt/garage_light
    command_topic: zigbee2mqtt/garage_light/set
    value_template: "{{ value_json.state }}"
    brightness_command_topic: zigbee2mqtt/garage_light/set/brightness
    brightness_value_template: "{{ value_json.brightness }}"
    brightness_scale: 254
    room: garage
  heater:
    driver: mqtt
    kind: switch
    state_topic: stat/heater/POWER
    command_topic: cmnd/heater/POWER
    room: garage
    approval: required
  garage_climate:
    driver: mqtt
    kind: sensor
    state_topic: zigbee2mqtt/garage_climate
    value_template: "{{ value_json.temperature | round(1) }}"
    quantity: temperature
    unit: °C
    room: garage
  garage_motion:
    driver: mqtt
    kind: binary_sensor
    state_topic: zigbee2mqtt/garage_motion
    value_template: "{{ value_json.occupancy }}"
    quantity: motion
    room: garage
"""


def mqtt_yaml(port: int, devices: str = DEVICES, enabled: bool = True) -> str:
    """The shipped config with the mqtt: section enabled on 127.0.0.1:``port`` and ``devices`` added."""
    text = CHECKOUT_CONFIG.read_text(encoding="utf-8").replace("preload: true", "preload: false")
    section = "  enabled: false\n  # The broker's host name or address.\n  host: 127.0.0.1\n"
    assert section in text
    port_line = "  # The broker's port: 1883 plain, 8883 with TLS.\n  port: 1883\n"
    on = section.replace("false", str(enabled).lower())
    text = text.replace(section + port_line, on + port_line.replace("1883\n", f"{port}\n"))
    marker = "\n# Sensor conditions"
    return text.replace(marker, devices + marker, 1)


def write_config(folder: Path, port: int, devices: str = DEVICES, enabled: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "picoagent.yaml"
    path.write_text(mqtt_yaml(port, devices, enabled), encoding="utf-8")
    return path


def mqtt_config(tmp_path: Path, port: int, devices: str = DEVICES) -> Config:
    return load_config(write_config(tmp_path, port, devices), data_dir=tmp_path / "data", environ={})


class Lamp:
    """A Zigbee2MQTT-style lamp on the broker: takes ON/OFF and a brightness on its set topics and reports
    its state as JSON (brightness 0-254), as a real one does."""

    def __init__(self, broker: Broker) -> None:
        import paho.mqtt.client as paho

        self.state = {"state": "OFF", "brightness": 254}
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"lamp-{free_port()}")
        subscribed = threading.Event()
        self.client.on_connect = lambda c, *_: c.subscribe("zigbee2mqtt/garage_light/set/#", qos=1)
        self.client.on_subscribe = lambda *_: subscribed.set()
        self.client.on_message = self._command
        self.client.connect("127.0.0.1", broker.port)
        self.client.loop_start()
        assert subscribed.wait(10), "the lamp could not subscribe"

    def _command(self, client: Any, _userdata: object, message: Any) -> None:
        payload = message.payload.decode()
        if message.topic.endswith("/brightness"):
            self.state.update(brightness=int(payload), state="ON")
        else:
            self.state["state"] = payload
        client.publish("zigbee2mqtt/garage_light", json.dumps(self.state), qos=1)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def sent(watcher: Watcher, topic: str) -> list[bytes]:
    """Every payload seen on ``topic``."""
    with watcher.lock:
        return [payload for t, payload, _ in watcher.messages if t == topic]


async def connected(runtime: Any) -> Any:
    """Start the MQTT link the devices were built with (the daemon does this as a service) and wait for it."""
    link = runtime.devices.backend.links["mqtt"]
    await link.start()
    await eventually(lambda: link.connected, 10, "the link connected")
    return link


def with_runtime(tmp_path: Path, broker: Broker, body: Callable[[Any], Awaitable[None]], model: Any = None) -> None:
    """A runtime on the mqtt config with its link connected: ``body(runtime)``, then the link and runtime closed."""
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    runtime = Runtime.open(mqtt_config(tmp_path, broker.port), model=model or ScriptedModel())

    async def main() -> None:
        link = await connected(runtime)
        try:
            await body(runtime)
        finally:
            await link.stop()

    try:
        asyncio.run(main())
    finally:
        runtime.close()


# --- value templates --------------------------------------------------------------------------------------


def test_value_templates_read_the_common_subset_and_refuse_the_rest() -> None:
    z2m = b'{"state": "ON", "brightness": 128, "update": {"state": "idle"}, "list": [1, "2.26"]}'
    assert parse_template("{{ value_json.state }}").render(z2m) == "ON"
    assert parse_template("{{value_json.update.state|upper}}").render(z2m) == "IDLE"
    assert parse_template("{{ value_json['list'][1] | float | round(1) }}").render(z2m) == 2.3
    assert parse_template("{{ value | trim }}").render(b" ON \n") == "ON"
    with pytest.raises(TemplateError, match="the state has no 'temperature'"):
        parse_template("{{ value_json.temperature }}").render(z2m)
    with pytest.raises(TemplateError, match="needs JSON"):
        parse_template("{{ value_json.state }}").render(b"ON")
    for bad, says in [
        ("{{ states('sensor.x') }}", "starts with value or value_json"),
        ("{{ value_json.a | tojson }}", "the filter 'tojson' is not supported"),
        ("{% if value %}on{% endif %}", "expected one {{ ... }} expression"),
        ("{{ value_json.a }} °C", "expected one {{ ... }} expression"),
        ("{{ value_json.a + 1 }}", "'+ 1' is not understood"),
        ("{{ value.state }}", "only value_json has keys"),
    ]:
        with pytest.raises(TemplateError) as caught:
            parse_template(bad)
        assert says in str(caught.value)


# --- the config ---------------------------------------------------------------------------------------------


def test_the_kind_makes_the_device_and_every_caller_sees_it_without_a_broker(tmp_path: Path) -> None:
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    runtime = Runtime.open(mqtt_config(tmp_path, free_port()), model=ScriptedModel())
    try:
        assert runtime.devices is not None
        kinds = {d["name"]: (d["kind"], d["where"]) for d in runtime.devices.describe()}
        assert kinds["garage_light"] == ("dimmer", "mqtt zigbee2mqtt/garage_light")
        assert kinds["heater"] == ("switch", "mqtt stat/heater/POWER")
        assert kinds["garage_climate"] == ("sensor", "mqtt zigbee2mqtt/garage_climate")
        assert kinds["garage_motion"] == ("input", "mqtt zigbee2mqtt/garage_motion")
        infos = {i.name: i for i in runtime.devices.infos()}
        assert infos["garage_climate"].quantities == ("temperature",) and infos["garage_motion"].allowed == ("read",)
        # No broker connection here: reads say why (unavailable), writes are refused, nothing is dropped silently.
        with pytest.raises(HardwareError, match="no state received yet on zigbee2mqtt/garage_light: not connected"):
            runtime.devices.read_sync("garage_light")
        with pytest.raises(HardwareError, match=r"not connected to the MQTT broker at mqtt://127\.0\.0\.1:"):
            runtime.devices.set_sync("garage_light", "on", requested_by="test")
    finally:
        runtime.close()


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ("  x:\n    driver: mqtt\n    command_topic: a/set\n", "devices.x.kind: a mqtt device needs a kind"),
        ("  x:\n    driver: mqtt\n    kind: switch\n    state_topic: a\n", "devices.x.command_topic: an mqtt switch"),
        ("  x:\n    driver: mqtt\n    kind: sensor\n", "devices.x.state_topic: an mqtt sensor needs the topic"),
        ("  x:\n    driver: mqtt\n    kind: sensor\n    state_topic: a/+\n", "with no + or # wildcard"),
        ("  x:\n    driver: mqtt\n    kind: switch\n    command_topic: a\n    pin: 5\n", "devices.x.pin: an mqtt"),
        (
            "  x:\n    driver: mqtt\n    kind: sensor\n    state_topic: a\n"
            '    value_template: "{{ value_json.t|tojson }}"\n',
            "devices.x.value_template: the filter 'tojson' is not supported",
        ),
        ("  x:\n    driver: relay\n    pin: 5\n    state_topic: a\n", "devices.x.state_topic: only an mqtt device"),
        (
            "  x:\n    driver: mqtt\n    kind: sensor\n    state_topic: a\n    allow: [read, set]\n",
            "devices.x.allow: an mqtt sensor cannot be set",
        ),
    ],
)
def test_bad_mqtt_devices_are_refused_by_key(tmp_path: Path, devices: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path, 1883, devices), environ={})
    assert message in caught.value.message


def test_an_mqtt_device_needs_the_mqtt_section_enabled(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path, 1883, enabled=False), environ={})
    assert caught.value.message == "devices.garage_light: an mqtt device needs the mqtt: section enabled"
    assert "mqtt.enabled: true" in (caught.value.fix or "")


# --- over a real broker ----------------------------------------------------------------------------------------


def test_turn_on_the_garage_light_publishes_on_once_and_reads_the_json_state_back(
    tmp_path: Path, broker: Broker, watcher: Watcher
) -> None:
    from appliance.llm.scripted import ScriptedModel

    lamp = Lamp(broker)
    model = ScriptedModel()

    async def body(runtime: Any) -> None:
        devices = runtime.devices
        record = await runtime.agent.turn("turn on the garage light")
        assert record.route == "intent", record.text
        assert record.actions[0].arguments == {"name": "garage_light", "value": "on"} and record.actions[0].ok
        assert sent(watcher, "zigbee2mqtt/garage_light/set") == [b"ON"]  # once, the plain ON payload
        assert model.history == []  # no model call at all
        # The lamp answered with its JSON state; the read goes through the value templates.
        assert await devices.read("garage_light") == [Reading("state", True, ""), Reading("brightness", 100.0, "%")]

        dimmed = await runtime.agent.turn("set the garage light to 50%")
        assert dimmed.route == "intent", dimmed.text
        assert sent(watcher, "zigbee2mqtt/garage_light/set/brightness") == [b"127"]  # 50% of 254
        assert await devices.read("garage_light") == [Reading("state", True, ""), Reading("brightness", 50.0, "%")]

        # The lamp answers each of the three commands with its state; the last of them may still be on its way
        # (two clients' messages have no order between them): let them all arrive before the next state.
        reports = lambda: [m for m in watcher.messages if m[0] == "zigbee2mqtt/garage_light"]  # noqa: E731
        await eventually(lambda: len(reports()) >= 3, 5, "the lamp's three reports")
        # A state the device reports by itself (someone used its own switch) is what the next read says.
        watcher.publish("zigbee2mqtt/garage_light", '{"state":"ON","brightness":64,"linkquality":80}')
        await eventually(lambda: devices.read_sync("garage_light")[1].value == 25.0, 5, "the reported state")
        watcher.publish("zigbee2mqtt/garage_light", '{"state":"OFF","brightness":64}')
        await eventually(lambda: devices.read_sync("garage_light")[0].value is False, 5, "the light reported off")
        assert devices.read_sync("garage_light")[1] == Reading("brightness", 0.0, "%")
        assert sent(watcher, "zigbee2mqtt/garage_light/set") == [b"ON", b"ON"]  # nothing retained, nothing else
        commands = [m for m in watcher.messages if m[0].startswith("zigbee2mqtt/garage_light/set")]
        assert commands and not any(retained for _, _, retained in commands)

    try:
        with_runtime(tmp_path, broker, body, model)
    finally:
        lamp.close()


def test_a_sensor_reads_its_value_with_its_unit_and_a_bad_state_is_a_clear_error(
    tmp_path: Path, broker: Broker, watcher: Watcher
) -> None:
    async def body(runtime: Any) -> None:
        devices = runtime.devices
        with pytest.raises(HardwareError, match="no state received yet on zigbee2mqtt/garage_climate"):
            await devices.read("garage_climate")
        watcher.publish("zigbee2mqtt/garage_climate", '{"temperature": 21.46, "humidity": 40, "battery": 97}')
        await eventually(lambda: _readable(devices, "garage_climate"), 5, "the sensor's state")
        assert await devices.read("garage_climate") == [Reading("temperature", 21.5, "°C")]
        record = await runtime.agent.turn("what is the garage temperature?")
        assert record.route == "intent" and "21.5" in record.text and "°C" in record.text, record.text

        watcher.publish("zigbee2mqtt/garage_climate", '{"humidity": 41}')  # this message has no temperature
        await eventually(lambda: not _readable(devices, "garage_climate"), 5, "the bad state")
        with pytest.raises(HardwareError, match="the state has no 'temperature'"):
            await devices.read("garage_climate")

    with_runtime(tmp_path, broker, body)


def _readable(devices: Any, name: str) -> bool:
    try:
        devices.read_sync(name)
    except HardwareError:
        return False
    return True


def test_a_binary_sensor_message_raises_the_devices_event_once_per_change(
    tmp_path: Path, broker: Broker, watcher: Watcher
) -> None:
    events: list[tuple[str, str]] = []

    async def body(runtime: Any) -> None:
        devices = runtime.devices
        devices.listeners.append(lambda name, event: events.append((name, event)))
        watcher.publish("zigbee2mqtt/garage_motion", '{"occupancy": true, "battery": 90}')
        await eventually(lambda: events, 5, "the motion event")
        watcher.publish("zigbee2mqtt/garage_motion", '{"occupancy": true, "battery": 89}')  # no change of state
        watcher.publish("zigbee2mqtt/garage_motion", '{"occupancy": false, "battery": 89}')
        await eventually(lambda: len(events) == 2, 5, "the still event")
        assert events == [("garage_motion", "motion"), ("garage_motion", "still")]
        assert await devices.read("garage_motion") == [Reading("state", False, "")]

    with_runtime(tmp_path, broker, body)


def test_an_mqtt_device_needing_approval_waits_and_then_publishes_once(
    tmp_path: Path, broker: Broker, watcher: Watcher
) -> None:
    async def body(runtime: Any) -> None:
        devices = runtime.devices
        watcher.publish("stat/heater/POWER", "OFF")  # Tasmota's plain state
        await eventually(lambda: _readable(devices, "heater"), 5, "the heater's state")
        result = await devices.set("heater", "on", requested_by="test")
        assert not result.done and result.pending is not None
        assert sent(watcher, "cmnd/heater/POWER") == []  # nothing happened yet
        assert await devices.read("heater") == [Reading("state", False, "")]
        # This heater does not report back: after its wait the write takes it as sent.
        done = await devices.decide(result.pending.id, True, "owner")
        assert sent(watcher, "cmnd/heater/POWER") == [b"ON"]
        assert getattr(done, "state", None) == [Reading("state", True, "")]

    with_runtime(tmp_path, broker, body)


def test_the_daemon_shares_one_link_between_the_devices_and_discovery(
    tmp_path: Path, broker: Broker, watcher: Watcher
) -> None:
    from appliance.daemon import Daemon
    from appliance.hardware.events import device_history

    config = mqtt_config(tmp_path, broker.port)
    lamp = Lamp(broker)

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        try:
            await started(daemon, served)
            link = daemon.links["mqtt"]
            assert daemon.mqtt is not None and daemon.mqtt.link is link
            assert daemon.runtime.devices is not None and daemon.runtime.devices.backend.links["mqtt"] is link
            await eventually(lambda: watcher.latest("picoagent/status") == b"online", 10, "online")
            discovery = {t for t, _ in daemon.mqtt.discovery_messages()}
            await eventually(lambda: discovery <= watcher.topics("homeassistant/"), 10, "discovery")
            # Devices on the broker already have their entities: discovery does not announce them twice.
            assert discovery and not [t for t in discovery if "garage" in t]
            # A write through the device registry goes out on the shared link, to the lamp's own topic.
            await daemon.runtime.devices.set("garage_light", True, requested_by="test")
            await eventually(lambda: sent(watcher, "zigbee2mqtt/garage_light/set") == [b"ON"], 10, "the lamp command")
            watcher.publish("zigbee2mqtt/garage_motion", '{"occupancy": true}')
            db = daemon.runtime.db
            await eventually(lambda: device_history(db, "garage_motion"), 10, "the motion event stored")
            assert [e.data["event"] for e in device_history(db, "garage_motion")] == ["motion"]
            assert link.status()["reconnects"] == 0
        finally:
            daemon.stopping.set()
            assert await served == 0
        await eventually(lambda: watcher.latest("picoagent/status") == b"offline", 10, "offline at stop")
        assert not link.connected

    try:
        asyncio.run(main())
    finally:
        lamp.close()


def test_devices_list_without_a_daemon_needs_no_broker(tmp_path: Path) -> None:
    config = write_config(tmp_path, free_port())
    out = picoagent("--config", config, "--data-dir", tmp_path / "data", "devices", "list", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split()[1:4] for line in out.stdout.splitlines() if not line.startswith(" ")}
    assert rows["garage_light"] == ["dimmer", "mqtt", "zigbee2mqtt/garage_light"]
    assert rows["garage_motion"] == ["input", "mqtt", "zigbee2mqtt/garage_motion"]
    assert rows["porch_light"] == ["switch", "gpio", "17"]
    assert "no state received yet on zigbee2mqtt/garage_climate" in out.stdout
    # the columns line up however long a topic is (walk 10: "mqtt zigbee2mqtt/garage_climate · garage" ran on)
    heads = [line for line in out.stdout.splitlines() if not line.startswith(" ") and " · " in line]
    assert len(heads) >= 2 and len({line.index(" · ") for line in heads}) == 1, heads
