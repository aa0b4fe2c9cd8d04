"""The guard on every local reply: what a small model gets wrong in form is stopped, trimmed and never shown.

SmolLM2-135M, the packaged model, goes wrong in a handful of recognisable ways: it repeats a sentence
until the token limit, lists tool signatures it made up (``lights_set(name: string)``), recites its own
system prompt or tool instructions, signs off ("Best, Pablo") and rambles until it is cut. None of that
is an answer. The guard reads the reply a *segment* (a sentence, or a line) at a time and cuts it where
the first of these begins:

- ``loop``: a sentence of three words or more said again (cut before it), the same few words over and
  over back to back, or a run of :data:`REPEAT_RUN` words that occurred before (cut where they begin again);
- ``tool_syntax``: ``<tool_call>`` and its kin, a tool call's JSON, or a signature ``name(arg: type)`` /
  ``snake_case(...)`` in plain text (code in backticks or fences is code, and passes);
- ``leak``: :data:`LEAK_RUN` or more words in a row, verbatim from the prompt's instructions (SOUL.md,
  the skills, the tool protocol and descriptions: what the caller passes; USER.md is the owner's, and a
  reply may quote it), cut at its first word;
- ``sign_off``: "Best regards,", "Cheers, Max", "[Your Name]" after the answer;
- ``claim``: on a model that guesses (``claims``), a time, a date, the weather, a device, a schedule, a memory
  or the Pi's figures stated (:mod:`appliance.agent.claims`): the whole reply goes, for :data:`GUESSED`;

and a reply cut by the token limit (``ramble``) loses its unfinished last segment. Everything from the cut
on is dropped: what follows a loop or a recited prompt is never the answer. A cut with no word of its
segment before it goes to the segment's start, and a short lead-in ("Here is what I can do:") goes with
what it led to.

Streaming (:class:`GuardedStream`) shows a segment once it is whole and passed; of a long one still being
written, all but its last :data:`REPEAT_RUN` words (a loop or a leak found later begins no earlier than
that), so long sentences stream. A lead-in, and trailing words that are the prompt's (a leak may be
starting), wait for what follows; nothing shows before three good words. The first trip asks the caller to
stop the generation: the rest would be dropped anyway. What was shown is a prefix of :meth:`ReplyGuard.check`
on the whole reply (the same rules on the same prefixes); should a cut ever fall before it, the caller is
told to replace it (a reroute).

Cost, measured on the x86 build machine (a Pi 4 is some 3-5x slower): building the guard from a prompt
with every built-in tool ~0.8 ms; a 72-word reply fed in 4-character pieces ~3 ms in all (~33 µs a piece,
against tens of milliseconds a token takes to decode on a Pi).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from appliance.agent.claims import claim

TripKind = Literal["loop", "tool_syntax", "leak", "sign_off", "ramble", "claim"]

DECLINE = "I could not answer that well with the small model on this Pi."
GUESSED = "I can't tell that reliably: the small model on this Pi would only be guessing (/local asks it anyway)."
LEAK_NGRAM = 6  # prompt n-grams a reply's words are matched against
LEAK_RUN = 10  # words in a row from the prompt: a leak ("I am Pico, a private assistant ..." has 8)
REPEAT_RUN = 12  # words in a row said before: a loop even without a repeated sentence
CONTEXT = LEAK_RUN + LEAK_NGRAM + REPEAT_RUN  # words before a segment its checks look back on
MIN_SHOWN_WORDS = 3  # nothing is shown before this many good words (a lone "Sure!" before a trip is not an answer)

# What each trip means for the answer, in the words routing and the record use.
WORDS: dict[TripKind, str] = {
    "loop": "repeated itself",
    "tool_syntax": "wrote tool calls as text",
    "leak": "recited its own instructions",
    "sign_off": "signed off like a letter",
    "ramble": "ran to the length limit",
    "claim": "stated what it cannot know",
}
UNSURE: frozenset[TripKind] = frozenset({"loop", "tool_syntax", "leak", "claim"})  # the model lost its way: escalate

_FINISHED = (".", "!", "?", ")", '"', "'", "`", "*")
_WORD = re.compile(r"[a-z0-9]+", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_TOOL_MARKUP = re.compile(r"</?tool_(?:call|response)>|<\|im_(?:start|end)\|>|\{\s*\"name\"\s*:\s*\"", re.IGNORECASE)
_TYPES = r"(?:str|string|int|integer|float|number|bool|boolean|list|dict|object|array|type)"
_SIGNATURE = re.compile(
    rf"\b[A-Za-z_]\w*\s*\(\s*[A-Za-z_]\w*\s*:\s*{_TYPES}\b"  # name(arg: type
    r"|\b[a-z][a-z0-9]*_[a-z0-9_]+\s*\(",  # snake_case( in prose: a tool's name, real or made up
    re.IGNORECASE,
)
_CODE_LINE = re.compile(r"^\s*(?:def |async def |class |import |from \S+ import |>>> |\$ )")
_CLOSINGS = (
    r"best(?: wishes| regards)?|kind(?:est)? regards|warm(?:est)? regards|regards|sincerely(?: yours)?"
    r"|yours(?: truly| sincerely| faithfully)?|cheers|all the best|with love|love|take care|thanks again"
)
_SIGN_OFF = re.compile(rf"^\s*(?i:{_CLOSINGS})\s*[,!.]?\s*(?:[A-Z][\w.]*(?: [A-Z][\w.]*)?)?\s*[.!]?\s*$")
_SIGNATURE_LINE = re.compile(r"^\s*(?:(?:--|–|—)\s*[A-Z][a-z]+\s*$|(?i:\[your name\]|sent from my ))")


def words(text: str) -> list[str]:
    """The text's words as the guard compares them: lowercase letters and digits."""
    return [word.lower() for word in _WORD.findall(text)]


