"""The heartbeat: every few minutes the local model reads ``workspace/HEARTBEAT.md`` and speaks only
when one of its checks needs the owner.

The file is the owner's list of things to watch, one a line, written as a commented template on first
run. A check is one generation of the on-device model, with the current time and every readable
device's readings in the prompt, answered under a JSON schema (``{"notify": ..., "message": ...}``)
so that a small model cannot ramble into a notification: an unreadable or cut-off answer stays
silent. A file with nothing outside its comments costs nothing: no model call at all. The checks and
readings never leave the Pi; lines marked ``[cloud]`` go to an escalation hook only when one is given.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.errors import PicoagentError
from appliance.llm.base import ChatMessage, ChatModel, GenerationRequest
from appliance.schedule.parse import resolve_zone

if TYPE_CHECKING:
    from appliance.hardware.devices import DeviceAccess

log = logging.getLogger(__name__)

HEARTBEAT_TEMPLATE = """\
<!--
HEARTBEAT.md: things for picoagent to keep an eye on. Every few minutes (scheduler.heartbeat_minutes)
the local model reads the lines below, with the current time and every device's readings, and
messages you only when one of them needs you. List the checks one per line, for example:

- remind me if the soil level is below 30%
- tell me if the living room is warmer than 28 °C after 22:00

