"""The ``devices:``, ``hardware:`` and ``events:`` sections: named devices, how buses are reached, sensor rules.

Split from :mod:`appliance.config.schema` when devices began to live elsewhere than on the Pi's pins: a
device names its driver, and the driver's interface (``gpio``, ``i2c``, ``spi``, ``homeassistant``, ``mqtt``; the
table in :mod:`appliance.hardware.drivers.base`) says which of the keys below it needs. The names a
driver may take, what each needs and where each lives come from the driver table, never from a list here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from appliance.config.fields import doc
from appliance.hardware.drivers import DRIVERS
from appliance.hardware.drivers.base import MqttKind

if TYPE_CHECKING:
    DriverName = str
else:
    # A Literal built from the driver table: the loader refuses any other name, listing these in table order.
    DriverName = Literal[tuple(DRIVERS)]


def _or(names: list[str]) -> str:
    """Names for a description: "a, b or c"."""
    return " or ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)


def _on(interface: str) -> str:
    """The drivers on one interface, for the descriptions below: "bme280, bh1750"."""
    return ", ".join(name for name, spec in DRIVERS.items() if spec.interface == interface)


_ADDRESSES = "; ".join(
    f"{name}: " + " or ".join(f"0x{address:02X}" for address in spec.addresses)
    for name, spec in DRIVERS.items()
    if spec.addresses
)


@dataclass
class DeviceConfig:
    """One named device: wired to the Pi, living in Home Assistant, or on an MQTT broker."""

    driver: DriverName = doc(f"what the part is: {_or(list(DRIVERS))}")
    pin: int | None = doc(f"GPIO pin (BCM number, 0-27) for {_on('gpio')}", None)
    bus: int | None = doc(f"I2C bus number ({_on('i2c')}) or SPI bus ({_on('spi')})", None)
    address: int | None = doc(f"I2C address, 0x03-0x77 ({_ADDRESSES})", None)
    device: int | None = doc(f"SPI chip select ({_on('spi')}): 0 or 1", None)
    channel: int | None = doc(f"ADC channel ({_on('spi')}): 0-7", None)
    entity: str = doc(
        "the Home Assistant entity (driver homeassistant), e.g. light.kitchen; its domain makes the kind: light a "
        "dimmer; switch, input_boolean or fan a switch; sensor a sensor; binary_sensor an input",
        "",
    )
    kind: MqttKind = doc(
        "what an mqtt device is (driver mqtt): switch; light (a dimmer); sensor; binary_sensor (an input)", ""
    )
    state_topic: str = doc("mqtt: where the device reports its state, e.g. zigbee2mqtt/garage_light", "")
    command_topic: str = doc("mqtt: where on/off is sent (switch, light), e.g. zigbee2mqtt/garage_light/set", "")
    payload_on: str = doc("mqtt: what means on, sent and reported", "ON")
    payload_off: str = doc("mqtt: what means off, sent and reported", "OFF")
    value_template: str = doc(
        "mqtt: the state out of a JSON payload, e.g. {{ value_json.state }}; empty: the payload itself", ""
    )
    brightness_command_topic: str = doc("mqtt light: where the brightness is sent (0 to brightness_scale)", "")
    brightness_value_template: str = doc(
        "mqtt light: the brightness out of the state payload, e.g. {{ value_json.brightness }}", ""
    )
    brightness_scale: int = doc("mqtt light: the device's full brightness (Zigbee2MQTT 254, Tasmota 100)", 255)
    quantity: str = doc(
        "mqtt sensor: what it measures (temperature, humidity...); binary_sensor: what it senses (motion, door)", ""
    )
    unit: str = doc("mqtt sensor: the unit of its value, e.g. °C", "")
    room: str = doc("the room it is in; people and the intent fast path use it", "")
    aliases: list[str] = doc("other names people use for it", default_factory=list)
    allow: list[Literal["read", "set"]] = doc(
        "operations allowed; empty: everything the driver can do", default_factory=list
    )
    approval: Literal["required", "none"] = doc("required: every write waits for a person to approve it", "none")
    writes_per_minute: int = doc("most writes per minute (protects relays from flapping)", 30)
    active_high: bool = doc("false when the relay or LED is on at a low pin", True)


@dataclass
class I2CAllow:
    """A raw I2C range the model may touch when hardware.raw_access is on."""

    bus: int = doc("I2C bus number")
    address: int = doc("7-bit address")
    registers: str = doc('register range, e.g. "0x00-0xFF" or "0xD0"', "0x00-0xFF")
    write: bool = doc("whether writes are allowed (reads always are, within the range)", False)


@dataclass
class SPIAllow:
    """A raw SPI device the model may talk to when hardware.raw_access is on."""

    bus: int = doc("SPI bus")
    device: int = doc("chip select")
    max_bytes: int = doc("longest transfer", 32)


@dataclass
class RawAccessConfig:
    """Raw bus tools for the model (i2c_scan, i2c_read, i2c_write, spi_transfer): off unless allowlisted."""

    enabled: bool = doc("offer the raw bus tools at all", False)
    i2c: list[I2CAllow] = doc("I2C bus/address/register ranges allowed", default_factory=list)
    spi: list[SPIAllow] = doc("SPI devices allowed", default_factory=list)


@dataclass
class HardwareConfig:
    """The buses and how devices are reached."""

    backend: Literal["auto", "real", "simulated"] = doc(
        "real GPIO/I2C/SPI, a simulation with real register maps, or auto (real on a Pi)", "auto"
    )
    approval_timeout_s: float = doc("how long a write waiting for approval stays valid", 300.0)
    raw_access: RawAccessConfig = doc("raw bus tools for the model", default_factory=RawAccessConfig)
    simulated_parts: list[str] = doc(
        'simulation only: I2C parts wired to the simulated buses but not (yet) devices, "DRIVER BUS:ADDRESS", '
        'e.g. "bme280 1:0x77": `picoagent devices scan` and the Settings page find them',
        default_factory=list,
    )


_PART = re.compile(r"\s*([a-z0-9_]+)\s+(\d+)\s*:\s*(0x[0-9a-fA-F]+|\d+)\s*")


def simulated_part(text: str) -> tuple[str, int, int]:
    """``"bme280 1:0x77"`` as (driver, bus, address); ValueError saying what is expected."""
    found = _PART.fullmatch(text)
    parts = [n for n, spec in DRIVERS.items() if spec.interface == "i2c"]
    if found is None or found.group(1) not in parts:
        raise ValueError(f'"DRIVER BUS:ADDRESS" with an I2C driver ({", ".join(parts)}), e.g. "bme280 1:0x77"')
    address = int(found.group(3), 0)
    if not 0x03 <= address <= 0x77:
        raise ValueError("an address from 0x03 to 0x77")
    return found.group(1), int(found.group(2)), address


@dataclass
class EventRule:
    """A condition on a sensor that becomes an event (a notification) when it turns true."""

    when: str = doc('the condition, e.g. "living_room.temperature > 28"')
    message: str = doc("what to say; empty: the condition and the value", "")
    every_s: float = doc("how often the sensor is read", 60.0)
    cooldown_s: float = doc("least time between two events of this rule", 900.0)
