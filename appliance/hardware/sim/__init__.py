"""Simulated chips with their real register maps and protocols: the fake at the I2C/SPI boundary.

Tests and the appliance's ``hardware.backend: simulated`` share these chips, so they behave like the
parts (datasheet register maps, reset values, timing, quantisation) rather than like our drivers:
a driver that works against them should work against the part. One module per part; the chips sit on
the simulated buses of :mod:`appliance.hardware.sim.buses`.

Time-dependent behaviour (a conversion in progress) follows a ``clock`` (``time.monotonic`` by default);
tests pass a fake clock and advance it from the driver's injected ``sleep``.

Deliberately independent of the drivers: each chip computes from the datasheet's own formulas (the
BME280 chip inverts the double-precision compensation of section 8.1 while the driver applies the
integer one of 4.2.3), and the register constants are written out again, so a slip on one side shows
up as a failing test instead of cancelling out.
"""

from __future__ import annotations

from collections.abc import Callable

Clock = Callable[[], float]
