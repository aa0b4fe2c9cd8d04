"""Sunrise and sunset, computed on the Pi: NOAA's solar position equations, no network, no table.

The equations are those of NOAA's solar calculator spreadsheet (after Meeus, *Astronomical Algorithms*):
the sun's declination and the equation of time at an instant, then the hour angle at which its centre is
0.833° below the horizon (refraction and the sun's radius). Each event is solved again at the time found
(three rounds), so the declination is the one of that moment, not of noon. NOAA gives the method as
within a minute for latitudes between ±72°; the tests hold it to published times within two minutes.

Near the poles there may be no sunrise or sunset on a day: the sun stays up (polar day) or down (polar
night). :class:`SunDay` then says which, and has no times: a time is never made up.

A day here is a date in a time zone: the events are those nearest that date's local noon (the solar noon
of the day). Measured on an x86 server core: one day's sunrise and sunset 40 µs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Literal

Event = Literal["sunrise", "sunset"]
_ZENITH = math.radians(90.833)  # the sun's centre at the horizon, with refraction and its radius
_J2000 = 2451545.0
_UNIX_JD = 2440587.5  # the Julian day of 1970-01-01 00:00 UTC
_ROUNDS = 3


@dataclass(frozen=True)
class SunDay:
    """A day's sunrise and sunset at a place (aware, in the day's zone), or why there is none."""

    day: date
    sunrise: datetime | None
    sunset: datetime | None
    polar: Literal["day", "night"] | None = None  # the sun stays up all day, or below the horizon

    def at(self, event: Event) -> datetime | None:
        """The sunrise or the sunset (None on a polar day or night)."""
        return self.sunrise if event == "sunrise" else self.sunset


def _julian(ts: float) -> float:
    return ts / 86400.0 + _UNIX_JD


def _sun(ts: float) -> tuple[float, float]:
    """The sun's declination (radians) and the equation of time (minutes) at a Unix time."""
    t = (_julian(ts) - _J2000) / 36525.0  # Julian centuries since J2000.0
    mean_long = math.radians((280.46646 + t * (36000.76983 + t * 0.0003032)) % 360)
    anomaly = math.radians(357.52911 + t * (35999.05029 - 0.0001537 * t))
    eccentricity = 0.016708634 - t * (0.000042037 + 0.0000001267 * t)
    centre = (
        math.sin(anomaly) * (1.914602 - t * (0.004817 + 0.000014 * t))
        + math.sin(2 * anomaly) * (0.019993 - 0.000101 * t)
        + math.sin(3 * anomaly) * 0.000289
    )
    omega = math.radians(125.04 - 1934.136 * t)
    apparent = math.radians(math.degrees(mean_long) + centre - 0.00569 - 0.00478 * math.sin(omega))
    seconds = 21.448 - t * (46.815 + t * (0.00059 - t * 0.001813))
    obliquity = math.radians(23 + (26 + seconds / 60) / 60 + 0.00256 * math.cos(omega))
    declination = math.asin(math.sin(obliquity) * math.sin(apparent))
    y = math.tan(obliquity / 2) ** 2
    equation = (
        y * math.sin(2 * mean_long)
        - 2 * eccentricity * math.sin(anomaly)
        + 4 * eccentricity * y * math.sin(anomaly) * math.cos(2 * mean_long)
        - 0.5 * y * y * math.sin(4 * mean_long)
        - 1.25 * eccentricity * eccentricity * math.sin(2 * anomaly)
    )
    return declination, 4 * math.degrees(equation)


def _cos_hour_angle(latitude: float, declination: float) -> float:
    lat = math.radians(latitude)
    return math.cos(_ZENITH) / (math.cos(lat) * math.cos(declination)) - math.tan(lat) * math.tan(declination)


def _solar_noon(midnight: float, longitude: float, equation: float) -> float:
    """The Unix time of solar noon on the UTC day starting at ``midnight``."""
    return midnight + (720 - 4 * longitude - equation) * 60


def sun_day(day: date, latitude: float, longitude: float, zone: tzinfo) -> SunDay:
    """The sunrise and sunset of ``day`` (a date in ``zone``) at a place (degrees: north and east positive)."""
    if not (-90 <= latitude <= 90 and -180 <= longitude <= 180):
        raise ValueError(f"no place at latitude {latitude}, longitude {longitude}")
    local_noon = datetime.combine(day, time(12), zone).timestamp()
    midnight = math.floor(local_noon / 86400) * 86400.0
    noon = _solar_noon(midnight, longitude, _sun(local_noon)[1])
    noon += round((local_noon - noon) / 86400) * 86400  # the solar noon nearest the local one
    for _ in range(_ROUNDS):
        midnight = math.floor(noon / 86400) * 86400.0
        noon = _solar_noon(midnight, longitude, _sun(noon)[1])
    cos_ha = _cos_hour_angle(latitude, _sun(noon)[0])
    if cos_ha > 1:
        return SunDay(day, None, None, "night")
    if cos_ha < -1:
        return SunDay(day, None, None, "day")
    rise, set_ = _event(noon, latitude, longitude, -1), _event(noon, latitude, longitude, 1)
    if rise is None or set_ is None:  # on the edge of a polar day or night: the refined angle left the range
        return SunDay(day, None, None, "night" if cos_ha > 0 else "day")
    return SunDay(day, datetime.fromtimestamp(rise, zone), datetime.fromtimestamp(set_, zone))


def _event(noon: float, latitude: float, longitude: float, sign: int) -> float | None:
    """Sunrise (sign -1) or sunset (+1) of the day of ``noon``, solved at its own instant."""
    at = noon
    midnight = math.floor(noon / 86400) * 86400.0
    for _ in range(_ROUNDS):
        declination, equation = _sun(at)
        cos_ha = _cos_hour_angle(latitude, declination)
        if not -1 <= cos_ha <= 1:
            return None
        hour_angle = math.degrees(math.acos(cos_ha))
        at = _solar_noon(midnight, longitude, equation) + sign * 4 * hour_angle * 60
    return at


def next_event(event: Event, after: datetime, latitude: float, longitude: float, offset_s: int = 0) -> datetime | None:
    """The first sunrise or sunset (plus ``offset_s``) strictly after ``after`` (aware), in its zone.

    None when there is none within a year (a place where the sun never rises or sets then).
    """
    zone = after.tzinfo
    if zone is None or after.utcoffset() is None:
        raise ValueError("next_event needs an aware datetime (with its time zone)")
    day = after.date() - timedelta(days=1)  # yesterday's sunset may fall after midnight near the poles
    for _ in range(368):
        at = sun_day(day, latitude, longitude, zone).at(event)
        if at is not None:
            shifted = at + timedelta(seconds=offset_s)
            if shifted > after:
                return shifted.astimezone(zone)
        day += timedelta(days=1)
    return None


def minute_up(at: datetime) -> datetime:
    """The sun's time on the minute at or after it: what answers say and what sun schedules run at, alike
    ("sunset is at 15:44" and "turn the porch light on at sunset" at 15:44, never before the sun's time)."""
    if at.second or at.microsecond:
        return at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return at


def said_at(at: datetime) -> str:
    """ "15:44": the sun's time as answers say it (:func:`minute_up`)."""
    return f"{minute_up(at):%H:%M}"
