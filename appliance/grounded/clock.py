"""The time, the date, the weekday and the time zone, from the Pi's clock: never from the model's guess.

Asked: "what time is it", "what's the date tomorrow", "what day was yesterday", "how many days until
Christmas" (or "until 24 December", "until Friday"), "what day of the week is 1 January", "what week
number is it", "is it the weekend", "what time zone are you in". Everything comes from ``Facts.now()``,
an aware datetime whose zone is named in the answer ("It's 14:05 (Europe/Brussels).").

The words rule takes a message only when the whole of it is such a question (a greeting or "can you tell
me" before it, "now" or "please" after it): "what time does the bakery close", "remind me at 7", "what
time is sunset" (the sun's topic), "the time machine movie" or "what time is it in Tokyo" (another
place's zone would need data the Pi does not hold) are not taken. A message brought by meaning is looked
at again with the same phrases found anywhere in it, and turned down when it names a place, a schedule,
the sun or a time other than now.

A Pi has no battery clock: until it reaches a time server it may believe it is 1970, or the moment it
was last shut down. A clock before CLOCK_FLOOR is plainly unset, and then the answer says so instead of
a time. Where systemd-timesyncd keeps the clock (the image does), it marks the first synchronisation since
boot in /run/systemd/timesync/synchronized; until then the answer gives the time with a warning that it
may be off. Elsewhere nothing is known either way (a kernel that no NTP client disciplines is not a
wrong clock), and nothing is said.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults

CLOCK_FLOOR = 2024  # a year before this on the clock: it has not been set since the Pi booted
TIMESYNC = Path("/run/systemd/timesync")  # systemd-timesyncd's runtime folder, there while it runs


def clock_synced(timesync: Path = TIMESYNC) -> bool | None:
    """Whether the clock has reached a time server since boot: timesyncd's flag; None where it does not run."""
    if not timesync.is_dir():
        return None
    return (timesync / "synchronized").exists()


_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_HOLIDAYS = {  # fixed dates only: Easter and the like move, and are left to the model
    "christmas": (12, 25),
    "christmas day": (12, 25),
    "xmas": (12, 25),
    "christmas eve": (12, 24),
    "new year": (1, 1),
    "new years": (1, 1),
    "new year's": (1, 1),
    "new year's day": (1, 1),
    "new years day": (1, 1),
    "new year's eve": (12, 31),
    "new years eve": (12, 31),
    "halloween": (10, 31),
    "valentine's day": (2, 14),
    "valentines day": (2, 14),
    "valentine's": (2, 14),
}
_OFFSETS = {
    "today": 0,
    "tomorrow": 1,
    "yesterday": -1,
    "the day after tomorrow": 2,
    "the day before yesterday": -2,
}

_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WEEKDAY = "|".join(_WEEKDAYS)
_HOLIDAY = "|".join(sorted((re.escape(h) for h in _HOLIDAYS), key=len, reverse=True))
_DATE = (
    rf"(?:the )?(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?(?: of)? (?P<m1>{_MONTH})(?: (?P<y1>\d{{4}}))?"
    rf"|(?P<m2>{_MONTH}) (?:the )?(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?(?: (?P<y2>\d{{4}}))?"
)
_TARGET = rf"(?P<target>(?:the next |next )?(?:{_HOLIDAY}|{_WEEKDAY})|{_DATE})"
_DAY = (
    r"(?P<day>today|tomorrow|yesterday|the day after tomorrow|the day before yesterday|"
    rf"(?:next|this|last|on|this coming|coming) (?:{_WEEKDAY}))"
)
_ZONE = r"time ?zone"

_PREFIX = (
    r"(?:(?:hey|hi|hello|ok|okay|so|and|oh|um|sorry)(?: \w+)? )?(?:please )?"
    r"(?:(?:can|could|would|will) you (?:please )?(?:tell|give|remind) me |(?:do|would) you (?:happen to )?know "
    r"|(?:tell|give|remind) me |i(?: want| need| would like|'d like) to know |any idea |quick question )?"
)
_SUFFIX = (
    r"(?: (?:now|right now|at the moment|currently|please|thanks|thank you|mate|then|again|exactly|here|"
    r"in your time ?zone|where you are))*"
)

