"""The words side of the semantic device stage: what kind of request a message is, and its value.

``read_message`` reads a message the rule parser passed on and says whether it is a question about
now (``read``), a command (``command``), a remark implying a wish (``wish``), a question about the past
(``history``) or none of these (None: the chat model decides). The value of a write (on or off) comes
only from words, never from a vector. Anything that makes acting unsafe returns None before any
device is considered: a negation, a condition or a time, a schedule, a pronoun or "everything" as
the object of a command, a story about the past, a request for advice or an explanation, or an
appliance or room the appliance has no device for (a kitchen light, a heater, the TV).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from appliance.understanding.intent import NEGATIONS, words_of

Act = Literal["read", "command", "wish", "history"]


def stem(word: str) -> str:
    """A crude singular: lights -> light, tomatoes -> tomato, batteries -> battery, neighbours' -> neighbour."""
    word = word.lower().strip("'")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("oes"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _stems(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in text.split())


# --- what devices are ------------------------------------------------------------------------------

LIGHT_NOUNS = _stems("light lights lamp lamps bulb lighting")
AIR_NOUNS = _stems("fan fans ventilator ventilation blower extractor")
SOIL_NOUNS = _stems("soil moisture plant plants garden bed earth")
DOOR_NOUNS = _stems("doorbell bell door")
OUTDOOR_ROOMS = frozenset({"porch", "garden", "yard", "patio", "balcony", "driveway", "terrace", "outside", "shed"})

# Places and appliances people name that may have no device here: naming one sends the message to the
# model (unless a configured device is called that), so "turn on the kitchen light" never switches the
# porch light.
KNOWN_PLACES = _stems(
    "kitchen bedroom bathroom garage office study attic loft basement cellar shed driveway balcony patio "
    "upstairs downstairs nursery hall hallway landing utility laundry dining lounge conservatory yard "
    "toilet loo den playroom greenhouse car"
)
KNOWN_THINGS = _stems(
    "heater heating radiator thermostat tv television telly radio oven stove hob kettle toaster microwave "
    "pump sprinkler sprinklers hose lock gate blind blinds curtain curtains aircon ac humidifier "
    "dehumidifier boiler dishwasher washer dryer washing fridge freezer computer laptop printer router "
    "speaker speakers music alarm camera vacuum hoover robot window windows tap shower iron charger "
    "christmas fairy tree aquarium tank fountain socket plug everything"
)

# Other names of rooms: "the lounge" is the living room when the config calls it that.
_ROOM_NAMES: dict[str, frozenset[str]] = {
    "living room": _stems("lounge sitting front family den"),
    "garden": _stems("yard backyard lawn"),
    "hallway": _stems("hall corridor entrance landing"),
    "porch": _stems("veranda stoop doorstep"),
    "kitchen": _stems("kitchenette"),
    "bedroom": _stems("bedchamber"),
}


def room_called(place: str, rooms: set[str]) -> str | None:
    """The configured room a place word names ("lounge": "living room"), or None."""
    for room in rooms:
        if place in _ROOM_NAMES.get(room.lower(), frozenset()) or place == stem(room.lower()):
            return room
    return None


# Quantity words -> the quantities they ask about, in order of likelihood.
_QUANTITY_WORDS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        _stems("warm hot cold chilly freezing boiling temperature temp degree heat cool chill roasting sweltering"),
        ("temperature",),
    ),
    **dict.fromkeys(_stems("humid humidity muggy sticky stuffy clammy"), ("humidity", "temperature")),
    **dict.fromkeys(_stems("pressure barometer barometric storm"), ("pressure",)),
    **dict.fromkeys(_stems("moist moisture wet water watering thirsty parched soggy"), ("moisture", "humidity")),
    **dict.fromkeys(_stems("dry damp"), ("moisture", "humidity")),
    **dict.fromkeys(_stems("bright brightness lux illuminance"), ("illuminance",)),
}
# A quantity -> the names a device may give it (a soil probe reports its moisture as a "level").
QUANTITY_NAMES: dict[str, tuple[str, ...]] = {
    "temperature": ("temperature", "temp"),
    "humidity": ("humidity",),
    "pressure": ("pressure",),
    "moisture": ("moisture", "level"),
    "illuminance": ("illuminance", "lux"),
}
# Example phrasings of a sensor's profile, by the quantities its driver measures.
QUANTITY_EXAMPLES: dict[str, tuple[str, ...]] = {
    "temperature": ("how warm is it in the {room}", "is it cold in the {room}", "the temperature in the {room}"),
    "humidity": ("how humid is it in the {room}", "is the air damp or stuffy in the {room}"),
    "pressure": ("what is the air pressure", "the barometric pressure in the {room}"),
    "illuminance": ("how bright is it in the {room}", "the light level in the {room}"),
}
SOIL_EXAMPLES = (
    "how wet is the soil in the {room}",
    "do the plants in the {room} need watering",
    "is the soil dry",
    "the soil moisture level",
)

