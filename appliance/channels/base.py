"""A chat channel is its platform plus this: the inbound pipeline, the lifecycle and delivery every channel shares.

A platform (Telegram, Discord, Slack, e-mail, WhatsApp, a webhook bridge, MQTT chat) subclasses
:class:`ChatChannel` and writes only what is its own: :meth:`~ChatChannel.connect` and
:meth:`~ChatChannel.disconnect`, how a message is shown (:meth:`~ChatChannel.say`, and
:meth:`~ChatChannel.streamed_reply` where it can edit a message as it grows, usually an
:class:`~appliance.channels.core.EditedReply`), and how one piece of a stored outbound message is sent
(:meth:`~ChatChannel.pieces`, :meth:`~ChatChannel.send_piece`, :meth:`~ChatChannel.verdict`; the outbox
delivery piece by piece, keeping only the unsent rest, is :meth:`~ChatChannel.deliver`, once). It turns
what the platform receives into an :class:`Incoming` and hands it to :meth:`~ChatChannel.handle` (a button
press to :meth:`~ChatChannel.tap`), which:

1. lets in only the allowlist and the paired (a stranger costs one rate-limited log line; a 6-digit code
   in a private chat pairs them, see ``picoagent channels pair``),
2. handles a message the platform delivers twice once (its ``remote_id``, recorded in the ``inbound`` table),
3. answers ``/commands`` (the set every channel has, :mod:`appliance.channels.commands`; a platform without
   buttons shows them as reply commands such as ``/approve 3f2a``),
4. runs one turn per conversation at a time, with the route forced by ``/local`` or ``/cloud``, and
   answers with the footer; a reply that cannot be shown goes to the durable outbox.

A connection that fails raises :class:`ChannelDown`: the channel stays down with the reason in
:attr:`~ChatChannel.problem` (``picoagent status``, ``doctor``, the log) and retries in the background
unless the reason is permanent (a refused token). The daemon never stops for a channel. Every channel
passes the same contract suite (tests/test_channel_contract.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from appliance.agent.record import ReplyRecord
from appliance.channels import pairing
from appliance.channels.automation_commands import typed_command
from appliance.channels.commands import Button, ChatCommands, CommandCall, Said, Tap, Tapped
from appliance.channels.core import Doorkeeper, Route, StreamedReply, footer
from appliance.errors import PicoagentError
from appliance.outbox import Delivery, Outbox, Outcome, OutMessage
from appliance.runtime import Runtime

log = logging.getLogger(__name__)

CONNECT_RETRY_S = (5, 15, 30, 60, 120, 300)
STOP_GRACE_S = 10.0
PAIRED = "Paired: you can talk to me now."
FAILED = "Something went wrong on the Pi while answering; the log has the details."


@dataclass(frozen=True)
class Verdict:
    """What a failed send of one piece of a stored message means (:meth:`ChatChannel.verdict`)."""

    outcome: Outcome  # "retry" (with backoff), "paused" (the platform asked to wait) or "failed" (never)
    reason: str  # stored with the message and logged, for people
    wait_s: float | None = None  # "paused": delivery waits this long; None: untouched until the channel is back


class ChannelDown(Exception):
    """The platform cannot be used now: ``reason`` is what people read; ``permanent``: retrying will not help."""

    def __init__(self, reason: str, *, permanent: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


@dataclass(frozen=True)
class Incoming:
    """One message as the platform received it, in the platform's own ids (as strings)."""

    chat_id: str  # where the answer goes (a DM channel, a Slack channel, an e-mail address, a phone number)
    user_id: str  # who wrote it, as allow_from lists people
    user_name: str  # as people read it
    text: str  # without the assistant's @mention
    private: bool  # a direct chat: only there does a pairing code count
    remote_id: str = ""  # the platform's id of the message: a second delivery of it is ignored
    session: str = ""  # the conversation it belongs to (a Slack thread, an e-mail thread); default chat_id
    meta: dict[str, Any] = field(default_factory=dict)  # what an answer needs (a thread ts, a Message-ID)

    @property
    def conversation(self) -> str:
        """The key of the conversation this message continues (its history, /private, /local)."""
        return self.session or self.chat_id


