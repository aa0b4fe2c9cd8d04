"""The commands and buttons every chat channel offers, platform-neutral: they answer with text and buttons.

A command is a name and a handler: ``/status`` -> :meth:`ChatCommands.status`, which returns the
messages to say (:class:`Said`: a text and rows of :class:`Button`). A tap on a button comes back as
its data, ``kind:verb:target`` (``dev:toggle:fan``, ``apr:approve:<id>``), and its handler answers
with a short notice and the tapped message's new content (:class:`Tapped`). The platform only parses
its own updates into a :class:`CommandCall` or a :class:`Tap` and renders what comes back, so a new
channel gets /status, /devices, /approve, /cloud, /local, /private, /reset, /memory, /tasks and /schedule
(automation_commands.py) for free.
Device writes and tool calls that need approval are listed by /approve, one message each with Approve and Deny.

Commands are for people. A channel whose senders are not people the Pi knows (``people = False``: the MQTT
notify topic, where whoever the broker lets publish writes; a webhook bridge, where whoever holds the
secret, usually another program, does) gets :data:`MACHINE_COMMANDS` only: its other messages go to the
assistant as text, within each device's policy. Every other command decides (/approve, /deny, a task's
Cancel), acts (/toggle, /cloud, /reset) or reveals (/memory, /status, the pending approvals) and is
answered there with where a person does it: a decision never comes from the path that asked for it.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from appliance.channels.core import Route
from appliance.errors import PicoagentError
from appliance.health import read_health
from appliance.memory.db import Database
from appliance.memory.records import MIN_SIMILARITY
from appliance.outbox import Outbox
from appliance.runtime import Runtime

HELP = """I am the assistant on your Raspberry Pi. Write to me and I answer with the model on the Pi; \
"turn on the porch light" or "living room temperature" are done at once, without the model.

/status – the Pi's health, the model and its queue
/devices – switch and read the devices with buttons
/approve – device writes and tool calls waiting for your approval (/approve ID or /deny ID decides one)
/toggle NAME, /read NAME – switch or read a device without its button
/cloud, /local – answer the next message (or /cloud TEXT) with the cloud model, or on the Pi
/private on|off – keep this chat on the Pi always, or route it as configured
/reset – forget this conversation and start a new one
/memory – what this conversation holds; /memory WORDS searches the memories
/tasks – the tasks at work: steps, tokens, Pause, Resume, Cancel (/tasks cancel ID)
/schedule – reminders and scheduled jobs: next run, Pause, Resume, Cancel (/schedule pause ID)"""
COMMANDS = [  # the menu a platform shows (name, what it does); /start is answered like /help
    ("help", "what I can do"),
    ("status", "the Pi's health, model and queue"),
    ("devices", "switch and read the devices"),
    ("approve", "device writes and tool calls waiting for approval"),
    ("local", "answer the next message on the Pi"),
    ("cloud", "answer the next message with a cloud model"),
    ("private", "on: this chat never leaves the Pi; off: as configured"),
    ("reset", "start a new conversation"),
    ("memory", "what this conversation holds, or /memory WORDS to search"),
    ("tasks", "tasks at work, with pause, resume, cancel"),
    ("schedule", "reminders and scheduled jobs"),
]
# what a channel without identified people may run: /local TEXT is a question for the small model, what a decline
# there offers (walk 8 found it refused); /cloud stays a person's (it spends the cloud budget)
MACHINE_COMMANDS = frozenset({"help", "start", "local"})
MACHINE_HELP = """I am the assistant on your Raspberry Pi. A message here is answered by the assistant; \
"turn on the porch light" is done within each device's policy (a device that needs approval waits for a person).

