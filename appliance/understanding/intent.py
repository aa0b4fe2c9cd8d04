"""The intent fast path: plain commands and questions about named devices, understood without a model.

A message is lower-cased, split into words (punctuation dropped, ``_`` and ``-`` split words, contractions
expanded) and must then match one of the forms below *completely*: a word the grammar has no place for
sends the whole message to the model. That is what keeps times ("in 10 minutes"), conditions ("if it
gets hot"), conjunctions ("the fan and the light"), pronouns ("turn it on"), stories ("I turned on the
fan") and questions about actions ("should I turn on the fan?") off the fast path without listing them.
A negation anywhere (not, never, no, don't, ...) sends the message to the model before any parsing, and
so does an emoji or symbol ("fan on 🚫"): it is kept as a word the grammar has no place for.

Grammar (``[x]`` optional, ``a|b`` alternatives, CAPS defined further down)::

    message   := [courtesy]* body [closing]*
    courtesy  := please | pls | kindly | hey | ok | okay | (can | could | would | will) you
    closing   := please | pls | now | right now | immediately | again | for me | thanks | thank you

    -- set (value True/False; a level 0..1 only for dimmers)
    body := TURN on|off TARGET             turn on the porch light, power down the fan
          | TURN TARGET on|off             turn the porch lamp on, switch the fan off
          | TARGET on|off                  fan on, porch light off
          | kill | stop TARGET             off          start TARGET    on
          | LEVELVERB TARGET [brightness] to LEVEL       set / dim / brighten the kitchen light to 40%
          | turn [up|down] TARGET [up|down] to LEVEL     turn the kitchen light down to 20 percent
          | set the brightness of TARGET to LEVEL
          | [set] TARGET N (% | percent)                 kitchen light 40%
    TURN  := turn | switch | flip (on, off) | shut (off, down) | power (on, off, up, down)
    LEVEL := N% | N percent | N (a bare number only 0 or 11..100: "to 5" may mean 5 of 10)
           | half | full | max | maximum, each optionally followed by "brightness"

    -- read (quantity None: the device's state or all its readings)
    body := is|are TARGET [still] STATE              is the porch light on, is the fan running
          | [LEAD] [the] status|state of TARGET      status of the fan
          | [LEAD] TARGET ['s] status|state          fan status
          | check [on] | read | show me  TARGET      check the fan
          | how is TARGET
          | [LEAD] [the] [current] [PLACE ['s]] QUANTITY [in|of|at|for PLACE]
                                                     living room temperature, what's the humidity in the living room
          | how ADJECTIVE is [it] [in] [PLACE]       how warm is the living room, how wet is the soil
    STATE := on | off | running | lit | pressed | on or off | switched|turned on|off
    LEAD  := what is | what are | tell me | show me | give me | check | read
    QUANTITY  := temperature | temp | humidity | pressure | moisture | illuminance | lux | light level | ...
                 and every quantity a device declares ("level", "voltage")
    ADJECTIVE := warm | hot | cold | cool | chilly | humid | wet | dry | moist | bright | dark

    TARGET := [the|my|our] [ROOM] PHRASE [in [the] ROOM]
    PHRASE := a device's name (``_`` read as a space), one of its aliases, or the last word of either
              ("light" for porch_light), each also in the plural
    PLACE  := TARGET | [the] ROOM

Resolution: a name or alias beats a bare noun ("fan" the device over "fan" the last word of another
alias). The devices a phrase names are narrowed to those that can do the action (switch or dimmer for
set, any device but a sensor for on/off state, sensors measuring the quantity for a reading). One left:
that device. Several: an ``ask`` intent ("which light: porch or kitchen?") whose answer ``answer``
resolves. None: ``None``. A level on a switch, or "dim the kitchen light" without a number: ``None``.
A quantity a device does not measure is no reading of it ("how warm is the soil": ``None``); "wet" and
"moisture" read a sensor's "moisture", else its "level".

Decisions on borderline messages, all in the safe direction: a command with a question mark and no
"can you" is not a request ("turn on the fan?"); a bare device name ("fan") is too vague; two actions in
one message ("turn on the fan and the porch light") go to the model, which can call two tools; "why" and
"should I" questions go to the model; a room alone is not a target ("turn on the porch"); no typo
tolerance, since a corrected word could name another device.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from appliance.errors import ConfigError
from appliance.hardware.device_info import DeviceInfo

Action = Literal["set", "read", "ask", "confirm", "cancel", "history"]
Words = tuple[str, ...]

SETTABLE = frozenset({"switch", "dimmer"})
STATEFUL = frozenset({"switch", "dimmer", "input"})


@dataclass(frozen=True)
class Intent:
    """What a message asks for: set a device, read one, or ask which device was meant.

    The semantic stage adds ``confirm`` (a write it asks about first: ``question``, answered by yes or
    no), ``cancel`` (the answer was no) and ``history`` (what happened to a device: the events table).
    """

    action: Action
    device: str | None = None
    value: bool | float | None = None  # set: True/False, or a dimmer's level 0..1
    quantity: str | None = None  # read: the device's quantity, or None for its state / all readings
    question: str | None = None  # ask: the question to put to the user
    options: tuple[str, ...] = ()  # ask: the device names it chooses between
    then: Intent | None = None  # ask: the intent to carry out, device left out, once answered
    how: str = ""  # how it was understood when not by the rules: "by meaning (similarity 0.71)"

    def describe(self) -> str:
        """The intent in a few words, for logs and a reply record's reason: "set fan off"."""
        value = ("on" if self.value else "off") if isinstance(self.value, bool) else f"{(self.value or 0) * 100:g}%"
        if self.action == "set":
            return f"set {self.device} {value}"
        if self.action == "read":
            return f"read {self.device} {self.quantity}" if self.quantity else f"read {self.device}"
        if self.action in ("confirm", "cancel"):
            return f"{self.action} set {self.device} {value}"
        if self.action == "history":
            return f"history of {self.device}"
        return f"ask {self.question}"


