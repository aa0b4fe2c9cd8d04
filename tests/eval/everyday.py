"""The everyday question set (tests/eval/everyday.yaml): loaded, checked, and each reply graded.

A reply is graded as a person reads it: *right* when it says what a right answer must say and nothing a
wrong one says; *declined* when it honestly says it cannot know (one of the set's ``declines``); *wrong*
otherwise. A wrong value or an invented claim (``must_not``) is wrong whatever else the reply says, and
an answer that is neither right nor an honest decline is wrong too: "never confidently wrong" is
checked by what the reply says, not by how sure the model was.

Answers that depend on the moment (the clock, the devices, the Pi's health, the forecast) are written
with placeholders (``{time}``, ``{weekday}``, ``{living_room_temperature}``); the fixture that asks the
question (:mod:`tests.eval.everyday_home`) fills them when it asks, as a :class:`Fill`: a regular
expression for patterns and the numbers for ``near`` checks. A fill the fixture cannot know on this
machine (no CPU temperature sensor off a Pi) makes the question one that must be declined for that run;
a fill it has no source for yet (no weather fake on this branch) skips the question, with the reason.

No model and no appliance code here: the grader is tested on hand-written replies
(tests/test_everyday_grader.py).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import yaml

from tests.eval.everyday_quantities import normalise, numbers_in, quantities

SET_PATH = Path(__file__).resolve().parent / "everyday.yaml"
# The blind held-out sets by name, in the order they were written, and the fewest questions each must have. Each was
# written without reading the grounded answers' rules nor the sets before it, measured once by `make bench`, and only
# then read (its header says when): tests/eval/everyday_NAME.yaml, every question held.
BLIND_SETS: dict[str, int] = {
    "fresh": 100,
    **dict.fromkeys(
        (
            "third",
            "fourth",
            "fifth",
            "sixth",
            "seventh",
            "eighth",
            "ninth",
            "tenth",
            "eleventh",
            "twelfth",
            "thirteenth",
            "fourteenth",
            "fifteenth",
            "sixteenth",
        ),
        110,
    ),
}

CLASSES = (
    "time",
    "date",
    "self",
    "abilities",
    "devices",
    "health",
    "conversation",
    "memory",
    "schedules",
    "weather",
    "sun",
    "arithmetic",
    "units",
    "general",
    "unknowable",
)
REPORTED_APART = frozenset({"general"})  # not in the goal's share
# wrong == 0 for these (issue 32: the time, the appliance, its devices, its memory, its schedules, the
# weather); the date is the time's, and what it can do here is the appliance's.
NEVER_WRONG = frozenset({"time", "date", "self", "abilities", "devices", "memory", "schedules", "weather"})
SPLITS = ("tune", "held")
MIN_QUESTIONS = 220
UNITS = ("celsius", "percent", "hpa", "megabytes", "clock", "duration", "number")

# Every placeholder the fixture fills, and what it holds.
PLACEHOLDERS: dict[str, str] = {
    "time": "the clock time while the question was asked (24 h and 12 h forms)",
    "other_time": "any clock time that is not one of those",
    "timezone": "the configured time zone: its name, abbreviation or UTC offset",
    "other_timezone": "another time zone's name or a bare UTC",
    "part_of_day": "morning, afternoon, evening or night, as the clock says (either side of a boundary)",
    "past_noon": "yes/no words for 'is it past midday'",
    "date": "today's date in its usual forms (27 November, November 27th, 2026-11-27, 27/11)",
    "weekday": "today's weekday",
    "other_weekday": "any other weekday",
    "tomorrow_weekday": "tomorrow's weekday",
    "yesterday_weekday": "yesterday's weekday",
    "tomorrow_date": "tomorrow's date",
    "yesterday_date": "yesterday's date",
    "next_monday_date": "the coming Monday's date (or the one after)",
    "month": "this month's name",
    "other_month": "any other month's name (May left out: it is also a word)",
    "next_month": "next month's name",
    "year": "this year",
    "other_year": "any other year from 1900 to 2099",
    "day_of_month": "today's day of the month as an ordinal (the 27th)",
    "weekend_answer": "weekday or weekend words, as today is",
    "days_to_christmas": "whole days from today to the next 25 December",
    "iso_week": "the ISO week number",
    "days_in_month": "the number of days in this month",
    "leap_answer": "yes/no words for 'is this a leap year'",
    "leap_wrong": "the opposite words",
    "name": "the assistant's name (agent.name, as SOUL.md says it)",
    "model": "the local model's name, file family or catalog title",
    "version": "the installed version (appliance.__version__)",
    "uptime": "minutes since the appliance started",
    "tool": "the name of a tool the model may call here",
    "invented_tools": "tool-call syntax or invented function signatures",
    "invented_devices": "kinds of device this home does not have",
    "living_room_temperature": "the living room sensor's temperature now (°C)",
    "living_room_humidity": "its humidity now (%)",
    "living_room_pressure": "its pressure now (hPa)",
    "soil_level": "the soil probe's level now (%)",
    "fan_switched_on": "the clock time the fixture switched the fan on",
    "memory_available_mb": "the Pi's available memory (MB)",
    "memory_total_mb": "the Pi's total memory (MB)",
    "disk_free_mb": "free space on the root or the data disk (MB)",
    "disk_percent": "the share of the disk in use, or free (%): 'how full' is answered either way",
    "cpu_temperature": "the CPU temperature (°C); unknown off a Pi",
    "load": "the 1-minute load average",
    "throttled_answer": "yes/no words for throttling; unknown without vcgencmd",
    "pi_uptime": "minutes since the machine booted",
    "next_reminder": "the reminder that comes next (bins or plants)",
    "sunset": "today's sunset at the configured place (clock)",
    "tomorrow_sunrise": "tomorrow's sunrise (clock)",
    "tomorrow_sunset": "tomorrow's sunset (clock)",
    "next_sunrise": "the next sunrise, or today's (clock)",
    "next_sunset": "the next sunset, or today's (clock)",
    "day_length": "today's daylight (minutes)",
    "sun_up": "yes/no words for 'is the sun up'",
    "sun_up_wrong": "the opposite words",
    "tomorrow_rain": "yes/no words for rain tomorrow, from the forecast",
    "tomorrow_rain_wrong": "the opposite words",
    "today_rain": "yes/no words for rain today",
    "today_rain_wrong": "the opposite words",
    "outside_temperature": "the forecast's current temperature (°C)",
    "today_temperatures": "the forecast's current temperature, today's high or today's low (°C)",
    "tonight_low": "tonight's lowest temperature (°C)",
    "tomorrow_high": "tomorrow's highest temperature (°C)",
    "tomorrow_low": "tomorrow's lowest temperature (°C)",
    "today_high": "today's highest temperature (°C)",
    "freeze_tonight": "yes/no words for frost tonight",
    "freeze_tonight_wrong": "the opposite words",
    "weather_claim": "a stated forecast: rain, sun, snow, a temperature (for questions that must be declined)",
}

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
Outcome = Literal["right", "declined", "wrong", "skipped"]


@dataclass(frozen=True)
class Near:
    """A quantity the reply must state: ``value`` (a number or one placeholder) in ``unit``, within a tolerance."""

    value: str | float
    unit: str
    within: float = 0.0  # absolute, in the unit (clock and duration: minutes)
    rel: float = 0.0  # relative to the value


@dataclass(frozen=True)
class Question:
    """One question of the set and what a right answer must and must not say."""

    id: str
    cls: str
    split: str
    q: str
    expect: str = "answer"
    any_of: tuple[str, ...] = ()
    all_of: tuple[str, ...] = ()
    near: tuple[Near, ...] = ()
    result: float | None = None
    within: float = 0.0
    must_not: tuple[str, ...] = ()
    setup: str = "home"
    history: tuple[tuple[str, str], ...] = ()
    table: bool = False

    def placeholders(self) -> set[str]:
        """Every placeholder its patterns and quantities name."""
        texts = [*self.any_of, *self.all_of, *self.must_not, *(str(n.value) for n in self.near)]
        return {name for text in texts for name in _PLACEHOLDER.findall(text)}


@dataclass(frozen=True)
class EverydaySet:
    """The questions and the phrases that count as an honest decline."""

    questions: tuple[Question, ...]
    declines: tuple[str, ...]

    def half(self, split: str) -> list[Question]:
        """One half's questions (``all``: both)."""
        return [q for q in self.questions if split in ("all", q.split)]

    def by_id(self, *ids: str) -> list[Question]:
        """These questions, in the order given."""
        known = {q.id: q for q in self.questions}
        return [known[i] for i in ids]


