"""A fake Open-Meteo forecast API on 127.0.0.1, answering ``GET /v1/forecast`` as the real one does.

The answer has Open-Meteo's shape (open-meteo.com/en/docs): ``latitude``/``longitude`` snapped to the
model's grid, ``generationtime_ms``, ``utc_offset_seconds``, ``timezone``, ``timezone_abbreviation``,
``elevation``, and for each of ``current``, ``hourly``, ``daily`` that was asked for a ``*_units`` object
and the values: parallel arrays under ``hourly``/``daily`` with a ``time`` array of local times without an
offset ("2026-11-27T00:00", "2026-11-27"), from 00:00 today in the place's zone for ``forecast_days``.
Only the variables asked for are sent; an unknown one, a missing coordinate or daily variables without a
``timezone`` are a 400 ``{"error": true, "reason": ...}``, as Open-Meteo refuses them.

The weather is a script of days (:class:`DayScript`); the hourly values are made from it (a temperature
curve from the low at 05:00 to the high at 15:00, the chance of rain through the day) and the daily
values from the hourly ones, as the real service aggregates them (the maximum chance, the sum of the
amounts): the client under test reads both, so a fake that made them separately could agree with its
mistakes. Every request is recorded. ``mode``: ``"500"`` (the service failing), ``"slow"`` (answers after
``slow_s``), ``"malformed"`` (a JSON answer cut off).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from aiohttp import web

HOST = "127.0.0.1"
_HOURLY = {
    "temperature_2m": "°C",
    "precipitation_probability": "%",
    "precipitation": "mm",
    "weather_code": "wmo code",
    "apparent_temperature": "°C",
}
_DAILY = {
    "weather_code": "wmo code",
    "temperature_2m_max": "°C",
    "temperature_2m_min": "°C",
    "precipitation_sum": "mm",
    "precipitation_probability_max": "%",
}
_CURRENT = {"temperature_2m": "°C", "weather_code": "wmo code"}


@dataclass(frozen=True)
class DayScript:
    """One day's weather: its WMO code, low and high (°C), chance of rain (%) and amount (mm)."""

    code: int = 1
    low: float = 4.0
    high: float = 11.0
    rain_chance: int = 5
    rain_mm: float = 0.0


