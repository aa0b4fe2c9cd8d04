"""What a forecast says about a question, in one or two sentences: rain, cold, warmth, sun, the weather.

A question names a period (:func:`period`: now, today, tonight, tomorrow, the weekend, a weekday) and an
aspect (:data:`ASPECTS`). The sentence comes from the forecast's numbers only; a period the forecast does
not cover is said to be outside it, never guessed. Rain is "likely" at a chance of 50 % or 1 mm, "possible"
from 20 %, else not expected: the thresholds people use when they read a forecast app.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Literal

from appliance.weather.forecast import Forecast, sky, snowy, sunny, wet

Aspect = Literal["rain", "umbrella", "cold", "temperature", "sunny", "snow", "general"]
ASPECTS: tuple[Aspect, ...] = ("rain", "umbrella", "cold", "temperature", "sunny", "snow", "general")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
LIKELY, POSSIBLE = 50.0, 20.0  # percent chance of rain


@dataclass(frozen=True)
class Period:
    """A stretch of time a question is about: its words, its hours, and the whole days in it."""

    label: str  # "tomorrow", "tonight", "this weekend", "on Friday", "now"
    start: datetime
    end: datetime
    days: tuple[date, ...]  # the dates answered from the daily forecast (none for now and tonight)


def period(when: str, now: datetime) -> Period:
    """The period ``when`` names, in now's zone: "now", "today" (also ""), "tonight", "tomorrow", "weekend",
    "week" (the coming seven days), a weekday ("friday": the next one, today included), "+3" (in three days)."""
    today = now.date()
    zone = now.tzinfo

    def at(day: date, hour: int = 0) -> datetime:
        return datetime.combine(day, time(0), zone) + timedelta(hours=hour)

    if when == "now":
        return Period("now", now, now + timedelta(hours=1), ())
    if when == "tonight":
        return Period("tonight", max(now, at(today, 18)), at(today, 30), ())
    if when == "tomorrow":
        day = today + timedelta(days=1)
        return Period("tomorrow", at(day), at(day, 24), (day,))
    if when == "weekend":
        ahead = (5 - today.weekday()) % 7 if today.weekday() != 6 else 0
        saturday = today + timedelta(days=ahead)
        days: tuple[date, ...] = (saturday, saturday + timedelta(days=1)) if today.weekday() != 6 else (today,)
        return Period("this weekend", max(now, at(days[0])), at(days[-1], 24), days)
    if when == "week":
        days = tuple(today + timedelta(days=k) for k in range(7))
        return Period("the coming days", now, at(today, 24 * 7), days)
    if when.startswith("+") and when[1:].isdigit():  # "in 3 days"
        day = today + timedelta(days=int(when[1:]))
        return Period(f"on {day:%A %d %B}", at(day), at(day, 24), (day,))
    if when in WEEKDAYS:
        day = today + timedelta(days=(WEEKDAYS.index(when) - today.weekday()) % 7)
        label = "today" if day == today else f"on {when.title()}"
        return Period(label, max(now, at(day)), at(day, 24), (day,))
    return Period("today", now, at(today, 24), (today,))


def _rain(forecast: Forecast, span: Period) -> tuple[float | None, float | None, int | None]:
    """The highest chance of rain (percent), the amount (mm) and the wettest code of the period."""
    hours = forecast.hours_between(span.start, span.end)
    if hours:
        chances = [h.rain_chance for h in hours if h.rain_chance is not None]
        amounts = [h.rain_mm for h in hours if h.rain_mm is not None]
        codes = [h.code for h in hours if h.code is not None]
        code = max(codes, key=lambda c: (wet(c) or snowy(c), c)) if codes else None
        return (max(chances) if chances else None), (sum(amounts) if amounts else None), code
    days = [d for d in (forecast.day(on) for on in span.days) if d is not None]
    chances = [d.rain_chance for d in days if d.rain_chance is not None]
    amounts = [d.rain_mm for d in days if d.rain_mm is not None]
    codes = [d.code for d in days if d.code is not None]
    return (max(chances) if chances else None), (sum(amounts) if amounts else None), (max(codes) if codes else None)


def covered(forecast: Forecast, span: Period) -> bool:
    """Whether the forecast reaches the period (some of its hours, or each of its days)."""
    if span.label == "now":
        return forecast.current is not None or bool(forecast.hours_between(span.start - timedelta(hours=1), span.end))
    if forecast.hours_between(span.start, span.end):
        return True
    return bool(span.days) and all(forecast.day(on) is not None for on in span.days)


def _amount(mm: float | None) -> str:
    return "" if mm is None or mm < 0.1 else f", about {mm:.1f} mm"


def rain_sentence(forecast: Forecast, span: Period, place: str, *, umbrella: bool = False) -> str:
    """ "Rain is likely tomorrow in Ghent: up to 80 % chance, about 4.2 mm (light rain)." and the like."""
    chance, mm, code = _rain(forecast, span)
    where = f"{span.label} in {place}"
    if chance is None and mm is None:
        return f"The forecast for {where} gives no chance of rain, so I cannot say."
    shown = f"up to {chance:.0f} % chance" if chance is not None else "no chance given"
    kind = f" ({sky(code)})" if wet(code) or snowy(code) else ""
    if (chance or 0) >= LIKELY or (mm or 0) >= 1.0:
        lead = "Yes, take an umbrella: rain" if umbrella else "Rain"
        return f"{lead} is likely {where}: {shown}{_amount(mm)}{kind}{_whole_day(forecast, span, chance)}."
    if (chance or 0) >= POSSIBLE:
        lead = "Maybe: rain" if umbrella else "Rain"
        return f"{lead} is possible {where}: {shown}{_amount(mm)}{kind}{_whole_day(forecast, span, chance)}."
    lead = "You should not need one: no" if umbrella else "No"
    return f"{lead} rain expected {where} ({shown}{_amount(mm)}){_whole_day(forecast, span, chance)}."


def _whole_day(forecast: Forecast, span: Period, chance: float | None) -> str:
    """Late in the day the rest of it may be dry after a wet morning: the whole day's figures, when they differ."""
    day = forecast.day(span.days[0]) if span.label == "today" and len(span.days) == 1 else None
    if day is None or day.rain_chance is None or day.rain_chance == chance:
        return ""
    return f" (that is the rest of the day; the whole day: up to {day.rain_chance:.0f} % chance{_amount(day.rain_mm)})"


