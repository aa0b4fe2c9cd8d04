"""What a driver is: a small class that reads (sensors) or sets (actuators) one device, and its spec.

Drivers block (they talk to buses); the device registry calls them off the event loop while holding
the bus's lock. A sensor returns :class:`Reading` values with units; an actuator takes a value and
reports its state; an input (button, motion) also calls back on events.

A driver for a device that lives elsewhere (Home Assistant, an MQTT broker) blocks too: it talks to its service through
the link the backend holds (:meth:`Buses.link`), as a bus driver talks to its bus.

Each driver module also declares a :class:`DriverSpec`: what the driver needs from a device's config,
what it reads and sets, how it is built, and which simulated chip stands for it. The specs are collected
in one table, :data:`appliance.hardware.drivers.DRIVERS`. A spec sees the config and the backend only
through the :class:`Wiring` and :class:`Buses` protocols: the config package reads the table, so the
driver modules cannot import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from appliance.hardware.buses import I2CBus, SPIBus

Kind = Literal["switch", "dimmer", "sensor", "input"]
# What an MQTT device is, in Home Assistant's MQTT platform words (drivers/mqtt.py maps them to a Kind).
MqttKind = Literal["", "switch", "light", "sensor", "binary_sensor"]
# Where a device lives: on the Pi's pins and buses, or in a service reached over the network (its link,
# Buses.link). A new place is one entry here, in NEEDS and in WHERE.
Interface = Literal["gpio", "i2c", "spi", "homeassistant", "mqtt"]
ON_THE_PI: tuple[Interface, ...] = ("gpio", "i2c", "spi")

# The device config keys a driver on each interface cannot do without.
NEEDS: dict[str, tuple[str, ...]] = {
    "gpio": ("pin",),
    "i2c": ("bus", "address"),
    "spi": ("bus", "device", "channel"),
    "homeassistant": ("entity",),
    "mqtt": ("kind",),  # and the topics that kind needs (checked with the mqtt: section)
}
# Where a device on each interface lives, as `picoagent devices list` and the status page show it.
WHERE: dict[str, Callable[[Wiring], str]] = {
    "gpio": lambda w: f"gpio {w.pin}",
    "i2c": lambda w: f"i2c-{w.bus} 0x{w.address or 0:02x}",
    "spi": lambda w: f"spi {w.bus}.{w.device} ch{w.channel}",
    "homeassistant": lambda w: f"homeassistant {w.entity}",
    "mqtt": lambda w: f"mqtt {w.state_topic or w.command_topic}",
}
# What a device off the Pi says is outside text (appliance/tools/trust.py): other people's software
# (whoever publishes on the broker, Home Assistant and its integrations) writes its states. The words
# finish "this turn read ...".
OUTSIDE: dict[str, str] = {
    "homeassistant": "a device state from Home Assistant",
    "mqtt": "a device state from the MQTT broker",
}


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


class Wiring(Protocol):
    """Where a device is connected: the fields of a device's config a driver is built from."""

    pin: int | None
    bus: int | None
    address: int | None
    device: int | None
    channel: int | None
    entity: str  # a Home Assistant entity id (light.kitchen); empty on the Pi's own interfaces
    active_high: bool
    # An MQTT device (driver mqtt; empty elsewhere): its kind and topics, how its state is read, its unit.
    kind: MqttKind
    state_topic: str
    command_topic: str
    payload_on: str
    payload_off: str
    value_template: str
    brightness_command_topic: str
    brightness_value_template: str
    brightness_scale: int
    quantity: str
    unit: str


class Buses(Protocol):
    """Where drivers get their pins and buses: the backend (real or simulated)."""

    @property
    def pin_factory(self) -> Any:
        """gpiozero's pin factory for GPIO drivers."""
        ...

    def i2c(self, number: int) -> I2CBus:
        """The I2C bus with this number."""
        ...

    def spi(self, bus: int, device: int) -> SPIBus:
        """The SPI device bus.device."""
        ...

    def link(self, name: str) -> Any:
        """The connection to a service devices live in ("homeassistant", "mqtt"), or a ConfigError saying how to
        enable it."""
        ...


def on_i2c(part: Callable[[I2CBus, int], Sensor]) -> Callable[[Wiring, Buses], Sensor]:
    """How an I2C part is built from a device's config: the part at its configured bus and address."""

    def build(wiring: Wiring, buses: Buses) -> Sensor:
        assert wiring.bus is not None and wiring.address is not None  # the config checks require them (NEEDS)
        return part(buses.i2c(wiring.bus), wiring.address)

    return build


@dataclass(frozen=True)
class DriverSpec:
    """One driver as the rest of the appliance sees it: an entry of the driver table."""

    name: str  # the value of devices.NAME.driver
    kind: Kind  # switch, dimmer, sensor or input: how people and the intent matcher treat the device
    interface: Interface  # gpio, i2c, spi, homeassistant or mqtt: which config keys the device needs (NEEDS)
    quantities: tuple[str, ...]  # what read() returns, in order
    build: Callable[[Wiring, Buses], Sensor]  # the driver for one configured device
    sets: tuple[str, ...] = ()  # what set() changes; empty: the device can only be read
    addresses: tuple[int, ...] = ()  # I2C: the addresses the part can answer at, its default first
    simulated: str = ""  # "module:callable" making the chip that stands for the part in simulation
    # A driver whose kind depends on the device (Home Assistant's light.* is a dimmer, sensor.* a sensor):
    # the spec for one device's config. None: this spec fits every device of the driver.
    variant: Callable[[Wiring], DriverSpec] | None = None

    def __post_init__(self) -> None:
        if self.interface == "i2c" and not self.addresses:
            raise ValueError(f"driver {self.name}: an I2C part needs its addresses")
        if self.interface in ("i2c", "spi") and ":" not in self.simulated:
            # GPIO devices run on gpiozero's mock pins; a bus device needs a chip to answer on the bus.
            raise ValueError(f"driver {self.name}: a bus device needs its simulated chip as 'module:callable'")

    @property
    def needs(self) -> tuple[str, ...]:
        """The device config keys this driver cannot do without."""
        return NEEDS[self.interface]

    @property
    def on_the_pi(self) -> bool:
        """Whether the device is wired to the Pi (else it lives in a service, reached through a link)."""
        return self.interface in ON_THE_PI

    @property
    def outside(self) -> str:
        """What its readings are when other people's software writes them (see OUTSIDE); "" on the Pi."""
        return "" if self.on_the_pi else OUTSIDE.get(self.interface, "a device state from another system")

    def for_device(self, wiring: Wiring) -> DriverSpec:
        """The spec for one configured device: its kind, quantities and what it sets (see ``variant``)."""
        return self.variant(wiring) if self.variant is not None else self

    def where(self, wiring: Wiring) -> str:
        """Where the device lives: "gpio 17", "i2c-1 0x76", "homeassistant light.kitchen", "mqtt zigbee2mqtt/lamp"."""
        return WHERE[self.interface](wiring)
