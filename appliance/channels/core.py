"""What every chat channel shares, so that a channel is only its platform.

A chat channel (Telegram, Discord, Slack, e-mail, WhatsApp, a webhook bridge, MQTT chat) is made of the
same parts, and only the last step of each is the platform's:

- :class:`Doorkeeper`: who may talk. The channel's allowlist and the users paired with a one-time
  code; a stranger costs nothing (no turn, no model call, no reply) and may only send a code, a few
  times an hour, with one log line per stranger per minute.
- :func:`footer`: the line under a reply (route · model · seconds), saying why a message left the Pi
  or why it did not although it should have. The terminal's detailed form comes from here too.
- :class:`StreamedReply`: a reply shown while it grows, pushed at most once per ``interval_s`` by a
  throttled loop; the platform only says how to show a text (send, or edit what is shown).
  :class:`EditedReply` is the loop of sending one message per piece and editing it as it grows
  (Telegram, Discord, Slack): the platform says how to split, post, edit and read its errors.
- :mod:`appliance.channels.commands`: the command set (/status, /devices, /approve, ...) and its
  buttons, answered as text and buttons the platform renders.
- Proactive messages go through the outbox (:class:`appliance.outbox.Delivery`): the platform
  supplies ``send`` for one stored message; ordering, retries and flood control are shared, and
  sending it piece by piece is :meth:`appliance.channels.base.ChatChannel.deliver`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from typing import Any, Literal

from appliance.agent.record import ReplyRecord
from appliance.memory.db import Database
from appliance.ratelimit import RateLimiter

log = logging.getLogger(__name__)

Route = Literal["local", "cloud"]  # what /local and /cloud force
UserId = int | str  # as the platform names a person (Telegram: a number)

CODE_ATTEMPTS_PER_HOUR = 5  # per unknown user; a 6-digit code then takes ~20 years to guess
ALL_CODE_ATTEMPTS_PER_HOUR = 30  # across all unknown users, so many accounts do not help either

# --- the footer -------------------------------------------------------------------------------------


NO_MODEL_ROUTES = ("intent", "grounded")  # answered from rules and what the appliance knows: no model ran
SLOW_FIRST_TOKEN_S = 3.0  # a local first token later than this is explained
COLD_SHARE = 0.5  # less than this share of the prompt found in the KV cache: the prompt was read cold


def without_model(record: ReplyRecord) -> bool:
    """Whether no model wrote this reply (the fast paths, a grounded answer, a decline before any model)."""
    return record.route in NO_MODEL_ROUTES or (record.route in ("local", "local_fallback") and not record.model)


def basis(record: ReplyRecord) -> str:
    """What a reply without the model is based on, from its reason ("the Pi's clock", "intent fast path: ...")."""
    reason = record.reason.removesuffix(" (no model)").removesuffix(", no model").strip()
    for prefix in ("grounded answer: ", "grounded: "):
        reason = reason.removeprefix(prefix)
    return reason


def slow_start(record: ReplyRecord) -> str:
    """Why a local reply's first token came late ("first token 9.8 s: the prompt was read cold ..."), else ""."""
    t = record.timings
    if record.route not in ("local", "local_fallback") or not t.rounds or t.ttft_s <= SLOW_FIRST_TOKEN_S:
        return ""
    words = f"first token {t.ttft_s:.1f} s"
    if t.prompt_tokens and t.cached_tokens < COLD_SHARE * t.prompt_tokens:
        return f"{words}: the prompt was read cold ({t.cached_tokens} of {t.prompt_tokens} tokens were cached)"
    cached = f"{t.cached_tokens} of {t.prompt_tokens} prompt tokens were cached"
    return f"{words}, though {cached}: the model was busy or loading"


def footer(record: ReplyRecord, *, detailed: bool = False) -> str:
    """The line under a reply: which path answered, which model, how long it took (and why, when it matters).

    Chat channels show ``route · model · seconds`` (empty parts left out) and the reason in
    parentheses; ``detailed`` (the terminal) adds the decode speed and the first token's time, in
    brackets. A reply no model wrote says so, and what it is based on; a local reply whose first token
    took seconds says why.
    """
    t = record.timings
    # Say why it left the Pi, or why it did not although the person asked for the cloud or the guard cut it.
    explain = record.route in ("cloud", "local_fallback") or record.why in ("user_cloud", "guarded")
    if without_model(record):
        if detailed:
            return f"[answered without the model · {basis(record)} · {t.total_s:.2f} s]"
        return f"{record.route} · answered without the model · {t.total_s:.1f} s"
    late = slow_start(record)
    if detailed:
        return (
            f"[{record.route} · {record.model} · {t.decode_tps:.1f} tok/s · "
            f"first token {t.ttft_s:.2f} s · {t.total_s:.2f} s]"
            + (f"\n[{record.reason}]" if explain else "")
            + (f"\n[{late}]" if late else "")
        )
    parts = [record.route, record.model, f"{t.total_s:.1f} s"]
    line = " · ".join(p for p in parts if p)
    return line + (f"\n({record.reason})" if explain else "") + (f"\n({late})" if late else "")