def _range(forecast: Forecast, span: Period) -> tuple[float | None, float | None]:
    hours = [h.temperature for h in forecast.hours_between(span.start, span.end) if h.temperature is not None]
    if span.days:
        days = [d for d in (forecast.day(on) for on in span.days) if d is not None]
        lows = [d.low for d in days if d.low is not None]
        highs = [d.high for d in days if d.high is not None]
        if lows and highs:
            return min(lows), max(highs)
    return (min(hours), max(hours)) if hours else (None, None)


def temperature_sentence(forecast: Forecast, span: Period, place: str, *, cold: bool = False) -> str:
    """ "Tonight in Ghent it gets down to 3 °C." / "Tomorrow in Ghent: from 2 °C to 9 °C, light rain." """
    if span.label == "now":
        return _now_sentence(forecast, place)
    low, high = _range(forecast, span)
    if low is None or high is None:
        return f"The forecast for {span.label} in {place} has no temperatures, so I cannot say."
    t = forecast.temperature
    if cold or span.label == "tonight":
        return f"{_cap(span.label)} in {place} it gets down to {t(low)} (at most {t(high)})."
    return f"{_cap(span.label)} in {place}: from {t(low)} to {t(high)}, {_sky_of(forecast, span)}."


def cold_verdict(forecast: Forecast, span: Period) -> str:
    """ "Yes: it will be freezing." for a yes/no question about the cold ("do I need a coat tonight?", "will it be
    cold?"), said before the figures it rests on: the twelfth blind set read "Tonight it gets down to -2 °C" as no
    answer to "do I need a coat?". "" when the forecast has no temperatures for the period."""
    low, high = _range(forecast, span)
    if low is None or high is None or not covered(forecast, span):
        return ""
    if "F" in forecast.unit:  # the thresholds are Celsius
        low, high = (low - 32) * 5 / 9, (high - 32) * 5 / 9
    if low <= 0:
        return "Yes: it will be freezing."
    if high < 12:
        return "Yes: it will be cold."
    if high < 18:
        return "Probably: it will be cool."
    return "No: it will be mild."


