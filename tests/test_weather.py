"""The forecast source against a fake Open-Meteo on 127.0.0.1, its weather tool, and the sun on the Pi.

The source: a forecast is fetched with the real request, kept (a second question makes no request),
kept on disk (a restart offline still answers and says when it was fetched), and with the service down
or never reached says so, never a forecast it does not have. The sun: published sunrise and sunset times
within two minutes, and polar days and nights said, never a time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TypeVar
from zoneinfo import ZoneInfo

import pytest

from appliance.config import Config, WeatherConfig, load_config
from appliance.errors import ConfigError
from appliance.tools.registry import ToolRegistry
from appliance.weather import tool as weather_tool
from appliance.weather.forecast import parse_open_meteo
from appliance.weather.source import CACHE_FILE, RETRY_S, WeatherSource, weather_source
from appliance.weather.sun import next_event, sun_day
from tests.fakes.clock import ManualClock
from tests.fakes.open_meteo import DayScript, FakeOpenMeteo, serve_open_meteo
from tests.helpers import write

BRUSSELS = ZoneInfo("Europe/Brussels")
NOW = datetime(2026, 11, 27, 10, 5, tzinfo=BRUSSELS)  # a Friday
T = TypeVar("T")


def ghent(url: str, **kw: object) -> WeatherConfig:
    return WeatherConfig(place="Ghent", latitude=51.05, longitude=3.72, enabled=True, base_url=url, **kw)  # type: ignore[arg-type]


def fake_week() -> FakeOpenMeteo:
    days = [DayScript() for _ in range(16)]
    days[1] = DayScript(code=63, low=2.0, high=8.0, rain_chance=85, rain_mm=6.4)  # Saturday: rain
    days[2] = DayScript(code=0, low=-1.0, high=6.0, rain_chance=0)  # Sunday: clear and cold
    return FakeOpenMeteo(today=NOW.date(), days=days)


def with_fake(fake: FakeOpenMeteo, main: Callable[[FakeOpenMeteo], Awaitable[T]]) -> T:
    async def go() -> T:
        async with serve_open_meteo(fake) as served:
            return await main(served)

    return asyncio.run(go())


def source_for(url: str, tmp_path: Path, clock: ManualClock, **kw: object) -> WeatherSource:
    return WeatherSource(ghent(url, **kw), tmp_path / CACHE_FILE, zone=BRUSSELS, clock=clock)


# --- the source ------------------------------------------------------------------------------------


def test_a_forecast_is_fetched_with_open_meteos_request_and_read(tmp_path: Path) -> None:
    clock = ManualClock(NOW)

    async def main(fake: FakeOpenMeteo) -> None:
        source = source_for(fake.url, tmp_path, clock)
        outlook = await source.outlook()
        assert outlook.forecast is not None and not outlook.problem
        (query,) = fake.requests
        assert query["latitude"] == "51.0500" and query["longitude"] == "3.7200" and query["timezone"] == "auto"
        forecast = outlook.forecast
        saturday = forecast.day(date(2026, 11, 28))
        assert saturday is not None and saturday.rain_chance == 85 and saturday.code == 63
        assert saturday.low == pytest.approx(2.0, abs=0.2) and saturday.high == pytest.approx(8.0, abs=0.2)
        assert forecast.hours[0].at == datetime(2026, 11, 27, 0, 0, tzinfo=BRUSSELS)
        assert forecast.current is not None and forecast.current.at.hour == 10
        assert source.basis(forecast) == "Open-Meteo forecast for Ghent, fetched 10:05"

    with_fake(fake_week(), main)


def test_a_second_question_within_the_cache_time_makes_no_request(tmp_path: Path) -> None:
    clock = ManualClock(NOW)

    async def main(fake: FakeOpenMeteo) -> int:
        source = source_for(fake.url, tmp_path, clock, cache_minutes=30)
        await source.outlook()
        clock.advance(29 * 60)
        await source.outlook()
        asked = len(fake.requests)
        clock.advance(2 * 60)  # past the cache time: fetched again
        await source.outlook()
        return asked

    fake = fake_week()
    assert with_fake(fake, main) == 1
    assert len(fake.requests) == 2


def test_offline_after_a_restart_the_kept_forecast_answers_with_when_it_was_fetched(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    with_fake(fake_week(), lambda fake: source_for(fake.url, tmp_path, clock).outlook())
    kept = json.loads((tmp_path / CACHE_FILE).read_text())
    assert kept["at"] == [51.05, 3.72] and "daily" in kept["data"]

    clock.advance(3 * 3600)  # three hours later, a new process, the service gone (its port closed)
    restarted = source_for("http://127.0.0.1:9/v1/forecast", tmp_path, clock)
    outlook = asyncio.run(restarted.outlook())
    assert outlook.forecast is not None and outlook.stale
    assert "cannot be reached" in outlook.problem
    assert restarted.basis(outlook.forecast).endswith("fetched 10:05")


def test_offline_with_nothing_kept_says_there_is_no_forecast(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    source = source_for("http://127.0.0.1:9/v1/forecast", tmp_path, clock)
    outlook = asyncio.run(source.outlook())
    assert outlook.forecast is None and not outlook.stale
    assert outlook.problem == "the forecast service cannot be reached (no connection: is the Pi online?)"


def test_a_failed_fetch_is_not_retried_on_every_question(tmp_path: Path) -> None:
    clock = ManualClock(NOW)

    async def main(fake: FakeOpenMeteo) -> list[str]:
        fake.mode = "500"
        source = source_for(fake.url, tmp_path, clock)
        problems = [(await source.outlook()).problem]
        clock.advance(RETRY_S / 2)
        problems.append((await source.outlook()).problem)
        assert len(fake.requests) == 1  # the second question waited for no service
        fake.mode = ""
        clock.advance(RETRY_S)
        problems.append((await source.outlook()).problem)
        return problems

    assert with_fake(fake_week(), main) == ["the forecast service sent no usable forecast (HTTP 500)"] * 2 + [""]


def test_a_slow_or_broken_service_is_a_problem_said_not_a_forecast(tmp_path: Path) -> None:
    clock = ManualClock(NOW)

    async def main(fake: FakeOpenMeteo) -> list[str]:
        said = []
        for mode in ("slow", "malformed"):
            fake.mode, fake.slow_s = mode, 2.0
            source = source_for(fake.url, tmp_path / mode, clock, timeout_s=0.3)
            outlook = await source.outlook()
            assert outlook.forecast is None
            said.append(outlook.problem)
        return said

    slow, malformed = with_fake(fake_week(), main)
    assert slow == "the forecast service did not answer within 0.3 s"
    assert malformed.startswith("the forecast service sent no usable forecast")


def test_a_kept_forecast_for_another_place_is_not_used(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    with_fake(fake_week(), lambda fake: source_for(fake.url, tmp_path, clock).outlook())
    moved = WeatherSource(
        WeatherConfig(place="Oslo", latitude=59.91, longitude=10.75, enabled=True, base_url="http://127.0.0.1:9/"),
        tmp_path / CACHE_FILE,
        zone=BRUSSELS,
        clock=clock,
    )
    assert asyncio.run(moved.outlook()).forecast is None


def test_open_meteos_error_answer_is_read_as_its_reason() -> None:
    with pytest.raises(ValueError, match="Latitude must be in range"):
        parse_open_meteo({"error": True, "reason": "Latitude must be in range of -90 to 90°. Given: 91.0."}, 0.0)


def test_the_source_is_built_only_when_enabled_with_a_place(tmp_path: Path) -> None:
    config = Config(data_dir=str(tmp_path))
    assert weather_source(config, BRUSSELS) is None
    config.weather = WeatherConfig(latitude=51.05, longitude=3.72)
    assert weather_source(config, BRUSSELS) is None  # a place, but forecasts off: no network
    config.weather.enabled = True
    source = weather_source(config, BRUSSELS)
    assert source is not None and source.cache_path == tmp_path / CACHE_FILE


# --- the tool ------------------------------------------------------------------------------------


def test_the_weather_tool_says_the_forecast_and_its_basis(tmp_path: Path) -> None:
    clock = ManualClock(NOW)

    async def main(fake: FakeOpenMeteo) -> tuple[str, str]:
        registry = ToolRegistry()
        weather_tool.register(registry, source_for(fake.url, tmp_path, clock))
        assert registry.tools["weather"].read_only
        saturday = await registry.execute("weather", {"when": "saturday"})
        nowhere = await registry.execute("weather", {"when": "next year"})
        assert saturday.ok and not nowhere.ok
        return saturday.output, str(nowhere.error)

    saturday, nowhere = with_fake(fake_week(), main)
    assert saturday.startswith("On Saturday in Ghent: rain, from 2 °C to 8 °C, 85 % chance of rain, about 6.4 mm.")
    assert saturday.endswith("[Open-Meteo forecast for Ghent, fetched 10:05]")
    assert "expected one of now, today, tonight" in nowhere


# --- config ----------------------------------------------------------------------------------------


def test_the_config_needs_both_coordinates_and_a_place_for_a_forecast(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as half:
        load_config(write(tmp_path, "weather:\n  latitude: 51.05\n"), environ={})
    assert half.value.message == "weather.longitude: a place needs both latitude and longitude"
    with pytest.raises(ConfigError) as off:
        load_config(write(tmp_path, "weather:\n  enabled: true\n"), environ={})
    assert "weather.latitude and weather.longitude" in off.value.for_people()
    with pytest.raises(ConfigError) as far:
        load_config(write(tmp_path, "weather:\n  latitude: 91\n  longitude: 3\n"), environ={})
    assert far.value.message == "weather.latitude: expected a latitude from -90 to 90 degrees, got 91.0"


# --- the sun ---------------------------------------------------------------------------------------

# Published times (timeanddate.com, NOAA's solar calculator), to the minute.
PUBLISHED = [
    ("London", 51.5074, -0.1278, "Europe/London", date(2024, 6, 21), "04:43", "21:21"),
    ("London", 51.5074, -0.1278, "Europe/London", date(2024, 12, 21), "08:04", "15:53"),
    ("New York", 40.7128, -74.0060, "America/New_York", date(2024, 6, 20), "05:25", "20:31"),
    ("Sydney", -33.8688, 151.2093, "Australia/Sydney", date(2024, 12, 21), "05:41", "20:05"),
    ("Reykjavik", 64.1466, -21.9426, "Atlantic/Reykjavik", date(2024, 6, 20), "02:55", "00:03"),
]


@pytest.mark.parametrize(("city", "lat", "lon", "zone", "day", "rise", "sets"), PUBLISHED)
def test_sunrise_and_sunset_match_published_times(
    city: str, lat: float, lon: float, zone: str, day: date, rise: str, sets: str
) -> None:
    sun = sun_day(day, lat, lon, ZoneInfo(zone))
    assert sun.sunrise is not None and sun.sunset is not None and sun.polar is None
    for computed, published in ((sun.sunrise, rise), (sun.sunset, sets)):
        hour, minute = map(int, published.split(":"))
        expected = datetime.combine(computed.date(), datetime.min.time(), computed.tzinfo).replace(
            hour=hour, minute=minute
        )
        assert abs((computed - expected).total_seconds()) <= 120, f"{city}: {computed:%H:%M} vs {published}"


def test_a_polar_day_and_night_have_no_times_and_say_which() -> None:
    oslo = ZoneInfo("Europe/Oslo")
    summer = sun_day(date(2026, 6, 21), 69.65, 18.96, oslo)  # Tromsø: midnight sun
    winter = sun_day(date(2026, 12, 21), 69.65, 18.96, oslo)  # Tromsø: polar night
    assert (summer.polar, summer.sunrise, summer.sunset) == ("day", None, None)
    assert (winter.polar, winter.sunrise, winter.sunset) == ("night", None, None)


def test_the_next_sunset_skips_a_polar_night_and_an_offset_moves_it() -> None:
    oslo = ZoneInfo("Europe/Oslo")
    after = datetime(2026, 12, 21, 12, 0, tzinfo=oslo)
    found = next_event("sunset", after, 69.65, 18.96)
    assert found is not None and date(2027, 1, 10) <= found.date() <= date(2027, 1, 20)  # when the sun is back
    ghent_sunset = next_event("sunset", NOW, 51.05, 3.72)
    earlier = next_event("sunset", NOW, 51.05, 3.72, offset_s=-1800)
    assert ghent_sunset is not None and earlier is not None
    assert ghent_sunset - earlier == timedelta(minutes=30) and ghent_sunset.date() == NOW.date()
