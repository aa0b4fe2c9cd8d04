"""Bus interfaces (I2C, SPI) and their real implementations (smbus2, spidev).

Drivers talk to a bus object, never to smbus2 or spidev directly, so the same driver runs on a Pi and
against a simulated chip with the same register map (on the buses of :mod:`appliance.hardware.sim.buses`).
Every call here blocks: callers run them off the event loop, holding that bus's lock.
"""

from __future__ import annotations

import threading
from typing import Protocol

from appliance.errors import PicoagentError


class HardwareError(PicoagentError, OSError):
    """A bus or device did not answer as expected."""

    http_status = 502  # for the web API the device is the upstream that failed, not the appliance


class I2CBus(Protocol):
    """One I2C bus (``/dev/i2c-N``)."""

    number: int
    lock: threading.Lock

    def read_block(self, address: int, register: int, length: int) -> bytes:
        """Write the register address, then read ``length`` bytes, in one combined transaction."""
        ...

    def write_block(self, address: int, register: int, data: bytes) -> None:
        """Write ``data`` starting at ``register``."""
        ...

    def probe(self, address: int) -> bool:
        """Whether a device acknowledges ``address`` (a one-byte read, as i2cdetect -r does)."""
        ...

    def write_bytes(self, address: int, data: bytes) -> None:
        """Write ``data`` as one transaction with no register address (an opcode to a part such as the BH1750)."""
        ...

    def read_bytes(self, address: int, length: int) -> bytes:
        """Read ``length`` bytes as one transaction with no register address written first."""
        ...


class SPIBus(Protocol):
    """One SPI device (``/dev/spidevB.D``)."""

    bus: int
    device: int
    lock: threading.Lock

    def transfer(self, data: bytes) -> bytes:
        """Full-duplex transfer: send ``data``, return as many bytes received."""
        ...


# --- real --------------------------------------------------------------------------------------------


class SMBusI2C:
    """An I2C bus through smbus2 (combined transactions with i2c_rdwr)."""

    def __init__(self, number: int) -> None:
        try:
            from smbus2 import SMBus
        except ImportError:
            raise HardwareError("smbus2 is not installed", fix="pip install 'picoagent[pi]' on the Pi") from None
        self.number = number
        self.lock = threading.Lock()
        try:
            self._bus = SMBus(number)
        except OSError as exc:
            raise HardwareError(
                f"cannot open /dev/i2c-{number}: {exc.strerror}",
                fix="enable I2C (dtparam=i2c_arm=on), load i2c-dev, and add the user to the i2c group",
            ) from None

    def read_block(self, address: int, register: int, length: int) -> bytes:
        """Write the register, then read, as one transaction (no stop in between)."""
        from smbus2 import i2c_msg

        write, read = i2c_msg.write(address, [register]), i2c_msg.read(address, length)
        try:
            self._bus.i2c_rdwr(write, read)
        except OSError as exc:
            raise HardwareError(f"I2C bus {self.number}, address {address:#04x}: {exc.strerror}") from None
        return bytes(read)

    def write_block(self, address: int, register: int, data: bytes) -> None:
        """Write bytes starting at a register."""
        from smbus2 import i2c_msg

        try:
            self._bus.i2c_rdwr(i2c_msg.write(address, [register, *data]))
        except OSError as exc:
            raise HardwareError(f"I2C bus {self.number}, address {address:#04x}: {exc.strerror}") from None

    def write_bytes(self, address: int, data: bytes) -> None:
        """One write transaction with no register address (an opcode to a command-only part)."""
        from smbus2 import i2c_msg

        try:
            self._bus.i2c_rdwr(i2c_msg.write(address, list(data)))
        except OSError as exc:
            raise HardwareError(f"I2C bus {self.number}, address {address:#04x}: {exc.strerror}") from None

    def read_bytes(self, address: int, length: int) -> bytes:
        """One read transaction with no register address written first (no repeated start, unlike read_block)."""
        from smbus2 import i2c_msg

        read = i2c_msg.read(address, length)
        try:
            self._bus.i2c_rdwr(read)
        except OSError as exc:
            raise HardwareError(f"I2C bus {self.number}, address {address:#04x}: {exc.strerror}") from None
        return bytes(read)

    def probe(self, address: int) -> bool:
        """A one-byte read, as `i2cdetect -r` does (safe for write-only EEPROM-like parts, unlike write-quick)."""
        try:
            self._bus.read_byte(address)
        except OSError:
            return False
        return True


class SpidevSPI:
    """An SPI device through spidev."""

    def __init__(self, bus: int, device: int, speed_hz: int = 1_000_000) -> None:
        try:
            import spidev
        except ImportError:
            raise HardwareError("spidev is not installed", fix="pip install 'picoagent[pi]' on the Pi") from None
        self.bus = bus
        self.device = device
        self.lock = threading.Lock()
        self._spi = spidev.SpiDev()
        try:
            self._spi.open(bus, device)
        except OSError as exc:
            raise HardwareError(
                f"cannot open /dev/spidev{bus}.{device}: {exc.strerror}",
                fix="enable SPI (dtparam=spi=on) and add the user to the spi group",
            ) from None
        self._spi.max_speed_hz = speed_hz
        self._spi.mode = 0

    def transfer(self, data: bytes) -> bytes:
        """Full-duplex transfer."""
        try:
            return bytes(self._spi.xfer2(list(data)))
        except OSError as exc:
            raise HardwareError(f"SPI {self.bus}.{self.device}: {exc.strerror}") from None
