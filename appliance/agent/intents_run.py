"""Carrying out a matched intent on the device registry, with no model: the `intent` route."""

from __future__ import annotations

import time
from typing import Any

from appliance.agent.intent import Intent
from appliance.agent.record import ReplyRecord
from appliance.errors import PicoagentError
from appliance.hardware.devices import DeviceRegistry


def _value_words(value: bool | float | None) -> str:
    if isinstance(value, bool) or value is None:
        return "on" if value else "off"
    return f"{value * 100:.0f}%"


async def run_intent(intent: Intent, devices: DeviceRegistry, *, requested_by: str, started: float) -> ReplyRecord:
    """Do what the intent says and describe it; failures are told, never raised."""
    actions: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    if intent.action == "ask":
        text = intent.question or "Which device do you mean?"
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
        try:
            readings = await devices.read(intent.device)
        except PicoagentError as exc:
            text = exc.message
            actions.append(_action("device_read", arguments, False, None, exc.message, t0))
        else:
            shown = [r for r in readings if intent.quantity in (None, r.quantity)] or readings
            text = f"{intent.device}: " + ", ".join(str(r) for r in shown) + "."
            actions.append(_action("device_read", arguments, True, [r.as_dict() for r in readings], None, t0))
    total = time.perf_counter() - started
    return ReplyRecord(
        text=text,
        route="intent",
        reason=f"intent fast path: {intent.describe()} (no model)",
        actions=actions,
        timings={
            "ttft_s": round(total, 4),
            "decode_tps": 0.0,
            "total_s": round(total, 4),
            "model_s": 0.0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cached_tokens": 0,
            "rounds": 0,
        },
        model="",
        finish_reason="stop",
    )


def _action(
    tool: str, arguments: dict[str, Any], ok: bool, result: Any, error: str | None, t0: float
) -> dict[str, Any]:
    return {
        "tool": tool,
        "arguments": arguments,
        "ok": ok,
        "result": result,
        "error": error,
        "duration_s": round(time.perf_counter() - t0, 4),
    }
