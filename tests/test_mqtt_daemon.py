"""picoagent serve with mqtt on, against a real mosquitto: Home Assistant discovery, commands, approvals, restarts.

The discovery payloads are checked against Home Assistant's documented MQTT discovery schema for each
platform (components/mqtt/<platform>.py in home-assistant/core: the keys each platform accepts and needs,
their types, the device classes and their units), and against what picoagent really does: every state
topic named is published with the keys its templates read, every command topic named is one picoagent
acts on. The devices are the checkout config's, on the simulated backend.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from appliance.config import CHECKOUT_CONFIG, Config, MqttConfig, load_config
from appliance.health import cpu_temperature
from tests.helpers import eventually, modules_loaded_by_serve, started
from tests.mqtt_broker import Broker, Watcher

# --- Home Assistant's MQTT discovery schema, as documented, for the platforms picoagent uses ------------

COMMON_KEYS = {
    "name", "unique_id", "default_entity_id", "object_id", "availability_topic", "payload_available",
    "payload_not_available", "availability", "availability_mode", "device", "origin", "json_attributes_topic",
    "json_attributes_template", "icon", "qos", "enabled_by_default", "entity_category", "encoding", "platform",
}  # fmt: skip
PLATFORM_KEYS = {
    "switch": {
        "state_topic", "command_topic", "value_template", "payload_on", "payload_off", "state_on", "state_off",
        "device_class", "retain", "optimistic", "command_template",
    },
    "light": {
        "schema", "state_topic", "state_value_template", "command_topic", "payload_on", "payload_off",
        "brightness_state_topic", "brightness_value_template", "brightness_command_topic",
        "brightness_command_template", "brightness_scale", "on_command_type", "retain", "optimistic",
    },
    "sensor": {
        "state_topic", "value_template", "device_class", "unit_of_measurement", "state_class", "expire_after",
        "force_update", "suggested_display_precision", "last_reset_value_template", "options",
    },
    "binary_sensor": {
        "state_topic", "value_template", "payload_on", "payload_off", "device_class", "expire_after",
        "force_update", "off_delay",
    },
    "notify": {"command_topic", "command_template", "retain"},
}  # fmt: skip
REQUIRED = {
    "switch": {"command_topic"},
    "light": {"command_topic"},
    "sensor": {"state_topic"},
    "binary_sensor": {"state_topic"},
    "notify": {"command_topic"},
}
# SensorDeviceClass -> the units Home Assistant accepts for it (those picoagent can send)
SENSOR_UNITS = {
    "temperature": {"°C", "°F", "K"},
    "humidity": {"%"},
    "atmospheric_pressure": {"cbar", "bar", "hPa", "mmHg", "inHg", "kPa", "mbar", "Pa", "psi"},
    "illuminance": {"lx"},
    "voltage": {"V", "mV", "µV", "kV", "MV"},
}
BINARY_CLASSES = {"motion", "power", "occupancy", "door", "window", "problem", "running", "sound", "vibration"}
STATE_CLASSES = {"measurement", "total", "total_increasing", "measurement_angle"}
DISCOVERY_TOPIC = re.compile(
    r"homeassistant/(switch|light|sensor|binary_sensor|notify)/picoagent/([a-zA-Z0-9_-]+)/config"
)
TEMPLATE_KEY = re.compile(r"value_json\.([a-z0-9_]+)")


def check_discovery(topic: str, payload: dict[str, Any]) -> str:
    """Assert one discovery message follows Home Assistant's schema; returns its platform."""
    match = DISCOVERY_TOPIC.fullmatch(topic)
    assert match, f"not a discovery topic Home Assistant reads: {topic}"
    platform, _object_id = match.groups()
    unknown = set(payload) - COMMON_KEYS - PLATFORM_KEYS[platform]
    assert not unknown, f"{topic}: keys {platform} does not take: {unknown}"
    missing = (REQUIRED[platform] | {"unique_id", "device", "availability_topic"}) - set(payload)
    assert not missing, f"{topic}: {platform} needs {missing}"
    for key, value in payload.items():
        if key.endswith("_topic") or key in ("unique_id", "default_entity_id") or key.endswith("_template"):
            assert isinstance(value, str) and value and "#" not in value and "+" not in value, (topic, key)
    assert re.fullmatch(rf"{platform}\.[a-z0-9_]+", payload["default_entity_id"]), payload["default_entity_id"]
    assert payload["name"] is None or isinstance(payload["name"], str)
    device = payload["device"]
    assert isinstance(device["identifiers"], list) and device["identifiers"]
    assert all(isinstance(device[k], str) and device[k] for k in ("name", "model", "manufacturer", "sw_version"))
    assert payload["availability_topic"] == "picoagent/status"
    if platform == "sensor":
        if "device_class" in payload:
            assert payload.get("unit_of_measurement") in SENSOR_UNITS[payload["device_class"]], payload
        assert payload.get("state_class", "measurement") in STATE_CLASSES
    if platform == "binary_sensor" and "device_class" in payload:
        assert payload["device_class"] in BINARY_CLASSES
    if platform == "light":
        assert isinstance(payload["brightness_scale"], int) and payload["brightness_scale"] >= 1
        assert payload.get("schema", "basic") in ("basic", "default")
    return platform


