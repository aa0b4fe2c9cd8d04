"""The ``weather`` tool: the forecast for the configured place, as the grounded answers say it.

Read-only, registered only when a forecast source is configured (``weather.enabled`` with a place). Its
answer is sentences made here from the forecast's numbers (never the service's own text), each ending
with what it is based on; with no forecast it fails with the reason, which the model reads.
"""

from __future__ import annotations

from datetime import datetime

from appliance.errors import ToolError
from appliance.tools.registry import ToolRegistry
from appliance.weather.source import WeatherSource
from appliance.weather.words import WEEKDAYS, period, say

_WHEN = ("now", "today", "tonight", "tomorrow", "weekend", "week", *WEEKDAYS)


def register(registry: ToolRegistry, source: WeatherSource) -> None:
    """Register the weather tool (read-only) for ``source``."""

    async def weather(when: str = "today") -> str:
        """The weather forecast for the appliance's place: sky, temperatures, chance of rain.

        Examples: is it going to rain tomorrow; how cold will it be tonight; what's the weather this weekend

        Args:
            when: now, today, tonight, tomorrow, weekend, week, or a weekday such as friday
        """
        key = when.strip().lower().removeprefix("this ").removeprefix("on ") or "today"
        if key not in _WHEN:
            raise ToolError(f"when {when!r}: expected one of {', '.join(_WHEN)}")
        outlook = await source.outlook()
        if outlook.forecast is None:
            raise ToolError(f"no forecast for {source.place}: {outlook.problem or 'none was fetched yet'}")
        now = datetime.fromtimestamp(source.clock(), source.zone)
        text = say(outlook.forecast, "general", period(key, now), source.place)
        stale = f" (the service cannot be reached now: {outlook.problem})" if outlook.stale else ""
        return f"{text} [{source.basis(outlook.forecast)}{stale}]"

    registry.register(weather, read_only=True)
