"""Simulated I2C and SPI buses: the bus side of the fake, holding simulated chips at their addresses.

They implement :class:`~appliance.hardware.buses.I2CBus` and :class:`~appliance.hardware.buses.SPIBus`
as the real buses do, record every transaction (tests assert on the bytes), and pass each one to the
chip at its address, which answers as the part would (:mod:`appliance.hardware.sim`).

The I2C bus also stands for what the kernel adds on a Pi: an address a kernel driver owns (:meth:`claim`:
i2cdetect's "UU", refused before anything reaches the wire, so it is neither logged nor passed on) and an
address whose transfers fail with an errno (:attr:`SimulatedI2CBus.faults`: a stuck or noisy bus).
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, runtime_checkable

from appliance.hardware.buses import Detection, HardwareError, ProbeCommand


class I2CChip(Protocol):
    """A simulated I2C chip: a register map."""

    def read(self, register: int, length: int) -> bytes:
        """The bytes at ``register`` onward."""
        ...

    def write(self, register: int, data: bytes) -> None:
        """Write bytes at ``register`` onward."""
        ...


@runtime_checkable
class RegisterlessI2CChip(Protocol):
    """A simulated I2C chip that answers register-less transactions (a command-only part such as the BH1750)."""

    def write_bytes(self, data: bytes) -> None:
        """Take one write transaction."""
        ...

    def read_bytes(self, length: int) -> bytes:
        """Answer one read transaction."""
        ...


class SPIChip(Protocol):
    """A simulated SPI chip."""

    def transfer(self, data: bytes) -> bytes:
        """Answer one full-duplex transfer."""
        ...


class SimulatedI2CBus:
    """An I2C bus with simulated chips at their addresses; records every transaction."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.lock = threading.Lock()
        self.chips: dict[int, I2CChip] = {}
        self.log: list[tuple[str, int, int, Any]] = []  # (op, address, register, data or length)
        self.claimed: set[int] = set()  # addresses a kernel driver owns: the I2C_SLAVE ioctl answers EBUSY
        self.faults: dict[int, int] = {}  # address -> the errno every probe there fails with

    def attach(self, address: int, chip: I2CChip) -> None:
        """Put a chip on the bus."""
        self.chips[address] = chip

    def claim(self, address: int) -> None:
        """Let a kernel driver own ``address`` (as a device-tree overlay does): a probe there is refused, unsent."""
        self.claimed.add(address)

    def _chip(self, address: int) -> I2CChip:
        chip = self.chips.get(address)
        if chip is None:
            raise HardwareError(f"no device answers at I2C address {address:#04x} on bus {self.number}")
        return chip

    def read_block(self, address: int, register: int, length: int) -> bytes:
        """Combined write-register-then-read, as i2c_rdwr does."""
        self.log.append(("read", address, register, length))
        return bytes(self._chip(address).read(register, length))

    def write_block(self, address: int, register: int, data: bytes) -> None:
        """Write bytes at a register."""
        self.log.append(("write", address, register, bytes(data)))
        self._chip(address).write(register, bytes(data))

    def detect(self, address: int, command: ProbeCommand) -> Detection:
        """A quick write ("quick" in the log) or receive byte ("read_byte"): a chip at the address acknowledges."""
        if address in self.claimed:
            return Detection(address, command, "busy")  # the ioctl is refused: nothing reaches the wire or the log
        self.log.append(("quick" if command == "quick" else "read_byte", address, -1, 0))
        if address in self.faults:
            return Detection.failed(address, command, self.faults[address])
        # The byte a receive byte returns comes from the chip's internal pointer (not simulated); a probe drops it.
        return Detection(address, command, "found" if address in self.chips else "absent")

    def write_bytes(self, address: int, data: bytes) -> None:
        """One write transaction with no register address."""
        self.log.append(("write_bytes", address, -1, bytes(data)))
        chip = self._chip(address)
        if isinstance(chip, RegisterlessI2CChip):
            chip.write_bytes(bytes(data))
        elif data:  # a register chip takes the first byte as the register address, as on the wire
            chip.write(data[0], bytes(data[1:]))

    def read_bytes(self, address: int, length: int) -> bytes:
        """One read transaction with no register address written first."""
        self.log.append(("read_bytes", address, -1, length))
        chip = self._chip(address)
        if not isinstance(chip, RegisterlessI2CChip):
            # A real register chip would answer from its internal address pointer, which is not simulated.
            raise HardwareError(f"the simulated chip at I2C address {address:#04x} is read through its registers")
        return bytes(chip.read_bytes(length))


class SimulatedSPIBus:
    """An SPI device slot holding a simulated chip; records every transfer."""

    def __init__(self, bus: int, device: int, chip: SPIChip | None = None) -> None:
        self.bus = bus
        self.device = device
        self.lock = threading.Lock()
        self.chip = chip
        self.log: list[bytes] = []

    def transfer(self, data: bytes) -> bytes:
        """Full-duplex transfer with the chip (a floating bus reads zeros)."""
        self.log.append(bytes(data))
        if self.chip is None:
            return bytes(len(data))
        return bytes(self.chip.transfer(bytes(data)))
