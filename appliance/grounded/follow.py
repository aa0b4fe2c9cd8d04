"""Follow-ups that only name another day: "and tomorrow?", "ok what about tmrw", "same for saturday?".

Such a message asks the chat's earlier question again of the day it names ("will it rain today?" then "and
tomorrow?" is "will it rain tomorrow?"); :class:`appliance.grounded.turn.Grounding` asks it of the topic that
took the earlier question, and of no other (the schedules' "what about tomorrow" is not the weather's).
"""

from __future__ import annotations

import re

from appliance.grounded.base import plain, said

_PART = r"(?: (?:morning|afternoon|evening|night))?"
_DAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_WHEN = (
    rf"(?:today|tonight|the day after tomorrow|tomorrow{_PART}|this (?:morning|afternoon|evening|weekend)"
    rf"|(?:at |on |over )?the weekend|next week|(?:on |next |this )?{_DAY}{_PART})"
)
_FOLLOW = re.compile(
    rf"(?:(?:and )?(?:what|how) about|and(?: for)?|same for|what of|and what of|and on)? ?(?P<when>{_WHEN})"
)
_WHEN_IN = re.compile(rf"\b{_WHEN}\b")


def follows(text: str) -> bool:
    """Whether ``text`` only names another day, as a follow-up does ("and tomorrow?", "what about tmrw")."""
    return _FOLLOW.fullmatch(said(plain(text) or text)) is not None


def again(text: str, earlier: str) -> str:
    """The earlier question asked of the day the follow-up ``text`` names: its day replaced, or the day added."""
    found = _FOLLOW.fullmatch(said(plain(text) or text))
    assert found is not None
    before = said(earlier)
    when = found["when"]
    return _WHEN_IN.sub(when, before, count=1) if _WHEN_IN.search(before) else f"{before} {when}"
