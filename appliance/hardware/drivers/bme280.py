"""Bosch BME280 temperature, humidity and pressure sensor on I2C (datasheet BST-BME280-DS002).

Every read is one forced-mode measurement at ×1 oversampling with the IIR filter off: at most 9.3 ms
(datasheet 9.1) and the part sleeps at 0.1 µA in between, which suits a sensor polled every few seconds
or minutes. The compensation is Bosch's integer code from datasheet section 4.2.3, kept as module-level
pure functions so tests can check it against published values without a chip.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from appliance.hardware.buses import HardwareError, I2CBus
from appliance.hardware.drivers.base import DriverSpec, Reading, on_i2c

CHIP_ID = 0x60

# Register map (datasheet section 5.3, table 18).
REG_CALIB_00 = 0x88  # calib00..calib25: dig_T1..dig_P9, 0xA0 unused, dig_H1 at 0xA1
REG_ID = 0xD0
REG_CALIB_26 = 0xE1  # calib26..: dig_H2..dig_H6 in 0xE1..0xE7
REG_CTRL_HUM = 0xF2
REG_STATUS = 0xF3
REG_CTRL_MEAS = 0xF4
REG_CONFIG = 0xF5
REG_DATA = 0xF7  # press_msb .. hum_lsb

CALIB_00_LENGTH = 26
CALIB_26_LENGTH = 7
DATA_LENGTH = 8

STATUS_MEASURING = 0x08  # status bit 3: set while a conversion runs
OVERSAMPLING_X1 = 0b001
MODE_SLEEP = 0b00
MODE_FORCED = 0b01
CTRL_MEAS_FORCED_X1 = (OVERSAMPLING_X1 << 5) | (OVERSAMPLING_X1 << 2) | MODE_FORCED
CTRL_MEAS_SLEEP_X1 = (OVERSAMPLING_X1 << 5) | (OVERSAMPLING_X1 << 2) | MODE_SLEEP

# Datasheet 9.1: t_measure,max = 1.25 + 2.3·T_os + (2.3·P_os + 0.575) + (2.3·H_os + 0.575) ms.
MEASUREMENT_TIME_MAX_S = (1.25 + 2.3 * 1 + (2.3 * 1 + 0.575) + (2.3 * 1 + 0.575)) / 1000
POLL_INTERVAL_S = 0.001
MAX_POLLS = 50  # after the datasheet maximum, give the part another ~50 ms before calling it stuck

SKIPPED_20BIT = 0x80000  # what T and P read when not measured (reset value, or oversampling "skipped")
SKIPPED_16BIT = 0x8000  # the same for H

# Chip ids of Bosch parts that sit at the same addresses and are easy to confuse with a BME280.
OTHER_CHIP_IDS = {
    0x55: "a BMP180/BMP085 (pressure and temperature only)",
    0x56: "a BMP280 engineering sample (pressure and temperature only, no humidity)",
    0x57: "a BMP280 engineering sample (pressure and temperature only, no humidity)",
    0x58: "a BMP280 (pressure and temperature only, no humidity)",
    0x61: "a BME680 (a different register map)",
}


@dataclass(frozen=True)
class BME280Calibration:
    """The trimming parameters burnt into each BME280 (datasheet 4.2.2, table 16)."""

    dig_T1: int  # unsigned short
    dig_T2: int  # signed short
    dig_T3: int
    dig_P1: int  # unsigned short
    dig_P2: int  # signed shorts from here to dig_P9
    dig_P3: int
    dig_P4: int
    dig_P5: int
    dig_P6: int
    dig_P7: int
    dig_P8: int
    dig_P9: int
    dig_H1: int  # unsigned char
    dig_H2: int  # signed short
    dig_H3: int  # unsigned char
    dig_H4: int  # signed 12 bits, packed with dig_H5 (see parse_calibration)
    dig_H5: int  # signed 12 bits
    dig_H6: int  # signed char


def _signed8(value: int) -> int:
    return value - 0x100 if value & 0x80 else value


def parse_calibration(calib_00: bytes, calib_26: bytes) -> BME280Calibration:
    """Decode the calibration from the 26 bytes at 0x88..0xA1 and the 7 bytes at 0xE1..0xE7."""
    if len(calib_00) < CALIB_00_LENGTH or len(calib_26) < CALIB_26_LENGTH:
        raise ValueError(
            f"BME280 calibration needs {CALIB_00_LENGTH} + {CALIB_26_LENGTH} bytes, "
            f"got {len(calib_00)} + {len(calib_26)}"
        )
    t1, t2, t3, p1, p2, p3, p4, p5, p6, p7, p8, p9 = struct.unpack_from("<HhhHhhhhhhhh", calib_00)
    (h2,) = struct.unpack_from("<h", calib_26)
    e4, e5, e6 = calib_26[3], calib_26[4], calib_26[5]
    return BME280Calibration(
        dig_T1=t1,
        dig_T2=t2,
        dig_T3=t3,
        dig_P1=p1,
        dig_P2=p2,
        dig_P3=p3,
        dig_P4=p4,
        dig_P5=p5,
        dig_P6=p6,
        dig_P7=p7,
        dig_P8=p8,
        dig_P9=p9,
        dig_H1=calib_00[25],
        dig_H2=h2,
        dig_H3=calib_26[2],
        # dig_H4 = 0xE4[7:0] : 0xE5[3:0] and dig_H5 = 0xE6[7:0] : 0xE5[7:4]; the whole byte is the
        # signed top of each 12-bit value, as in Bosch's BME280_driver (int8_t cast, then * 16).
        dig_H4=(_signed8(e4) << 4) | (e5 & 0x0F),
        dig_H5=(_signed8(e6) << 4) | (e5 >> 4),
        dig_H6=_signed8(calib_26[6]),
    )


def _c_div(numerator: int, denominator: int) -> int:
    """Integer division truncating toward zero, as C's ``/`` does (Python's ``//`` floors)."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator < 0) == (denominator < 0) else -quotient


