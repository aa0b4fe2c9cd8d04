"""Device requests by meaning: the stage after the rule parser (``intent.py``) and before the chat model.

The rule parser understands plain commands exactly and passes on everything else. This stage takes
what it passed on and answers two questions separately, because embeddings answer only one of them
well:

- **What kind of request is it?** A question about now, a command, a wish implied by a remark ("it's
  dark on the porch"), a question about the past, or none of these. Decided by words
  (:mod:`appliance.understanding.semantic_words`): "turn the fan on" and "turn the fan off" are neighbours
  in any sentence-embedding space, so a value never comes from a vector.
- **Which device does it mean?** Decided by meaning: the message's vector (MiniLM, ~5 ms) against
  each device's profile (its name, room, aliases and quantities, and example phrasings written from
  its driver and the words of its name, e.g. "it is dark on the porch" for a light), checked against
  the words that name devices and places in the message.

What happens then, always erring towards asking rather than acting:

- a question about now reads the device and answers (route ``intent``, reason "by meaning ...");
- a command acts at once only when the message names the device (a name, alias, noun or room of it),
  no other device or unknown appliance is named, the value is stated (on/off words) and the meaning
  agrees; otherwise it asks "Turn the fan on?", and only a yes (or the button) acts;
- a wish implied by a remark always asks first;
- a question about the past answers from the events table (presses and switching);
- negations, conditions, times and schedules, two devices, pronouns, "everything", stories, advice,
  general questions and devices the appliance does not have go to the model untouched.

Thresholds were tuned on ``tests/eval/device_phrasings_dev.yaml`` and are measured on the separate
table ``tests/eval/device_phrasings.yaml`` (``tests/test_semantic_devices.py``: no wrong action).
A decision costs one embedding of the message (shared with the later stages of the turn) and a
matrix product over a few dozen profile vectors: ~6 ms here (``make bench``: intent_semantic).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from appliance.hardware.device_info import DeviceInfo
from appliance.understanding import semantic_words as sw
from appliance.understanding.intent import Intent, words_of

if TYPE_CHECKING:
    import numpy as np

    from appliance.llm.embeddings import QueryEmbedder

log = logging.getLogger(__name__)

# Cosine similarities of MiniLM (unit vectors), tuned on the dev set (see the module docstring).
READ_ANCHORED = 0.30  # a read of a device the message names (by noun or room)
READ_FREE = 0.55  # a read of a device the message does not name
WISH = 0.30  # asking "turn X on?" after a remark
CONFIRM_FREE = 0.55  # asking about a command whose device is not named
HISTORY = 0.35  # a question about a device's past
MARGIN = 0.04  # the best device must beat the second by this much, else nothing is decided


@dataclass(frozen=True)
class Profile:
    """What the stage knows of one device: how it may be named, and example phrasings to embed."""

    info: DeviceInfo
    texts: tuple[str, ...]
    nouns: frozenset[str]  # stems of the words of its name and aliases that name it alone ("fan", "lamp")
    rooms: frozenset[str]  # stems of its room's words
    light: bool  # a light (its words say so): "dark" asks to switch it on
    air: bool  # a fan: "hot" asks to switch it on

    @property
    def name(self) -> str:
        """The device's name."""
        return self.info.name

    def can(self, operation: str) -> bool:
        """Whether the config allows this operation ("read" or "set") on it."""
        if operation == "set" and self.info.kind not in ("switch", "dimmer"):
            return False
        return operation in self.info.allowed


