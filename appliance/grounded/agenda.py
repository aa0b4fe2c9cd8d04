"""Its schedules and tasks: "what reminders do I have", "what's on tomorrow", "what are you working on".

From the scheduler's jobs (the config's, workspace/cron.yaml's and those made in chat) and the task
store, as they are now: the next run of each, in the appliance's time zone. An empty list says so.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from datetime import time as dtime
from typing import Any

from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults
from appliance.grounded.base import said as _said
from appliance.schedule.said import day_words, every_words

LISTED = 8  # jobs or tasks named in one answer; the rest are counted
RUNS_A_DAY = 48  # runs of one job listed for a day at most (an every-30-minutes job)

_JOBS = re.compile(
    r"^(?:what|which|any|do i have any|have i got any|are there any|list|show(?: me)?|tell me)(?: are)?"
    r" (?:my |the |our )?(?:upcoming |scheduled |pending |next )?"
    r"(?:reminders?|schedules?|alarms?|timers?|jobs|cron jobs|scheduled (?:jobs|things))(?: do i have| are there| set)?"
    r"(?: (?:today|tomorrow|this week|for today|for tomorrow))?$"
    r"|^what(?:'s| is) (?:on |scheduled |planned |happening )(?:for )?(today|tomorrow|this week|tonight)$"
    r"|^what(?:'s| is) (?:on )?my (?:schedule|agenda)(?: (?:for )?(today|tomorrow|this week))?$"
    r"|^(?:when|what)(?:'s| is) (?:my |the )?next (?:reminder|alarm|job|schedule)$"
    r"|^what (?:have you|did you|did i) (?:get )?(?:scheduled|set up|planned)\b"
    r"|^what reminders do i have\b|^what (?:did|have) i (?:ask|asked) you to remind me (?:about|of)$"
)
# "what's scheduled for the fan", "have I got a reminder to water the plants", "is anything planned for the porch light"
_ABOUT = re.compile(
    r"^(?:what(?:'s| is)|is (?:anything|something)|are (?:any )?(?:jobs|reminders)) (?:scheduled|planned|set)"
    r" (?:for|with) (?:the |my )?(.+)$"
    r"|^(?:have i got|do i have|is there|did i set) (?:a|any) (?:reminders?|alarms?|schedules?|jobs?)"
    r" (?:to|for|about) (?:the |my )?(.+)$"
    r"|^when (?:is|will) (?:the |my )?(.+?) (?:reminder|alarm|job)(?: be| go off| run)?$"
    r"|^what does (?:the |my )?(.+?) (?:reminder|alarm|job) (?:actually )?(?:say|do)\b.*$"
    r"|^how often (?:do|will) (?:i|we) (?:get|hear|have) (?:the |my |a |that )?(.+?) (?:reminder|alarm)s?$"
    r"|^(?:when|(?:on )?(?:which|what) days?(?: of the week)?|what time|how often) (?:do|will|should|am|must|shall) i"
    r" (?:supposed to |meant to |have to |need to |got to )?(.+)$"
    r"|^(?:at )?(?:when|(?:on )?(?:which|what) days?(?: of the week)?|what time|how often) (?:do|will|does|would) you"
    r" (?:remind|nag|tell|ping|alert|notify|warn|message) (?:me|us)(?: (?:about|of|to))? (?:the |my )?(.+)$"
    r"|^(?:when|(?:on )?(?:which|what) days?(?: of the week)?|what time|how often) (?:do|does|will|are|is)"
    r" (?:the |my )?(.+?) (?:get|gets|be|being) (\w+ed)$"
    r"|^(?:does|do|will) (?:the |my )?(.+?) (?:switch|turn|go|shut) (?:itself |themselves )?(?:on|off)"
    r"(?: (?:in|on|at|every|each|by|during|before|after|tonight|today|tomorrow|automatically|as well|too)\b.*)?$"
    r"|^(?:what time|when) (?:does|will|do) (?:the |my )?(.+?) (?:switch|turn|shut|go)"
    r" (?:itself |themselves )?(?:on|off)"
    r"(?: by itself| on its own| automatically)?$"
    r"|^when will (?:the |my )?(.+?) (?:be )?(?:switched|turned) (?:on|off)$"
)
# "how did task 3 go?", "is task 3 done?": one task, by its number
_TASK_ID = re.compile(
    r"^(?:how did|how is|how's|how has|what about|what happened (?:to|with)|is|has|what's|what is) task #?(?P<id>\d+)"
    r"(?: go| going| doing| done| finished| ended| got on| been going| the result| result| status)?$"
)
# words that are no subject: "the bins one" is the bins job
# Words a job may say otherwise: "the rubbish" is the job "take the bins out" (the thirteenth blind set)
_SAME = {
    "rubbish": ("bin",),
    "trash": ("bin",),
    "garbage": ("bin",),
    "refuse": ("bin",),
    "recycling": ("bin", "recyc"),
    "medicine": ("pill", "medic", "table"),
    "meds": ("pill", "medic", "table"),
    "tablets": ("pill", "table"),
    "plants": ("plant", "water"),
    "flowers": ("plant", "flowe"),
}


def _names(word: str, does: str) -> bool:
    """Whether a job's words (``does``) name ``word``, or what the same thing is called otherwise."""
    return any(stem[:5] in does for stem in (word, *_SAME.get(word, ())))


