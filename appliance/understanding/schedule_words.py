"""The scheduling fast path: "remind me at 7 to take the bins out" understood without a model.

Like the device intent fast path (``intent.py``): a message is lower-cased and split into words
(punctuation dropped, "7:30" and "2026-12-03" kept whole, contractions expanded) and must then match
one of the forms below *completely*; anything else returns None and the model, which has the same
abilities as tools, decides. A negation anywhere ("don't remind me at 7") returns None, and so does a
question ("what is scheduled at 7?", a "?" without "can you"), a story or the past ("I turned on the fan
at 7", "tell me what happened at 7"), a condition after the time ("turn on the fan at 7 if it is hot"),
two time expressions ("remind me at 7 to call Bob on Friday"), a time word left over once the time is
taken out ("remind me on Monday and Thursday at 8"), a time at the end that may belong to the words
before it ("the weather for tomorrow at 9", "a girl who wakes up every morning at 7"), and a day with
no time after an action ("tell me the weather tomorrow": the day is the subject). A message with none
of the words that can start a time, no "remind" and no "cancel" is turned away before any parsing.

Measured on an x86 server core (tests/bench/schedule_words.py; a Pi takes several times longer): a
message of the phrasing table 25 µs p50, a message with no trigger word 1 µs, the device and chat
messages of the intent bench 6 µs p50. The goal is 2 ms.

Grammar (``[x]`` optional, ``a|b`` alternatives; the time forms and their resolution are in
``schedule_times``)::

    message := [courtesy]* body [please|thanks|thank you]*     courtesy: please, hey, ok, can|could|would|will you
    body    := REMIND [WHEN] [to] THING [WHEN]     remind me at 7 to take the bins out, remind me to X tomorrow at 9
             | WHEN ACTION | ACTION WHEN           at 7 turn on the fan, turn the fan on every weekday at 7:30
             | ACTION' WHEN (and|then) ACTION''    check the soil every two hours and tell me when it is dry
             | CANCEL [the|my] WORDS               cancel the 7:30 fan, delete the reminder about the bins
             | stop reminding me [about|to] WORDS
    REMIND  := remind me|us | [set|add|create|make] [me] a reminder [for CLOCK]
    ACTION  := a device command the intent matcher takes whole, "set" only -> a device job
                   (turn the fan on, switch the porch light off, set the kitchen light to 40%)
             | a reading the matcher takes (tell me the living room temperature) -> a prompt job
             | PROMPTVERB ... with no device command joined by and|then -> a prompt job
                   (check, tell, give, show, report, summarise, read, look, measure, let me know, ...)
    CANCEL  := cancel | delete | remove | unschedule | stop    (WORDS must name a job: a job noun
               such as reminder or check, a clock, or a recurrence word; "stop the fan" is a device command)

    WHEN := [on] DAY [at] CLOCK | at CLOCK [on] DAY | at CLOCK+ | in DURATION
          | every|each DAYS [at] CLOCK+ | daily|everyday|nightly at CLOCK+ | on WEEKDAYs at CLOCK+
          | every DURATION | every hour|minute | every half hour | hourly
    DAY  := today | tomorrow [PART] | tonight | this PART | WEEKDAY [PART] | DATE | the ORDINAL
    DAYS := day | PART | weekday | weekend | WEEKDAY (and WEEKDAY)*        each optionally followed by PART
    CLOCK := 7 | 7:30 | 07:30 | 19.30 | 7pm | 7:15 am | seven [thirty] | half|quarter past|to 7 | noon | midnight
             [o'clock] [in the PART | at night]
    PART := morning | afternoon | evening | night

What it returns: :class:`ScheduleAsk` (a job to create: a message, a device action or a prompt), a
:class:`CancelAsk` (the words that name a job to remove), an :class:`Unclear` (a scheduling request it
will not guess, with the question to ask: "remind me later" -> "When should I remind you?", "every
morning" with an action and no time -> "At what time every morning?", "at 25:00", "on 31 February",
"every 0 minutes", a device the matcher asks about: "which light: porch or kitchen?"), or None.
A time and nothing else ("in 10 minutes") is None: it is most likely the answer to a question, which
the model reads with the conversation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Literal

from appliance.hardware.device_info import DeviceInfo
from appliance.understanding.intent import NEGATIONS, IntentMatcher
from appliance.understanding.schedule_times import Piece, Unclear, Words, find_when, timing
from appliance.understanding.schedule_vocab import CLOCK, STARTS, TIMEISH, VAGUE

__all__ = ["CancelAsk", "ScheduleAsk", "Unclear", "understand_schedule"]


@dataclass(frozen=True)
class ScheduleAsk:
    """A job to create from a message: what it does (one of message, device+value, prompt) and when."""

    schedule: str  # parse.py text: "once 2026-11-24 19:00", "daily 07:30", "30 7 * * 1-5", "every 2h"
    kind: Literal["message", "device", "prompt"]
    message: str = ""  # kind message: "take the bins out"
    device: str = ""  # kind device: the device name
    value: str = ""  # kind device: "on" | "off" | "40%"
    prompt: str = ""  # kind prompt: "check the soil and tell me when it is dry"

    def describe(self) -> str:
        """What the job does, to follow "I will": "remind you to take the bins out", "turn the fan on"."""
        if self.kind == "message":
            joint = "" if self.message.split(" ", 1)[0].lower() in ("about", "that", "of", "for") else "to "
            return f"remind you {joint}{self.message}"
        if self.kind == "device":
            name = self.device.replace("_", " ")
            return f"turn the {name} {self.value}" if self.value in ("on", "off") else f"set the {name} to {self.value}"
        return f'run "{self.prompt}"'


@dataclass(frozen=True)
class CancelAsk:
    """A job to remove, named by the words of the message: "7:30 fan" (the caller matches them with the jobs)."""

    words: str


# --- words ----------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|-?\d+(?:[.,]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)*|%|[^\s\w.,!?;:'\"()\[\]…-]"
)
_CONTRACTIONS = {"what's": ("what", "is"), "whats": ("what", "is"), "it's": ("it", "is"), "let's": ("let", "us")}
_REMIND_WORDS = ("remind", "reminder", "reminders", "reminding")
_CANCEL_VERBS = frozenset({"cancel", "delete", "remove", "unschedule", "stop"})
# Without one of these words a message is no schedule (the common case, kept cheap: one regex and a set).
_TRIGGERS = frozenset({*STARTS, *_REMIND_WORDS, *_CANCEL_VERBS})
_LETTERS = re.compile(r"[^\W\d_]+")


def _phrases(spec: str) -> tuple[Words, ...]:
    return tuple(tuple(phrase.split()) for phrase in spec.split("|"))


_REQUESTS = _phrases("can you|could you|would you|will you")
_COURTESY = sorted((*_phrases("please|pls|kindly|hey|ok|okay"), *_REQUESTS), key=len, reverse=True)
_CLOSINGS = _phrases("thank you|please|pls|thanks")
_QUESTIONS = frozenset(
    {
        *("what", "when", "where", "which", "who", "whom", "whose", "why", "how", "is", "are", "am", "was"),
        *("were", "do", "does", "did", "have", "has", "had", "should", "shall", "may", "might", "must"),
        *("can", "could", "would", "will"),
    }
)
_REMIND_LEADS = sorted(
    _phrases(
        "remind me|remind us|set a reminder|set me a reminder|add a reminder|create a reminder|make a reminder"
        "|set up a reminder|reminder"
    ),
    key=len,
    reverse=True,
)
_DEVICE_VERBS = frozenset(
    {
        *("turn", "switch", "flip", "shut", "power", "kill", "stop", "start", "set", "dim", "brighten", "toggle"),
        *("open", "close", "lock", "unlock", "activate", "deactivate", "enable", "disable"),
    }
)
_PROMPT_VERBS = frozenset(
    {
        *("check", "tell", "give", "send", "report", "summarise", "summarize", "show", "list", "look", "measure"),
        *("read", "notify", "write", "prepare", "draft", "research", "find", "search", "compare", "suggest"),
        *("recommend", "brief", "ask", "let"),
    }
)
# A story or a question about the past: "tell me what happened at 7" is no job.
_PAST = frozenset({"was", "were", "did", "had", "happened", "ago", "last", "earlier", "yesterday", "before"})
# A time right after one of these belongs to it ("the weather for tomorrow at 9"), not to the job.
_PREPOSITIONS = frozenset({"for", "about", "of", "from", "until", "till", "since", "by", "after", "before", "with"})
_PREPOSITIONS |= {"than", "to", "into", "like", "during"}
# A time after a clause with one of these may be the clause's ("a girl who wakes up every morning at 7").
_CLAUSES = frozenset({"who", "whom", "whose", "which", "where", "while", "whether", "about", "story"})
# Words that name a job in "cancel the ...", and the filler around them.
_JOB_NOUNS = frozenset(
    {"reminder", "reminders", "alarm", "alarms", "job", "jobs", "schedule", "timer", "routine", "check", "briefing"}
)
_RECURRENCE = frozenset({"daily", "morning", "evening", "night", "weekday", "weekdays", "weekend", "hourly", "every"})
_GENERIC = frozenset({"reminder", "reminders", "job", "jobs", "schedule", "scheduled", "alarm", "alarms", "timer"})
_FILLER = frozenset({"the", "my", "our", "a", "an", "that", "this", "about", "for", "of", "to", "at", "please"})
_EVERYTHING = frozenset({"all", "everything", "every", "each", "it", "them", "these", "those"})


def _tokens(text: str) -> tuple[Words, list[tuple[int, int]]]:
    """The message as lower-case words, with each word's span in ``text``."""
    lowered = text.lower().replace("’", "'").replace("‘", "'")
    matches = list(_TOKEN.finditer(lowered))
    if "'" not in lowered:  # no contraction to expand: the common case
        return tuple(m.group() for m in matches), [m.span() for m in matches]
    words: list[str] = []
    spans: list[tuple[int, int]] = []
    for match in matches:
        token, span = match.group(), match.span()
        if token in _CONTRACTIONS:
            parts: Words = _CONTRACTIONS[token]
        elif token.endswith("n't"):
            parts = (token, "not")
        elif token.endswith("'s"):
            parts = (token[:-2], "'s")
        else:
            parts = (token,)
        words.extend(parts)
        spans.extend([span] * len(parts))
    return tuple(words), spans


