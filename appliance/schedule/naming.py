"""Jobs by name: a readable id for a job made in chat, and the jobs a few words point at.

An id is the job's main word and its time: "take the bins out" once at 19:30 is ``bins_1930``, the fan
at 07:30 on weekdays ``fan_0730_weekdays``; a second one gets ``_2``. Ids follow the one naming rule
of the config (lower-case letters, digits and ``_``), so ``picoagent cron pause bins_1930`` needs no
quoting. :func:`matches` is how "cancel the 7:30 fan" finds ``fan_0730_weekdays``: every word that is
not filler must be found in the job's id, schedule or what it does, a time in its run times.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import TYPE_CHECKING

from appliance.schedule.parse import CronSchedule, Interval, Once, Schedule, Startup, SunSchedule

if TYPE_CHECKING:
    from appliance.config import CronJob

MAX_ID = 40
# Words that say little about which job is meant: verbs of the request and filler.
_VERBS = {"take", "put", "call", "check", "get", "buy", "turn", "switch", "remember", "tell", "send", "bring"}
_FILLER = {"the", "a", "an", "to", "my", "me", "of", "for", "and", "in", "at", "on", "it", "up", "please", "that"}
_FIND_FILLER = _FILLER | {
    "job", "jobs", "schedule", "scheduled", "this", "one", "cancel", "delete", "remove", "stop", "o'clock", "oclock",
    "every", "each", "daily", "day", "days", "timer", "alarm", "all",
}  # fmt: skip
_REMIND = {"reminder", "reminders", "remind", "message", "messages"}
_TIME = re.compile(r"(\d{1,2})(?:[:.h](\d{2}))?(am|pm)?")
_WEEKDAYS = {"1-5": "weekdays", "mon-fri": "weekdays", "0,6": "weekends", "6,0": "weekends", "sat,sun": "weekends"}
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def run_times(schedule: Schedule) -> list[tuple[int, int]]:
    """The (hour, minute) pairs a job runs at, when it has a few fixed ones (none for intervals)."""
    if isinstance(schedule, Once):
        return [(schedule.wall.hour, schedule.wall.minute)]
    few = isinstance(schedule, CronSchedule) and len(schedule.hours) * len(schedule.minutes) <= 4
    if isinstance(schedule, CronSchedule) and few and not schedule.wildcard:
        return [(h, m) for h in schedule.hours for m in schedule.minutes]
    return []


def _days_word(schedule: CronSchedule) -> str:
    fields = schedule.text.split(" ")
    if len(fields) != 5 or fields[4] == "*":
        return ""
    if fields[4].lower() in _WEEKDAYS:
        return _WEEKDAYS[fields[4].lower()]
    if len(schedule.weekdays) == 1:
        return _DAY_NAMES[next(iter(schedule.weekdays))]
    return "days"


def when_slug(schedule: Schedule) -> str:
    """The time part of an id: "1930", "0730_weekdays", "every_2h", "hourly_15", "sunset_30m_before"."""
    if isinstance(schedule, Startup):
        return "startup"
    if isinstance(schedule, Interval):
        return "every_" + schedule.text.split(" ", 1)[1].replace(" ", "")
    if isinstance(schedule, SunSchedule):  # "sunset", "sunset_30m_before", "sunrise_1h_after"
        amount = schedule.text[len(schedule.event) + 1 :]
        return schedule.event + (f"_{amount}_{'before' if schedule.offset_s < 0 else 'after'}" if amount else "")
    times = run_times(schedule)
    if isinstance(schedule, Once):
        return f"{times[0][0]:02d}{times[0][1]:02d}"
    if isinstance(schedule, CronSchedule):
        if schedule.text.lower().startswith("hourly"):
            return "hourly_" + schedule.text.rsplit(":", 1)[1]
        if len(times) == 1:
            days = _days_word(schedule)
            return f"{times[0][0]:02d}{times[0][1]:02d}" + (f"_{days}" if days else "_daily")
    return "cron"


def main_word(job: CronJob) -> str:
    """The word that names what a job is about: its device, else the first telling word of its text."""
    if job.device:
        return job.device
    words = re.findall(r"[a-z0-9]+", (job.message or job.prompt or job.task).lower())
    telling = [w for w in words if w not in _VERBS and w not in _FILLER and len(w) > 2 and not w.isdigit()]
    return (telling or words or ["job"])[0][:16]


def new_job_id(job: CronJob, schedule: Schedule, taken: Collection[str]) -> str:
    """A short, readable id no other job has: "bins_1930", "fan_0730_weekdays", "plants_every_2h_2"."""
    base = re.sub(r"[^a-z0-9_]+", "_", f"{main_word(job)}_{when_slug(schedule)}".lower()).strip("_")[: MAX_ID - 3]
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}_{n}"
    return candidate


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _time_of(word: str) -> tuple[int, int | None] | None:
    match = _TIME.fullmatch(word)
    if match is None or (match.group(2) is None and match.group(3) is None and len(word) > 2):
        return None
    hour, minute = int(match.group(1)), match.group(2)
    if match.group(3) == "pm" and hour < 12:
        hour += 12
    elif match.group(3) == "am" and hour == 12:
        hour = 0
    if hour > 23:
        return None
    return hour, None if minute is None else int(minute)


def matches(words: str, job: CronJob, schedule: Schedule) -> bool:
    """Whether every telling word of ``words`` points at this job ("7:30 fan", "bins reminder")."""
    text = f"{job.id} {job.schedule} {job.device} {job.value} {job.message} {job.prompt} {job.task}".lower()
    vocabulary = {_singular(w) for w in re.findall(r"[a-z0-9]+", text.replace("_", " "))}
    if isinstance(schedule, CronSchedule):
        vocabulary.add(_days_word(schedule))
    times = run_times(schedule)
    found_any = False
    for raw in re.findall(r"[a-z0-9:.']+", words.lower().replace("_", " ")):
        word = raw.strip(".'")
        if not word or word in _FIND_FILLER:
            continue
        found_any = True
        if word in _REMIND:
            if not job.message:
                return False
            continue
        when = _time_of(word)
        if when is not None:
            hour, minute = when
            hours = {hour, hour + 12} if hour < 12 and not raw.endswith(("am", "pm")) else {hour}
            if not any(h in hours and (minute is None or m == minute) for h, m in times):
                return False
            continue
        if _singular(word) not in vocabulary:
            return False
    return found_any
