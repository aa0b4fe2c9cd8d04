"""Sensor drivers against datasheet values and against the simulated chips (no hardware); the BME280's own
suite is tests/test_drivers_bme280.py.

Sources of the reference numbers:
- ROHM BH1750FVI Technical Note: opcodes, measurement times, and the read-format example
  0x8390 -> "(2^15 + 2^9 + 2^8 + 2^7 + 2^4) / 1.2 ≈ 28067 lx".
- Microchip MCP3008 datasheet DS21295: figure 6-1 (3-byte exchange), table 5-2 (differential pairs),
  equation 4-1 (code = 1024 × VIN / VREF).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.errors import ConfigError
from appliance.hardware.buses import HardwareError
from appliance.hardware.drivers import bh1750, mcp3008
from appliance.hardware.drivers.base import DriverSpec
from appliance.hardware.drivers.bh1750 import BH1750, count_to_lux
from appliance.hardware.drivers.mcp3008 import MCP3008
from appliance.hardware.sim.bh1750 import BH1750Chip
from appliance.hardware.sim.buses import SimulatedI2CBus, SimulatedSPIBus
from appliance.hardware.sim.mcp3008 import MCP3008Chip
from tests.fakes.clock import ManualClock
from tests.helpers import by_quantity

# --- BH1750 -------------------------------------------------------------------------------------------


def test_bh1750_count_to_lux_per_datasheet() -> None:
    assert count_to_lux(0x8390) == pytest.approx(28066.7, abs=0.05)  # the datasheet's "≈ 28067 lx"
    assert count_to_lux(0x8300) == pytest.approx(27946.7, abs=0.05)
    assert count_to_lux(0xFFFF) == pytest.approx(54612.5)
    assert count_to_lux(120, mtreg=138) == pytest.approx(50.0)  # double MTreg: double sensitivity
    assert count_to_lux(120, h_resolution_2=True) == pytest.approx(50.0)


def _bh1750(lux: float = 320.0, address: int = 0x23) -> tuple[SimulatedI2CBus, BH1750Chip, ManualClock]:
    clock = ManualClock()
    bus = SimulatedI2CBus(1)
    chip = BH1750Chip(lux, clock=clock)
    bus.attach(address, chip)
    return bus, chip, clock


@settings(max_examples=100, deadline=None)
@given(lux=st.floats(0, 54612))
def test_bh1750_reads_back_the_light(lux: float) -> None:
    bus, _, clock = _bh1750(lux)
    (reading,) = BH1750(bus, sleep=clock.sleep).read()
    assert (reading.quantity, reading.unit) == ("illuminance", "lx")
    assert reading.value == pytest.approx(lux, abs=1 / 1.2 + 0.05)  # one count, plus rounding to 0.1


def test_bh1750_saturates_at_the_top_count() -> None:
    bus, _, clock = _bh1750(80000.0)
    assert BH1750(bus, sleep=clock.sleep).read()[0].value == 54612.5


def test_bh1750_wire_protocol() -> None:
    bus, chip, clock = _bh1750(1000.0)
    sensor = BH1750(bus, sleep=clock.sleep)
    before = clock.now
    sensor.read()
    assert bus.log == [
        ("write_bytes", 0x23, -1, b"\x00"),  # power down at setup: proves something acknowledges
        ("write_bytes", 0x23, -1, b"\x01"),  # power on
        ("write_bytes", 0x23, -1, b"\x20"),  # one-time H-resolution
        ("read_bytes", 0x23, -1, 2),
    ]
    assert clock.now - before == pytest.approx(bh1750.MEASUREMENT_TIME_MAX_S)
    assert not chip.powered  # one-time measurement powered the part down again
    sensor.close()
    assert bus.log[-1] == ("write_bytes", 0x23, -1, b"\x00")


def test_bh1750_with_no_chip_at_the_address() -> None:
    bus, _, clock = _bh1750()
    with pytest.raises(HardwareError, match="no device answers at I2C address 0x5c"):
        BH1750(bus, address=0x5C, sleep=clock.sleep)


def test_bh1750_chip_result_is_not_ready_before_the_measurement_time() -> None:
    _, chip, clock = _bh1750(500.0)
    chip.write_bytes(b"\x01")
    chip.write_bytes(b"\x20")
    assert chip.read_bytes(2) == b"\x00\x00"  # data register still holds its power-up value
    clock.sleep(0.119)
    assert chip.read_bytes(2) == b"\x00\x00"
    clock.sleep(0.002)  # typical 120 ms at MTreg 69
    assert chip.read_bytes(2) == (600).to_bytes(2, "big")  # 500 lx × 1.2
    assert not chip.powered


def test_bh1750_chip_modes_and_measurement_time_register() -> None:
    _, chip, clock = _bh1750(100.0)
    chip.write_bytes(b"\x21")  # one-time H-resolution mode 2: half-lux steps
    clock.sleep(0.2)
    assert int.from_bytes(chip.read_bytes(2), "big") == 240
    chip.write_bytes(b"\x23")  # one-time L-resolution: 16 ms, coarse steps
    clock.sleep(0.016)
    assert int.from_bytes(chip.read_bytes(2), "big") == 120
    chip.write_bytes(b"\x44")  # MTreg high bits 100 ...
    chip.write_bytes(b"\x6a")  # ... low bits 01010: MTreg = 138
    assert chip.mtreg == 138
    chip.write_bytes(b"\x20")
    clock.sleep(0.239)  # the measurement time doubles with MTreg: the previous result is still there
    assert int.from_bytes(chip.read_bytes(2), "big") == 120
    clock.sleep(0.002)
    count = int.from_bytes(chip.read_bytes(2), "big")
    assert count == 240 and count_to_lux(count, mtreg=138) == pytest.approx(100.0)


def test_bh1750_chip_continuous_mode_keeps_measuring() -> None:
    _, chip, clock = _bh1750(100.0)
    chip.write_bytes(b"\x10")
    clock.sleep(0.121)
    assert int.from_bytes(chip.read_bytes(2), "big") == 120
    chip.set_lux(200.0)
    clock.sleep(0.121)
    assert int.from_bytes(chip.read_bytes(2), "big") == 240
    assert chip.powered


def test_bh1750_chip_reset_only_when_powered() -> None:
    _, chip, clock = _bh1750(100.0)
    chip.write_bytes(b"\x20")
    clock.sleep(0.2)
    chip.write_bytes(b"\x07")  # powered down after the one-time measurement: reset is not accepted
    assert chip.read_bytes(2) != b"\x00\x00"
    chip.write_bytes(b"\x01")
    chip.write_bytes(b"\x07")
    assert chip.read_bytes(2) == b"\x00\x00"


def test_bh1750_chip_through_the_register_view() -> None:
    bus, chip, clock = _bh1750(100.0)
    bus.write_block(0x23, 0x20, b"")  # the "register" byte is the opcode: exactly the wire's bytes
    clock.sleep(0.2)
    assert chip.read_bytes(2) == (120).to_bytes(2, "big")
    with pytest.raises(HardwareError, match="one opcode per write"):
        bus.write_block(0x23, 0x01, b"\x20")
    bus.write_block(0x23, 0x01, b"")
    # A combined read's register byte reaches the part as an opcode (0x00: power down) - why the driver
    # does not use read_block.
    assert bus.read_block(0x23, 0x00, 2) == (120).to_bytes(2, "big")
    assert not chip.powered


def test_bh1750_chip_refuses_negative_light() -> None:
    with pytest.raises(ValueError, match="negative"):
        BH1750Chip(-1.0)


# --- MCP3008 ------------------------------------------------------------------------------------------


def test_mcp3008_puts_the_datasheet_bytes_on_the_wire() -> None:
    spi = SimulatedSPIBus(0, 0, MCP3008Chip())
    MCP3008(spi, 0).read()
    assert spi.log == [bytes([0x01, 0x80, 0x00])]


@pytest.mark.parametrize("channel", range(8))
def test_mcp3008_every_channel(channel: int) -> None:
    chip = MCP3008Chip({ch: 0.3 * ch for ch in range(8)})
    spi = SimulatedSPIBus(0, 0, chip)
    values = by_quantity(MCP3008(spi, channel).read())
    assert spi.log == [bytes([0x01, (0x08 | channel) << 4, 0x00])]
    assert values["raw"] == int(1024 * 0.3 * channel / 3.3)
    assert values["voltage"] == pytest.approx(0.3 * channel, abs=3.3 / 1024)


def test_mcp3008_decoding() -> None:
    assert mcp3008.decode(bytes([0x00, 0x03, 0xFF])) == 1023
    assert mcp3008.decode(bytes([0x00, 0x02, 0x00])) == 512
    assert mcp3008.decode(bytes([0xFF, 0xF8 | 0x01, 0x23])) == 0x123  # don't-care bits are ignored


def test_mcp3008_voltage_and_level() -> None:
    chip = MCP3008Chip({0: 0.0, 1: 1.65, 2: 3.3, 3: 5.0}, vref=3.3)
    spi = SimulatedSPIBus(0, 0, chip)
    assert [(r.quantity, r.unit) for r in MCP3008(spi, 0).read()] == [("level", "%"), ("voltage", "V"), ("raw", "")]
    assert by_quantity(MCP3008(spi, 0).read()) == {"level": 0.0, "voltage": 0.0, "raw": 0}
    assert by_quantity(MCP3008(spi, 1).read()) == {"level": 50.0, "voltage": 1.65, "raw": 512}
    assert by_quantity(MCP3008(spi, 2).read()) == {"level": 100.0, "voltage": 3.297, "raw": 1023}
    assert by_quantity(MCP3008(spi, 3).read())["raw"] == 1023  # above VREF clips
    five_volt = SimulatedSPIBus(0, 1, MCP3008Chip({0: 1.25}, vref=5.0))
    assert by_quantity(MCP3008(five_volt, 0, vref=5.0).read()) == {"level": 25.0, "voltage": 1.25, "raw": 256}


@pytest.mark.parametrize("channel", [-1, 8, 1.5])
def test_mcp3008_refuses_a_channel_out_of_range(channel: int) -> None:
    with pytest.raises(ConfigError, match="channel must be 0 to 7"):
        MCP3008(SimulatedSPIBus(0, 0, MCP3008Chip()), channel)


def test_mcp3008_refuses_an_answer_without_the_null_bit() -> None:
    class PulledUpMiso:
        def transfer(self, data: bytes) -> bytes:
            return b"\xff" * len(data)

    with pytest.raises(HardwareError, match=r"no MCP3008 answers on SPI 0\.0"):
        MCP3008(SimulatedSPIBus(0, 0, PulledUpMiso()), 0).read()


def test_mcp3008_chip_differential_pairs() -> None:
    chip = MCP3008Chip({0: 2.0, 1: 1.0, 2: 0.5, 3: 1.5, 4: 3.3, 5: 0.0, 6: 1.0, 7: 1.0})
    expected = {0b000: 2.0 - 1.0, 0b001: 0.0, 0b010: 0.0, 0b011: 1.0, 0b100: 3.3, 0b101: 0.0, 0b110: 0.0, 0b111: 0.0}
    for selector, volts in expected.items():
        answer = chip.transfer(bytes([0x01, selector << 4, 0x00]))  # SGL/DIFF = 0
        assert mcp3008.decode(answer) == min(int(1024 * volts / 3.3), 1023), f"D2..D0 = {selector:03b}"


@given(shift=st.integers(0, 7), channel=st.integers(0, 7), volts=st.floats(0, 3.3))
def test_mcp3008_chip_ignores_leading_zeros_and_sends_lsb_first_after_b0(
    shift: int, channel: int, volts: float
) -> None:
    chip = MCP3008Chip({channel: volts})
    request = [0] * shift + [1, 1] + [(channel >> bit) & 1 for bit in (2, 1, 0)]
    request += [0] * (48 - len(request))
    answer = chip.transfer(bytes(int("".join(map(str, request[i : i + 8])), 2) for i in range(0, 48, 8)))
    bits = [(byte >> (7 - i)) & 1 for byte in answer for i in range(8)]
    null = shift + 6
    code = min(int(1024 * volts / 3.3), 1023)
    assert bits[:null] == [0] * null
    assert bits[null] == 0
    assert int("".join(map(str, bits[null + 1 : null + 11])), 2) == code  # B9..B0
    assert int("".join(map(str, reversed(bits[null + 11 : null + 20]))), 2) == code >> 1  # B1..B9, LSB first
    assert not any(bits[null + 20 :])


def test_mcp3008_chip_refuses_a_channel_out_of_range() -> None:
    with pytest.raises(ValueError, match="0 to 7"):
        MCP3008Chip().set_voltage(8, 1.0)


# --- the driver table -------------------------------------------------------------------------------------


def test_a_bus_driver_without_its_simulated_chip_or_addresses_is_refused() -> None:
    with pytest.raises(ValueError, match="simulated chip"):
        DriverSpec("adc", "sensor", "spi", ("level",), mcp3008.build)
    with pytest.raises(ValueError, match="addresses"):
        DriverSpec(
            "lux", "sensor", "i2c", ("illuminance",), bh1750.build, simulated="appliance.hardware.sim.bh1750:BH1750Chip"
        )
