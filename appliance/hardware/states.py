"""Every device with its current readings: what the web page, /api/devices and `picoagent devices list` show.

Neutral ground between the daemon's routes and the CLI (which lists devices itself when no daemon runs),
so neither imports the other. Sensors are read at most every SENSOR_CACHE_S seconds through a cache the
caller keeps (the daemon's lives as long as it does; the CLI's is one command's).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from appliance.errors import PicoagentError

if TYPE_CHECKING:
    from appliance.hardware.devices import DeviceRegistry

SENSOR_CACHE_S = 10.0  # the status page polls every 5 s; sensors need not be read that often


async def device_states(
    devices: DeviceRegistry | None, cache: dict[str, tuple[float, list[dict[str, Any]]]]
) -> list[dict[str, Any]]:
    """Every device with its current readings (sensors cached briefly in ``cache``)."""
    if devices is None:
        return []
    out = []
    now = time.monotonic()
    for info in devices.describe():
        name = info["name"]
        cached = cache.get(name)
        if info["kind"] == "sensor" and cached and now - cached[0] < SENSOR_CACHE_S:
            info["readings"] = cached[1]
        else:
            try:
                readings = [r.as_dict() for r in await devices.read(name)]
            except PicoagentError as exc:
                info["error"] = exc.message
            else:
                info["readings"] = readings
                cache[name] = (now, readings)
        out.append(info)
    return out
