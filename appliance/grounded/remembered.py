"""What it remembers: "where did I write the wifi password", "what's my name", "do you remember my bike's lock code".

The stored fact is quoted as it was stored, with when, and only when it holds the words asked about
(a memory search always returns its nearest memories; nearest is not the same as about). Nothing
stored about it: it says so, and never fills the gap with a guess. Only the people the Pi knows
hear its memories (``Facts.memory`` is None for anyone else, and the answer says why).
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime

from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults, plain
from appliance.grounded.base import said as _said
from appliance.memory.db import StoredMessage

_WHERE = re.compile(
    r"^where (?:did|do|have) (?:i|we) (?:write|written|put|leave|left|store|stored|keep|kept|save|saved|note|noted"
    r"|hide|hid) (?:down )?(?:the |my |our )?(.+?)(?: down| again)?$"
    r"|^what did i (?:have|eat|drink|cook|make) (?:for )?(.+?)(?: (?:this morning|today|last night|yesterday))?$"
)
_MY = re.compile(r"^(?:what|when|where|who)(?:'s| is| are| was| were) (?:my|our) (.+)$")
_REMEMBER = re.compile(
    r"^(?:do you|can you|did you) (?:still )?(?:remember|recall|know)"
    r"(?! (?:to|that|how|what|when|where|who|whether|if|why|which|any|anything|a lot|the way)\b)"
    r" (?:my |our |the |what i (?:told|said to) you about )?"
    r"(?:my |our |the )?(.+)$"
    r"|^what do you (?:know|remember) about (?:my |our |the )?(.+)$"
    r"|^did i (?:ever )?tell you (?:about )?(?:my |our |the )?(.+)$"
    r"|^what did i (?:tell you|say|write down|note) about (?:my |our |the )?(.+)$"
    r"|^what did i (?:say|tell you) (?:my |our )(.+?) (?:was|is|were|are)$"
    r"|^(?:do you|can you|could you|would you) (?:still )?(?:remember|recall|know|tell me|remind me)"
    r" (?:what|where|when|who) (?:my|our) (.+?) (?:is|are|was|were)$"
    r"|^(?:(?:can|could|would) you )?(?:please )?remind me (?:of )?(?:the (?:name|number|address|date) of )?"
    r"(?:my|our) (.+?)(?: again)?$"  # "could you remind me of the name of our dentist?"
    r"|^(?:(?:can|could|would) you )?(?:please )?remind me (?:when|what|where|who) (?:the |my |our )?(.+?)"
    r" (?:is|are|was|were)(?: due| on| again)?$"  # "remind me when the car's MOT is due"
)
_AGE = re.compile(r"^(?:how old am i|what(?:'s| is) my age|when was i born|when is my birthday)$")
_WHO_AM_I = re.compile(r"^(?:who am i|do you know (?:who i am|my name)|what(?:'s| is) my name|what am i called)$")
# "my ..." that other topics answer (the agenda, the Pi, devices) or that no memory holds
_NOT_MINE = re.compile(
    r"^(?:(?:next|upcoming|last|first|previous) )?"
    r"(?:schedule|reminders?|tasks?|agenda|plans?|appointments?|calendar|devices?|lights?|fan|ip|ip address"
    r"|cpu|temperature|memory|disk|battery|question|last question|previous question|message|order|location)\b"
)
# fmt: off
_STOP = frozenset({
    "the", "a", "an", "my", "our", "your", "of", "to", "in", "on", "at", "for", "is", "are", "was", "were", "do",
    "did", "i", "me", "you", "it", "that", "this", "what", "where", "when", "who", "about", "down", "there", "am",
    "and", "or", "with", "from", "by",
})
# fmt: on
QUOTE = 240
# A question that asks for a kind of thing and shares only half its words with a memory is answered by it at this
# cosine (MiniLM) to the whole question: the everyday sets' such questions reach 0.68 to 0.78 of their memory;
# "how many calories in a biscuit?" and "how much food should a dog eat?" reach 0.60 of Biscuit's meals.
CLOSE = 0.65
LOOK_BACK = 40  # messages of this chat looked through for what was said but is not a memory yet
_NAME_SAID = re.compile(r"\b(?:my name is|my name's|i am called|i'm called|call me|name is)\b")


def _words(subject: str) -> list[str]:
    words = [w for w in re.findall(r"[a-z0-9]+", subject.lower()) if w not in _STOP and w != "s"]
    # "my sister's name": what was said is "my sister Anna ...": the name is looked for by whose it is
    return [w for w in words if w != "name"] if len(words) > 1 and "name" in words else words


def _count(text: str, words: list[str]) -> int:
    """How many of the words (by their first five letters, at the start of a word) a text holds."""
    lowered = text.lower()
    return sum(re.search(rf"\b{re.escape(w[:5])}", lowered) is not None for w in words)


def _holds(text: str, words: list[str]) -> bool:
    """Whether a memory's text is about every word asked (a word's first five letters: "passwords", "password")."""
    lowered = text.lower()
    return bool(words) and all(w[:5] in lowered for w in words)


class Remembered(TopicDefaults):
    """Questions about what the owner told the assistant to remember."""

    kind: str = "memory"
    unsure: str = (
        "I'm not sure what you want me to recall, and I won't guess: nothing I have stored answers it exactly "
        "(/memory WORDS searches what I remember)."
    )

    def match(self, text: str) -> Ask | None:
        """An Ask for questions about a stored fact of the owner's."""
        said = _said(text)
        if _WHO_AM_I.match(said):
            return Ask(self.kind, "name", {"words": ["name"]}, text=text)
        if _AGE.match(said):
            return Ask(self.kind, "fact", {"words": ["born"], "subject": "age or birthday"}, text=text)
        for rule in (_WHERE, _MY, _REMEMBER):
            found = rule.match(said)
            if found is None:
                continue
            subject = next(g for g in found.groups() if g)
            if rule is not _WHERE and _NOT_MINE.match(subject):
                return None
            words = _words(subject)
            if words:
                return Ask(self.kind, "fact", {"words": words, "subject": subject}, text=text)
        return None

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The stored fact asked about, quoted with when it was stored; or that nothing is stored."""
        if ask.by_meaning and not ask.details:
            return None  # a paraphrase by meaning names no subject to look for: the model with recall
        basis = "my memory (facts you told me)"
        if facts.memory is None:
            return Answer("I share what I remember only with the people I know.", basis, self.kind)
        basis = "my memory and this chat"
        words = list(ask.details["words"])
        subject = "name" if ask.what == "name" else str(ask.details.get("subject", " ".join(words)))
        query = "my name is" if ask.what == "name" else " ".join(words)
        hits = await asyncio.to_thread(facts.memory.store.search, query, 8)
        wanted = ["name"] if ask.what == "name" else words
        found = [getattr(h, "memory", h) for h in hits if _holds(getattr(h, "memory", h).text, wanted)]
        if ask.what == "name":
            found = [m for m in found if _NAME_SAID.search(m.text.lower())]
        if not found:
            said = await self._said_here(facts, wanted, name=ask.what == "name")
            if said is not None:
                when = datetime.fromtimestamp(said.created_at, facts.now().tzinfo)
                return Answer(f"You told me in this chat at {when:%H:%M}: {_quote(said.content)}", basis, self.kind)
            return Answer(
                f"You haven't told me your {subject}: I have nothing about it in my memory."
                if ask.what == "name" or not ask.text.lower().startswith("where")
                else f"I have nothing about {subject} in my memory: you haven't told me where it is.",
                basis,
                self.kind,
            )
        best = found[0]
        when = datetime.fromtimestamp(best.created_at, facts.now().tzinfo)
        quoted = _quote(best.text)
        more = f" (and {len(found) - 1} more about it: /memory {' '.join(words)})" if len(found) > 1 else ""
        return Answer(f"You told me on {when:%a} {when.day} {when:%b %Y}: {quoted}{more}", basis, self.kind)

    @staticmethod
    async def _said_here(facts: Facts, words: list[str], *, name: bool) -> StoredMessage | None:
        """The newest message of the owner's in this chat that says it (not yet drawn into a memory)."""
        if facts.db is None or facts.conversation is None:
            return None
        stored = await facts.db.call(facts.db.recent_messages, facts.conversation, LOOK_BACK)
        for message in reversed(stored):
            text = message.content.lower()
            if message.role != "user" or "?" in text:
                continue
            if (_NAME_SAID.search(text) is not None) if name else _holds(text, words):
                return message
        return None


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return f"“{text[:QUOTE]}…”" if len(text) > QUOTE else f"“{text}”"


