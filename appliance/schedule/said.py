"""A schedule said in words: "every weekday at 07:30", "tomorrow at 07:30 (Wed 25 Nov)".

The other way round from the schedule words (:mod:`appliance.understanding.schedule_words` reads "every
weekday at 7:30" into ``30 7 * * 1-5``): a schedule's text (:mod:`appliance.schedule.parse`) and a run's
time told to a person, by the schedule desk when it makes a job and by the grounded agenda when it lists
them. A leaf: it imports nothing of the appliance.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_DAY_FIELDS = {"1-5": "weekday", "mon-fri": "weekday", "0,6": "Saturday and Sunday", "6,0": "Saturday and Sunday"}
_UNITS = {"s": "second", "m": "minute", "h": "hour", "d": "day"}


def day_words(at: datetime, now: datetime) -> str:
    """ "today at 19:00 (Tue 24 Nov)", "tomorrow at 07:30 (Wed 25 Nov)", "on Fri 27 Nov at 07:30"."""
    day = f"{at:%a} {at.day} {at:%b}"
    if at.date() == now.date():
        return f"today at {at:%H:%M} ({day})"
    if at.date() == now.date() + timedelta(days=1):
        return f"tomorrow at {at:%H:%M} ({day})"
    return f"on {day} at {at:%H:%M}"


def every_words(schedule: str) -> str:
    """A repeating schedule said: "every weekday at 07:30", "every day at 09:00", "every 2 hours",
    "every day 30 minutes before sunset", "every 2 hours, on the hour"; a cron line no sentence fits is
    quoted, with what its fields are."""
    parts = schedule.lower().split()
    sun = re.fullmatch(r"(sunrise|sunset)(?:([+-])(\d+)([mh]))?", parts[0]) if len(parts) == 1 else None
    if sun is not None:
        if sun.group(2) is None:
            return f"every day at {sun.group(1)}"
        n, unit = int(sun.group(3)), "minute" if sun.group(4) == "m" else "hour"
        side = "before" if sun.group(2) == "-" else "after"
        return f"every day {n} {unit}{'' if n == 1 else 's'} {side} {sun.group(1)}"
    if parts[0] == "daily" and len(parts) == 2:
        return f"every day at {parts[1]}"
    if parts[0] == "every" and len(parts) == 2 and parts[1][:-1].isdigit() and parts[1][-1] in _UNITS:
        n, unit = int(parts[1][:-1]), _UNITS[parts[1][-1]]
        return f"every {unit}" if n == 1 else f"every {n} {unit}s"
    if len(parts) == 5 and parts[0].isdigit() and parts[1].isdigit() and parts[2] == parts[3] == "*":
        at = f"{int(parts[1]):02d}:{int(parts[0]):02d}"
        if parts[4] == "*":
            return f"every day at {at}"
        if parts[4] in _DAY_FIELDS:
            return f"every {_DAY_FIELDS[parts[4]]} at {at}"
        if parts[4].isdigit() and int(parts[4]) <= 7:
            return f"every {_DAYS[int(parts[4]) % 7]} at {at}"
    if len(parts) == 5 and parts[2] == parts[3] == parts[4] == "*":  # every day, by the clock
        minute, hour = parts[0], parts[1]
        if (step := re.fullmatch(r"\*/(\d+)", minute)) and hour == "*":
            n = int(step.group(1))
            return "every minute" if n == 1 else f"every {n} minutes"
        if minute.isdigit() and (hour == "*" or re.fullmatch(r"\*/\d+", hour)):
            n = 1 if hour == "*" else int(hour[2:])
            every = "every hour" if n == 1 else f"every {n} hours"
            return f"{every}, at {int(minute):02d} past" if int(minute) else f"{every}, on the hour"
        if minute.isdigit() and re.fullmatch(r"\d+(?:,\d+)+", hour):
            times = [f"{int(h):02d}:{int(minute):02d}" for h in hour.split(",")]
            return f"every day at {', '.join(times[:-1])} and {times[-1]}"
    return f'on the cron schedule "{schedule}" (minute, hour, day, month, weekday)'