_KINDS = frozenset({"reminder", "reminders", "alarm", "alarms", "job", "jobs", "schedule", "timer", "one", "ones"})
_TASKS = re.compile(
    r"^what are you (?:working on|doing(?: now| right now)?|busy with)$"
    r"|^(?:what|which|any|list|show(?: me)?)(?: are)? (?:my |the |your )?(?:running |open |pending )?tasks\b"
    r"|^(?:how are|how is) (?:my |the |your )?tasks? (?:going|doing)\b"
    r"|^(?:is there |are there )?(?:anything|any(?:thing)? (?:tasks|items)|what(?:'s| is))"
    r" on (?:my|the) to-?do(?: list)?$"
    r"|^what(?:'s| is) (?:on )?my to-?do list$|^(?:show|list)(?: me)? my to-?dos?(?: list)?$"
)


def _names_all(words: list[str], job: dict[str, Any]) -> bool:
    """Whether a job's words (without its kind) name every one of ``words``."""
    does = re.sub(r"^\w+: ", "", str(job.get("does", ""))).lower()
    return all(_names(w, does) for w in words)


def _span(said: str, day: date | None) -> str:
    """The window a question named, as the answer says it: "for the rest of tonight", "tomorrow", "this week"."""
    if day is None:
        return "this week"
    if "tomorrow" in said:
        return "tomorrow"
    return "for the rest of tonight" if "tonight" in said else "for the rest of today"


def _day(said: str, today: date) -> date | None:
    if "tomorrow" in said:
        return today + timedelta(days=1)
    if "today" in said or "tonight" in said:
        return today
    return None