# --- words ----------------------------------------------------------------------------------------

# A number, a word (apostrophes inside), "%", or any other symbol as a word of its own: an emoji or "&"
# must not vanish silently and leave a command behind. Plain punctuation is dropped.
_TOKEN = re.compile(r"-?\d+(?:[.,]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)*|%|[^\s\w.,!?;:'\"()\[\]…-]")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")  # ASCII only: int() and float() accept other digits too
_INTEGER = re.compile(r"[0-9]+")

_CONTRACTIONS: dict[str, Words] = {
    **{f"{word}'s": (word, "is") for word in ("what", "it", "how", "that", "there", "where", "who")},
    "whats": ("what", "is"),
    "let's": ("let", "us"),
}
# words_of() follows every "n't" with "not", so these cover "don't" too.
NEGATIONS = frozenset(
    {
        *("not", "no", "never", "nope", "nah", "nothing", "none", "neither", "nor", "cannot", "without", "dont"),
        *("doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "cant", "couldnt", "shouldnt", "wouldnt", "wont"),
        *("aint", "hasnt", "havent", "hadnt", "mustnt", "neednt"),
    }
)


def _phrases(spec: str) -> tuple[Words, ...]:
    """``"right now|please"`` as ``(("right", "now"), ("please",))``."""
    return tuple(tuple(phrase.split()) for phrase in spec.split("|"))


_REQUESTS = _phrases("can you|could you|would you|will you")
_COURTESY = (*_phrases("please|pls|kindly|hey|ok|okay"), *_REQUESTS)
_CLOSINGS = _phrases("right now|thank you|for me|please|pls|now|immediately|again|thanks")
_DETERMINERS = frozenset({"the", "my", "our"})

# --- set ------------------------------------------------------------------------------------------

_ON_OFF = {"on": True, "off": False}
_TURN: dict[str, dict[str, bool]] = {
    "turn": _ON_OFF,
    "switch": _ON_OFF,
    "flip": _ON_OFF,
    "shut": {"off": False, "down": False},
    "power": {**_ON_OFF, "up": True, "down": False},
}
_ONE_WORD_VERBS = {"kill": False, "stop": False, "start": True}
_LEVEL_VERBS = frozenset({"set", "dim", "brighten", "turn"})
_LEVEL_WORDS = {"half": 0.5, "full": 1.0, "max": 1.0, "maximum": 1.0}
_PERCENT = frozenset({"%", "percent"})
_BARE_LEVELS = frozenset({0, *range(11, 101)})

# --- read -----------------------------------------------------------------------------------------

_STATES = frozenset(_phrases("on|off|running|lit|pressed|on or off|switched on|switched off|turned on|turned off"))
_LEADS = _phrases("what is|what are|tell me|show me|give me|check|read")
_BARE_TARGET_LEADS = frozenset(_phrases("check|read|show me"))
_STATUS = frozenset({"status", "state"})
_PLACE_PREPOSITIONS = frozenset({"in", "of", "at", "for"})

# A quantity word → the quantity names a device may declare for it, best first; the first is its label.
_TEMPERATURE = ("temperature", "temp")
_HUMIDITY = ("humidity",)
_PRESSURE = ("pressure",)
_MOISTURE = ("moisture", "level")  # a soil probe usually reports its moisture as a "level"
_ILLUMINANCE = ("illuminance", "lux")
_QUANTITY_NOUNS: dict[Words, tuple[str, ...]] = {
    **dict.fromkeys(_phrases("temperature|temp"), _TEMPERATURE),
    **dict.fromkeys(_phrases("humidity|relative humidity"), _HUMIDITY),
    **dict.fromkeys(_phrases("pressure|air pressure|barometric pressure"), _PRESSURE),
    ("moisture",): _MOISTURE,
    **dict.fromkeys(_phrases("illuminance|lux|light level"), _ILLUMINANCE),
}
_QUANTITY_ADJECTIVES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("warm", "hot", "cold", "cool", "chilly"), _TEMPERATURE),
    "humid": _HUMIDITY,
    **dict.fromkeys(("wet", "dry", "moist"), _MOISTURE),
    **dict.fromkeys(("bright", "dark"), _ILLUMINANCE),
}