@dataclass(frozen=True)
class Segment:
    """One sentence or line of a reply: where it is, and whether it is code."""

    start: int
    end: int
    text: str
    code: bool  # inside a ``` fence, or the fence line itself


@dataclass(frozen=True)
class Trip:
    """What the guard found, and where the reply was cut."""

    kind: TripKind
    at: int  # the offset the good text ends at
    segment: str  # the first bad segment (for the log and tests), "" for a ramble

    @property
    def words(self) -> str:
        """For people: "repeated itself", "recited its own instructions"."""
        return WORDS[self.kind]


@dataclass(frozen=True)
class Guarded:
    """A reply after the guard: the text that may be shown and what was cut from it."""

    text: str
    trips: tuple[Trip, ...] = ()

    @property
    def nothing_left(self) -> bool:
        """Whether no answer remains: nothing, or too little to stand after a trip."""
        return not words(self.text) or (bool(self.trips) and len(words(self.text)) < MIN_SHOWN_WORDS)

    @property
    def unsure(self) -> str | None:
        """Why the answer cannot be trusted (the model lost its way), for routing; None when it may stand."""
        if self.nothing_left and self.trips:
            return self.trips[0].words
        lost = [trip for trip in self.trips if trip.kind in UNSURE]
        return lost[0].words if lost else None

    @property
    def decline(self) -> str:
        """The honest sentence shown when nothing is left of the reply."""
        return GUESSED if self.trips and self.trips[0].kind == "claim" else DECLINE


def segments(text: str, *, complete: bool) -> list[Segment]:
    """The text cut into sentences and lines; the last one only when ``complete`` or it has ended."""
    out: list[Segment] = []
    code = False
    start = 0
    position = 0
    while position < len(text):
        line_end = text.find("\n", position)
        line_end = len(text) if line_end < 0 else line_end
        line = text[position:line_end]
        if _FENCE.match(line) or code:
            fence = bool(_FENCE.match(line))
            if line_end < len(text):
                out.append(Segment(start, line_end + 1, text[start : line_end + 1], True))
                start = line_end + 1
            code = code != fence
            position = line_end + 1
            continue
        for match in _SENTENCE_END.finditer(text, position, line_end + 1):
            end = match.end()
            if out and not text[start:end].strip() and not out[-1].code:  # a line's end joins its last sentence
                out[-1] = Segment(out[-1].start, end, text[out[-1].start : end], False)
            else:
                out.append(Segment(start, end, text[start:end], False))
            start = end
        position = line_end + 1
    if start < len(text) and complete:
        out.append(Segment(start, len(text), text[start:], code))
    return out


