"""Built-in tools, registered the same way any other tool is."""

from __future__ import annotations

import datetime as dt
from typing import Any

from appliance.arithmetic import evaluate, format_number
from appliance.health import read_health
from appliance.tools.registry import ToolRegistry


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly (+ - * / // % ** and sqrt, abs, round, min, max, log).

    Examples: what is 17 times 23; how much is 15 percent of 80; split 120 euros between 7 people

    Args:
        expression: the arithmetic to evaluate, for example "(17 + 4) * 3"
    """
    return format_number(evaluate(expression))


def current_time() -> str:
    """The current local date, time and time zone of the Pi.

    Examples: what time is it; what's the date today; which day of the week is it
    """
    now = dt.datetime.now().astimezone()
    return now.strftime("%A %d %B %Y, %H:%M:%S %Z (UTC%z)")


def system_health() -> dict[str, Any]:
    """The Pi's health: CPU temperature and throttling, load, memory, disk and uptime.

    Examples: how is the Pi doing; is the processor overheating; how much disk space is left
    """
    health = read_health().as_dict()
    if health["cpu_temperature_c"] is None:
        health["cpu_temperature_c"] = "not available"
    return health


def register(registry: ToolRegistry) -> None:
    """Register the built-in tools."""
    registry.register(calculator, read_only=True)
    registry.register(current_time, read_only=True)
    registry.register(system_health, read_only=True)


def default_registry() -> ToolRegistry:
    """A registry holding the built-in tools."""
    registry = ToolRegistry()
    register(registry)
    return registry