def words_of(text: str) -> Words:
    """The message as lower-case words: contractions expanded, possessive 's split off, punctuation dropped."""
    out: list[str] = []
    for token in _TOKEN.findall(text.lower().replace("’", "'").replace("‘", "'")):
        if token in _CONTRACTIONS:
            out.extend(_CONTRACTIONS[token])
        elif token.endswith("n't"):
            out.extend((token, "not"))
        elif token.endswith("'s"):
            out.extend((token[:-2], "'s"))
        else:
            out.append(token)
    return tuple(out)


def _plural(word: str) -> str:
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _by_edge_word(phrases: Iterable[Words], edge: int) -> dict[str, tuple[Words, ...]]:
    """Phrases keyed by their first (edge 0) or last (edge -1) word, longest first: one dict lookup per message."""
    table: dict[str, list[Words]] = {}
    for phrase in sorted(phrases, key=len, reverse=True):
        table.setdefault(phrase[edge], []).append(phrase)
    return {word: tuple(group) for word, group in table.items()}


def _strip_prefix(words: Words, table: dict[str, tuple[Words, ...]]) -> tuple[Words, Words | None]:
    for prefix in table.get(words[0], ()) if words else ():
        if words[: len(prefix)] == prefix:
            return words[len(prefix) :], prefix
    return words, None


def _strip_suffix(words: Words, table: dict[str, tuple[Words, ...]]) -> tuple[Words, Words | None]:
    for suffix in table.get(words[-1], ()) if words else ():
        if len(words) > len(suffix) and words[-len(suffix) :] == suffix:  # a closing alone is the message
            return words[: -len(suffix)], suffix
    return words, None


_COURTESY_TABLE = _by_edge_word(_COURTESY, 0)
_CLOSING_TABLE = _by_edge_word(_CLOSINGS, -1)
_LEAD_TABLE = _by_edge_word(_LEADS, 0)


def _level(words: Words) -> float | None:
    """A dimmer level 0..1 from the words after "to"; None when they are not exactly one level."""
    if words[-1:] == ("brightness",):
        words = words[:-1]
    if len(words) == 1 and words[0] in _LEVEL_WORDS:
        return _LEVEL_WORDS[words[0]]
    explicit = len(words) == 2 and words[1] in _PERCENT and _NUMBER.fullmatch(words[0]) is not None
    # A bare 1..10 may be a step on a scale of 10, so it needs "%"; a bare fraction may be 0..1 or a percent.
    bare = len(words) == 1 and _INTEGER.fullmatch(words[0]) is not None and int(words[0]) in _BARE_LEVELS
    if not (explicit or bare):
        return None
    percent = float(words[0])
    return round(percent / 100, 4) if percent <= 100 else None


def _join(labels: Sequence[str]) -> str:
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} or {labels[-1]}"


def _quantity_of(device: DeviceInfo, names: Sequence[str]) -> str | None:
    """The device's own name for a quantity, or None when it does not measure it."""
    if device.kind != "sensor":
        return None
    return next((name for name in names if name in device.quantities), None)


