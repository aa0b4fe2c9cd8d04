"""A forecast as Open-Meteo sends it, read into hours and days, and what it says in words.

The request (:data:`QUERY`) asks ``/v1/forecast`` for the current temperature and weather code, hourly
temperature, chance and amount of precipitation and weather code, and daily low, high, precipitation sum,
highest chance of precipitation and weather code, for seven days in the place's own time zone
(``timezone=auto``). The answer holds parallel arrays (``hourly.time[i]`` with ``hourly.temperature_2m[i]``),
local times without an offset, the zone's name (``timezone``) and its offset now (``utc_offset_seconds``);
weather codes are WMO's (``weather_code``: 0 clear ... 95 thunderstorm). A value may be null (a model that
has no chance of rain for the sixth day): it is kept as None and never read as 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

QUERY = {
    "current": "temperature_2m,weather_code",
    "hourly": "temperature_2m,precipitation_probability,precipitation,weather_code",
    "daily": "weather_code,temperature_2m_max,temperature_2m_min,precipitation_sum,precipitation_probability_max",
    "timezone": "auto",
    "forecast_days": "7",
}

# WMO weather interpretation codes, as Open-Meteo documents them.
_CODES = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "freezing fog",
    51: "light drizzle",
    53: "drizzle",
    55: "heavy drizzle",
    56: "freezing drizzle",
    57: "heavy freezing drizzle",
    61: "light rain",
    63: "rain",
    65: "heavy rain",
    66: "freezing rain",
    67: "heavy freezing rain",
    71: "light snow",
    73: "snow",
    75: "heavy snow",
    77: "snow grains",
    80: "light showers",
    81: "showers",
    82: "violent showers",
    85: "snow showers",
    86: "heavy snow showers",
    95: "thunderstorms",
    96: "thunderstorms with hail",
    99: "thunderstorms with heavy hail",
}
_WET = frozenset({51, 53, 55, 56, 57, 61, 63, 65, 66, 67, 80, 81, 82, 95, 96, 99})
_SNOW = frozenset({71, 73, 75, 77, 85, 86})
_SUNNY = frozenset({0, 1})


def sky(code: int | None) -> str:
    """A weather code in words ("light rain"); "unknown weather" for none or one WMO does not list."""
    return _CODES.get(code, "unknown weather") if code is not None else "unknown weather"


def wet(code: int | None) -> bool:
    """Rain, drizzle, showers or thunderstorms."""
    return code in _WET


def snowy(code: int | None) -> bool:
    """Snow or snow showers."""
    return code in _SNOW


def sunny(code: int | None) -> bool:
    """Clear or mainly clear."""
    return code in _SUNNY


@dataclass(frozen=True)
class Hour:
    """One hour of the forecast (or the current conditions: then only temperature and code)."""

    at: datetime  # aware, in the place's zone
    temperature: float | None
    code: int | None
    rain_chance: float | None = None  # percent
    rain_mm: float | None = None


@dataclass(frozen=True)
class Day:
    """One day of the forecast."""

    on: date
    code: int | None
    low: float | None
    high: float | None
    rain_mm: float | None
    rain_chance: float | None  # the day's highest hourly chance, percent


@dataclass(frozen=True)
class Forecast:
    """What one answer of the service said, and when it was fetched."""

    fetched_at: float  # Unix time
    zone: tzinfo
    unit: str  # "°C"
    current: Hour | None
    hours: tuple[Hour, ...]
    days: tuple[Day, ...]

    def day(self, on: date) -> Day | None:
        """The forecast for a date, None when it is outside the forecast."""
        return next((d for d in self.days if d.on == on), None)

    def hours_between(self, start: datetime, end: datetime) -> list[Hour]:
        """The hours from ``start`` (inclusive) to ``end`` (exclusive)."""
        return [h for h in self.hours if start <= h.at < end]

    def temperature(self, value: float | None) -> str:
        """A temperature as said: "7 °C"; "unknown" for none."""
        return "unknown" if value is None else f"{value:.0f} {self.unit}".replace("-0 ", "0 ")


def _zone(data: dict[str, Any]) -> tzinfo:
    name = data.get("timezone")
    if isinstance(name, str) and name not in ("GMT", "UTC"):
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    offset = data.get("utc_offset_seconds", 0)
    return timezone(timedelta(seconds=offset if isinstance(offset, int) else 0))


def _column(block: dict[str, Any], name: str, length: int) -> list[Any]:
    values = block.get(name)
    if values is None:
        return [None] * length
    if not isinstance(values, list) or len(values) != length:
        raise ValueError(f"{name}: expected {length} values")
    return values


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _code(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def parse_open_meteo(data: Any, fetched_at: float) -> Forecast:
    """The forecast in an Open-Meteo answer; ValueError when it is not one (with what is wrong)."""
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    if data.get("error"):
        raise ValueError(str(data.get("reason") or "the service reported an error"))
    zone = _zone(data)
    hourly, daily = data.get("hourly") or {}, data.get("daily") or {}
    if not isinstance(hourly, dict) or not isinstance(daily, dict):
        raise ValueError("hourly and daily must be objects")
    times = hourly.get("time") or []
    columns = [_column(hourly, n, len(times)) for n in QUERY["hourly"].split(",")]
    try:
        hours = tuple(
            Hour(datetime.fromisoformat(t).replace(tzinfo=zone), _number(temp), _code(code), _number(p), _number(mm))
            for t, temp, p, mm, code in zip(times, *columns, strict=True)
        )
        dates = daily.get("time") or []
        columns = [_column(daily, n, len(dates)) for n in QUERY["daily"].split(",")]
        days = tuple(
            Day(date.fromisoformat(d), _code(code), _number(low), _number(high), _number(mm), _number(p))
            for d, code, high, low, mm, p in zip(dates, *columns, strict=True)
        )
        now = data.get("current")
        current = None
        if isinstance(now, dict) and isinstance(now.get("time"), str):
            at = datetime.fromisoformat(now["time"]).replace(tzinfo=zone)
            current = Hour(at, _number(now.get("temperature_2m")), _code(now.get("weather_code")))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a time or a value is malformed ({exc})") from None
    if not hours and not days:
        raise ValueError("it holds no forecast (no hourly or daily values)")
    units = data.get("hourly_units") or data.get("daily_units") or {}
    unit = units.get("temperature_2m") or units.get("temperature_2m_max") or "°C"
    return Forecast(fetched_at, zone, str(unit), current, hours, days)
