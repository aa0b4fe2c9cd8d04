"""A simulated Microchip MCP3008 10-bit ADC (datasheet DS21295), answering SPI transfers bit by bit."""

from __future__ import annotations

import math

# Differential configurations (datasheet table 5-2): D2..D0 -> (IN+ channel, IN- channel).
MCP3008_DIFFERENTIAL_PAIRS = {
    0b000: (0, 1),
    0b001: (1, 0),
    0b010: (2, 3),
    0b011: (3, 2),
    0b100: (4, 5),
    0b101: (5, 4),
    0b110: (6, 7),
    0b111: (7, 6),
}


class MCP3008Chip:
    """A Microchip MCP3008 8-channel 10-bit ADC, answering SPI transfers bit by bit (datasheet 5.0, 6.1).

    The part ignores leading zeros until the start bit, then takes SGL/DIFF and D2..D0, samples for
    one and a half clocks, sends a null bit (0), B9..B0, then B1..B9 again LSB first and zeros if clocked
    further (figure 5-2). Output before the null bit is high impedance, modelled as 0 as a Pi usually reads
    it. The 3-byte exchange of figure 6-1 is ``[0x01, (0x08 | ch) << 4, 0x00]`` -> ``[?, ?|0|B9 B8, B7..B0]``.
    """

    def __init__(self, voltages: dict[int, float] | None = None, vref: float = 3.3) -> None:
        if vref <= 0:
            raise ValueError(f"VREF must be positive, not {vref}")
        self.vref = vref
        self.voltages = dict.fromkeys(range(8), 0.0)
        for channel, volts in (voltages or {}).items():
            self.set_voltage(channel, volts)

    def set_voltage(self, channel: int, volts: float) -> None:
        """Set the voltage on input CH0..CH7."""
        if channel not in range(8):
            raise ValueError(f"MCP3008 channels are 0 to 7, not {channel}")
        self.voltages[channel] = volts

    def code(self, single_ended: bool, selector: int) -> int:
        """The 10-bit conversion for a configuration: 1024 × VIN / VREF, clamped (datasheet equation 4-1)."""
        if single_ended:
            vin = self.voltages[selector]
        else:
            positive, negative = MCP3008_DIFFERENTIAL_PAIRS[selector]
            vin = self.voltages[positive] - self.voltages[negative]  # IN- above IN+ reads 000h
        return min(max(math.floor(1024 * vin / self.vref), 0), 1023)

    def transfer(self, data: bytes) -> bytes:
        """One transfer with CS held low throughout: a fresh conversion per start bit."""
        received = [(byte >> (7 - bit)) & 1 for byte in data for bit in range(8)]
        sent: list[int] = []
        start: int | None = None
        config = 0
        result = 0
        for clock, bit in enumerate(received):
            if start is None:
                sent.append(0)  # DOUT is high impedance until the null bit
                if bit:
                    start = clock
                continue
            step = clock - start  # 1: SGL/DIFF, 2..4: D2..D0, 5: sample, 6: null, 7..16: B9..B0
            if step <= 4:
                config = (config << 1) | bit
            if step == 5:
                result = self.code(bool(config >> 3), config & 0b111)
            if step <= 5:
                sent.append(0)
            elif step == 6:
                sent.append(0)  # the null bit
            elif step <= 16:
                sent.append((result >> (16 - step)) & 1)  # MSB first
            elif step <= 25:
                sent.append((result >> (step - 16)) & 1)  # then B1..B9, LSB first
            else:
                sent.append(0)
        return bytes(
            sum(bit << (7 - index) for index, bit in enumerate(sent[offset : offset + 8]))
            for offset in range(0, len(sent), 8)
        )


def moist_soil_probe() -> MCP3008Chip:
    """The chip the simulated backend fits: every input near mid-scale, as a soil probe in moist soil reads."""
    return MCP3008Chip({channel: 1.65 for channel in range(8)})