Whoever can send on this channel may write here, so it is not a person the Pi knows: its only command is \
/help (and /local TEXT, which asks the small model on the Pi). Approvals, memories, devices and the other commands \
are for people, in a chat where you are allowlisted or paired, on the web page, or with `picoagent` on the Pi."""
DEVICES_HEADER = "Devices: tap a switch to toggle it, a sensor to read it."
NOT_VALID = "That button is no longer valid."
MEMORY_HITS = 5  # /memory QUERY answers with this many, as `picoagent memory search` does by default


@dataclass(frozen=True)
class Button:
    """A button under a message: its label, and the data a tap sends back (``kind:verb:target``)."""

    label: str
    data: str


@dataclass(frozen=True)
class Said:
    """A message a command answers with: text, and rows of buttons under it."""

    text: str
    buttons: list[list[Button]] = field(default_factory=list)


@dataclass(frozen=True)
class Tapped:
    """What a tap answers: a short notice (an alert when it failed) and maybe the message's new content."""

    notice: str
    alert: bool = False
    edit: Said | None = None  # the tapped message becomes this (no buttons: they go away)


@dataclass(frozen=True)
class CommandCall:
    """One command as the platform received it."""

    chat_id: str
    words: list[str]  # what followed the command
    ask: Callable[[str, Route], Awaitable[None]]  # answer a text in this chat on a route (/cloud TEXT)
    user: str = ""  # who sent it, as decisions record it ("discord:111"): /approve ID, /toggle NAME
    name: str = ""  # their name, as people read it


@dataclass(frozen=True)
class Tap:
    """One button tap as the platform received it."""

    data: str
    user: str  # who tapped, as decisions record it ("telegram:111")
    name: str  # their name, as people read it


