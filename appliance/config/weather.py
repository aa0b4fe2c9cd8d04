"""The ``weather:`` section: the place the forecast and the sun are for, and where the forecast comes from.

The place (latitude and longitude) serves two things: sunrise and sunset, computed on the Pi with no
network (answers, and schedules such as ``sunset`` or ``sunrise-30m``), and the forecast, fetched from
Open-Meteo (no account) only when ``enabled`` is on. Nothing reaches the network unless the owner set both.
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.config.fields import SECONDS, doc
from appliance.errors import ConfigError

OPEN_METEO = "https://api.open-meteo.com/v1/forecast"
# What people are told when the place is missing (the answers, the schedules, the checks say the same).
PLACE_FIX = "set weather.latitude and weather.longitude (and weather.place, its name) in the config"


@dataclass
class WeatherConfig:
    """The place for the weather and the sun, and the forecast source."""

    place: str = doc('the place\'s name as people read it, e.g. "Ghent"; empty: "here"', "")
    latitude: float | None = doc(
        "the place's latitude in degrees, north positive, e.g. 51.05; empty: no place (no forecast, no sun times)",
        None,
        low=-90,
        high=90,
        expected="a latitude from -90 to 90 degrees",
    )
    longitude: float | None = doc(
        "the place's longitude in degrees, east positive, e.g. 3.72",
        None,
        low=-180,
        high=180,
        expected="a longitude from -180 to 180 degrees",
    )
    enabled: bool = doc("fetch forecasts for the place (off: no weather request ever leaves the Pi)", False)
    base_url: str = doc("the Open-Meteo forecast endpoint (another only for a mirror or a test)", OPEN_METEO)
    cache_minutes: int = doc(
        "a forecast is reused this long before it is fetched again",
        30,
        low=1,
        high=1440,
        expected="a whole number of minutes from 1 to 1440",
    )
    timeout_s: float = doc("give up on a forecast request after this long", 8.0, low=0.1, high=120, expected=SECONDS)

    @property
    def located(self) -> bool:
        """Whether a place is set (both latitude and longitude)."""
        return self.latitude is not None and self.longitude is not None

    @property
    def coordinates(self) -> tuple[float, float] | None:
        """(latitude, longitude), or None with no place: what the sunset and sunrise schedules are computed for."""
        if self.latitude is None or self.longitude is None:
            return None
        return self.latitude, self.longitude

    @property
    def place_name(self) -> str:
        """The place as said in answers: its name, else its coordinates."""
        if self.place:
            return self.place
        if self.located:
            return f"{self.latitude:.2f}, {self.longitude:.2f}"
        return "here"


def check_weather(weather: WeatherConfig) -> None:
    """Latitude and longitude come together; a forecast needs the place and an http(s) endpoint."""
    if (weather.latitude is None) != (weather.longitude is None):
        missing = "longitude" if weather.longitude is None else "latitude"
        raise ConfigError(f"weather.{missing}: a place needs both latitude and longitude", fix=PLACE_FIX)
    if weather.enabled and not weather.located:
        raise ConfigError("weather.enabled: a forecast needs the place", fix=PLACE_FIX)
    if not weather.base_url.startswith(("https://", "http://")):
        raise ConfigError(f"weather.base_url: expected an http(s) URL, e.g. {OPEN_METEO}")
