"""ROHM BH1750FVI ambient light sensor on I2C (datasheet "BH1750FVI Technical Note", 2009 rev. B).

The part has no registers: the host writes one-byte opcodes, each in its own write transaction, and
reads the 16-bit result, high byte first, with a plain read. So this driver needs register-less
transactions:

- an opcode is ``write_bytes(address, bytes([opcode]))`` (on the wire: address+W, opcode, STOP);
- the result is ``read_bytes(address, 2)`` (on the wire: address+R, high, low, STOP).

A ``read_block`` would not do: its register byte reaches the BH1750 as an opcode before the read.

Each read is one one-time H-resolution measurement: the part powers itself down afterwards, so it
draws 0.01 µA between readings instead of 120 µA.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from appliance.hardware.buses import HardwareError, I2CBus
from appliance.hardware.drivers.base import DriverSpec, Reading, on_i2c

POWER_DOWN = 0x00
POWER_ON = 0x01
ONE_TIME_H_RESOLUTION = 0x20
DEFAULT_MTREG = 69  # measurement time register at power-on; sensitivity scales with it
# H-resolution measurement time at the default MTreg: 120 ms typical, 180 ms maximum. Waiting the
# maximum costs 60 ms per read; reading early would silently return the previous result.
MEASUREMENT_TIME_MAX_S = 0.180


def count_to_lux(count: int, mtreg: int = DEFAULT_MTREG, *, h_resolution_2: bool = False) -> float:
    """Illuminance for a 16-bit result: count / 1.2 × 69/MTreg, halved in H-resolution mode 2 (datasheet)."""
    lux = count / 1.2 * DEFAULT_MTREG / mtreg
    return lux / 2 if h_resolution_2 else lux


class BH1750:
    """A ROHM BH1750FVI on an I2C bus: illuminance in lux, one one-time H-resolution measurement per read."""

    def __init__(self, bus: I2CBus, address: int = 0x23, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.bus = bus
        self.address = address
        self._sleep = sleep
        # The part has no id to check; a power-down opcode at least proves something acknowledges here.
        self.bus.write_bytes(address, bytes([POWER_DOWN]))

    def read(self) -> list[Reading]:
        """Power on, measure once at H resolution (the part powers down after), wait, and read the count."""
        self.bus.write_bytes(self.address, bytes([POWER_ON]))
        self.bus.write_bytes(self.address, bytes([ONE_TIME_H_RESOLUTION]))
        self._sleep(MEASUREMENT_TIME_MAX_S)
        count = int.from_bytes(self.bus.read_bytes(self.address, 2), "big")
        return [Reading("illuminance", round(count_to_lux(count), 1), "lx")]

    def close(self) -> None:
        """Power the part down (one-time measurements already leave it so; this covers an interrupted read)."""
        with contextlib.suppress(HardwareError):  # best effort: closing must not fail if the part is gone
            self.bus.write_bytes(self.address, bytes([POWER_DOWN]))


build = on_i2c(BH1750)  # the part at a device's configured bus and address


SPEC = DriverSpec(
    "bh1750",
    "sensor",
    "i2c",
    ("illuminance",),
    build,
    addresses=(0x23, 0x5C),  # ADDR low or high
    simulated="appliance.hardware.sim.bh1750:BH1750Chip",
)
