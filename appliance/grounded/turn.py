"""The grounded desk in a turn: the facts of this appliance gathered, the topics tried, the reply record.

:class:`Grounding` belongs to the agent; the scheduler and the task store come late-bound from the agent's
owner (the daemon, ``picoagent chat``: built after the agent), the forecast source from
:meth:`appliance.runtime.Runtime.open`, which builds it (and :meth:`Grounding.use_weather` at a reload).
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, InitVar, dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from appliance.agent.record import ReplyRecord
from appliance.grounded.base import Answer, Facts, Topic
from appliance.grounded.desk import GroundedDesk, Texts, record_of
from appliance.grounded.follow import again, follows

if TYPE_CHECKING:
    from appliance.config import Config
    from appliance.hardware.devices import DeviceRegistry
    from appliance.llm.embeddings import QueryEmbedder
    from appliance.memory.db import Database
    from appliance.memory.keeper import MemoryKeeper
    from appliance.tasks.store import TaskStore
    from appliance.tools.registry import ToolRegistry
    from appliance.tools.scheduling import CronDesk

_CHANNELS = ("telegram", "discord", "slack", "email", "whatsapp")
_FOLLOWED = {"weather", "sun", "time", "schedules"}  # topics whose question "and tomorrow?" asks again of another day
_LOOK_BACK = 8  # messages of the chat searched for the question a follow-up continues


def topics() -> list[Topic]:
    """Every topic, in the order their words rules are tried (the narrowest first). Imported here, when the desk
    is first used: their rules and tables are about 2.5 MiB that a daemon which has answered nothing need not
    hold (serve_idle_rss_mib, make bench: 52 MiB with them at start, the goal 50)."""
    from appliance.grounded.about import ABILITIES, SELF
    from appliance.grounded.agenda import AGENDA
    from appliance.grounded.arithmetic import ARITHMETIC
    from appliance.grounded.clock import CLOCK
    from appliance.grounded.conversation import CONVERSATION
    from appliance.grounded.courtesy import COURTESY
    from appliance.grounded.health import HEALTH
    from appliance.grounded.house import HOUSE
    from appliance.grounded.remembered import LOOKUP, REMEMBERED
    from appliance.grounded.units import UNITS
    from appliance.grounded.unknowable import UNKNOWABLE
    from appliance.grounded.weather import SUN, WEATHER

    # the clock before memory ("do you know what time it is"); a memory quoted word for word (LOOKUP) last
    found: list[Topic] = [CONVERSATION, AGENDA, SUN, WEATHER, CLOCK, SELF, ABILITIES, HOUSE, HEALTH, REMEMBERED]
    found += [UNKNOWABLE, ARITHMETIC, UNITS, LOOKUP, COURTESY]  # thanks last: "thanks, what time is it?" asks
    return found


def _names_device(text: str, facts: Facts) -> bool:
    """Whether ``text`` names one of the devices (its name or an alias, as words): "what does the outdoor sensor
    say?" with a device called outdoor."""
    said = " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "
    for info in facts.devices.infos() if facts.devices is not None else []:
        for name in (info.name.replace("_", " "), *info.aliases):
            if name and f" {' '.join(re.findall(r'[a-z0-9]+', name.lower()))} " in said:
                return True
    return False


def local_zone(name: str = "") -> tzinfo:
    """The appliance's time zone: ``scheduler.timezone``, else the system's by its IANA name where it has one."""
    if name:
        return ZoneInfo(name)
    key = os.environ.get("TZ", "").lstrip(":")
    if not key:
        try:
            target = os.path.realpath("/etc/localtime")
            key = target.split("/zoneinfo/", 1)[1] if "/zoneinfo/" in target else ""
        except OSError:
            key = ""
    try:
        return ZoneInfo(key) if key else _system()
    except (ZoneInfoNotFoundError, ValueError):
        return _system()


def _system() -> tzinfo:
    zone = datetime.now().astimezone().tzinfo
    assert zone is not None
    return zone


def _absent() -> None:
    return None


