"""Reading a reply's numbers as a person would: in their units (°C, %, hPa, MB, clock times, durations).

Used by the everyday grader (tests/eval/everyday.py): a reply's typography is made plain first (curly
quotes, the minus sign, thousands separators: 86,400 is 86400), then the quantities of one unit are read.
"""

from __future__ import annotations

import re

_THOUSANDS = re.compile(r"(?<=\d)[,\u202f\u2009](?=\d{3}(?!\d))")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")


def normalise(text: str) -> str:
    """A reply as compared: typographic quotes and minus plain, thousands separators gone (86,400 -> 86400)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u2212", "-").replace("\u00a0", " ")
    return _THOUSANDS.sub("", text)


def numbers_in(text: str) -> list[float]:
    """Every number in the text, in order."""
    return [float(n) for n in _NUMBER.findall(normalise(text))]


_UNIT_RE = {
    "celsius": r"(-?\d+(?:\.\d+)?)\s*(?:°\s*(?!F)C?|º\s*C?|degrees?(?!\s*F)(?:\s*(?:celsius|centigrade))?|celsius|C\b)",
    "percent": r"(\d+(?:\.\d+)?)\s*(?:%|percent\b|per cent\b)",
    "hpa": r"(\d+(?:\.\d+)?)\s*(?:hPa|mbar|millibars?|hectopascals?)\b",
    "megabytes": r"(\d+(?:\.\d+)?)\s*(KiB|KB|kilobytes?|MiB|MB|megabytes?|GiB|GB|gigabytes?|TiB|TB|terabytes?)\b",
    "number": r"(?<![\w.])(-?\d+(?:\.\d+)?)",
}
_TO_MB = {"k": 1 / 1000, "m": 1.0, "g": 1000.0, "t": 1_000_000.0}
_CLOCK = re.compile(r"(?<![\d:.])(\d{1,2})(?:[:.h](\d{2}))?\s*(a\.?m\.?|p\.?m\.?|o'?clock)?(?![\d])", re.IGNORECASE)
_DURATION_PART = re.compile(
    r"(\d+(?:\.\d+)?)\s*(days?|d\b|hours?|hrs?|h\b|minutes?|mins?|m\b|seconds?|secs?|s\b)", re.IGNORECASE
)
_JUST_STARTED = re.compile(r"just (?:started|now|begun)|a few (?:seconds|moments)|less than a minute", re.I)


def quantities(text: str, unit: str) -> list[float]:
    """The quantities of one unit the text states (clock: minutes of the day; duration: minutes)."""
    text = normalise(text)
    if unit == "clock":
        found: list[float] = []
        for match in _CLOCK.finditer(text):
            hour, minute, suffix = int(match.group(1)), match.group(2), (match.group(3) or "").lower()
            if (minute is None and not suffix) or hour > 24 or (minute is not None and int(minute) > 59):
                continue
            mins = int(minute or 0)
            if suffix.startswith("p") and hour < 12:
                found.append((hour + 12) * 60 + mins)
            elif suffix.startswith("a"):
                found.append((hour % 12) * 60 + mins)
            else:  # 24 h, or 12 h without am/pm: either reading
                found.append(hour % 24 * 60 + mins)
                if hour < 12:
                    found.append((hour + 12) * 60 + mins)
        return found
    if unit == "duration":
        totals: list[float] = [0.5] if _JUST_STARTED.search(text) else []
        total, end = None, -1
        for match in _DURATION_PART.finditer(text):
            value, word = float(match.group(1)), match.group(2).lower()
            minutes = value * {"d": 1440, "h": 60, "m": 1, "s": 1 / 60}[word[0]]
            joined = total is not None and re.fullmatch(r"[\s,]*(?:and)?\s*", text[end : match.start()])
            total = (total or 0) + minutes if joined else minutes  # "2 hours and 5 minutes": one duration
            end = match.end()
            totals.append(total)
        return totals
    values = []
    for match in re.finditer(_UNIT_RE[unit], text, re.IGNORECASE):
        number = float(match.group(1))
        if unit == "megabytes":
            number *= _TO_MB[match.group(2)[0].lower()]
        values.append(number)
    return values
