"""What the broker already announces that could become an MQTT device: Home Assistant discovery configs.

Zigbee2MQTT, Tasmota, ESPHome and the rest publish, retained, one config a thing under
``<discovery_prefix>/<component>/[<node>/]<object>/config`` for Home Assistant. The Settings page offers those of
the kinds picoagent's mqtt driver takes (switch, light, sensor, binary_sensor) as ready-made device definitions.
The subscription is made at the first request (the link cannot unsubscribe, so it stays, holding only the
latest config of each topic); picoagent's own announcements (under its ``base_topic``) are left out. Discovery's
abbreviations (``~``, ``stat_t``, ``cmd_t``, ...) are read as Home Assistant reads them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

KINDS = ("switch", "light", "sensor", "binary_sensor")
ABBREVIATIONS = {
    "stat_t": "state_topic",
    "cmd_t": "command_topic",
    "val_tpl": "value_template",
    "stat_val_tpl": "value_template",
    "pl_on": "payload_on",
    "pl_off": "payload_off",
    "bri_cmd_t": "brightness_command_topic",
    "bri_val_tpl": "brightness_value_template",
    "bri_scl": "brightness_scale",
    "unit_of_meas": "unit_of_measurement",
    "dev_cla": "device_class",
    "uniq_id": "unique_id",
    "obj_id": "object_id",
}
FIELDS = ("state_topic", "command_topic", "value_template", "payload_on", "payload_off")
FIRST_WAIT_S = 1.5  # retained configs arrive right after subscribing: the first request waits this long


def definition(component: str, raw: dict[str, Any]) -> dict[str, Any] | None:
    """A discovery config as a picoagent mqtt device's definition, or None when it is not one it can drive."""
    if component not in KINDS or not isinstance(raw, dict):
        return None
    config = {ABBREVIATIONS.get(k, k): v for k, v in raw.items()}
    base = str(config.get("~", ""))
    for key, value in list(config.items()):
        if key.endswith("_topic") and isinstance(value, str) and base:
            config[key] = value.replace("~", base)
    device: dict[str, Any] = {"driver": "mqtt", "kind": component}
    for key in FIELDS:
        if isinstance(config.get(key), str):
            device[key] = config[key]
    if component == "light" and isinstance(config.get("brightness_command_topic"), str):
        device["brightness_command_topic"] = config["brightness_command_topic"]
        if isinstance(config.get("brightness_scale"), int):
            device["brightness_scale"] = config["brightness_scale"]
    if component in ("sensor", "binary_sensor") and isinstance(config.get("device_class"), str):
        device["quantity"] = config["device_class"]
    if component == "sensor" and isinstance(config.get("unit_of_measurement"), str):
        device["unit"] = config["unit_of_measurement"]
    needs = "state_topic" if component in ("sensor", "binary_sensor") else "command_topic"
    return device if needs in device else None


class DiscoveredEntities:
    """The broker's discovery configs, kept as they arrive (latest per topic; an empty payload removes one)."""

    def __init__(self, link: Any, prefix: str, own_base: str) -> None:
        self.link, self.prefix, self.own_base = link, prefix, own_base
        self.configs: dict[str, tuple[str, dict[str, Any]]] = {}  # topic -> (component, its config)
        self._listening = False

    async def offered(self) -> list[dict[str, Any]]:
        """Every announced thing picoagent could drive: its name, a suggested device name and definition."""
        if not self._listening:
            self._listening = True
            for pattern in (f"{self.prefix}/+/+/config", f"{self.prefix}/+/+/+/config"):
                self.link.subscribe(pattern, self._arrived)
            await asyncio.sleep(FIRST_WAIT_S)
        found = []
        for topic, (component, config) in sorted(self.configs.items()):
            device = definition(component, config)
            if device is None or any(str(v).startswith(f"{self.own_base}/") for v in device.values()):
                continue
            parts = topic.split("/")
            name = str(config.get("name") or parts[-2])
            suggested = "".join(c if c.isalnum() else "_" for c in parts[-2].lower()).strip("_")[:40] or "mqtt_device"
            found.append({"topic": topic, "name": name, "kind": component, "suggested": suggested, "device": device})
        return found

    def _arrived(self, topic: str, payload: bytes) -> None:
        if not payload:
            self.configs.pop(topic, None)
            return
        try:
            config = json.loads(payload)
        except ValueError:
            return
        if isinstance(config, dict):
            self.configs[topic] = (topic.split("/")[1], config)
