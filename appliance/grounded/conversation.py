"""The conversation itself: "what did I just ask", "what did you say about the fan", "repeat that".

Answered from the stored messages of this chat (the current message is not stored yet when the desk
runs), quoted as they were; a conversation with nothing before says so.
"""

from __future__ import annotations

import re
from datetime import datetime

from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults
from appliance.grounded.base import said as _said
from appliance.memory.db import StoredMessage

LOOK_BACK = 40  # messages of this chat searched for "what did you say about X"
QUOTE = 300  # characters of a message quoted

_MINE = re.compile(
    r"^what (?:did|was it) i (?:just |last |first )?(?:ask|say|tell you|asked|said)\b"
    r"(?: (?:you|to you))?(?: (?:earlier|before|just now|a (?:moment|minute|second|few minutes|while) ago|last|first"
    r"|today|at first|previously))*$"
    r"|^what (?:was|were) my (?:last|previous|first|earlier) (?:question|message|questions|messages)\b"
    r"|^what have i (?:asked|said|told you)(?: (?:so far|today|you))*$"
    r"|^remind me what i (?:just )?(?:asked|said)(?: (?:you|earlier|before|just now|a moment ago))*$"
    r"|^what was the (?:first|last) (?:thing|question) i (?:asked|said)(?: (?:you|today|in this chat))*$"
    r"|^(?:remind me )?what (?:did|were) we (?:just )?(?:talk|talking|speak|speaking) about\b"
    r"|^what have we (?:talked|spoken) about\b"
)
_YOURS = re.compile(
    r"^what (?:did|was it) you (?:just |last )?(?:say|answer|reply|write|tell me|said)"
    r"(?: (?:earlier|before|just now|a moment ago|last))*$"
    r"|^what was your (?:last|previous) (?:answer|reply|message)\b"
    r"|^what did you say (?:the answer|it|that) was\b|^what was (?:the|your) answer(?: again)?$"
    r"|^(?:can you |could you |please )?(?:repeat|say) (?:that|it|your (?:last )?answer|what you (?:just )?said)"
    r"(?: again)?(?: please)?$"
    r"|^come again$|^what was that(?: again)?$|^(?:i )?(?:didn't|did not) catch (?:it|that)$"
    r"|^(?:wait )?what (?:number|time|temperature|figure|name|day|date|amount|percentage|value)"
    r" (?:was it|did you (?:just )?(?:say|give me|tell me|said))(?: (?:again|earlier|before|just now|a moment ago))*$"
)
_COUNT = re.compile(
    r"^how many (?:questions|messages|things) (?:have i|did i) (?:asked?|sent|said)(?: (?:you|today))*$"
)
_ABOUT = re.compile(
    r"^what (?:did|have) you (?:say|said|tell me|told me|answer|answered|reply|replied) (?:earlier |before )?"
    r"(?:about|to my question about|to (?:my|the) question on|when i asked about) (.+)$"
)
_ABOUT_MINE = re.compile(
    r"^what (?:did|have) i (?:just )?(?:say|said|tell you|told you|ask|asked|mention|mentioned) (?:you )?about (.+)$"
    r"|^(?:where|when|what time|who|how many|how much) did i (?:say|tell you|mention) (.+)$"
)


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return f"“{text[:QUOTE]}…”" if len(text) > QUOTE else f"“{text}”"


def _when(at: float, now: datetime) -> str:
    then = datetime.fromtimestamp(at, now.tzinfo)
    return f"at {then:%H:%M}" if then.date() == now.date() else f"on {then:%a} {then.day} {then:%b} at {then:%H:%M}"