def _strip_courtesy(words: Words) -> tuple[int, int, bool]:
    """Where the body starts and ends once "please", "can you", "thanks"... are off; True for a request."""
    start, end, request = 0, len(words), False
    while start < end:
        prefix = next((p for p in _COURTESY if words[start : start + len(p)] == p), None)
        if prefix is None:
            break
        start += len(prefix)
        request = request or prefix in _REQUESTS
    while end > start:
        suffix = next((s for s in _CLOSINGS if end - len(s) > start and words[end - len(s) : end] == s), None)
        if suffix is None:
            break
        end -= len(suffix)
    return start, end, request


@lru_cache(maxsize=4)
def _matcher(devices: tuple[DeviceInfo, ...]) -> IntentMatcher:
    return IntentMatcher(devices)


def _timeish(words: Words) -> bool:
    """A word that says when, left in an action: part of the time was not understood."""
    return any(word in TIMEISH or CLOCK.fullmatch(word) for word in words)


# --- the entry point ------------------------------------------------------------------------------


def understand_schedule(
    text: str, now: datetime, devices: Sequence[DeviceInfo] | None = None, place: tuple[float, float] | None = None
) -> ScheduleAsk | CancelAsk | Unclear | None:
    """A job to create or cancel, a question to ask back, or None (not about a schedule, or not sure).

    ``now`` is aware, in the config's time zone; the schedule's wall-clock times are in that zone.
    ``place``: latitude and longitude, for "at sunset" said of a day (see ``schedule_sun``).
    """
    if now.tzinfo is None:
        raise ValueError("understand_schedule needs an aware now (with the config's time zone)")
    if _TRIGGERS.isdisjoint(_LETTERS.findall(text.lower())):
        return None
    all_words, all_spans = _tokens(text)
    if not all_words or not NEGATIONS.isdisjoint(all_words):
        return None
    start, end, request = _strip_courtesy(all_words)
    words, spans = all_words[start:end], all_spans[start:end]
    if not words or words[0] in _QUESTIONS or ("?" in text and not request):
        return None
    if words[0] in _CANCEL_VERBS:
        return _cancel(words, text[spans[0][0] : spans[-1][1]], _matcher(tuple(devices or ())))
    lead = next((p for p in _REMIND_LEADS if words[: len(p)] == p), None)
    if lead is not None and lead[-1] == "reminder" and words[len(lead) : len(lead) + 1] == ("for",):
        words = (*lead, "at", *words[len(lead) + 1 :])  # "set a reminder for 7": a time, if a clock follows
    runs = find_when(words)
    if not runs:
        if lead is not None and words[len(lead) : len(lead) + 1] in (("to",), ("that",)) and len(words) > len(lead) + 1:
            return Unclear("When should I remind you?")
        return None
    if len(runs) > 1:
        return None
    first, last, pieces = runs[0]
    when = _When(pieces, now, place)
    if lead is not None:
        return _remind(words, spans, text, (len(lead), first), (last, len(words)), when)
    if first == 0:  # "at 7 remind me to ..."
        lead = next((p for p in _REMIND_LEADS if words[last : last + len(p)] == p), None)
        if lead is not None:
            return _remind(words, spans, text, (last + len(lead), len(words)), (len(words), len(words)), when)
    return _act(words, spans, text, (0, first), (last, len(words)), when, _matcher(tuple(devices or ())))


