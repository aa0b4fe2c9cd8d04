"""Weather and the sun: a forecast for the configured place, and sunrise and sunset computed on the Pi.

- :mod:`~appliance.weather.sun`: sunrise and sunset from NOAA's solar position equations, no network
  (answers "when is sunset", and the ``sunset`` / ``sunrise-30m`` schedules of the scheduler);
- :mod:`~appliance.weather.forecast`: a forecast as read from Open-Meteo's JSON, and what it says in words;
- :mod:`~appliance.weather.source`: where the forecast comes from: fetched (aiohttp, short timeouts),
  cached in memory and in the data dir, and said plainly when there is none (offline, not configured).

This package imports nothing heavy on import: aiohttp is loaded when a forecast is first fetched.
"""