class ReplyGuard:
    """The rules, with the prompt text a reply must not recite; one per turn, a stream per generation."""

    def __init__(self, prompt_texts: Iterable[str] = (), *, claims: bool = False) -> None:
        self.claims = claims  # the model guesses: a claim (appliance/agent/claims.py) trips the reply
        self._prompt: set[tuple[str, ...]] = set()
        self._prompt3: set[tuple[str, ...]] = set()
        for text in prompt_texts:
            said = words(text)
            self._prompt.update(tuple(said[i : i + LEAK_NGRAM]) for i in range(len(said) - LEAK_NGRAM + 1))
            self._prompt3.update(tuple(said[i : i + 3]) for i in range(len(said) - 2))

    def check(self, text: str, finish_reason: str = "stop", *, claims: bool = True) -> Guarded:
        """The whole reply judged: the good text and the trip that cut it (if any); ``claims``: False where this
        reply may state facts (written from a tool's result), though the guard reads claims."""
        judge = _Judge(self, text, claims=self.claims and claims)
        for segment in segments(text, complete=True):
            trip = judge.judge(segment)
            if trip is not None:
                return Guarded(judge.good_text(), (trip,))
        if finish_reason == "length" and not text.rstrip().endswith(_FINISHED):
            done = segments(text, complete=False)
            end = done[-1].end if done else 0
            if text[end:].strip():
                return Guarded(_lead_in_dropped(text, end, done[-1] if done else None), (Trip("ramble", end, ""),))
        return Guarded(text)

    def stream(self, *, claims: bool = True) -> GuardedStream:
        """A guard for one streaming generation (``claims``: as :meth:`check` takes it)."""
        return GuardedStream(self, claims=claims)

    def leak_run(self, said: Sequence[str], first: int) -> tuple[int, int]:
        """The longest run of prompt words (verbatim, in order) reaching word ``first`` or beyond: (length, start)."""
        covered = [False] * len(said)
        for i in range(max(0, first - LEAK_RUN - LEAK_NGRAM), len(said) - LEAK_NGRAM + 1):
            if tuple(said[i : i + LEAK_NGRAM]) in self._prompt:
                for j in range(i, i + LEAK_NGRAM):
                    covered[j] = True
        best = run = 0
        start = 0
        for i, hit in enumerate(covered):
            run = run + 1 if hit else 0
            if i >= first and run > best:
                best, start = run, i - run + 1
        return best, start

    def prompt_tail(self, said: Sequence[str]) -> int:
        """Where the trailing run of prompt words begins (its word index; ``len(said)`` when there is none)."""
        k = len(said) - 3
        while k >= 0 and tuple(said[k : k + 3]) in self._prompt3:
            k -= 1
        return k + 1 if k + 1 <= len(said) - 3 else len(said)


