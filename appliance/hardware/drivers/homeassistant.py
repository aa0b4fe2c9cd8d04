"""Home Assistant's entities as devices: ``driver: homeassistant`` with ``entity: light.kitchen``.

The entity's domain makes the device's kind (:data:`KINDS`): a light is a dimmer (on, off, a brightness
in percent), a switch, input_boolean or fan a switch, a sensor a sensor (its value with the state's
``unit_of_measurement``, named by its ``device_class``: both only from Home Assistant's documented
ones, :mod:`appliance.hardware.drivers.units`, since Home Assistant's integrations write them as free
text that reaches the model), a binary_sensor an input whose changes are
events like a button's or a motion sensor's. So the spec differs per device: the table's entry has a
``variant`` that gives each device the spec of its domain, and everything that asks a device's kind
(the intent fast path, the status page, chat buttons, schedules) gets the right one.

The driver blocks like any other: it reads and calls services through the Home Assistant link
(appliance/hardware/remote/hass.py), which the backend holds as ``links["homeassistant"]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from appliance.hardware.buses import HardwareError
from appliance.hardware.drivers.base import Buses, DriverSpec, Kind, Reading, Sensor, Wiring
from appliance.hardware.drivers.template import TemplateError, finite_number, shown
from appliance.hardware.drivers.units import device_class, documented_unit

ENTITY = re.compile(r"([a-z][a-z0-9_]*)\.([a-z0-9_]+)")
KINDS: dict[str, Kind] = {
    "light": "dimmer",
    "switch": "switch",
    "input_boolean": "switch",
    "fan": "switch",
    "sensor": "sensor",
    "binary_sensor": "input",
}
# Home Assistant's sensor device classes people ask for by name: sensor.outdoor_temperature measures
# "temperature" (the intent fast path knows it before the first state arrives); else "value".
SENSOR_CLASSES = (
    "temperature",
    "humidity",
    "pressure",
    "illuminance",
    "moisture",
    "battery",
    "power",
    "energy",
    "voltage",
    "current",
    "co2",
    "pm25",
)
# A binary_sensor's device class -> its events for on and off (like gpio.Motion's); others: "on" / "off".
EVENTS = {
    "motion": ("motion", "still"),
    "occupancy": ("motion", "still"),
    "presence": ("motion", "still"),
    "door": ("opened", "closed"),
    "window": ("opened", "closed"),
    "opening": ("opened", "closed"),
    "garage_door": ("opened", "closed"),
}


def domain_of(entity_id: str) -> str:
    """light for light.kitchen (empty when it is no entity id)."""
    match = ENTITY.fullmatch(entity_id)
    return match.group(1) if match else ""


def quantity_of(entity_id: str) -> str:
    """What a sensor entity measures, from its object id's words: sensor.outdoor_temperature -> temperature."""
    words = entity_id.partition(".")[2].split("_")
    return next((c for c in SENSOR_CLASSES if c in words), "value")


class Entity:
    """One Home Assistant entity, read and set through the Home Assistant link."""

    def __init__(self, hass: Any, entity_id: str) -> None:
        self.hass = hass  # appliance.hardware.remote.hass.HomeAssistantClient
        self.entity_id = entity_id
        self.domain = domain_of(entity_id)
        self._callbacks: list[Callable[[str], None]] = []
        if self.domain == "binary_sensor":
            hass.watch(entity_id, self._changed)

    def _state(self) -> dict[str, Any]:
        state = self.hass.state(self.entity_id)
        if state.get("state") in ("unavailable", "unknown"):
            raise HardwareError(
                f"{self.entity_id} is {state['state']} in Home Assistant",
                fix="see the device in Home Assistant: it is offline or has not reported yet",
            )
        return dict(state)

    def read(self) -> list[Reading]:
        """The entity's state as readings (a light: on and its brightness; a sensor: its value and unit)."""
        state = self._state()
        attributes = state.get("attributes") or {}
        on = state["state"] == "on"
        if self.domain == "light":
            brightness = attributes.get("brightness")
            # Home Assistant keeps 0-255; whole percent, as its own UI shows (30% is stored as 76: 29.8 -> 30).
            level = (
                float(round(self._number(brightness, "brightness") / 255 * 100))
                if on and brightness is not None
                else 100.0 * on
            )
            return [Reading("state", on, ""), Reading("brightness", level, "%")]
        if self.domain == "sensor":
            value = self._number(state["state"], "state")
            # Free text Home Assistant (or any integration in it) writes: only documented classes and units.
            quantity = device_class(attributes.get("device_class")) or quantity_of(self.entity_id)
            return [Reading(quantity, value, documented_unit(quantity, attributes.get("unit_of_measurement")))]
        return [Reading("state", on, "")]

    def _number(self, value: Any, what: str) -> float:
        """A finite number, or a HardwareError quoting ``value`` cut short (it is anyone's text)."""
        try:
            return finite_number(value)
        except TemplateError:
            raise HardwareError(f"{self.entity_id} reports a {what} of {shown(value)}, not a number") from None

    def set(self, value: bool | float) -> None:
        """On or off; a light also takes a level from 0 to 1 (sent as brightness_pct)."""
        data: dict[str, Any] = {"entity_id": self.entity_id}
        on = bool(value)
        if self.domain == "light" and not isinstance(value, bool) and on:
            data["brightness_pct"] = round(float(value) * 100)
        self.hass.call_service(self.domain, "turn_on" if on else "turn_off", data)

    def on_event(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(event)`` when a binary_sensor turns on or off (from the link's event thread)."""
        self._callbacks.append(callback)

    def _changed(self, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        if new.get("state") not in ("on", "off"):
            return  # unavailable / unknown: no press, no release
        device_class = (new.get("attributes") or {}).get("device_class", "")
        on_event, off_event = EVENTS.get(device_class, ("on", "off"))
        event = on_event if new["state"] == "on" else off_event
        for callback in list(self._callbacks):
            callback(event)

    def close(self) -> None:
        """Nothing to release: the link belongs to whoever opened it."""


def _build(wiring: Wiring, buses: Buses) -> Sensor:
    return Entity(buses.link("homeassistant"), wiring.entity)


_BY_KIND: dict[Kind, DriverSpec] = {}


def _variant(wiring: Wiring) -> DriverSpec:
    """The spec of this device's domain (the config checks have made sure it is one of KINDS)."""
    kind = KINDS[domain_of(wiring.entity)]
    if kind == "sensor":
        return DriverSpec("homeassistant", "sensor", "homeassistant", (quantity_of(wiring.entity),), _build)
    return _BY_KIND[kind]


_BY_KIND.update(
    {
        "dimmer": DriverSpec(
            "homeassistant", "dimmer", "homeassistant", ("state", "brightness"), _build, sets=("state", "brightness")
        ),
        "switch": DriverSpec("homeassistant", "switch", "homeassistant", ("state",), _build, sets=("state",)),
        "input": DriverSpec("homeassistant", "input", "homeassistant", ("state",), _build),
    }
)
# The table's entry: what every homeassistant device can be at most; each device's own is its variant.
SPEC = DriverSpec(
    "homeassistant", "switch", "homeassistant", ("state",), _build, sets=("state", "brightness"), variant=_variant
)