# --- what kind of request --------------------------------------------------------------------------

# The rule parser's negations (one list, shared), and "anymore" ("we don't need the light anymore").
_NEGATIONS = NEGATIONS | {"anymore"}
# Words that make a message the model's, whatever else it says.
_BLOCK = _stems(
    "if unless until till whenever every each daily weekly nightly tomorrow tonight later soon minute minutes "
    "min mins hour hours second seconds oclock midnight noon remind reminder schedule timer alarm why should "
    "shall explain mean means meaning poem story write buy order wire install fix repair build "
    "always usually sometimes often toggle dim brighten percent % neighbour neighbor once after before "
    "overnight forecast meant supposed"
)
_TIMES_OF_DAY = frozenset({"morning", "afternoon", "evening", "night"})
# General questions: advice or knowledge, not the state of a device here.
_GENERAL = _stems(
    "good ideal best normal comfortable healthy recommended work works difference define safe nice name tip "
    "suggest recommend recipe joke"
)
_HOME = _stems("home house inside indoors indoor here outside outdoors outdoor now today currently")
# A question about a room is about its devices only with one of these: "how is the garden doing",
# "what's it like in the living room", "any readings from the porch". Without one ("what furniture is
# in the living room", "is the porch big enough for a table") it is about the room, for the model.
_STATUS_CUES = _stems(
    "like doing feel feels feeling climate weather condition conditions reading readings status state sensor "
    "sensors measurement measurements about how hows on off running lit illuminated burning going spinning "
    "working pressed"
)
PRONOUNS = frozenset({"it", "that", "this", "they", "them", "those", "these", "one"})
_PRONOUN_OBJECTS = frozenset({"it", "them", "everything", "all", "both", "these", "those", "something", "anything"})
_PAST_MARKERS = _stems("yesterday earlier ago last today while")
_PAST_VERBS = _words(
    "did was were had has have rang rung went ran came come pressed switched turned left happened been "
    "visited knocked buzzed showed"
)
_QUESTION_STARTS = _words(
    "is are am does do how hows what whats wat wats which where when who any tell give show check can could"
)
_FILLERS = frozenset({"roughly", "approximately", "about", "just", "so", "ok", "okay", "and", "hey", "um", "er"})
_TYPOS = {"swich": "switch", "swtich": "switch", "swith": "switch", "trun": "turn", "tunr": "turn", "tun": "turn"}
# "tell me if the fan is on" asks whether; "if" there is no condition.
_WHETHER = (("tell", "me", "if"), ("let", "me", "know", "if"), ("check", "if"), ("see", "if"), ("know", "if"))
# "can we get some air in here": a wish, not a question about ability.
_SUGGESTIONS = (("can", "we"), ("could", "we"), ("shall", "we"), ("let", "us"), ("lets",))
# Looser than the rule parser's courtesy and closings on purpose: the parser acts on what it reads, so a
# word it has no place for must send the message on; here nothing acts without the device's noun and a
# plain value, so "mate", "innit" or "would you be so kind as to" may be dropped.
_COURTESY = (
    ("would", "you", "be", "so", "kind", "as", "to"),
    ("would", "you", "mind"),
    ("i", "want", "you", "to"),
    ("go", "ahead", "and"),
    ("could", "you"),
    ("can", "you"),
    ("would", "you"),
    ("will", "you"),
    ("please",),
    ("pls",),
    ("plz",),
    ("kindly",),
    ("hey",),
    ("hi",),
    ("ok",),
    ("okay",),
    ("so",),
    ("just",),
    ("quickly",),
)
_CLOSINGS = _words("please pls plz thanks thx ta mate now rn atm quick quickly cheers innit pal")
_ON_VERBS = frozenset({"start", "activate", "enable", "run", "fire", "light"})
_OFF_VERBS = frozenset({"stop", "kill", "cut", "halt", "disable", "deactivate", "shut"})
_PARTICLE_VERBS = frozenset(
    {"turn", "switch", "put", "flip", "power", "get", "pop", "bring", "keep", "leave", "stick", "chuck", "bung"}
)
_COMMAND_VERBS = _ON_VERBS | _OFF_VERBS | _PARTICLE_VERBS
_WANT = frozenset({"want", "wanna", "like", "need", "lets", "let"})
_FILLER = frozenset({"the", "my", "our", "that", "this", "those", "these", "a", "on", "in", "at", "out", "off"})
_PREPOSITION_FOLLOWERS = frozenset(
    {"the", "my", "our", "a", "your", "this", "that", "top", "here", "there", "me", "us", "you", "him", "her"}
)

