"""The Pi's health: CPU temperature and throttling, load, memory, disk, uptime.

On a Pi the temperature comes from /sys and throttling from ``vcgencmd get_throttled`` (when it is
installed); elsewhere those read "not available" (None) rather than guesses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

THERMAL_ZONE = Path("/sys/class/thermal/thermal_zone0/temp")

# Bits of `vcgencmd get_throttled` (Raspberry Pi firmware documentation).
THROTTLE_BITS = {
    0: "under_voltage",
    1: "arm_frequency_capped",
    2: "throttled",
    3: "soft_temperature_limit",
    16: "under_voltage_occurred",
    17: "arm_frequency_capping_occurred",
    18: "throttling_occurred",
    19: "soft_temperature_limit_occurred",
}


@dataclass
class Health:
    """One reading of the machine's health."""

    cpu_temperature_c: float | None
    throttled: dict[str, bool] | None
    load: list[float]
    memory_total_mb: int
    memory_available_mb: int
    disk_total_gb: float
    disk_free_gb: float
    uptime_s: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def cpu_temperature(zone: Path = THERMAL_ZONE) -> float | None:
    """CPU temperature in °C, or None where the machine does not report one."""
    try:
        return round(int(zone.read_text().strip()) / 1000, 1)
    except (OSError, ValueError):
        return None


def parse_throttled(text: str) -> dict[str, bool] | None:
    """Decode ``throttled=0x50005`` into named flags."""
    _, _, value = text.strip().partition("=")
    try:
        bits = int(value, 16)
    except ValueError:
        return None
    return {name: bool(bits >> bit & 1) for bit, name in THROTTLE_BITS.items()}


def throttling() -> dict[str, bool] | None:
    """The firmware's throttling flags (None off-Pi or without vcgencmd)."""
    vcgencmd = shutil.which("vcgencmd")
    if vcgencmd is None:
        return None
    try:
        out = subprocess.run([vcgencmd, "get_throttled"], capture_output=True, text=True, timeout=2, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_throttled(out.stdout)


def _meminfo() -> dict[str, int]:
    fields: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2:
                    fields[parts[0].rstrip(":")] = int(parts[1])
    except OSError:
        pass
    return fields


def _uptime() -> float:
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return time.monotonic()


def read_health(disk_path: Path | str = "/") -> Health:
    """Read every figure once (blocking but fast: a few small files and maybe vcgencmd)."""
    mem = _meminfo()
    disk = shutil.disk_usage(disk_path)
    return Health(
        cpu_temperature_c=cpu_temperature(),
        throttled=throttling(),
        load=[round(x, 2) for x in os.getloadavg()],
        memory_total_mb=mem.get("MemTotal", 0) // 1024,
        memory_available_mb=mem.get("MemAvailable", 0) // 1024,
        disk_total_gb=round(disk.total / 1e9, 1),
        disk_free_gb=round(disk.free / 1e9, 1),
        uptime_s=round(_uptime(), 1),
    )