class Conversation(TopicDefaults):
    """Questions about this chat's own messages."""

    kind: str = "conversation"
    overview: str = "exchange"  # the last question and the answer to it

    def match(self, text: str) -> Ask | None:
        """An Ask for questions about this conversation's earlier messages."""
        said = _said(text)
        if found := _ABOUT.match(said):
            return Ask(self.kind, "yours_about", {"words": found.group(1)}, text=text)
        if found := _ABOUT_MINE.match(said):
            return Ask(self.kind, "mine_about", {"words": found.group(1) or found.group(2)}, text=text)
        if _COUNT.match(said):
            return Ask(self.kind, "count", text=text)
        if _YOURS.match(said):
            return Ask(self.kind, "yours", text=text)
        if _MINE.match(said):
            every = re.search(r"\b(?:we|have|so far|questions)\b", said)
            first = re.search(r"\bfirst\b", said)
            return Ask(self.kind, "all_mine" if every else "first" if first else "mine", text=text)
        return None

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The earlier message(s) asked for, quoted, with when they were said."""
        if facts.db is None or facts.conversation is None:
            return None
        stored: list[StoredMessage] = await facts.db.call(facts.db.recent_messages, facts.conversation, LOOK_BACK)
        basis = "this chat's stored messages"
        now = facts.now()
        mine = [m for m in stored if m.role == "user"]
        yours = [m for m in stored if m.role == "assistant"]
        what = ask.what or "exchange"  # by meaning: the last question and its answer
        if what in ("mine", "all_mine", "first", "count") and not mine:
            return Answer("You haven't asked me anything before this in this chat.", basis, self.kind)
        if what == "count":
            asked = [m for m in mine if _asks(m.content)]
            return Answer(
                f"In this chat you've sent me {len(mine)} messages, {len(asked)} of them questions.", basis, self.kind
            )
        if what in ("mine", "first"):
            asked = [m for m in mine if _asks(m.content)] or mine  # "thanks" is no question
            last = mine[0] if what == "first" else asked[-1]
            return Answer(f"You asked {_when(last.created_at, now)}: {_quote(last.content)}", basis, self.kind)
        if what == "all_mine":
            listed = "; ".join(_quote(m.content) for m in mine[-5:])
            more = f" (the last 5 of {len(mine)})" if len(mine) > 5 else ""
            return Answer(f"In this chat you asked{more}: {listed}", basis, self.kind)
        if what == "exchange":
            if not mine:
                return Answer("You haven't asked me anything before this in this chat.", basis, self.kind)
            asked = [m for m in mine if _asks(m.content)] or mine
            answer = next((m for m in yours if m.id > asked[-1].id), None)
            said = f"You asked {_when(asked[-1].created_at, now)}: {_quote(asked[-1].content)}"
            return Answer(said + (f"; I answered: {_quote(answer.content)}" if answer else ""), basis, self.kind)
        if what == "yours":
            if not yours:
                return Answer("I haven't said anything before this in this chat.", basis, self.kind)
            last = yours[-1]
            return Answer(f"I said {_when(last.created_at, now)}: {_quote(last.content)}", basis, self.kind)
        words = [w for w in re.findall(r"[a-z0-9]+", str(ask.details.get("words", ""))) if w not in _STOP]
        pool = yours if what == "yours_about" else mine
        who = "I" if what == "yours_about" else "You"
        about = " ".join(words) or "that"
        hits = [m for m in pool if words and all(w in m.content.lower() for w in words)]
        if not hits and what == "yours_about":  # my answer to a message of yours that named it
            named = {m.id for m in mine if words and all(w in m.content.lower() for w in words)}
            hits = [m for m in yours if any(a < m.id and not any(a < y.id < m.id for y in yours) for a in named)]
        if not hits:
            if what == "mine_about":
                return None  # what you told me about it may be a memory: the memory topic looks
            return Answer(
                f"In this chat I said nothing about {about} (the last {LOOK_BACK} messages).", basis, self.kind
            )
        last = hits[-1]
        return Answer(f"{who} said {_when(last.created_at, now)}: {_quote(last.content)}", basis, self.kind)


def _asks(text: str) -> bool:
    """Whether a message asks something (a question mark, or opens like a question or a request)."""
    lowered = text.strip().lower()
    return lowered.endswith("?") or bool(
        re.match(r"(?:what|which|who|when|where|why|how|is|are|can|could|do|does|will|tell|show)\b", lowered)
    )


_STOP = frozenset({"the", "a", "an", "my", "your", "this", "that", "it", "of", "to", "in", "on", "me", "you", "i"})

CONVERSATION = Conversation()