@dataclass(frozen=True)
class _When:
    """The time expression of a message, with what resolving it needs."""

    pieces: list[Piece]
    now: datetime
    place: tuple[float, float] | None

    def schedule(self, *, device: bool = False) -> str | Unclear | None:
        """Its schedule text (sun pieces: schedule_sun, where a device action with no day is daily)."""
        if any(p.kind == "sun" for p in self.pieces):
            from appliance.understanding.schedule_sun import sun_timing

            return sun_timing(self.pieces, self.now, self.place, daily=device)
        return timing(self.pieces, self.now)


def _runs_text(text: str, spans: list[tuple[int, int]], runs: list[tuple[int, int]]) -> str:
    """The original text of word runs [start, end), joined by a space."""
    return " ".join(text[spans[s][0] : spans[e - 1][1]] for s, e in runs if e > s)


def _joined(words: Words, before: tuple[int, int], after: tuple[int, int]) -> bool:
    """An action around the time expression reads as one: the part after it starts with and|then, and
    a time at the end does not follow a preposition ("prepare for tomorrow at 9": whose time is it?)."""
    if before[0] == before[1]:
        return True
    if after[0] == after[1]:
        return words[before[1] - 1] not in _PREPOSITIONS
    return words[after[0]] in ("and", "then")


def _remind(
    words: Words, spans: list[tuple[int, int]], text: str, before: tuple[int, int], after: tuple[int, int], when: _When
) -> ScheduleAsk | Unclear | None:
    """REMIND [WHEN] [to] THING [WHEN]: a message job."""
    if not _joined(words, before, after):
        return None
    runs = [r for r in (before, after) if r[1] > r[0]]
    if runs and words[runs[0][0]] == "to":
        runs[0] = (runs[0][0] + 1, runs[0][1])
    thing = tuple(w for s, e in runs for w in words[s:e])
    schedule = when.schedule()
    if schedule is None or _timeish(thing):
        return None
    if any(p.question == VAGUE for p in when.pieces):
        return Unclear("When should I remind you?")
    if isinstance(schedule, Unclear):
        return schedule
    if not thing:
        return Unclear("What should I remind you of?")
    return ScheduleAsk(schedule, "message", message=_runs_text(text, spans, runs))


