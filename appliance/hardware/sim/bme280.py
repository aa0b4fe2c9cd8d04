"""A simulated Bosch BME280 (datasheet BST-BME280-DS002): register map, modes, oversampling, IIR filter.

It turns the environment into raw ADC values by inverting the datasheet's double-precision
compensation (section 8.1), while the driver (:mod:`appliance.hardware.drivers.bme280`) applies the
integer one (4.2.3): the two meet only through the bytes on the bus.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from appliance.hardware.drivers.bme280 import BME280Calibration
from appliance.hardware.sim import Clock, within

# Calibration of a real BME280, as published in pimoroni/bme280-python (tests/calibration.py, "known
# values"); with it, raw 529191 / 326816 / 30281 read 24.79 °C / 1006.62 hPa / 68.67 %RH.
DEFAULT_BME280_CALIBRATION = BME280Calibration(
    dig_T1=28009,
    dig_T2=25654,
    dig_T3=50,
    dig_P1=39145,
    dig_P2=-10750,
    dig_P3=3024,
    dig_P4=5667,
    dig_P5=-120,
    dig_P6=-7,
    dig_P7=15500,
    dig_P8=-14600,
    dig_P9=6000,
    dig_H1=75,
    dig_H2=376,
    dig_H3=0,
    dig_H4=286,
    dig_H5=50,
    dig_H6=30,
)

_BME_ID = 0xD0
_BME_RESET = 0xE0
_BME_CTRL_HUM = 0xF2
_BME_STATUS = 0xF3
_BME_CTRL_MEAS = 0xF4
_BME_CONFIG = 0xF5
_BME_DATA = 0xF7
_BME_SOFT_RESET_WORD = 0xB6
_BME_WRITABLE = frozenset({_BME_RESET, _BME_CTRL_HUM, _BME_CTRL_MEAS, _BME_CONFIG})
_BME_STARTUP_S = 0.002  # datasheet table 1: start-up time 2 ms, during which status.im_update is set
_T_SKIPPED = 0x80000
_H_SKIPPED = 0x8000
_OVERSAMPLING = (0, 1, 2, 4, 8, 16, 16, 16)  # osrs_x field -> factor (0 = measurement skipped)
_IIR_COEFFICIENT = (1, 2, 4, 8, 16, 16, 16, 16)  # config.filter field -> coefficient (1 = off)
_STANDBY_S = (0.0005, 0.0625, 0.125, 0.25, 0.5, 1.0, 0.010, 0.020)  # config.t_sb (BME280 values)


def compensate_temperature_double(adc_t: float, cal: BME280Calibration) -> tuple[float, int]:
    """BME280_compensate_T_double (datasheet 8.1): (temperature in °C, t_fine)."""
    var1 = (adc_t / 16384.0 - cal.dig_T1 / 1024.0) * cal.dig_T2
    var2 = ((adc_t / 131072.0 - cal.dig_T1 / 8192.0) * (adc_t / 131072.0 - cal.dig_T1 / 8192.0)) * cal.dig_T3
    return (var1 + var2) / 5120.0, int(var1 + var2)


def compensate_pressure_double(adc_p: float, t_fine: float, cal: BME280Calibration) -> float:
    """BME280_compensate_P_double (datasheet 8.1): pressure in Pa (the datasheet passes t_fine as an integer)."""
    var1 = t_fine / 2.0 - 64000.0
    var2 = var1 * var1 * cal.dig_P6 / 32768.0
    var2 = var2 + var1 * cal.dig_P5 * 2.0
    var2 = var2 / 4.0 + cal.dig_P4 * 65536.0
    var1 = (cal.dig_P3 * var1 * var1 / 524288.0 + cal.dig_P2 * var1) / 524288.0
    var1 = (1.0 + var1 / 32768.0) * cal.dig_P1
    if var1 == 0.0:
        return 0.0
    p = 1048576.0 - adc_p
    p = (p - var2 / 4096.0) * 6250.0 / var1
    var1 = cal.dig_P9 * p * p / 2147483648.0
    var2 = p * cal.dig_P8 / 32768.0
    return p + (var1 + var2 + cal.dig_P7) / 16.0


def compensate_humidity_double(adc_h: float, t_fine: float, cal: BME280Calibration) -> float:
    """bme280_compensate_H_double (datasheet 8.1): relative humidity in %, clamped to 0..100."""
    var_h = t_fine - 76800.0
    var_h = (adc_h - (cal.dig_H4 * 64.0 + cal.dig_H5 / 16384.0 * var_h)) * (
        cal.dig_H2 / 65536.0 * (1.0 + cal.dig_H6 / 67108864.0 * var_h * (1.0 + cal.dig_H3 / 67108864.0 * var_h))
    )
    var_h = var_h * (1.0 - cal.dig_H1 * var_h / 524288.0)
    return min(max(var_h, 0.0), 100.0)


def calibration_registers(cal: BME280Calibration) -> tuple[bytes, bytes]:
    """The calibration as the part stores it: 26 bytes at 0x88..0xA1 and 7 bytes at 0xE1..0xE7."""
    for name, value in (("dig_H4", cal.dig_H4), ("dig_H5", cal.dig_H5)):
        if not -2048 <= value <= 2047:
            raise ValueError(f"{name}={value} does not fit its 12 signed bits")
    calib_00 = struct.pack(
        "<HhhHhhhhhhhhBB",
        cal.dig_T1,
        cal.dig_T2,
        cal.dig_T3,
        cal.dig_P1,
        cal.dig_P2,
        cal.dig_P3,
        cal.dig_P4,
        cal.dig_P5,
        cal.dig_P6,
        cal.dig_P7,
        cal.dig_P8,
        cal.dig_P9,
        0x00,  # 0xA0 is not part of the calibration
        cal.dig_H1,
    )
    calib_26 = struct.pack("<hB", cal.dig_H2, cal.dig_H3) + bytes(
        [
            (cal.dig_H4 >> 4) & 0xFF,  # 0xE4: dig_H4[11:4]
            ((cal.dig_H5 & 0x0F) << 4) | (cal.dig_H4 & 0x0F),  # 0xE5: dig_H5[3:0] | dig_H4[3:0]
            (cal.dig_H5 >> 4) & 0xFF,  # 0xE6: dig_H5[11:4]
            cal.dig_H6 & 0xFF,
        ]
    )
    return calib_00, calib_26


def _invert(function: Callable[[float], float], target: float, low: float, high: float) -> float:
    """The x in [low, high] where a monotonic ``function`` reaches ``target`` (bisection)."""
    rising = function(high) >= function(low)
    for _ in range(64):
        middle = (low + high) / 2
        if (function(middle) < target) == rising:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _quantise(value: float, step: int, top: int) -> int:
    """An ADC output: rounded to the conversion's resolution and clamped to the register width."""
    return min(max(round(value / step) * step, 0), top)


