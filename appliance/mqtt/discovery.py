"""Home Assistant MQTT discovery: what picoagent announces for each named device and for itself.

Pure functions from devices to (discovery topic, payload); :mod:`appliance.mqtt.bridge` publishes them
(retained) and keeps the state topics they name up to date. The payloads use Home Assistant's documented
discovery keys (the MQTT platforms' schemas in home-assistant/core, components/mqtt/): ``unique_id``,
``default_entity_id`` (which replaced ``object_id``), ``state_topic``, ``command_topic``,
``availability_topic``, ``json_attributes_topic`` and ``device`` {identifiers, name, model, manufacturer,
sw_version}, plus ``origin``.

What appears (``D`` a device name, ``B`` mqtt.base_topic, ``C`` mqtt.client_id, ``P`` the discovery prefix):

- a relay (kind ``switch``): ``switch`` with commands ``ON``/``OFF`` on ``B/D/set``;
- a dimmer: ``light`` with brightness 0-100 on ``B/D/brightness/set`` (``brightness_scale: 100``);
- a sensor: one ``sensor`` per quantity (a BME280 gives three), with ``device_class`` and
  ``unit_of_measurement`` where Home Assistant has one for it;
- a button or motion sensor (kind ``input``), or a switch that may not be set: ``binary_sensor``;
- the assistant: a device of its own with sensors for decode speed, CPU temperature, queue depth and the
  last route, and a ``notify`` entity whose messages (``B/notify``) are chat messages to the assistant.

Every device's state is one retained JSON document on ``B/D/state`` (``{"state": "ON", "brightness": 40}``,
``{"temperature": 21.4, ...}``) that each entity reads with a ``value_template``; ``B/D/attributes`` holds
``pending_approval`` and ``last_error``. Topics: ``P/<platform>/C/<object>/config``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from appliance import __version__
from appliance.config import MqttConfig
from appliance.hardware.device_info import DeviceInfo

MANUFACTURER = "picoagent"
ASSISTANT = "assistant"  # the assistant's own device (and its state topic's device part)

# quantity -> (Home Assistant sensor device_class or None, unit_of_measurement or None)
SENSOR_CLASSES: dict[str, tuple[str | None, str | None]] = {
    "temperature": ("temperature", "°C"),
    "humidity": ("humidity", "%"),
    "pressure": ("atmospheric_pressure", "hPa"),
    "illuminance": ("illuminance", "lx"),
    "voltage": ("voltage", "V"),
    "level": (None, "%"),
    "brightness": (None, "%"),
    "raw": (None, None),
}
# The assistant's sensors: key in its state document -> (name, device_class, unit, icon)
ASSISTANT_SENSORS: dict[str, tuple[str, str | None, str | None, str | None]] = {
    "decode_tps": ("Decode speed", None, "tokens/s", "mdi:speedometer"),
    "cpu_temperature": ("CPU temperature", "temperature", "°C", None),
    "queue_depth": ("Queue depth", None, None, "mdi:tray-full"),
    "last_route": ("Last route", None, None, "mdi:routes"),
}


@dataclass(frozen=True)
class Topics:
    """Where picoagent publishes and listens, from the config."""

    base: str
    prefix: str
    node: str  # mqtt.client_id: the node id of every discovery topic and the start of every unique_id

    @classmethod
    def of(cls, config: MqttConfig) -> Topics:
        """The topics of this config."""
        return cls(config.base_topic, config.discovery_prefix, config.client_id)

    @property
    def availability(self) -> str:
        """``online``/``offline``."""
        return f"{self.base}/status"

    def state(self, device: str) -> str:
        """One retained JSON document per device."""
        return f"{self.base}/{device}/state"

    def attributes(self, device: str) -> str:
        """pending_approval, last_error (JSON)."""
        return f"{self.base}/{device}/attributes"

    def command(self, device: str) -> str:
        """ON/OFF."""
        return f"{self.base}/{device}/set"

    def brightness_command(self, device: str) -> str:
        """0-100."""
        return f"{self.base}/{device}/brightness/set"

    @property
    def notify(self) -> str:
        """A message to the assistant."""
        return f"{self.base}/notify"

    @property
    def notify_reply(self) -> str:
        """Its answer."""
        return f"{self.base}/notify/reply"

    def config(self, platform: str, object_id: str) -> str:
        """A discovery topic."""
        return f"{self.prefix}/{platform}/{self.node}/{object_id}/config"

    @property
    def all_configs(self) -> str:
        """Every discovery topic of this node (for forgetting the ones no longer configured)."""
        return f"{self.prefix}/+/{self.node}/+/config"


def slug(text: str) -> str:
    """An id Home Assistant accepts in topics and entity ids: [a-z0-9_]."""
    return re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_") or "device"


def title(name: str) -> str:
    """porch_light -> Porch light."""
    words = name.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:]


def _device_block(topics: Topics, info: DeviceInfo) -> dict[str, Any]:
    block: dict[str, Any] = {
        "identifiers": [f"{topics.node}_{slug(info.name)}"],
        "name": title(info.name),
        "model": info.driver,
        "manufacturer": MANUFACTURER,
        "sw_version": __version__,
        "via_device": f"{topics.node}_{ASSISTANT}",
    }
    if info.room:
        block["suggested_area"] = title(info.room)
    return block


def _common(topics: Topics, platform: str, object_id: str, device: dict[str, Any]) -> dict[str, Any]:
    unique = f"{topics.node}_{object_id}"
    return {
        "unique_id": unique,
        "default_entity_id": f"{platform}.{unique}",
        "availability_topic": topics.availability,
        "payload_available": "online",
        "payload_not_available": "offline",
        "device": device,
        "origin": {"name": "picoagent", "sw_version": __version__},
    }


def device_entities(topics: Topics, info: DeviceInfo) -> list[tuple[str, dict[str, Any]]]:
    """The discovery (topic, payload) of each entity one named device appears as."""
    name = info.name
    device = _device_block(topics, info)
    settable = "set" in info.allowed
    state, attributes = topics.state(name), topics.attributes(name)
    found: list[tuple[str, dict[str, Any]]] = []

    def add(platform: str, object_id: str, **fields: Any) -> None:
        payload = _common(topics, platform, object_id, device)
        payload.update(fields)
        found.append((topics.config(platform, object_id), payload))

    oid = slug(name)
    if info.kind == "switch" and settable:
        add(
            "switch",
            oid,
            name=None,  # the entity is the device: Home Assistant names it after the device
            state_topic=state,
            value_template="{{ value_json.state }}",
            command_topic=topics.command(name),
            payload_on="ON",
            payload_off="OFF",
            state_on="ON",
            state_off="OFF",
            json_attributes_topic=attributes,
        )
    elif info.kind == "dimmer" and settable:
        add(
            "light",
            oid,
            name=None,
            schema="basic",
            state_topic=state,
            state_value_template="{{ value_json.state }}",
            command_topic=topics.command(name),
            payload_on="ON",
            payload_off="OFF",
            brightness_state_topic=state,
            brightness_value_template="{{ value_json.brightness | round(0) | int }}",
            brightness_command_topic=topics.brightness_command(name),
            brightness_scale=100,
            on_command_type="brightness",  # a brightness alone turns it on: one write, not ON then a level
            json_attributes_topic=attributes,
        )
    elif info.kind == "sensor":
        for quantity in info.quantities:
            device_class, unit = SENSOR_CLASSES.get(quantity, (None, None))
            fields: dict[str, Any] = {
                "name": title(quantity),
                "state_topic": state,
                "value_template": "{{ value_json." + slug(quantity) + " }}",
                "state_class": "measurement",
                "json_attributes_topic": attributes,
            }
            if device_class:
                fields["device_class"] = device_class
            if unit:
                fields["unit_of_measurement"] = unit
            add("sensor", f"{oid}_{slug(quantity)}", **fields)
    else:  # inputs (buttons, motion), and switches or dimmers that may only be read
        fields = {
            "name": None,
            "state_topic": state,
            "value_template": "{{ value_json.state }}",
            "payload_on": "ON",
            "payload_off": "OFF",
            "json_attributes_topic": attributes,
        }
        if info.driver == "motion":
            fields["device_class"] = "motion"
        elif info.kind in ("switch", "dimmer"):
            fields["device_class"] = "power"
        add("binary_sensor", oid, **fields)
    return found


def assistant_entities(topics: Topics, name: str, *, temperature: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """The assistant as a device: its sensors and the notify entity that sends it a message; ``temperature``:
    False on a machine with no thermal zone (no CPU temperature sensor announced that never reads)."""
    device = {
        "identifiers": [f"{topics.node}_{ASSISTANT}"],
        "name": name,
        "model": "picoagent assistant",
        "manufacturer": MANUFACTURER,
        "sw_version": __version__,
    }
    state = topics.state(ASSISTANT)
    found: list[tuple[str, dict[str, Any]]] = []
    for key, (label, device_class, unit, icon) in ASSISTANT_SENSORS.items():
        if key == "cpu_temperature" and not temperature:
            continue
        object_id = f"{ASSISTANT}_{key}"
        payload = _common(topics, "sensor", object_id, device)
        payload.update(name=label, state_topic=state, value_template="{{ value_json." + key + " }}")
        if key != "last_route":
            payload["state_class"] = "measurement"
        if device_class:
            payload["device_class"] = device_class
        if unit:
            payload["unit_of_measurement"] = unit
        if icon:
            payload["icon"] = icon
        found.append((topics.config("sensor", object_id), payload))
    reply_id = f"{ASSISTANT}_reply"
    reply = _common(topics, "sensor", reply_id, device)
    reply.update(
        name="Last reply",
        state_topic=topics.notify_reply,
        value_template="{{ value[:250] }}",  # a sensor's state holds 255 characters; the whole text is an attribute
        json_attributes_topic=f"{topics.notify_reply}/attributes",
        icon="mdi:message-reply-text",
    )
    found.append((topics.config("sensor", reply_id), reply))
    notify_id = f"{ASSISTANT}_message"
    notify = _common(topics, "notify", notify_id, device)
    notify.update(name="Message", command_topic=topics.notify, icon="mdi:message-text")
    found.append((topics.config("notify", notify_id), notify))
    return found