class Agenda(TopicDefaults):
    """Questions about the scheduled jobs and the tasks."""

    kind: str = "schedules"
    overview: str = "jobs"  # every job (on the day the words name, if any)

    def match(self, text: str) -> Ask | None:
        """An Ask for questions about schedules or tasks."""
        said = _said(text)
        if found := _TASK_ID.match(said):
            return Ask(self.kind, "tasks", {"id": int(found["id"])}, text=text)
        if _TASKS.match(said):
            return Ask(self.kind, "tasks", text=text)
        if _JOBS.match(said):
            week = "this week" in said
            return Ask(self.kind, "next" if "next" in said else "jobs", {"week": week, "said": said}, text=text)
        about = _ABOUT.match(said)
        subject = next((g for g in about.groups() if g), "") if about else ""
        if about and not re.match(r"(?:today|tomorrow|tonight|this week)$", subject):
            return Ask(self.kind, "about", {"words": subject, "strict": said.startswith("when ")}, text=text)
        return None

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The jobs (on a day when one is named) or the tasks, as they stand now."""
        if not facts.person:
            return Answer("I share the schedules and tasks only with the people I know.", "who asked", self.kind)
        if ask.what == "tasks" or (not ask.what and re.search(r"\btasks?\b", ask.text.lower())):
            return await self._tasks(facts, ask.details.get("id"))
        if facts.cron is None:
            return Answer("I can't see the schedules from here (the scheduler is not running).", "none", self.kind)
        now = facts.now()
        said = str(ask.details.get("said", _said(ask.text)))
        day = _day(said, now.date())
        jobs = [j for j in facts.cron.list_jobs() if j.get("next_run") and not j.get("paused")]
        lat, lon = facts.config.weather.latitude, facts.config.weather.longitude
        place = (lat, lon) if lat is not None and lon is not None else None
        if day is not None:
            upcoming = _runs(jobs, now, datetime.combine(day, dtime(), now.tzinfo), timedelta(days=1), place)
        elif ask.details.get("week"):
            # each job once, at its next run this week: a daily job's seven runs pushed a weekly one out of the
            # listing whenever its day had passed (the line says "every day" for the rest)
            firsts: dict[int, tuple[datetime, Any]] = {}
            for at, job in _runs(jobs, now, now, timedelta(days=7), place):
                firsts.setdefault(id(job), (at, job))
            upcoming = list(firsts.values())
        else:
            upcoming = sorted(((datetime.fromisoformat(j["next_run"]), j) for j in jobs), key=lambda pair: pair[0])
        if ask.what == "about":
            words = [w for w in re.findall(r"[a-z0-9]+", str(ask.details["words"])) if len(w) > 2 and w not in _KINDS]
            named = [w for w in words if not w.endswith("ing")] or words  # "putting the bins out": the bins
            every = upcoming
            upcoming = [(at, j) for at, j in upcoming if _names_all(named, j)]
            if not upcoming and (day is not None or ask.details.get("week")):
                # a job that names it but does not run that day: when it runs ("will the fan switch off tonight"
                # at 23:30, after its 23:00 run, said no job named the fan; CI asked then)
                later = [(datetime.fromisoformat(j["next_run"]), j) for j in jobs if _names_all(named, j)]
                if later:
                    later.sort(key=lambda pair: pair[0])
                    return Answer(
                        f"Nothing for “{ask.details['words']}” runs {_span(said, day)}: next, {_line(*later[0], now)}.",
                        "the scheduler's jobs, now",
                        self.kind,
                    )
            if not upcoming:
                if ask.details.get("strict"):
                    return None  # "when do I see the dentist": nothing scheduled says nothing of the rest of life
                # never a bare "No" on words no job has ("the rubbish" is "take the bins out"): what there is
                said = f"No reminder or schedule names “{ask.details['words']}”"
                if every:
                    listed = "; ".join(_line(at, job, now) for at, job in every[:LISTED])
                    return Answer(f"{said}. What is scheduled: {listed}.", "the scheduler's jobs, now", self.kind)
                return Answer(f"{said}: nothing is scheduled.", "the scheduler's jobs, now", self.kind)
        basis = "the scheduler's jobs, now"
        when = {now.date(): "today", now.date() + timedelta(days=1): "tomorrow"}.get(day, "") if day else ""
        if not upcoming:
            nothing = f"Nothing is scheduled {when}." if when else "You have no reminders or schedules."
            return Answer(nothing, basis, self.kind)
        if ask.what == "next":
            if re.search(r"\breminders?\b", said):  # a reminder is a message; a device switched is a schedule
                upcoming = [(a, j) for a, j in upcoming if str(j.get("does", "")).startswith("message:")] or upcoming
            at, job = upcoming[0]
            return Answer(f"The next is {_line(at, job, now)}.", basis, self.kind)
        if day is not None:  # a job that runs many times that day once, with how many: a 2-hourly one filled the list
            runs: dict[int, list[tuple[datetime, Any]]] = {}
            for at, job in upcoming:
                runs.setdefault(id(job), []).append((at, job))
            upcoming = [group[0] for group in runs.values()]
            times = {key: len(group) for key, group in runs.items()}
        lines = [
            _line(at, job, now) + (f" ({times[id(job)]} times {when})" if day and times[id(job)] > 1 and when else "")
            for at, job in upcoming[:LISTED]
        ]
        more = f" (and {len(upcoming) - LISTED} more: {_full_list(facts)})" if len(upcoming) > LISTED else ""
        head = f"Scheduled {when}" if when else f"{len(upcoming)} scheduled"
        return Answer(f"{head}: " + "; ".join(lines) + f".{more}", basis, self.kind)

    async def _tasks(self, facts: Facts, number: int | None = None) -> Answer:
        basis = "the task store, now"
        if facts.tasks is None or facts.db is None:
            return Answer("I have no task runner here, so no tasks.", basis, self.kind)
        if number is not None:
            return Answer(await self._task(facts, number), basis, self.kind)
        tasks = await facts.db.call(facts.tasks.list)
        open_ = [t for t in tasks if t.state in ("pending", "running", "paused")]
        if not open_:
            return Answer("I'm not working on any task now.", basis, self.kind)
        lines = [f"#{t.id} {t.goal[:80]} ({t.state}, step {t.steps_done} of {t.max_steps})" for t in open_[:LISTED]]
        return Answer(
            f"{len(open_)} open task{'s' if len(open_) != 1 else ''}: " + "; ".join(lines) + ".", basis, self.kind
        )

    @staticmethod
    async def _task(facts: Facts, number: int) -> str:
        """One task as it stands: its goal, its state, and its result or error when it ended."""
        from appliance.errors import PicoagentError

        assert facts.tasks is not None and facts.db is not None
        try:
            task = await facts.db.call(facts.tasks.get, number)
        except PicoagentError:
            return f"I have no task {number} (/tasks lists them)."
        said = f"Task {number} ({task.goal[:80]}) is {task.state}, step {task.steps_done} of {task.max_steps}"
        if task.state == "done":
            partial = " with a partial result" if task.partial else ""
            return f"Task {number} ({task.goal[:80]}) is done{partial}: {(task.result or '')[:400]}"
        if task.state == "error":
            return f"Task {number} ({task.goal[:80]}) failed: {(task.error or '')[:400]}"
        return said + "."


def _runs(
    jobs: list[dict[str, Any]], now: datetime, start: datetime, span: timedelta, place: tuple[float, float] | None
) -> list[tuple[datetime, Any]]:
    """Every run of ``jobs`` from ``start`` (not before now) for ``span``, in order (a daily job once a day); a sun
    job's at ``place`` (tomorrow's sunset is not today's: a README walk found it missing from "what's on tomorrow")."""
    from appliance.errors import PicoagentError
    from appliance.schedule.parse import SunSchedule, parse_schedule

    runs = []
    begin, end = max(start, now), start + span
    for job in jobs:
        try:
            schedule = parse_schedule(str(job.get("schedule", "")))
            if isinstance(schedule, SunSchedule) and place is not None:
                schedule = schedule.at_place(*place)
            at = schedule.next_after(begin - timedelta(seconds=1))
            for _ in range(RUNS_A_DAY):
                if at is None or at >= end:
                    break
                runs.append((at, job))
                at = schedule.next_after(at)
        except (PicoagentError, NotImplementedError, ValueError):  # a form that needs more (the sun): its next run
            at = datetime.fromisoformat(job["next_run"])
            if begin <= at < end:
                runs.append((at, job))
    return sorted(runs, key=lambda pair: pair[0])


def _full_list(facts: Facts) -> str:
    """Where the whole list is: /schedule in a chat channel; the command line where there is no /schedule (the
    terminal, the API, the web page: a README walk was sent to a /schedule the terminal does not have)."""
    channel = facts.session.partition(":")[0]
    return "`picoagent cron list`" if channel in ("", "terminal", "api", "web", "cron", "task") else "/schedule"


def _line(at: datetime, job: dict[str, Any], now: datetime) -> str:
    does = str(job.get("does", ""))
    kind, _, what = does.partition(": ")
    does = {"message": what, "prompt": f"ask me “{what}”", "task": f"start the task “{what}”"}.get(kind, does)
    repeat = "" if job.get("once") else f", {every_words(str(job.get('schedule', '')))}"
    return f"{does} {day_words(at.astimezone(now.tzinfo), now)}{repeat}"


AGENDA = Agenda()