def button_command(data: str) -> str:
    """What a person types instead of tapping a button (a platform without buttons shows this)."""
    kind, _, rest = data.partition(":")
    verb, _, target = rest.partition(":")
    if kind == "say":
        return rest
    if kind == "apr" and verb in ("approve", "deny"):
        return f"/{verb} {target}"
    if kind == "dev" and verb in ("toggle", "read"):
        return f"/{verb} {target}"
    return typed_command(kind, verb, target)  # /tasks and /schedule buttons


def as_text(said: Said) -> Said:
    """A message with buttons as a message without: each button becomes the command that does the same."""
    lines = [said.text]
    for row in said.buttons:
        for button in row:
            typed = button_command(button.data)
            if typed:
                lines.append(f"• {button.label}: reply {typed}")
    return Said("\n".join(lines))


class CollectedReply(StreamedReply):
    """An answer shown once, when it is complete (a platform that cannot edit a message, or e-mail)."""

    def __init__(self, channel: ChatChannel, incoming: Incoming) -> None:
        super().__init__(interval_s=3600.0)
        self.channel = channel
        self.incoming = incoming

    @property
    def on_screen(self) -> bool:
        """Nothing is shown before the end."""
        return False

    async def show(self, text: str, *, final: bool, choices: list[str]) -> str:
        """Say the final text (with a button per choice); what could not be said is returned for the outbox."""
        if not final:
            return ""
        try:
            await self.channel.say(self.incoming, Said(text, _choice_buttons(choices)))
        except Exception as exc:  # any failure: the reply goes to the outbox rather than being lost
            log.warning("%s: showing a reply failed (%s); it goes to the outbox", self.channel.name, exc)
            return text
        return ""


def _choice_buttons(choices: list[str]) -> list[list[Button]]:
    return [[Button(c, f"say:{c}") for c in choices]] if choices else []