def _act(
    words: Words,
    spans: list[tuple[int, int]],
    text: str,
    before: tuple[int, int],
    after: tuple[int, int],
    when: _When,
    matcher: IntentMatcher,
) -> ScheduleAsk | Unclear | None:
    """WHEN ACTION | ACTION WHEN | ACTION WHEN and ACTION: a device job or a prompt job."""
    action = words[before[0] : before[1]] + words[after[0] : after[1]]
    if not action or not _joined(words, before, after) or _timeish(action) or not _PAST.isdisjoint(action):
        return None
    if not any(p.kind in ("time", "delta", "interval", "days", "bad", "sun") for p in when.pieces):
        return None  # "tell me the weather tomorrow", "turn on the fan later": a day alone may be the subject
    action_text = _runs_text(text, spans, [before, after])
    intent = matcher.match(action_text)
    if intent is None:
        if after[0] == after[1] and not _CLAUSES.isdisjoint(action):
            return None  # "tell me a story about a girl who wakes up every morning at 7"
        if action[0] not in _PROMPT_VERBS or (action[0] == "let" and action[1:3] != ("me", "know")):
            return None  # a device verb the matcher did not take whole, a story, anything else: the model
        if _has_device_command(action, matcher) or (action[1:] in ((), ("me",), ("us",)) and action[0] != "brief"):
            return None  # "tell me at 7": tell what?
    elif intent.action not in ("set", "read", "ask") or (intent.action == "read" and action[0] not in _PROMPT_VERBS):
        return None  # "living room temperature at 7": now, or the one at 7? the model decides
    schedule = when.schedule(device=intent is not None and intent.action == "set")
    if schedule is None or isinstance(schedule, Unclear):
        return schedule
    if intent is None or intent.action == "read":
        return ScheduleAsk(schedule, "prompt", prompt=action_text)
    if intent.action == "ask":
        return Unclear(str(intent.question))
    value = intent.value
    level = ("on" if value else "off") if isinstance(value, bool) else f"{(value or 0) * 100:g}%"
    return ScheduleAsk(schedule, "device", device=str(intent.device), value=level)


