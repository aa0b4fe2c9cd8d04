"""The blind held-out everyday sets and the fixed moment their questions are checked and graded at in tests.

The sets (tests/eval/everyday_fresh.yaml, _third, _fourth, _fifth, _sixth, _seventh, _eighth, _ninth, _tenth,
_eleventh, _twelfth, _thirteenth, _fourteenth, _fifteenth, _sixteenth) were each written without reading the grounded
rules or the other sets' questions, measured once by `make bench`, and only then read (their headers say when). Here:
the sets by name, and the values a reply is graded against, fixed (a Friday evening, the fixture's home and forecast:
tests/eval/everyday_home.py), so tests can grade hand-written replies as a person reads them.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from tests.eval.everyday import (
    BLIND_LOADERS,
    EverydaySet,
    Fill,
    grade,
    load_set,
)
from tests.eval.everyday_values import (
    INVENTED_DEVICES,
    INVENTED_TOOLS,
    WEATHER_CLAIM,
    clock_fills,
    forecast_fills,
    sun_fills,
)

MAIN = load_set()
BLIND: dict[str, EverydaySet] = {name: load() for name, load in BLIND_LOADERS.items()}
BRUSSELS = ZoneInfo("Europe/Brussels")
EVENING = datetime(2026, 11, 27, 19, 40, 10, tzinfo=BRUSSELS)  # a Friday evening, after sunset
FORECAST = {  # the fixture's script: today wet, tonight below zero, tomorrow dry and cold
    "current": {"temperature_2m": 7.5},
    "hourly": {"time": [f"2026-11-28T{h:02d}:00" for h in range(0, 6)], "temperature_2m": [-1.0, -2.0] * 3},
    "daily": {
        "time": ["2026-11-27", "2026-11-28"],
        "temperature_2m_max": [9.0, 6.0],
        "temperature_2m_min": [3.0, -2.0],
        "precipitation_sum": [6.0, 0.0],
        "precipitation_probability_max": [80, 5],
    },
}
HOME = {  # what the fixture reads from the running appliance (tests/eval/everyday_home.py), fixed here
    "name": Fill(r"\bPico\b"),
    "model": Fill(r"SmolLM2|smollm2"),
    "version": Fill(r"(?<![\d.])0\.1\.0(?!\.?\d)"),
    "uptime": Fill(numbers=(3.0,)),
    "tool": Fill(r"\bset_device\b"),
    "invented_tools": Fill(INVENTED_TOOLS),
    "invented_devices": Fill(INVENTED_DEVICES),
    "fan_switched_on": Fill(numbers=(19 * 60 + 37,)),
    "living_room_temperature": Fill(r"(?<![\d.])(?:21\.5|21|22)(?![\d])", (21.5,)),
    "living_room_humidity": Fill(r"\b45\b", (45.0,)),
    "living_room_pressure": Fill(r"\b1013(?:\.25)?\b", (1013.25,)),
    "soil_level": Fill(r"\b50\b", (50.0,)),
    "memory_available_mb": Fill(numbers=(412.0,)),
    "memory_total_mb": Fill(numbers=(3796.0,)),
    "disk_free_mb": Fill(numbers=(20_000.0,)),
    "disk_percent": Fill(numbers=(60.0, 40.0)),
    "cpu_temperature": Fill(),  # off a Pi: only a decline is right
    "load": Fill(numbers=(0.4,)),
    "throttled_answer": Fill(),
    "pi_uptime": Fill(numbers=(600.0,)),
    "next_reminder": Fill(r"\bplants\b"),
    "weather_claim": Fill(WEATHER_CLAIM),
}
VALUES = (
    clock_fills(EVENING, EVENING.replace(minute=41))
    | HOME
    | sun_fills(EVENING, 50.85, 4.35)
    | forecast_fills(FORECAST, EVENING)
)


def judge(name: str, qid: str, reply: str) -> str:
    """How a person reads ``reply`` to question ``qid`` of the blind set ``name``: right, declined or wrong."""
    everyday = BLIND[name]
    return grade(everyday.by_id(qid)[0], reply, VALUES, everyday.declines)[0]
