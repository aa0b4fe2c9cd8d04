"""The discovery payloads' values against what the bridge really publishes and accepts, over a real mosquitto.

tests/test_mqtt_daemon.py checks each payload's keys against Home Assistant's schema; this file checks
what the values make Home Assistant do. :class:`HomeAssistantView` reads the retained discovery messages
and does with them what Home Assistant's MQTT platforms do (components/mqtt/ in home-assistant/core):
it renders their templates with Jinja2 (``value`` and ``value_json``, as Home Assistant renders them),
compares a switch's rendered state with ``state_on``/``state_off``, a light's with ``payload_on``/
``payload_off`` and its brightness through ``brightness_scale``, and sends the commands Home Assistant
sends (``payload_on`` on the command topic; a light's brightness scaled to ``brightness_scale``, with
``payload_on`` first, last or not at all as ``on_command_type`` says). Then the real daemon's devices
(the checkout's plus a dimmer, a motion sensor, a read-only relay, a light sensor and an SHT31, on the
simulated backend) must have moved, and the states it publishes must read back as the discovered values
say. One changed value (a switch's ``state_on`` of "on") fails here.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path
from typing import Any

import jinja2  # what Home Assistant renders templates with (installed with llama-cpp-python)

from appliance.config import load_config
from appliance.hardware.drivers.units import SENSOR_UNITS
from tests.helpers import eventually, started
from tests.mqtt_broker import Broker, Watcher
from tests.test_mqtt_devices import write_config

EXTRA = """  desk_lamp:
    driver: led
    pin: 18
    room: office
  hall_motion:
    driver: motion
    pin: 23
    room: hallway
  boiler:
    driver: relay
    pin: 24
    allow: [read]
  office_light:
    driver: bh1750
    bus: 1
    address: 0x23
    room: office
  bathroom:
    driver: sht31
    bus: 1
    address: 0x44
    room: bathroom
"""
KEY = re.compile(r"value_json\.([a-z0-9_]+)")
WAIT_S = 5.0


class HomeAssistantView:
    """The discovered entities as Home Assistant's MQTT integration reads and drives them."""

    def __init__(self, watcher: Watcher, topics: set[str]) -> None:
        self.watcher = watcher
        self.entities = {t: json.loads(watcher.latest(t) or b"{}") for t in topics}
        self.jinja = jinja2.Environment(undefined=jinja2.StrictUndefined)
        self.brightness: dict[str, int] = {}  # a light's last brightness (0-255), as Home Assistant keeps it

    def of(self, platform: str) -> list[dict[str, Any]]:
        return [p for t, p in sorted(self.entities.items()) if t.split("/")[1] == platform]

    def render(self, template: str | None, topic: str) -> str:
        """The template on the topic's retained state, as Home Assistant renders it (no template: the payload)."""
        raw = self.watcher.latest(topic)
        assert raw is not None, f"nothing was published on {topic}"
        value = raw.decode()
        if not template:
            return value
        try:
            value_json = json.loads(value)
        except ValueError:
            value_json = None
        return str(self.jinja.from_string(template).render(value=value, value_json=value_json))

    async def reads(self, template: str | None, topic: str, expected: str, what: str) -> None:
        """Until the state topic renders as ``expected`` (Home Assistant's state equals the discovered value)."""
        try:
            await eventually(lambda: self.render(template, topic) == expected, WAIT_S, what)
        except AssertionError:
            raise AssertionError(f"{what}: {template} on {topic} renders {self.render(template, topic)!r}") from None

    # Home Assistant's service calls, sent as its MQTT platforms send them --------------------------------

    def switch(self, entity: dict[str, Any], on: bool) -> None:
        self.watcher.publish(entity["command_topic"], entity["payload_on" if on else "payload_off"])

    def light_on(self, entity: dict[str, Any], brightness: int | None = None) -> None:
        """light.turn_on (schema basic): brightness (0-255) scaled to the device, payload_on per on_command_type."""
        kind = entity.get("on_command_type", "last")
        if kind == "first":
            self.watcher.publish(entity["command_topic"], entity.get("payload_on", "ON"))
        if brightness is None and kind == "brightness":
            brightness = self.brightness.get(entity["unique_id"]) or 255
        if brightness is not None and "brightness_command_topic" in entity:
            scale = entity.get("brightness_scale", 255)
            device = min(round(brightness / 255 * scale), scale)
            self.watcher.publish(entity["brightness_command_topic"], str(device))
        if kind == "last":
            self.watcher.publish(entity["command_topic"], entity.get("payload_on", "ON"))

    def light_off(self, entity: dict[str, Any]) -> None:
        self.watcher.publish(entity["command_topic"], entity.get("payload_off", "OFF"))

    def light_brightness(self, entity: dict[str, Any]) -> int:
        """The brightness (0-255) Home Assistant reads from the brightness state topic."""
        rendered = self.render(entity["brightness_value_template"], entity["brightness_state_topic"])
        level = min(round(float(rendered) / entity.get("brightness_scale", 255) * 255), 255)
        self.brightness[entity["unique_id"]] = level
        return level


