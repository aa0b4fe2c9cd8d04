"""A simulated Sensirion SHT31 (datasheet "SHT3x-DIS", version 5): 16-bit commands, single shots, CRC-8.

The part has no registers. A write transaction carries one 16-bit command, MSB first; a read transaction
gets what the last command left: a measurement (T msb, T lsb, CRC, RH msb, RH lsb, CRC) or the status
register (msb, lsb, CRC), each once. With nothing to send, or while a measurement without clock
stretching is still running, the part NACKs the read header (sections 4.4 and 4.6).

The raw outputs come from the datasheet's floating-point conversion (section 4.13) inverted and rounded,
and the CRC from long division by the polynomial (section 4.12), while the driver uses Sensirion's
fixed-point conversion and a bytewise CRC loop: the two meet only through the bytes on the bus.
"""

from __future__ import annotations

import time

from appliance.hardware.buses import HardwareError
from appliance.hardware.sim import Clock, within

# Single-shot measurement commands (table 9) -> typical measurement time in seconds (table 4).
SINGLE_SHOT = {
    0x2400: 0.0125,  # high repeatability, clock stretching disabled
    0x240B: 0.0045,  # medium
    0x2416: 0.0025,  # low
    0x2C06: 0.0125,  # high repeatability, clock stretching enabled
    0x2C0D: 0.0045,
    0x2C10: 0.0025,
}
CLOCK_STRETCHING = frozenset({0x2C06, 0x2C0D, 0x2C10})
READ_STATUS = 0xF32D
CLEAR_STATUS = 0x3041
SOFT_RESET = 0x30A2
HEATER_ON = 0x306D
HEATER_OFF = 0x3066
BREAK = 0x3093  # stops periodic acquisition; single-shot mode has nothing to stop

# Status register bits (table 18).
ALERT_PENDING = 1 << 15
HEATER = 1 << 13
RH_TRACKING_ALERT = 1 << 11
T_TRACKING_ALERT = 1 << 10
RESET_DETECTED = 1 << 4
COMMAND_FAILED = 1 << 1
STATUS_AT_RESET = ALERT_PENDING | RESET_DETECTED
CLEARABLE = ALERT_PENDING | RH_TRACKING_ALERT | T_TRACKING_ALERT | RESET_DETECTED


def checksum(data: bytes) -> int:
    """CRC-8 by long division: (data, the first byte XORed with the initial 0xFF) × x^8 mod x^8+x^5+x^4+1."""
    value = (int.from_bytes(data, "big") ^ (0xFF << 8 * (len(data) - 1))) << 8
    for bit in range(value.bit_length() - 1, 7, -1):
        if value >> bit & 1:
            value ^= 0x131 << (bit - 8)
    return value


def _word(value: int) -> bytes:
    """A 16-bit word as the part sends it: MSB, LSB, CRC."""
    data = value.to_bytes(2, "big")
    return data + bytes([checksum(data)])


class SHT31Chip:
    """A Sensirion SHT31 on I2C: single-shot measurements, status register, heater, soft reset."""

    def __init__(
        self, temperature_c: float = 21.5, humidity_pct: float = 45.0, *, clock: Clock = time.monotonic
    ) -> None:
        self.temperature_c = temperature_c
        self.humidity_pct = humidity_pct
        self.set_environment(temperature_c=temperature_c, humidity_pct=humidity_pct)
        self._clock = clock
        self.status = STATUS_AT_RESET
        self._reply = b""  # what the next read transaction gets; empty: the read header is NACKed
        self._ready_at = 0.0
        self._stretching = False
        self._corrupt_next = False

    def set_environment(self, *, temperature_c: float | None = None, humidity_pct: float | None = None) -> None:
        """Change what the sensor is exposed to (within the datasheet's specified range); None keeps a value."""
        if temperature_c is not None:
            self.temperature_c = within(temperature_c, -40.0, 125.0, "SHT31 operates from -40 to 125 °C")
        if humidity_pct is not None:
            self.humidity_pct = within(humidity_pct, 0.0, 100.0, "relative humidity is 0 to 100 %")

    def outputs(self) -> tuple[int, int]:
        """(S_T, S_RH) for the current environment: T = -45 + 175 × S_T / (2^16 - 1), RH = 100 × S_RH / (2^16 - 1)."""
        s_t = round((self.temperature_c + 45.0) / 175.0 * 65535)
        s_rh = round(self.humidity_pct / 100.0 * 65535)
        return min(max(s_t, 0), 0xFFFF), min(max(s_rh, 0), 0xFFFF)

    def corrupt_next_reply(self) -> None:
        """Flip one bit of the next reply on its way to the host, as a long cable or a noisy supply can."""
        self._corrupt_next = True

    # -- register-less transactions (the part's own protocol) ------------------------------------------

    def write_bytes(self, data: bytes) -> None:
        """One write transaction: a 16-bit command (commands with data, such as alert limits, are not modelled)."""
        if len(data) != 2:
            self.status |= COMMAND_FAILED
            return
        self._command(int.from_bytes(data, "big"))

    def read_bytes(self, length: int) -> bytes:
        """One read transaction: the waiting reply, once (past its end nothing drives SDA: 0xFF)."""
        if not self._reply or (not self._stretching and self._clock() < self._ready_at):
            raise HardwareError(
                "the SHT31 NACKed the read header: no result is waiting (none was asked for, it was already "
                "read, or the measurement is still running)"
            )
        # With clock stretching the part holds SCL until the result is ready: the read simply gets it.
        reply, self._reply = bytearray(self._reply), b""
        if self._corrupt_next:
            reply[0] ^= 0x01
            self._corrupt_next = False
        return (bytes(reply) + b"\xff" * length)[:length]

    # -- I2CChip (the register-based view SimulatedI2CBus speaks) ---------------------------------------

    def write(self, register: int, data: bytes) -> None:
        """``write_block``: the "register" byte is the command's MSB, as it is on the wire."""
        self.write_bytes(bytes([register]) + bytes(data))

    def read(self, register: int, length: int) -> bytes:
        """``read_block``: its lone register byte is half a command, which the part drops; then the read."""
        return self.read_bytes(length)

    # -- internals ------------------------------------------------------------------------------------

    def _command(self, command: int) -> None:
        if command == READ_STATUS:  # reports on the command before it, so it leaves bit 1 alone
            self._reply = _word(self.status)
            self._ready_at = self._clock()
            return
        self.status &= ~COMMAND_FAILED
        if command in SINGLE_SHOT:
            s_t, s_rh = self.outputs()
            self._reply = _word(s_t) + _word(s_rh)
            self._ready_at = self._clock() + SINGLE_SHOT[command]
            self._stretching = command in CLOCK_STRETCHING
        elif command == CLEAR_STATUS:
            self.status &= ~CLEARABLE
        elif command == SOFT_RESET:
            self.status = STATUS_AT_RESET
            self._reply = b""
        elif command == HEATER_ON:
            self.status |= HEATER
        elif command == HEATER_OFF:
            self.status &= ~HEATER
        elif command != BREAK:
            self.status |= COMMAND_FAILED  # "last command not processed: invalid" (table 18)
