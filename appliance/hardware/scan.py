"""A safe scan of one I2C bus, as `i2cdetect`'s default mode makes it, and the drivers each address suggests.

From 0x08 to 0x77 (0x00-0x07 and 0x78-0x7F are reserved by the I2C specification), each address is probed
once through :meth:`~appliance.hardware.buses.I2CBus.detect`: an SMBus quick write, except at 0x30-0x37 and
0x50-0x5F, where a receive byte is used: EEPROMs answer there, and a write can change one (a quick write
corrupts the Atmel AT24RF08; at 0x30-0x37 a memory module's EEPROM takes writes as write protection), while
a receive byte, which locks some write-only clock chips, is the lesser risk there; an address a kernel driver owns
is reported busy and never touched; a bus error is reported with the address, and the scan goes on.

The whole scan holds the bus's lock (about 112 transactions of a few bytes' time each: milliseconds at
100 kHz), so it never interleaves with a sensor's transaction. It blocks: run it off the event loop.

Each address that answers is matched to the drivers whose :class:`~appliance.hardware.drivers.base.DriverSpec`
lists it (0x76: bme280; 0x44: sht31) and to the configured device already there, if any; a configured
device whose address does not answer is listed too, so a loose wire shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from appliance.config import DeviceConfig
from appliance.hardware.backends import Backend
from appliance.hardware.buses import Detection, I2CBus, ProbeCommand, ProbeState
from appliance.hardware.drivers import DRIVERS

FIRST, LAST = 0x08, 0x77  # i2cdetect's default range (-a would add the reserved ones)


def command_for(address: int) -> ProbeCommand:
    """How i2cdetect probes ``address`` by default: receive byte at 0x30-0x37 and 0x50-0x5F, else quick write."""
    return "read" if 0x30 <= address <= 0x37 or 0x50 <= address <= 0x5F else "quick"


def detect_all(bus: I2CBus, first: int = FIRST, last: int = LAST) -> list[Detection]:
    """Probe every address from ``first`` to ``last`` once, holding the bus's lock (blocking)."""
    with bus.lock:
        return [bus.detect(address, command_for(address)) for address in range(first, last + 1)]


def suggested_drivers(address: int) -> tuple[str, ...]:
    """The drivers whose part can answer at ``address`` (from the driver table), in table order."""
    return tuple(name for name, spec in DRIVERS.items() if spec.interface == "i2c" and address in spec.addresses)


def configured_at(devices: Mapping[str, DeviceConfig], bus: int) -> dict[int, str]:
    """The configured I2C devices on ``bus``, by address (as the config checks key them: no bus is bus 0)."""
    return {
        device.address: name
        for name, device in devices.items()
        if DRIVERS[device.driver].interface == "i2c" and device.address is not None and (device.bus or 0) == bus
    }


@dataclass(frozen=True)
class ScanRow:
    """One address worth showing: it answered, is busy or failed, or a configured device should be there."""

    address: int
    state: ProbeState
    command: ProbeCommand
    drivers: tuple[str, ...]  # the drivers that fit the address
    configured: str = ""  # the configured device at this bus and address ("" none)
    detail: str = ""  # what went wrong (state error)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the address also as "0x76", as people write it)."""
        return {
            "address": self.address,
            "hex": f"0x{self.address:02x}",
            "state": self.state,
            "probe": "quick write" if self.command == "quick" else "receive byte",
            "drivers": list(self.drivers),
            "configured": self.configured or None,
            "detail": self.detail or None,
        }


@dataclass(frozen=True)
class BusScan:
    """What one scan of one bus found."""

    bus: int
    backend: str  # real or simulated
    rows: list[ScanRow]
    skipped: list[int] = field(default_factory=list)  # addresses the adapter could not probe

    @property
    def found(self) -> list[int]:
        """The addresses a device acknowledged."""
        return [row.address for row in self.rows if row.state == "found"]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "bus": self.bus,
            "backend": self.backend,
            "range": [f"0x{FIRST:02x}", f"0x{LAST:02x}"],
            "addresses": [row.as_dict() for row in self.rows],
            "skipped": [f"0x{a:02x}" for a in self.skipped],
        }


def scan_bus(backend: Backend, devices: Mapping[str, DeviceConfig], number: int) -> BusScan:
    """Scan I2C bus ``number`` of ``backend`` and say what each answer may be (blocking; see the module)."""
    configured = configured_at(devices, number)
    rows: list[ScanRow] = []
    skipped: list[int] = []
    for seen in detect_all(backend.i2c(number)):
        name = configured.get(seen.address, "")
        if seen.state == "skipped":
            skipped.append(seen.address)
        elif seen.state != "absent" or name:
            drivers = suggested_drivers(seen.address)
            rows.append(ScanRow(seen.address, seen.state, seen.command, drivers, name, seen.detail))
    return BusScan(number, backend.name, rows, skipped)
