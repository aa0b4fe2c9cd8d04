"""The model's tools for devices: list, read, set — and, only when allowlisted, raw bus access.

The model names a device; the registry decides (allowed operation, rate limit, approval). A device
needing approval answers with a pending action for a person: no tool here can approve one. Once outside
text is in the turn (a web page, an MCP answer, shell output, a workspace file: see
:mod:`appliance.tools.trust`), every write waits for a person the same way, and the raw bus writes,
which have no approval to wait for, are refused.

A device off the Pi (``driver: mqtt``, ``driver: homeassistant``) is other people's software: whoever
publishes on the broker, Home Assistant and its integrations write its states. Its reading is outside
text as a web page is (:attr:`DriverSpec.outside`), and so is a failure that quotes its state, of a read
or of the read-back after a write: a turn that read one holds its device writes for a person.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from appliance.errors import PicoagentError, ToolError
from appliance.hardware.buses import HardwareError
from appliance.hardware.devices import DeviceAccess
from appliance.hardware.policy import RawBusPolicy
from appliance.tools.registry import ToolRegistry, current_turn
from appliance.tools.trust import OutsideError, OutsideText

log = logging.getLogger(__name__)


def _refuse_after_outside(what: str) -> None:
    """ToolError when outside text is in the turn: a raw write has no approval to wait for."""
    turn = current_turn()
    if turn is not None and turn.trust.untrusted:
        raise turn.trust.refuse(what)


@contextlib.asynccontextmanager
async def _quoting(name: str, outside: str) -> AsyncIterator[None]:
    """A device off the Pi fails with what its state said (cut short, but someone else's words): the
    driver's failure is outside text as its reading is. A bug some state found is said without quoting
    it. The policy's own refusals (not allowed, rate limited, a value it does not take) are the Pi's words."""
    try:
        yield
    except HardwareError as exc:
        if not outside:
            raise
        raise OutsideError(exc.message + (f" ({exc.fix})" if exc.fix else ""), outside) from None
    except PicoagentError:
        raise
    except Exception as exc:
        if not outside:
            raise
        log.warning("%s: the device failed on a state from outside", name, exc_info=True)
        raise OutsideError(f"{name}: the device's state could not be read ({type(exc).__name__})", outside) from None


def register(registry: ToolRegistry, devices: DeviceAccess, raw: RawBusPolicy | None = None) -> None:
    """Register the device tools (and the raw bus tools when raw access is enabled)."""

    async def devices_list() -> list[dict[str, Any]]:
        """List the devices: name, kind (switch, dimmer, sensor, input), room, what is allowed.

        Examples: which devices do you have; what can you switch; list the sensors
        """
        return devices.describe()

    async def device_read(name: str) -> str:
        """Read a device: a sensor's measurements, or whether a switch is on.

        Examples: is the light on; how warm is it in the room; what does the sensor measure

        Args:
            name: the device's name, from devices_list
        """
        outside = devices.outside(name)
        async with _quoting(name, outside):
            readings = await devices.read(name)
        text = f"{name}: " + ", ".join(str(r) for r in readings)
        return OutsideText(text, outside) if outside else text

    async def device_set(name: str, value: str) -> str:
        """Switch a device on or off, or set a dimmer's brightness.

        Examples: turn the light on; switch the fan off; dim the lamp to half

        Args:
            name: the device's name, from devices_list
            value: "on", "off", or a brightness like "40%"
        """
        turn = current_turn()
        outside = turn.trust.reason() if turn is not None and turn.trust.untrusted else ""
        async with _quoting(name, devices.outside(name)):
            result = await devices.set(name, value, requested_by="model", approval=outside)
        if turn is not None and outside and result.pending is not None:
            turn.trust.hold_write(f"setting {name} {value}", result.pending.id)
        return result.describe()

    registry.register(devices_list, read_only=True)
    registry.register(device_read, read_only=True)
    registry.register(device_set)
    if raw is None or not raw.config.enabled:
        return

    async def i2c_scan(bus: int) -> list[str]:
        """List the I2C addresses that answer on an allowlisted bus.

        Args:
            bus: I2C bus number, usually 1
        """
        found = await raw.run("i2c_scan", bus)
        assert isinstance(found, list)
        return [f"{a:#04x}" for a in found]

    async def i2c_read(bus: int, address: int, register: int, length: int = 1) -> list[int]:
        """Read bytes from an allowlisted I2C device's registers.

        Args:
            bus: I2C bus number
            address: 7-bit device address
            register: first register
            length: how many bytes (1-32)
        """
        data = await raw.run("i2c_read", bus, address, register, length)
        assert isinstance(data, bytes)
        return list(data)

    async def i2c_write(bus: int, address: int, register: int, data: list[int]) -> str:
        """Write bytes to an allowlisted, writable I2C register range.

        Args:
            bus: I2C bus number
            address: 7-bit device address
            register: first register
            data: bytes to write (0-255 each)
        """
        if not all(0 <= b <= 255 for b in data):
            raise ToolError("every byte must be from 0 to 255")
        _refuse_after_outside(f"write to I2C device {address:#04x} on bus {bus}")
        await raw.run("i2c_write", bus, address, register, bytes(data))
        return f"wrote {len(data)} byte(s)"

    async def spi_transfer(bus: int, device: int, data: list[int]) -> list[int]:
        """Full-duplex transfer with an allowlisted SPI device.

        Args:
            bus: SPI bus
            device: chip select
            data: bytes to send (0-255 each)
        """
        if not all(0 <= b <= 255 for b in data):
            raise ToolError("every byte must be from 0 to 255")
        _refuse_after_outside(f"send to SPI device {bus}.{device}")
        answer = await raw.run("spi_transfer", bus, device, bytes(data))
        assert isinstance(answer, bytes)
        return list(answer)

    registry.register(i2c_scan, read_only=True)
    registry.register(i2c_read, read_only=True)
    registry.register(i2c_write)
    registry.register(spi_transfer)
