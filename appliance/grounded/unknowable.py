"""What nobody on the Pi can know: the future (who will win, lottery numbers, prices tomorrow), a mind, and
the news when no tool reaches it. Declined in one honest sentence, never guessed.
"""

from __future__ import annotations

import re

from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults
from appliance.grounded.base import said as _said

_FUTURE = re.compile(
    r"^(?:who|which (?:team|party|side|horse|player))(?: will|'ll|'s going to| is going to|'s gonna| is gonna| gonna)"
    r" win\b"
    r"|\b(?:lottery|lotto|euromillions|powerball)\b.*\b(?:numbers?|results?|draw|win|winners?|jackpot)\b"
    r"|\b(?:numbers?|results?|winners?) .*\b(?:lottery|lotto|euromillions|powerball)\b"
    r"|\b(?:lottery|lotto|euromillions|powerball) (?:numbers?|results?)\b|\bwinning numbers\b"
    r"|\bwin (?:the )?(?:lottery|lotto|euromillions|powerball|jackpot)\b"
    r"|^(?:what|how much) will (?:the )?(?:stock|stocks|shares?|bitcoin|price|market|dollar|euro)\b"
    r"|^will (?:the )?(?:stock market|stock|stocks|shares?|bitcoin|market|prices?|dollar|euro|housing market)"
    r"(?: prices?)? (?:go up|go down|rise|fall|crash|drop)\b"
    r"|^what (?:will|is going to) happen (?:tomorrow|next (?:week|year)|in the future)\b"
    r"|^(?:when|how) will i die\b|^what am i thinking\b|^(?:read|can you read) my mind\b"
    r"|^will i (?:get|win|pass|find|meet|be|ever|have|lose|marry)\b|^am i going to (?:get|win|pass|find|meet|be)\b"
    r"|^will (?:my|the) (?:train|bus|flight|plane|package|parcel|delivery) be (?:late|delayed|on time)\b"
    r"|\b(?:number|word|card|colour|color) (?:between \d+ and \d+ )?am i thinking (?:of|about)\b"
    r"|^what did i dream\b|\bguess what i(?:'m| am) thinking\b"
    r"|\bguess (?:what|which) (?:number|word|card|colou?r|animal) i(?:'m| am) thinking (?:of|about)\b"
    r"|^(?:what|who) will (?:i|we|my \w+|knock|call|come|visit)\b.*\b(?:tomorrow|tonight|next \w+|later|one day)$"
)
# what no sensor here sees: the person, a place away from home
_UNSEEN = re.compile(
    r"^what (?:colou?r \w+ )?am i (?:wearing|holding|eating|drinking|looking at)\b"
    r"|^what(?:'s| is) in my (?:hand|pocket)\b"
    r"|^how many (?:people|cars|customers) are (?:in|at|on) .+ (?:right now|now|at the moment)$"
    r"|\bguess what i (?:had|ate|did|bought|got|cooked|made|wore|drank)\b"
    r"|^what did i (?:have|eat|cook|buy|wear|drink) (?:for|this|last|yesterday|today)\b"
)
_NEWS = re.compile(r"^(?:what(?:'s| is| are) (?:the )?(?:latest |today's )?(?:news|headlines)|any news)(?: today)?$")


class Unknowable(TopicDefaults):
    """Questions whose answer no one here can know."""

    kind: str = "unknowable"
    unsure: str = ""  # near it is also the past ("who won the world cup in 2018"): no sentence fits both

    def match(self, text: str) -> Ask | None:
        """An Ask for questions about the future or a mind, or the news."""
        said = _said(text)
        if _FUTURE.search(said):
            return Ask(self.kind, "future", text=text)
        if _UNSEEN.search(said):
            return Ask(self.kind, "unseen", text=text)
        if _NEWS.match(said):
            return Ask(self.kind, "news", text=text)
        return None

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """One honest sentence; the news is left to a search tool when one is on."""
        if ask.what == "news":
            if "web_search" in facts.tools or facts.cloud_allowed:
                return None  # a tool (or the cloud) may reach the news: the model
            return Answer(
                "I have no news source here: I can't read the news (turn on tools.web_search in the config).",
                "no news source is configured",
                self.kind,
            )
        if ask.by_meaning:
            return None  # only the words rule is sure enough to decline
        if ask.what == "unseen":
            return Answer(
                "I can't know that: nothing here can see it (I only know my devices' readings), and I won't guess.",
                "no sensor here sees it",
                self.kind,
            )
        return Answer(
            "I can't know that: nobody can tell the future, and I won't make up an answer.",
            "the question is about something no one can know yet",
            self.kind,
        )


UNKNOWABLE = Unknowable()