def profile(info: DeviceInfo) -> Profile:
    """The profile of a device, from its config and its driver's kind."""
    label = info.name.replace("_", " ")
    names = list(dict.fromkeys([label, *info.aliases]))
    words = {w for n in names for w in words_of(n)}
    room_words = frozenset(sw.stem(w) for w in words_of(info.room or ""))
    nouns = frozenset(sw.stem(w) for w in words if w.isalpha() and sw.stem(w) not in room_words) or frozenset(
        sw.stem(w) for w in words
    )
    light = bool(nouns & sw.LIGHT_NOUNS)
    air = bool(nouns & sw.AIR_NOUNS)
    room = info.room or "house"
    texts = [*names, *(f"the {n} in the {room}" for n in names)]
    if info.kind in ("switch", "dimmer"):
        for n in names[:3]:
            texts += [f"turn on the {n}", f"switch off the {n}", f"is the {n} on"]
        if light:
            texts += [f"it is dark on the {room}", f"I can't see a thing on the {room}", f"light up the {room}"]
            texts += [f"are the lights on the {room} on", "the lights outside"]
        if air:
            texts += [f"it is too hot in the {room}", f"it is stuffy in the {room}", "get some air moving"]
            texts += [f"is the {names[0]} running", f"the {names[0]} is spinning"]
    elif info.kind == "sensor":
        for quantity in info.quantities:
            texts += [t.format(room=room, name=names[0]) for t in sw.QUANTITY_EXAMPLES.get(quantity, ())]
        if nouns & sw.SOIL_NOUNS:
            texts += [t.format(room=room, name=names[0]) for t in sw.SOIL_EXAMPLES]
        texts += [f"what does the {names[0]} say", f"how is it in the {room}"]
    elif info.kind == "input":
        for n in names[:2]:
            texts += [f"did anyone press the {n}", f"when was the {n} last pressed", f"has the {n} gone off"]
        if info.driver == "motion":
            texts += [f"was there movement in the {room}", f"did anyone walk through the {room}"]
        elif nouns & sw.DOOR_NOUNS:
            texts += ["did anyone ring the bell", "was someone at the door", "did a visitor come by"]
    return Profile(info, tuple(dict.fromkeys(texts)), nouns, room_words, light, air)


@dataclass(frozen=True)
class Scored:
    """A device and how close the message came to its profile."""

    profile: Profile
    score: float
    named: bool  # the message names it by a noun of its name or aliases
    in_room: bool  # the message names its room


