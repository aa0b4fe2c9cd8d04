"""What the rest of the appliance knows of a named device without touching its driver: :class:`DeviceInfo`.

A leaf module: the device registry (:mod:`appliance.hardware.devices`) makes these from the config and
the driver table, and the intent matcher and the semantic stage (``appliance/agent/``) read them, so
neither side imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceInfo:
    """What the matcher knows of one device: how people may name it, and what it can do."""

    name: str
    kind: str  # "switch" | "dimmer" | "sensor" | "input"; any other kind is never acted on
    room: str | None
    aliases: tuple[str, ...] = ()
    quantities: tuple[str, ...] = ()
    driver: str = ""  # relay, button, bme280...: the semantic stage words its examples by it
    allowed: tuple[str, ...] = ("read", "set")  # the operations the config allows