@dataclass(frozen=True)
class _Ref:
    """The devices a noun phrase names, and the noun to use when asking which one was meant."""

    devices: tuple[DeviceInfo, ...]
    noun: str


class IntentMatcher:
    """Understands plain commands and questions about a fixed set of devices; None means: ask the model."""

    def __init__(self, devices: Sequence[DeviceInfo]) -> None:
        self.devices = tuple(devices)
        self._by_name: dict[str, DeviceInfo] = {}
        self._exact: dict[Words, list[DeviceInfo]] = {}  # names and aliases
        self._nouns: dict[Words, list[DeviceInfo]] = {}  # their last words
        self._noun_label: dict[Words, str] = {}
        self._rooms: dict[Words, list[DeviceInfo]] = {}
        self._quantity_nouns = dict(_QUANTITY_NOUNS)
        room_words = {word for d in self.devices if d.room for word in d.room.lower().split()}
        for device in self.devices:
            if device.name in self._by_name:
                raise ConfigError(
                    f"two devices are named {device.name!r}", fix="give every device in the config its own name"
                )
            self._by_name[device.name] = device
            if device.room:
                self._rooms.setdefault(words_of(device.room), []).append(device)
            for phrase in (device.name, *device.aliases):
                words = words_of(phrase)
                if not words:
                    continue
                for key in (words, (*words[:-1], _plural(words[-1]))):
                    if device not in self._exact.get(key, ()):
                        self._exact.setdefault(key, []).append(device)
                # "room" is the last word of "living room", not a kind of device; "2" in "fan 2" is no noun.
                if words[-1].isalpha() and (words[-1] not in room_words or len(words) == 1):
                    for key in ((words[-1],), (_plural(words[-1]),)):
                        if device not in self._nouns.get(key, ()):
                            self._nouns.setdefault(key, []).append(device)
                        self._noun_label[key] = words[-1]
            for quantity in device.quantities:
                self._quantity_nouns.setdefault(words_of(quantity), (quantity,))
        self._quantity_table = _by_edge_word(self._quantity_nouns, 0)

    # --- entry points -----------------------------------------------------------------------------

    def match(self, text: str) -> Intent | None:
        """The intent of one message, or None when only the model should decide what it means."""
        words = words_of(text)
        if not words or not NEGATIONS.isdisjoint(words):
            return None
        words, request = self._strip_courtesy(words)
        if not words:
            return None
        found = self._read(words) or self._read_in_a_clause(text)
        if found is not None:
            return found
        if "?" in text and not request:
            return None  # "turn on the fan?" may be "should I...?"; only "can you ...?" is a request
        return self._set(words)

    def _read_in_a_clause(self, text: str) -> Intent | None:
        """A reading asked in one clause of a message, the rest a remark: "humidity in the living room pls, feels
        damp" (a blind set's: the remark kept the whole from being read). Reads only, and only when no other clause
        asks for one or acts: a command said beside something else is the model's to weigh."""
        parts = [p for p in re.split(r"[,;.!?]+\s+|\s+[-–—]\s+", text.strip()) if p.strip(" ,.;:!?")]
        if len(parts) < 2:
            return None
        reads = []
        for part in parts:
            words, _ = self._strip_courtesy(words_of(part))
            read = self._read(words) if words else None
            if read is None and words and self._set(words) is not None:
                return None
            reads += [read] if read is not None else []
        return reads[0] if len(reads) == 1 else None

    def answer(self, pending: Intent, text: str) -> Intent | None:
        """The intent once the user's reply picks exactly one option of an ``ask`` ("the porch one")."""
        if pending.action != "ask" or pending.then is None:
            return None
        words = words_of(text)
        if not words or not NEGATIONS.isdisjoint(words):
            return None
        words, _ = self._strip_courtesy(words)
        if words[-1:] == ("one",):
            words = words[:-1]
        if words[:1] == ("the",):
            words = words[1:]
        ref = self._target(words)
        named = (*(ref.devices if ref is not None else ()), *self._rooms.get(words, ()))
        picked = [d for d in pending.options if any(n.name == d for n in named)]
        if len(picked) != 1:
            return None
        device, then = self._by_name[picked[0]], pending.then
        if then.action == "set":
            if device.kind not in SETTABLE or (isinstance(then.value, float) and device.kind != "dimmer"):
                return None
            return Intent("set", device.name, then.value)
        if then.quantity is None:
            return Intent("read", device.name)
        quantity = _quantity_of(device, self._quantity_nouns.get((then.quantity,), (then.quantity,)))
        return Intent("read", device.name, quantity=quantity) if quantity else None

    # --- shared pieces ----------------------------------------------------------------------------

    @staticmethod
    def _strip_courtesy(words: Words) -> tuple[Words, bool]:
        """The message without "please", "can you", "thanks"...; True when it was phrased as a request."""
        request = False
        while True:
            words, prefix = _strip_prefix(words, _COURTESY_TABLE)
            if prefix is None:
                break
            request = request or prefix in _REQUESTS
        while True:
            words, suffix = _strip_suffix(words, _CLOSING_TABLE)
            if suffix is None:
                return words, request

    def _target(self, words: Words) -> _Ref | None:
        """The devices ``[the] [ROOM] PHRASE [in [the] ROOM]`` names; None when the words are no such phrase."""
        if words[:1] and words[0] in _DETERMINERS:
            words = words[1:]
        in_room: list[DeviceInfo] | None = None
        if "in" in words:
            at = words.index("in")
            room = words[at + 1 :]
            room = room[1:] if room[:1] == ("the",) else room
            if room not in self._rooms:
                return None
            in_room, words = self._rooms[room], words[:at]
        ref = self._phrase(words)
        if ref is None:
            # "living room fan": a room, then a name or noun
            for cut in range(len(words) - 1, 0, -1):
                room_devices = self._rooms.get(words[:cut])
                rest = self._phrase(words[cut:]) if room_devices else None
                if room_devices and rest:
                    ref = _Ref(tuple(d for d in rest.devices if d in room_devices), rest.noun)
                    break
        if ref is None:
            return None
        if in_room is not None:
            ref = _Ref(tuple(d for d in ref.devices if d in in_room), ref.noun)
        return ref

    def _phrase(self, words: Words) -> _Ref | None:
        if words in self._exact:
            return _Ref(tuple(self._exact[words]), self._noun_label.get(words[-1:], words[-1]))
        if words in self._nouns:
            return _Ref(tuple(self._nouns[words]), self._noun_label[words])
        return None

    def _place(self, words: Words) -> tuple[DeviceInfo, ...] | None:
        """The devices a place names: a device phrase, or a room; None when the words are neither."""
        ref = self._target(words)
        if ref is not None:
            return ref.devices
        room = words[1:] if words[:1] == ("the",) else words
        return tuple(self._rooms[room]) if room in self._rooms else None

    def _decide(self, devices: Sequence[DeviceInfo], noun: str, then: Intent) -> Intent | None:
        """One device: the intent on it. Several: ask which. None: let the model answer."""
        if not devices:
            return None
        if len(devices) == 1:
            return Intent(then.action, devices[0].name, then.value, then.quantity)
        rooms = [d.room for d in devices]
        distinct = all(rooms) and len(set(rooms)) == len(rooms)
        labels = [str(d.room) if distinct else d.name.replace("_", " ") for d in devices]
        return Intent(
            "ask",
            question=f"which {noun}: {_join(labels)}?",
            options=tuple(d.name for d in devices),
            then=then,
        )

    # --- set --------------------------------------------------------------------------------------

    def _set(self, words: Words) -> Intent | None:
        if "to" in words or words[-1] in _PERCENT:
            return self._set_level(words)
        first, last = words[0], words[-1]
        if first in _TURN:
            particles = _TURN[first]
            if len(words) > 2 and words[1] in particles:
                return self._switch(words[2:], particles[words[1]])
            if len(words) > 2 and last in particles:
                return self._switch(words[1:-1], particles[last])
            return None
        if first in _ONE_WORD_VERBS:
            return self._switch(words[1:], _ONE_WORD_VERBS[first])
        if last in ("on", "off") and len(words) > 1:
            return self._switch(words[:-1], last == "on")
        return None

    def _switch(self, target: Words, on: bool) -> Intent | None:
        ref = self._target(target)
        if ref is None:
            return None
        return self._decide([d for d in ref.devices if d.kind in SETTABLE], ref.noun, Intent("set", value=on))

    def _set_level(self, words: Words) -> Intent | None:
        if "to" in words:
            at = len(words) - 1 - words[::-1].index("to")
            level, head = _level(words[at + 1 :]), words[:at]
        else:
            level, head = _level(words[-2:]), words[:-2]  # "kitchen light 40%"
            if head[:1] == ("set",):
                head = head[1:]
        if level is None or not head:
            return None
        if head[0] in _LEVEL_VERBS and "to" in words:
            verb, head = head[0], head[1:]
            if verb == "turn" and head[:1] in (("up",), ("down",)):
                head = head[1:]
            elif verb == "turn" and head[-1:] in (("up",), ("down",)):
                head = head[:-1]
            if verb == "set" and head[:3] == ("the", "brightness", "of"):
                head = head[3:]
        if head[-1:] == ("brightness",):
            head = head[:-2] if head[-2:-1] == ("'s",) else head[:-1]
        ref = self._target(head)
        if ref is None:
            return None
        chosen = self._decide([d for d in ref.devices if d.kind in SETTABLE], ref.noun, Intent("set", value=level))
        if chosen is not None and chosen.action == "set" and self._by_name[str(chosen.device)].kind != "dimmer":
            return None  # a relay has no level; the model can explain that
        return chosen

    # --- read -------------------------------------------------------------------------------------

    def _read(self, words: Words) -> Intent | None:
        if words[0] in ("is", "are"):
            return self._read_state(words[1:])
        if words[0] == "how" and len(words) > 2:
            if words[1] == "is":
                return self._read_status(words[2:], any_kind=True)
            if words[1] in _QUANTITY_ADJECTIVES and words[2] == "is":
                return self._read_adjective(_QUANTITY_ADJECTIVES[words[1]], words[3:])
            return None
        rest, lead = _strip_prefix(words, _LEAD_TABLE)
        if not rest:
            return None
        if lead in _BARE_TARGET_LEADS:
            bare = rest[1:] if lead == ("check",) and rest[:1] == ("on",) else rest
            found = self._read_status(bare, any_kind=True)
            if found is not None:
                return found
        status = rest[1:] if rest[:1] == ("the",) else rest
        if len(status) > 2 and status[0] in _STATUS and status[1] == "of":
            return self._read_status(status[2:], any_kind=True)
        if len(rest) > 1 and rest[-1] in _STATUS:
            target = rest[:-2] if rest[-2] == "'s" else rest[:-1]
            return self._read_status(target, any_kind=True)
        return self._read_quantity(rest)

    def _read_state(self, words: Words) -> Intent | None:
        for size in (3, 2, 1):
            if len(words) > size and words[-size:] in _STATES:
                target = words[:-size]
                target = target[:-1] if target[-1:] in (("still",), ("being",)) else target  # "is it being pressed"
                return self._read_status(target, any_kind=False)
        return None

    def _read_status(self, target: Words, *, any_kind: bool) -> Intent | None:
        ref = self._target(target)
        if ref is None:
            return None
        devices = [d for d in ref.devices if any_kind or d.kind in STATEFUL]
        return self._decide(devices, ref.noun, Intent("read"))

    def _read_quantity(self, words: Words) -> Intent | None:
        # Right to left: in "soil moisture level" the quantity is "level" and "soil moisture" the place.
        for at in range(len(words) - 1, -1, -1):
            for key in self._quantity_table.get(words[at], ()):
                if words[at : at + len(key)] != key:
                    continue
                before, after = words[:at], words[at + len(key) :]
                if before[:1] == ("the",):
                    before = before[1:]
                if before[:1] == ("current",):
                    before = before[1:]
                if before[-1:] == ("'s",):
                    before = before[:-1]
                if before and after:
                    continue
                if after and after[0] not in _PLACE_PREPOSITIONS:
                    continue
                place = before or after[1:]
                devices = self._place(place) if place else self.devices
                found = self._by_quantity(devices, self._quantity_nouns[key]) if devices is not None else None
                if found is not None:
                    return found
        return None

    def _read_adjective(self, names: tuple[str, ...], rest: Words) -> Intent | None:
        """``how warm is [it] [in] [PLACE]``."""
        if rest[:1] == ("it",):
            rest = rest[1:]
            if rest[:1] == ("in",):
                rest = rest[1:]
        devices = self._place(rest) if rest else self.devices
        return self._by_quantity(devices, names) if devices is not None else None

    def _by_quantity(self, devices: Iterable[DeviceInfo], names: tuple[str, ...]) -> Intent | None:
        measuring = [d for d in devices if _quantity_of(d, names)]
        chosen = self._decide(measuring, names[0], Intent("read", quantity=names[0]))
        if chosen is not None and chosen.action == "read":
            return Intent("read", chosen.device, quantity=_quantity_of(self._by_name[str(chosen.device)], names))
        return chosen
