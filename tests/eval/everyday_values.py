"""What the everyday set's placeholders stand for at a moment: the calendar and clock, the sun, a forecast.

Pure functions of a time (and a place, and a forecast's JSON), so the grader's expectations are computed
independently of the appliance code they check: the sun by the sunrise equation (Wikipedia, "Sunrise
equation", about a minute from NOAA's tables at mid latitudes), the forecast from Open-Meteo's own JSON
fields (``current.temperature_2m``, ``daily.temperature_2m_max`` ...), not from the appliance's weather
module. The fixture (tests/eval/everyday_home.py) adds what it reads from the running appliance.
"""

from __future__ import annotations

import calendar
import math
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from tests.eval.everyday import Fill

WEEKDAYS = tuple(calendar.day_name)  # Monday first
MONTHS = tuple(calendar.month_name)[1:]
NEVER = "(?!x)x"  # a pattern nothing matches: no value is wrong
SUN_NAMES = ("sunset", "tomorrow_sunrise", "tomorrow_sunset", "next_sunrise", "next_sunset", "day_length")
SUN_NAMES += ("sun_up", "sun_up_wrong")  # what sun_fills fills
FORECAST_NAMES = ("outside_temperature", "today_temperatures", "tonight_low", "tomorrow_high", "tomorrow_low")
FORECAST_NAMES += ("today_high", "tomorrow_rain", "tomorrow_rain_wrong", "today_rain", "today_rain_wrong")
FORECAST_NAMES += ("freeze_tonight", "freeze_tonight_wrong")  # what forecast_fills fills

INVENTED_TOOLS = r"<tool_call>|\"name\"\s*:|\"arguments\"\s*:|\b[a-z_]+\(\s*[a-z_]+\s*:\s*[a-z]+"
INVENTED_DEVICES = (
    r"smart ?phones?|\btablets?\b|laptops?|gaming consoles?|\bTVs?\b|television|thermostat|smart ?speakers?"
    r"|door ?locks?|\bcameras?\b|vacuum|washing machine|dishwasher|fridge|refrigerator|\boven\b|air ?con"
    r"|\bheaters?\b|\bblinds\b|garage door"
)
WEATHER_CLAIM = (
    r"(?<!not )(?<!n't )\b(?:will|going to) (?:rain|snow|be (?:sunny|cloudy|rainy|dry|warm|cold|hot|mild|windy|wet))\b"
    r"|\bit(?:'s| is| will be) (?:raining|snowing|sunny|cloudy|cold|warm|hot|chilly|freezing|dry|wet)\b"
    r"|-?\d+(?:\.\d+)?\s*(?:°|degrees)|\b\d+ ?% chance\b"
    r"|\byou(?: will|'ll)? need (?:an umbrella|a coat)|\b(?:take|bring) (?:an umbrella|a coat)\b"
)
_NOT = r"(?<!not )(?<!n't )(?<!no )"
RAIN_YES = (
    rf"^\W*yes\b|{_NOT}\b(?:will|going to|expected to|likely to) rain\b"
    rf"|{_NOT}\brain(?:fall)? is (?:expected|likely|forecast)"
    rf"|{_NOT}\bshowers\b|\btake an umbrella\b"
)
RAIN_NO = (
    r"^\W*no\b|\bno rain\b|\b(?:won't|will not|isn't going to|is not going to|not expected to|unlikely to) rain\b"
    r"|\bdry\b|\bno (?:need for|umbrella)\b|\bwon't need\b"
)
RAIN_MAYBE = r"\d+ ?%|\bchance\b|\bpossibl|\bmight\b|\bmay rain\b"
LOW_CHANCE = r"(?<![\d.])(?:\d|[12]\d) ?%"  # a stated chance that says no
HIGH_CHANCE = r"(?<![\d.])(?:[6-9]\d|100) ?%"  # and one that says yes
RAIN_AMOUNT = r"(?<![\d.])(?:[1-9]\d*(?:\.\d+)?|0\.[5-9]\d*) ?mm\b"


def _day_forms(day: date) -> str:
    """A date in the forms people write it: 27 November, November 27th, Nov 27, 2026-11-27, 27/11."""
    d, m, name, short = day.day, day.month, MONTHS[day.month - 1], MONTHS[day.month - 1][:3]
    ordinal = r"(?:st|nd|rd|th)?"
    return (
        rf"\b{d}{ordinal}(?: of)? (?:{name}|{short})\b|\b(?:{name}|{short})\.? (?:the )?{d}{ordinal}\b"
        rf"|\b{day:%Y-%m-%d}\b|(?<![\d/])0?{d}/0?{m}\b|\b0?{d}\.0?{m}\."
    )