# --- the daemon ----------------------------------------------------------------------------------------


def _mqtt_config(config: Config, broker: Broker) -> Config:
    config.llm.preload = False
    config.mqtt = MqttConfig(enabled=True, host="127.0.0.1", port=broker.port, state_interval_s=60)
    config.devices["fan"].approval = "required"  # a write a person must approve
    return config


def _json(watcher: Watcher, topic: str) -> dict[str, Any] | None:
    raw = watcher.latest(topic)
    return json.loads(raw) if raw else None


def test_discovery_state_commands_and_approvals_over_a_real_broker(config: Config, broker: Broker) -> None:
    from appliance.daemon import Daemon

    watcher = Watcher(broker, "#")
    config = _mqtt_config(config, broker)

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        bridge = daemon.mqtt
        assert bridge is not None
        expected = {t for t, _ in bridge.discovery_messages()}
        await eventually(lambda: expected <= watcher.topics("homeassistant/"), what="discovery of every entity")
        await eventually(lambda: _json(watcher, "picoagent/living_room/state") is not None, what="sensor state")

        # Every discovery message follows the schema, and its topics are the ones picoagent uses.
        platforms: dict[str, int] = {}
        commands: set[str] = set()
        for topic in expected:
            payload = json.loads(watcher.latest(topic) or b"{}")
            platform = check_discovery(topic, payload)
            platforms[platform] = platforms.get(platform, 0) + 1
            commands |= {v for k, v in payload.items() if k.endswith("command_topic")}
            for key in ("state_topic", "brightness_state_topic"):
                if key in payload and payload[key] != "picoagent/notify/reply":
                    await eventually(lambda k=key, p=payload: watcher.latest(p[k]) is not None, what=payload[key])
                    document = json.loads(watcher.latest(payload[key]) or b"{}")
                    template = payload.get("value_template") or payload.get("state_value_template") or ""
                    for used in TEMPLATE_KEY.findall(template + payload.get("brightness_value_template", "")):
                        assert used in document, f"{topic} reads {used} from {payload[key]}: {document}"
        # porch_light and fan (relays), living_room (3 quantities), soil (3), doorbell; the assistant's 5 + notify
        # (4 where this machine reports no CPU temperature: no sensor is announced that would never read)
        assistant = 5 if cpu_temperature() is not None else 4
        assert platforms == {"switch": 2, "sensor": 3 + 3 + assistant, "binary_sensor": 1, "notify": 1}
        assert commands == set(bridge._command_topics) | {"picoagent/notify"}
        bme = json.loads(watcher.latest("homeassistant/sensor/picoagent/living_room_pressure/config") or b"{}")
        assert bme["device_class"] == "atmospheric_pressure" and bme["unit_of_measurement"] == "hPa"
        assert watcher.latest("picoagent/status") == b"online"

        # A command switches the simulated relay, through the registry (its write is recorded as by mqtt).
        devices = daemon.runtime.devices
        assert devices is not None
        watcher.publish("picoagent/porch_light/set", "ON")
        await eventually(lambda: (_json(watcher, "picoagent/porch_light/state") or {}).get("state") == "ON")
        assert (await devices.read("porch_light"))[0].value is True

        # The fan needs a person: the command waits, says so in its attributes and is a pending approval.
        watcher.publish("picoagent/fan/set", "ON")
        await eventually(lambda: (_json(watcher, "picoagent/fan/attributes") or {}).get("pending_approval") is True)
        [pending] = await asyncio.to_thread(devices.approvals.pending)
        pending_id = pending.id  # for a person: the broker is told only that a write waits
        assert pending.requested_by == "mqtt" and pending_id not in str(_json(watcher, "picoagent/fan/attributes"))
        assert (await devices.read("fan"))[0].value is False  # not before a person says so
        await devices.decide(pending_id, True, "owner")
        await eventually(lambda: (_json(watcher, "picoagent/fan/state") or {}).get("state") == "ON")
        await eventually(lambda: (_json(watcher, "picoagent/fan/attributes") or {}).get("pending_approval") is False)

        # A command the policy refuses says why, and the state stays as it is.
        watcher.publish("picoagent/porch_light/set", "sideways")
        await eventually(lambda: "takes on or off" in str(_json(watcher, "picoagent/porch_light/attributes") or {}))

        # The notify topic is a chat: the intent fast path turns the light off and the reply comes back.
        watcher.publish("picoagent/notify", "turn off the porch light")
        await eventually(lambda: watcher.latest("picoagent/notify/reply") is not None, what="the reply")
        await eventually(lambda: (_json(watcher, "picoagent/porch_light/state") or {}).get("state") == "OFF")
        assert "porch" in (watcher.latest("picoagent/notify/reply") or b"").decode().lower()

        # The assistant's sensors, and the link in /api/status.
        assistant = _json(watcher, "picoagent/assistant/state") or {}
        assert set(assistant) == {"decode_tps", "cpu_temperature", "queue_depth", "last_route"}
        await eventually(lambda: (_json(watcher, "picoagent/assistant/state") or {}).get("last_route") == "intent")
        assert daemon.state is not None
        status = daemon.state.status({})["mqtt"]
        assert status["connected"] is True and status["broker"] == f"mqtt://127.0.0.1:{broker.port}"
        assert status["commands"] == 3  # the notify message is a chat, not a command

        daemon.stopping.set()
        assert await served == 0
        await eventually(lambda: watcher.latest("picoagent/status") == b"offline", what="offline at stop")

    asyncio.run(main())
    watcher.close()