def _has_device_command(action: Words, matcher: IntentMatcher) -> bool:
    """ "check the soil and turn on the fan": two actions, one a device command: the model decides."""
    segments: list[list[str]] = [[]]
    for word in action:
        if word in ("and", "then"):
            segments.append([])
        else:
            segments[-1].append(word)
    for segment in segments[1:]:
        if segment and segment[0] in _DEVICE_VERBS:
            return True
        found = matcher.match(" ".join(segment)) if segment else None
        if found is not None and found.action in ("set", "ask"):
            return True
    return False


def _cancel(words: Words, body: str, matcher: IntentMatcher) -> CancelAsk | None:
    """CANCEL [the|my] WORDS, or "stop reminding me about WORDS"."""
    if words[:3] == ("stop", "reminding", "me"):
        rest = words[3:]
        named = bool(rest)
    else:
        if words[0] == "stop" and matcher.match(body) is not None:
            return None  # "stop the fan": a device command
        rest = words[1:]
        named = any(w in _JOB_NOUNS or w in _RECURRENCE or CLOCK.fullmatch(w) for w in rest) or any(
            w.isdigit() and i + 1 < len(rest) and rest[i + 1] in ("am", "pm") for i, w in enumerate(rest)
        )
    if not named or not _EVERYTHING.isdisjoint(rest):
        return None  # "cancel it", "cancel all reminders", "cancel my dentist appointment": the model
    content = [w for w in rest if w not in _FILLER]
    specific = [w for w in content if w not in _GENERIC]
    return CancelAsk(" ".join(specific or content)) if content else None
