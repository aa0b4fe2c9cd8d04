"""The ``homeassistant:`` section: where Home Assistant's API is, and the token picoagent uses with it.

With it enabled, devices with ``driver: homeassistant`` and an ``entity:`` are Home Assistant's lights,
switches and sensors, named and governed here like a GPIO relay (appliance/hardware/remote/hass.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from appliance.config.devices import DeviceConfig
from appliance.config.fields import SECONDS, doc
from appliance.errors import ConfigError

# What people are told when Home Assistant has no token, or refuses it (here and in hardware/remote/hass.py).
TOKEN_FIX = (
    "make a long-lived access token in Home Assistant (your profile, Security tab), put HASS_TOKEN=... in the "
    "secrets file and write homeassistant.token: ${HASS_TOKEN}"
)


@dataclass
class HomeAssistantConfig:
    """Home Assistant's REST and WebSocket API, for the devices that live there."""

    enabled: bool = doc("use Home Assistant's devices (driver: homeassistant); off: none is reached", False)
    url: str = doc("Home Assistant's base URL, e.g. http://homeassistant.local:8123", "http://homeassistant.local:8123")
    token: str = doc(
        "a long-lived access token (your HA profile, Security): a ${NAME} reference into the secrets file",
        "",
        secret=True,
    )
    verify_tls: bool = doc("check the certificate of an https:// url (off: a self-signed one is accepted)", True)
    timeout_s: float = doc("give up on one API call after this long", 10.0, low=0.1, high=600, expected=SECONDS)


# Keys that say where a device sits on the Pi: a Home Assistant device has none of them.
_PI_KEYS = ("pin", "bus", "address", "device", "channel")


def check_homeassistant(hass: HomeAssistantConfig, devices: Mapping[str, DeviceConfig]) -> None:
    """The section is complete when enabled; each Home Assistant device names an entity of a known domain,
    only with the section enabled and with no pin or bus; no other device names an entity."""
    from appliance.hardware.drivers.homeassistant import ENTITY, KINDS

    if hass.enabled:
        if not hass.url.startswith(("http://", "https://")) or "/api" in hass.url:
            raise ConfigError(
                "homeassistant.url: expected Home Assistant's base URL, e.g. http://homeassistant.local:8123"
            )
        if not hass.token:
            raise ConfigError("homeassistant.token: Home Assistant needs a long-lived access token", fix=TOKEN_FIX)
    domains = ", ".join(KINDS)
    for name, device in devices.items():
        where = f"devices.{name}"
        if device.driver != "homeassistant":
            if device.entity:
                raise ConfigError(f"{where}.entity: only a homeassistant device has an entity, not a {device.driver}")
            continue
        match = ENTITY.fullmatch(device.entity)
        if not match:
            raise ConfigError(
                f"{where}.entity: expected a Home Assistant entity id like light.kitchen, got {device.entity!r}",
                fix="copy it from Home Assistant (Settings, Entities: the entity ID column)",
            )
        if match.group(1) not in KINDS:
            raise ConfigError(
                f"{where}.entity: picoagent does not drive {match.group(1)} entities ({device.entity})",
                fix=f"use an entity of one of these domains: {domains}",
            )
        for key in _PI_KEYS:
            if getattr(device, key) is not None:
                raise ConfigError(
                    f"{where}.{key}: a homeassistant device lives in Home Assistant, not on the Pi's {key}",
                    fix=f"remove {key}: from devices.{name}",
                )
        if not hass.enabled:
            raise ConfigError(
                f"{where}: a homeassistant device needs the homeassistant: section enabled",
                fix="set homeassistant.enabled: true with its url and token: ${HASS_TOKEN}",
            )
