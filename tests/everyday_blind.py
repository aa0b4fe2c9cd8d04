"""The blind held-out everyday sets and the fixed moment their questions are checked and graded at in tests.

The sets (tests/eval/everyday_fresh.yaml, _third, _fourth, _fifth, _sixth, _seventh, _eighth, _ninth, _tenth,
_eleventh, _twelfth, _thirteenth, _fourteenth, _fifteenth, _sixteenth) were each written without reading the grounded
rules or the other sets' questions, measured once by `make bench`, and only then read (their headers say when). Here:
the sets by name, and the values a reply is graded against, fixed (a Friday evening, the fixture's home and forecast:
tests/eval/everyday_home.py), so tests can grade hand-written replies as a person reads them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from tests.eval.everyday import (
    BLIND_LOADERS,
    BLIND_SETS,
    CLASSES,
    PLACEHOLDERS,
    EverydaySet,
    Fill,
    Question,
    fill,
    grade,
    load_set,
    skip_reason,
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
EVERY = {"main": MAIN, **BLIND}
ORDER = list(BLIND)  # in the order they were written (tests/eval/everyday.py BLIND_LOADERS)
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


# The checks every blind set passes: tests/test_everyday_blind.py runs them for every set, and the later sets' own
# files pin them by name for theirs.


def check_whole(name: str) -> None:
    """The set ``name`` is whole, held, and shaped like the one before it."""
    questions = BLIND[name].questions
    assert len(questions) >= BLIND_SETS[name] >= 100
    assert {q.split for q in questions} == {"held"} and BLIND[name].half("tune") == []
    assert {q.cls for q in questions} == set(CLASSES)
    model, slack = (MAIN, 3) if name == "fresh" else (BLIND["fresh"], 2)  # the fresh one was shaped like the main
    mine, theirs = Counter(q.cls for q in questions), Counter(q.cls for q in model.questions)
    for cls in CLASSES:  # about the same proportions
        assert abs(mine[cls] - len(questions) * theirs[cls] / len(model.questions)) <= slack, cls
    for cls in ("memory", "weather", "unknowable"):  # things it cannot know, where only a decline is right
        assert any(q.expect == "decline" for q in questions if q.cls == cls), cls
    assert any(q.setup == "bare" for q in questions)
    # the main set's honest declines count in every set (later sets add a few general ones, none dropped)
    assert BLIND[name].declines[: len(MAIN.declines)] == MAIN.declines
    written = ORDER.index(name)
    if written >= ORDER.index("sixth"):  # from the sixth on: five of each class, follow-ups, more declines
        counts = Counter(q.cls for q in questions)
        assert all(counts[c] >= 5 for c in CLASSES), counts
        assert sum(bool(q.history) for q in questions) >= 5  # follow-ups
        declining = ("devices", "memory", "weather", "sun", "unknowable")
        declining += ("abilities",) if written >= ORDER.index("seventh") else ()
        for cls in declining:  # what it cannot know or does not have
            assert any(q.expect == "decline" for q in questions if q.cls == cls), cls
    if written >= ORDER.index("seventh"):  # each copies the set before it's declines whole
        before = BLIND[ORDER[written - 1]].declines
        assert BLIND[name].declines[: len(before)] == before


def check_none_shared(one: str, other: str) -> None:
    """No question (by its words) and no id of set ``one`` is in set ``other`` ("main" is the main set)."""

    def said(text: str) -> str:
        return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())

    # counted, never shown (a failed assert would print a set: questions their writers did not read)
    a, b = EVERY[one], EVERY[other]
    shared = len({said(q.q) for q in a.questions} & {said(q.q) for q in b.questions})
    same_ids = len({q.id for q in a.questions} & {q.id for q in b.questions})
    assert shared == 0, f"{shared} question(s) of {one} are also in {other}"
    assert same_ids == 0, f"{same_ids} id(s) of {one} are also in {other}"


def check_checkable(name: str, question: Question) -> None:
    """``question`` of set ``name`` names only placeholders the fixture fills, compiles, and grades "" as wrong."""
    everyday: EverydaySet = BLIND[name]
    assert question.placeholders() <= set(PLACEHOLDERS)
    assert question.placeholders() <= set(VALUES), question.placeholders() - set(VALUES)
    assert skip_reason(question, VALUES) == ""
    for near in question.near:  # a quantity's placeholder has numbers, or is unknown here (declined is right)
        name_ = str(near.value).strip("{}")
        got = VALUES.get(name_, Fill()) if str(near.value).startswith("{") else Fill(numbers=(1.0,))
        assert got.numbers or not got.known, f"{near.value} is a pattern, not a number: use any_of"
    for pattern in (*question.any_of, *question.all_of, *question.must_not):
        filled = fill(pattern, VALUES)
        if filled is not None:  # None: a value the fixture cannot know here (declined is right)
            re.compile(filled)
    assert grade(question, "", VALUES, everyday.declines)[0] == "wrong"  # saying nothing is never right


def pinned(name: str) -> tuple[Callable[[], None], Callable[[], None], Callable[[], None]]:
    """The set ``name``'s own three tests, for its file to bind under the names they always had: it loads whole
    and held, it shares no question with another set, every question is checkable (pytest names a test by the
    module attribute it is bound to)."""

    def whole() -> None:
        check_whole(name)

    def shares_nothing() -> None:
        for other in EVERY.keys() - {name}:
            check_none_shared(name, other)

    def checkable() -> None:
        for question in BLIND[name].questions:
            check_checkable(name, question)

    return whole, shares_nothing, checkable