# The three functions below are datasheet section 4.2.3 transcribed line by line. Python integers do
# not overflow, so for in-range inputs they equal the C code; ">>" is arithmetic in both.


def compensate_temperature(adc_t: int, cal: BME280Calibration) -> tuple[int, int]:
    """BME280_compensate_T_int32: (temperature in 0.01 °C, t_fine for the other two formulas)."""
    var1 = (((adc_t >> 3) - (cal.dig_T1 << 1)) * cal.dig_T2) >> 11
    var2 = (((((adc_t >> 4) - cal.dig_T1) * ((adc_t >> 4) - cal.dig_T1)) >> 12) * cal.dig_T3) >> 14
    t_fine = var1 + var2
    return (t_fine * 5 + 128) >> 8, t_fine


def compensate_pressure(adc_p: int, t_fine: int, cal: BME280Calibration) -> int:
    """BME280_compensate_P_int64: pressure in Pa as Q24.8 (divide by 256 for Pa); 0 if uncalibrated."""
    var1 = t_fine - 128000
    var2 = var1 * var1 * cal.dig_P6
    var2 = var2 + ((var1 * cal.dig_P5) << 17)
    var2 = var2 + (cal.dig_P4 << 35)
    var1 = ((var1 * var1 * cal.dig_P3) >> 8) + ((var1 * cal.dig_P2) << 12)
    var1 = (((1 << 47) + var1) * cal.dig_P1) >> 33
    if var1 == 0:
        return 0  # the datasheet's guard against dividing by zero
    p = 1048576 - adc_p
    p = _c_div(((p << 31) - var2) * 3125, var1)
    var1 = (cal.dig_P9 * (p >> 13) * (p >> 13)) >> 25
    var2 = (cal.dig_P8 * p) >> 19
    return ((p + var1 + var2) >> 8) + (cal.dig_P7 << 4)


def compensate_humidity(adc_h: int, t_fine: int, cal: BME280Calibration) -> int:
    """bme280_compensate_H_int32: relative humidity in % as Q22.10 (divide by 1024), clamped to 0..100 %."""
    x = t_fine - 76800
    # The datasheet writes v_x1_u32r = offset_term * gain_term in one expression; split for reading.
    offset_term = (((adc_h << 14) - (cal.dig_H4 << 20) - (cal.dig_H5 * x)) + 16384) >> 15
    gain_term = (
        ((((((x * cal.dig_H6) >> 10) * (((x * cal.dig_H3) >> 11) + 32768)) >> 10) + 2097152) * cal.dig_H2) + 8192
    ) >> 14
    v = offset_term * gain_term
    v = v - (((((v >> 15) * (v >> 15)) >> 7) * cal.dig_H1) >> 4)
    v = max(v, 0)
    v = min(v, 419430400)
    return v >> 12


