"""Thanks and goodbyes, answered in kind without a model: "ok thanks" is "You're welcome.".

The packaged 135M answered "ok thanks" with a memory it had been shown ("The key to the garden shed is under the
flowerpot by the door.") and, in a new chat, "I'm sorry for your loss. I'll make sure to remember that in the
future." (a README walk). A courtesy has one right answer, and it needs no model on any board.

An acknowledgement ("perfect", "got it") and a sign-off ("no that's it", "cheers, that's all") are courtesies too:
the 135M read a memory back to each of them, and took "cool" for a question about the temperature (README walk 6).
None of these runs while a question of ours waits for its answer (the turn asks the grounding only then): there,
"ok" is a yes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults

_THANKS = r"(?:thanks|thank you|thank u|thx|ty|cheers|ta|much appreciated|appreciate it)"
_FINE = r"(?:ok|okay|great|cool|nice|perfect|lovely|brilliant|awesome|got it|good|alright|all right)"
_WHO = r"(?: (?:a lot|so much|very much|again|mate|pico|buddy))*"
_BYE = r"(?:bye|bye bye|goodbye|good ?night|night night|see you(?: later| soon| tomorrow)?|see ya|later|take care)"
_NOTED = (
    rf"(?:(?:that'?s |that is |how |very |really |so )?(?:{_FINE}|fine|sweet|excellent|amazing|helpful|handy|useful)"
    r"(?: then| stuff| one| news)?|sounds good|sure|noted|understood|will do|no worries|no problem|that works)"
)
_DONE = (
    r"(?:that'?s (?:it|all|everything)(?: for now| for today| i (?:wanted|needed)(?: to know)?)?"
    r"|that will be all|that'?ll be all|nothing else"
    r"|(?:i'?m |we'?re )?all (?:good|set)|i'?m good|no more questions|no thanks|no thank you|nothing(?: for now)?)"
)
_LATER = rf"(?:[ ,!.]+(?:{_THANKS}{_WHO}))?(?:[ ,!.]+(?P<done_bye>{_BYE})(?: (?:then|now|pico|mate))?)?"
_COURTESY = re.compile(
    rf"^(?:(?:{_NOTED})[ ,!.]*)*{_THANKS}{_WHO}(?:[ ,!.]+(?P<both>{_BYE})(?: (?:then|now|pico|mate))?)?[ !.]*$"
    rf"|^(?P<bye>{_BYE})(?: (?:then|now|pico|mate))?[ !.]*$"
    rf"|^(?:no[ ,!.]+)?(?:(?:{_NOTED}|{_THANKS}{_WHO})[ ,!.]+)*(?P<done>{_DONE}){_LATER}[ !.]*$"
    rf"|^(?P<noted>(?:{_NOTED})(?:[ ,!.]+(?:{_NOTED}))*)[ !.]*$"
)
_SAY = {
    "thanks": "You're welcome.",
    "bye": "Bye for now.",
    "both": "You're welcome. Bye for now.",
    "done": "Okay. I'm here if you need anything.",
    "done_bye": "Okay. Bye for now.",
    "noted": "Okay.",
}


@dataclass
class _Courtesy(TopicDefaults):
    """Thanks and goodbyes (see the module docstring)."""

    kind: str = "courtesy"
    near_exact: bool = True
    whole: bool = True  # the whole message only: "cheers. and when was the boiler serviced?" asks (GroundedDesk)

    def match(self, text: str) -> Ask | None:
        """An Ask for a message that is only thanks or a goodbye."""
        found = _COURTESY.match(" ".join(text.lower().replace("’", "'").split()))
        if found is None:
            return None
        said = next((kind for kind in ("both", "bye", "done_bye", "done", "noted") if found[kind]), "thanks")
        return Ask(self.kind, said, text=text)

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """In kind: "You're welcome." / "Bye for now." / "Okay."."""
        return Answer(_SAY[ask.what], "a courtesy", self.kind)


COURTESY = _Courtesy()
