"""The home the everyday set is asked in: a real Runtime with a known state, and each question through a turn.

:func:`open_home` builds it from the checkout's config (data dir in a folder of the caller's):

- setup ``home``: scheduler.timezone Europe/Brussels; the place Brussels (weather.place, .latitude,
  .longitude) with the fake Open-Meteo (tests/fakes/open_meteo.py) as its forecast source, when this branch
  has both (else the weather and sun questions are skipped, saying why); setup ``bare``: no place, no
  forecast, no time zone (the system's);
- the simulated devices, with the fan switched on (the porch light stays off);
- six memories (:data:`MEMORIES`), three schedules (:data:`JOBS`) on a real Scheduler and one queued task,
  handed to the chat's schedule desk, the grounded answers and the model's schedule tools as the daemon
  does (and the forecast source to the grounded answers).

Memory extraction is off (``memory.extract_after_messages: 0``): it would call the model between
questions and blur which reply needed one. Each question is asked in a chat of its own (its ``history``
written there first, as stored turns) through ``runtime.agent.turn``, the path every channel takes; the
verdict records the route, whether a model ran (the record's model rounds or cloud time) and the latency a
person waits. The placeholders are filled from the clock around the question (every minute it spanned),
the devices and the Pi read just after it, the sun for the place, and the forecast the fake serves.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import appliance
from appliance.config import CHECKOUT_CONFIG, Config, CronJob, load_config
from appliance.health import read_health
from appliance.llm import models
from appliance.llm.base import ServedModel
from appliance.runtime import Runtime
from tests.eval.everyday import EverydaySet, Fill, Question, Verdict, grade, skip_reason
from tests.eval.everyday_values import (
    FORECAST_NAMES,
    INVENTED_DEVICES,
    INVENTED_TOOLS,
    SUN_NAMES,
    WEATHER_CLAIM,
    clock_fills,
    forecast_fills,
    sun_fills,
)

ZONE = "Europe/Brussels"
PLACE = ("Brussels", 50.85, 4.35)
CHANNEL = "web"
MEMORIES = (
    "The wifi password is written on the back of the router in the hallway.",
    "The spare house key is under the blue flowerpot by the back door.",
    "Biscuit the dog gets 150 grams of food twice a day.",
    "The boiler was last serviced in March by Mark Peters.",
    "Ella's school shoes are size 34.",
    "The car is due for its MOT on 12 January.",
)
JOBS = (
    CronJob(id="bins", schedule="daily 19:30", message="take the bins out"),
    CronJob(id="plants", schedule="0 9 * * 6", message="water the plants"),
    CronJob(id="fan_night", schedule="daily 23:00", device="fan", value="off"),
)
TASK = "compare the electricity tariffs"
FORECAST_DAYS = 7


@dataclass
class Home:
    """One running appliance in a known state, asking questions as a person would."""

    runtime: Runtime
    setup: str
    zone: ZoneInfo | None
    started: float
    fan_on_at: datetime
    data: Path
    place: tuple[str, float, float] | None = None
    forecast: dict[str, Any] | None = None
    weather_skip: str = ""  # why the forecast's questions cannot be asked here
    sun_skip: str = ""  # why the sun's cannot
    cron: Any = None

    def now(self) -> datetime:
        """The appliance's time (its zone, else the system's)."""
        return datetime.now(self.zone).astimezone(self.zone) if self.zone else datetime.now().astimezone()

    async def ask(self, question: Question, declines: Sequence[str]) -> Verdict:
        """Ask one question in a chat of its own and grade the reply."""
        base = Verdict(question.id, question.cls, question.split, question.q, "skipped", "", setup=self.setup)
        reason = skip_reason(question, self.fills(self.now(), self.now()))
        if reason:
            base.why = reason
            return base
        chat = f"everyday-{question.id}"
        db = self.runtime.db
        conversation = await db.call(db.conversation, CHANNEL, chat)
        for role, text in question.history:
            await db.call(db.add_message, conversation, role, text)
        start = self.now()
        began = time.perf_counter()
        record = await self.runtime.agent.turn(question.q, channel=CHANNEL, chat_id=chat)
        latency_ms = (time.perf_counter() - began) * 1000
        values = self.fills(start, self.now())
        outcome, why = grade(question, record.text, values, declines)
        base.outcome, base.why, base.reply, base.route = outcome, why, record.text, record.route
        base.model_called = record.timings.rounds > 0 or bool(record.timings.cloud_s)
        base.latency_ms = round(latency_ms, 2)
        return base

    async def ask_all(self, questions: Sequence[Question], declines: Sequence[str]) -> list[Verdict]:
        """Each question in turn (the model serves one at a time anyway)."""
        return [await self.ask(q, declines) for q in questions]

    async def ask_model_alone(self, question: Question, declines: Sequence[str]) -> Verdict:
        """The bench's baseline: the same model asked directly (SOUL.md and USER.md as its system prompt, the
        chat's history, the question), with no tools, no grounded answer, no reply guard: what the
        appliance answered before issue 32, less its tools."""
        from appliance.agent.context import system_prompt
        from appliance.llm.base import ChatMessage, GenerationRequest

        base = Verdict(question.id, question.cls, question.split, question.q, "skipped", "", setup=self.setup)
        reason = skip_reason(question, self.fills(self.now(), self.now()))
        if reason:
            base.why = reason
            return base
        agent = self.runtime.config.agent
        messages = [ChatMessage("system", system_prompt(self.runtime.workspace, None))]
        messages += [ChatMessage(role, text) for role, text in question.history]
        messages.append(ChatMessage("user", question.q))
        request = GenerationRequest(
            messages=messages,
            max_tokens=agent.max_reply_tokens,
            temperature=agent.temperature,
            repeat_penalty=agent.repeat_penalty,
            seed=self.runtime.config.llm.seed,
        )
        start = self.now()
        began = time.perf_counter()
        generation = await self.runtime.model_queue.generate(request)
        base.latency_ms = round((time.perf_counter() - began) * 1000, 2)
        base.outcome, base.why = grade(question, generation.text, self.fills(start, self.now()), declines)
        base.reply, base.route, base.model_called = generation.text, "model alone", True
        return base

    def fills(self, start: datetime, end: datetime) -> dict[str, Fill]:
        """Every placeholder's value for a question asked from start to end."""
        values = clock_fills(start, end)
        values |= self._self_fills()
        values |= self._device_fills()
        values |= self._health_fills()
        values |= self._schedule_fills(end)
        values["weather_claim"] = Fill(WEATHER_CLAIM)
        if self.forecast is not None:
            values |= forecast_fills(self.forecast, end)
        else:
            values |= {name: Fill(skip=self.weather_skip or "no forecast here") for name in FORECAST_NAMES}
        if self.place is not None and not self.sun_skip:
            values |= sun_fills(end, self.place[1], self.place[2])
        else:
            values |= {name: Fill(skip=self.sun_skip or "no place here") for name in SUN_NAMES}
        return values

    def _self_fills(self) -> dict[str, Fill]:
        name = self.runtime.model.name
        forms = {re.escape(name), re.escape(name.split("-")[0])} if len(name.split("-")[0]) >= 4 else {re.escape(name)}
        entry = models.load_catalog().get(name)
        if entry is not None:
            forms.add(re.escape(" ".join(entry.title.split()[:2])))
        tools = sorted({t.name for t in self.runtime.tools})
        tool_forms = [re.escape(t) for t in tools] + [re.escape(t.replace("_", " ")) for t in tools]
        version = re.escape(appliance.__version__)
        return {
            "name": Fill(rf"\b{re.escape(self.runtime.config.agent.name)}\b"),
            "model": Fill("|".join(sorted(forms))),
            "version": Fill(rf"(?<![\d.]){version}(?!\.?\d)"),
            "uptime": Fill(numbers=((time.time() - self.started) / 60,)),
            "tool": Fill(r"\b(?:" + "|".join(tool_forms) + r")\b"),
            "invented_tools": Fill(INVENTED_TOOLS),
            "invented_devices": Fill(INVENTED_DEVICES),
            "fan_switched_on": Fill(numbers=(self.fan_on_at.hour * 60 + self.fan_on_at.minute,)),
        }

    def _device_fills(self) -> dict[str, Fill]:
        devices = self.runtime.devices
        readings = {}
        if devices is not None:
            for device in ("living_room", "soil"):
                for reading in devices.read_sync(device):
                    readings[f"{device}_{reading.quantity}"] = float(reading.value)
        fills = {}
        for key, name in (
            ("living_room_temperature", "living_room_temperature"),
            ("living_room_humidity", "living_room_humidity"),
            ("living_room_pressure", "living_room_pressure"),
            ("soil_level", "soil_level"),
        ):
            value = readings.get(name)
            fills[key] = _number_fill(value) if value is not None else Fill(skip=f"no {name} reading")
        return fills

    def _health_fills(self) -> dict[str, Fill]:
        health = read_health("/")
        disks = {shutil.disk_usage(p) for p in ("/", self.data)}
        throttled = health.throttled
        if throttled is None:
            throttle = Fill()  # not known off a Pi: declined is right
        elif any(throttled.values()):
            throttle = Fill(r"^\W*yes\b|\bthrottl(?:ed|ing)\b(?! (?:is|was) not)|under.?voltage")
        else:
            throttle = Fill(r"^\W*no\b|\bnot (?:being )?throttled|\bno throttling")
        return {
            "memory_available_mb": Fill(numbers=(float(health.memory_available_mb),)),
            "memory_total_mb": Fill(numbers=(float(health.memory_total_mb),)),
            "disk_free_mb": Fill(numbers=tuple(d.free / 1e6 for d in disks)),
            # (total - free), not .used: on an overlay or with reserved blocks .used is far less than that
            "disk_percent": Fill(
                numbers=tuple(100 * (1 - d.free / d.total) for d in disks)
                + tuple(100 * d.free / d.total for d in disks)
            ),
            "cpu_temperature": Fill(numbers=(health.cpu_temperature_c,)) if health.cpu_temperature_c else Fill(),
            "load": Fill(numbers=(health.load[0],)),
            "throttled_answer": throttle,
            "pi_uptime": Fill(numbers=(health.uptime_s / 60,)),
        }

    def _schedule_fills(self, now: datetime) -> dict[str, Fill]:
        upcoming = []
        for job in self.cron.list_jobs() if self.cron is not None else []:
            if job["id"] in ("bins", "plants") and job.get("next_run"):
                upcoming.append((job["next_run"], job["id"]))
        first = min(upcoming)[1] if upcoming else ""
        return {"next_reminder": Fill(rf"\b{first}\b") if first else Fill()}