@dataclass
class _Judge:
    """Judges a reply's segments in order, remembering what came before; cuts at the word where it went wrong."""

    guard: ReplyGuard
    text: str
    claims: bool = False  # a claim trips the reply (appliance/agent/claims.py)
    good_end: int = 0  # the good text ends here (a character offset)
    last_good: Segment | None = None
    good: list[Segment] = field(default_factory=list)
    said: set[str] = field(default_factory=set)  # the sentences so far, as words
    spans: list[tuple[str, int]] = field(default_factory=list)  # the good text's words and where they start
    grams: set[tuple[str, ...]] = field(default_factory=set)  # its runs of REPEAT_RUN words
    _held: tuple[Segment | None, int] = (None, 0)  # held_from's answer for the last good segment

    def judge(self, segment: Segment, *, partial: bool = False) -> Trip | None:
        """The trip this segment makes, or None (and, when it is whole, it joins the good text).

        ``partial``: the segment is still being written; only what more words cannot undo trips it (a loop,
        a leak, tool syntax: they stop before the full stop), and it does not join the good text yet."""
        found = None if segment.code else self._kind(segment, partial=partial)
        if found is not None:
            kind, cut = found
            self._cut(segment, cut)
            return Trip(kind, self.good_end, segment.text.strip())
        if partial:
            return None
        self.good_end, self.last_good = segment.end, segment
        self.good.append(segment)
        if not segment.code:
            self.said.add(" ".join(words(segment.text)))
            known = len(self.spans)
            self.spans += _spans(self.text, segment.start, segment.end)
            every = [w for w, _ in self.spans[max(0, known - REPEAT_RUN) :]]
            self.grams.update(tuple(every[i : i + REPEAT_RUN]) for i in range(len(every) - REPEAT_RUN + 1))
        return None

    def good_text(self) -> str:
        """The good text so far, without a lead-in left dangling by a cut."""
        return _lead_in_dropped(self.text, self.good_end, self.last_good)

    def held_from(self) -> int:
        """Where the text that may be shown ends now: a last segment that leads in (":") waits for what it
        leads to, and its trailing words that are the prompt's wait for what follows (a leak may be starting)."""
        last = self.last_good
        if last is None or last.code:
            return self.good_end
        if _leads_in(last):
            return last.start
        if self._held[0] != last:
            said = _spans(self.text, last.start, last.end)
            tail = self.guard.prompt_tail([w for w, _ in said])
            self._held = (last, said[tail][1] if tail < len(said) else last.end)
        return min(self._held[1], self.good_end)

    def _cut(self, segment: Segment, cut: int) -> None:
        """Cut the good text at ``cut``: at the start of its segment when no word of that segment precedes it."""
        while self.good and self.good[-1].start >= cut:
            self.good.pop()
        within = self.good[-1] if self.good and self.good[-1].end > cut else segment if cut > segment.start else None
        if within is not None and (not _WORD.search(self.text, within.start, cut) or _leads_in(within, cut)):
            cut = within.start  # nothing of it before the cut, or only a lead-in ("I can do these things:")
            if within is not segment:
                self.good.pop()
        self.good_end = cut
        self.last_good = self.good[-1] if self.good and self.good[-1].end == cut else None

    def _kind(self, segment: Segment, *, partial: bool = False) -> tuple[TripKind, int] | None:
        context = self.spans[-CONTEXT:]  # enough words before it to find a run that began there
        spans = context + _spans(self.text, segment.start, segment.end)
        said = [w for w, _ in spans]
        first = len(context)  # the segment's first word
        length, start = self.guard.leak_run(said, first)
        if length >= LEAK_RUN:
            return "leak", spans[start][1]
        prose = _INLINE_CODE.sub(lambda m: " " * len(m.group()), segment.text)
        if "`" in prose:  # code in backticks still being written (or never closed) is code too
            prose = prose[: prose.index("`")]
        syntax = _TOOL_MARKUP.search(prose) or (None if _CODE_LINE.match(prose) else _SIGNATURE.search(prose))
        if syntax is not None:
            return "tool_syntax", segment.start + syntax.start()
        again = _stutter(said, first)
        again = again if again is not None else _repeat(said, first, self.grams)
        if again is not None:
            return "loop", spans[again][1]
        # of a segment still being written, its whole words only ("The lock" may be "The locker code")
        whole = prose[: prose.rfind(" ") + 1] if partial else prose
        if self.claims and claim(whole) is not None:
            return "claim", 0  # what it said around a guess is no answer either: all of it goes
        if partial:
            return None
        if len(said) - first >= 3 and " ".join(said[first:]) in self.said:
            return "loop", segment.start
        if self.last_good is not None and (_SIGN_OFF.match(segment.text) or _SIGNATURE_LINE.match(segment.text)):
            return "sign_off", segment.start
        return None


def _spans(text: str, start: int, end: int) -> list[tuple[str, int]]:
    """The words of ``text[start:end]`` as the guard compares them, each with where it starts."""
    return [(m.group().lower(), m.start()) for m in _WORD.finditer(text, start, end)]


def _stutter(said: Sequence[str], first: int) -> int | None:
    """Where the same few words said back to back, over REPEAT_RUN words, begin again (the second time)."""
    for size in range(1, 7):
        run = 0
        for i in range(max(size, first - REPEAT_RUN), len(said)):
            run = run + 1 if said[i] == said[i - size] else 0
            if run >= REPEAT_RUN and i >= first:
                return i - run + 1
    return None