class Lookup(TopicDefaults):
    """Any other question a stored memory answers word for word: "where's the spare key?", "who serviced the boiler?".

    Tried last, by words only: a question whose every content word (two at least; all but one of three or more)
    is in one memory gets that memory quoted. A question that asks for a kind of thing (who: a name; when: a
    date; where: a place; how many, what size: a number) needs only half its words (one at least), in a memory
    that holds such a thing: "who was the guy that did the boiler" is "The boiler was last serviced in March by
    Mark Peters". The question may sit in a later clause, its subject in the first: "ella needs new shoes, what
    size is she now?". Anything else goes on (to the model: "where is Paris?" is no memory's).
    """

    kind: str = "recall"

    def match(self, text: str) -> Ask | None:
        """An Ask for a question with two content words or more (one, for a question asking a kind of thing)."""
        said = _said(text)
        asking = next((c for c in _PARTS.split(said) if _WH.match(c.strip())), None)
        if asking is None:
            return None
        kind = next((k for k, rule in _KINDS if rule.match(asking.strip())), "")
        words = [w for w in _words(said) if w not in _QUESTION_WORDS and (not kind or w not in _SLOT_WORDS)]
        enough = 1 if kind and words and max(map(len, words)) >= 4 else 2
        return Ask(self.kind, "lookup", {"words": words, "kind": kind}, text=text) if len(words) >= enough else None

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The memory holding every word asked (half, holding the kind of thing asked for), quoted with its date;
        else None."""
        if facts.memory is None or not ask.details:
            return None
        words = list(ask.details["words"])
        kind = str(ask.details.get("kind", ""))
        hits = await asyncio.to_thread(facts.memory.store.search, " ".join(words), 5)
        # every word, or all but one of three or more ("what size shoes does Ella take": no "take" in the memory)
        enough = len(words) - (1 if len(words) >= 3 else 0)
        memories = [m for m in (getattr(h, "memory", h) for h in hits) if not m.text.rstrip().endswith("?")]
        found = [m for m in memories if _count(m.text, words) >= enough]  # a question stored is no answer
        # a memory without the kind of thing asked for answers nothing: "how much does a boiler service cost?"
        found = [m for m in found if not kind or _HOLDS[kind](m.text)]
        if not found and kind:
            # half the words, in a memory holding the kind of thing asked for and close to the whole question in
            # meaning: "how much food should a dog eat?" shares "food" and "dog" with Biscuit's meals, at 0.60
            hits = await asyncio.to_thread(facts.memory.store.search, plain(ask.text) or ask.text, 5)
            half = max(1, (len(words) + 1) // 2)
            close = [h.memory for h in hits if h.distance is not None and 1.0 - h.distance >= CLOSE]
            found = [m for m in close if _count(m.text, words) >= half and _HOLDS[kind](m.text)]
        if not found:
            return None
        when = datetime.fromtimestamp(found[0].created_at, facts.now().tzinfo)
        return Answer(
            f"You told me on {when:%a} {when.day} {when:%b %Y}: {_quote(found[0].text)}", "my memory", "recall"
        )


_WH = re.compile(r"^(?:what|what's|where|where's|who|who's|whose|when|when's|which|how)\b")
_PARTS = re.compile(r"[,;:.]\s+|\s+[-–—]\s+")
_QUESTION_WORDS = frozenset(
    {"what's", "where's", "who's", "when's", "whose", "which", "how", "does", "has", "have", "s"}
    | {"last", "time", "again", "ago", "recently", "meant", "supposed", "many", "much", "actually", "exactly"}
    | {"she", "he", "her", "him", "his", "they", "them", "their", "its", "now", "still", "can", "tell"}
)
# The kinds of thing a question asks for, and how a memory holds one.
_KINDS = (
    ("person", re.compile(r"^(?:who|who's|whose)\b")),
    ("number", re.compile(r"^how (?:many|much|old|long|big|tall)\b|^what (?:size|number|amount)\b")),
    ("date", re.compile(r"^(?:when|when's)\b|^what (?:date|day)\b")),
    ("place", re.compile(r"^(?:where|where's)\b")),
)
_SLOT_WORDS = frozenset({"guy", "person", "man", "woman", "bloke", "chap", "lady", "fellow", "someone", "somebody"})
_SLOT_WORDS |= frozenset({"people", "size", "number", "amount", "date", "day", "place", "name", "old", "long"})
_MONTHS = r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:tember)?|oct(?:ober)?"
_MONTHS += r"|nov(?:ember)?|dec(?:ember)?|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_HOLDS = {
    "person": lambda text: re.search(r"(?<=[a-z,] )[A-Z][a-z]+", text) is not None,  # a name, not the first word
    "number": lambda text: re.search(r"\d", text) is not None,
    "date": lambda text: re.search(rf"\d|\b(?:{_MONTHS})\b", text, re.IGNORECASE) is not None,
    "place": lambda text: (
        re.search(r"\b(?:under|on|in|behind|at|by|inside|beside|near|next to|above|below)\b", text) is not None
    ),
}

REMEMBERED = Remembered()
LOOKUP = Lookup()
