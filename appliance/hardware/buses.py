"""Bus interfaces (I2C, SPI) and their real implementations (smbus2, spidev).

Drivers talk to a bus object, never to smbus2 or spidev directly, so the same driver runs on a Pi and
against a simulated chip with the same register map (on the buses of :mod:`appliance.hardware.sim.buses`).
Every call here blocks: callers run them off the event loop, holding that bus's lock.

:meth:`I2CBus.detect` is the one probe, as i2cdetect makes it (tools/i2cdetect.c of i2c-tools): the
address is selected with the I2C_SLAVE ioctl, which the kernel refuses with EBUSY when a driver of its own
owns the address (i2cdetect's "UU"), and then nothing is sent; else one SMBus quick write or one receive
byte (:mod:`appliance.hardware.scan` says which, by address). The answer is a :class:`Detection`, never an
exception: a scan goes on past an address that failed and says how.
"""

from __future__ import annotations

import errno
import os
import threading
from dataclasses import dataclass
from typing import Literal, Protocol

from appliance.errors import PicoagentError

# How an address is probed: an SMBus quick write (no data; i2cdetect -q) or an SMBus receive byte (i2cdetect -r).
ProbeCommand = Literal["quick", "read"]
# What a probe found: a device acknowledged; nothing did; a kernel driver owns the address (not probed);
# the bus failed otherwise (reported, never raised); the adapter cannot make that command (not probed).
ProbeState = Literal["found", "absent", "busy", "error", "skipped"]
# The errors a probe gets when no device acknowledges: ENXIO (most adapters), EREMOTEIO (the Pi's
# i2c-bcm2835 on a NACK), EIO and ETIMEDOUT (some adapters). Any other is a failure worth showing.
NO_DEVICE = frozenset({errno.ENXIO, errno.EREMOTEIO, errno.EIO, errno.ETIMEDOUT})


@dataclass(frozen=True)
class Detection:
    """One address's answer to a probe."""

    address: int
    command: ProbeCommand
    state: ProbeState
    detail: str = ""  # for an error: what the bus said (strerror); for skipped: why

    @classmethod
    def failed(cls, address: int, command: ProbeCommand, code: int | None) -> Detection:
        """The answer for a probe that failed with ``code`` (an errno): absent when it means no device."""
        if code in NO_DEVICE:
            return cls(address, command, "absent")
        return cls(address, command, "error", os.strerror(code) if code else "unknown error")


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

    def detect(self, address: int, command: ProbeCommand) -> Detection:
        """Probe ``address`` with ``command`` as i2cdetect does (a busy address is not touched); never raises."""
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

    def detect(self, address: int, command: ProbeCommand) -> Detection:
        """Select the address (EBUSY: a kernel driver owns it, left alone), then quick write or receive byte."""
        import fcntl

        from smbus2.smbus2 import I2C_SLAVE, I2cFunc

        needs = I2cFunc.SMBUS_QUICK if command == "quick" else I2cFunc.SMBUS_READ_BYTE
        if not self._bus.funcs & needs:  # as i2cdetect: an adapter that cannot make the command skips the address
            return Detection(address, command, "skipped", f"the adapter of bus {self.number} cannot {command}")
        try:
            # Our own I2C_SLAVE (never I2C_SLAVE_FORCE), so EBUSY here is the kernel's "a driver owns it", told
            # apart from an EBUSY of the transfer; smbus2 then selects the same address again only if it must.
            assert self._bus.fd is not None  # opened in __init__
            fcntl.ioctl(self._bus.fd, I2C_SLAVE, address)
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                return Detection(address, command, "busy")
            return Detection(address, command, "error", f"cannot select the address: {exc.strerror}")
        try:
            # scan.command_for chooses: a quick write corrupts the AT24RF08 EEPROM, a receive byte locks some
            # write-only clock chips
            if command == "quick":
                self._bus.write_quick(address, force=False)
            else:
                self._bus.read_byte(address, force=False)
        except OSError as exc:
            return Detection.failed(address, command, exc.errno)
        return Detection(address, command, "found")


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
