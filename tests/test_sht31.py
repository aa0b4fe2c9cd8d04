"""The SHT31 driver against the datasheet's values, its simulated chip, and a configured device (no hardware).

Source of the reference numbers: Sensirion "Datasheet SHT3x-DIS" version 5 (May 2018): table 9 (the
single-shot command 0x2400), section 4.4 (the 6-byte reply), 4.12 / table 20 (CRC-8, polynomial 0x31, init
0xFF, example CRC(0xBEEF) = 0x92) and 4.13 (T = -45 + 175 × S_T / (2^16 - 1), RH = 100 × S_RH / (2^16 - 1)).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import CHECKOUT_CONFIG, load_config
from appliance.hardware.approvals import ApprovalStore
from appliance.hardware.backends import SimulatedBackend, make_backend
from appliance.hardware.buses import HardwareError
from appliance.hardware.devices import DeviceRegistry
from appliance.hardware.drivers.sht31 import SHT31, crc8, humidity_milli_percent, temperature_milli_celsius
from appliance.hardware.sim.buses import SimulatedI2CBus
from appliance.hardware.sim.sht31 import SHT31Chip, checksum
from appliance.memory.db import Database
from tests.fakes.clock import ManualClock


def on_a_bus(chip: SHT31Chip, address: int = 0x44) -> SimulatedI2CBus:
    bus = SimulatedI2CBus(1)
    bus.attach(address, chip)
    return bus


# --- the datasheet's values ---------------------------------------------------------------------------------


def test_the_crc_of_the_datasheet_example_is_0x92_in_the_driver_and_in_the_chip() -> None:
    assert crc8(b"\xbe\xef") == 0x92
    assert checksum(b"\xbe\xef") == 0x92


@pytest.mark.parametrize(
    ("raw", "celsius", "percent"),
    [
        (0x0000, -45.0, 0.0),  # the bottom of the scale
        (0x6666, 25.0, 40.0),  # 0x6666 / 0xFFFF is exactly 0.4
        (0x8000, 42.5, 50.0),  # mid-scale: 42.5013 °C, 50.0008 %RH
        (0xFFFF, 130.0, 100.0),  # the top of the scale
    ],
)
def test_raw_outputs_convert_as_the_datasheet_formulas_say(raw: int, celsius: float, percent: float) -> None:
    assert -45 + 175 * raw / 65535 == pytest.approx(celsius, abs=0.002)
    assert 100 * raw / 65535 == pytest.approx(percent, abs=0.001)
    # The driver's fixed point, rounded to its two decimals, gives the same numbers.
    assert round(temperature_milli_celsius(raw) / 1000, 2) == celsius
    assert round(humidity_milli_percent(raw) / 1000, 2) == percent


def test_the_fixed_point_conversion_stays_within_a_few_thousandths_of_the_datasheet_everywhere() -> None:
    for raw in range(0x10000):
        exact_t = -45 + 175 * raw / 65535
        exact_rh = 100 * raw / 65535
        assert exact_t - 0.004 < temperature_milli_celsius(raw) / 1000 <= exact_t
        assert exact_rh - 0.003 < humidity_milli_percent(raw) / 1000 <= exact_rh


# --- the driver against the simulated chip --------------------------------------------------------------------


def test_a_read_is_one_single_shot_measurement_returning_temperature_and_humidity() -> None:
    clock = ManualClock()
    chip = SHT31Chip(temperature_c=23.4, humidity_pct=56.7, clock=clock)
    bus = on_a_bus(chip)
    sensor = SHT31(bus, sleep=clock.sleep)
    bus.log.clear()
    temperature, humidity = sensor.read()
    assert (temperature.quantity, temperature.unit, humidity.quantity, humidity.unit) == (
        "temperature",
        "°C",
        "humidity",
        "%",
    )
    assert temperature.value == pytest.approx(23.4, abs=0.01) and humidity.value == pytest.approx(56.7, abs=0.01)
    assert bus.log == [("write_bytes", 0x44, -1, b"\x24\x00"), ("read_bytes", 0x44, -1, 6)]


def test_the_driver_waits_out_the_measurement_and_an_early_read_is_refused() -> None:
    clock = ManualClock()
    bus = on_a_bus(SHT31Chip(clock=clock))
    assert SHT31(bus, sleep=clock.sleep).read()[0].value == pytest.approx(21.5, abs=0.01)
    impatient = SHT31(bus, sleep=lambda seconds: None)
    with pytest.raises(HardwareError, match="NACKed the read header"):
        impatient.read()  # the part is still measuring: 12.5 ms typical


def test_a_corrupted_reply_fails_its_crc_with_a_clear_error_and_the_next_read_works() -> None:
    clock = ManualClock()
    chip = SHT31Chip(clock=clock)
    sensor = SHT31(on_a_bus(chip), sleep=clock.sleep)
    chip.corrupt_next_reply()
    with pytest.raises(HardwareError) as err:
        sensor.read()
    assert "the SHT31 at I2C address 0x44 on bus 1" in str(err.value) and "corrupted" in str(err.value)
    assert err.value.fix is not None and "wiring" in err.value.fix
    assert sensor.read()[1].value == pytest.approx(45.0, abs=0.01)


def test_nothing_at_the_address_is_an_error_at_start() -> None:
    with pytest.raises(HardwareError, match="no device answers at I2C address 0x45"):
        SHT31(on_a_bus(SHT31Chip(), 0x44), 0x45)


def test_the_chip_keeps_its_status_register() -> None:
    chip = SHT31Chip()
    chip.write_bytes(b"\xf3\x2d")
    assert chip.read_bytes(3) == b"\x80\x10" + bytes([checksum(b"\x80\x10")])  # alert pending, reset seen
    chip.write_bytes(b"\x30\x6d")  # heater on
    chip.write_bytes(b"\x30\x41")  # clear status
    chip.write_bytes(b"\xf3\x2d")
    assert chip.read_bytes(3)[:2] == b"\x20\x00"  # the heater bit alone is left
    chip.write_bytes(b"\x12\x34")  # no such command
    chip.write_bytes(b"\xf3\x2d")
    assert chip.read_bytes(2) == b"\x20\x02"  # "last command not processed"
    with pytest.raises(HardwareError, match="NACKed"):
        chip.read_bytes(3)  # a reply is read once


# --- as a configured device -------------------------------------------------------------------------------------


def test_an_sht31_in_the_config_is_read_through_the_device_registry_on_the_simulated_backend(tmp_path: Path) -> None:
    path = tmp_path / "picoagent.yaml"
    device = "  bathroom:\n    driver: sht31\n    bus: 1\n    address: 0x45\n    room: bathroom\n"
    marker = "\n# Sensor conditions"  # the new device goes last in the devices: block
    path.write_text(CHECKOUT_CONFIG.read_text().replace(marker, device + marker, 1))
    config = load_config(path, data_dir=tmp_path / "data", environ={})
    assert config.hardware.backend == "simulated"
    db = Database(tmp_path / "hw.db")
    backend = make_backend(config.hardware)
    registry = DeviceRegistry(config, backend, ApprovalStore(db, timeout_s=60, clock=ManualClock()))
    try:
        assert [(r.quantity, r.value) for r in registry.read_sync("bathroom")] == [
            ("temperature", pytest.approx(21.5, abs=0.01)),
            ("humidity", pytest.approx(45.0, abs=0.01)),
        ]
        assert isinstance(backend, SimulatedBackend)
        backend.chips["bathroom"].set_environment(temperature_c=26.0, humidity_pct=81.0)
        readings = {r.quantity: r.value for r in registry.read_sync("bathroom")}
        assert readings == {"temperature": pytest.approx(26.0, abs=0.01), "humidity": pytest.approx(81.0, abs=0.01)}
        info = registry.get("bathroom").info()
        assert (info.kind, info.quantities, info.allowed) == ("sensor", ("temperature", "humidity"), ("read",))
    finally:
        registry.close()
        db.close()