def _repeat(said: Sequence[str], first: int, before: set[tuple[str, ...]]) -> int | None:
    """Where a run of REPEAT_RUN words said before (``before``: the earlier text's) begins again, when it ends
    in this segment (from word ``first``)."""
    seen: set[tuple[str, ...]] = set()
    for i in range(len(said) - REPEAT_RUN + 1):
        gram = tuple(said[i : i + REPEAT_RUN])
        if i + REPEAT_RUN > first and (gram in before or gram in seen):
            return i
        seen.add(gram)
    return None


def _leads_in(segment: Segment, end: int | None = None) -> bool:
    """A short segment (up to ``end``) ending in ":" ("Here they are:"): it stands or falls with what follows.
    (A long one may have been shown while it was written, so it stays.)"""
    text = segment.text[: None if end is None else end - segment.start]
    return text.rstrip().endswith(":") and len(words(text)) < REPEAT_RUN


def _lead_in_dropped(text: str, end: int, last: Segment | None) -> str:
    """The good text up to ``end``, without a last segment that only led in to what was cut."""
    if last is not None and last.end == end and _leads_in(last):
        end = last.start
    return text[:end].rstrip()


class GuardedStream:
    """Feeds a streaming reply through the guard: what may be shown now, and whether to stop.

    A whole segment shows once it passed; a long one still being written shows all but its last
    REPEAT_RUN words (a loop or a leak found later begins no earlier than that), so a long sentence streams.
    """

    def __init__(self, guard: ReplyGuard, *, claims: bool = True) -> None:
        self.guard = guard
        self.claims = claims
        self.text = ""
        self.shown = ""
        self.trip: Trip | None = None
        self._judge = _Judge(guard, "", claims=guard.claims and claims)
        self._judged = 0  # segments judged so far (a complete segment never changes as the text grows)

    @property
    def tripped(self) -> bool:
        """Whether the reply went wrong: the generation may stop, the rest is dropped anyway."""
        return self.trip is not None

    def feed(self, piece: str) -> str:
        """Take a piece of the reply; returns the text that may be shown now ("" while it is held back)."""
        self.text += piece
        if self.trip is not None:
            return ""
        judge = self._judge
        judge.text = self.text
        done = segments(self.text, complete=False)
        for segment in done[self._judged :]:  # the same rules on the same prefixes as check()
            self.trip = judge.judge(segment)
            if self.trip is not None:
                return self._release(len(judge.good_text()))
        self._judged = len(done)
        start = done[-1].end if done else 0
        writing = Segment(start, len(self.text), self.text[start:], _in_code(done))
        if writing.text.strip():
            self.trip = judge.judge(writing, partial=True)
            if self.trip is not None:
                return self._release(len(judge.good_text()))
        end = judge.held_from()
        if end == judge.good_end and not writing.code:  # all before it shows: so may the start of a long one
            spans = _spans(self.text, writing.start, writing.end)
            if len(spans) > REPEAT_RUN:
                end = spans[len(spans) - REPEAT_RUN][1]
        return self._release(end)

    def finish(self, text: str, finish_reason: str) -> tuple[str, Guarded, bool]:
        """The whole reply judged (the generation's own text): the rest that may be shown, the verdict, and
        whether what was shown must be replaced (a cut before it: a rare case the holding back missed)."""
        verdict = self.guard.check(text, finish_reason, claims=self.claims)
        if verdict.nothing_left:
            return "", verdict, bool(self.shown)
        shown = self.shown.rstrip()
        if not verdict.text.startswith(shown):
            return verdict.text, verdict, True
        rest = verdict.text[len(self.shown) :] if len(verdict.text) > len(self.shown) else ""
        self.shown += rest
        return rest, verdict, False

    def _release(self, end: int) -> str:
        good = self.text[:end]
        if len(good) <= len(self.shown) or (not self.shown and len(words(good)) < MIN_SHOWN_WORDS):
            return ""
        rest = good[len(self.shown) :]
        self.shown = good
        return rest


def _in_code(done: Sequence[Segment]) -> bool:
    """Whether the text after these segments is inside a code fence."""
    if not done:
        return False
    last = done[-1]
    return last.code and not (_FENCE.match(last.text) and sum(1 for s in done if _FENCE.match(s.text)) % 2 == 0)