class SemanticDevices:
    """Decides device requests by meaning for a fixed set of devices (None: the model decides)."""

    def __init__(
        self,
        devices: Sequence[DeviceInfo],
        embedder: QueryEmbedder,
        texts: Callable[[Sequence[str]], Awaitable[list[list[float]]]] | None = None,
    ) -> None:
        self.profiles = [profile(info) for info in devices]
        self.embedder = embedder
        self._texts = texts or embedder.aembed_queries  # the profiles' vectors (kept across runs by the caller)
        self._matrix: np.ndarray | None = None
        self._owner: list[int] = []  # the profile index of each row of the matrix
        self._prepared: asyncio.Future[None] | None = None
        names = {n for p in self.profiles for n in p.nouns}
        rooms = {r for p in self.profiles for r in p.rooms}
        self.known = sw.Vocabulary(device_nouns=frozenset(names), room_words=frozenset(rooms))

    async def prepare(self) -> None:
        """Embed every profile's texts (once; ~0.2 s for five devices). Called at start and on first use."""
        if self._matrix is not None:
            return
        loop = asyncio.get_running_loop()
        pending = self._prepared
        if pending is None or pending.get_loop() is not loop or (pending.done() and pending.exception() is not None):
            # One embedding of the profiles however many messages arrive at once; a failed one is tried again.
            pending = self._prepared = asyncio.ensure_future(self._embed_profiles())
        await asyncio.shield(pending)

    async def _embed_profiles(self) -> None:
        import numpy as np

        texts = [t for p in self.profiles for t in p.texts]
        owner = [i for i, p in enumerate(self.profiles) for _ in p.texts]
        vectors = await self._texts(texts)
        self._matrix, self._owner = np.asarray(vectors, dtype=np.float32), owner

    async def decide(self, text: str) -> Intent | None:
        """The intent of a message the rule parser passed on; None leaves it to the model."""
        reading = sw.read_message(text, self.known)
        if reading is None or not self.profiles:
            return None
        await self.prepare()
        rooms = {p.info.room for p in self.profiles if p.info.room}
        for place in reading.places:
            # Rooms are a closed vocabulary, and a sentence model finds a bedroom as close to a living
            # room as a lounge is, so another name of a room comes from a table, never from a vector.
            room = sw.room_called(place, rooms)
            if room is None:
                return None  # a place with no device here: "turn on the kitchen light"
            reading = dataclasses.replace(
                reading, stems=reading.stems | {sw.stem(w) for w in room.split()}, room_named=True
            )
        vector = await self.embedder.aembed_query(text)
        scored = self._score(vector, reading)
        chosen = self._choose(reading, scored)
        if chosen is not None and chosen.action == "history":
            # "when did the fan go on?" asks for the ons: its history told the offs first (README walk 7)
            said = set(re.findall(r"[a-z]+", text.lower()))
            if ("on" in said) != ("off" in said):
                chosen = dataclasses.replace(chosen, value="on" in said)
        return chosen

    def _score(self, vector: Any, reading: sw.Reading) -> list[Scored]:
        import numpy as np

        assert self._matrix is not None
        similarity = self._matrix @ np.asarray(vector, dtype=np.float32)
        best = np.full(len(self.profiles), -1.0, dtype=np.float32)
        np.maximum.at(best, np.asarray(self._owner), similarity)
        return [
            Scored(p, float(best[i]), bool(p.nouns & reading.stems), bool(p.rooms and p.rooms <= reading.stems))
            for i, p in enumerate(self.profiles)
        ]

    def _choose(self, reading: sw.Reading, scored: list[Scored]) -> Intent | None:
        act = reading.act
        matched = reading.stems & self.known.device_nouns
        if matched and not any(matched <= s.profile.nouns for s in scored):
            return None  # "the fan and the porch light": two devices, and the model can call two tools
        rooms = reading.stems & self.known.room_words
        # A device named by its noun in another room is another device ("the living room light").
        scored = [s for s in scored if not (s.named and rooms and s.profile.rooms and not s.in_room)]
        operation = "set" if act in ("command", "wish") else "read"
        candidates = [s for s in scored if act == "history" or s.profile.can(operation)]
        if act == "read":
            return self._read(reading, candidates)
        if act == "history":
            return self._history(candidates)
        return self._write(reading, candidates)

    @staticmethod
    def _pick(candidates: list[Scored], floor: float) -> Scored | None:
        """The best candidate when it clears ``floor`` and beats the second by MARGIN."""
        ranked = sorted(candidates, key=lambda s: -s.score)
        if not ranked or ranked[0].score < floor:
            return None
        if len(ranked) > 1 and ranked[0].score - ranked[1].score < MARGIN:
            return None
        return ranked[0]

    def _read(self, reading: sw.Reading, candidates: list[Scored]) -> Intent | None:
        if reading.quantities:  # "stuffy", "dry": only devices measuring one of those
            measuring = [s for s in candidates if _measures(s.profile.info, reading.quantities)]
            candidates = measuring or ([] if reading.only_quantity else candidates)
        anchored = [s for s in candidates if s.named]
        if not anchored and (reading.quantities or reading.status_cue):
            anchored = [s for s in candidates if s.in_room]  # a room alone: only "how is it", never "what's in it"
        elif not anchored and reading.room_named:
            return None
        if reading.place == "indoors" and (anchored or reading.quantities or reading.status_cue):
            # "is it warm in the house" reads an indoor sensor; "what can you read in this house" names none, and
            # read the living room for it (a blind set)
            anchored = anchored or [s for s in candidates if s.profile.info.room not in sw.OUTDOOR_ROOMS]
        elif reading.place == "indoors" and not anchored:
            return None
        elif reading.place == "outdoors" and not anchored:
            # "is it cold outside": only a sensor outdoors can say; the living room's would be a wrong answer
            anchored = [s for s in candidates if s.profile.info.room in sw.OUTDOOR_ROOMS]
            if not anchored:
                return None
        if not anchored and not reading.quantities and reading.place is None and reading.stems & sw.PRONOUNS:
            return None  # "is it on?": only the conversation knows what "it" is, and the model reads it
        chosen = self._pick(anchored, READ_ANCHORED) if anchored else self._pick(candidates, READ_FREE)
        if chosen is None and not anchored and reading.quantities:
            # "what's the air pressure like": one device measures it, so it is the one meant
            measuring = [s for s in candidates if _measures(s.profile.info, reading.quantities)]
            chosen = measuring[0] if len(measuring) == 1 else None
        if chosen is None:
            return None
        quantity = _measured(chosen.profile.info, reading.quantities)
        how = f"by meaning (similarity {chosen.score:.2f})"
        return Intent("read", chosen.profile.name, quantity=quantity, how=how)

    def _history(self, candidates: list[Scored]) -> Intent | None:
        anchored = [s for s in candidates if s.named] or [s for s in candidates if s.in_room]
        chosen = self._pick(anchored or candidates, HISTORY)
        if chosen is None:
            return None
        return Intent("history", chosen.profile.name, how=f"by meaning (similarity {chosen.score:.2f})")

    def _write(self, reading: sw.Reading, candidates: list[Scored]) -> Intent | None:
        if reading.act == "wish":
            fitting = [
                s
                for s in candidates
                if (s.profile.light and reading.wants_light) or (s.profile.air and reading.wants_air)
            ]
            anchored = [s for s in fitting if s.named or s.in_room]
            chosen = self._pick(anchored or fitting, WISH)
            value = reading.value
            if chosen is None or value is None:
                return None
            return self._confirm(chosen, value, "by meaning: a remark, so asking first")
        named = [s for s in candidates if s.named]
        chosen = self._pick(named, 0.0) if named else None
        if chosen is not None and reading.value is not None and reading.plain:
            return Intent("set", chosen.profile.name, reading.value, how=f"by meaning (similarity {chosen.score:.2f})")
        chosen = chosen or self._pick(
            [s for s in candidates if s.in_room] or candidates, CONFIRM_FREE if not reading.room_named else WISH
        )
        if chosen is None or reading.value is None:
            return None
        return self._confirm(chosen, reading.value, f"by meaning (similarity {chosen.score:.2f}), not certain")

    @staticmethod
    def _confirm(chosen: Scored, value: bool, how: str) -> Intent:
        label = chosen.profile.name.replace("_", " ")
        question = f"Turn the {label} {'on' if value else 'off'}? (yes or no)"
        return Intent("confirm", chosen.profile.name, value, question=question, how=how)


