"""Sensirion SHT31 temperature and humidity sensor on I2C (datasheet "SHT3x-DIS", version 5, May 2018).

The part has no registers: every command is 16 bits, MSB first, in its own write transaction, and a
plain read transaction returns what the command produced (section 4). Each read here is one single-shot
measurement at high repeatability *without* clock stretching (command 0x2400, table 9): the Pi's I2C
controller mishandles a slave holding SCL low, so the driver waits the datasheet's maximum measurement
time (15 ms, table 4) instead, then reads. An early read header is NACKed by the part, which the bus
reports as an error rather than a stale value.

The reply is 6 bytes: T msb, T lsb, CRC, RH msb, RH lsb, CRC. Every CRC-8 is checked (section 4.12:
polynomial 0x31, initial value 0xFF), so a transfer corrupted on a long or noisy line is an error with a
fix, never a wrong reading.

The conversion is Sensirion's fixed-point one from its embedded drivers, milli-°C = ((21875 × S_T) >> 13)
- 45000 and milli-%RH = (12500 × S_RH) >> 13: the datasheet's 175 / (2^16 - 1) and 100 / (2^16 - 1)
(section 4.13) taken as 175 / 2^16 and 100 / 2^16, at most 0.004 °C and 0.003 %RH below the exact
values, under the two decimals a reading keeps. Pure functions, so tests check them without a chip.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from appliance.hardware.buses import HardwareError, I2CBus
from appliance.hardware.drivers.base import DriverSpec, Reading, on_i2c

MEASURE_HIGH_REPEATABILITY = 0x2400  # single shot, clock stretching disabled (table 9)
READ_STATUS = 0xF32D  # status register: 2 bytes and their CRC (table 17)
MEASUREMENT_TIME_MAX_S = 0.015  # high repeatability, maximum (table 4); typically 12.5 ms
REPLY_LENGTH = 6  # T msb, T lsb, CRC, RH msb, RH lsb, CRC
CRC_POLYNOMIAL = 0x31  # x^8 + x^5 + x^4 + 1
CRC_INIT = 0xFF


def crc8(data: bytes) -> int:
    """The CRC-8 of a data word as the part sends it (section 4.12; CRC(0xBEEF) = 0x92)."""
    crc = CRC_INIT
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ CRC_POLYNOMIAL) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def temperature_milli_celsius(raw: int) -> int:
    """Temperature in m°C for a 16-bit output: -45 °C + 175 °C × S_T / 2^16, in fixed point."""
    return ((21875 * raw) >> 13) - 45000


def humidity_milli_percent(raw: int) -> int:
    """Relative humidity in m%RH for a 16-bit output: 100 %RH × S_RH / 2^16, in fixed point."""
    return (12500 * raw) >> 13


class SHT31:
    """A Sensirion SHT31 (or SHT30/SHT35) on an I2C bus: temperature (°C) and relative humidity (%)."""

    def __init__(self, bus: I2CBus, address: int = 0x44, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.bus = bus
        self.address = address
        self._sleep = sleep
        # The part has no id register; a status read whose CRC checks proves an SHT3x answers here.
        self.bus.write_bytes(address, READ_STATUS.to_bytes(2, "big"))
        self._words(self.bus.read_bytes(address, 3))

    def read(self) -> list[Reading]:
        """Measure once at high repeatability, wait for it, and return temperature and humidity."""
        self.bus.write_bytes(self.address, MEASURE_HIGH_REPEATABILITY.to_bytes(2, "big"))
        self._sleep(MEASUREMENT_TIME_MAX_S)
        raw_t, raw_rh = self._words(self.bus.read_bytes(self.address, REPLY_LENGTH))
        return [
            Reading("temperature", round(temperature_milli_celsius(raw_t) / 1000, 2), "°C"),
            Reading("humidity", round(humidity_milli_percent(raw_rh) / 1000, 2), "%"),
        ]

    def _words(self, reply: bytes) -> list[int]:
        """The 16-bit words of a reply, each checked against the CRC that follows it."""
        words = []
        for offset in range(0, len(reply), 3):
            word, crc = reply[offset : offset + 2], reply[offset + 2]
            if crc8(word) != crc:
                raise HardwareError(
                    f"the SHT31 at I2C address {self.address:#04x} on bus {self.bus.number} sent {word.hex()} with "
                    f"CRC {crc:#04x} where {crc8(word):#04x} was due: the reply was corrupted on the way",
                    fix="check the wiring (short SDA/SCL leads, pull-ups, a steady supply); a single bad read can "
                    "simply be retried",
                )
            words.append(int.from_bytes(word, "big"))
        return words

    def close(self) -> None:
        """Nothing to release: the part sleeps by itself between single-shot measurements."""


build = on_i2c(SHT31)  # the part at a device's configured bus and address


SPEC = DriverSpec(
    "sht31",
    "sensor",
    "i2c",
    ("temperature", "humidity"),
    build,
    addresses=(0x44, 0x45),  # ADDR to VSS or to VDD
    simulated="appliance.hardware.sim.sht31:SHT31Chip",
)