def _words(items: Sequence[str]) -> str:
    return r"\b(?:" + "|".join(items) + r")\b"


def _time_forms(moments: Sequence[datetime]) -> str:
    """Every way to write the clock times of these moments: 14:05, 14.05, 14h05, 2:05 pm, 2:05."""
    forms = set()
    for moment in moments:
        h, m = moment.hour, moment.minute
        forms.add(rf"0?{h}[:.h]{m:02d}" if h < 10 else rf"{h}[:.h]{m:02d}")
        twelve = h % 12 or 12
        forms.add(rf"{twelve}[:.]{m:02d}")
    return "|".join(sorted(forms))


def minutes_between(start: datetime, end: datetime) -> list[datetime]:
    """Every whole minute from start's to end's (a reply may say either side of a minute's turn)."""
    moment = start.replace(second=0, microsecond=0)
    moments = []
    while moment <= end:
        moments.append(moment)
        moment += timedelta(minutes=1)
    return moments


def part_of_day(moment: datetime) -> list[str]:
    """morning / afternoon / evening / night for the clock, with both sides within 30 minutes of a boundary."""
    parts = {"night": (0, 5 * 60), "morning": (5 * 60, 12 * 60), "afternoon": (12 * 60, 18 * 60)}
    parts |= {"evening": (18 * 60, 22 * 60), "night ": (22 * 60, 24 * 60)}
    mins = moment.hour * 60 + moment.minute
    return sorted({name.strip() for name, (a, b) in parts.items() if a - 30 <= mins < b + 30})


