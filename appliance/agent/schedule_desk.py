"""Schedules from words, without the model: "remind me at 7 to take the bins out" makes the job and says when
it runs; "cancel the 7:30 fan" finds it and cancels it. The ``intent`` route, like device commands.

:func:`appliance.understanding.schedule_words.understand_schedule` reads the message (a rule parser, no model); a
message it is not sure of goes on to the model, which has the same abilities as tools
(:mod:`appliance.tools.scheduling`). Here: carry it out on the scheduler (the daemon's, or in
``picoagent chat`` one that writes the database the daemon reads) and answer in a sentence. A cancel that
matches several jobs asks which, with the ids as answers to tap; the answer (the id, "the second one", "2",
or "yes" to a single choice) is taken here for :data:`ASK_TTL_S`, also by the next ``picoagent chat -m``
(the question is kept in the database's settings). Jobs from the config's ``scheduler.jobs`` are not
offered: they are not cancelled from chat. Every failure (an unknown device, a time that has passed) is said,
never raised.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from appliance.agent.record import ReplyRecord, Timings
from appliance.errors import PicoagentError
from appliance.schedule.said import day_words, every_words
from appliance.tools.result import Action
from appliance.understanding.asked_back import Kept

if TYPE_CHECKING:
    from appliance.hardware.device_info import DeviceInfo
    from appliance.memory.db import Database
    from appliance.tools.scheduling import CronDesk
    from appliance.understanding.schedule_words import ScheduleAsk

ASK_TTL_S = 600.0  # how long "which one?" waits for its answer
_ORDINALS = {"first": 0, "1": 0, "1st": 0, "one": 0, "second": 1, "2": 1, "2nd": 1, "two": 1, "third": 2, "3": 2}
_ORDINALS |= {"3rd": 2, "three": 2, "fourth": 3, "4": 3, "4th": 3, "four": 3, "fifth": 4, "5": 4, "5th": 4}
_PICK = re.compile(r"^(?:cancel |the |number |no\.? )*(?P<pick>[\w-]+?)(?: one| job)?$")
# "cancel the fan", "delete the bins": no schedule word, so a job's only when its words name one
_BARE_CANCEL = re.compile(
    r"^(?:please )?(?:cancel|delete|remove|drop) (?:the |my |that )?(?P<words>[\w:' -]+?)(?: please)?$"
)


class ScheduleDesk:
    """Carries out the scheduling phrases of chat messages on the scheduler, and answers them."""

    def __init__(
        self,
        devices: Sequence[DeviceInfo] = (),
        db: Database | None = None,
        cron: Callable[[], CronDesk | None] = lambda: None,
    ) -> None:
        """``cron``: the scheduler of whoever has one (the daemon; `picoagent chat`), late-bound: it is built
        after the agent, whose turns its jobs run."""
        self._cron = cron
        self.devices = tuple(devices)
        # a session's open "which one?" (the job ids offered), kept for the next process too (chat -m)
        self._asked = Kept(db, "asked_back:cancel:")

    @property
    def cron(self) -> CronDesk | None:
        """The scheduler the phrases are carried out on (None: there is none here)."""
        return self._cron()

    async def answer(
        self, text: str, session: str, requested_by: str, started: float, force: str | None = None
    ) -> ReplyRecord | None:
        """The reply when ``text`` is about schedules (made, cancelled or asked back); None: not for us.

        ``requested_by``: who asked ("telegram:42"), kept with the job; ``force`` "cloud": the model answers.
        """
        if self.cron is None or force == "cloud":
            return None
        picked = self._picked(session, text)
        if picked is not None:
            return await self._cancel([picked], text, session, started)
        from appliance.understanding.schedule_words import CancelAsk, ScheduleAsk, understand_schedule

        now = datetime.fromtimestamp(self.cron.clock(), self.cron.zone)
        said = understand_schedule(text, now, self.devices, getattr(self.cron, "place", None))
        if said is None and (bare := _BARE_CANCEL.match(" ".join(text.lower().strip(" .!?").split()))):
            await self.cron.refresh()  # "cancel the fan" with no schedule word: a job's name, if it names one
            found = self.cron.find(bare["words"])
            return await self._cancel(found, bare["words"], session, started) if found else None
        if said is None:
            return None
        if isinstance(said, ScheduleAsk):
            return await self._create(said, now, requested_by, started)
        if isinstance(said, CancelAsk):
            await self.cron.refresh()  # a job another process made is cancellable at once
            return await self._cancel(self.cron.find(said.words), said.words, session, started)
        return _record(said.question, "asked back, the schedule was not clear", started)

    def _picked(self, session: str, text: str) -> dict[str, Any] | None:
        """The job a person picked from our last "which one?" (None: this message is not that answer)."""
        asked = self._asked.get(session)
        if asked is None or self.cron is None:
            return None
        ids, at = asked
        if time.time() - at > ASK_TTL_S:
            self._asked.pop(session)
            return None
        said = " ".join(text.strip().lower().strip(" .!?").split())
        found = _PICK.match(said)
        pick = found["pick"] if found else ""
        choice = said.removeprefix("cancel ").strip() if said.removeprefix("cancel ").strip() in ids else ""
        if not choice and pick in _ORDINALS and _ORDINALS[pick] < len(ids):
            choice = ids[_ORDINALS[pick]]
        if not choice and said in ("yes", "yes please", "ok", "do it") and len(ids) == 1:
            choice = ids[0]
        if not choice:
            return None
        self._asked.pop(session)
        rows = self.cron.find(choice)
        return rows[0] if rows else None

    async def _create(self, ask: ScheduleAsk, now: datetime, requested_by: str, started: float) -> ReplyRecord:
        from appliance.config import CronJob

        assert self.cron is not None
        job = CronJob(
            id="", schedule=ask.schedule, message=ask.message, device=ask.device, value=ask.value, prompt=ask.prompt
        )
        arguments = {"schedule": ask.schedule, ask.kind: getattr(ask, ask.kind)}
        if ask.kind == "device":
            arguments["value"] = ask.value
        t0 = time.perf_counter()
        try:
            row = await self.cron.add_job(job, requested_by)
        except PicoagentError as exc:
            action = _action("schedule_create", arguments, False, None, exc.message, t0)
            return _record(exc.for_people(), f"could not schedule {ask.describe()}", started, [action])
        what = {"message": f"Reminder set: {ask.message}", "device": f"Scheduled: {ask.device.replace('_', ' ')}"}
        text = what.get(ask.kind, f"Scheduled: {ask.prompt}")
        if ask.kind == "device":
            text += f" {ask.value}"
        next_run = datetime.fromisoformat(row["next_run"]) if row["next_run"] else None
        if row["once"] and next_run is not None:
            text += f", {day_words(next_run, now)}."
        else:
            text += f", {every_words(row['schedule'])}"
            text += f"; next {next_run:%a} {next_run.day} {next_run:%b %H:%M}." if next_run is not None else "."
        action = _action("schedule_create", arguments, True, row, None, t0)
        return _record(text, f"job {row['id']}: {ask.describe()}", started, [action])

    async def _cancel(self, found: list[dict[str, Any]], words: str, session: str, started: float) -> ReplyRecord:
        assert self.cron is not None
        fixed = [row for row in found if row.get("source") == "config"]
        if len(found) > 1 or (found and fixed):
            mine = [row for row in found if row.get("source") != "config"]
            fixed_said = "; ".join(f"{row['id']} ({_what(row)})" for row in fixed)
            config = f" {fixed_said} comes from the config's scheduler.jobs: remove it there." if fixed else ""
            if not mine:
                return _record(f"Nothing to cancel here:{config}", "the matching jobs come from the config", started)
            self._asked.put(session, [row["id"] for row in mine])
            lines = "; ".join(f"{row['id']} ({_what(row)})" for row in mine)
            asked = f"Cancel {lines}?" if len(mine) == 1 else f"Several jobs match “{words}”: {lines}. Which one?"
            record = _record(asked + config, f"asked which of {len(mine)} jobs to cancel", started)
            record.choices = [row["id"] for row in mine]
            return record
        if not found:
            listed = self.cron.list_jobs()
            shown = "; ".join(f"{row['id']} ({_what(row)})" for row in listed[:8])
            text = f"Nothing scheduled matches “{words}”." + (
                f" Scheduled now: {shown}." if shown else " Nothing is scheduled."
            )
            return _record(text, "no job matched the words to cancel", started)
        row = found[0]
        t0 = time.perf_counter()
        try:
            gone = await self.cron.cancel(row["id"])
        except PicoagentError as exc:
            action = _action("schedule_cancel", {"id": row["id"]}, False, None, exc.message, t0)
            return _record(exc.for_people(), f"could not cancel job {row['id']}", started, [action])
        action = _action("schedule_cancel", {"id": row["id"]}, True, gone, None, t0)
        return _record(f"Cancelled {row['id']} ({_what(row)}).", f"cancelled job {row['id']}", started, [action])


def _what(row: dict[str, Any]) -> str:
    does = str(row["does"]).removeprefix("message: ")
    if row.get("paused"):
        return f"{does}, paused"
    return f"{does}, next {row['next_run'][:16].replace('T', ' ')}" if row.get("next_run") else does


def _record(text: str, why: str, started: float, actions: list[Action] | None = None) -> ReplyRecord:
    total = round(time.perf_counter() - started, 4)
    return ReplyRecord(
        text=text,
        route="intent",
        reason=f"schedule fast path: {why} (no model)",
        actions=actions or [],
        timings=Timings(ttft_s=total, total_s=total),
        finish_reason="stop",
    )


def _action(tool: str, arguments: dict[str, Any], ok: bool, result: Any, error: str | None, t0: float) -> Action:
    return Action(tool, arguments, ok, result, error, round(time.perf_counter() - t0, 4))