@dataclass
class FakeOpenMeteo:
    """The fake service: its script, the requests it saw, how it misbehaves."""

    today: date
    zone: str = "Europe/Brussels"
    days: list[DayScript] = field(default_factory=lambda: [DayScript() for _ in range(16)])
    now_hour: int = 10  # the hour the "current" block is for
    mode: str = ""
    slow_s: float = 5.0
    requests: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    def _hours(self, days: int) -> list[dict[str, Any]]:
        rows = []
        for d in range(days):
            script = self.days[d]
            on = self.today + timedelta(days=d)
            wet_hours = range(6, 22)
            for h in range(24):
                # 05:00 coldest, 15:00 warmest, a cosine in between (and back down through the night)
                phase = ((h - 5) % 24) / 10 if 5 <= h <= 15 else 1 - ((h - 15) % 24) / 14
                temp = script.low + (script.high - script.low) * (1 - math.cos(math.pi * min(phase, 1))) / 2
                chance = script.rain_chance if h in wet_hours else script.rain_chance // 2
                mm = round(script.rain_mm / len(wet_hours), 2) if h in wet_hours else 0.0
                rows.append(
                    {
                        "time": f"{on.isoformat()}T{h:02d}:00",
                        "temperature_2m": round(temp, 1),
                        "apparent_temperature": round(temp - 2, 1),
                        "precipitation_probability": chance,
                        "precipitation": mm,
                        "weather_code": script.code if h in wet_hours else min(script.code, 3),
                    }
                )
        return rows

    async def forecast(self, request: web.Request) -> web.Response:
        query = dict(request.query)
        self.requests.append(query)
        if self.mode == "slow":
            await asyncio.sleep(self.slow_s)
        if self.mode == "500":
            return web.Response(status=500, text="<html><body>Internal Server Error</body></html>")
        for key in ("latitude", "longitude"):
            if key not in query:
                return _refuse(f"Parameter '{key}' is required")
        try:
            lat, lon = float(query["latitude"]), float(query["longitude"])
        except ValueError:
            return _refuse("Latitude and longitude must be floating point numbers")
        hourly = [v for v in query.get("hourly", "").split(",") if v]
        daily = [v for v in query.get("daily", "").split(",") if v]
        current = [v for v in query.get("current", "").split(",") if v]
        for block, names, known in (
            ("hourly", hourly, _HOURLY),
            ("daily", daily, _DAILY),
            ("current", current, _CURRENT),
        ):
            for name in names:
                if name not in known:
                    return _refuse(f"Cannot initialize {block.title()}Variable from invalid String value {name}")
        if daily and "timezone" not in query:
            return _refuse("Timezone is required")
        days = int(query.get("forecast_days", "7"))
        zone = ZoneInfo(self.zone) if query.get("timezone") in ("auto", self.zone) else ZoneInfo("UTC")
        noon = datetime.combine(self.today, datetime.min.time(), zone) + timedelta(hours=12)
        offset = noon.utcoffset() or timedelta(0)
        body: dict[str, Any] = {
            "latitude": round(round(lat / 0.02) * 0.02, 6),  # the grid cell's centre, as the real API snaps
            "longitude": round(round(lon / 0.02) * 0.02, 6),
            "generationtime_ms": 0.0871,
            "utc_offset_seconds": int(offset.total_seconds()),
            "timezone": str(zone.key) if zone.key != "UTC" else "GMT",
            "timezone_abbreviation": noon.tzname() if zone.key != "UTC" else "GMT",
            "elevation": 9.0,
        }
        rows = self._hours(days)
        if current:
            at = rows[self.now_hour]
            body["current_units"] = {"time": "iso8601", "interval": "seconds", **{n: _CURRENT[n] for n in current}}
            body["current"] = {"time": at["time"], "interval": 900, **{n: at[n] for n in current}}
        if hourly:
            body["hourly_units"] = {"time": "iso8601", **{n: _HOURLY[n] for n in hourly}}
            body["hourly"] = {"time": [r["time"] for r in rows], **{n: [r[n] for r in rows] for n in hourly}}
        if daily:
            body["daily_units"] = {"time": "iso8601", **{n: _DAILY[n] for n in daily}}
            body["daily"] = {"time": [(self.today + timedelta(days=d)).isoformat() for d in range(days)]}
            for name in daily:
                body["daily"][name] = [_aggregate(name, rows[d * 24 : d * 24 + 24]) for d in range(days)]
        text = json.dumps(body)
        if self.mode == "malformed":
            text = text[: len(text) // 2]
        return web.Response(text=text, content_type="application/json")


def _aggregate(name: str, hours: list[dict[str, Any]]) -> Any:
    """A daily value from its day's hours, as Open-Meteo aggregates them."""
    if name == "temperature_2m_max":
        return max(h["temperature_2m"] for h in hours)
    if name == "temperature_2m_min":
        return min(h["temperature_2m"] for h in hours)
    if name == "precipitation_sum":
        return round(sum(h["precipitation"] for h in hours), 2)
    if name == "precipitation_probability_max":
        return max(h["precipitation_probability"] for h in hours)
    return max(h["weather_code"] for h in hours)  # weather_code: the day's most severe


def _refuse(reason: str) -> web.Response:
    return web.json_response({"error": True, "reason": reason}, status=400)


@contextlib.asynccontextmanager
async def serve_open_meteo(fake: FakeOpenMeteo, host: str = HOST) -> AsyncIterator[FakeOpenMeteo]:
    """The fake on host:random port; ``fake.url`` is its forecast endpoint (``.../v1/forecast``)."""
    app = web.Application()
    app.router.add_get("/v1/forecast", fake.forecast)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, 0).start()
    fake.url = f"http://{host}:{runner.addresses[0][1]}/v1/forecast"
    try:
        yield fake
    finally:
        await runner.cleanup()