_DARK = frozenset({"dark", "black", "pitch", "gloomy", "see"})
_BRIGHT = frozenset({"bright", "glare", "blinding"})
_HOT = _stems("hot boiling stuffy warm muggy sweltering humid sticky roasting baking airless")
_COLD = _stems("cold freezing chilly cool draughty drafty")
_LOUD = _stems("loud noisy racket din")

YES_WORDS = _words("yes yeah yep yup ya sure ok okay y affirmative absolutely definitely correct do go")
NO_WORDS = _words("no nope nah cancel n leave never stop don't")
YES_PHRASES = {("please",), ("do", "it"), ("go", "ahead"), ("please", "do")}


@dataclass(frozen=True)
class Vocabulary:
    """The words that name this appliance's devices and rooms (stems)."""

    device_nouns: frozenset[str]
    room_words: frozenset[str]


@dataclass(frozen=True)
class Reading:
    """What the words of a message say, before any device is chosen."""

    act: Act
    stems: frozenset[str]  # the stems of the words that may name a device (a command's verb left out)
    value: bool | None = None  # on/off, for a command or a wish
    plain: bool = False  # an imperative with its value stated ("stop the fan"): may act without asking
    quantities: tuple[str, ...] = ()  # what a question asks about ("stuffy": humidity, temperature)
    only_quantity: bool = False  # the question names a quantity and no device or room
    place: str | None = None  # "indoors" or "outdoors" when the message says so
    wants_light: bool = False  # a remark about darkness or glare
    wants_air: bool = False  # a remark about heat, cold or noise
    places: tuple[str, ...] = ()  # places named that are no configured room ("lounge", "kitchen")
    status_cue: bool = False  # a question that asks how things are ("doing", "like", "readings", "on")
    room_named: bool = False


def _strip(words: tuple[str, ...]) -> tuple[str, ...]:
    """The message without courtesy in front ("could you", "please") and closings ("thanks", "now")."""
    changed = True
    while changed and words:
        changed = False
        for prefix in _COURTESY:
            if words[: len(prefix)] == prefix and len(words) > len(prefix):
                words, changed = words[len(prefix) :], True
                break
    while len(words) > 1 and (
        words[-1] in _CLOSINGS or words[-2:] in (("thank", "you"), ("for", "me"), ("right", "now"))
    ):
        words = words[:-2] if words[-2:] in (("thank", "you"), ("for", "me"), ("right", "now")) else words[:-1]
    return words