# --- who may talk -----------------------------------------------------------------------------------


class Doorkeeper:
    """Who may talk to a channel: its allowlist and its paired users; a stranger may only send a code."""

    def __init__(
        self,
        channel: str,
        db: Database,
        *,
        allow_from: Callable[[], Collection[UserId]],
        is_paired: Callable[[Database, Any], bool],
        redeem: Callable[..., bool],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.channel = channel
        self.db = db
        self.allow_from = allow_from  # read at every check: the config's list, as it is now
        self.is_paired = is_paired  # (db, user id) -> bool, on the database thread
        self.redeem = redeem  # (db, code, user id, name, clock=...) -> bool, on the database thread
        self.clock = clock
        self._strangers = RateLimiter(1, 60.0)  # at most one log line per unknown user per minute
        self.turned_away_total = 0  # messages and taps from strangers since the start (none was processed)
        self._code_attempts = RateLimiter(CODE_ATTEMPTS_PER_HOUR, 3600.0)
        self._all_code_attempts = RateLimiter(ALL_CODE_ATTEMPTS_PER_HOUR, 3600.0)

    async def is_allowed(self, user_id: UserId) -> bool:
        """Whether a user is in the allowlist or was paired."""
        return user_id in self.allow_from() or await self.db.call(self.is_paired, self.db, user_id)

    async def try_code(self, user_id: UserId, name: str, code: str) -> bool:
        """A stranger sent a pairing code: True when it paired them (a few tries an hour, then silence)."""
        if self._code_attempts.hit(str(user_id)) or self._all_code_attempts.hit("all"):
            if self._strangers.hit(str(user_id)) == 0:
                log.warning("%s: too many pairing attempts; ignoring user %s (%s)", self.channel, user_id, name)
            return False
        if await self.db.call(self.redeem, self.db, code, user_id, name, clock=self.clock):
            log.warning("%s: paired user %s (%s)", self.channel, user_id, name)
            return True
        log.warning("%s: a wrong or used pairing code from user %s (%s)", self.channel, user_id, name)
        return False

    def turned_away(self, user_id: UserId, name: str) -> None:
        """A stranger wrote: say so in the log, once a minute per stranger at most."""
        self.turned_away_total += 1
        if self._strangers.hit(str(user_id)) == 0:
            log.warning("%s: ignored user %s (%s): not allowed and not paired", self.channel, user_id, name)


# --- streamed edits ---------------------------------------------------------------------------------


class StreamedReply(ABC):
    """One answer written into a chat: shown at the first text, updated as it grows, finished with a footer.

    The text is pushed at most once per ``interval_s`` (a platform's edit rate limit); the last push
    before the final text waits out the interval too. A platform implements :meth:`show` (send or
    edit) and :attr:`on_screen`, and moves :attr:`last_push` when it pushes or is told to wait.
    """

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.text = ""
        # Counting from the start, an instant answer (the intent fast path) is one message, no edits.
        self.last_push = time.monotonic()
        self._changed = asyncio.Event()
        self._finished = asyncio.Event()

    @property
    @abstractmethod
    def on_screen(self) -> bool:
        """Whether some of the answer is shown already."""

    @abstractmethod
    async def show(self, text: str, *, final: bool, choices: list[str]) -> str:
        """Show ``text`` (final: with a button per choice); returns what could not be delivered."""

    def on_event(self, kind: str, data: dict[str, Any]) -> None:
        """The agent's event sink: collects the streamed text."""
        if kind == "text":
            self.text += data["delta"]
            self._changed.set()
        elif kind == "reroute":  # what was streamed is replaced by the other model's answer
            where = "asking the cloud" if data["route"] == "cloud" else "answering on the Pi"
            self.text = f"({data['reason']}: {where}…)\n\n"
            self._changed.set()

    async def run(self) -> None:
        """Push the growing text, at most once per interval, until :meth:`finish`."""
        while not self._finished.is_set():
            await self._changed.wait()
            self._changed.clear()
            delay = self.last_push + self.interval_s - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._finished.wait(), delay)
            if self._finished.is_set():
                return
            await self.show(self.text, final=False, choices=[])

    async def finish(self, runner: asyncio.Task[None], text: str, choices: list[str] | None = None) -> str:
        """Show the complete text (with a button per choice); returns what could not be delivered."""
        self._finished.set()
        self._changed.set()
        await runner  # lets a push in flight complete, so its message id is known
        if self.on_screen:
            await asyncio.sleep(max(0.0, self.last_push + self.interval_s - time.monotonic()))
        return await self.show(text, final=True, choices=choices or [])