@dataclass(frozen=True)
class Fill:
    """What a placeholder stands for when a question is asked.

    ``pattern``: a regular expression; ``numbers``: the values for ``near`` (any of them will do). Neither:
    the appliance cannot know it here, so only a decline is right. ``skip``: the fixture has no source for
    it on this branch (the question is not asked, and the reason is reported).
    """

    pattern: str | None = None
    numbers: tuple[float, ...] = ()
    skip: str = ""

    @property
    def known(self) -> bool:
        """Whether the fixture knows the value."""
        return self.pattern is not None or bool(self.numbers)


@dataclass
class Verdict:
    """How one reply was graded, and what it took."""

    id: str
    cls: str
    split: str
    q: str
    outcome: Outcome
    why: str
    reply: str = ""
    model_called: bool = False
    latency_ms: float = 0.0
    route: str = ""
    setup: str = "home"


# --- loading ------------------------------------------------------------------------------------------


def _strings(raw: Any, where: str, problems: list[str]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        problems.append(f"{where}: a list of strings")
        return ()
    return tuple(raw)


def _question(raw: dict[str, Any], problems: list[str]) -> Question | None:
    where = str(raw.get("id", "?"))
    allowed = {"id", "class", "split", "q", "expect", "any_of", "all_of", "near", "result", "within", "must_not"}
    allowed |= {"setup", "history", "table"}
    for key in set(raw) - allowed:
        problems.append(f"{where}: unknown key {key!r}")
    near = []
    for item in raw.get("near") or []:
        if not isinstance(item, dict) or item.get("unit") not in UNITS or "value" not in item:
            problems.append(f"{where}: near entries are {{value, unit ({', '.join(UNITS)}), within, rel}}")
            continue
        near.append(Near(item["value"], item["unit"], float(item.get("within", 0)), float(item.get("rel", 0))))
    history = tuple((str(role), str(text)) for role, text in raw.get("history") or [])
    question = Question(
        id=where,
        cls=str(raw.get("class")),
        split=str(raw.get("split")),
        q=str(raw.get("q", "")),
        expect=str(raw.get("expect", "answer")),
        any_of=_strings(raw.get("any_of"), f"{where}.any_of", problems),
        all_of=_strings(raw.get("all_of"), f"{where}.all_of", problems),
        near=tuple(near),
        result=None if raw.get("result") is None else float(raw["result"]),
        within=float(raw.get("within", 0)),
        must_not=_strings(raw.get("must_not"), f"{where}.must_not", problems),
        setup=str(raw.get("setup", "home")),
        history=history,
        table=bool(raw.get("table", False)),
    )
    if question.cls not in CLASSES:
        problems.append(f"{where}: class {question.cls!r} is not one of {', '.join(CLASSES)}")
    if question.expect not in ("answer", "decline"):
        problems.append(f"{where}: expect is answer or decline, not {question.expect!r}")
    if question.setup not in ("home", "bare"):
        problems.append(f"{where}: setup is home or bare, not {question.setup!r}")
    checks = question.any_of or question.all_of or question.near or question.result is not None
    if question.expect == "answer" and not checks:
        problems.append(f"{where}: an answer question needs any_of, all_of, near or result")
    if question.expect == "decline" and checks:
        problems.append(f"{where}: a decline question has only must_not")
    if any(role not in ("user", "assistant") for role, _ in history):
        problems.append(f"{where}: history roles are user and assistant")
    for name in sorted(question.placeholders() - set(PLACEHOLDERS)):
        problems.append(f"{where}: unknown placeholder {{{name}}} (known: tests/eval/everyday.py PLACEHOLDERS)")
    for pattern in (*question.any_of, *question.all_of, *question.must_not):
        try:
            re.compile(_PLACEHOLDER.sub("x", pattern))
        except re.error as exc:
            problems.append(f"{where}: {pattern!r} is not a regular expression ({exc})")
    return question


def check_splits(questions: Sequence[Question]) -> list[str]:
    """The header's rule: within each class, in file order, tune, held, tune, held, ..."""
    seen: Counter[str] = Counter()
    problems = []
    for q in questions:
        wanted = SPLITS[seen[q.cls] % 2]
        seen[q.cls] += 1
        if q.split != wanted:
            problems.append(f"{q.id}: split should be {wanted} (alternating within class {q.cls}, tune first)")
    return problems


def check_all_held(questions: Sequence[Question]) -> list[str]:
    """A held-out set's rule: every question is held (none is for tuning)."""
    return [f"{q.id}: split should be held (a held-out set)" for q in questions if q.split != "held"]


def load_set(path: Path = SET_PATH, *, all_held: bool = False, min_questions: int = MIN_QUESTIONS) -> EverydaySet:
    """everyday.yaml, checked: a ValueError listing every problem (unknown keys, classes, placeholders, splits).

    ``all_held``: every question must be held (a held-out set such as everyday_fresh.yaml) instead of the
    main set's tune/held alternation; ``min_questions``: how many the set needs at least."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    problems: list[str] = []
    questions = [q for raw in data.get("questions") or [] if (q := _question(raw, problems)) is not None]
    declines = _strings(data.get("declines"), "declines", problems)
    ids = Counter(q.id for q in questions)
    problems += [f"{i}: id used {n} times" for i, n in ids.items() if n > 1]
    problems += check_all_held(questions) if all_held else check_splits(questions)
    if len(questions) < min_questions:
        problems.append(f"{len(questions)} questions; the set needs at least {min_questions}")
    missing = set(CLASSES) - {q.cls for q in questions}
    if missing:
        problems.append(f"no question of class {', '.join(sorted(missing))}")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return EverydaySet(tuple(questions), declines)


def load_blind(name: str) -> EverydaySet:
    """The blind set ``name`` (:data:`BLIND_SETS`), checked as :func:`load_set` does, every question held."""
    return load_set(SET_PATH.parent / f"everyday_{name}.yaml", all_held=True, min_questions=BLIND_SETS[name])


# The blind sets' loaders by name, in the order they were written: the bench rows, the tests' fixture.
BLIND_LOADERS: dict[str, Callable[[], EverydaySet]] = {name: partial(load_blind, name) for name in BLIND_SETS}


# --- grading ------------------------------------------------------------------------------------------


def fill(pattern: str, values: Mapping[str, Fill]) -> str | None:
    """The pattern with its placeholders filled; None when one of them is not known here."""
    unknown = False

    def sub(match: re.Match[str]) -> str:
        nonlocal unknown
        got = values.get(match.group(1))
        if got is None or got.pattern is None:
            unknown = True
            return ""
        return f"(?:{got.pattern})"

    filled = _PLACEHOLDER.sub(sub, pattern)
    return None if unknown else filled


def _search(pattern: str, text: str) -> re.Match[str] | None:
    return re.search(pattern, text, re.IGNORECASE | re.MULTILINE)


def _near_ok(near: Near, text: str, values: Mapping[str, Fill]) -> tuple[bool | None, str]:
    """Whether the reply states the quantity (None: not known here)."""
    if isinstance(near.value, str):
        names = _PLACEHOLDER.findall(near.value)
        got = values.get(names[0]) if names else None
        if got is None or not got.numbers:
            return None, f"{near.value} is not known here"
        wanted = got.numbers
    else:
        wanted = (float(near.value),)
    stated = quantities(text, near.unit)
    for have in stated:
        for want in wanted:
            gap = abs(have - want)
            if near.unit == "clock":
                gap = min(gap, 1440 - gap)
            if gap <= max(near.within, near.rel * abs(want)) + 1e-9:
                return True, f"states {have:g} ({near.unit}; wanted {want:g})"
    shown = ", ".join(f"{w:g}" for w in wanted)
    return False, f"no {near.unit} near {shown} (stated: {', '.join(f'{s:g}' for s in stated) or 'none'})"


def _result_ok(question: Question, text: str) -> tuple[bool, str]:
    """The first or the last number the reply adds to the question's is the result ("144 divided by 12 is
    12": each of the question's numbers is taken out once, so the answer may repeat one of them)."""
    assert question.result is not None
    added = numbers_in(text)
    for given in numbers_in(question.q):
        if given in added:
            added.remove(given)
    tolerance = question.within + 1e-9 * max(1.0, abs(question.result))
    if added and any(abs(n - question.result) <= tolerance for n in (added[0], added[-1])):
        return True, f"says {question.result:g}"
    return False, f"no {question.result:g} (numbers it adds: {', '.join(f'{n:g}' for n in added) or 'none'})"


def declines_in(text: str, declines: Iterable[str]) -> str | None:
    """The decline phrase the reply says, or None."""
    for pattern in declines:
        match = _search(pattern, normalise(text))
        if match:
            return match.group(0)
    return None


def _checks(question: Question, text: str, values: Mapping[str, Fill]) -> tuple[bool | None, str]:
    """Whether the reply says what a right answer must (None: a value it needs is not known here)."""
    notes: list[str] = []
    if question.any_of:
        filled = [fill(p, values) for p in question.any_of]
        usable = [p for p in filled if p is not None]
        if not usable:
            return None, "its values are not known here"
        hit = next((m for p in usable if (m := _search(p, text))), None)
        if hit is None:
            return False, f"none of {list(question.any_of)}"
        notes.append(f"says {hit.group(0)!r}")
    for pattern in question.all_of:
        filled_one = fill(pattern, values)
        if filled_one is None:
            return None, f"{pattern} is not known here"
        if not _search(filled_one, text):
            return False, f"not {pattern!r}"
    for near in question.near:
        ok, why = _near_ok(near, text, values)
        if not ok:
            return ok, why
        notes.append(why)
    if question.result is not None:
        ok_result, why = _result_ok(question, text)
        if not ok_result:
            return False, why
        notes.append(why)
    return True, "; ".join(notes) or "all of it"


def skip_reason(question: Question, values: Mapping[str, Fill]) -> str:
    """Why the fixture cannot ask this question here ("" when it can)."""
    for name in sorted(question.placeholders()):
        got = values.get(name)
        if got is not None and got.skip:
            return got.skip
    return ""


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def answer_text(question: Question, text: str, declines: Sequence[str]) -> str:
    """What the reply answers: without the question said back ("echo: is the fan on?") and without the
    sentences that decline ("I can't tell whether the fan is on." says no state). A hedged answer in one
    sentence with its decline ("I'm not sure, but it's 12:45") is a decline, never right."""
    said = re.escape(question.q.strip().rstrip("?.!").strip())
    text = re.sub(said, " ", text, flags=re.IGNORECASE)
    kept = [s for s in _SENTENCE_END.split(text) if s.strip() and declines_in(s, declines) is None]
    return "\n".join(kept)


def grade(question: Question, reply: str, values: Mapping[str, Fill], declines: Sequence[str]) -> tuple[Outcome, str]:
    """right, declined or wrong (or skipped, see :func:`skip_reason`), and why, as a person reads the reply.

    A must_not anywhere is wrong; the checks are made on :func:`answer_text`; a decline anywhere is a decline.
    """
    reason = skip_reason(question, values)
    if reason:
        return "skipped", reason
    text = normalise(reply)
    for pattern in question.must_not:
        filled = fill(pattern, values)
        match = _search(filled, text) if filled is not None else None
        if match:
            return "wrong", f"says {match.group(0)!r} (must not: {pattern})"
    declined = declines_in(text, declines)
    if question.expect == "answer":
        ok, why = _checks(question, answer_text(question, text, declines), values)
        if ok:
            return "right", why
        if ok is None:  # the appliance cannot know it here: only a decline is right
            return ("declined", f"declines ({declined!r}); {why}") if declined else ("wrong", f"{why}, and no decline")
        if declined:
            return "declined", f"declines ({declined!r})"
        return "wrong", f"{why}, and no decline"
    if declined:
        return "declined", f"declines ({declined!r})"
    return "wrong", "does not decline"


# --- reporting ----------------------------------------------------------------------------------------


def tally(verdicts: Iterable[Verdict]) -> dict[str, dict[str, int]]:
    """right / declined / wrong / skipped per class, in CLASSES order."""
    counts: dict[str, dict[str, int]] = {}
    for v in verdicts:
        row = counts.setdefault(v.cls, {"right": 0, "declined": 0, "wrong": 0, "skipped": 0})
        row[v.outcome] += 1
    return {c: counts[c] for c in CLASSES if c in counts}


def share_right_or_declined(verdicts: Iterable[Verdict], classes: Iterable[str]) -> float:
    """(right + declined) / graded over these classes (skipped ones left out); nan when none was graded."""
    wanted = set(classes)
    graded = [v for v in verdicts if v.cls in wanted and v.outcome != "skipped"]
    if not graded:
        return math.nan
    return sum(v.outcome in ("right", "declined") for v in graded) / len(graded)
