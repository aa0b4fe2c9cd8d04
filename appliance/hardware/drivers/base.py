"""What a driver is: a small class that reads (sensors) or sets (actuators) one device.

Drivers block (they talk to buses); the device registry calls them off the event loop while holding
the bus's lock. A sensor returns :class:`Reading` values with units; an actuator takes a value and
reports its state; an input (button, motion) also calls back on events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Reading:
    """One measured quantity."""

    quantity: str  # "temperature", "humidity", "pressure", "illuminance", "voltage", "level", "state"
    value: float | bool
    unit: str  # "°C", "%", "hPa", "lx", "V", "" ...

    def as_dict(self) -> dict[str, float | bool | str]:
        """JSON-ready."""
        return {"quantity": self.quantity, "value": self.value, "unit": self.unit}

    def __str__(self) -> str:
        if isinstance(self.value, bool):
            return f"{self.quantity}: {'on' if self.value else 'off'}"
        return f"{self.quantity}: {self.value:g}{(' ' + self.unit) if self.unit else ''}"


class Sensor(Protocol):
    """A device that measures."""

    def read(self) -> list[Reading]:
        """Measure now (blocking)."""
        ...

    def close(self) -> None:
        """Release the device."""
        ...


class Actuator(Sensor, Protocol):
    """A device that can be set (and read back)."""

    def set(self, value: bool | float) -> None:
        """Drive the device: on/off, or a level from 0 to 1."""
        ...


class EventSource(Sensor, Protocol):
    """A device whose changes arrive as events (button pressed, motion seen)."""

    def on_event(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(event_name)`` from gpiozero's thread when something happens."""
        ...
