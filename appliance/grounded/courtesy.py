"""Thanks and goodbyes, answered in kind without a model: "ok thanks" is "You're welcome.".

The packaged 135M answered "ok thanks" with a memory it had been shown ("The key to the garden shed is under the
flowerpot by the door.") and, in a new chat, "I'm sorry for your loss. I'll make sure to remember that in the
future." (a README walk). A courtesy has one right answer, and it needs no model on any board.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from appliance.grounded.base import Answer, Ask, Facts

_THANKS = r"(?:thanks|thank you|thank u|thx|ty|cheers|ta|much appreciated|appreciate it)"
_FINE = r"(?:ok|okay|great|cool|nice|perfect|lovely|brilliant|awesome|got it|good|alright|all right)"
_WHO = r"(?: (?:a lot|so much|very much|again|mate|pico|buddy))*"
_BYE = r"(?:bye|bye bye|goodbye|good ?night|night night|see you(?: later| soon| tomorrow)?|see ya|later|take care)"
_COURTESY = re.compile(
    rf"^(?:(?:{_FINE})[ ,!.]*)*{_THANKS}{_WHO}(?:[ ,!.]+(?P<both>{_BYE})(?: (?:then|now|pico|mate))?)?[ !.]*$"
    rf"|^(?P<bye>{_BYE})(?: (?:then|now|pico|mate))?[ !.]*$"
)


@dataclass
class _Courtesy:
    """Thanks and goodbyes (see the module docstring)."""

    kind: str = "courtesy"
    overview: str = ""
    unsure: str = ""
    near_exact: bool = True
    examples: tuple[str, ...] = ()  # by words only: "thanks" is close in meaning to too much
    whole: bool = True  # the whole message only: "cheers. and when was the boiler serviced?" asks (GroundedDesk)

    def match(self, text: str) -> Ask | None:
        """An Ask for a message that is only thanks or a goodbye."""
        found = _COURTESY.match(" ".join(text.lower().replace("’", "'").split()))
        if found is None:
            return None
        return Ask(self.kind, "both" if found["both"] else "bye" if found["bye"] else "thanks", text=text)

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """In kind: "You're welcome." / "Bye for now."."""
        text = {"bye": "Bye for now.", "both": "You're welcome. Bye for now."}.get(ask.what, "You're welcome.")
        return Answer(text, "a courtesy", self.kind)


COURTESY = _Courtesy()
