"""The honest decline: a question the Pi's model will not manage, when the cloud may not answer it either.

When the difficulty score (:mod:`appliance.understanding.difficulty`) puts a message over its bar and routing may
not send it to the cloud (:func:`appliance.agent.router.declines`), no model runs: the reply says so in one
sentence and offers what would help, as answers to tap (the buttons the schedule desk's "which one?" uses):

- ``ask the cloud``: only where a tap can lift what stops it, a conversation the person made private
  (``/private on``) with a cloud provider configured. The owner's ``routing.mode: local_only``, a local-only
  channel, no network or an empty budget are not the person's to lift from a chat, and are said instead.
  Tapped within :data:`ASK_TTL_S`, the declined question goes to the cloud, this once.
- ``use MODEL (SIZE)``: the catalog model ``llm.model: auto`` picks for this board, when it is not the one
  running; tapped, the reply says how to install and run it (a download of gigabytes is not started by a tap).

The answers are the ``intent`` route's: no model. A task's step or a scheduled prompt (:data:`UNATTENDED`) is
not declined: no one is there to tap, and the task judges its own steps.

A model the catalog says guesses (``answers: false``: the packaged 135M, which told the blind everyday sets
"This little computer has 1 GB of RAM", "The number for your dentist is 12" and that the Mona Lisa is
Michelangelo's) is asked no question of fact when the cloud may not answer it (:func:`guesses`): what the
grounded answers and the device stage could not take is declined the same way rather than guessed, and the
decline says that /local asks the small model anyway. So is a request to act that nothing here took ("please ring
my daughter", :func:`acts`): the model could only pretend to. Small talk ("how are you?") and requests to make
something ("tell me a joke", "could you write a poem about the sea?") still go to it.

Measured on the sixth blind everyday set (119 questions, tests/eval/everyday_sixth.yaml): asking it only
questions near the grounded topics (a MiniLM bar) left 27 wrong replies, 16 of them about the time, itself,
its devices or its schedules; with a stand-in model that always lies, this rule leaves 6 questions to the
model instead of 31. The cost: the general questions it would have got right (6 of 7 in that set, 0.62 in the
fifth) are declined too, on this model and only with the cloud off.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from appliance.agent.record import ReplyRecord, Timings
from appliance.agent.router import Decision, RoutingContext, local_route

ASK_TTL_S = 600.0  # how long the buttons of a decline stay good
# Turns no person waits on (a task's step, a scheduled prompt): they try, and their own checks judge the result.
UNATTENDED = frozenset({"task", "cron"})
ASK_CLOUD = "ask the cloud"
DECLINED = "declined without a model"  # the end of a decline's reason: the agent keeps it out of the model's history


@dataclass(frozen=True)
class Bigger:
    """A catalog model that fits this board better than the one running: name, download size, RAM, board."""

    name: str
    size: str  # "1.1 GB"
    ram_mb: int
    board: str  # "Raspberry Pi 5 Model B Rev 1.0, 7.9 GiB RAM, 4 cores"

    @property
    def button(self) -> str:
        """The answer to tap: "use qwen2.5-1.5b (1.1 GB)"."""
        return f"use {self.name} ({self.size})"


def _unsized(button: str) -> str:
    """A button without its "(1.1 GB)": what a person types of "use qwen2.5-1.5b (1.1 GB)"."""
    return re.sub(r"\s*\([^)]*\)$", "", button).lower()


def board_model(running: str) -> Bigger | None:
    """The model ``llm.model: auto`` picks for this board, when it is not ``running`` (None: it is, or unknown)."""
    from appliance.llm import board, models
    from appliance.llm.download import format_size

    here = board.read_board()
    name = board.choose_for(here)
    entry = models.load_catalog().get(name)
    if entry is None or name == running or not here.mem_bytes:
        return None
    return Bigger(name, format_size(entry.size_bytes), entry.ram_mb, here.describe())


# Questions that are small talk, not questions of fact: the small model may answer these
_SOCIAL = re.compile(
    r"^(?:how (?:are|r) (?:you|u|things)|how(?:'s| is) (?:it going|life|your day|everything)|how do you do"
    r"|what(?:'s| is) up|are you (?:there|awake|ok|okay|alright|around|busy|free|happy|bored|real)"
    r"|how was your (?:day|night|weekend|morning)|did you (?:sleep|have a)|do you (?:like|love|enjoy|dream|sleep)"
    r"|(?:what do|tell me what) you (?:think|like|feel)|what(?:'s| is) your fav(?:ou)?rite|can (?:you|i) (?:help|ask)"
    r"|are we (?:friends|ok)|(?:shall|should) we\b|would you like|want to (?:play|chat|talk))\b"
)
# Requests to make something, asked politely as a question: nothing in the answer can be a wrong fact
_MAKE = re.compile(
    r"^(?:(?:can|could|would|will) (?:you|u) (?:please |pls )?)?(?:write|compose|make up|invent|imagine|pretend"
    r"|sing|rhyme|rewrite|rephrase|summari[sz]e|draw|tell me (?:a|another|some) (?:joke|story|poem|riddle|tale)"
    r"|help me (?:write|name|think of|come up)"
    r"|make (?:me |us )?(?:up )?(?:a |an |some )?(?:poem|story|joke|song|rhyme|limerick|haiku|riddle|tale))\b"
)

# Requests to act in the world (not questions): what no device, schedule or tool took, the small model could only
# pretend to do ("please ring my daughter and tell her I'll be late" got "happy to help with her homework")
_ACT = re.compile(
    r"^(?:(?:can|could|would|will) (?:you|u) (?:please |pls )?)?(?:ring|call|phone|text|message|e-?mail|send|book"
    r"|order|buy|pay|transfer|play|put|stream|record|post|tweet|cancel|unlock|lock|open|close|start|stop|turn|switch|dim"
    r"|add|delete|remove|water|feed|vacuum|hoover|clean|wake|heat|cool|charge|download|install|print|scan"
    r"|look up|search|google|find|check|read (?:me|out)|tell (?:him|her|them|my|mum|mom|dad|the)"
    # "make me a coffee pls" (the thirteenth blind set): a thing made in the kitchen, not a story
    r"|make (?:me|us|him|her|them) (?:a|an|some|the|my)|brew|cook|bake|boil|bring|fetch|pour|get me|grab me"
    r"|iron|wash|tidy|walk the)\b"
)


async def guesses(question: str, ctx: RoutingContext, model_name: str) -> bool:
    """Whether ``question`` asks something of fact and would go to a model that guesses at such questions, with
    the cloud not to be asked (nor the Pi asked on purpose with /local): then it is declined rather than guessed."""
    # /local asks the small model on purpose; /cloud that the cloud may not answer would get its guess instead
    if ctx.forced == "local" or ctx.mode == "cloud_first" or ctx.cloud_blocked() is None:
        return False
    return would_guess(question, model_name)


def guessing_model(model_name: str) -> bool:
    """Whether the catalog says ``model_name`` guesses (``answers: false``): it copies what its prompt holds too."""
    from appliance.llm import models

    entry = models.load_catalog().get(model_name)
    return entry is not None and not entry.answers


def would_guess(question: str, model_name: str) -> bool:
    """Whether ``model_name`` would guess at ``question``: a question of fact or a request to act, on a model the
    catalog says guesses (``answers: false``). A cloud that failed leaves such a question to be declined too."""
    from appliance.grounded.base import plain
    from appliance.grounded.desk import asks
    from appliance.llm import models

    entry = models.load_catalog().get(model_name)
    if entry is None or entry.answers:
        return False  # a model the catalog does not know, or one whose answers may be shown
    said = plain(question).lower() or question.strip().lower()
    if _SOCIAL.match(said) or _MAKE.match(said):
        return False
    return asks(question) or acts(question)


def makes(text: str) -> bool:
    """Whether a message asks for something made up ("tell me a joke", "write a poem about the rain"): fiction by
    request, whose words state nothing (the claims guard does not read its reply)."""
    from appliance.grounded.base import plain

    return bool(_MAKE.match(plain(text).lower() or text.strip().lower()))


def acts(text: str) -> bool:
    """Whether a message asks the Pi to do something in the world ("ring my daughter", "could you send an email")."""
    from appliance.grounded.base import plain

    said = plain(text).lower() or text.strip().lower()
    return bool(_ACT.match(said)) and not _MAKE.match(said)  # "make me a poem" is made up, not done


@dataclass
class _Declined:
    question: str
    at: float
    buttons: tuple[str, ...]
    bigger: Bigger | None


class DeclineDesk:
    """Makes the decline and takes its buttons' answers, per chat."""

    def __init__(self, model_name: Callable[[], str], *, bigger: Callable[[str], Bigger | None] = board_model) -> None:
        self.model_name = model_name  # the chat model running now
        self.bigger = bigger
        self._open: dict[str, _Declined] = {}

    def decline(
        self,
        question: str,
        session: str,
        ctx: RoutingContext,
        started: float,
        *,
        guessed: bool = False,
        failed: str = "",
    ) -> ReplyRecord:
        """The reply to a question the Pi will not manage and the cloud may not answer, with what would help;
        ``guessed``: declined because the model on the Pi guesses at questions of fact (:func:`guesses`);
        ``failed``: the cloud was asked and failed (its error), and the Pi's model would only guess."""
        blocked = ctx.cloud_blocked() or ("", "the cloud may not be used")
        if failed:
            blocked = ("cloud_failed", f"the cloud failed ({failed})")
        why = _PLAINLY.get(blocked[0], "the cloud may not answer it now")
        if blocked[0] == "budget" and ctx.budget_off:
            why = f"the cloud is switched off here ({ctx.budget_off}: 0)"
        score = ctx.difficulty.p_cloud if ctx.difficulty is not None else 1.0
        words = f"this looks like a question for a stronger model ({score:.2f}), but {blocked[1]}"
        code = "looks_hard"
        if guessed:  # the catalog's word on the model decided, not the difficulty score
            code = "guesses"
            words = f"{self.model_name()} guesses at questions of fact, and {blocked[1]}"
            if acts(question):
                words = f"{self.model_name()} would only pretend to do it, and {blocked[1]}"
        if guessed and ctx.forced == "cloud":  # the person's own request for the cloud: quoted, a fallback
            asked = ctx.asked_with or "/cloud"
            words = f"you asked for the cloud ({asked}), but {blocked[1]}, and {self.model_name()} guesses at questions"
            words += " of fact"
            code = "user_cloud"
        decision = Decision("local", f"{words}: {DECLINED}", code, True, blocked[0])
        buttons: list[str] = []
        if blocked[0] == "conversation_private" and ctx.provider is not None:
            buttons.append(ASK_CLOUD)
        bigger = self.bigger(self.model_name())
        if bigger is not None:
            buttons.append(bigger.button)
        text = (
            f"I can't answer that reliably: it needs a stronger model than the small one on this Pi, and {why}. "
            "I would rather say so than guess."
        )
        if guessed and acts(question):  # a request to act: nothing here does it, and the model would pretend
            text = (
                "I'm not able to do that here: no device or schedule of mine does it, and the small model on this Pi "
                "would only pretend to do it."
            )
        if guessed:
            text = text[:-1] + " (/local asks the small model anyway)."
        self._open[session] = _Declined(question, time.monotonic(), tuple(buttons), bigger)
        total = round(time.perf_counter() - started, 4)
        return ReplyRecord(
            text=text,
            route=local_route(decision),  # the Pi answered, without a model (the record's model is empty)
            reason=decision.reason,
            timings=Timings(ttft_s=total, total_s=total),
            finish_reason="stop",
            why=decision.why,
            blocked=decision.blocked,
            choices=buttons,
        )

    def picked(self, text: str, session: str, started: float) -> str | ReplyRecord | None:
        """A tap on a decline's button: the question to ask the cloud (a str), the answer on the bigger model
        (a record), or None (this message is not such an answer)."""
        open_ = self._open.get(session)
        said = text.strip().strip("\"'.").strip().lower()  # as a channel without buttons quotes it
        # "use qwen2.5-1.5b (1.1 GB)" is also taken without its size
        if open_ is None or said not in {form for b in open_.buttons for form in (b.lower(), _unsized(b))}:
            return None
        del self._open[session]
        if time.monotonic() - open_.at > ASK_TTL_S:
            return None
        if said == ASK_CLOUD:
            return open_.question
        bigger = open_.bigger
        assert bigger is not None
        text = (
            f"{bigger.name} needs about {bigger.ram_mb} MB of memory and fits this board ({bigger.board}). "
            f"To run it, on the Pi: picoagent models pull {bigger.name} ({bigger.size} to download), then "
            f"picoagent models use {bigger.name} and restart picoagent (or set llm.model: auto, and it is "
            "downloaded in the background). Then ask me again."
        )
        total = round(time.perf_counter() - started, 4)
        return ReplyRecord(
            text=text,
            route="intent",
            reason="decline desk: how to run the model that fits this board (no model)",
            timings=Timings(ttft_s=total, total_s=total),
            finish_reason="stop",
        )


# Why the cloud may not answer, as the decline says it (RoutingContext.cloud_blocked's codes).
_PLAINLY = {
    "local_only": "the cloud is switched off here (routing.mode: local_only)",
    "no_provider": "no cloud model is set up",
    "channel_private": "this channel stays on the Pi",
    "conversation_private": "this chat is private (/private on)",
    "offline": "the network is down",
    "circuit_open": "the cloud model kept failing and is paused",
    "budget": "the cloud budget is used up",
    "cloud_failed": "the cloud model could not be reached just now",
}
