"""Home Assistant's documented sensor device classes and their units: all a reading from outside may name.

A Home Assistant state carries its ``device_class`` and ``unit_of_measurement`` as free text, and whoever
controls Home Assistant (or an integration in it) writes them. A reading's quantity and unit reach the
model, so they come from this allowlist only: a device class picoagent does not know becomes the
quantity the owner's entity id names (``sensor.outdoor_temperature`` -> temperature, else ``value``),
and a unit that is not one of the class's documented units is dropped (a number without a unit is still
true; a unit that is a sentence is not a unit).

The table is Home Assistant's numeric ``SensorDeviceClass`` members and the units each accepts
(``DEVICE_CLASS_UNITS`` in homeassistant/components/sensor/const.py and the sensor documentation); the
non-numeric classes (date, enum, timestamp) are left out: a reading is a number.
"""

from __future__ import annotations

from typing import Any

_CONCENTRATION = frozenset({"µg/m³"})
_ENERGY = frozenset({"J", "kJ", "MJ", "GJ", "mWh", "Wh", "kWh", "MWh", "GWh", "TWh", "cal", "kcal", "Mcal", "Gcal"})
_PRESSURE = frozenset({"Pa", "hPa", "kPa", "bar", "cbar", "mbar", "mmHg", "inHg", "psi"})
_TEMPERATURE = frozenset({"°C", "°F", "K"})
_VOLUME = frozenset({"mL", "L", "m³", "ft³", "CCF", "fl. oz.", "gal"})
_SPEED = frozenset({"m/s", "km/h", "mm/s", "ft/s", "in/s", "mph", "kn", "Beaufort"})
_FLUX = frozenset({"mm/d", "mm/h", "in/d", "in/h"})
_INFORMATION = frozenset(
    {"bit", "kbit", "Mbit", "Gbit", "B", "kB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB", "PiB"}
)
_DATA_RATE = frozenset(
    {"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "B/s", "kB/s", "MB/s", "GB/s", "KiB/s", "MiB/s", "GiB/s"}
)

# device class -> its documented units ("" where the class has none: aqi, ph, a power factor as a ratio)
SENSOR_UNITS: dict[str, frozenset[str]] = {
    "apparent_power": frozenset({"VA", "mVA", "kVA"}),
    "aqi": frozenset({""}),
    "area": frozenset({"m²", "cm²", "km²", "mm²", "in²", "ft²", "yd²", "mi²", "ac", "ha"}),
    "atmospheric_pressure": _PRESSURE,
    "battery": frozenset({"%"}),
    "blood_glucose_concentration": frozenset({"mg/dL", "mmol/L"}),
    "carbon_monoxide": frozenset({"ppm", "mg/m³", "µg/m³"}),
    "carbon_dioxide": frozenset({"ppm"}),
    "conductivity": frozenset({"S/cm", "mS/cm", "µS/cm"}),
    "current": frozenset({"A", "mA"}),
    "data_rate": _DATA_RATE,
    "data_size": _INFORMATION,
    "distance": frozenset({"mm", "cm", "m", "km", "in", "ft", "yd", "mi", "nmi"}),
    "duration": frozenset({"d", "h", "min", "s", "ms"}),
    "energy": _ENERGY,
    "energy_distance": frozenset({"kWh/100km", "Wh/km", "mi/kWh", "km/kWh"}),
    "energy_storage": _ENERGY,
    "frequency": frozenset({"Hz", "kHz", "MHz", "GHz"}),
    "gas": frozenset({"m³", "ft³", "CCF"}),
    "humidity": frozenset({"%"}),
    "illuminance": frozenset({"lx"}),
    "irradiance": frozenset({"W/m²", "BTU/(h⋅ft²)"}),
    "moisture": frozenset({"%"}),
    "nitrogen_dioxide": _CONCENTRATION,
    "nitrogen_monoxide": _CONCENTRATION,
    "nitrous_oxide": _CONCENTRATION,
    "ozone": _CONCENTRATION,
    "ph": frozenset({""}),
    "pm1": _CONCENTRATION,
    "pm10": _CONCENTRATION,
    "pm25": _CONCENTRATION,
    "power_factor": frozenset({"%", ""}),
    "power": frozenset({"mW", "W", "kW", "MW", "GW", "TW", "BTU/h"}),
    "precipitation": frozenset({"cm", "mm", "in"}),
    "precipitation_intensity": _FLUX,
    "pressure": _PRESSURE,
    "reactive_power": frozenset({"var", "mvar", "kvar"}),
    "signal_strength": frozenset({"dB", "dBm"}),
    "sound_pressure": frozenset({"dB", "dBA"}),
    "speed": _SPEED | _FLUX,
    "sulphur_dioxide": _CONCENTRATION,
    "temperature": _TEMPERATURE,
    "temperature_delta": _TEMPERATURE,
    "volatile_organic_compounds": frozenset({"µg/m³", "mg/m³"}),
    "volatile_organic_compounds_parts": frozenset({"ppm", "ppb"}),
    "voltage": frozenset({"V", "mV", "µV", "kV", "MV"}),
    "volume": _VOLUME,
    "volume_flow_rate": frozenset({"m³/h", "m³/s", "ft³/min", "L/h", "L/min", "L/s", "gal/h", "gal/min", "mL/s"}),
    "volume_storage": _VOLUME,
    "water": frozenset({"m³", "L", "ft³", "CCF", "gal"}),
    "weight": frozenset({"µg", "mg", "g", "kg", "oz", "lb", "st"}),
    "wind_direction": frozenset({"°"}),
    "wind_speed": _SPEED,
}
# Every documented unit: what a sensor without a known device class may carry (a bare "%" or "ppm").
UNITS: frozenset[str] = frozenset().union(*SENSOR_UNITS.values()) | {"%"}


def device_class(value: Any) -> str | None:
    """``value`` when it is one of Home Assistant's documented sensor device classes, else None."""
    return value if isinstance(value, str) and value in SENSOR_UNITS else None


def documented_unit(quantity: str, value: Any) -> str:
    """``value`` when it is a documented unit of ``quantity`` (of any class, for a quantity that is none), else ""."""
    if not isinstance(value, str):
        return ""
    return value if value in SENSOR_UNITS.get(quantity, UNITS) else ""
