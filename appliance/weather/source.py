"""Where the forecast comes from: Open-Meteo (no account), fetched rarely, kept, and never made up.

One :class:`WeatherSource` per process serves the grounded answers and the ``weather`` tool. A forecast
is fetched at most every ``weather.cache_minutes`` (one GET, a few kB of JSON, ``weather.timeout_s`` at
most) and kept in memory and in ``weather.json`` in the data dir, so that after a restart without network
the appliance still has the last one and says when it was fetched ("as of 10:02"). A failed fetch is not
tried again for :data:`RETRY_S`, so offline every question costs no wait beyond the first. A kept
forecast older than :data:`STALE_S` is not used for answers: it is said to be too old, with its age.

What a caller gets is an :class:`Outlook`: the forecast (fresh or kept), and when the last fetch failed,
why, in words for people. Nothing here raises for a network failure.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.config.weather import PLACE_FIX
from appliance.fileio import write_atomic
from appliance.weather.forecast import QUERY, Forecast, parse_open_meteo

if TYPE_CHECKING:
    from appliance.config import Config, WeatherConfig

log = logging.getLogger(__name__)

RETRY_S = 120.0  # after a failed fetch, the next try waits this long (offline: no wait on every question)
STALE_S = 24 * 3600.0  # a kept forecast older than this is too old to answer from
CACHE_FILE = "weather.json"
MAX_BYTES = 2_000_000  # a forecast is ~20 kB; more is not one
PROVIDER = "Open-Meteo"


@dataclass(frozen=True)
class Outlook:
    """What the source has: a forecast (None: none at all, or too old), and why the last fetch failed."""

    forecast: Forecast | None
    problem: str = ""  # "the forecast service did not answer within 6 s"; empty when the last fetch worked
    stale: bool = False  # the forecast is a kept one, the last fetch failed


def unconfigured(weather: WeatherConfig) -> str:
    """The sentence said when there is no forecast source, with what to set."""
    if not weather.located:
        return f"I have no weather source: {PLACE_FIX}, and weather.enabled: true."
    return (
        f"I have no weather source: forecasts for {weather.place_name} are off; set weather.enabled: true in the "
        "config to fetch them from Open-Meteo (no account needed)."
    )


class WeatherSource:
    """The forecast for the configured place: fetched, cached in memory and on disk (module docstring)."""

    def __init__(
        self, config: WeatherConfig, cache_path: Path | None, *, zone: tzinfo, clock: Callable[[], float] = time.time
    ) -> None:
        """``zone``: the appliance's time zone, in which "fetched 10:02" is said."""
        self.config = config
        self.cache_path = cache_path
        self.zone = zone
        self.clock = clock
        self._forecast: Forecast | None = None
        self._failed_at: float | None = None
        self._problem = ""
        self._lock = asyncio.Lock()
        self._loaded = False

    @property
    def place(self) -> str:
        """The place's name as people read it."""
        return self.config.place_name

    def basis(self, forecast: Forecast) -> str:
        """What an answer is based on: "Open-Meteo forecast for Ghent, fetched 10:02"."""
        fetched = datetime.fromtimestamp(forecast.fetched_at, self.zone)
        now = datetime.fromtimestamp(self.clock(), self.zone)
        when = f"{fetched:%H:%M}" if fetched.date() == now.date() else f"{fetched:%a %d %b %H:%M}"
        return f"{PROVIDER} forecast for {self.place}, fetched {when}"

    async def outlook(self) -> Outlook:
        """The forecast to answer from: the cached one while fresh, else a new fetch, else the kept one."""
        async with self._lock:
            if not self._loaded:
                self._loaded = True
                self._forecast = await asyncio.to_thread(self._read_cache)
            now = self.clock()
            held = self._forecast
            if held is not None and 0 <= now - held.fetched_at < self.config.cache_minutes * 60:
                return Outlook(held)
            if self._failed_at is None or not 0 <= now - self._failed_at < RETRY_S:
                await self._fetch()
            held = self._forecast
            if not self._problem:
                return Outlook(held)
            if held is not None and 0 <= self.clock() - held.fetched_at < STALE_S:
                return Outlook(held, self._problem, stale=True)
            return Outlook(None, self._problem, stale=held is not None)

    async def _fetch(self) -> None:
        import aiohttp  # here: a process that never asks about the weather does not pay its import

        weather = self.config
        params = {"latitude": f"{weather.latitude:.4f}", "longitude": f"{weather.longitude:.4f}", **QUERY}
        timeout = aiohttp.ClientTimeout(total=weather.timeout_s, connect=min(3.0, weather.timeout_s))
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(weather.base_url, params=params) as response,
            ):
                body = await response.content.read(MAX_BYTES + 1)
                if len(body) > MAX_BYTES:
                    raise ValueError("the answer is too large to be a forecast")
                if response.status != 200:
                    raise ValueError(f"HTTP {response.status}{_reason(body)}")
                data = json.loads(body)
            forecast = parse_open_meteo(data, self.clock())
        except TimeoutError:
            self._failed(f"the forecast service did not answer within {weather.timeout_s:g} s")
            return
        except aiohttp.ClientError as exc:
            # said to a person: what failed in words, not the error's class name (a walk read "ClientConnectorError")
            how = "no connection" if isinstance(exc, aiohttp.ClientConnectionError) else "the connection failed"
            self._failed(f"the forecast service cannot be reached ({how}: is the Pi online?)")
            return
        except ValueError as exc:  # json.JSONDecodeError is one too
            self._failed(f"the forecast service sent no usable forecast ({exc})")
            return
        self._forecast, self._failed_at, self._problem = forecast, None, ""
        log.info("weather: forecast for %s fetched", self.place)
        if self.cache_path is not None:
            entry = {"fetched_at": forecast.fetched_at, "at": [weather.latitude, weather.longitude], "data": data}
            try:
                await asyncio.to_thread(write_atomic, self.cache_path, json.dumps(entry))
            except OSError as exc:
                log.warning("weather: cannot keep the forecast in %s: %s", self.cache_path, exc)

    def _failed(self, problem: str) -> None:
        if problem != self._problem:
            log.warning("weather: %s", problem)  # a state change; the same failure again is not news
        self._failed_at, self._problem = self.clock(), problem

    def _read_cache(self) -> Forecast | None:
        """The forecast kept in the data dir, when it is for this place (None: none, or unreadable)."""
        if self.cache_path is None:
            return None
        try:
            entry: Any = json.loads(self.cache_path.read_text(encoding="utf-8"))
            if entry.get("at") != [self.config.latitude, self.config.longitude]:
                return None  # kept for another place: the owner moved the Pi or fixed the coordinates
            return parse_open_meteo(entry["data"], float(entry["fetched_at"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("weather: the kept forecast %s is unreadable (%s); ignored", self.cache_path, exc)
            return None


def _reason(body: bytes) -> str:
    """Open-Meteo's reason for a refusal (``{"error": true, "reason": ...}``), short; "" for none."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    reason = data.get("reason") if isinstance(data, dict) else None
    return f": {str(reason)[:160]}" if reason else ""


def weather_source(config: Config, zone: tzinfo, *, clock: Callable[[], float] = time.time) -> WeatherSource | None:
    """The forecast source the config asks for (``zone``: the appliance's); None when off or with no place."""
    weather = config.weather
    if not (weather.enabled and weather.located):
        return None
    cache = config.resolve_path(config.data_dir) / CACHE_FILE
    return WeatherSource(weather, cache, zone=zone, clock=clock)
