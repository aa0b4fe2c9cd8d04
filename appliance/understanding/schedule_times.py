"""The time part of a scheduling phrase: "tomorrow at 7", "every weekday at 7:30", "in 10 minutes".

:func:`find_when` finds the runs of time words in a message (each run a list of :class:`Piece`), and
:func:`timing` turns one run into a schedule text of ``appliance/schedule/parse.py`` in the zone of
``now``, or an :class:`Unclear` question, or None when the run is a form this module does not take on
(the model decides). The grammar is in ``schedule_words``; here are the rules of resolution:

- A clock with am/pm, a leading zero ("07:15"), an hour 0 or 13..23 is read as written. A bare hour
  1..12 ("at 7", "at 7:15", "at seven"): in a one-time job the first of h:00 and (h+12):00 that is
  after ``now`` on the day named (today, then tomorrow, when no day is named); in a recurring job the
  24-hour reading (every day at 7 is 07:00). A part of the day ("in the morning", "tonight", "every
  evening") picks the reading in its hours, and a clock outside them is asked about.
- "at midnight" alone is the next 00:00; "tonight at midnight" the end of today; midnight of a named
  day ("tomorrow at midnight") is asked about: its start or its end?
- A weekday is the next one; naming today's weekday ("on Tuesday" on a Tuesday) is asked about.
  A date without a year ("on 3 December") is the next one; "on the 3rd" is the next 3rd of a month.
  A time that has passed on a day named ("today at 07:00" at 10:00) is asked about.
- "in 10 minutes" is ``now`` plus the delay in real time, rounded UP to the whole minute, so a job
  never runs before the time asked (at 10:00:40, "in 10 minutes" is 10:11). A result that falls in
  the second pass of a repeated hour (autumn clock change) is asked about: the ``once`` form names
  the first.
- "every 2 hours" is the elapsed-time form ``every 2h``; under a minute is asked about; "every 2 days"
  is left to the model (the ``every 2d`` form counts from midnight UTC, not a time of day).
- "at sunset", "30 minutes before sunrise" are sun pieces, resolved by :mod:`appliance.understanding.schedule_sun`.
- Several clocks in a recurring job ("every day at 7 and 19") are one cron job when they share the
  minute ("0 7,19 * * *"); otherwise, and for several clocks in a one-time job, the model decides.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from datetime import time as dtime
from typing import Literal

from appliance.schedule.parse import once_after
from appliance.understanding.schedule_vocab import (
    _ABBREVIATIONS,
    _ALL_DAYS,
    _DAY_NAMES,
    _FREE_MONTHS,
    _LETTER_UNITS,
    _MONTHS,
    _NOT_AFTER_CLOCK,
    _ORDINAL_SUFFIXES,
    _ORDINAL_WORDS,
    _PART_HOURS,
    _PLURAL_DAYS,
    _SMALL,
    _TENS,
    _UNITS,
    _VAGUE,
    CLOCK,
    NUMBER_WORDS,
    PARTS,
    STARTS,
    SUN_WORDS,
    VAGUE,
    WEEKDAYS,
)

Words = tuple[str, ...]


@dataclass(frozen=True)
class Unclear:
    """A scheduling request it will not guess: the question to ask back (route intent), not the model."""

    question: str


# --- pieces ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clock:
    """A time of day as written: "7", "7:30 pm", "noon"."""

    hour: int
    minute: int = 0
    meridiem: str | None = None  # "am" | "pm"
    fixed: bool = False  # the 24-hour reading is certain: "07:30", "0:15", "19:00"
    special: str | None = None  # "noon" | "midnight"
    text: str = ""


@dataclass(frozen=True)
class Day:
    """A day named: today, tomorrow, a weekday, a date, a day of the month."""

    kind: Literal["today", "tomorrow", "weekday", "date", "dom", "iso"]
    text: str
    weekday: int = 0  # Python numbering
    month: int = 0
    day: int = 0
    year: int = 0


@dataclass(frozen=True)
class Piece:
    """One part of a time expression."""

    kind: Literal["time", "day", "part", "days", "interval", "delta", "vague", "bad", "unknown", "sun"]
    clocks: tuple[Clock, ...] = ()
    day: Day | None = None
    part: str | None = None
    weekdays: frozenset[int] = frozenset()  # kind days: cron numbering, Sunday 0
    seconds: int = 0  # kind interval, delta
    question: str = ""  # kind vague, bad
    sun: str = ""  # kind sun: "sunset" | "sunrise", its offset in seconds (negative: before); see schedule_sun


Found = tuple[Piece, int]  # a piece and the index after its last word


def find_when(words: Words) -> list[tuple[int, int, list[Piece]]]:
    """Each run of time words: (first index, index after it, its pieces), left to right."""
    runs: list[tuple[int, int, list[Piece]]] = []
    i = 0
    sunny = not SUN_WORDS.isdisjoint(words)
    while i < len(words):
        found = _piece(words, i, first=True) if words[i] in STARTS else _sun_offset(words, i) if sunny else None
        if found is None:
            i += 1
            continue
        pieces, end = [found[0]], found[1]
        while end < len(words) and (more := _piece(words, end, first=False)) is not None:
            pieces.append(more[0])
            end = more[1]
        runs.append((i, end, pieces))
        i = end
    return runs


def _sun_offset(words: Words, i: int) -> Found | None:
    """ "30 minutes before sunset", "an hour after sunrise": a sun piece with its offset."""
    found = _duration(words, i) if words[i] not in SUN_WORDS else None
    if found is None or _at(words, found[1]) not in ("before", "after"):
        return None
    end = found[1] + 1 + (_at(words, found[1] + 1) == "the")
    if _at(words, end) not in SUN_WORDS:
        return None
    return Piece("sun", sun=words[end], seconds=found[0] * (-1 if words[found[1]] == "before" else 1)), end + 1


def _at(words: Words, i: int) -> str:
    return words[i] if i < len(words) else ""


def _piece(words: Words, i: int, *, first: bool) -> Found | None:
    word, nxt = words[i], _at(words, i + 1)
    if word == "at":
        if nxt in SUN_WORDS:
            return Piece("sun", sun=nxt), i + 2
        if nxt == "night":
            return Piece("part", part="night"), i + 2
        if nxt == "some" and _at(words, i + 2) in ("point", "time"):
            return Piece("vague", question=VAGUE), i + 3
        return _clocks(words, i + 1)
    if word == "in":
        if nxt == "the" and _at(words, i + 2) in PARTS:
            return Piece("part", part=words[i + 2]), i + 3
        if nxt in ("a", "an") and _at(words, i + 2) in ("bit", "while", "moment", "few", "couple"):
            return Piece("vague", question="In how many minutes?"), i + 3
        if nxt in ("few", "couple"):
            return Piece("vague", question="In how many minutes?"), i + 2
        found = _duration(words, i + 1)
        return (Piece("delta", seconds=found[0]), found[1]) if found else None
    if word == "on":
        return _on(words, i + 1)
    if word in ("every", "each"):
        return _every(words, i + 1)
    if word in ("daily", "everyday"):
        return Piece("days", weekdays=_ALL_DAYS), i + 1
    if word == "nightly":
        return Piece("days", weekdays=_ALL_DAYS, part="night"), i + 1
    if word == "hourly":
        return Piece("interval", seconds=3600), i + 1
    if word in ("today", "tomorrow"):
        part = nxt if nxt in PARTS else None
        day = Day("today" if word == "today" else "tomorrow", word)
        return Piece("day", day=day, part=part), i + (2 if part else 1)
    if word == "tonight":
        return Piece("day", day=Day("today", "tonight"), part="tonight"), i + 1
    if word == "this" and nxt in PARTS and nxt != "night":
        return Piece("day", day=Day("today", f"this {nxt}"), part=nxt), i + 2
    if word == "next" and (nxt in WEEKDAYS or nxt in ("week", "month", "year")):
        return Piece("vague", question=f"Which day do you mean by next {nxt}? Please give the date."), i + 2
    if word in _VAGUE:
        return Piece("vague", question=VAGUE), i + 1
    if word in WEEKDAYS or word in _PLURAL_DAYS or word in ("weekdays", "weekends"):
        return _weekday(words, i, plural_ok=True)
    if word in _FREE_MONTHS:
        return _month_first(words, i)
    if not first:
        if (sun := _sun_offset(words, i)) is not None:  # "every day 30 minutes before sunset"
            return sun
        if word in PARTS and word != "night":  # "at 7 tomorrow morning" is taken above; "at 7 morning"
            return None
        if word == "the":
            return _on(words, i)
        return _strong_clock(words, i)
    return None


def _on(words: Words, i: int) -> Found | None:
    """After "on": a weekday ("fri" too), weekdays, a date, or "the 3rd"."""
    word = _at(words, i)
    if word in _ABBREVIATIONS:
        return _weekday(words, i, plural_ok=False)
    if word in WEEKDAYS or word in _PLURAL_DAYS or word in ("weekdays", "weekends"):
        return _weekday(words, i, plural_ok=True)
    if word in _MONTHS:
        return _month_first(words, i)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", word):
        try:
            day = date.fromisoformat(word)
        except ValueError:
            return Piece("bad", question=f"There is no date {word}: which day?"), i + 1
        return Piece("day", day=Day("iso", word, year=day.year, month=day.month, day=day.day)), i + 1
    if word == "the":
        i += 1
    found = _ordinal(words, i)
    if found is None:
        return None
    number, end = found
    if _at(words, end) == "of" and _at(words, end + 1) in _MONTHS:
        return _date(number, _MONTHS[words[end + 1]], f"{number} {words[end + 1]}", end + 2)
    if _at(words, end) in _MONTHS:
        return _date(number, _MONTHS[words[end]], f"{number} {words[end]}", end + 1)
    if words[i - 1] != "the":
        return None  # "on 3" alone is no date
    if not 1 <= number <= 31:
        return Piece("bad", question=f"No month has a day {number}: which day?"), end
    return Piece("day", day=Day("dom", f"the {number}", day=number)), end


def _ordinal(words: Words, i: int) -> tuple[int, int] | None:
    """3, 3rd, third, twenty-first: a day number and the index after it."""
    word = _at(words, i)
    if word.isascii() and word.isdigit() and len(word) <= 2:
        return int(word), i + (2 if _at(words, i + 1) in _ORDINAL_SUFFIXES else 1)
    if word in ("twenty", "thirty") and _at(words, i + 1) in _ORDINAL_WORDS and _ORDINAL_WORDS[words[i + 1]] < 10:
        return _TENS[word] + _ORDINAL_WORDS[words[i + 1]], i + 2
    if word in _ORDINAL_WORDS:
        return _ORDINAL_WORDS[word], i + 1
    return None


def _month_first(words: Words, i: int) -> Found | None:
    """ "December 3", "dec 3rd"."""
    found = _ordinal(words, i + 1)
    if found is None:
        return None
    return _date(found[0], _MONTHS[words[i]], f"{words[i]} {found[0]}", found[1])


def _date(number: int, month: int, text: str, end: int) -> Found:
    if not 1 <= number <= calendar.monthrange(2028, month)[1]:  # 2028: a leap year, so 29 February is a date
        return Piece("bad", question=f"{calendar.month_name[month]} has no day {number}: which day?"), end
    return Piece("day", day=Day("date", text, month=month, day=number)), end


def _weekday(words: Words, i: int, *, plural_ok: bool) -> Found | None:
    """Monday [morning] (once), or Mondays / weekdays / weekends, Monday and Thursday (every)."""
    word = words[i]
    if word in ("weekdays", "weekends"):
        return _days_piece(frozenset(range(1, 6)) if word == "weekdays" else frozenset({0, 6}), words, i + 1)
    if word in _PLURAL_DAYS and plural_ok:
        days, end = _day_list(words, i)
        return _days_piece(days, words, end)
    day = WEEKDAYS.get(word, _ABBREVIATIONS.get(word))
    if day is None:
        return None
    if _at(words, i + 1) == "and" and _at(words, i + 2) in (*WEEKDAYS, *_PLURAL_DAYS):
        return None  # "on Monday and Thursday at 8": once or every week? the model decides
    part = _at(words, i + 1) if _at(words, i + 1) in PARTS else None
    return Piece("day", day=Day("weekday", _DAY_NAMES[day].title(), weekday=day), part=part), i + (2 if part else 1)


def _day_list(words: Words, i: int) -> tuple[frozenset[int], int]:
    """Monday, Thursday and Friday[s] from ``i``: cron weekday numbers and the index after them."""
    days: set[int] = set()
    while True:
        word = _at(words, i)
        day = WEEKDAYS.get(word, _PLURAL_DAYS.get(word, _ABBREVIATIONS.get(word)))
        if day is None:
            break
        days.add((day + 1) % 7)
        i += 1
        if _at(words, i) == "and" and _at(words, i + 1) in (*WEEKDAYS, *_PLURAL_DAYS, *_ABBREVIATIONS):
            i += 1
    return frozenset(days), i


def _days_piece(days: frozenset[int], words: Words, end: int) -> Found:
    part = _at(words, end) if _at(words, end) in PARTS else None
    return Piece("days", weekdays=days, part=part), end + (1 if part else 0)


def _every(words: Words, i: int) -> Found | None:
    """After "every": a day or days ("day", "weekday", "Monday and Thursday", "morning"), or an interval."""
    word = _at(words, i)
    if word in ("day", "days"):
        return _days_piece(_ALL_DAYS, words, i + 1)
    if word in PARTS:
        return Piece("days", weekdays=_ALL_DAYS, part=word), i + 1
    if word in ("weekday", "weekdays"):
        return _days_piece(frozenset(range(1, 6)), words, i + 1)
    if word in ("weekend", "weekends"):
        return _days_piece(frozenset({0, 6}), words, i + 1)
    if word in WEEKDAYS or word in _PLURAL_DAYS or word in _ABBREVIATIONS:
        days, end = _day_list(words, i)
        return _days_piece(days, words, end)
    if word in _UNITS:  # "every hour", "every minute"
        found: tuple[int, int] | None = (_UNITS[word], i + 1)
    elif word == "half" and _at(words, i + 1) == "hour":
        found = (1800, i + 2)
    else:
        found = _duration(words, i)
    if found is None:
        return (Piece("unknown"), i + 1) if word == "other" else None  # "every other day": the model decides
    seconds, end = found
    if seconds >= 86400:
        return Piece("unknown"), end  # every 2 days / every week: not a time of day; the model decides
    if seconds == 0:
        return Piece("bad", question="An interval must be longer than 0: how often should it run?"), end
    if seconds < 60:
        return Piece("bad", question="That is more often than once a minute: how often should it run?"), end
    return Piece("interval", seconds=seconds), end


def _number(words: Words, i: int, *, article: bool = False) -> tuple[int, int] | None:
    """A whole number from digits or words ("twenty five", "a" when ``article``) and the index after it."""
    word = _at(words, i)
    if word.isascii() and word.isdigit():
        return int(word), i + 1
    if article and word in ("a", "an"):
        return 1, i + 1
    if word in _TENS:
        unit = NUMBER_WORDS.get(_at(words, i + 1), 0)
        return (_TENS[word] + unit, i + 2) if 0 < unit < 10 else (_TENS[word], i + 1)
    if word in NUMBER_WORDS:
        return NUMBER_WORDS[word], i + 1
    return None


def _duration(words: Words, i: int) -> tuple[int, int] | None:
    """ "10 minutes", "an hour", "half an hour", "an hour and a half", "2 and a half hours", "10m"."""
    if _at(words, i) == "half" and _at(words, i + 1) in ("an", "a") and _at(words, i + 2) == "hour":
        return 1800, i + 3
    if words[i : i + 4] in (("a", "quarter", "of", "an"), ("quarter", "of", "an", "hour")):
        end = i + 5 if words[i] == "a" else i + 4
        return (900, end) if words[end - 1] == "hour" else None
    found = _number(words, i, article=True)
    if found is None:
        return None
    count, j = found
    half = words[j : j + 3] == ("and", "a", "half")
    if half:
        j += 3
    word = _at(words, j)
    unit = _UNITS.get(word) or (_LETTER_UNITS.get(word) if words[i].isdigit() else None)
    if unit is None:
        return None
    seconds, j = count * unit + (unit // 2 if half else 0), j + 1
    if not half and words[j : j + 3] == ("and", "a", "half"):  # "an hour and a half"
        seconds, j = seconds + unit // 2, j + 3
    return seconds, j


def _clocks(words: Words, i: int) -> Found | None:
    """ "7", "7 and 19", "7:30 am and 6 pm": one or more clocks after "at"."""
    found = _clock(words, i)
    if found is None or isinstance(found, Piece):
        return (found, i + 1) if isinstance(found, Piece) else None
    clocks, end = [found[0]], found[1]
    while _at(words, end) == "and":
        start = end + 2 if _at(words, end + 1) == "at" else end + 1
        more = _clock(words, start)
        if more is None or isinstance(more, Piece):
            break
        clocks.append(more[0])
        end = more[1]
    return Piece("time", clocks=tuple(clocks)), end


def _strong_clock(words: Words, i: int) -> Found | None:
    """A clock without "at", only where it cannot be a count: "tomorrow 7pm", "Friday 18:00", "noon"."""
    found = _clock(words, i)
    if found is None or isinstance(found, Piece):
        return None
    clock, end = found
    strong = clock.meridiem or clock.special or CLOCK.fullmatch(words[i])
    return (Piece("time", clocks=(clock,)), end) if strong else None


def _clock(words: Words, i: int) -> tuple[Clock, int] | Piece | None:
    """One time of day from ``i``; a ``bad`` piece for an impossible one ("25:00"); None for no clock."""
    word = _at(words, i)
    if word in ("noon", "midday"):
        return Clock(12, special="noon", text=word), i + 1
    if word == "midnight":
        return Clock(0, special="midnight", text=word), i + 1
    if word in ("half", "quarter") and _at(words, i + 1) in ("past", "to"):
        said = _number(words, i + 2)
        if said is None or not 1 <= said[0] <= 12:
            return None
        minute = {"half": 30, "quarter": 15}[word]
        if words[i + 1] == "to":
            if word == "half":
                return None
            return Clock(said[0] - 1 or 12, 45, text=" ".join(words[i : said[1]])), said[1]
        return Clock(said[0], minute, text=" ".join(words[i : said[1]])), said[1]
    match = CLOCK.fullmatch(word)
    if match:
        hour, minute, end = int(match.group(1)), int(match.group(2)), i + 1
        fixed = match.group(1).startswith("0") or hour == 0 or hour > 12
    elif word.isascii() and word.isdigit() and len(word) <= 2:
        hour, minute, end = int(word), 0, i + 1
        fixed = word.startswith("0") or hour == 0 or hour > 12
        if hour > 24 or _at(words, end) in _NOT_AFTER_CLOCK or _at(words, end) in _UNITS:
            return None  # "at 25 degrees", "at 40%": no clock
    elif word in NUMBER_WORDS and NUMBER_WORDS[word] <= 12:
        hour, minute, end, fixed = NUMBER_WORDS[word], 0, i + 1, False
        after = _number(words, end)
        if after is not None and after[0] in (15, 30, 45):  # "seven thirty"
            minute, end = after
        elif _at(words, end) == "oh" and _at(words, end + 1) in _SMALL[:9]:  # "seven oh five"
            minute, end = NUMBER_WORDS[words[end + 1]], end + 2
    else:
        return None
    meridiem = None
    if _at(words, end) in ("am", "pm"):
        meridiem, end = words[end], end + 1
    elif words[end : end + 2] in (("a", "m"), ("p", "m")):
        meridiem, end = words[end] + "m", end + 2
    elif _at(words, end) in ("o'clock", "oclock"):
        end += 1
    text = " ".join(words[i:end])
    if minute > 59 or hour > 23 or (meridiem and not 1 <= hour <= 12):
        return Piece("bad", question=f"{text} is not a time of day: at what time?")
    return Clock(hour, minute, meridiem, fixed and not meridiem, None, text), end


# --- resolution -----------------------------------------------------------------------------------


def timing(pieces: list[Piece], now: datetime) -> str | Unclear | None:
    """The schedule text of one run of pieces, a question, or None (a form left to the model; sun pieces are
    resolved by :func:`appliance.understanding.schedule_sun.sun_timing`)."""
    for piece in pieces:
        if piece.kind in ("bad", "vague"):
            return Unclear(piece.question)
        if piece.kind in ("unknown", "sun"):
            return None
    kinds = [p.kind for p in pieces]
    if kinds in (["delta"], ["interval"]):
        return _relative(pieces[0].seconds, now) if kinds == ["delta"] else _interval(pieces[0].seconds)
    if "delta" in kinds or "interval" in kinds:
        return None
    parts = {p.part for p in pieces if p.part}
    times = [p for p in pieces if p.kind == "time"]
    days = [p for p in pieces if p.kind == "day"]
    every = [p for p in pieces if p.kind == "days"]
    if len(parts) > 1 or len(times) > 1 or len(days) + len(every) > 1:
        return None  # "tomorrow at 7 on Friday", "this morning at 7 in the evening"
    part = parts.pop() if parts else None
    if not times:
        when = every[0] if every else days[0] if days else None
        return Unclear(_at_what_time(when, part))
    clocks = times[0].clocks
    if every:
        return _recurring(every[0].weekdays, clocks, part)
    if len(clocks) > 1:
        return None  # two one-time jobs: the model can make both
    return _once(days[0].day if days else None, clocks[0], part, now)


def _at_what_time(when: Piece | None, part: str | None) -> str:
    if when is None:
        return f"At what time in the {part}?" if part and part != "tonight" else "At what time?"
    if when.kind == "day" and when.day is not None:
        return f"At what time {'on ' if when.day.kind in ('weekday', 'date', 'dom', 'iso') else ''}{when.day.text}?"
    if when.weekdays == _ALL_DAYS:
        return f"At what time every {part or 'day'}?"
    return "At what time on those days?"


def _hours(clock: Clock, part: str | None, *, recurring: bool) -> list[int] | Unclear:
    """The hours a clock may mean, earliest first (24: midnight at the end of the day)."""
    late = part in ("night", "tonight")
    if clock.special == "noon":
        hours = [12]
    elif clock.special == "midnight":
        hours = [24 if late else 0]
    elif clock.meridiem:
        hours = [clock.hour % 12 + (12 if clock.meridiem == "pm" else 0)]
    elif clock.fixed:
        hours = [24 if clock.hour == 0 and late else clock.hour]
    elif part is None:
        hours = [clock.hour] if recurring else [clock.hour % 12, clock.hour % 12 + 12]
    else:
        hours = [24 if h == 0 and late else h for h in (clock.hour % 12, clock.hour % 12 + 12)]
    if part is not None:
        hours = [h for h in hours if h in _PART_HOURS[part]]
        if not hours:
            return Unclear(f"{clock.text} is not in the {'evening' if part == 'tonight' else part}: at what time?")
    return hours


def _once(day: Day | None, clock: Clock, part: str | None, now: datetime) -> str | Unclear:
    zone = now.tzinfo
    if clock.special == "midnight" and day is not None and part not in ("night", "tonight"):
        return Unclear(f"Midnight at the start or at the end of {day.text}?")
    hours = _hours(clock, part, recurring=False)
    if isinstance(hours, Unclear):
        return hours
    dates = [now.date(), now.date() + timedelta(days=1)] if day is None else days_of(day, now.date())
    if isinstance(dates, Unclear):
        return dates
    for on in dates:
        for hour in hours:
            wall = datetime.combine(on, dtime(hour % 24, clock.minute)) + timedelta(days=hour // 24)
            if wall.replace(tzinfo=zone).timestamp() > now.timestamp():
                return f"once {wall:%Y-%m-%d %H:%M}"
    said = f"{day.text} at {clock.text}" if day else clock.text
    return Unclear(f"{said[0].upper()}{said[1:]} has passed: when should it be?")


def days_of(day: Day, today: date) -> list[date] | Unclear:
    """The dates a named day may be, earliest first (a date without a year: this year's, then the next ones)."""
    if day.kind == "today":
        return [today]
    if day.kind == "tomorrow":
        return [today + timedelta(days=1)]
    if day.kind == "weekday":
        ahead = (day.weekday - today.weekday()) % 7
        return Unclear(f"Today or next {day.text}?") if ahead == 0 else [today + timedelta(days=ahead)]
    if day.kind == "date":
        return [d for y in range(today.year, today.year + 9) if (d := _valid(y, day.month, day.day))]
    if day.kind == "dom":
        months = [((today.month - 1 + k) // 12 + today.year, (today.month - 1 + k) % 12 + 1) for k in range(24)]
        return [d for y, m in months if (d := _valid(y, m, day.day))]
    return [date(day.year, day.month, day.day)]


def _valid(year: int, month: int, day: int) -> date | None:
    return date(year, month, day) if day <= calendar.monthrange(year, month)[1] else None


def _relative(seconds: int, now: datetime) -> str | Unclear:
    if seconds <= 0:
        return Unclear("In how many minutes?")
    if seconds > 366 * 86400:
        return Unclear("That is more than a year away: which date?")
    once, twice = once_after(seconds, now)  # rounded up: a job never runs before the time asked
    if twice:
        return Unclear(f"{once[-5:]} happens twice that night (the clocks go back): which one?")
    return once


def _interval(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"every {seconds // 3600}h"
    if seconds % 60 == 0:
        return f"every {seconds // 60}m"
    return f"every {seconds}s"


def _recurring(weekdays: frozenset[int], clocks: tuple[Clock, ...], part: str | None) -> str | Unclear | None:
    hours: set[int] = set()
    for clock in clocks:
        found = _hours(clock, part, recurring=True)
        if isinstance(found, Unclear):
            return found
        hours.add(found[0])
    if len({c.minute for c in clocks}) > 1:
        return None  # 7:30 and 19:00 are two cron jobs: the model can make both
    minute = clocks[0].minute
    if 24 in hours:  # midnight at the end of the day: 00:00 of the next
        if len(hours) > 1:
            return None
        hours, weekdays = {0}, frozenset((d + 1) % 7 for d in weekdays)
    hour_list = ",".join(str(h) for h in sorted(hours))
    if weekdays == _ALL_DAYS:
        return f"daily {min(hours):02d}:{minute:02d}" if len(hours) == 1 else f"{minute} {hour_list} * * *"
    days = "1-5" if weekdays == frozenset(range(1, 6)) else ",".join(str(d) for d in sorted(weekdays))
    return f"{minute} {hour_list} * * {days}"
