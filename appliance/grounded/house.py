"""The house as the appliance knows it: its rooms, what is in each, and what it cannot measure where.

"What is in the living room?" lists the devices there; "which rooms do you know?" the rooms; "what's the
temperature in the garden?" when nothing in the garden measures temperature says so, where a device
path would otherwise read the nearest sensor of another room (the reading is right, the room is not).
A reading a device in that room can give is left to the device path (route intent, a real reading).
"""

from __future__ import annotations

import re
from collections import defaultdict

from appliance.grounded.about import devices_by_room, names_a_device
from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults
from appliance.grounded.base import said as _said
from appliance.hardware.device_info import DeviceInfo

# the quantities people ask for by name, as the drivers report them
QUANTITIES = {
    "temperature": "temperature",
    "humidity": "humidity",
    "pressure": "pressure",
    "air pressure": "pressure",
    "moisture": "moisture",
    "soil moisture": "moisture",
    "light level": "light",
}
_Q = "|".join(sorted(QUANTITIES, key=len, reverse=True))
_READING = re.compile(
    rf"^(?:what(?:'s| is)|how is|how's|tell me) (?:the )?(?P<q>{_Q}) (?:in|on|at|of) (?:the |my )?(?P<room>[a-z ]+?)"
    r"(?: (?:now|right now|at the moment))?$"
)
_IN_ROOM = re.compile(
    r"^what(?:'s| is| are)? (?:there )?in the (?P<a>[a-z ]+)$|^what devices are (?:there )?in the (?P<b>[a-z ]+)$"
    r"|^is there anything (?:in|on) the (?P<c>[a-z ]+?) (?:you can|that you can) (?:check|read|see|control|measure)$"
)
# "is the bedroom light on?": the state of a thing, which the device path reads when it is one of the devices
_STATE = re.compile(
    r"^(?:is|are) (?:the |my |our )?(?P<thing>[a-z][a-z ]*?)"
    r" (?:on|off|open|closed|shut|running|locked|unlocked|working)"
    r"(?: (?:right )?now| at the moment| still| already)?$"
)
# "turn on the kitchen light", "put the dishwasher on", "dim the hall lamp to 40%": a request to a thing, which the
# device path carries out when it is one of the devices; none of them, it is said so (the model claimed to do it)
_COMMAND = re.compile(
    r"^(?:(?:turn|switch|flip|power)(?: (?P<v1>on|off|up|down))? (?:the |my |our )?(?P<a>[a-z][a-z' ]*?)"
    r"(?: (?P<v2>on|off|up|down))?"
    r"|put (?:the |my |our )?(?P<b>[a-z][a-z' ]*?) on"
    r"|(?:dim|brighten|lock|unlock) (?:the |my |our )?(?P<c>[a-z][a-z' ]*?)(?: (?:to|at) \d+ ?(?:%|percent))?"
    r"|(?:open|close|shut) the (?P<d>[a-z][a-z' ]*?))"
    r"(?: (?:a (?:couple|few|bit|little|notch)(?: of degrees)?|(?:by|to) \d+ ?(?:degrees|%|percent)?))?"
    r"(?: (?:for me|please|pls|now|right now))*$"
)
_NOT_A_THING = frozenset(
    {"it", "that", "this", "everything", "anything", "something", "he", "she", "they", "there", "you", "we", "i"}
)
_ROOMS = re.compile(r"^(?:which|what) rooms (?:do you (?:know(?: about)?|have|cover|see)|are there|can you see)$")


def _room(info: DeviceInfo) -> str:
    return " ".join((info.room or "").replace("_", " ").split()).lower()


def _label(info: DeviceInfo) -> str:
    return f"{info.name.replace('_', ' ')} ({info.kind})"


class House(TopicDefaults):
    """Questions about the rooms and what the devices in them can tell."""

    kind: str = "house"
    overview: str = "rooms"

    def match(self, text: str) -> Ask | None:
        """An Ask for questions about rooms and what is in them."""
        said = _said(text)
        if _ROOMS.match(said):
            return Ask(self.kind, "rooms", text=text)
        if found := _IN_ROOM.match(said):
            return Ask(self.kind, "room", {"room": found["a"] or found["b"] or found["c"]}, text=text)
        if (found := _STATE.match(said)) and found["thing"].split()[0] not in _NOT_A_THING:
            return Ask(self.kind, "state", {"thing": found["thing"]}, text=text)
        # "switch the telly off, nobody's watching", "it's freezing in here, turn the heating up": one clause asks
        for clause in re.split(r"[,;.!]\s|\s[-–—]\s", said):
            if (found := _COMMAND.match(clause.strip())) and (found["v1"] or found["v2"] or not found["a"]):
                thing = next(t for t in (found["a"], found["b"], found["c"], found["d"]) if t)
                if thing.split()[0] not in _NOT_A_THING and len(thing.split()) <= 4 and thing not in ("all", "them"):
                    return Ask(self.kind, "command", {"thing": thing}, text=text)
        if found := _READING.match(said):
            return Ask(self.kind, "reading", {"room": found["room"], "quantity": QUANTITIES[found["q"]]}, text=text)
        return None

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The rooms, a room's devices, or that no device there measures what was asked (else None)."""
        basis = "the device registry (the config's devices)"
        infos = facts.devices.infos() if facts.devices is not None else []
        rooms: dict[str, list[DeviceInfo]] = defaultdict(list)
        for info in infos:
            rooms[_room(info)].append(info)
        named = sorted(r for r in rooms if r)
        if ask.what == "state":  # a thing none of the devices is: said so, with what there is
            thing = str(ask.details["thing"])
            if not infos or names_a_device(thing, infos):
                return None  # one of the devices (or its room): the device path reads it
            return Answer(f"I have no {thing} here, so I can't tell. {devices_by_room(facts)}", basis, self.kind)
        if ask.what == "command":  # a request to a thing none of the devices is: said so, nothing done
            thing = str(ask.details["thing"])
            if not infos or names_a_device(thing, infos):
                return None  # one of the devices (or its room): the device path acts on it
            return Answer(f"I have no {thing} here, so I did nothing. {devices_by_room(facts)}", basis, self.kind)
        if ask.what == "rooms":
            if not named:
                return Answer("I know no rooms: no device has a room in the config.", basis, self.kind)
            return Answer(f"I know {len(named)} rooms: " + ", ".join(named) + ".", basis, self.kind)
        room = " ".join(str(ask.details.get("room", "")).split())
        if ask.what == "room":
            if room not in rooms:
                return None  # not a room of the appliance's: "what is in the news" is no room
            names = ", ".join(_label(i) for i in sorted(rooms[room], key=lambda i: i.name))
            return Answer(f"In the {room}: {names}.", basis, self.kind)
        quantity = str(ask.details.get("quantity"))
        if room not in rooms:
            if not named:
                return None
            return Answer(
                f"I can't tell the {quantity} in the {room}: I have no devices there (I know: {', '.join(named)}).",
                basis,
                self.kind,
            )
        if any(quantity in i.quantities for i in rooms[room]):
            return None  # a device there reads it: the device path answers with the reading
        here = ", ".join(_label(i) for i in sorted(rooms[room], key=lambda i: i.name))
        return Answer(
            f"I can't tell the {quantity} in the {room}: nothing there measures it (there I have {here}).",
            basis,
            self.kind,
        )


HOUSE = House()