def parse_button(data: str) -> tuple[str, str, str]:
    """A button's data, ``kind:verb:target`` (clients can send anything, so never trust its shape)."""
    parts = data.split(":", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else ("", "", "")


class ChatCommands:
    """The commands and buttons every chat channel offers, answered as text and buttons to render."""

    def __init__(self, channel: str, runtime: Runtime, outbox: Outbox, *, people: bool = True) -> None:
        """``people``: whether the channel's senders are people it knows (allowlisted or paired); False: only
        :data:`MACHINE_COMMANDS` run, every other command and button is refused with where a person does it."""
        self.channel = channel
        self.people = people
        self.runtime = runtime
        self.db = runtime.db
        self.outbox = outbox
        # The route forced with /local or /cloud for a chat's next message.
        self.forced_route: dict[str, Route] = {}
        self._decide_lock = asyncio.Lock()  # one approval decision at a time: a double tap runs once
        # /tasks and /schedule (imported here: that module builds on this one's Said and Button).
        from appliance.channels.automation_commands import AutomationCommands

        self.automation = AutomationCommands(runtime.db)

    def handlers(self) -> dict[str, Callable[[CommandCall], Awaitable[list[Said]]]]:
        """Command name -> its handler (what it says, in order); without people, all but /help refuse."""
        every = self._every_handler()
        if self.people:
            return every
        refused = {name: functools.partial(self.needs_person, name) for name in every}
        allowed = {"start": self.machine_help, "help": self.machine_help, "local": self.local}
        assert set(allowed) == MACHINE_COMMANDS
        return {**refused, **allowed}

    def _every_handler(self) -> dict[str, Callable[[CommandCall], Awaitable[list[Said]]]]:
        return {
            "start": self.help,
            "help": self.help,
            "status": self.status,
            "devices": self.devices,
            "approve": self.approve,
            "deny": self.deny,
            "toggle": self.toggle,
            "read": self.read,
            "local": self.local,
            "cloud": self.cloud,
            "private": self.private,
            "reset": self.reset,
            "memory": self.memory,
            **self.automation.handlers(),
        }

    def button_handlers(self) -> dict[str, Callable[[Tap], Awaitable[Tapped | None]]]:
        """Button kind (the data's first part) -> its handler (None: nothing to answer); without people, refusals."""
        every = {"dev": self.device_button, "apr": self.approval_button, **self.automation.button_handlers()}
        if self.people:
            return every
        return {kind: self.button_needs_person for kind in every}

    def person_only(self, what: str) -> str:
        """Why ``what`` is refused on a channel without people, and where a person does it."""
        return (
            f"{what} needs a person: whoever can send on {self.channel} writes here, not a person the Pi knows,"
            " so here messages go to the assistant and the only command is /help (and /local TEXT). Decide"
            " approvals (`picoagent approvals list`, `picoagent approvals approve ID`), read memories and use the other"
            " commands in a chat where you are allowlisted or paired, on the web page, or with `picoagent` on the Pi."
        )

    async def needs_person(self, name: str, call: CommandCall) -> list[Said]:
        """A command a channel without people may not run: refused, saying where a person runs it."""
        return [Said(self.person_only(f"/{name}"))]

    async def button_needs_person(self, tap: Tap) -> Tapped:
        """A button a channel without people may not press."""
        return Tapped(self.person_only("This button"), alert=True)

    async def machine_help(self, call: CommandCall) -> list[Said]:
        """/help on a channel without people: messages go to the assistant, commands are for people."""
        return [Said(MACHINE_HELP)]

    async def help(self, call: CommandCall) -> list[Said]:
        """/help, /start: what the assistant does and its commands."""
        return [Said(HELP)]

    async def status(self, call: CommandCall) -> list[Said]:
        """/status: the Pi's health, the model and the queue."""
        return [Said(await self.status_text())]

    async def status_text(self) -> str:
        """The Pi's health, the model and the queue, as /status shows them."""
        health = await asyncio.to_thread(read_health, self.db.path.parent)
        runtime = self.runtime
        temperature = "no CPU temperature" if health.cpu_temperature_c is None else f"CPU {health.cpu_temperature_c} °C"
        throttled = [name for name, on in (health.throttled or {}).items() if on and not name.endswith("occurred")]
        lines = [
            f"{temperature} · load {' '.join(f'{x:g}' for x in health.load)} · up {_duration(health.uptime_s)}",
            f"Memory {health.memory_available_mb} of {health.memory_total_mb} MB free"
            f" · disk {health.disk_free_gb:g} of {health.disk_total_gb:g} GB free",
        ]
        if throttled:
            lines.append("Throttled now: " + ", ".join(throttled))
        queue = runtime.model_queue.waiting + (1 if runtime.model_queue.busy else 0)
        loaded = "loaded" if runtime.model.loaded else "not loaded yet"
        lines.append(f"Model {runtime.model.name} ({loaded}) · queue {queue}")
        if runtime.devices is not None:
            waiting = len(await asyncio.to_thread(runtime.devices.approvals.pending))
            lines.append(f"Devices {len(runtime.devices.devices)} · waiting for approval {waiting}")
        pending = await self.db.call(self.outbox.pending_count, self.channel)
        lines.append(f"Messages waiting to be delivered: {pending}")
        return "\n".join(lines)

    async def local(self, call: CommandCall) -> list[Said]:
        """/local [TEXT]: TEXT, or the next message, is answered on the Pi."""
        return await self._forced(call, "local")

    async def cloud(self, call: CommandCall) -> list[Said]:
        """/cloud [TEXT]: TEXT, or the next message, goes to the cloud model (when routing allows it)."""
        return await self._forced(call, "cloud")

    async def _forced(self, call: CommandCall, route: Route) -> list[Said]:
        """/cloud TEXT answers TEXT on that route; a bare /cloud applies to the next message."""
        text = " ".join(call.words)
        if text:
            await call.ask(text, route)
            return []
        self.forced_route[call.chat_id] = route
        if route == "local":
            return [Said("The next message stays on the Pi.")]
        ctx = await self.runtime.agent.route_preview(self.channel, call.chat_id, "cloud")
        blocked = ctx.cloud_blocked()
        if blocked is None:
            return [Said(f"The next message goes to {ctx.provider}.")]
        return [Said(f"The next message is answered on the Pi: {blocked[1]}.")]

    async def private(self, call: CommandCall) -> list[Said]:
        """/private on|off: keep this chat on the Pi always, or route it as configured."""
        words = [w.lower() for w in call.words]
        if words and words[0] in ("on", "off"):
            await self.db.call(self.db.set_private, self.channel, call.chat_id, words[0] == "on")
        private = await self.db.call(self.db.is_private, self.channel, call.chat_id)
        if private:
            return [Said("This chat stays on the Pi: its messages never go to a cloud model. /private off undoes it.")]
        how = routed(self.runtime.config.routing.mode)
        return [Said(f"This chat is routed as configured: {how}. /private on keeps it on the Pi.")]

    async def reset(self, call: CommandCall) -> list[Said]:
        """/reset: forget this conversation."""
        await self.runtime.agent.reset(self.channel, call.chat_id)
        return [Said("Forgotten: the next message starts a new conversation.")]

    async def memory(self, call: CommandCall) -> list[Said]:
        """/memory: what this conversation holds; /memory QUERY: the best memories, as `memory search` finds them."""
        if call.words:
            return [Said(await self._search_memories(" ".join(call.words)))]
        count = await self.db.call(_conversation_size, self.db, self.channel, call.chat_id)
        recent = self.runtime.config.agent.history_messages
        return [
            Said(
                f"This conversation holds {count} message{'s' if count != 1 else ''}; the last {recent} go into"
                " each prompt. /memory WORDS searches the memories; /reset starts a new conversation."
            )
        ]

    async def _search_memories(self, query: str) -> str:
        """The best memories for a query (by meaning and keyword), one line each with its id."""
        store = self.runtime.memory
        if store is None:
            return "Long-term memory is not open in this process."
        try:
            hits = await asyncio.to_thread(store.search, query, MEMORY_HITS)  # embedding the query blocks
        except PicoagentError as exc:
            return f"Searching the memories failed: {exc.message}"
        shown = hits.relevant()  # the bar `memory search` uses: the nearest are not always near
        if not shown:
            cut = f" ({len(hits)} left out: similarity below {MIN_SIMILARITY:.2f})" if hits else ""
            return f"Nothing remembered matches {query!r}{cut}."
        lines = [f"Memories matching {query!r}:"]
        lines += [f"{hit.memory.id}: {hit.memory.text}" for hit in shown]
        if hits.note:
            lines.append(f"({hits.note})")
        return "\n".join(lines)

    # --- devices -------------------------------------------------------------------------------------

    async def devices(self, call: CommandCall) -> list[Said]:
        """/devices: a button per device (switch or read it)."""
        if self.runtime.devices is None or not self.runtime.devices.devices:
            return [Said("No devices are configured (devices: in the config).")]
        return [Said(DEVICES_HEADER, await self._device_buttons())]

    async def _device_buttons(self) -> list[list[Button]]:
        """One button per device: switches and dimmers toggle, sensors and inputs read."""
        assert self.runtime.devices is not None
        rows = []
        for device in self.runtime.devices.describe():
            name = device["name"]
            if device["kind"] in ("switch", "dimmer") and "set" in device["allowed"]:
                state = await self._state_words(name)
                lock = " (needs approval)" if device["approval"] == "required" else ""
                rows.append([Button(f"{name}: {state}{lock}", f"dev:toggle:{name}")])
            elif "read" in device["allowed"]:
                rows.append([Button(f"{name}: read", f"dev:read:{name}")])
        return rows

    async def _state_words(self, name: str) -> str:
        assert self.runtime.devices is not None
        try:
            readings = {r.quantity: r.value for r in await self.runtime.devices.read(name)}
        except PicoagentError:
            return "?"
        brightness = readings.get("brightness")
        if readings.get("state") and isinstance(brightness, float) and brightness < 100:
            return f"on ({brightness:g}%)"
        return "on" if readings.get("state") else "off"

    async def device_button(self, tap: Tap) -> Tapped | None:
        """A device button: toggle a switch or read a sensor; the menu shows what happened."""
        devices = self.runtime.devices
        if devices is None:
            return None
        _, verb, name = parse_button(tap.data)
        try:
            if verb == "toggle":
                on = any(r.quantity == "state" and r.value for r in await devices.read(name))
                result = await devices.set(name, not on, requested_by=tap.user)
                if result.pending is not None:
                    shown = f"{name} needs a person's approval: see /approve"
                else:
                    shown = f"{name} is now {'on' if result.value else 'off'}"
            elif verb == "read":
                shown = f"{name}: " + ", ".join(str(r) for r in await devices.read(name))
            else:
                return Tapped(NOT_VALID)
        except PicoagentError as exc:
            return Tapped(exc.message, alert=True)
        return Tapped(shown, edit=Said(f"{DEVICES_HEADER}\n\n{shown}", await self._device_buttons()))

    # --- approvals -------------------------------------------------------------------------------------

    async def toggle(self, call: CommandCall) -> list[Said]:
        """/toggle NAME: what the device's button does (a platform without buttons shows this command)."""
        return await self._typed_tap(call, "dev:toggle")

    async def read(self, call: CommandCall) -> list[Said]:
        """/read NAME: read a device, as its button does."""
        return await self._typed_tap(call, "dev:read")

    async def deny(self, call: CommandCall) -> list[Said]:
        """/deny ID: deny a waiting device write, as its Deny button does."""
        return await self._typed_tap(call, "apr:deny")

    async def _typed_tap(self, call: CommandCall, prefix: str) -> list[Said]:
        """A button's command typed out (``/approve 3f2a``): the same handler as the tap, answered as text."""
        if not call.words:
            return [Said(f"Say which one: /{prefix.split(':')[1]} NAME (see /devices and /approve).")]
        tap = Tap(f"{prefix}:{call.words[0]}", call.user, call.name or call.user)
        handler = self.approval_button if prefix.startswith("apr") else self.device_button
        tapped = await handler(tap)
        if tapped is None:
            return [Said("No devices are configured (devices: in the config).")]
        return [Said(tapped.edit.text if tapped.edit is not None and prefix.startswith("apr") else tapped.notice)]

    async def approve(self, call: CommandCall) -> list[Said]:
        """/approve: each device write or tool call waiting for approval, with Approve and Deny; /approve ID
        approves one."""
        if call.words:
            return await self._typed_tap(call, "apr:approve")
        desk = self.runtime.approvals
        pending = await asyncio.to_thread(desk.pending) if desk is not None else []
        if not pending:
            return [Said("Nothing is waiting for approval.")]
        cards = []
        for action in pending:
            minutes = max(0, round((action.expires_at - time.time()) / 60))
            buttons = [[Button("Approve", f"apr:approve:{action.id}"), Button("Deny", f"apr:deny:{action.id}")]]
            cards.append(Said(f"Waiting for approval: {action.describe()}; expires in {minutes} min.", buttons))
        return cards

    async def approval_button(self, tap: Tap) -> Tapped:
        """Approve or Deny: decide the stored action once (a tool call runs then); the card says who decided."""
        desk = self.runtime.approvals
        _, verb, action_id = parse_button(tap.data)
        if desk is None or verb not in ("approve", "deny"):
            return Tapped(NOT_VALID)
        try:
            async with self._decide_lock:
                result = await desk.decide(action_id, verb == "approve", decided_by=tap.user)
        except PicoagentError as exc:
            return Tapped(exc.message, alert=True)
        if verb == "approve":
            text = f"Approved by {tap.name}: {result.describe()}."
        else:
            text = f"Denied by {tap.name}: {result.describe()}."
        return Tapped("Approved" if verb == "approve" else "Denied", edit=Said(text))


def _conversation_size(db: Database, channel: str, chat_id: str) -> int:
    """Messages in a chat's open conversation."""
    count = db.value(
        "SELECT count(*) FROM messages JOIN conversations c ON c.id = messages.conversation_id"
        " WHERE c.channel = ? AND c.chat_id = ? AND c.closed_at IS NULL",
        (channel, chat_id),
    )
    return int(count)


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours < 48 else f"{hours // 24} days"


def routed(mode: str) -> str:
    """What "routed as configured" means under ``routing.mode``, as /private off says it in every chat."""
    return _ROUTED.get(mode, f"routing.mode is {mode}")


# What "routed as configured" means, as /private off says it, by routing.mode.
_ROUTED = {
    "local_only": "routing.mode is local_only, so every message stays on the Pi anyway",
    "edge_first": "routing.mode is edge_first, so the cloud answers only what the Pi's model cannot, when allowed",
    "cloud_first": "routing.mode is cloud_first, so the cloud answers whenever it is allowed",
}