_BOTH_TIME = r"(?:the )?(?:current )?time"
_BOTH_DAY = r"(?:the |today's )?(?:date|day)(?: today)?"
# (what, phrase): the phrase is the whole question; the first that fits wins (a group name once per phrase)
_PHRASES: tuple[tuple[str, str], ...] = (
    (  # both at once: "what's the time and the date?" got the date alone (a blind set)
        "now",
        rf"(?:what(?:'s| is| are) )?(?:{_BOTH_TIME} and {_BOTH_DAY}|{_BOTH_DAY} and {_BOTH_TIME})|"
        r"what (?:time and (?:what )?day|day and (?:what )?time|date and time|time and date) is it",
    ),
    (
        "zone",
        rf"what(?:'s| is) (?:your|the|this|the pi's) (?:current )?{_ZONE}(?: set)?|"
        rf"(?:what|which) {_ZONE} (?:are you (?:in|on|set to|using)|is (?:it|this|set|the pi (?:in|on|set to))|"
        rf"do you use)|(?:your|the) {_ZONE}",
    ),
    (
        "time",
        r"what(?:'s| is) the (?:current |exact )?time(?: of day)?|what time is it|what time it is|how late is it|"
        r"the (?:current |exact )?time|(?:current|exact) time|what hour is it|what o'?clock is it|"
        r"(?:have you |you |do you have )?got the time|do you have the time|(?:a |quick )?(?:time|clock) check",
    ),
    ("time", "time"),  # the whole message: "time?"; by meaning, a "time" anywhere says nothing
    (
        "until",
        rf"how (?:many|much) (?:more )?(?:days|weeks|sleeps)(?: are there| are left| is it| left| to go)? "
        rf"(?:until|till|til|to|before) {_TARGET}(?: is)?",
    ),
    ("until", rf"(?:how long|days) (?:is it |is there |do we have )?(?:until|till|til|to|before) {_TARGET}(?: is)?"),
    (
        "weekday_of",
        rf"(?:what|which) (?:day|weekday) (?:of the week )?(?:is|was|will be|falls on|does) {_TARGET}"
        r"(?: (?:fall on|on|be|this year|next year))?",
    ),
    (
        "weekend",
        rf"is (?:it|{_DAY}) (?:the |a )?(?P<weekend>weekend|week ?day|work ?day|working day)"
        r"(?P<either> or (?:the |a )?(?:weekend|week ?day|work ?day))?(?: yet| already| today)?",
    ),
    ("is_weekday", rf"is (?:it|{_DAY}) (?:a )?(?P<weekday>{_WEEKDAY})(?: today)?"),
    ("is_weekday", rf"is it (?:a )?(?P<weekday>{_WEEKDAY}) {_DAY}"),
    (
        "week",
        r"what week(?: number)? is (?:it|this)(?: today)?|what(?:'s| is) the (?:current )?week(?: number)?|"
        r"(?:what|which) week of the year is (?:it|this)|week number|"
        r"what(?:'s| is) (?:the|this) (?:current )?week of the year",
    ),
    ("year", r"(?:what|which) year (?:is (?:it|this)|it is|we are in|are we in)|what(?:'s| is) the (?:current )?year"),
    (
        "month",
        r"(?:what|which) month is (?:it|this)|what(?:'s| is) the (?:current )?month|(?:what|which) month are we in"
        r"|(?:remind me |tell me )?(?:what|which) month (?:we(?:'re| are) in|it is)"
        r"|(?:what|which) month and year (?:is it|it is|are we in|we(?:'re| are) in)",
    ),
    ("next_month", r"(?:what|which) month (?:comes |is )?next|what(?:'s| is) next month"),
    (
        "month_days",
        rf"how many days (?:are there |does it have |are )?in (?:this|the current|(?P<month>{_MONTH}))(?: month)?|"
        r"how many days (?:does|has) this month(?: have| got)?|how long is this month",
    ),
    ("leap", r"is (?:this|it|this year|(?P<leap_year>\d{4})) a leap year"),
    (
        "part_of_day",
        r"(?:is it|(?:would|do) you say (?:it(?:'s| is))|it(?:'s| is)|(?:is it )?still) (?:still )?(?:the )?"
        r"(?P<part>morning|afternoon|evening|night)"
        r"(?P<either>(?: or (?:is it |it's )?(?:the )?\w+| (?:the )?(?:morning|afternoon|evening|night))+)?"
        r"(?: yet| already| now| right now)?",
    ),
    (
        "past_mark",
        r"(?:is it|are we|have we (?:gone|got|gotten)|have we) (?P<rel>past|after|before|beyond|passed)"
        r" (?P<mark>midday|noon|midnight)(?: yet| already)?"
        r"(?: or (?:is it |are we )?(?:still )?(?:in )?(?:the )?(?:morning|afternoon|evening|night)(?: still)?)?",
    ),
    ("date", r"(?:what|which) day of the month is (?:it|today)"),
    (  # a request said as a need: "filling in a form, need the full date including the year" (a blind set)
        "date",
        r"(?:i )?need (?:to know )?(?:the |today's )?(?:full |whole |complete |exact |current |right )?date"
        r"(?: (?:including|with) the year| and year)?",
    ),
    ("date", rf"what(?:'s| is| was| will be) (?:the )?date(?: (?:it )?{_DAY})?"),
    ("date", rf"what(?:'s| is| was| will be)(?: the date)? {_DAY}(?:'s|s)? date"),
    ("date", rf"(?:what|which) date (?:is|was|will) it(?: be)?(?: {_DAY})?"),
    ("date", rf"(?:what|which) date (?:is|was|will be) {_DAY}"),
    ("date", rf"the date(?: {_DAY})?"),
    ("date", rf"what (?:the date|date it) is(?: {_DAY})?"),
    ("date", rf"{_DAY}(?:'s|s) date"),
    ("weekday", rf"what day (?:of the week )?(?:is it|is|was it|was|will it be|will be|it is)(?: {_DAY})?"),
    ("weekday", rf"(?:what|which) (?:day|weekday) (?:of the week )?(?:is|was|will be) {_DAY}"),
    ("weekday", rf"(?:which day (?:of the week )?is it|what(?:'s| is) the day|what weekday is it)(?: {_DAY})?"),
    ("weekday", rf"what day {_DAY} is"),
    ("weekday", rf"{_DAY} is (?:which|what) day(?: of the week)?"),
    ("weekday", rf"(?:what|which) day (?:are we|is it)(?: on)?(?: {_DAY})?"),
    ("weekday", rf"(?:what|which) day(?: of the week)? it is(?: {_DAY})?"),
)
_STRICT = [(what, re.compile(rf"{_PREFIX}(?:{phrase}){_SUFFIX}")) for what, phrase in _PHRASES]
# by meaning: the phrase anywhere, but ending the message or a clause of it ("what day is the bin collection" no)
_LOOSE = [(what, re.compile(rf"\b(?:{phrase}){_SUFFIX}(?= ,|$)")) for what, phrase in _PHRASES if phrase != "time"]
# by meaning, a message is turned down when it is about another place, a schedule, the sun or another time
_NOT_NOW = re.compile(
    r"\b(?:in|at|for) (?!the moment\b|here\b|the minute\b|the (?:morning|afternoon|evening)\b)(?!\d)[a-z]|"
    r"\b(?:remind|timer|alarm|turn|switch|schedule|sunset|sunrise|dawn|dusk|sun|ago|last time|next time|"
    r"machine|movie|film|song|does|do (?:they|you close|you open)|close|open|leave|arrive|start|end)\b"
)
# ... and when it names a day the phrase found did not take in ("the date ... in 3 days")
_OTHER_DAY = re.compile(r"\b(?:tomorrow|yesterday|next|last|ago|in (?:\d+|a|an|one|two|three) )")


