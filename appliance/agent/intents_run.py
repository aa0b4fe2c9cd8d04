"""Carrying out a matched intent on the device registry, with no model: the `intent` route."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, tzinfo
from typing import Any

from appliance.agent.record import ReplyRecord, Timings
from appliance.errors import PicoagentError
from appliance.hardware.devices import DeviceRegistry
from appliance.hardware.events import HISTORY_DAYS, Event, device_history
from appliance.memory.db import Database
from appliance.tools.result import Action
from appliance.understanding.intent import Intent


def _value_words(value: bool | float | None) -> str:
    if isinstance(value, bool) or value is None:
        return "on" if value else "off"
    return f"{value * 100:.0f}%"


async def run_intent(
    intent: Intent,
    devices: DeviceRegistry,
    *,
    requested_by: str,
    started: float,
    db: Database | None = None,
    zone: tzinfo | None = None,
) -> ReplyRecord:
    """Do what the intent says and describe it; failures are told, never raised.

    ``zone``: the appliance's time zone (``scheduler.timezone``) that event times are said in; None: the system's.
    """
    actions: list[Action] = []
    t0 = time.perf_counter()
    choices: list[str] = []
    if intent.action == "ask":
        text = intent.question or "Which device do you mean?"
        choices = [name.replace("_", " ") for name in intent.options]
    elif intent.action == "confirm":
        text = intent.question or f"Set {intent.device} {_value_words(intent.value)}?"
        choices = ["yes", "no"]
        if await _already(devices, intent):  # "it's dark on the porch" with the light on: nothing to ask (walk 9)
            name = str(intent.device).replace("_", " ")
            text, choices = f"The {name} is already {_value_words(intent.value)}.", []
    elif intent.action == "cancel":
        text = f"OK, I left the {str(intent.device).replace('_', ' ')} as it is."
    elif intent.action == "history":
        assert intent.device is not None
        events = await db.call(device_history, db, intent.device) if db is not None else []
        pressed = any(i.name == intent.device and i.kind == "input" for i in devices.infos())
        if isinstance(intent.value, bool):  # only the switches asked about: "when did the fan go on?"
            state = "on" if intent.value else "off"
            events = [e for e in events if re.search(rf"\b{state}\b", e.message)]
            if not events:
                name = intent.device.replace("_", " ")
                text = f"The {name} has not been turned {state} in the last {HISTORY_DAYS} days (nothing recorded)."
        if not isinstance(intent.value, bool) or events:
            text = _history_words(intent.device, events, zone, pressed=pressed)
        found = [e.as_dict() for e in events]
        actions.append(_action("device_history", {"name": intent.device}, True, found, None, t0))
    elif intent.action == "set":
        assert intent.device is not None and intent.value is not None
        arguments = {"name": intent.device, "value": _value_words(intent.value)}
        try:
            result = await devices.set(intent.device, intent.value, requested_by=requested_by)
        except PicoagentError as exc:
            text = exc.message
            actions.append(_action("device_set", arguments, False, None, exc.message, t0))
        else:
            text = result.describe() if result.pending else f"Done: {result.describe()}."
            actions.append(_action("device_set", arguments, True, result.as_dict(), None, t0))
    else:
        assert intent.device is not None
        arguments = {"name": intent.device}
        outside = ""  # the record says whose words a remote device's state is
        try:
            outside = devices.outside(intent.device)
            readings = await devices.read(intent.device)
        except PicoagentError as exc:
            text = exc.message
            actions.append(_action("device_read", arguments, False, None, exc.message, t0, outside))
        else:
            shown = [r for r in readings if intent.quantity in (None, r.quantity)] or readings
            text = _reading_words(intent.device, shown, devices)
            found = [r.as_dict() for r in readings]
            actions.append(_action("device_read", arguments, True, found, None, t0, outside))
    total = time.perf_counter() - started
    how = f"{intent.how}: " if intent.how else ""
    # what was asked, and when it was not done, that it was not (the reply says why): "set fan off, not done"
    undone = ", not done" if any(not action.ok for action in actions) else ""
    return ReplyRecord(
        text=text,
        route="intent",
        reason=f"intent fast path: {how}{intent.describe()}{undone} (no model)",
        choices=choices,
        actions=actions,
        timings=Timings(ttft_s=round(total, 4), total_s=round(total, 4)),
        model="",
        finish_reason="stop",
    )


def _reading_words(device: str, shown: list[Any], devices: DeviceRegistry) -> str:
    """A read said as a person would: "The fan is on.", "The doorbell is not pressed.", else each reading."""
    if len(shown) == 1 and shown[0].quantity == "state" and isinstance(shown[0].value, bool):
        kind = next((i.kind for i in devices.infos() if i.name == device), "")
        on = shown[0].value
        name = device.replace("_", " ")
        if kind != "input":
            return f"The {name} is {'on' if on else 'off'}."
        return _input_words(name, devices.get(device).config, on)
    return f"{device}: " + ", ".join(str(r) for r in shown) + "."


def _input_words(name: str, config: Any, on: bool) -> str:
    """An input's state as its events say it: a motion sensor detects motion or is still, a door is open or
    closed, a button is pressed or not, another binary sensor is on or off (not "the garage motion is pressed")."""
    from appliance.hardware.drivers.homeassistant import EVENTS

    events = ("motion", "still") if config.driver == "motion" else EVENTS.get(getattr(config, "quantity", "") or "")
    if events == ("motion", "still"):
        return f"The {name} detects motion." if on else f"The {name} detects no motion (still)."
    if events == ("opened", "closed"):
        return f"The {name} is {'open' if on else 'closed'}."
    if config.driver == "button":
        return f"The {name} is {'pressed' if on else 'not pressed'}."
    return f"The {name} is {'on' if on else 'off'}."


def _history_words(device: str, events: list[Event], zone: tzinfo | None = None, *, pressed: bool = False) -> str:
    """A device's recent events in a sentence: "doorbell: pressed at 14:02 today, and 09:15 yesterday";
    ``pressed``: an input (a button, a bell), whose empty history is said as "not pressed"."""
    if not events and pressed:  # "did the bell go?": a plain no, and what it is based on
        name = device.replace("_", " ")
        return f"No: the {name} has not been pressed in the last {HISTORY_DAYS} days (nothing recorded)."
    if not events:
        return f"{device}: nothing recorded in the last {HISTORY_DAYS} days."
    today = datetime.now(zone).astimezone(zone).date()
    parts = []
    for event in events:
        when = datetime.fromtimestamp(event.at, zone).astimezone(zone)
        if when.date() == today:
            day = "today"
        elif when.date() == today - timedelta(days=1):
            day = "yesterday"
        else:
            day = f"{when:%a %d %b}"
        what = event.message.removeprefix(f"{device}: ").removeprefix(f"{device} ")
        parts.append(f"{what} at {when:%H:%M} {day}")
    latest = "latest first" if len(parts) > 1 else "the latest"
    return f"{device}: " + "; ".join(parts) + f" ({latest} of the last {HISTORY_DAYS} days)."


async def _already(devices: DeviceRegistry, intent: Intent) -> bool:
    """Whether the switch the intent would set already has that state (False when it cannot be read)."""
    if not isinstance(intent.value, bool) or intent.device is None:
        return False
    try:
        readings = await devices.read(intent.device)
    except PicoagentError:
        return False
    return any(r.quantity == "state" and r.value is intent.value for r in readings)


def _action(
    tool: str, arguments: dict[str, Any], ok: bool, result: Any, error: str | None, t0: float, outside: str = ""
) -> Action:
    return Action(tool, arguments, ok, result, error, round(time.perf_counter() - t0, 4), outside=outside)
