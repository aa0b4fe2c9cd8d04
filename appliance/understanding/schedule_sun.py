"""Sunset and sunrise in scheduling phrases: "turn the porch light on at sunset", "remind me 30 minutes
before sunrise tomorrow to ...", "every day an hour after sunset check the soil".

:mod:`appliance.understanding.schedule_times` finds the sun pieces ("at sunset", "30 minutes before sunrise");
here they become a schedule of ``appliance/schedule/parse.py``:

- a recurrence ("every day", "daily", "every evening") at the sun: the daily sun schedule ``sunset``,
  ``sunrise-30m``, which the scheduler computes each day for ``weather.latitude``/``longitude``;
- a device action with no day named ("turn the porch light on at sunset"): the same daily schedule. A
  light at sunset is a routine; the reply says "every day at sunset", so a person sees it;
- anything else (a reminder, a prompt, a day named: "tomorrow at sunset"): once, at that day's sun time
  computed now (``once 2026-11-28 16:43``), as "at 7" is once; with no place configured it cannot be
  computed, and the reply says what to set instead of guessing a time.

A recurrence on some weekdays only ("on weekdays at sunset") has no sun form: the model decides. So does a
sun piece beside a clock ("at 7 and at sunset"). An offset is at most 6 hours.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from appliance.config.weather import PLACE_FIX
from appliance.understanding.schedule_times import Piece, Unclear, days_of
from appliance.understanding.schedule_vocab import _ALL_DAYS

MAX_OFFSET_S = 6 * 3600  # as appliance.schedule.parse.SUN_OFFSET_MAX_S


def _form(event: str, offset_s: int) -> str:
    """The parse.py text: "sunset", "sunset-30m", "sunrise+1h"."""
    if offset_s == 0:
        return event
    size = abs(offset_s)
    amount = f"{size // 3600}h" if size % 3600 == 0 else f"{-(-size // 60)}m"
    return f"{event}{'-' if offset_s < 0 else '+'}{amount}"


def sun_timing(
    pieces: list[Piece], now: datetime, place: tuple[float, float] | None, *, daily: bool
) -> str | Unclear | None:
    """The schedule text of a run with a sun piece, a question, or None (a form left to the model).

    ``daily``: the action is a device's (no day named: every day); ``place``: latitude and longitude.
    """
    suns = [p for p in pieces if p.kind == "sun"]
    others = [p for p in pieces if p.kind != "sun"]
    if len(suns) != 1 or any(p.kind in ("time", "delta", "interval", "unknown") for p in others):
        return None
    for piece in others:
        if piece.kind in ("bad", "vague"):
            return Unclear(piece.question)
    sun = suns[0]
    if abs(sun.seconds) > MAX_OFFSET_S:
        return Unclear(f"At most 6 hours before or after {sun.sun}: when should it be?")
    every = [p for p in others if p.kind == "days"]
    days = [p for p in others if p.kind == "day"]
    if len(every) + len(days) > 1:
        return None
    if every:
        return _form(sun.sun, sun.seconds) if every[0].weekdays == _ALL_DAYS else None
    if not days and daily:
        return _form(sun.sun, sun.seconds)
    if place is None:
        return Unclear(f"I cannot tell when {sun.sun} is here: {PLACE_FIX}.")
    return _once(sun, days[0] if days else None, now, place)


def _once(sun: Piece, named: Piece | None, now: datetime, place: tuple[float, float]) -> str | Unclear:
    """Once, at the sun's time on the day named (or the next one), rounded up to the minute."""
    from appliance.weather.sun import Event, next_event, sun_day  # arithmetic only, loaded by sun phrases

    event: Event = "sunset" if sun.sun == "sunset" else "sunrise"
    offset = timedelta(seconds=sun.seconds)
    zone = now.tzinfo
    assert zone is not None
    if named is None or named.day is None:
        found = next_event(event, now, place[0], place[1], sun.seconds)
        if found is None:
            return Unclear(f"The sun does not {event[3:]} here for a year: when should it be?")
        return _once_text(found)
    dates = days_of(named.day, now.date())
    if isinstance(dates, Unclear):
        return dates
    for on in dates:
        at = sun_day(on, place[0], place[1], zone).at(event)
        if at is None:
            return Unclear(f"There is no {event} here {named.day.text}: when should it be?")
        if at + offset > now:
            return _once_text(at + offset)
    return Unclear(f"{event.title()} {named.day.text} has passed: when should it be?")


def _once_text(at: datetime) -> str:
    from appliance.weather.sun import minute_up

    return f"once {minute_up(at):%Y-%m-%d %H:%M}"  # rounded up as the sun's answers are: never before its time