@dataclass(eq=False)
class Grounding:
    """The agent's grounded desk and what its facts are drawn from.

    ``cron_source``, ``tasks_source``: the scheduler and the task store, late-bound (see the module's docstring);
    ``embedder``, ``texts``: what the desk matches questions by meaning with (None: by words only)."""

    config: Config
    db: Database
    _: KW_ONLY
    devices: DeviceRegistry | None = None
    memory: MemoryKeeper | None = None
    tools: ToolRegistry | None = None
    workspace: Path | None = None
    model_name: str = ""
    cron_source: Callable[[], CronDesk | None] = _absent
    tasks_source: Callable[[], TaskStore | None] = _absent
    weather: Any = None
    embedder: InitVar[QueryEmbedder | None] = None
    texts: InitVar[Texts | None] = None

    def __post_init__(self, embedder: QueryEmbedder | None, texts: Texts | None) -> None:
        self.zone = local_zone(self.config.scheduler.timezone)
        self.clock: Callable[[], float] = time.time  # the answers' now (tests hold it still)
        self.started_at = time.time()
        self._meaning = (embedder, texts)

    @functools.cached_property
    def desk(self) -> GroundedDesk:
        """The topics' desk, made at the first message (or prepare), not at start: see :func:`topics`."""
        return GroundedDesk(topics(), *self._meaning)

    @property
    def cron(self) -> CronDesk | None:
        """The scheduler the agenda is read from (None: there is none here)."""
        return self.cron_source()

    @property
    def tasks(self) -> TaskStore | None:
        """The task store the open tasks are read from (None: there is none here)."""
        return self.tasks_source()

    def use_weather(self, weather: Any) -> None:
        """The forecast source from now (a reload made it again, or there is none now)."""
        self.weather = weather

    def facts(self, session: str, conversation: int | None, *, person: bool, cloud_allowed: bool) -> Facts:
        """The facts a grounded answer in this chat may use (memories only for a person the Pi knows)."""
        return Facts(
            config=self.config,
            now=lambda: datetime.fromtimestamp(self.clock(), self.zone),
            session=session,
            person=person,
            conversation=conversation,
            db=self.db,
            devices=self.devices,
            cron=self.cron,
            tasks=self.tasks,
            memory=self.memory if person else None,
            model_name=self.model_name,
            cloud_allowed=cloud_allowed,
            tools=tuple(t.name for t in self.tools) if self.tools is not None else (),
            channels=tuple(c for c in _CHANNELS if getattr(self.config, c).enabled),
            started_at=self.started_at,
            weather=self.weather,
            workspace=self.workspace,
        )

    async def reply(
        self, text: str, facts: Facts, started: float, *, meaning: bool, near: bool = False
    ) -> ReplyRecord | None:
        """The grounded reply to ``text`` (words; by meaning when ``meaning``: a paraphrase, and with ``near`` a
        question only near a topic too), or None for the model."""
        if meaning:
            # the model may not be trusted with what the cloud may not answer: a question about a topic that
            # the topic cannot answer exactly gets its general answer or its honest sentence, not a guess
            # ... unless it names one of the devices: the model reads it with its device tools
            near = near and not facts.cloud_allowed and not _names_device(text, facts)
            found = await self.desk.by_meaning(text, near=near) if self.desk.embedder is not None else None
            answer = await self.desk.answer_ask(found, facts, near=near) if found is not None else None
        else:
            answer = await self._follow_up(text, facts) or await self.desk.answer(text, facts, meaning=False)
        return record_of(answer, started) if answer is not None else None

    async def _follow_up(self, text: str, facts: Facts) -> Answer | None:
        """ "and tomorrow?" after "will it rain today?": the earlier question asked again of the day now named, by
        the topic that took it (the weather, the sun, the clock, the schedules); None when it is no such follow-up."""
        if not follows(text) or facts.db is None or facts.conversation is None:
            return None
        stored = await facts.db.call(facts.db.recent_messages, facts.conversation, _LOOK_BACK)
        earlier = [m.content for m in reversed(stored) if m.role == "user" and not follows(m.content)][:1]
        kinds = {ask.kind for ask in self.desk.by_words(earlier[0])} & _FOLLOWED if earlier else set()
        for ask in self.desk.by_words(again(text, earlier[0])) if kinds else []:
            if ask.kind in kinds and (answer := await self.desk.answer_ask(ask, facts)) is not None:
                return answer
        return None
