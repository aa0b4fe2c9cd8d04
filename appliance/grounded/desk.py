"""The grounded desk: answers a message from what the appliance knows, before any model runs.

Three passes, none with the chat model:

1. **Words.** Each topic's rule (:meth:`Topic.match`) in a fixed order; the first that takes the message
   and can answer it does. Rules are tight: "what time is it" is the clock's, "what time does the bakery
   close" is nobody's.
2. **Meaning.** For what no rule took, the message's vector (MiniLM, shared with the rest of the turn's
   understanding) against each topic's example phrasings and against phrasings that belong to the model
   (:data:`FOR_THE_MODEL`). A topic answers only when its closest example is at least :data:`MEANING`
   alike, beats every other topic by :data:`MARGIN` and beats the model's phrasings too; then the topic
   itself looks again and may still pass it on. Only questions and requests to tell are matched so
   (a statement, "I wrote the wifi password on the fridge", is close to a question and is none).
3. **Near.** Only where the model may not be trusted with the message (the cloud may not answer it: the
   small model would guess), a question at least :data:`NEAR` alike to a topic (and beating the model's
   phrasings by :data:`MARGIN`), or a paraphrase the topic could not answer exactly, gets the topic's
   overview, saying it is not sure it understood ("here is what I know: It's 21:04 on Friday ..."), or its
   one honest sentence (:attr:`Topic.unsure`); a topic with neither leaves it to the model.

The words rules are also tried on the question without the courtesy around it (:func:`base.plain`).

The turn records such a reply as route ``intent`` (no model), ``why`` ``grounded`` and a reason naming
what the answer is based on ("grounded: the Pi's clock (Europe/Brussels), no model").
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from appliance.agent.record import ReplyRecord, Timings
from appliance.errors import PicoagentError
from appliance.grounded.base import Answer, Ask, Facts, Topic, plain

if TYPE_CHECKING:
    import numpy as np

    from appliance.llm.embeddings import QueryEmbedder

log = logging.getLogger(__name__)

MEANING = 0.72  # cosine of MiniLM unit vectors: a paraphrase of an example, not a neighbour in subject
MARGIN = 0.05  # the best topic must beat the next topic (and the model's phrasings) by this much
NEAR = 0.55  # about a topic, not a paraphrase of it: answered so only where the model may not be trusted

# Phrasings close in words to the topics' examples whose answer is not the appliance's to give.
FOR_THE_MODEL = (
    "what time does the bakery close",
    "what time is the match on tonight",
    "what is the capital of France",
    "tell me a joke",
    "write a poem about the sea",
    "what is the weather like on Mars",
    "how do I bake bread",
    "what is the history of the calendar",
    "how much memory does a raspberry pi 5 have",
    "who invented the computer",
    "explain how a thermostat works",
    "what should I cook tonight",
    "how do I convert a pdf to word",
    "what happened in 1969",
)

# A question or a request to tell: only these are answered by meaning (statements go to the model).
_WH = r"what|which|who|whom|whose|when|where|why|how|is|are|am|was|were|can|could|will|would|should"
# "do I need a coat" asks; "do as we discussed", "have a nice day" do not
_AUX = r"^(?:do|does|did|have|has) (?:i|you|we|they|he|she|it|my|the|your|our|any|anyone|people|there)\b"
_QUESTION = re.compile(rf"\?$|^(?:{_WH}|any|tell|show|list|remind|say|give|name)\b|{_AUX}")

Texts = Callable[[Sequence[str]], Awaitable[list[list[float]]]]


# a question said inside a sentence: "my son wants to know how many legs spiders have", "if I save 45 pounds a week
# how much is that after a year"
_INSIDE = (
    r"\b(?:know|wonder|wondering|wondered|curious|asks|asked|asking|tell me|find out|not sure|no idea|forgot|forget"
    r"|guess|remind me)"
    r" (?:how|what|which|who|whom|whose|when|where|why|if|whether)\b"
    r"|(?<!love )(?<!like )\bhow (?:much|many|long|far|old|big|tall|often)\b"
)
# "at what time do you ...", "roughly when was ...": a question after a preposition or a filler word; "quick maths:
# 1234 + 5678": a sum written out
_LEAD = r"(?:at|on|in|for|from|by|to|until|since|roughly|approximately|about|just|honestly|actually|so|and|but|ok|okay)"
_SUM = r"\d\s*[+*×÷=^]\s*\d|\d\s+[-x/]\s+\d"
_ASKS = re.compile(rf"\?|^(?:{_LEAD} )?(?:{_WH})\b|{_AUX}|{_INSIDE}|{_SUM}")  # a question, not a request to tell


def asks(text: str) -> bool:
    """Whether a message is a question (not a request to tell or say something: "say hello" is none)."""
    said = plain(text).lower() or text.strip().lower()
    return bool(_ASKS.search(said)) or any(_ASKS.search(c.lower()) for c in _clauses(said))


def is_question(text: str) -> bool:
    """Whether a message asks something or asks to be told (read as :func:`base.plain` reads it), in any of
    its clauses ("lowest temp tomorrow? need to know for the chickens")."""
    said = plain(text).lower() or text.strip().lower()
    return bool(_QUESTION.search(said)) or "?" in said or any(_QUESTION.search(c.lower()) for c in _clauses(said))


_LABEL = re.compile(r"^[a-z' ]{2,24}:\s+(?P<rest>.+)$", re.IGNORECASE)
_CLAUSE = re.compile(
    r"(?<=[,.;:!?])\s+|\s+[-–—]\s+|\s+(?:and|but|so) (?=(?:what|when|where|who|which|how|is|are|do|does|can)\b)"
)


def _clauses(text: str) -> list[str]:
    """The clauses of a message of two or more that are questions, each as said: "locked out lol. where's the
    spare key" -> ["where's the spare key"]; a message of one clause has none."""
    parts = [p.strip(" ,.;:") for p in _CLAUSE.split(text) if p.strip(" ,.;:")]
    if len(parts) < 2:
        return []
    return [p for p in parts if _QUESTION.search(plain(p).lower() or p.lower())]