def _now_sentence(forecast: Forecast, place: str) -> str:
    now = forecast.current
    if now is None or now.temperature is None:
        return f"The forecast has no current temperature for {place}."
    return f"It is {forecast.temperature(now.temperature)} in {place} now ({sky(now.code)})."


def _sky_of(forecast: Forecast, span: Period) -> str:
    if len(span.days) == 1 and (day := forecast.day(span.days[0])) is not None:
        return sky(day.code)
    codes = [h.code for h in forecast.hours_between(span.start, span.end) if h.code is not None]
    return sky(max(codes)) if codes else "unknown weather"


def sunny_sentence(forecast: Forecast, span: Period, place: str) -> str:
    """ "Partly: this weekend in Ghent, Saturday mainly clear (4 to 11 °C), Sunday light rain (70 % chance)." """
    days = [d for d in (forecast.day(on) for on in span.days) if d is not None]
    if not days:
        return f"The forecast I have does not reach {span.label}."
    bright = [sunny(d.code) or d.code == 2 for d in days]
    lead = "Yes" if all(bright) else "Partly" if any(bright) else "No, not sunny"
    return f"{lead}: {span.label} in {place}, {_days_words(forecast, span)}."


def _days_words(forecast: Forecast, span: Period) -> str:
    """ "Saturday mainly clear (4 °C to 11 °C); Sunday light rain (3 °C to 8 °C), 70 % chance of rain"."""
    parts = []
    for day in (d for d in (forecast.day(on) for on in span.days) if d is not None):
        rain = f", {day.rain_chance:.0f} % chance of rain" if day.rain_chance is not None and wet(day.code) else ""
        temps = f" ({forecast.temperature(day.low)} to {forecast.temperature(day.high)})"
        parts.append(f"{day.on:%A} {sky(day.code)}{temps}{rain}")
    return "; ".join(parts)


def snow_sentence(forecast: Forecast, span: Period, place: str) -> str:
    """ "No snow expected tomorrow in Ghent (light rain)." or "Snow is forecast ..." """
    _, _, code = _rain(forecast, span)
    if snowy(code):
        return f"Snow is forecast {span.label} in {place} ({sky(code)})."
    return f"No snow expected {span.label} in {place} ({sky(code)})."


def general_sentence(forecast: Forecast, span: Period, place: str) -> str:
    """The weather of a period: sky, temperatures, rain, in one sentence (two for today: now, then the day)."""
    if span.label == "now":
        return _now_sentence(forecast, place)
    if len(span.days) > 1:
        return f"{_cap(span.label)} in {place}: {_days_words(forecast, span)}."
    low, high = _range(forecast, span)
    chance, mm, _ = _rain(forecast, span)
    temps = f"from {forecast.temperature(low)} to {forecast.temperature(high)}" if low is not None else ""
    rain = f"{chance:.0f} % chance of rain{_amount(mm)}" if chance is not None else ""
    body = ", ".join(p for p in (_sky_of(forecast, span), temps, rain) if p)
    lead = f"{_cap(span.label)} in {place}: {body}."
    if span.label == "today" and forecast.current is not None and forecast.current.temperature is not None:
        return f"{_now_sentence(forecast, place)} {lead}"
    return lead


def say(forecast: Forecast, aspect: Aspect, span: Period, place: str) -> str:
    """The sentence for one aspect of a period; that the forecast does not reach it, when it does not."""
    if not covered(forecast, span):
        return f"The forecast I have does not reach {span.label}: it covers {_reach(forecast)}."
    if aspect in ("rain", "umbrella"):
        return rain_sentence(forecast, span, place, umbrella=aspect == "umbrella")
    if aspect in ("cold", "temperature"):
        return temperature_sentence(forecast, span, place, cold=aspect == "cold")
    if aspect == "sunny":
        return sunny_sentence(forecast, span, place)
    if aspect == "snow":
        return snow_sentence(forecast, span, place)
    return general_sentence(forecast, span, place)


def _reach(forecast: Forecast) -> str:
    if forecast.days:
        return f"{forecast.days[0].on:%a %d %b} to {forecast.days[-1].on:%a %d %b}"
    return f"until {forecast.hours[-1].at:%a %d %b %H:%M}" if forecast.hours else "nothing"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