Text inside these comment marks is not read. With no lines outside them nothing runs at all.
The checks and the readings stay on the Pi.
-->
"""
HEARTBEAT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"notify": {"type": "boolean"}, "message": {"type": "string", "maxLength": 200}},
    "required": ["notify", "message"],
    "additionalProperties": False,
}
HEARTBEAT_SYSTEM = (
    "You check a short list of things for the owner of this home. Answer in JSON only. "
    'When a check needs the owner\'s attention now, answer {"notify": true, "message": "<one short sentence>"}; '
    'otherwise answer {"notify": false, "message": ""}.'
)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_BULLET = re.compile(r"^[-*+]\s+")
_CLOUD = re.compile(r"\s*\[cloud\]\s*", re.IGNORECASE)


def heartbeat_tasks(text: str) -> tuple[list[str], list[str]]:
    """The task lines of HEARTBEAT.md: (plain ones, ones marked [cloud]); comments and headings skipped."""
    text = _COMMENT.sub("", text).split("<!--")[0]  # an unclosed comment runs to the end
    plain: list[str] = []
    cloud: list[str] = []
    for raw in text.splitlines():
        line = _BULLET.sub("", raw.strip())
        if not line or line.startswith("#"):
            continue
        if _CLOUD.search(line):
            cloud.append(_CLOUD.sub(" ", line).strip())
        else:
            plain.append(line)
    return plain, cloud


async def device_readings(devices: DeviceAccess | None) -> str:
    """Every readable device's current readings, one line each (the heartbeat's view of the home); "" for none."""
    lines: list[str] = []
    if devices is None:
        return ""
    for device in devices.describe():
        if "read" not in device["allowed"]:
            continue
        try:
            readings = await devices.read(device["name"])
        except PicoagentError as exc:
            lines.append(f"{device['name']}: unavailable ({exc.message})")
            continue
        lines.append(f"{device['name']}: " + ", ".join(str(r) for r in readings))
    return "\n".join(lines)


class Heartbeat:
    """Every N minutes, the local model checks HEARTBEAT.md's tasks and speaks only when one needs the owner.

    ``local_model`` must be the on-device model (the runtime's FairScheduler in the daemon): the tasks and
    readings describe the home and never leave the Pi. ``escalate`` is the one way out, for later: it is
    called only with the lines marked ``[cloud]``, and only when given; without it those lines stay local.
    """

    def __init__(
        self,
        workspace_file: Path,
        local_model: ChatModel,
        notify: Callable[[str, str], object] | None,
        *,
        readings: Callable[[], Awaitable[str]] | None = None,
        every_minutes: int = 30,
        tz: str = "",
        clock: Callable[[], float] = time.time,
        escalate: Callable[[str], Awaitable[str | None]] | None = None,
        max_tokens: int = 128,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if every_minutes < 1:
            raise ValueError("the heartbeat runs every 1 minute or more (0 turns it off: do not start it)")
        self.path = workspace_file
        self.local_model = local_model
        self.notify = notify
        self.readings = readings
        self.every_minutes = every_minutes
        self.zone = resolve_zone(tz)
        self.clock = clock
        self.escalate = escalate
        self.max_tokens = max_tokens
        self.sleep = sleep  # run()'s naps between checks
        self.last_run_at: float | None = None
        self.last_decision: str | None = None

    def reschedule(self, every_minutes: int, tz: str) -> None:
        """Check every ``every_minutes`` in zone ``tz`` from the next nap on (SIGHUP)."""
        if every_minutes < 1:
            raise ValueError("the heartbeat runs every 1 minute or more (0 turns it off: do not start it)")
        self.every_minutes, self.zone = every_minutes, resolve_zone(tz)

    def ensure_file(self) -> bool:
        """Write the commented template on first run; True when it was created."""
        if self.path.exists():
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(HEARTBEAT_TEMPLATE, encoding="utf-8")
        log.info("created %s", self.path)
        return True

    async def check(self) -> str | None:
        """Check the tasks once; the message sent to the owner, or None when there is nothing to report."""
        self.ensure_file()
        self.last_run_at = self.clock()
        plain, cloud = heartbeat_tasks(self.path.read_text(encoding="utf-8"))
        if not plain and not cloud:
            self.last_decision = "no tasks"
            return None
        if self.escalate is None:
            plain, cloud = plain + cloud, []  # no way out configured: every check stays on the Pi
        when = datetime.fromtimestamp(self.last_run_at, self.zone)
        readings = await self._readings()
        messages = []
        decision = "nothing to report"
        if plain:
            found, decision = await self._ask_local(_heartbeat_prompt(plain, when, readings))
            if found:
                messages.append(found)
        if cloud and self.escalate is not None:
            found = await self.escalate(_heartbeat_prompt(cloud, when, readings))
            if found and found.strip():
                messages.append(found.strip())
        if not messages:
            self.last_decision = decision
            return None
        message = "\n".join(messages)
        self.last_decision = f"notified: {message}"
        if self.notify is not None:
            self.notify(message, "heartbeat")
        log.info("heartbeat: %s", message)
        return message

    async def _readings(self) -> str:
        if self.readings is None:
            return ""
        try:
            return await self.readings()
        except Exception as exc:  # the checks still run, without the readings
            log.warning("heartbeat: cannot read the devices: %s", exc)
            return "(device readings unavailable)"

    async def _ask_local(self, prompt: str) -> tuple[str | None, str]:
        """The local model's finding (None: nothing to report) and the decision, as last_decision shows it."""
        request = GenerationRequest(
            messages=[ChatMessage("system", HEARTBEAT_SYSTEM), ChatMessage("user", prompt)],
            max_tokens=self.max_tokens,
            temperature=0.0,
            json_schema=HEARTBEAT_SCHEMA,
            client="heartbeat",
        )
        try:
            generation = await self.local_model.generate(request)
        except PicoagentError as exc:
            log.warning("heartbeat: the model failed: %s", exc.message)
            return None, f"model failed: {exc.message}"
        try:
            answer = json.loads(generation.text)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            # Silent rather than wrong: a cut-off or garbled answer is not worth a message.
            log.warning("heartbeat: unreadable answer %r", generation.text[:200])
            return None, "unreadable answer"
        message = str(answer.get("message") or "").strip()
        if answer.get("notify") is True and message:
            return message, "notify"
        return None, "nothing to report"

    async def run(self) -> None:
        """Check every N minutes, forever (the first check after N minutes: the model may be loading)."""
        self.ensure_file()
        while True:
            await self.sleep(self.every_minutes * 60)
            try:
                await self.check()
            except Exception:  # one bad check must not end the heartbeat
                log.exception("heartbeat check failed")


def _heartbeat_prompt(tasks: list[str], when: datetime, readings: str) -> str:
    zone = getattr(when.tzinfo, "key", None) or when.tzname() or ""
    return (
        f"Now: {when:%A %Y-%m-%d %H:%M} {zone}\n"
        f"Device readings:\n{readings or '(no devices)'}\n"
        "Checks:\n" + "\n".join(f"- {task}" for task in tasks)
    )