class GroundedDesk:
    """Tries the topics on a message; the answer and its record, or None for the model."""

    def __init__(self, topics: Sequence[Topic], embedder: QueryEmbedder | None = None, texts: Texts | None = None):
        self.topics = tuple(topics)
        self.embedder = embedder
        self._texts = texts
        self._matrix: np.ndarray | None = None
        self._owner: list[int] = []  # per example row: the topic's index, or -1 for the model's phrasings

    def by_words(self, text: str) -> list[Ask]:
        """The topics' words rules that take ``text`` (or, failing that, its question without the courtesy
        around it: "sorry to bother you, have you got the time?", or one clause of it that is a question:
        "my phone's dead, got the time?"), in order."""
        found: list[Ask] = []
        core = plain(text)
        parts = [p.strip(" ,.;:") for p in _CLAUSE.split(core) if p.strip(" ,.;:")]
        first = parts[:1]  # "time check pls, 24h"
        last = parts[-1:] if len(parts) > 1 else []  # "filling in a form, need the full date including the year"
        labelled = _LABEL.match(core)  # "quick maths: 1234 + 5678": what follows a short label
        after = [labelled["rest"]] if labelled else []
        readings = [r for r in dict.fromkeys([core, text.strip(), *_clauses(core), *first, *last, *after]) if r]
        whole = [r for r in dict.fromkeys([text.strip(), core]) if r]  # as said first: "great, thank you!" thanks
        for topic in self.topics:  # each topic's asks, one a reading that it takes: the desk tries them in turn
            # a topic of whole messages (thanks) is not one clause of them: "cheers. what's the date tomorrow?"
            mine = whole if topic.whole else readings
            taken = [a for reading in mine if (a := topic.match(reading)) is not None]
            found += [
                a for i, a in enumerate(taken) if all((a.what, a.details) != (b.what, b.details) for b in taken[:i])
            ]
        return found

    async def answer(self, text: str, facts: Facts, *, meaning: bool = True, near: bool = False) -> Answer | None:
        """The grounded answer to ``text`` (words first, then meaning when ``meaning``; ``near``: also a
        question only near a topic, see :meth:`by_meaning`), or None."""
        each = await self._each_question(text, facts)
        if each is not None:
            return each
        for ask in self.by_words(text):
            answered = await self.answer_ask(ask, facts)
            if answered is not None:
                return answered
        if not meaning or self.embedder is None:
            return None
        found = await self.by_meaning(text, near=near)
        return await self.answer_ask(found, facts, near=near) if found is not None else None

    async def _each_question(self, text: str, facts: Facts) -> Answer | None:
        """Two questions or more in one message ("what time is it and what day is it?"), each answered by words,
        as one answer; None unless every question of it is answered so (the first alone answered the rest
        as if it were all that was asked: a blind set's "what day is it" got the time)."""
        parts = _clauses(plain(text) or text.strip())
        if len(parts) < 2:
            return None
        answers: list[Answer] = []
        for part in parts:
            found = None
            for ask in self.by_words(part):
                found = await self.answer_ask(ask, facts)
                if found is not None:
                    break
            if found is None:
                return None
            answers.append(found)
        if len({a.text for a in answers}) < 2:
            return None  # two ways of asking one thing: the words pass answers it once
        return Answer(
            " ".join(dict.fromkeys(a.text for a in answers)),
            "; ".join(dict.fromkeys(a.basis for a in answers)),
            answers[0].kind,
            tuple(b for a in answers for b in a.buttons),
        )

    async def answer_ask(self, ask: Ask, facts: Facts, *, near: bool = False) -> Answer | None:
        """The answer of the topic that took ``ask`` (a fact it cannot read now is said, never guessed around).

        ``near``: the model is not to be trusted with this message (the cloud may not answer it), so a
        question by meaning that the topic cannot answer exactly gets its overview or its honest sentence."""
        topic = next(t for t in self.topics if t.kind == ask.kind)
        try:
            # only near the topic: its exact answer would be a guess at what was asked ("the difference between
            # weather and climate" is no forecast's), so its overview, saying so
            answered = None if ask.near and not topic.near_exact else await topic.answer(ask, facts)
            if answered is None and near and ask.by_meaning:
                answered = await self._overview(topic, ask, facts)
            return answered
        except PicoagentError as exc:
            return Answer(f"I could not check that just now: {exc.message}", basis=exc.message, kind=ask.kind)

    @staticmethod
    async def _overview(topic: Topic, ask: Ask, facts: Facts) -> Answer | None:
        """What ``topic`` can say of a question about it that it could not answer exactly (see base.Topic)."""
        general = await topic.answer(Ask(topic.kind, topic.overview, text=ask.text), facts) if topic.overview else None
        if general is None:
            if not topic.unsure:
                return None  # a topic with nothing to say near it (the Pi's health, the unknowable): the model's
            return Answer(topic.unsure, f"a question near {topic.kind} not answered exactly", topic.kind)
        return Answer(
            f"I'm not sure I understood the question, so here is what I know: {general.text}",
            f"{general.basis} (the general answer to a question near it)",
            topic.kind,
            general.buttons,
        )

    async def by_meaning(self, text: str, *, near: bool = False) -> Ask | None:
        """The topic whose examples ``text`` is a paraphrase of (see the module docstring), else None;
        ``near``: also a topic it is only near (:data:`NEAR`), beating the model's phrasings by :data:`MARGIN`,
        as an Ask with ``near`` set."""
        assert self.embedder is not None
        if not is_question(text):
            return None  # "I wrote the wifi password on the fridge" is close to a question of memory, and is none
        text = plain(text) or text.strip()  # "r u chatgpt 🙂" is read as "are you chatgpt"
        best = await self._closeness(text)
        if not best:
            return None
        ranked = sorted(best.items(), key=lambda item: -item[1])
        owner, score = ranked[0]
        runner_up = ranked[1][1] if len(ranked) > 1 else -1.0
        if owner < 0:
            return None
        if score >= MEANING and score - runner_up >= MARGIN:
            return Ask(self.topics[owner].kind, text=text, by_meaning=True)
        if near and score >= NEAR and score - best.get(-1, -1.0) >= MARGIN:
            return Ask(self.topics[owner].kind, text=text, by_meaning=True, near=True)
        return None

    async def _closeness(self, text: str) -> dict[int, float]:
        """Per topic (its index; -1 the model's phrasings) the cosine of its closest example to ``text``; empty
        when the embedding cannot be had (said in the log)."""
        import numpy as np

        assert self.embedder is not None
        try:
            matrix = await self._examples()
            vector = np.asarray(await self.embedder.aembed_query(text), dtype=np.float32)
        except PicoagentError as exc:
            log.warning("grounded answers by meaning are off for this message: %s", exc.message)
            return {}
        similarity = matrix @ (vector / (float(np.linalg.norm(vector)) or 1.0))
        best: dict[int, float] = {}
        for owner, score in zip(self._owner, similarity.tolist(), strict=True):
            best[owner] = max(best.get(owner, -1.0), score)
        return best

    async def _examples(self) -> np.ndarray:
        import numpy as np

        if self._matrix is None:
            texts: list[str] = []
            owners: list[int] = []
            for index, topic in enumerate(self.topics):
                texts += topic.examples
                owners += [index] * len(topic.examples)
            texts += FOR_THE_MODEL
            owners += [-1] * len(FOR_THE_MODEL)
            assert self.embedder is not None
            vectors = await (self._texts or self.embedder.aembed_queries)(texts)
            matrix = np.asarray(vectors, dtype=np.float32)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            self._matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
            self._owner = owners
        return self._matrix

    async def prepare(self) -> None:
        """Embed the examples now rather than at the first message that needs them."""
        if self.embedder is not None:
            try:
                await self._examples()
            except PicoagentError as exc:
                log.warning("grounded answers by meaning are not ready: %s", exc.message)


def record_of(answer: Answer, started: float) -> ReplyRecord:
    """The reply record of a grounded answer: route intent (no model), why grounded, its basis as the reason."""
    total = round(time.perf_counter() - started, 4)
    return ReplyRecord(
        text=answer.text,
        route="intent",
        reason=f"grounded: {answer.basis}, no model",
        timings=Timings(ttft_s=total, total_s=total),
        finish_reason="stop",
        why="grounded",
        choices=list(answer.buttons),
    )