def _device(entity: dict[str, Any]) -> str:
    """The device whose state topic (picoagent/<device>/state) the entity reads."""
    return entity["state_topic"].split("/")[1]


def test_every_discovered_value_is_what_the_bridge_publishes_and_accepts(tmp_path: Path, broker: Broker) -> None:
    from appliance.daemon import Daemon

    config = load_config(write_config(tmp_path, broker.port, EXTRA), data_dir=tmp_path / "data", environ={})
    watcher = Watcher(broker, "#")

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        entities: list[dict[str, Any]] = []
        try:
            await started(daemon, served)
            bridge, devices = daemon.mqtt, daemon.runtime.devices
            assert bridge is not None and devices is not None
            expected = {t for t, _ in bridge.discovery_messages()}
            await eventually(lambda: expected <= watcher.topics("homeassistant/"), 10, "discovery")
            await eventually(lambda: watcher.latest("picoagent/bathroom/state") is not None, 10, "the states")
            ha = HomeAssistantView(watcher, expected)
            entities += ha.entities.values()
            pins = devices.backend.pin_factory

            def reading(name: str, quantity: str = "state") -> Any:
                return next(r for r in devices.read_sync(name) if r.quantity == quantity)

            for entity in ha.entities.values():  # every entity is available while the daemon runs
                assert watcher.latest(entity["availability_topic"]) == entity["payload_available"].encode()

            # switch: payload_on/off switch the relay; the state reads back as state_on/off.
            switches = ha.of("switch")
            assert {_device(e) for e in switches} == {"porch_light", "fan"}
            for entity in switches:
                name = _device(entity)
                assert entity["command_topic"] in bridge._command_topics, entity["command_topic"]
                for on in (True, False):
                    ha.switch(entity, on)
                    await eventually(lambda n=name, o=on: reading(n).value is o, WAIT_S, f"{name} switched {on}")
                    state = entity["state_on" if on else "state_off"]
                    await ha.reads(entity["value_template"], entity["state_topic"], state, f"{name} reads {state}")
                # One pair of words both ways: the bridge publishes what it is sent (it also takes any case).
                assert (entity["payload_on"], entity["payload_off"]) == (entity["state_on"], entity["state_off"])

            # light: on at full brightness (on_command_type), dimmed to 40%, off; each state reads back.
            [light] = ha.of("light")
            assert _device(light) == "desk_lamp" and light["brightness_state_topic"] == light["state_topic"]
            ha.light_on(light)
            await eventually(lambda: reading("desk_lamp").value is True, WAIT_S, "the lamp on")
            assert reading("desk_lamp", "brightness").value == 100.0
            await ha.reads(light["state_value_template"], light["state_topic"], light["payload_on"], "lamp on")
            await eventually(lambda: ha.light_brightness(light) == 255, WAIT_S, "Home Assistant reads 255")
            ha.light_on(light, brightness=102)  # 40% in Home Assistant's 0-255
            await eventually(lambda: reading("desk_lamp", "brightness").value == 40.0, WAIT_S, "the lamp at 40%")
            await eventually(lambda: ha.light_brightness(light) == 102, WAIT_S, "Home Assistant reads 102")
            ha.light_off(light)
            await eventually(lambda: reading("desk_lamp").value is False, WAIT_S, "the lamp off")
            await ha.reads(light["state_value_template"], light["state_topic"], light["payload_off"], "lamp off")

            # binary_sensor: the input's state reads as payload_on/off; the device class fits the device.
            inputs = {_device(e): e for e in ha.of("binary_sensor")}
            assert set(inputs) == {"doorbell", "hall_motion", "boiler"}
            assert inputs["hall_motion"].get("device_class") == "motion"
            assert inputs["boiler"].get("device_class") == "power"
            assert "device_class" not in inputs["doorbell"]  # a push button: none of Home Assistant's classes
            for name, pin, active in (("doorbell", 22, False), ("hall_motion", 23, True)):
                entity = inputs[name]
                for on in (True, False):
                    pins.pin(pin).drive_high() if on is active else pins.pin(pin).drive_low()
                    payload = entity["payload_on" if on else "payload_off"]
                    await ha.reads(entity["value_template"], entity["state_topic"], payload, f"{name} {payload}")
            boiler = inputs["boiler"]
            assert "command_topic" not in boiler and "picoagent/boiler/set" not in bridge._command_topics
            devices.devices["boiler"].driver.set(True)  # someone else switched it: the bridge reads it
            await bridge.publish_state("boiler")
            await ha.reads(boiler["value_template"], boiler["state_topic"], boiler["payload_on"], "boiler on")

            # sensor: one entity per quantity, its value and unit the reading's, its class a documented one.
            sensors = [e for e in ha.of("sensor") if not e["unique_id"].startswith("picoagent_assistant")]
            found = {(_device(e), KEY.findall(e["value_template"])[0]) for e in sensors}
            assert found == {
                ("living_room", "temperature"), ("living_room", "humidity"), ("living_room", "pressure"),
                ("soil", "level"), ("soil", "voltage"), ("soil", "raw"),
                ("office_light", "illuminance"), ("bathroom", "temperature"), ("bathroom", "humidity"),
            }  # fmt: skip
            for entity in sensors:
                name, quantity = _device(entity), KEY.findall(entity["value_template"])[0]
                value = float(ha.render(entity["value_template"], entity["state_topic"]))
                read = reading(name, quantity)
                assert math.isfinite(value) and math.isclose(value, read.value, rel_tol=0.05, abs_tol=0.5), (
                    f"{name} {quantity}: Home Assistant reads {value}, the device {read.value}"
                )
                assert entity.get("unit_of_measurement") == (read.unit or None), (name, quantity, entity)
                if "device_class" in entity:
                    assert entity["unit_of_measurement"] in SENSOR_UNITS[entity["device_class"]], entity

            # The assistant: its sensors read numbers (or None: unknown) in their documented units, ...
            state = "picoagent/assistant/state"
            mine = {e["unique_id"]: e for e in ha.of("sensor") if e["unique_id"].startswith("picoagent_assistant")}
            for entity in mine.values():
                if "device_class" in entity:
                    assert entity["unit_of_measurement"] in SENSOR_UNITS[entity["device_class"]], entity
                if entity.get("state_class") == "measurement" and entity["state_topic"] == state:
                    rendered = ha.render(entity["value_template"], state)
                    assert rendered == "None" or math.isfinite(float(rendered)), (entity["unique_id"], rendered)
            # ... and the notify entity's message is a chat whose answer is the reply sensor's state.
            [notify] = ha.of("notify")
            reply = mine["picoagent_assistant_reply"]
            watcher.publish(notify["command_topic"], "turn on the porch light")
            await eventually(lambda: watcher.latest(reply["state_topic"]) is not None, 20, "the reply")
            await eventually(lambda: reading("porch_light").value is True, WAIT_S, "the chat switched the light")
            text = json.loads(watcher.latest(reply["json_attributes_topic"]) or b"{}")["text"]
            assert "porch" in text.lower() and ha.render(reply["value_template"], reply["state_topic"]) == text[:250]
            await ha.reads(mine["picoagent_assistant_last_route"]["value_template"], state, "intent", "the last route")
        finally:
            daemon.stopping.set()
            assert await served == 0
        # Stopped: every entity's availability topic says payload_not_available.
        for entity in entities:
            await eventually(
                lambda e=entity: watcher.latest(e["availability_topic"]) == e["payload_not_available"].encode(),
                WAIT_S,
                "offline",
            )

    try:
        asyncio.run(main())
    finally:
        watcher.close()