def _measured(info: DeviceInfo, wanted: Sequence[str]) -> str | None:
    """The quantity of this device the words ask about (its own name for it); None: all of them.

    "dry" of a soil probe is its moisture level; "stuffy" of a room sensor is both its humidity and its
    temperature, so it gets every reading.
    """
    own = [
        name for quantity in wanted for name in sw.QUANTITY_NAMES.get(quantity, (quantity,)) if name in info.quantities
    ]
    return own[0] if len(own) == 1 else None


def _measures(info: DeviceInfo, wanted: Sequence[str]) -> bool:
    """Whether the device measures any of the wanted quantities."""
    return any(name in info.quantities for q in wanted for name in sw.QUANTITY_NAMES.get(q, (q,)))


def answer_confirmation(pending: Intent, text: str) -> Intent | None:
    """A yes carries the pending write out, a no cancels it; anything else is a new message (None)."""
    words = words_of(text)
    if pending.action != "confirm" or not words or len(words) > 6:
        return None
    said = set(words)
    if said & sw.NO_WORDS or ("not" in said):
        return Intent("cancel", pending.device, pending.value, how="you said no")
    if said & sw.YES_WORDS or words in sw.YES_PHRASES:
        return Intent("set", pending.device, pending.value, how="confirmed by you")
    return None