def test_a_broker_restart_loses_no_state(config: Config, broker: Broker) -> None:
    from appliance.daemon import Daemon

    config = _mqtt_config(config, broker)

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        bridge = daemon.mqtt
        devices = daemon.runtime.devices
        assert bridge is not None and devices is not None
        await eventually(lambda: bridge.link.connected, what="the link")
        await asyncio.to_thread(broker.stop)
        await eventually(lambda: not bridge.link.connected, what="the link seeing the broker go")
        await devices.set("porch_light", "on", requested_by="test")  # changed while the broker is down
        await asyncio.to_thread(broker.start)  # no persistence: it has forgotten every retained message
        watcher = await asyncio.to_thread(Watcher, broker, "#")
        expected = {t for t, _ in bridge.discovery_messages()}
        await eventually(lambda: expected <= watcher.topics("homeassistant/"), timeout=20, what="rediscovery")
        await eventually(lambda: (_json(watcher, "picoagent/porch_light/state") or {}).get("state") == "ON")
        for name in ("fan", "living_room", "soil", "doorbell", "assistant"):
            await eventually(lambda n=name: watcher.latest(f"picoagent/{n}/state") is not None, what=f"{name} state")
        assert watcher.latest("picoagent/status") == b"online"
        assert bridge.status()["reconnects"] == 1
        daemon.stopping.set()
        assert await served == 0
        watcher.close()

    asyncio.run(main())


