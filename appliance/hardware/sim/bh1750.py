"""A simulated ROHM BH1750FVI ambient light sensor (Technical Note 2009 rev. B): opcodes, modes, MTreg."""

from __future__ import annotations

import math
import time

from appliance.hardware.buses import HardwareError
from appliance.hardware.sim import Clock

BH1750_POWER_DOWN = 0x00
BH1750_POWER_ON = 0x01
BH1750_RESET = 0x07
BH1750_CONTINUOUS_H = 0x10
BH1750_CONTINUOUS_H2 = 0x11
BH1750_CONTINUOUS_L = 0x13
BH1750_ONE_TIME_H = 0x20
BH1750_ONE_TIME_H2 = 0x21
BH1750_ONE_TIME_L = 0x23
BH1750_DEFAULT_MTREG = 69
_BH_MODES = {
    BH1750_CONTINUOUS_H: ("H", False),
    BH1750_CONTINUOUS_H2: ("H2", False),
    BH1750_CONTINUOUS_L: ("L", False),
    BH1750_ONE_TIME_H: ("H", True),
    BH1750_ONE_TIME_H2: ("H2", True),
    BH1750_ONE_TIME_L: ("L", True),
}
_BH_TYPICAL_S = {"H": 0.120, "H2": 0.120, "L": 0.016}  # datasheet: measurement time typ at MTreg 69


class BH1750Chip:
    """A ROHM BH1750FVI ambient light sensor: no registers, one-byte opcodes, 2-byte big-endian result.

    On the wire a command is ``[address+W, opcode, STOP]`` and a result is ``[address+R, high, low]``
    (datasheet "I2C Bus Access"). Through :class:`~appliance.hardware.sim.buses.SimulatedI2CBus` that means:

    - ``write_block(address, opcode, b"")`` (the "register" byte *is* the opcode, which is exactly what
      the real bus puts on the wire) or the register-less ``write_bytes(bytes([opcode]))``;
    - ``read_bytes(2)`` for the result. ``read_block(address, register, n)`` is a combined transaction
      whose register byte the part takes as an opcode before answering, as the real part would.
    """

    def __init__(self, lux: float = 320.0, *, clock: Clock = time.monotonic) -> None:
        self.lux = lux
        self.set_lux(lux)
        self._clock = clock
        self.powered = False  # the part starts in power-down (datasheet state diagram)
        self.mtreg = BH1750_DEFAULT_MTREG
        self.data = 0  # the illuminance data register
        self._mode: tuple[str, bool] | None = None  # (resolution, one_time) while measuring
        self._done_at = 0.0

    def set_lux(self, lux: float) -> None:
        """Change the illuminance falling on the sensor."""
        if lux < 0:
            raise ValueError(f"illuminance cannot be negative ({lux} lx)")
        self.lux = lux

    def count_for(self, resolution: str = "H") -> int:
        """The 16-bit count the current light gives: lux × 1.2 × MTreg/69, ×2 in H-resolution mode 2."""
        count = self.lux * 1.2 * self.mtreg / BH1750_DEFAULT_MTREG * (2 if resolution == "H2" else 1)
        counts = min(math.floor(count), 0xFFFF)
        # L-resolution mode resolves 4 lx (datasheet); modelled as the two low bits reading 0.
        return counts & ~0b11 if resolution == "L" else counts

    # -- register-less transactions (the part's own protocol) ------------------------------------------

    def write_bytes(self, data: bytes) -> None:
        """One write transaction: exactly one opcode (the part refuses several without a STOP)."""
        if len(data) != 1:
            raise HardwareError(
                f"BH1750 takes one opcode per write transaction, got {len(data)} bytes",
                fix="send each opcode in its own write (the datasheet asks for a STOP after every opcode)",
            )
        self._command(data[0])

    def read_bytes(self, length: int) -> bytes:
        """One read transaction: the data register, high byte first (then 0xFF: nothing drives SDA)."""
        self._advance()
        return (self.data.to_bytes(2, "big") + b"\xff" * length)[:length]

    # -- I2CChip (the register-based view SimulatedI2CBus speaks) ---------------------------------------

    def write(self, register: int, data: bytes) -> None:
        """``write_block``: the "register" byte is the opcode; any further byte is a second opcode, refused."""
        self.write_bytes(bytes([register]) + bytes(data))

    def read(self, register: int, length: int) -> bytes:
        """``read_block``: the register byte reaches the part as an opcode, then the result is read."""
        self._command(register)
        return self.read_bytes(length)

    # -- internals ------------------------------------------------------------------------------------

    def _command(self, opcode: int) -> None:
        self._advance()
        if opcode == BH1750_POWER_DOWN:
            self.powered = False
            self._mode = None
        elif opcode == BH1750_POWER_ON:
            self.powered = True
        elif opcode == BH1750_RESET:
            if self.powered:  # "Reset command is not acceptable in Power Down mode"
                self.data = 0
        elif opcode in _BH_MODES:
            self.powered = True
            self._mode = _BH_MODES[opcode]
            self._done_at = self._clock() + self._measurement_time(self._mode[0])
        elif opcode & 0xF8 == 0x40:  # 01000_MT[7,6,5]
            self.mtreg = (self.mtreg & 0x1F) | ((opcode & 0x07) << 5)
        elif opcode & 0xE0 == 0x60:  # 011_MT[4,3,2,1,0]
            self.mtreg = (self.mtreg & 0xE0) | (opcode & 0x1F)
        # Other opcodes are undefined in the datasheet; the part is modelled as ignoring them.

    def _measurement_time(self, resolution: str) -> float:
        return _BH_TYPICAL_S[resolution] * self.mtreg / BH1750_DEFAULT_MTREG

    def _advance(self) -> None:
        """Finish the measurement in progress if its time has come (continuous mode starts the next)."""
        while self._mode is not None and self._clock() >= self._done_at:
            resolution, one_time = self._mode
            self.data = self.count_for(resolution)
            if one_time:  # one-time modes power down after the measurement
                self._mode = None
                self.powered = False
            else:
                # The light is the same for every cycle since the last access: one more result suffices.
                period = self._measurement_time(resolution)
                self._done_at += period * max(1, math.floor((self._clock() - self._done_at) / period) + 1)
