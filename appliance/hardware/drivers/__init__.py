"""Device drivers: one small module per part, and DRIVERS, the table of them (see base.py for what a driver is).

The table is the one place a driver is registered. The config reads it (the names ``devices.NAME.driver``
may take, what each driver needs, whether it can be set), ``make_driver`` in
:mod:`appliance.hardware.devices` builds drivers through it, and the simulated backend puts the chip each
entry names at every configured device. A new driver is a module here with its :class:`DriverSpec`, one
line below, and its simulated chip in ``hardware/sim/`` (a device living in a service, such as Home
Assistant or an MQTT broker, has none: the service answers, through the link the backend holds).

Importing this package imports every driver module. They are small: a driver imports gpiozero, smbus2 or
spidev only when it is built, and none imports ``appliance.config`` (which imports this table).
"""

from __future__ import annotations

from appliance.hardware.drivers import bh1750, bme280, gpio, homeassistant, mcp3008, mqtt, sht31
from appliance.hardware.drivers.base import DriverSpec

DRIVERS: dict[str, DriverSpec] = {
    spec.name: spec
    for spec in (
        gpio.RELAY_SPEC,
        gpio.LED_SPEC,
        gpio.BUTTON_SPEC,
        gpio.MOTION_SPEC,
        bme280.SPEC,
        bh1750.SPEC,
        sht31.SPEC,
        mcp3008.SPEC,
        homeassistant.SPEC,
        mqtt.SPEC,
    )
}


__all__ = ["DRIVERS", "DriverSpec"]
