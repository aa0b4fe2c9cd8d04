"""Microchip MCP3008 8-channel 10-bit ADC on SPI (datasheet DS21295), one single-ended channel per driver.

A conversion is one 3-byte transfer (datasheet figure 6-1, the layout for 8-bit SPI hosts such as a
Pi): ``[0x01, (0x08 | channel) << 4, 0x00]`` out; back come don't-care bits, a null bit (0), and the
10-bit result in the low two bits of byte 1 and all of byte 2.
"""

from __future__ import annotations

from appliance.errors import ConfigError
from appliance.hardware.buses import HardwareError, SPIBus
from appliance.hardware.drivers.base import Buses, DriverSpec, Reading, Wiring

START_BIT = 0x01
SINGLE_ENDED = 0x08
NULL_BIT = 0x04  # in byte 1 of the answer; the part always sends 0 there
FULL_SCALE = 1023  # the largest code
CODES = 1024  # datasheet equation 4-1: code = 1024 × VIN / VREF


def request(channel: int) -> bytes:
    """The 3 bytes that ask for a single-ended conversion of ``channel``."""
    return bytes([START_BIT, (SINGLE_ENDED | channel) << 4, 0x00])


def decode(answer: bytes) -> int:
    """The 10-bit code in an answer to :func:`request` (bits before the null bit are ignored)."""
    return ((answer[1] & 0x03) << 8) | answer[2]


class MCP3008:
    """One single-ended input of an MCP3008: level (% of full scale), voltage (V) and raw code."""

    def __init__(self, spi: SPIBus, channel: int, vref: float = 3.3) -> None:
        if not isinstance(channel, int) or channel not in range(8):
            raise ConfigError(
                f"MCP3008 channel must be 0 to 7, got {channel!r}", fix="use the CH number printed on the part"
            )
        if vref <= 0:
            raise ConfigError(
                f"MCP3008 vref must be a positive voltage, got {vref!r}", fix="use the voltage on VREF, often 3.3"
            )
        self.spi = spi
        self.channel = channel
        self.vref = vref

    def read(self) -> list[Reading]:
        """Convert once and return the level, the voltage and the raw code."""
        answer = self.spi.transfer(request(self.channel))
        if len(answer) != 3 or answer[1] & NULL_BIT:
            # A missing part or a MISO line pulled high reads 1s where the part always sends its null bit 0.
            raise HardwareError(
                f"no MCP3008 answers on SPI {self.spi.bus}.{self.spi.device} (got {answer.hex(' ')})",
                fix="check the wiring of MISO, MOSI, SCLK and CE, and that SPI is enabled",
            )
        raw = decode(answer)
        return [
            Reading("level", round(raw / FULL_SCALE * 100, 1), "%"),
            Reading("voltage", round(raw * self.vref / CODES, 3), "V"),
            Reading("raw", raw, ""),
        ]

    def close(self) -> None:
        """Nothing to release: the SPI device belongs to the bus."""


def build(wiring: Wiring, buses: Buses) -> MCP3008:
    """An MCP3008 input at a device's configured SPI bus, chip select and channel."""
    assert wiring.bus is not None and wiring.device is not None and wiring.channel is not None  # NEEDS
    return MCP3008(buses.spi(wiring.bus, wiring.device), wiring.channel)


SPEC = DriverSpec(
    "mcp3008",
    "sensor",
    "spi",
    ("level", "voltage", "raw"),
    build,
    simulated="appliance.hardware.sim.mcp3008:moist_soil_probe",
)
