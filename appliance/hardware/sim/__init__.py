"""Simulated chips with their real register maps and protocols: the fake at the I2C/SPI boundary.

Tests and the appliance's ``hardware.backend: simulated`` share these chips, so they behave like the
parts (datasheet register maps, reset values, timing, quantisation) rather than like our drivers:
a driver that works against them should work against the part. One module per part; the chips sit on
the simulated buses of :mod:`appliance.hardware.sim.buses`, and each driver's spec names its chip
(:func:`make_chip` makes it), so the simulated backend fits one at every configured device.

Time-dependent behaviour (a conversion in progress) follows a ``clock`` (``time.monotonic`` by default);
tests pass a fake clock and advance it from the driver's injected ``sleep``.

Deliberately independent of the drivers: each chip computes from the datasheet's own formulas (the
BME280 chip inverts the double-precision compensation of section 8.1 while the driver applies the
integer one of 4.2.3), and the register constants are written out again, so a slip on one side shows
up as a failing test instead of cancelling out.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

Clock = Callable[[], float]


def within(value: float, low: float, high: float, says: str) -> float:
    """``value`` when it lies in a part's specified range, from ``low`` to ``high``; else ValueError, ``says``."""
    if not low <= value <= high:
        raise ValueError(f"{says}, not {value}")
    return value


def make_chip(factory: str) -> Any:
    """A new chip from a driver spec's ``simulated``, "module:callable" (e.g. "...sim.bh1750:BH1750Chip")."""
    # By name, not by reference: a driver module cannot import its chip, which may import the driver's own
    # types (the BME280 chip takes the driver's calibration record).
    module, _, name = factory.partition(":")
    return getattr(importlib.import_module(module), name)()
