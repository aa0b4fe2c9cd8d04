"""The ``mqtt:`` section: the broker picoagent talks to, and what it publishes there for Home Assistant.

Off by default. When on, the daemon keeps one connection (appliance/hardware/remote/mqtt.py) and announces its
devices and itself with Home Assistant's MQTT discovery (appliance/mqtt/discovery.py). The password is a
``${MQTT_PASSWORD}`` reference into the secrets file, never the password itself. Devices with ``driver: mqtt``
(any MQTT device: Zigbee2MQTT, Tasmota, ESPHome) are read and set through that same connection
(appliance/hardware/drivers/mqtt.py); :func:`check_mqtt_devices` checks their keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from appliance.config.devices import DeviceConfig
from appliance.config.fields import doc
from appliance.errors import ConfigError

TOPIC_WORD = "letters, digits, _ and - (no /, + or #), 1 to 64 characters"


@dataclass
class MqttConfig:
    """The MQTT broker: connection, topics, Home Assistant discovery."""

    enabled: bool = doc("connect to the broker and publish devices and state (off: nothing MQTT is loaded)", False)
    host: str = doc("the broker's host name or address", "127.0.0.1")
    port: int = doc("the broker's port (1883 plain, 8883 with TLS)", 1883, low=1, high=65535, expected="a port number")
    tls: bool = doc("connect with TLS, checking the broker's certificate against the system's CAs", False)
    ca_file: str = doc("with tls: a CA certificate file for a broker with its own CA; empty: the system's CAs", "")
    username: str = doc("user name at the broker; empty: connect anonymously", "")
    password: str = doc("password at the broker: a ${NAME} reference into the secrets file", "", secret=True)
    client_id: str = doc("the MQTT client id; two picoagents on one broker need different ones", "picoagent")
    base_topic: str = doc("every picoagent topic starts with this (state, commands, <base_topic>/status)", "picoagent")
    discovery: bool = doc("announce the devices and the assistant with Home Assistant's MQTT discovery", True)
    discovery_prefix: str = doc("Home Assistant's discovery prefix (its MQTT integration's setting)", "homeassistant")
    state_interval_s: int = doc(
        "republish every device's state (and read the sensors) this often, besides at every change",
        60,
        low=5,
        high=86_400,
        expected="a whole number of seconds from 5 to 86400",
    )
    keepalive_s: int = doc(
        "seconds between keepalive pings; the broker declares picoagent offline after 1.5 times this",
        30,
        low=5,
        high=3600,
        expected="a whole number of seconds from 5 to 3600",
    )


_TOPIC_WORD = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TOPIC_PATH = re.compile(r"[A-Za-z0-9_-]{1,64}(/[A-Za-z0-9_-]{1,64}){0,3}")


def check_mqtt(mqtt: MqttConfig) -> None:
    """Raise a ConfigError naming the key when the section cannot work (checked enabled or not)."""
    if not _TOPIC_PATH.fullmatch(mqtt.base_topic):
        raise ConfigError(
            f"mqtt.base_topic: expected {TOPIC_WORD} per level (up to 4 levels), got {mqtt.base_topic!r}",
            fix="e.g. picoagent or home/picoagent",
        )
    if not _TOPIC_WORD.fullmatch(mqtt.discovery_prefix):
        raise ConfigError(
            f"mqtt.discovery_prefix: expected {TOPIC_WORD}, got {mqtt.discovery_prefix!r}",
            fix="Home Assistant's default is homeassistant",
        )
    if not _TOPIC_WORD.fullmatch(mqtt.client_id):
        raise ConfigError(f"mqtt.client_id: expected {TOPIC_WORD}, got {mqtt.client_id!r}")
    if mqtt.enabled and not mqtt.host.strip():
        raise ConfigError("mqtt.host: the broker's host is empty", fix="e.g. 127.0.0.1 or homeassistant.local")
    if mqtt.password and not mqtt.username:
        raise ConfigError(
            "mqtt.password: a password without mqtt.username", fix="set mqtt.username to the broker account's name"
        )
    if mqtt.ca_file and not mqtt.tls:
        raise ConfigError("mqtt.ca_file: given while mqtt.tls is false", fix="set mqtt.tls: true (port 8883 usually)")


# A device's MQTT keys and their defaults: a device of another driver leaves them all as they are.
_DEVICE_KEYS = {
    "kind": "",
    "state_topic": "",
    "command_topic": "",
    "payload_on": "ON",
    "payload_off": "OFF",
    "value_template": "",
    "brightness_command_topic": "",
    "brightness_value_template": "",
    "brightness_scale": 255,
    "quantity": "",
    "unit": "",
}
_PI_KEYS = ("pin", "bus", "address", "device", "channel")
_QUANTITY = re.compile(r"[a-z][a-z0-9_]{0,39}")


def check_mqtt_devices(mqtt: MqttConfig, devices: Mapping[str, DeviceConfig]) -> None:
    """Each mqtt device has the topics its kind needs, templates picoagent can read, no pin or bus, and the
    mqtt: section enabled; no other device has an MQTT key."""
    from appliance.hardware.drivers.mqtt import SETTABLE
    from appliance.hardware.drivers.template import SUBSET, TemplateError, parse_template

    for name, device in devices.items():
        where = f"devices.{name}"
        if device.driver != "mqtt":
            for key, default in _DEVICE_KEYS.items():
                if getattr(device, key) != default:
                    raise ConfigError(
                        f"{where}.{key}: only an mqtt device has {key}, not a {device.driver}",
                        fix=f"remove {key}: from devices.{name}, or make it driver: mqtt",
                    )
            continue
        for key in _PI_KEYS:
            if getattr(device, key) is not None:
                raise ConfigError(
                    f"{where}.{key}: an mqtt device lives on the MQTT broker, not on the Pi's {key}",
                    fix=f"remove {key}: from devices.{name}",
                )
        kind = device.kind
        settable = kind in SETTABLE
        if settable and not device.command_topic:
            raise ConfigError(
                f"{where}.command_topic: an mqtt {kind} needs the topic its commands go to",
                fix="e.g. command_topic: zigbee2mqtt/garage_light/set (Tasmota: cmnd/NAME/POWER)",
            )
        if not settable and not device.state_topic:
            raise ConfigError(
                f"{where}.state_topic: an mqtt {kind} needs the topic it reports on",
                fix="e.g. state_topic: zigbee2mqtt/garage_sensor (mosquitto_sub -v -t '#' shows what it sends)",
            )
        if not settable and device.command_topic:
            raise ConfigError(f"{where}.command_topic: an mqtt {kind} is only read", fix="remove command_topic:")
        if kind != "light":
            for key in ("brightness_command_topic", "brightness_value_template"):
                if getattr(device, key):
                    raise ConfigError(f"{where}.{key}: only an mqtt light has a brightness, not a {kind}")
        if device.unit and kind != "sensor":
            raise ConfigError(f"{where}.unit: only an mqtt sensor has a unit, not a {kind}")
        if device.quantity and (settable or not _QUANTITY.fullmatch(device.quantity)):
            raise ConfigError(
                f"{where}.quantity: expected a lower-case word like temperature (a sensor) or motion (a "
                f"binary_sensor), got {device.quantity!r}" + (f" on a {kind}" if settable else "")
            )
        for key in ("state_topic", "command_topic", "brightness_command_topic"):
            topic = getattr(device, key)
            if topic and (set(topic) & {"+", "#", "\0"} or topic.startswith("$")):
                raise ConfigError(
                    f"{where}.{key}: one device's topic, with no + or # wildcard, got {topic!r}",
                    fix="name the device's own topic, e.g. zigbee2mqtt/garage_light",
                )
        if not device.payload_on or not device.payload_off or device.payload_on == device.payload_off:
            raise ConfigError(f"{where}.payload_on: payload_on and payload_off must differ and not be empty")
        if not 1 <= device.brightness_scale <= 65535:
            raise ConfigError(f"{where}.brightness_scale: expected 1 to 65535, got {device.brightness_scale}")
        for key in ("value_template", "brightness_value_template"):
            if getattr(device, key):
                try:
                    parse_template(getattr(device, key))
                except TemplateError as exc:
                    raise ConfigError(f"{where}.{key}: {exc}", fix=f"picoagent reads {SUBSET}") from None
        if not mqtt.enabled:
            raise ConfigError(
                f"{where}: an mqtt device needs the mqtt: section enabled",
                fix="set mqtt.enabled: true with the broker's host (and port, username)",
            )