def _number_fill(value: float) -> Fill:
    forms = {f"{value:g}", f"{round(value, 1):g}", f"{round(value):d}", f"{int(value):d}"}
    return Fill(r"(?<![\d.])(?:" + "|".join(sorted(f.replace(".", r"\.") for f in forms)) + r")(?![\d])", (value,))


# --- building the home ----------------------------------------------------------------------------------


def _weather_fake() -> Any:
    """tests/fakes/open_meteo.py, or None where this branch does not have it yet."""
    try:
        from tests.fakes import open_meteo
    except ImportError:
        return None
    return open_meteo


def _script(open_meteo: Any) -> list[Any]:
    """Today wet (an umbrella), tonight below zero, tomorrow dry and cold, then mild days."""
    day = open_meteo.DayScript
    return [
        day(code=61, low=3.0, high=9.0, rain_chance=80, rain_mm=6.0),
        day(code=1, low=-2.0, high=6.0, rain_chance=5, rain_mm=0.0),
        *[day() for _ in range(14)],
    ]


async def _fetch(url: str, latitude: float, longitude: float) -> dict[str, Any]:
    """The fake's forecast for the place, as Open-Meteo's JSON (for the expected values, not for the appliance)."""
    import aiohttp

    params = {
        "latitude": str(latitude),
        "longitude": str(longitude),
        "timezone": ZONE,
        "forecast_days": str(FORECAST_DAYS),
        "current": "temperature_2m",
        "hourly": "temperature_2m,precipitation",
        "daily": "temperature_2m_max,temperature_2m_min,precipitation_sum,precipitation_probability_max",
    }
    async with aiohttp.ClientSession() as session, session.get(url, params=params) as response:
        response.raise_for_status()
        payload: dict[str, Any] = await response.json()
        return payload