def clock_fills(start: datetime, end: datetime) -> dict[str, Fill]:
    """The time and calendar placeholders for a question asked from ``start`` to ``end`` (aware, local)."""
    moments = minutes_between(start, end)
    times = _time_forms(moments)
    today = start.date()
    tomorrow, yesterday = today + timedelta(days=1), today - timedelta(days=1)
    weekday = WEEKDAYS[today.weekday()]
    zone_names = {start.tzname() or "", str(getattr(start.tzinfo, "key", ""))} - {""}
    offset = start.utcoffset() or timedelta(0)
    hours = int(offset.total_seconds() // 3600)
    sign = "+" if hours >= 0 else "-"
    zone_forms = [rf"\b{re.escape(n)}\b" for n in zone_names] + [rf"(?:UTC|GMT) ?\{sign} ?0?{abs(hours)}\b(?::00)?"]
    zone_forms += [re.escape(n.split("/")[-1].replace("_", " ")) for n in zone_names if "/" in n]
    if "CET" in zone_names or "CEST" in zone_names:
        zone_forms.append("Central European")
    christmas = date(today.year, 12, 25)
    if christmas < today:
        christmas = date(today.year + 1, 12, 25)
    next_month = MONTHS[today.month % 12]
    monday = today + timedelta(days=(7 - today.weekday()) or 7)
    leap = calendar.isleap(today.year)
    yes_leap, no_leap = r"^\W*yes\b|\bis a leap year", r"^\W*no\b|\bnot a leap year|\bisn't a leap year"
    noon = 12 * 60
    past = start.hour * 60 + start.minute >= noon
    weekend = today.weekday() >= 5
    return {
        "time": Fill(rf"(?<![\d:.])(?:{times})(?!\d)"),
        "other_time": Fill(rf"(?<![\d:.])(?!(?:{times})(?!\d))\d{{1,2}}[:h]\d{{2}}(?!\d)"),
        "timezone": Fill("|".join(zone_forms)),
        "other_timezone": Fill(
            rf"\b(?:UTC|GMT)\b(?!\s*[+-])|\b(?:EST|PST|EDT|PDT|BST)\b|America/|Asia/|Australia/"
            rf"|Europe/(?!{'|'.join(re.escape(n.split('/')[-1]) for n in zone_names if '/' in n) or 'x'})"
        ),
        "part_of_day": Fill(_words(part_of_day(start))),
        "past_noon": Fill(
            r"^\W*yes\b|\bit(?:'s| is) (?:past|after)\b|afternoon|evening"
            if past
            else r"^\W*no\b|\bnot yet\b|\bmorning\b|\bbefore\b"
        ),
        "date": Fill(_day_forms(today)),
        "weekday": Fill(_words([weekday])),
        "other_weekday": Fill(_words([w for w in WEEKDAYS if w != weekday])),
        "tomorrow_weekday": Fill(_words([WEEKDAYS[tomorrow.weekday()]])),
        "yesterday_weekday": Fill(_words([WEEKDAYS[yesterday.weekday()]])),
        "tomorrow_date": Fill(_day_forms(tomorrow)),
        "yesterday_date": Fill(_day_forms(yesterday)),
        "next_monday_date": Fill(_day_forms(monday) + "|" + _day_forms(monday + timedelta(days=7))),
        "month": Fill(_words([MONTHS[today.month - 1]])),
        "other_month": Fill(_words([m for m in MONTHS if m not in (MONTHS[today.month - 1], "May")])),
        "next_month": Fill(_words([next_month])),
        "year": Fill(rf"\b{today.year}\b"),
        "other_year": Fill(rf"\b(?!{today.year}\b)(?:19|20)\d\d\b"),
        "day_of_month": Fill(rf"\b(?:the )?{today.day}(?:st|nd|rd|th)\b"),
        "weekend_answer": Fill(
            r"\bit(?:'s| is) (?:the )?weekend\b|Saturday|Sunday"
            if weekend
            else r"\bit(?:'s| is) a (?:week ?day|working day)\b|\bnot (?:a |the )?weekend\b|\ba weekday\b"
        ),
        "days_to_christmas": Fill(rf"\b{(christmas - today).days}\b"),
        "iso_week": Fill(rf"\b{today.isocalendar()[1]}\b"),
        "days_in_month": Fill(rf"\b{calendar.monthrange(today.year, today.month)[1]}\b"),
        "leap_answer": Fill(yes_leap if leap else no_leap),
        "leap_wrong": Fill(
            no_leap if leap else rf"^\W*yes\b|\b(?:{today.year}|it|this) is a leap year|\bit's a leap year"
        ),
    }


# --- the sun ---------------------------------------------------------------------------------------------


def sun_times(day: date, latitude: float, longitude: float) -> tuple[datetime, datetime] | None:
    """Sunrise and sunset (UTC) on ``day`` by the sunrise equation; None in polar day or night."""
    rad = math.radians
    jd_noon = day.toordinal() - date(2000, 1, 1).toordinal() + 2451545.0
    n = jd_noon - 2451545.0 + 0.0008
    mean_solar = n - longitude / 360
    anomaly = (357.5291 + 0.98560028 * mean_solar) % 360
    centre = 1.9148 * math.sin(rad(anomaly)) + 0.02 * math.sin(rad(2 * anomaly)) + 0.0003 * math.sin(rad(3 * anomaly))
    ecliptic = (anomaly + centre + 180 + 102.9372) % 360
    transit = 2451545.0 + mean_solar + 0.0053 * math.sin(rad(anomaly)) - 0.0069 * math.sin(rad(2 * ecliptic))
    declination = math.asin(math.sin(rad(ecliptic)) * math.sin(rad(23.4397)))
    cos_hour = (math.sin(rad(-0.833)) - math.sin(rad(latitude)) * math.sin(declination)) / (
        math.cos(rad(latitude)) * math.cos(declination)
    )
    if not -1 <= cos_hour <= 1:
        return None
    hour_angle = math.degrees(math.acos(cos_hour))

    def moment(jd: float) -> datetime:
        return datetime.fromtimestamp((jd - 2440587.5) * 86400, UTC)

    return moment(transit - hour_angle / 360), moment(transit + hour_angle / 360)


def _clock(moment: datetime) -> Fill:
    return Fill(numbers=(moment.hour * 60 + moment.minute + moment.second / 60,))


def sun_fills(now: datetime, latitude: float, longitude: float) -> dict[str, Fill]:
    """The sun's placeholders at ``now`` (aware, local) for the place."""
    today, tomorrow = now.date(), now.date() + timedelta(days=1)
    first, second = sun_times(today, latitude, longitude), sun_times(tomorrow, latitude, longitude)
    if first is None or second is None:
        unknown = Fill()
        return {k: unknown for k in ("sunset", "tomorrow_sunrise", "tomorrow_sunset", "next_sunrise", "next_sunset")}
    zone = now.tzinfo
    rise, down = (t.astimezone(zone) for t in first)
    rise2, down2 = (t.astimezone(zone) for t in second)
    up = rise <= now < down
    yes, no = (
        r"^\W*yes\b|\bthe sun is up\b|\bit(?:'s| is) up\b",
        r"^\W*no\b|\bhas (?:already )?set\b|\bis down\b|\bnot up\b|\bstill dark\b",  # before sunrise: still dark
    )
    return {
        "sunset": _clock(down),
        "tomorrow_sunrise": _clock(rise2),
        "tomorrow_sunset": _clock(down2),
        "next_sunrise": Fill(numbers=_clock(rise).numbers + _clock(rise2).numbers),
        "next_sunset": Fill(numbers=_clock(down).numbers + _clock(down2).numbers),
        "day_length": Fill(numbers=((down - rise).total_seconds() / 60,)),
        "sun_up": Fill(yes if up else no),
        "sun_up_wrong": Fill(no if up else yes),
    }


# --- the forecast ------------------------------------------------------------------------------------------


def _yes_no(yes: bool | None, yes_says: Sequence[str], no_says: Sequence[str], maybe: str = "") -> tuple[Fill, Fill]:
    """The right words (or figures) and the wrong words; an uncertain forecast: either, or a chance, and
    nothing is wrong. ``yes_says``/``no_says``: the words first, then figures that say it too."""
    yes_words, no_words = yes_says[0], no_says[0]
    if yes is None:
        return Fill("|".join(filter(None, (*yes_says, *no_says, maybe)))), Fill(NEVER)
    if yes:
        return Fill("|".join(filter(None, yes_says))), Fill(no_words)
    return Fill("|".join(filter(None, no_says))), Fill(yes_words)


def _rain(sum_mm: float | None, chance: float | None) -> bool | None:
    if (sum_mm or 0) >= 0.5 or (chance or 0) >= 60:
        return True
    if (sum_mm or 0) < 0.1 and (chance is None or chance < 30):
        return False
    return None


def forecast_fills(payload: dict[str, Any], now: datetime) -> dict[str, Fill]:
    """The weather placeholders from an Open-Meteo forecast response (timezone set: local times)."""
    daily = payload.get("daily", {})
    days = list(daily.get("time", []))
    today, tomorrow = now.date().isoformat(), (now.date() + timedelta(days=1)).isoformat()

    def day_value(key: str, day: str) -> float | None:
        values = daily.get(key) or []
        return values[days.index(day)] if day in days and days.index(day) < len(values) else None

    current = payload.get("current", {}).get("temperature_2m")
    if current is None:
        current = payload.get("current_weather", {}).get("temperature")
    hourly = payload.get("hourly", {})
    night_start, night_end = f"{today}T18:00", f"{tomorrow}T08:00"
    night = [
        t
        for h, t in zip(hourly.get("time", []), hourly.get("temperature_2m", []), strict=False)
        if night_start <= h <= night_end and t is not None
    ]
    lows = [v for v in (min(night) if night else None, day_value("temperature_2m_min", tomorrow)) if v is not None]
    tonight = min(lows) if lows else None
    fills: dict[str, Fill] = {
        "outside_temperature": Fill(numbers=(current,)) if current is not None else Fill(),
        "today_temperatures": Fill(
            numbers=tuple(
                v
                for v in (current, day_value("temperature_2m_max", today), day_value("temperature_2m_min", today))
                if v is not None
            )
        ),
        "tonight_low": Fill(numbers=tuple(lows)) if lows else Fill(),
        "tomorrow_high": _numbers(day_value("temperature_2m_max", tomorrow)),
        "tomorrow_low": _numbers(day_value("temperature_2m_min", tomorrow)),
        "today_high": _numbers(day_value("temperature_2m_max", today)),
    }
    for name, day in (("tomorrow_rain", tomorrow), ("today_rain", today)):
        rain = _rain(day_value("precipitation_sum", day), day_value("precipitation_probability_max", day))
        fills[name], fills[f"{name}_wrong"] = _yes_no(
            rain, (RAIN_YES, HIGH_CHANCE, RAIN_AMOUNT), (RAIN_NO, LOW_CHANCE), RAIN_MAYBE
        )
    frost = None if tonight is None or 0 < tonight < 2 else tonight <= 0
    yes_frost = (
        r"^\W*yes\b|(?<!not )(?<!n't )\b(?:will|going to) freeze\b|\bfrost\b(?! is not| isn't)|below (?:zero|freezing)"
    )
    no_frost = (
        r"^\W*no\b|\b(?:won't|will not|isn't going to|not going to) freeze\b|\bno frost\b|above (?:zero|freezing)"
    )
    below = r"(?<![\d.])-\d+(?:\.\d+)?\s*(?:°|degrees)"
    above = r"(?<![\d.-])(?:[2-9]|[1-9]\d)(?:\.\d+)?\s*(?:°|degrees)"
    fills["freeze_tonight"], fills["freeze_tonight_wrong"] = _yes_no(frost, (yes_frost, below), (no_frost, above))
    return fills


def _numbers(value: float | None) -> Fill:
    return Fill(numbers=(value,)) if value is not None else Fill()
