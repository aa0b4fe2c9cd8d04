"""The allowlist for raw bus access (i2c_scan, i2c_read, i2c_write, spi_transfer).

Off unless ``hardware.raw_access.enabled``; then only the listed buses, addresses and register
ranges. A refused request raises before any bus is opened, so a refusal never touches the hardware.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from appliance.config import RawAccessConfig
from appliance.errors import PolicyError
from appliance.hardware.backends import Backend

MAX_I2C_READ = 32


def parse_registers(text: str) -> range:
    """ "0xD0-0xFF" or "0xD0" -> the registers it covers (a ValueError says what is wrong)."""
    parts = [p.strip() for p in text.split("-")]
    if not 1 <= len(parts) <= 2:
        raise ValueError(f"expected REGISTER or FIRST-LAST, got {text!r}")
    first, last = int(parts[0], 0), int(parts[-1], 0)
    if not 0 <= first <= last <= 0xFF:
        raise ValueError(f"registers run from 0x00 to 0xFF, first <= last; got {text!r}")
    return range(first, last + 1)


@dataclass
class RawBusPolicy:
    """Decides raw bus requests, then runs allowed ones on the backend."""

    config: RawAccessConfig
    backend_of: Callable[[], Backend]  # opened only when an allowed request needs it

    @property
    def backend(self) -> Backend:
        """The backend the allowed requests run on."""
        return self.backend_of()

    def _refuse(self, what: str) -> PolicyError:
        return PolicyError(
            f"{what} is not allowed; nothing was sent on the bus",
            fix="an owner can allow it under hardware.raw_access in the config",
        )

    def check_i2c(self, bus: int, address: int, registers: range, write: bool) -> None:
        """Raise PolicyError unless every register is allowlisted for this bus and address."""
        if not self.config.enabled:
            raise self._refuse("raw bus access (hardware.raw_access.enabled is false)")
        if not 0 <= address <= 0x7F:
            raise PolicyError(f"{address} is not a 7-bit I2C address")
        for rule in self.config.i2c:
            if rule.bus == bus and rule.address == address:
                allowed = parse_registers(rule.registers)
                if registers.start in allowed and registers.stop - 1 in allowed and (rule.write or not write):
                    return
        kind = "writing" if write else "reading"
        last = registers.stop - 1
        span = f"{registers.start:#04x}" + (f"-{last:#04x}" if last != registers.start else "")
        raise self._refuse(f"{kind} I2C bus {bus}, address {address:#04x}, register {span}")

    def check_scan(self, bus: int) -> None:
        """Scanning needs the bus to be allowlisted at all."""
        if not self.config.enabled or not any(rule.bus == bus for rule in self.config.i2c):
            raise self._refuse(f"scanning I2C bus {bus}")

    def check_spi(self, bus: int, device: int, length: int) -> None:
        """Raise PolicyError unless the SPI device is allowlisted and the transfer short enough."""
        if not self.config.enabled:
            raise self._refuse("raw bus access (hardware.raw_access.enabled is false)")
        for rule in self.config.spi:
            if rule.bus == bus and rule.device == device:
                if length > rule.max_bytes:
                    raise self._refuse(f"an SPI transfer of {length} bytes (at most {rule.max_bytes})")
                return
        raise self._refuse(f"SPI {bus}.{device}")

    # --- the operations (blocking; run them off the loop) ------------------------------------------

    def i2c_scan(self, bus: int) -> list[int]:
        """Addresses that answer on a bus, probed as i2cdetect's default mode does (hardware/scan.py)."""
        from appliance.hardware.scan import detect_all  # here: a scan is rare, and the idle daemon never scans

        self.check_scan(bus)
        return [seen.address for seen in detect_all(self.backend.i2c(bus)) if seen.state == "found"]

    def i2c_read(self, bus: int, address: int, register: int, length: int) -> bytes:
        """Read registers (combined write-then-read)."""
        if not 1 <= length <= MAX_I2C_READ:
            raise PolicyError(f"read 1 to {MAX_I2C_READ} bytes at a time, not {length}")
        self.check_i2c(bus, address, range(register, register + length), write=False)
        i2c = self.backend.i2c(bus)
        with i2c.lock:
            return i2c.read_block(address, register, length)

    def i2c_write(self, bus: int, address: int, register: int, data: bytes) -> None:
        """Write registers."""
        if not 1 <= len(data) <= MAX_I2C_READ:
            raise PolicyError(f"write 1 to {MAX_I2C_READ} bytes at a time, not {len(data)}")
        self.check_i2c(bus, address, range(register, register + len(data)), write=True)
        i2c = self.backend.i2c(bus)
        with i2c.lock:
            i2c.write_block(address, register, data)

    def spi_transfer(self, bus: int, device: int, data: bytes) -> bytes:
        """A full-duplex SPI transfer."""
        self.check_spi(bus, device, len(data))
        spi = self.backend.spi(bus, device)
        with spi.lock:
            return spi.transfer(data)

    async def run(self, fn_name: str, *args: object) -> object:
        """Run one of the operations off the event loop."""
        return await asyncio.to_thread(getattr(self, fn_name), *args)
