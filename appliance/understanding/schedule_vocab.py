"""The words of time expressions, for :mod:`appliance.understanding.schedule_times`: weekdays, months, numbers
and ordinals as words, units, parts of the day, and the words a time expression can start with."""

from __future__ import annotations

import calendar
import re

_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ABBREVIATIONS = dict(mon=0, tue=1, tues=1, wed=2, thu=3, thur=3, thurs=3, fri=4, sat=5, sun=6)
WEEKDAYS = {name: i for i, name in enumerate(_DAY_NAMES)}  # Python numbering: Monday 0
_PLURAL_DAYS = {name + "s": i for i, name in enumerate(_DAY_NAMES)}
_MONTH_NAMES = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTH_ABBREVIATIONS = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTHS = {**_MONTH_ABBREVIATIONS, "sept": 9, **_MONTH_NAMES}
# Months that may start a time expression without "on": not "may" or "march", which are also verbs.
_FREE_MONTHS = {name: i for name, i in _MONTH_NAMES.items() if name not in ("may", "march")}

_SMALL = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_TEENS = ("thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
NUMBER_WORDS = {word: i for i, word in enumerate(_SMALL, 1)} | {word: i for i, word in enumerate(_TEENS, 13)}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "ninety": 90}
_ORDINALS = "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth"
_ORDINALS += " fifteenth sixteenth seventeenth eighteenth nineteenth twentieth"
_ORDINAL_WORDS = {word: i for i, word in enumerate(_ORDINALS.split(), 1)} | {"thirtieth": 30}
_ORDINAL_SUFFIXES = frozenset({"st", "nd", "rd", "th"})

_UNITS = {
    **dict.fromkeys(("second", "seconds", "sec", "secs"), 1),
    **dict.fromkeys(("minute", "minutes", "min", "mins"), 60),
    **dict.fromkeys(("hour", "hours", "hr", "hrs"), 3600),
    **dict.fromkeys(("day", "days"), 86400),
    **dict.fromkeys(("week", "weeks"), 604800),
}
_LETTER_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}  # only straight after digits: "10m", "2h"

# Parts of the day and the hours each allows; 24 is the midnight at the end of the day.
PARTS = ("morning", "afternoon", "evening", "night")
_PART_HOURS = {
    "morning": range(4, 12),
    "afternoon": range(12, 18),
    "evening": range(16, 24),
    "night": range(19, 25),
    "tonight": range(17, 25),
}
_ALL_DAYS = frozenset(range(7))  # cron numbering: Sunday 0
_VAGUE = frozenset({"later", "sometime", "soon", "someday", "eventually"})
VAGUE = "When exactly?"  # the question of a vague time; "remind me later" asks it in its own words
CLOCK = re.compile(r"(\d{1,2})[:.](\d{2})")
_NOT_AFTER_CLOCK = frozenset({"%", "percent", "degrees", "degree", "°", "celsius", "fahrenheit", "c", "f"})

SUN_WORDS = frozenset({"sunset", "sunrise"})  # "at sunset", "30 minutes before sunrise" (schedule_sun)
# The words a time expression can start with: a message with none of them (and no "remind" or
# "cancel") is not about a schedule, and the parser never runs.
STARTS = frozenset(
    {
        *("at", "in", "on", "every", "each", "daily", "everyday", "nightly", "hourly", "today", "tomorrow"),
        *("tonight", "this", "next", "noon", "midnight", "weekdays", "weekends", *_VAGUE, *SUN_WORDS),
        *WEEKDAYS,
        *_PLURAL_DAYS,
        *_FREE_MONTHS,
    }
)
# Words that say "when" and must not be left over in the action once the time is taken out: if one is,
# part of the time was not understood ("remind me on the first at 9": the model decides).
TIMEISH = frozenset(
    {
        *STARTS - {"at", "in", "on", "this"},
        *("yesterday", "pm", "o'clock", "oclock", "weekly", "monthly", "weekday", "weekend", "until", "till"),
    }
)