@dataclass
class ClockTopic(TopicDefaults):
    """The clock topic (see the module docstring)."""

    kind: str = "time"
    overview: str = "now"  # the time, the date and the zone
    synced: Callable[[], bool | None] = clock_synced  # a seam for tests

    def match(self, text: str) -> Ask | None:
        """An Ask when the whole message is a question about the clock or the calendar."""
        said = _normalise(text)
        for what, pattern in _STRICT:
            found = pattern.fullmatch(said)
            if found:
                return Ask(self.kind, what, _details(found), text=text)
        return None

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The answer from ``facts.now()``; None when a message brought by meaning is not about now."""
        if not ask.what:
            found_ask = _loose(ask.text)
            if found_ask is None:
                return None
            ask = Ask(ask.kind, found_ask[0], found_ask[1], text=ask.text, by_meaning=ask.by_meaning)
        now = facts.now()
        zone = zone_name(now)
        basis = f"the Pi's clock ({zone})"
        if now.year < CLOCK_FLOOR:
            return Answer(
                f"My clock is not set (it reads {now.day} {now:%B %Y}), so I cannot tell you the time or the date: it "
                "sets itself once the Pi reaches a time server on the internet.",
                basis=f"{basis}, not set",
                kind=self.kind,
            )
        text = _say(ask, now, zone)
        if text is None:
            return None
        if self.synced() is False:
            text += " But my clock has not reached a time server since the Pi started, so it may be off."
            basis += ", not synchronised since boot"
        return Answer(text, basis=basis, kind=self.kind)


CLOCK = ClockTopic()


def zone_name(now: datetime) -> str:
    """The zone's IANA name when it has one ("Europe/Brussels"), else its abbreviation or UTC offset."""
    key = getattr(now.tzinfo, "key", None)
    if key:
        return str(key)
    name = now.tzname() or ""
    return name if name and name[0].isalpha() else _offset(now)


