"""What every grounded answer is made of: the facts it may use, the answer and what it is based on, a topic.

A *topic* is one class of question the appliance can answer from what it knows, without the model: the
time, itself, its devices, the Pi's health, the conversation, its memory, its schedules, arithmetic, the
weather. Each topic is a module with an object that has:

- ``kind``: its name ("time", "arithmetic", ...), shown in the record's reason and in tests;
- ``examples``: phrasings for the meaning matcher (:mod:`appliance.grounded.desk`), a dozen or so, kept as
  data in ``examples.yaml`` beside this module under the topic's kind (loaded once, when first asked);
- ``match(text)``: the words rule: an :class:`Ask` when the message is surely for this topic, else None
  (no model, no embedding: a few regular expressions; "what time is it" yes, "what time does the bakery
  close" no);
- ``answer(ask, facts)``: the :class:`Answer`, from the facts only, or None when, on a closer look, it is
  not for this topic after all (the message then goes on to the model);
- ``overview`` and ``unsure``: what it says to a question by meaning that is about it but that it cannot
  answer exactly, when the model may not be trusted with it (:mod:`appliance.grounded.desk`): its general
  answer (the ``what`` of an :class:`Ask`: the clock's "now" is the time and the date), or, with no
  overview, one honest sentence ("I could not read a sum in that: ...").

The honesty rule: an answer says only what the facts hold, names what it is based on (``basis``), and
when the facts do not hold it (no weather source, nothing remembered) says so plainly: never a guess.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from appliance.config import Config
    from appliance.hardware.devices import DeviceRegistry
    from appliance.memory.db import Database
    from appliance.memory.keeper import MemoryKeeper
    from appliance.tasks.store import TaskStore
    from appliance.tools.scheduling import CronDesk


def said(text: str) -> str:
    """A message as the words rules read it: lower case, one space, curly quotes straight, no ? ! or end stop."""
    return " ".join(text.lower().replace("’", "'").replace("?", " ").replace("!", " ").split()).strip(" .")


_COURTESIES = (
    "hey", "hi", "hiya", "hello", "yo", "oi", "oh", "ok", "okay", "so", "um", "well", "right", "and", "sorry",
    "excuse me", "pardon me", "sorry to bother you", "sorry to bother", "quick one", "quick question", "real quick",
    "one more thing", "i was wondering", "just wondering", "please", "go on then", "go on", "by the way", "btw",
    "out of curiosity", "just curious", "good morning", "good afternoon", "good evening", "good day",
    "would you be so kind as to", "would you mind", "could you kindly", "kindly", "pico",
    "bro", "bruh", "dude", "mate", "man", "fam", "hang on", "wait", "hold on", "erm", "hmm", "ah",
)  # fmt: skip
_COURTESY = re.compile(
    r"^(?:(?:" + "|".join(sorted(_COURTESIES, key=len, reverse=True)) + r")(?: there)?\b[ ,:;.!-]*)+"
)
_GREETING = re.compile(r"^(?:hey|hi|hiya|hello|ok|okay|oi|yo|dear)\s+\w+\s*,\s*", re.IGNORECASE)  # "hey Pico, ..."
_THANKS = re.compile(
    r"(?:[ ,.]+(?:please|thanks|thank you|cheers|if you know|do you know|again|mate|according to you|in your opinion"
    r"|do you think|do you reckon|if you can|for me|lol|haha|thank you so much|many thanks))+[ ?.!]*$"
)
# chat spellings, as whole words: "wat timezone r u set to" is "what timezone are you set to"
_SLANG = {
    "r": "are", "u": "you", "ur": "your", "wat": "what", "wot": "what", "wht": "what", "whats": "what's",
    "wats": "what's", "wots": "what's", "rn": "right now", "atm": "at the moment",
    "hows": "how's", "wheres": "where's", "whens": "when's", "whos": "who's", "pls": "please", "plz": "please",
    "plse": "please", "thx": "thanks", "ty": "thanks", "im": "i'm", "dont": "don't", "cant": "can't",
    "doesnt": "doesn't", "isnt": "isn't", "wanna": "want to", "gimme": "give me", "tmrw": "tomorrow",
    "tmr": "tomorrow", "2day": "today", "2morrow": "tomorrow", "b4": "before", "abt": "about",
}  # fmt: skip
_SLANG_WORD = re.compile(r"\b(?:" + "|".join(sorted(_SLANG, key=len, reverse=True)) + r")\b", re.IGNORECASE)
_SYMBOLS = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f\u200d]+")  # emoji and pictographs


def plain(text: str) -> str:
    """A message as its question: chat spellings written out and emoji dropped ("r u chatgpt 🙂" is "are you
    chatgpt"), without the courtesy around it ("sorry to bother you, have you got the time?" is "have you got
    the time?"); "" when it is courtesy only."""
    core = _SYMBOLS.sub(" ", text.replace("’", "'"))
    core = _SLANG_WORD.sub(lambda found: _SLANG[found.group(0).lower()], core)
    core = _GREETING.sub("", " ".join(core.split()))
    found = _COURTESY.match(core.lower())
    return _THANKS.sub("", core[found.end() :] if found else core).strip()


@dataclass(frozen=True)
class Ask:
    """A message a topic's words rule took: the topic's kind, what it asks for, and its details."""

    kind: str
    what: str = ""  # the topic's own sub-question: "time", "date", "weekday", "rain", "sunset", ...
    details: dict[str, Any] = field(default_factory=dict)
    text: str = ""  # the message as said
    by_meaning: bool = False  # matched by meaning (the embedding), not by the words rule
    near: bool = False  # by meaning, near the topic but no paraphrase of its examples (desk.NEAR..MEANING)


@dataclass(frozen=True)
class Answer:
    """A grounded answer: the text a person reads and what it is based on."""

    text: str
    basis: str  # "the Pi's clock (Europe/Brussels)", "the device registry", "Open-Meteo, fetched 10:02"
    kind: str
    buttons: tuple[str, ...] = ()  # answers to tap, as the schedule desk's "which one?" offers


@dataclass
class Facts:
    """What a grounded answer may draw on. Any part may be None where the caller has none (a test, the CLI)."""

    config: Config
    now: Callable[[], datetime]  # aware, in the appliance's time zone (scheduler.timezone, else the system's)
    session: str = ""  # "web:abc": the conversation asked in
    person: bool = True  # False: a channel whose senders are not people the Pi knows (a webhook, an MQTT topic)
    conversation: int | None = None  # its id in the database
    db: Database | None = None
    devices: DeviceRegistry | None = None
    cron: CronDesk | None = None
    tasks: TaskStore | None = None
    memory: MemoryKeeper | None = None
    model_name: str = ""  # the local model's name as shown to people
    cloud_allowed: bool = False
    tools: tuple[str, ...] = ()  # the tools the model may call here
    channels: tuple[str, ...] = ()  # the chat channels that are on ("telegram", "email", ...), in this order
    started_at: float = field(default_factory=time.time)  # when the appliance started (epoch seconds)
    weather: Any = None  # appliance.weather's forecast source, when configured
    workspace: Path | None = None  # the assistant's folder (SOUL.md, USER.md)


@functools.cache
def examples() -> dict[str, tuple[str, ...]]:
    """examples.yaml: each topic's phrasings for the meaning matcher, by its kind, in the order they are embedded
    (read when the meaning matcher first asks, not at import)."""
    import yaml

    raw = yaml.safe_load(Path(__file__).with_name("examples.yaml").read_text(encoding="utf-8"))
    return {kind: tuple(phrasings) for kind, phrasings in raw.items()}


class TopicDefaults:
    """What a topic has unless it says otherwise: no general answer, no honest sentence near it, its answer not
    tried near it, every reading of a message tried (not the whole message only), and its phrasings by meaning
    those of its kind in examples.yaml (none there: by its words rule only)."""

    kind: str
    overview: str = ""
    unsure: str = ""
    near_exact: bool = False
    whole: bool = False  # True: it takes a whole message only ("thanks"), never one clause of it

    @property
    def examples(self) -> tuple[str, ...]:
        """Its phrasings for the meaning matcher, from examples.yaml."""
        return examples().get(self.kind, ())


class Topic(Protocol):
    """One class of question answered from the facts (see the module docstring)."""

    kind: str
    overview: str  # the ``what`` of its general answer ("It's 21:04 on Friday ..."), "" when it has none
    unsure: str  # its honest sentence for a question near it that it cannot answer exactly
    near_exact: bool  # its answer reads the words again strictly (a sum, a keyword): tried near it too
    whole: bool  # it takes a whole message only, never one clause of it

    @property
    def examples(self) -> tuple[str, ...]:
        """Phrasings of its questions for the meaning matcher (examples.yaml)."""
        ...

    def match(self, text: str) -> Ask | None:
        """An Ask when the words say the message is surely for this topic, else None."""
        ...

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The answer from the facts; None: not for this topic after all."""
        ...