@dataclass
class _Conversion:
    adc_p: int
    adc_t: int
    adc_h: int


class BME280Chip:
    """A Bosch BME280 on I2C: register map, forced/normal modes, oversampling, IIR filter and reset."""

    def __init__(
        self,
        temperature_c: float = 21.5,
        humidity_pct: float = 45.0,
        pressure_hpa: float = 1013.25,
        calibration: BME280Calibration | None = None,
        *,
        chip_id: int = 0x60,
        clock: Clock = time.monotonic,
    ) -> None:
        self.calibration = DEFAULT_BME280_CALIBRATION if calibration is None else calibration
        self.chip_id = chip_id  # a BMP280 reads 0x58: tests fit one to see the driver refuse it
        self.temperature_c = temperature_c
        self.humidity_pct = humidity_pct
        self.pressure_hpa = pressure_hpa
        self.set_environment(temperature_c=temperature_c, humidity_pct=humidity_pct, pressure_hpa=pressure_hpa)
        self._clock = clock
        self._calib_00, self._calib_26 = calibration_registers(self.calibration)
        self._power_on_reset(started=-math.inf)

    # -- environment ----------------------------------------------------------------------------------

    def set_environment(
        self,
        *,
        temperature_c: float | None = None,
        humidity_pct: float | None = None,
        pressure_hpa: float | None = None,
    ) -> None:
        """Change what the sensor is exposed to (within the datasheet's operating range); None keeps a value."""
        if temperature_c is not None:
            self.temperature_c = within(temperature_c, -40.0, 85.0, "BME280 operates from -40 to 85 °C")
        if humidity_pct is not None:
            self.humidity_pct = within(humidity_pct, 0.0, 100.0, "relative humidity is 0 to 100 %")
        if pressure_hpa is not None:
            self.pressure_hpa = within(pressure_hpa, 300.0, 1100.0, "BME280 operates from 300 to 1100 hPa")

    # -- I2CChip --------------------------------------------------------------------------------------

    def read(self, register: int, length: int) -> bytes:
        """A burst read: the register address auto-increments (datasheet 6.2.2)."""
        self._advance()
        # Past 0xFF the address is not documented to do anything useful; wrapping keeps reads total.
        return bytes(self._register(address & 0xFF) for address in range(register, register + length))

    def write(self, register: int, data: bytes) -> None:
        """A write: first byte to ``register``, then (register, value) pairs, as the part takes them (6.2.1)."""
        self._advance()
        if not data:
            return
        pairs = [(register, data[0]), *zip(data[1::2], data[2::2], strict=False)]
        for address, value in pairs:
            self._write_register(address, value)

    # -- internals ------------------------------------------------------------------------------------

    def _power_on_reset(self, started: float) -> None:
        self._ctrl_hum = 0x00
        self._ctrl_meas = 0x00
        self._config = 0x00
        self._humidity_oversampling = 0  # ctrl_hum is latched into this on a ctrl_meas write (5.4.3)
        self._data = bytearray([0x80, 0x00, 0x00, 0x80, 0x00, 0x00, 0x80, 0x00])
        self._filtered: list[float | None] = [None, None]  # IIR filter state for adc_T, adc_P
        self._pending: _Conversion | None = None
        self._done_at = 0.0
        self._normal_since = 0.0
        self._normal_cycles = 0
        self._nvm_copy_until = started + _BME_STARTUP_S

    def _register(self, address: int) -> int:
        if 0x88 <= address <= 0xA1:
            return self._calib_00[address - 0x88]
        if 0xE1 <= address <= 0xE7:
            return self._calib_26[address - 0xE1]
        if _BME_DATA <= address <= 0xFE:
            return self._data[address - _BME_DATA]
        if address == _BME_ID:
            return self.chip_id
        if address == _BME_CTRL_HUM:
            return self._ctrl_hum
        if address == _BME_STATUS:
            return (0x08 if self._measuring() else 0x00) | (0x01 if self._clock() < self._nvm_copy_until else 0x00)
        if address == _BME_CTRL_MEAS:
            return self._ctrl_meas
        if address == _BME_CONFIG:
            return self._config
        return 0x00  # 0xE0 (reset) reads 0; reserved registers read 0 here

    def _write_register(self, address: int, value: int) -> None:
        if address not in _BME_WRITABLE:
            return  # read-only and reserved registers ignore writes
        if address == _BME_RESET:
            if value == _BME_SOFT_RESET_WORD:  # any other value is ignored (5.4.2)
                self._power_on_reset(started=self._clock())
        elif address == _BME_CTRL_HUM:
            self._ctrl_hum = value & 0x07
        elif address == _BME_CONFIG:
            if self._mode == 0b11:
                return  # "writes to the config register in normal mode may be ignored" (5.4.6)
            self._config = value & 0xFD  # bit 1 is reserved
        else:
            self._write_ctrl_meas(value)

    @property
    def _mode(self) -> int:
        return self._ctrl_meas & 0b11

    def _write_ctrl_meas(self, value: int) -> None:
        self._ctrl_meas = value
        self._humidity_oversampling = _OVERSAMPLING[self._ctrl_hum & 0x07]
        now = self._clock()
        mode = value & 0b11
        if mode in (0b01, 0b10):  # forced: one conversion, then back to sleep
            self._pending = self._convert()
            self._done_at = now + self._measurement_time()
        else:
            self._pending = None
            if mode == 0b11:
                self._normal_since = now
                self._normal_cycles = 0

    def _measurement_time(self) -> float:
        """Typical conversion time in seconds (datasheet 9.1, t_measure,typ)."""
        t_os = _OVERSAMPLING[(self._ctrl_meas >> 5) & 0x07]
        p_os = _OVERSAMPLING[(self._ctrl_meas >> 2) & 0x07]
        h_os = self._humidity_oversampling
        milliseconds = 1 + 2 * t_os + (2 * p_os + 0.5 if p_os else 0) + (2 * h_os + 0.5 if h_os else 0)
        return milliseconds / 1000

    def _measuring(self) -> bool:
        if self._mode == 0b11:
            period = self._measurement_time() + _STANDBY_S[self._config >> 5]
            return (self._clock() - self._normal_since) % period < self._measurement_time()
        return self._pending is not None

    def _advance(self) -> None:
        """Bring the data registers up to the clock: finish a forced conversion, run normal-mode cycles."""
        now = self._clock()
        if self._pending is not None and now >= self._done_at:
            self._store(self._pending)
            self._pending = None
            self._ctrl_meas &= ~0b11 & 0xFF  # forced mode ends in sleep mode
        if self._mode == 0b11:
            period = self._measurement_time() + _STANDBY_S[self._config >> 5]
            cycles = math.floor((now - self._normal_since - self._measurement_time()) / period) + 1
            # The environment does not change between two register accesses, so after a long gap a
            # few dozen cycles settle the IIR filter as well as thousands would.
            for _ in range(min(max(cycles - self._normal_cycles, 0), 64)):
                self._store(self._convert())
            self._normal_cycles = max(cycles, self._normal_cycles)

    def _store(self, conversion: _Conversion) -> None:
        self._data[0:3] = (conversion.adc_p << 4).to_bytes(3, "big")
        self._data[3:6] = (conversion.adc_t << 4).to_bytes(3, "big")
        self._data[6:8] = conversion.adc_h.to_bytes(2, "big")

    def _filter(self, index: int, value: float, coefficient: int) -> float:
        """The IIR filter (datasheet 3.4.4): x = (x_prev * (c - 1) + x_new) / c, seeded by the first sample."""
        if coefficient == 1:
            return value
        previous = self._filtered[index]
        filtered = value if previous is None else (previous * (coefficient - 1) + value) / coefficient
        self._filtered[index] = filtered
        return filtered

    def _convert(self) -> _Conversion:
        """One conversion of the current environment into raw ADC values, as the part would output them."""
        cal = self.calibration
        t_os = _OVERSAMPLING[(self._ctrl_meas >> 5) & 0x07]
        p_os = _OVERSAMPLING[(self._ctrl_meas >> 2) & 0x07]
        coefficient = _IIR_COEFFICIENT[(self._config >> 2) & 0x07]
        top = (1 << 20) - 1

        def resolution(oversampling: int) -> int:
            # Filter off: 16 + log2(oversampling) bits, the low bits of the 20-bit field read 0 (3.4.2, 3.4.3).
            return 1 if coefficient > 1 else 16 // oversampling

        exact_t = _invert(lambda adc: compensate_temperature_double(adc, cal)[0], self.temperature_c, 0, top)
        if t_os:
            adc_t = _quantise(self._filter(0, exact_t, coefficient), resolution(t_os), top)
            # P and H are compensated with the t_fine the driver will compute from this very conversion.
            t_fine = compensate_temperature_double(adc_t, cal)[1]
        else:
            adc_t = _T_SKIPPED
            t_fine = compensate_temperature_double(exact_t, cal)[1]
        if p_os:
            exact_p = _invert(lambda adc: compensate_pressure_double(adc, t_fine, cal), self.pressure_hpa * 100, 0, top)
            adc_p = _quantise(self._filter(1, exact_p, coefficient), resolution(p_os), top)
        else:
            adc_p = _T_SKIPPED
        if self._humidity_oversampling:  # humidity has no IIR filter and is always 16 bits (3.4.1)
            exact_h = _invert(lambda adc: compensate_humidity_double(adc, t_fine, cal), self.humidity_pct, 0, 0xFFFF)
            adc_h = _quantise(exact_h, 1, 0xFFFF)
        else:
            adc_h = _H_SKIPPED
        return _Conversion(adc_p=adc_p, adc_t=adc_t, adc_h=adc_h)