class ChatChannel(ABC):
    """One chat platform inside the daemon: a service (start/stop) that answers allowed people and delivers."""

    name: ClassVar[str] = ""
    buttons: ClassVar[bool] = False  # whether the platform shows buttons; else they become reply commands
    # Whether each sender is a person the channel knows (allowlisted or paired). False (a broker topic, a signed
    # bridge): its messages go to the assistant, and commands that decide, act or reveal are refused there.
    people: ClassVar[bool] = True

    def __init__(
        self, config: Any, runtime: Runtime, outbox: Outbox, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config
        self.runtime = runtime
        self.db = runtime.db
        self.outbox = outbox
        self.clock = clock
        self.problem: str | None = None  # why the channel is off, for people
        self.connected = False
        self.detail = ""  # what "up" means here ("as @pico"), for status pages
        self.doorkeeper = Doorkeeper(
            self.name,
            self.db,
            allow_from=lambda: {str(x) for x in getattr(self.config, "allow_from", [])},
            is_paired=functools.partial(pairing.is_paired, self.name),
            redeem=functools.partial(pairing.redeem, self.name),
            clock=clock,
        )
        self.commands = ChatCommands(self.name, runtime, outbox, people=self.people)
        self.delivery = Delivery(outbox, self.name, self.deliver, clock=clock)
        self._delivering = False
        self._chat_locks: dict[str, asyncio.Lock] = {}
        self._turns: set[asyncio.Task[Any]] = set()
        self._connecting: asyncio.Task[None] | None = None
        self._stopping = False

    # --- what a platform writes ----------------------------------------------------------------------

    @abstractmethod
    async def connect(self) -> None:
        """Log in and start receiving; raise :class:`ChannelDown` when the platform cannot be used."""

    @abstractmethod
    async def disconnect(self) -> None:
        """Stop receiving and close the connection (after a failed connect too)."""

    @abstractmethod
    async def say(self, incoming: Incoming, said: Said) -> None:
        """Show a message (text and buttons) in answer to ``incoming``; raise when it could not be shown."""

    def pieces(self, message: OutMessage) -> Sequence[Any]:
        """A stored message as the messages that carry it (within the platform's limit); none when empty."""
        raise NotImplementedError(f"{self.name}: a channel writes pieces/send_piece/verdict, or deliver")

    async def send_piece(self, message: OutMessage, piece: Any) -> str:
        """Send one piece of a stored message; returns the platform's id of what was sent."""
        raise NotImplementedError(f"{self.name}: a channel writes pieces/send_piece/verdict, or deliver")

    def verdict(self, exc: Exception) -> Verdict | None:
        """What a failed :meth:`send_piece` means; None: not the platform's error (the delivery pass decides)."""
        return None

    def unsent_text(self, pieces: Sequence[Any], first_unsent: int) -> str:
        """The text of the pieces not sent yet, as the outbox keeps it."""
        return "\n\n".join(str(piece) for piece in pieces[first_unsent:])

    def streamed_reply(self, incoming: Incoming) -> StreamedReply | None:
        """A reply shown while it grows (edits of one message); None: one message at the end."""
        return None

    # --- state ---------------------------------------------------------------------------------------

    @property
    def up(self) -> bool:
        """Whether messages can go out now."""
        return self.connected and self.problem is None

    @property
    def turns_in_flight(self) -> int:
        """Answers being written now."""
        return len(self._turns)

    def owner_target(self) -> str | None:
        """Where proactive messages go: ``owner``, else the first allowed user, else the first paired one."""
        owner = str(getattr(self.config, "owner", "") or "")
        if owner:
            return owner
        allowed = getattr(self.config, "allow_from", [])
        if allowed:
            return str(allowed[0])
        users = pairing.paired_users(self.db, self.name)
        return users[0] if users else None

    def notify_wakeup(self) -> None:
        """Something was put into the outbox: deliver now rather than at the next poll (any thread)."""
        self.delivery.wakeup()

    def went_down(self, reason: str) -> None:
        """The platform's connection dropped (its library reconnects): proactive messages try other channels."""
        if self.connected:
            log.warning("%s: the connection dropped: %s", self.name, reason)
        self.connected = False
        self.problem = reason

    def came_up(self, detail: str = "") -> None:
        """Connected (again): deliver what waits."""
        if not self.connected:
            log.info("%s: connected%s", self.name, f" {detail}" if detail else "")
        self.connected = True
        self.problem = None
        self.detail = detail or self.detail
        if not self._delivering and not self._stopping:
            self._delivering = True
            self.delivery.start()
        self.delivery.wakeup()

    # --- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect; a platform that cannot be reached is retried in the background, a refusal is reported."""
        self.delivery.bind()
        if not await self._try_connect():
            self._connecting = asyncio.ensure_future(self._connect_later())

    async def _try_connect(self) -> bool:
        """One attempt; True when done (connected, or refused for good)."""
        try:
            await self.connect()
        except ChannelDown as exc:
            self.went_down(exc.reason)
            with contextlib.suppress(Exception):
                await self.disconnect()
            if exc.permanent:
                log.error(
                    "%s: %s; the channel stays down until its settings are fixed (saved, or the file and a reload)",
                    self.name,
                    exc.reason,
                )
                return True
            log.warning("%s: %s; retrying in the background", self.name, exc.reason)
            return False
        except Exception as exc:  # a bug in a channel must not stop the daemon
            log.exception("%s: connecting failed", self.name)
            self.went_down(f"connecting failed: {type(exc).__name__}: {exc}")
            return True
        self.came_up(self.detail)
        return True

    async def _connect_later(self) -> None:
        for attempt in range(10**9):
            await asyncio.sleep(CONNECT_RETRY_S[min(attempt, len(CONNECT_RETRY_S) - 1)])
            if self._stopping or await self._try_connect():
                return

    async def stop(self) -> None:
        """Stop receiving, let answers in flight finish (briefly), finish the delivery pass, disconnect."""
        self._stopping = True
        self.delivery.stop_soon()
        if self._connecting is not None:
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
        if self._turns:
            _done, pending = await asyncio.wait(set(self._turns), timeout=STOP_GRACE_S)
            for task in pending:
                task.cancel()
        await self.delivery.stop()  # the pass in flight finishes: nothing is sent without being marked sent
        try:
            await self.disconnect()
        except Exception:
            log.exception("%s: disconnecting failed", self.name)
        self.connected = False

    # --- the inbound pipeline ------------------------------------------------------------------------

    async def is_allowed(self, user_id: str) -> bool:
        """Whether a user is in the channel's allow_from or was paired."""
        return await self.doorkeeper.is_allowed(user_id)

    async def admit(self, incoming: Incoming) -> bool:
        """True for an allowed person; a stranger gets nothing (a pairing code in a private chat aside)."""
        if await self.is_allowed(incoming.user_id):
            return True
        match = pairing.PAIRING_CODE.fullmatch(incoming.text.strip()) if incoming.private else None
        if match:
            if await self.doorkeeper.try_code(incoming.user_id, incoming.user_name, match.group(1)):
                with contextlib.suppress(Exception):
                    await self.say(incoming, Said(PAIRED))
        else:
            self.doorkeeper.turned_away(incoming.user_id, incoming.user_name)
        return False

    async def first_time(self, remote_id: str) -> bool:
        """False when the platform delivered this message (or tap) before: it was handled already."""
        if not remote_id:
            return True
        fresh = await self.db.call(pairing.first_time, self.db, self.name, remote_id, clock=self.clock)
        if not fresh:
            log.info("%s: %s arrived again; it was handled once already", self.name, remote_id)
        return bool(fresh)

    async def handle(self, incoming: Incoming) -> None:
        """One message: who, once, a command or a turn; the answer said in the chat."""
        if self._stopping or not await self.admit(incoming) or not await self.first_time(incoming.remote_id):
            return
        text = incoming.text.strip()
        if text.startswith("/"):
            name, *words = text[1:].split()
            name = name.split("@")[0].lower()
            if name in self.commands.handlers():
                for said in await self.command(incoming, name, words):
                    await self.say_or_keep(incoming, said)
                await self._handled(incoming)
                return
        force = self.commands.forced_route.pop(incoming.conversation, None)
        await self.turn(incoming, text, force)

    async def command(self, incoming: Incoming, name: str, words: list[str]) -> list[Said]:
        """A command from this chat (a platform's slash command comes here too); what to say, in order."""
        handler = self.commands.handlers().get(name)
        if handler is None:
            return [Said(f"Unknown command /{name}; /help lists them.")]

        async def ask(text: str, route: Route) -> None:
            await self.turn(incoming, text, route)

        call = CommandCall(
            incoming.conversation, words, ask, user=f"{self.name}:{incoming.user_id}", name=incoming.user_name
        )
        said = await handler(call)
        return said if self.buttons else [as_text(s) for s in said]

    async def tap(self, incoming: Incoming, data: str) -> Tapped | None:
        """A button press (``incoming`` says who and where; its remote_id is the press's id): its answer."""
        if not await self.is_allowed(incoming.user_id):
            self.doorkeeper.turned_away(incoming.user_id, incoming.user_name)
            return Tapped("not allowed", alert=True)
        if not await self.first_time(incoming.remote_id):
            return None
        kind, _, said = data.partition(":")
        if kind == "say":  # an answer offered under a reply ("yes", "porch"): said as a message
            task = asyncio.ensure_future(self.turn(incoming, said, None))
            self._turns.add(task)
            task.add_done_callback(self._turns.discard)
            return Tapped(f"→ {said}")
        handler = self.commands.button_handlers().get(kind)
        if handler is None:
            return Tapped("That button is no longer valid.")
        return await handler(Tap(data, f"{self.name}:{incoming.user_id}", incoming.user_name))

    async def turn(self, incoming: Incoming, text: str, force: Route | None) -> ReplyRecord | None:
        """One turn per conversation at a time, known to the shutdown (which lets it finish)."""
        task = asyncio.current_task()
        if task is not None:
            self._turns.add(task)
        try:
            async with self._chat_locks.setdefault(incoming.conversation, asyncio.Lock()):
                return await self.answer(incoming, text, force)
        finally:
            if task is not None:
                self._turns.discard(task)

    async def answer(self, incoming: Incoming, text: str, force: Route | None = None) -> ReplyRecord | None:
        """Run a turn and show its reply (streamed where the platform can); what cannot be shown goes to the outbox."""
        stream = self.streamed_reply(incoming) or CollectedReply(self, incoming)
        pusher = asyncio.ensure_future(stream.run())
        record: ReplyRecord | None = None
        try:
            record = await self.runtime.agent.turn(
                text,
                channel=self.name,
                chat_id=incoming.conversation,
                client=f"{self.name}:{incoming.user_id}",
                on_event=stream.on_event,
                force=force,
                person=self.people,
            )
            final = f"{_with_choices(record.text, record.choices, self.buttons)}\n\n{footer(record)}".rstrip()
        except PicoagentError as exc:
            final = exc.for_people()
        except asyncio.CancelledError:
            pusher.cancel()
            raise
        except Exception:
            log.exception("%s: a turn failed in chat %s", self.name, incoming.chat_id)
            final = FAILED
        choices = record.choices if record is not None and self.buttons else []  # else they are in the text
        undelivered = await stream.finish(pusher, final, choices)
        if undelivered:
            await self.db.call(self.outbox.enqueue, self.name, incoming.chat_id, undelivered, "reply", incoming.meta)
            self.delivery.wakeup()
        await self._handled(incoming)
        return record

    async def say_or_keep(self, incoming: Incoming, said: Said) -> None:
        """Say it now; when it cannot be shown, the outbox delivers its text (buttons as reply commands) later."""
        try:
            await self.say(incoming, said)
        except Exception as exc:
            log.warning("%s: showing an answer failed (%s); it goes to the outbox", self.name, exc)
            text = as_text(said).text
            await self.db.call(self.outbox.enqueue, self.name, incoming.chat_id, text, "reply", incoming.meta)
            self.delivery.wakeup()

    # --- delivery of the outbox ---------------------------------------------------------------------

    async def deliver(self, message: OutMessage) -> Outcome:
        """Send one stored message piece by piece and mark it in the outbox: sent once every piece went;
        after a failure only the unsent rest is kept, so a retry (after a restart too) repeats nothing."""
        pieces = self.pieces(message)
        if not pieces:
            await self.db.call(self.outbox.mark_failed, message.id, "the message is empty")
            return "failed"
        remote_id = ""
        for i, piece in enumerate(pieces):
            try:
                remote_id = await self.send_piece(message, piece)
            except Exception as exc:
                verdict = self.verdict(exc)
                if verdict is None:
                    raise
                return await self._not_sent(message, pieces, i, verdict)
        await self.db.call(self.outbox.mark_sent, message.id, remote_id)
        return "sent"

    async def deliver_due(self) -> int:
        """One delivery pass of the outbox now; returns how many messages the platform accepted."""
        return await self.delivery.deliver_due()

    async def _not_sent(self, message: OutMessage, pieces: Sequence[Any], i: int, verdict: Verdict) -> Outcome:
        if verdict.outcome == "failed":
            await self.db.call(self.outbox.mark_failed, message.id, verdict.reason)
            log.warning(
                "%s: message %d to %s cannot be delivered: %s", self.name, message.id, message.chat_id, verdict.reason
            )
            return "failed"
        if i:  # some pieces went out: only the rest is sent again
            await self.db.call(self.outbox.keep_unsent, message.id, self.unsent_text(pieces, i))
        if verdict.outcome == "paused":
            if verdict.wait_s is None:
                return "paused"  # untouched: it goes once the channel is back
            self.delivery.pause(verdict.wait_s)
            await self.db.call(self.outbox.mark_retry, message, verdict.reason, verdict.wait_s)
            log.info("%s: %s; sending again in %g s", self.name, verdict.reason, verdict.wait_s)
            return "paused"
        await self.db.call(self.outbox.mark_retry, message, verdict.reason)
        log.info("%s: message %d not delivered (%s); will retry", self.name, message.id, verdict.reason)
        return "retry"

    async def _handled(self, incoming: Incoming) -> None:
        if incoming.remote_id:
            await self.db.call(pairing.mark_handled, self.db, self.name, incoming.remote_id)


def _with_choices(text: str, choices: list[str], buttons: bool) -> str:
    """The reply, with its answers to tap said as replies to type where the platform has no buttons: before
    the footer, quoted, and not at all where the reply already offers them ("Turn it on? (yes or no)")."""
    if not choices or buttons or f"({' or '.join(choices)})" in text:
        return text
    return f"{text}\n\nReply " + " or ".join(f'"{choice}"' for choice in choices) + "."  # typed as shown
