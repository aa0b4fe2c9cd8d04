"""The ``mqtt:`` section: the broker picoagent talks to, and what it publishes there for Home Assistant.

Off by default. When on, the daemon keeps one connection (appliance/mqtt/link.py) and announces its
devices and itself with Home Assistant's MQTT discovery (appliance/mqtt/discovery.py). The password is a
``${MQTT_PASSWORD}`` reference into the secrets file, never the password itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
