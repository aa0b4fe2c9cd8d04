"""Events from the hardware: button presses, motion, and sensor thresholds (``living_room.temperature > 28``).

Every event is stored (so the status page and, later, Telegram can show it) and handed to the
subscribers (the notifier now; the scheduler and channels later). Inputs call in from gpiozero's
thread, so ``emit`` is safe from any thread. Thresholds are edge-triggered: a rule fires when its
condition turns true, not on every reading while it stays true, and then keeps quiet for its cooldown.
"""

from __future__ import annotations

import asyncio
import json
import logging
import operator
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from appliance.config import WHEN, EventRule
from appliance.errors import PicoagentError
from appliance.memory.db import Database

log = logging.getLogger(__name__)

HISTORY_DAYS = 7  # how far back a device's history looks ("when did the fan go on?")

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}


@dataclass(frozen=True)
class Event:
    """Something that happened on the hardware."""

    kind: str  # "input", "threshold", "set" (a device write) or "config" (a settings change)
    device: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


class EventBus:
    """Stores events and tells the subscribers."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.subscribers: list[Callable[[Event], None]] = []

    def subscribe(self, callback: Callable[[Event], None]) -> None:
        """Be told of every event (called on the emitting thread)."""
        self.subscribers.append(callback)

    def emit(self, event: Event) -> None:
        """Store and deliver an event; safe from any thread."""
        log.warning("event: %s", event.message)
        try:
            self.db.write(
                "INSERT INTO events (at, kind, device, message, data) VALUES (?, ?, ?, ?, ?)",
                (event.at, event.kind, event.device, event.message, json.dumps(event.data)),
            )
        except PicoagentError as exc:
            log.error("event not stored: %s", exc.message)
        for callback in list(self.subscribers):
            try:
                callback(event)
            except Exception:  # one subscriber's bug must not silence the others
                log.exception("event subscriber failed")

    def recent(self, limit: int = 20) -> list[Event]:
        """The latest events, newest first."""
        return recent_events(self.db, limit)

    def history(self, device: str, limit: int = 5, since_s: float = HISTORY_DAYS * 86_400) -> list[Event]:
        """A device's latest events (presses, switching), newest first, from the last ``since_s`` seconds."""
        return device_history(self.db, device, limit, since_s)

    def input_listener(self, device: str, event: str) -> None:
        """For DeviceRegistry.listeners: a button or motion sensor changed."""
        self.emit(Event("input", device, f"{device}: {event}", {"event": event}))


def describe_write(value: bool | float) -> str:
    """A write as people say it: "turned on", "set to 40%"."""
    if isinstance(value, bool):
        return "turned on" if value else "turned off"
    return f"set to {value * 100:.0f}%"


def record_write(db: Database, device: str, value: bool | float, requested_by: str) -> None:
    """Keep a device write in the events table (kind "set"), so "when did the fan go on?" has an answer.

    Stored, not announced: a switch someone asked for is no news to them (the EventBus's subscribers,
    such as Telegram notifications, are not told).
    """
    by = f" (by {requested_by})" if requested_by else ""
    data = {"value": value, "by": requested_by}
    db.write(
        "INSERT INTO events (at, kind, device, message, data) VALUES (?, ?, ?, ?, ?)",
        (time.time(), "set", device, f"{device} {describe_write(value)}{by}", json.dumps(data)),
    )


def recent_events(db: Database, limit: int = 20) -> list[Event]:
    """The latest events of every kind (hardware, device writes, settings changes), newest first."""
    rows = db.rows("SELECT kind, device, message, data, at FROM events ORDER BY at DESC LIMIT ?", (limit,))
    return [Event(kind, device, message, json.loads(data or "{}"), at) for kind, device, message, data, at in rows]


def record_settings_change(db: Database, keys: list[str], by: str) -> None:
    """Keep a settings change in the events table (kind "config"): who, when, which keys, never a value."""
    shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "") if keys else "nothing"
    db.write(
        "INSERT INTO events (at, kind, device, message, data) VALUES (?, ?, ?, ?, ?)",
        (time.time(), "config", "", f"settings changed by {by}: {shown}", json.dumps({"keys": keys, "by": by})),
    )


def settings_changes(db: Database, limit: int = 20) -> list[Event]:
    """The newest settings changes, newest first."""
    rows = db.rows(
        "SELECT kind, device, message, data, at FROM events WHERE kind = 'config' ORDER BY at DESC LIMIT ?", (limit,)
    )
    return [Event(kind, name, message, json.loads(data or "{}"), at) for kind, name, message, data, at in rows]


def device_history(db: Database, device: str, limit: int = 5, since_s: float = HISTORY_DAYS * 86_400) -> list[Event]:
    """A device's latest events, newest first, within ``since_s`` seconds (any process may have stored them)."""
    rows = db.rows(
        "SELECT kind, device, message, data, at FROM events WHERE device = ? AND at >= ? ORDER BY at DESC LIMIT ?",
        (device, time.time() - since_s, limit),
    )
    return [Event(kind, name, message, json.loads(data or "{}"), at) for kind, name, message, data, at in rows]


@dataclass
class _Rule:
    rule: EventRule
    device: str
    quantity: str
    op: str
    limit: float
    was_true: bool | None = None
    last_fired: float = float("-inf")
    next_due: float = 0.0


class ThresholdWatcher:
    """Reads the sensors the rules name, on their schedules, and emits when a condition turns true."""

    def __init__(
        self,
        rules: list[EventRule],
        read: Callable[[str], Any],
        bus: EventBus,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read = read  # async (device) -> list[Reading]
        self.bus = bus
        self.clock = clock
        self.rules: list[_Rule] = []
        for rule in rules:
            match = WHEN.fullmatch(rule.when)
            assert match, "validated by the config"
            device, quantity, op, limit = match.groups()
            self.rules.append(_Rule(rule, device, quantity, op, float(limit)))

    async def check(self) -> list[Event]:
        """Evaluate every rule that is due; returns the events fired."""
        now = self.clock()
        fired: list[Event] = []
        cache: dict[str, Any] = {}
        for state in self.rules:
            if now < state.next_due:
                continue
            state.next_due = now + state.rule.every_s
            if state.device not in cache:
                try:
                    cache[state.device] = await self.read(state.device)
                except PicoagentError as exc:
                    log.warning("threshold %r: cannot read %s: %s", state.rule.when, state.device, exc.message)
                    cache[state.device] = None
            readings = cache[state.device]
            value = next((r.value for r in readings or () if r.quantity == state.quantity), None)
            if value is None:
                continue
            is_true = _OPS[state.op](float(value), state.limit)
            turned_true = is_true and state.was_true is not True
            state.was_true = is_true
            if turned_true and now - state.last_fired >= state.rule.cooldown_s:
                state.last_fired = now
                message = state.rule.message or f"{state.rule.when} (now {value:g})"
                event = Event("threshold", state.device, message, {"when": state.rule.when, "value": value})
                self.bus.emit(event)
                fired.append(event)
        return fired

    async def run(self) -> None:
        """Check forever, waking when the soonest rule is due."""
        while True:
            await self.check()
            soonest = min((r.next_due for r in self.rules), default=self.clock() + 60)
            await asyncio.sleep(max(0.5, soonest - self.clock()))