def decode_data(data: bytes) -> tuple[int, int, int]:
    """Split the 8 data bytes read from 0xF7 into (adc_P, adc_T, adc_H): 20, 20 and 16 bits."""
    adc_p = (data[0] << 12) | (data[1] << 4) | (data[2] >> 4)
    adc_t = (data[3] << 12) | (data[4] << 4) | (data[5] >> 4)
    adc_h = (data[6] << 8) | data[7]
    return adc_p, adc_t, adc_h


class BME280:
    """A Bosch BME280 on an I2C bus: temperature (°C), relative humidity (%) and pressure (hPa)."""

    def __init__(self, bus: I2CBus, address: int = 0x76, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.bus = bus
        self.address = address
        self._sleep = sleep
        chip_id = bus.read_block(address, REG_ID, 1)[0]
        if chip_id != CHIP_ID:
            what = OTHER_CHIP_IDS.get(chip_id, "not a BME280")
            raise HardwareError(
                f"the chip at I2C address {address:#04x} on bus {bus.number} has id {chip_id:#04x}: "
                f"that is {what}; a BME280 reads {CHIP_ID:#04x}",
                fix="check the part on the board (BME280 and BMP280 breakouts look alike) and the configured address",
            )
        self.calibration = parse_calibration(
            bus.read_block(address, REG_CALIB_00, CALIB_00_LENGTH),
            bus.read_block(address, REG_CALIB_26, CALIB_26_LENGTH),
        )
        # config is only reliably written in sleep mode (datasheet 5.4.6), so park the part first.
        bus.write_block(address, REG_CTRL_MEAS, bytes([CTRL_MEAS_SLEEP_X1]))
        bus.write_block(address, REG_CONFIG, bytes([0x00]))  # filter off, 3-wire SPI off

    def read(self) -> list[Reading]:
        """Trigger one forced measurement, wait for it, and return temperature, humidity and pressure."""
        # ctrl_hum only takes effect on the next ctrl_meas write (5.4.3), and a brown-out resets both, so
        # both go out on every read. A BME280 write is (register, value) pairs in one transaction (6.2.1).
        self.bus.write_block(self.address, REG_CTRL_HUM, bytes([OVERSAMPLING_X1, REG_CTRL_MEAS, CTRL_MEAS_FORCED_X1]))
        self._wait_for_measurement()
        # One burst read: the part shadows the data registers during a burst so T, P and H belong together.
        data = self.bus.read_block(self.address, REG_DATA, DATA_LENGTH)
        adc_p, adc_t, adc_h = decode_data(data)
        if (adc_p, adc_t, adc_h) == (SKIPPED_20BIT, SKIPPED_20BIT, SKIPPED_16BIT):
            raise HardwareError(
                f"the BME280 at I2C address {self.address:#04x} on bus {self.bus.number} returned its reset "
                "values: no measurement happened",
                fix="check the sensor's power supply; the part may be resetting",
            )
        centi_celsius, t_fine = compensate_temperature(adc_t, self.calibration)
        pascal_q8 = compensate_pressure(adc_p, t_fine, self.calibration)
        humidity_q10 = compensate_humidity(adc_h, t_fine, self.calibration)
        return [
            Reading("temperature", round(centi_celsius / 100, 2), "°C"),
            Reading("humidity", round(humidity_q10 / 1024, 2), "%"),
            Reading("pressure", round(pascal_q8 / 256 / 100, 2), "hPa"),
        ]

    def _wait_for_measurement(self) -> None:
        self._sleep(MEASUREMENT_TIME_MAX_S)
        for _ in range(MAX_POLLS):
            if not self.bus.read_block(self.address, REG_STATUS, 1)[0] & STATUS_MEASURING:
                return
            self._sleep(POLL_INTERVAL_S)
        waited_ms = (MEASUREMENT_TIME_MAX_S + MAX_POLLS * POLL_INTERVAL_S) * 1000
        raise HardwareError(
            f"the BME280 at I2C address {self.address:#04x} on bus {self.bus.number} was still measuring "
            f"after {waited_ms:.0f} ms (the datasheet maximum is {MEASUREMENT_TIME_MAX_S * 1000:.1f} ms)",
            fix="check the sensor's wiring and power supply",
        )

    def close(self) -> None:
        """Nothing to release: the part already sleeps between forced measurements."""


build = on_i2c(BME280)  # the part at a device's configured bus and address


SPEC = DriverSpec(
    "bme280",
    "sensor",
    "i2c",
    ("temperature", "humidity", "pressure"),
    build,
    addresses=(0x76, 0x77),  # SDO to GND or to VDDIO
    simulated="appliance.hardware.sim.bme280:BME280Chip",
)