def fixture_config(data: Path, setup: str) -> Config:
    """The checkout's config as the everyday fixture runs it (place and weather set by :func:`open_home`)."""
    config = load_config(CHECKOUT_CONFIG, data_dir=data, environ=dict(os.environ))
    config.memory.extract_after_messages = 0
    config.scheduler.timezone = ZONE if setup == "home" else ""
    config.routing.mode = "local_only"
    return config


@asynccontextmanager
async def open_home(
    folder: Path, model: ServedModel | None = None, setup: str = "home", model_file: Path | None = None
) -> AsyncIterator[Home]:
    """The fixture's appliance in ``folder``; ``model``: a model to share (None: the config's, in the runner;
    ``model_file``: that model file instead, e.g. a bigger catalog model)."""
    from appliance.schedule.scheduler import Scheduler
    from appliance.tasks import TaskStore
    from appliance.tools import scheduling

    data = folder / f"data-{setup}"
    config = fixture_config(data, setup)
    if model_file is not None:
        config.llm.model = str(model_file)
    async with AsyncExitStack() as stack:
        place, forecast, weather_skip, sun_skip = None, None, "", ""
        weather = getattr(config, "weather", None)
        fake_module = _weather_fake()
        zone = ZoneInfo(ZONE) if setup == "home" else None
        if setup == "home":
            if weather is None:
                sun_skip = weather_skip = "this branch's config has no weather: section (issue 32, item 2)"
            else:
                place = PLACE
                weather.place, weather.latitude, weather.longitude = PLACE
                if fake_module is None:
                    weather_skip = "tests/fakes/open_meteo.py is not on this branch (issue 32, item 2)"
                else:
                    today = datetime.now(zone).date() if zone else date.today()
                    fake = fake_module.FakeOpenMeteo(today=today, zone=ZONE, days=_script(fake_module))
                    fake.now_hour = datetime.now(zone).hour
                    await stack.enter_async_context(fake_module.serve_open_meteo(fake))
                    weather.enabled, weather.base_url = True, fake.url
                    forecast = await _fetch(fake.url, PLACE[1], PLACE[2])
        cron: Scheduler | None = None  # made below on the runtime's database, read late by its agent (as serve does)
        tasks: TaskStore | None = None
        runtime = Runtime.open(config, model=model, cron=lambda: cron, tasks=lambda: tasks)
        stack.callback(runtime.close)
        stack.push_async_callback(runtime.close_cloud)
        started = time.time()
        assert runtime.devices is not None, "the checkout's config has its simulated devices"
        await runtime.devices.set("fan", "on", requested_by="everyday fixture")
        fan_on_at = datetime.now(zone).astimezone(zone) if zone else datetime.now().astimezone()
        assert runtime.memory is not None
        for text in MEMORIES:
            await runtime.db.call(runtime.memory.add, text, source="everyday fixture")
        cron = Scheduler(
            list(JOBS),
            tz=config.scheduler.timezone,
            run_job=_never_run,
            notify=None,
            db=runtime.db,
            devices=list(config.devices),
        )
        tasks = TaskStore(runtime.db)
        await runtime.db.call(tasks.add, TASK)
        scheduling.register(runtime.tools, cron, tasks)
        yield Home(
            runtime,
            setup,
            zone,
            started,
            fan_on_at,
            data,
            place=place,
            forecast=forecast,
            weather_skip=weather_skip,
            sun_skip=sun_skip,
            cron=cron,
        )


async def _never_run(job: CronJob) -> str:
    """The fixture's jobs are listed, never run: a question must not change the home."""
    return "not run in the everyday fixture"


async def ask_set(
    folder: Path,
    everyday: EverydaySet,
    questions: Sequence[Question],
    model: ServedModel | None = None,
    model_file: Path | None = None,
    *,
    alone: bool = False,
) -> tuple[list[Verdict], list[Verdict]]:
    """Every question through the appliance in the home its setup names (one appliance per setup), in the
    questions' order; and, with ``alone``, each asked of the model alone too (else an empty list)."""
    verdicts: dict[str, Verdict] = {}
    baseline: dict[str, Verdict] = {}
    for setup in ("home", "bare"):
        mine = [q for q in questions if q.setup == setup]
        if not mine:
            continue
        async with open_home(folder, model, setup, model_file) as home:
            for verdict in await home.ask_all(mine, everyday.declines):
                verdicts[verdict.id] = verdict
            if alone:
                for question in mine:
                    baseline[question.id] = await home.ask_model_alone(question, everyday.declines)
    return [verdicts[q.id] for q in questions], [baseline[q.id] for q in questions if q.id in baseline]