def _offset(now: datetime) -> str:
    offset = now.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _normalise(text: str, clauses: bool = False) -> str:
    """Lower case, straight quotes, no punctuation; ``clauses``: a comma or full stop kept as " , "."""
    text = text.lower().replace("’", "'").replace("‘", "'")
    text = re.sub(r"\bwhats\b", "what's", text)
    if clauses:
        text = re.sub(r"[?!.,;:]+(?=\s|$)", " , ", text).rstrip(" ,")
    text = re.sub(r"[?!.;:\"]+" if clauses else r"[?!.,;:\"]+", " ", text)
    return " ".join(text.split())


def _details(found: re.Match[str]) -> dict[str, str]:
    return {name: value for name, value in found.groupdict().items() if value}


def _loose(text: str) -> tuple[str, dict[str, str]] | None:
    said = _normalise(text, clauses=True)
    if _NOT_NOW.search(said):
        return None
    for what, pattern in _LOOSE:
        found = pattern.search(said)
        if found:
            details = _details(found)
            if not (details.keys() & {"day", "target"}) and _OTHER_DAY.search(said):
                return None
            return what, details
    return None


def _spoken(said: str) -> str:
    """ "next monday" as "Next Monday", "on friday" as "Friday", "today" as "Today"."""
    words = [w.title() if w in _WEEKDAYS else w for w in said.split() if not (w == "on" and len(said.split()) == 2)]
    text = " ".join(words)
    return text[0].upper() + text[1:]


_PARTS = ((5, "morning"), (12, "afternoon"), (18, "evening"), (22, "night"))


def _part_of_day(now: datetime) -> str:
    return next((name for start, name in reversed(_PARTS) if now.hour >= start), "night")


def _calendar(what: str, details: dict[str, str], now: datetime, zone: str) -> str:
    """The month after this, the days in a month, leap years, and the part of the day."""
    today = now.date()
    clock = f"{now:%H:%M} ({zone})"
    if what == "next_month":
        following = (today.replace(day=1) + timedelta(days=32)).replace(day=1)
        return f"Next month is {following:%B %Y}."
    if what == "month_days":
        month = _MONTHS[details["month"]] if "month" in details else today.month
        year = today.year if month >= today.month else today.year + 1  # a month named: the next one
        days = calendar.monthrange(year, month)[1]
        name = f"{calendar.month_name[month]} {year}"
        also = f" (29 in a leap year; the next is {_next_leap(year)})"
        return f"{name} has {days} days{also if days == 28 else ''}."
    if what == "leap":
        year = int(details.get("leap_year", today.year))
        if calendar.isleap(year):
            return f"Yes: {year} is a leap year (February has 29 days)."
        return f"No: {year} is not a leap year; the next is {_next_leap(year)}."
    part = _part_of_day(now)
    if what == "part_of_day":
        asked = details["part"]
        if "either" in details:
            return f"It's {part}: {clock}."
        return f"{'Yes' if asked == part else 'No'}: it's {part}, {clock}."
    after = now.hour * 60 + now.minute >= (12 * 60 if details["mark"] in ("midday", "noon") else 24 * 60)
    yes = after if details["rel"] in ("past", "after", "beyond", "passed") else not after
    return f"{'Yes' if yes else 'No'}: it's {clock}."


def _next_leap(year: int) -> int:
    return next(y for y in range(year, year + 9) if calendar.isleap(y))


def _day_of(said: str, today: date) -> date:
    """The day "tomorrow", "next Monday", "last Friday" names, from today."""
    if said in _OFFSETS:
        return today + timedelta(days=_OFFSETS[said])
    which, _, weekday = said.rpartition(" ")
    ahead = (_WEEKDAYS[weekday] - today.weekday()) % 7
    if which == "last":
        return today - timedelta(days=(today.weekday() - _WEEKDAYS[weekday]) % 7 or 7)
    if which == "next":
        return today + timedelta(days=ahead or 7)
    return today + timedelta(days=ahead)  # "this Monday", "on Monday": the coming one, today included


def _long(day: date) -> str:
    return f"{day:%A} {day.day} {day:%B %Y}"