Trouble = Literal["shown", "gone", "again", "unsent"]


class EditedReply(StreamedReply):
    """A reply sent at its first text and edited as it grows: one message per piece of the text.

    A piece already shown unchanged is not sent again; the buttons go under the last piece. A platform
    writes :meth:`split`, :meth:`post`, :meth:`edit` and :meth:`trouble` (what a failed push means), and
    may show "typing…" (:meth:`send_typing`, every :attr:`typing_every_s`) until the first piece is out.
    """

    typing_every_s = 0.0  # 0: the platform shows no "typing…"

    def __init__(self, interval_s: float) -> None:
        super().__init__(interval_s)
        self.shown: list[tuple[Any, str]] = []  # per piece: the platform's message reference and what it shows

    @property
    def on_screen(self) -> bool:
        """Whether a first message was sent."""
        return bool(self.shown)

    @abstractmethod
    def split(self, text: str) -> list[str]:
        """The pieces of a text, each within the platform's message limit."""

    @abstractmethod
    def markup(self, choices: list[str]) -> Any:
        """The buttons for the answers a reply offers (None for none)."""

    @abstractmethod
    async def post(self, piece: str, markup: Any, *, first: bool) -> Any:
        """Send a new message; returns the platform's reference to it (for later edits)."""

    @abstractmethod
    async def edit(self, ref: Any, piece: str, markup: Any) -> None:
        """Change what a sent message shows."""

    @abstractmethod
    async def trouble(self, exc: Exception, *, final: bool, last_try: bool) -> Trouble:
        """What a failed push means: ``shown`` (it showed that already), ``gone`` (nothing will reach the
        chat), ``again`` (push it once more now), ``unsent`` (the rest goes to the outbox); raise when
        the error is not the platform's."""

    def rest(self, pieces: list[str], first_unsent: int) -> str:
        """What was not shown, as the outbox keeps it."""
        return "\n\n".join(pieces[first_unsent:])

    async def send_typing(self) -> None:
        """Show "typing…" once (a platform that shows it)."""

    async def run(self) -> None:
        """Push the growing text (the shared throttle), showing "typing…" until the first piece is out."""
        typing = asyncio.ensure_future(self._typing()) if self.typing_every_s else None
        try:
            await super().run()
        finally:
            if typing is not None:
                typing.cancel()

    async def _typing(self) -> None:
        while not self.shown:
            await self.send_typing()
            await asyncio.sleep(self.typing_every_s)

    async def show(self, text: str, *, final: bool, choices: list[str]) -> str:
        """Send or edit one message per piece; returns what could not be shown (of a final text)."""
        pieces = self.split(text)
        markup = self.markup(choices)
        for i, piece in enumerate(pieces):
            extra = markup if i == len(pieces) - 1 else None  # "Turn the fan on?" [yes] [no]
            if i < len(self.shown) and self.shown[i][1] == piece and extra is None:
                continue
            for attempt in range(2):
                self.last_push = time.monotonic()
                try:
                    if i < len(self.shown):
                        await self.edit(self.shown[i][0], piece, extra)
                        self.shown[i] = (self.shown[i][0], piece)
                    else:
                        self.shown.append((await self.post(piece, extra, first=not self.shown), piece))
                    break
                except Exception as exc:
                    what = await self.trouble(exc, final=final, last_try=attempt == 1)
                    if what == "shown":
                        self.shown[i] = (self.shown[i][0], piece)
                        break
                    if what == "gone":
                        return ""
                    if what == "unsent":
                        return self.rest(pieces, i) if final else ""
        return ""