def test_a_command_reads_the_device_once_and_publishes_its_state_once(config: Config, broker: Broker) -> None:
    """A command over MQTT goes bridge -> registry and back once: the write's own read is the state published."""
    from appliance.daemon import Daemon

    config = _mqtt_config(config, broker)

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        bridge, devices = daemon.mqtt, daemon.runtime.devices
        assert bridge is not None and devices is not None
        watcher = await asyncio.to_thread(Watcher, broker, "picoagent/porch_light/state")
        await eventually(lambda: watcher.latest("picoagent/porch_light/state") is not None, what="the first state")
        await eventually(lambda: not bridge._tasks, what="the bridge done with its first states")

        # Count on the real driver and the real link: every read of the relay, every state sent for it.
        driver, link = devices.get("porch_light").driver, bridge.link
        reads: list[str] = []
        published: list[bytes] = []
        read, publish = driver.read, link.publish

        def counted_read() -> Any:
            reads.append("porch_light")
            return read()

        def counted_publish(topic: str, payload: str | bytes, **options: Any) -> None:
            if topic == "picoagent/porch_light/state":
                published.append(payload.encode() if isinstance(payload, str) else payload)
            publish(topic, payload, **options)

        driver.read, link.publish = counted_read, counted_publish
        watcher.clear()
        watcher.publish("picoagent/porch_light/set", "ON")
        await eventually(lambda: (_json(watcher, "picoagent/porch_light/state") or {}).get("state") == "ON")
        # Everything the command set off has run: its task and any it spawned (the write listener's) are done.
        await eventually(lambda: bridge.commands == 1 and not bridge._tasks, what="the command handled")
        assert (len(reads), [json.loads(p) for p in published]) == (1, [{"state": "ON"}])
        assert [payload for _, payload, _ in watcher.messages] == [b'{"state": "ON"}']
        daemon.stopping.set()
        assert await served == 0
        watcher.close()

    asyncio.run(main())


def test_nothing_mqtt_or_home_assistant_is_imported_when_they_are_off(tmp_path: Path) -> None:
    """The idle daemon's memory is at its limit: with mqtt: and homeassistant: off none of their code loads."""
    config = load_config(CHECKOUT_CONFIG)
    assert not config.mqtt.enabled and not config.homeassistant.enabled
    prefixes = ("aiomqtt", "paho", "appliance.mqtt", "appliance.hardware.remote")
    assert modules_loaded_by_serve(CHECKOUT_CONFIG, tmp_path / "data", prefixes) == []


def test_the_start_s_burst_of_discovery_publishes_draws_no_backlog_warning() -> None:
    """A walk's log at every start: "WARNING mqtt: There are 11 pending publish calls." (aiomqtt warns above 10
    publishes awaiting the broker; discovery sends a config per device and the states at once)."""
    from appliance.hardware.remote.mqtt import PENDING_WARN, make_client

    async def made() -> int:
        return int(make_client(MqttConfig(enabled=True, host="127.0.0.1")).pending_calls_threshold)

    assert asyncio.run(made()) == PENDING_WARN >= 100


def test_no_cpu_temperature_sensor_is_announced_where_the_machine_reports_none() -> None:
    """A Pi reports its temperature; a machine with no thermal zone gets no "CPU temperature" entity that would
    never read (a README walk saw it announced here, like the /metrics line)."""
    from appliance.mqtt.discovery import Topics, assistant_entities

    topics = Topics.of(MqttConfig(enabled=True, host="127.0.0.1"))
    with_zone = [topic for topic, _ in assistant_entities(topics, "Pico", temperature=True)]
    without = [topic for topic, _ in assistant_entities(topics, "Pico", temperature=False)]
    assert [t for t in with_zone if t not in without] == [
        "homeassistant/sensor/picoagent/assistant_cpu_temperature/config"
    ]