def _value(words: tuple[str, ...]) -> tuple[bool | None, bool]:
    """The on/off a command states, and whether it states it plainly (None: no value or two)."""
    found: set[bool] = set()
    verb = words[0] if words else ""
    if verb in _ON_VERBS and not (verb in ("fire", "light") and "up" not in words):
        found.add(True)
    if verb in _OFF_VERBS:
        found.add(False)
    for i, word in enumerate(words):
        after = words[i + 1] if i + 1 < len(words) else ""
        before = words[i - 1] if i else ""
        if word == "on" and (after not in _PREPOSITION_FOLLOWERS or before in _PARTICLE_VERBS):
            found.add(True)
        elif word == "off" or (word == "out" and before in ("lights", "light")):
            found.add(False)
        elif word == "up" and before in ("fire", "light", "start", "power"):
            found.add(True)
        elif word == "down" and before in ("shut", "power"):
            found.add(False)
        elif word in ("going", "running", "spinning") and verb in ("get", "keep", "start"):
            found.add(True)
        elif word == "go" and after == "off":
            found.add(False)
    if len(found) != 1:
        return None, False
    return found.pop(), verb in _COMMAND_VERBS


def read_message(text: str, vocab: Vocabulary) -> Reading | None:
    """What kind of device request a message is (None: not one this stage should decide)."""
    raw = words_of(text)
    joined = " ".join(raw)
    cant_see = "see" in raw and ("not" in raw or "cannot" in raw)
    if not raw or (not _NEGATIONS.isdisjoint(raw) and not (cant_see and joined.count("not") <= 1)):
        return None
    words = tuple(_TYPOS.get(w, w) for w in _strip(raw))
    for phrase in _WHETHER:
        for i in range(len(words) - len(phrase) + 1):
            if words[i : i + len(phrase)] == phrase:
                words = words[: i + len(phrase) - 1] + words[i + len(phrase) :]
                break
    while len(words) > 1 and words[0] in _FILLERS:  # "roughly when was the fan put on": the question after it
        words = words[1:]
    suggestion = any(words[: len(p)] == p for p in _SUGGESTIONS)
    if suggestion:
        words = words[next(len(p) for p in _SUGGESTIONS if words[: len(p)] == p) :] or words
    stems = frozenset(stem(w) for w in words)
    first = words[0]
    question = not suggestion and (
        text.rstrip().endswith("?") or first in _QUESTION_STARTS or first in _PAST_VERBS or first == "who"
    )
    when_question = first == "when" and len(words) > 1 and words[1] in _PAST_VERBS
    if first == "how" and len(words) > 1 and words[1] in ("do", "does", "can", "could", "should", "would", "to"):
        return None  # "how do I...": advice, not a reading
    if first == "how" and words[1:2] in (("long",), ("often",)) and words[2:3] in (("do",), ("does",), ("should",)):
        return None  # "how long do AA batteries last in a doorbell": knowledge, not the doorbell's past
    if stems & _BLOCK or _has_time(words) or ("when" in words and not when_question) or _future(words):
        return None
    past_time = schedule_time = False
    for i, word in enumerate(words):  # "last night" is the past; "at night" is a schedule
        if word in _TIMES_OF_DAY:
            if i and words[i - 1] in ("last", "this", "yesterday", "tonight", "all"):
                past_time = True
            else:
                schedule_time = True
    known = vocab.device_nouns | vocab.room_words
    if (stems & KNOWN_THINGS) - known:
        return None  # an appliance no device here is: "turn on the heater", "turn off the tv"
    places = tuple(sorted((stems & KNOWN_PLACES) - known))  # "the lounge": the caller asks the embedding
    room_named = bool(stems & vocab.room_words)
    place = "indoors" if stems & _stems("inside indoors indoor home house here") else None
    place = "outdoors" if stems & _stems("outside outdoors outdoor") and place is None else place
    past = past_time or bool(stems & _PAST_MARKERS) or bool(set(words) & _PAST_VERBS)
    if schedule_time and not (question and past):
        return None
    if question and past:
        if words[:3] in (("did", "i", "leave"), ("did", "we", "leave"), ("did", "someone", "leave")):
            # "did I leave the light on?" asks about now
            return Reading("read", stems, room_named=room_named, places=places, status_cue=True)
        if first in _PAST_VERBS or first in ("when", "who", "how", "what"):
            return Reading("history", stems, room_named=room_named, places=places)
        return None
    if past and first in ("i", "we", "you", "he", "she", "they", "the", "my", "our", "it"):
        return None  # a story: "I turned the fan off earlier"
    quantities = tuple(dict.fromkeys(q for s in stems for q in _QUANTITY_WORDS.get(s, ())))
    only_quantity = bool(quantities) and not (stems & known)
    if only_quantity and _elsewhere(words, known):
        return None  # "the temperature on Mars", "the humidity of the Sahara": not a sensor here
    value, plain = _value(words)
    if first in _COMMAND_VERBS and not question:
        if set(words[1:3]) & _PRONOUN_OBJECTS or "all" in words:
            return None  # "turn it off", "switch everything off": the model knows what "it" was
        if value is not None:
            objects = frozenset(stem(w) for w in words[1:])  # "light up the porch" names no light
            return Reading("command", objects, value, plain, room_named=room_named, places=places)
    question_about_now = Reading(
        "read",
        stems,
        quantities=quantities,
        only_quantity=only_quantity,
        place=place,
        room_named=room_named,
        places=places,
        status_cue=bool(stems & _STATUS_CUES),
    )
    if question:
        return None if stems & _GENERAL or first in ("can", "could") else question_about_now
    rest = stems - _FILLER - set(places)
    if value is not None and rest and rest <= known:
        # "fan off", "lights out on the porch" said tersely: a command, as every other word names the device
        return Reading("command", stems, value, True, room_named=room_named, places=places)
    if value is None and quantities and not rest - known - set(_QUANTITY_WORDS) - _stems("what like level now"):
        return question_about_now  # "temp in the lounge", "soil moisture now": a terse question
    if value is not None and (set(words) & _WANT or ("can" in words and "go" in words)):
        # "I want the fan on": asked first
        return Reading("command", stems, value, False, room_named=room_named, places=places)
    if value is None:
        dark, bright = bool(set(words) & _DARK), bool(set(words) & _BRIGHT)
        hot = bool(stems & _HOT) or ("air" in words and bool(set(words) & {"get", "some", "need", "fresh"}))
        cold, loud = bool(stems & _COLD), bool(stems & _LOUD)
        cues = [(dark, True, "light"), (bright, False, "light"), (hot, True, "air"), (cold, False, "air")]
        cues += [(loud, False, "air")]
        wanted = {(v, kind) for on, v, kind in cues if on}
        if len(wanted) == 1:
            v, kind = wanted.pop()
            return Reading(
                "wish",
                stems,
                v,
                False,
                wants_light=kind == "light",
                wants_air=kind == "air",
                room_named=room_named,
                places=places,
            )
    return None