def _say(ask: Ask, now: datetime, zone: str) -> str | None:
    today = now.date()
    details = ask.details
    day_word = details.get("day", "today")
    day = _day_of(day_word, today)
    tense = "was" if day < today else "is"
    subject = _spoken(day_word)
    if ask.what == "time":
        return f"It's {now:%H:%M} ({zone})."
    if ask.what == "now":
        return f"It's {now:%H:%M} on {_long(today)} ({zone})."
    if ask.what in ("date", "weekday"):
        named = day_word.rpartition(" ")[2] in _WEEKDAYS  # "Next Monday is 30 November 2026", not "Monday 30"
        return f"{subject} {tense} {f'{day.day} {day:%B %Y}' if named else _long(day)}."
    if ask.what == "zone":
        abbreviation = now.tzname() or ""
        also = f"{abbreviation}, " if abbreviation[:1].isalpha() and abbreviation != zone else ""
        return f"I'm on {zone} time ({also}{_offset(now)})."
    if ask.what == "year":
        return f"It's {now.year}."
    if ask.what == "month":
        return f"It's {now:%B %Y}."
    if ask.what in ("next_month", "month_days", "leap", "part_of_day", "past_mark"):
        return _calendar(ask.what, details, now, zone)
    if ask.what == "week":
        year, week, _ = today.isocalendar()
        return f"It's week {week} of {year} (ISO weeks, which start on Monday)."
    if ask.what == "weekend":
        return _weekend(details, subject[0].lower() + subject[1:], day, tense)
    if ask.what == "is_weekday":
        named = details["weekday"]
        yes = _WEEKDAYS[named] == day.weekday()
        return f"{'Yes' if yes else 'No'}: {subject[0].lower() + subject[1:]} {tense} {day:%A}."
    target = _target(details, today)
    if target is None:
        return None
    name, when = target
    dated = f"{when.day} {when:%B %Y}"
    if ask.what == "weekday_of":
        verb = "was" if when < today else "is"
        return f"{name + ' (' + dated + ')' if name else dated} {verb} a {when:%A}."
    days = (when - today).days
    said = name or dated
    also = f"{when:%A} {dated}" if name else f"{when:%A}"
    if days == 0:
        return f"{said} is today ({also})."
    if days == 1:
        return f"{said} is tomorrow ({also})."
    return f"{said} is in {days} days ({also})."


def _weekend(details: dict[str, str], said: str, day: date, tense: str) -> str:
    weekend = day.weekday() >= 5
    asked_weekend = details.get("weekend", "weekend") == "weekend"
    yes = weekend == asked_weekend
    if details.get("either"):  # "a weekday or the weekend?": no yes or no, the one it is
        return f"{'The weekend' if weekend else 'A weekday'}: {said} {tense} {day:%A}."
    if weekend or not asked_weekend:
        return f"{'Yes' if yes else 'No'}: {said} {tense} {day:%A}."
    until = 5 - day.weekday()
    starts = "tomorrow" if until == 1 else f"in {until} days"
    return f"No: {said} {tense} {day:%A}, a weekday; the weekend starts {starts}."


_NAMED = re.compile(rf"\b(?:on |for |at )?(?P<target>{_HOLIDAY}|{_DATE})\b")


def named_date(text: str, today: date) -> date | None:
    """The date a message names by a holiday or a day and month ("on Christmas Day", "the 3rd of January"),
    the next one from today; None when it names none (weekdays and "tomorrow" are not read here)."""
    found = _NAMED.search(_normalise(text))
    target = _target(_details(found), today) if found else None
    return target[1] if target else None


def _target(details: dict[str, str], today: date) -> tuple[str, date] | None:
    """The date a question names, and how to say it: the next one from today when it has no year."""
    target = details.get("target", "")
    plain = re.sub(r"^(?:the )?next ", "", target)
    if plain in _HOLIDAYS:
        month, day = _HOLIDAYS[plain]
        when = _next(today, month, day)
        name = "Christmas" if plain == "xmas" else plain.title().replace("'S", "'s")
        return (name, when) if when else None
    if plain in _WEEKDAYS:
        ahead = (_WEEKDAYS[plain] - today.weekday()) % 7 or 7
        return plain.title(), today + timedelta(days=ahead)
    month_word = details.get("m1") or details.get("m2")
    day_text = details.get("d1") or details.get("d2")
    year_text = details.get("y1") or details.get("y2")
    if not month_word or not day_text:
        return None
    month, day_number = _MONTHS[month_word], int(day_text)
    if year_text:
        try:
            when = date(int(year_text), month, day_number)
        except ValueError:
            return None
    else:
        found = _next(today, month, day_number)
        if found is None:
            return None
        when = found
    return "", when


def _next(today: date, month: int, day: int) -> date | None:
    """The next ``day month`` from today (today included); None when no year has it."""
    for year in range(today.year, today.year + 9):  # 29 February comes within eight years
        try:
            when = date(year, month, day)
        except ValueError:
            continue
        if when >= today:
            return when
    return None