def _elsewhere(words: tuple[str, ...], known: frozenset[str]) -> bool:
    """Whether a place is named that is neither a room here nor home ("on mars", "in paris", "of the sahara")."""
    for i, word in enumerate(words[:-1]):
        if word in ("on", "in", "at", "of"):
            after = words[i + 1 : i + 3]
            place = after[1] if after[:1] in (("the",), ("a",)) and len(after) > 1 else after[0]
            ours = known | _HOME | _FILLER | KNOWN_PLACES  # another name of a room is resolved by the caller
            if place.isalpha() and stem(place) not in ours and place not in _QUESTION_STARTS:
                return True
    return False


def _future(words: tuple[str, ...]) -> bool:
    """Whether the message asks about what will be ("how low will the temperature drop", "is it going to get
    colder"): no reading of now answers it. "will you turn the fan on" and "are you going to" ask the device."""
    for i, word in enumerate(words):
        after = words[i + 1] if i + 1 < len(words) else ""
        if word in ("will", "gonna") and after not in ("you", "u"):
            return True
        if word == "going" and after == "to" and (i == 0 or words[i - 1] not in ("you", "u", "are", "re")):
            return True
    return False


def _has_time(words: tuple[str, ...]) -> bool:
    """A time or a delay: "at 7", "in 10 minutes", "for an hour", "7:30", "8pm"."""
    for i, word in enumerate(words):
        after = words[i + 1] if i + 1 < len(words) else ""
        if word in ("at", "in", "for", "by", "after", "before") and after[:1].isdigit():
            return True
        if word[:1].isdigit() and (":" in word or word.endswith(("am", "pm")) or after in ("am", "pm")):
            return True
    return False
