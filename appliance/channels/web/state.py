"""What the web routes use, in parts by route group, each built by the daemon before the site (daemon.py).

:class:`WebState` is the whole: the runtime, auth, and one part per group of routes, which takes only its own
part from the application (its :class:`web.AppKey` below): chat and /v1 the :class:`Streams` in flight, cron and
tasks the :class:`Automation`, devices the :class:`DeviceView`, the webhooks the running channels; the status
page and /metrics the :class:`Monitor` (recent replies, charts, metrics) and the :class:`StatusSources` (what
it reports of the services the site does not own). Nothing here is filled in after it is built.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from appliance import __version__
from appliance.agent.loop import ReplyRecord
from appliance.llm.footprint import process_memory, runner_memory
from appliance.metrics import Counter, Gauge, Histogram, Registry

if TYPE_CHECKING:
    from appliance.channels.registry import ChannelSet
    from appliance.channels.web.auth import Auth
    from appliance.config.edit import ConfigFile
    from appliance.hardware.events import EventBus
    from appliance.model_fetch import ModelFetch
    from appliance.ratelimit import RateLimiter
    from appliance.runtime import Runtime
    from appliance.schedule.scheduler import Scheduler
    from appliance.tasks import TaskRunner, TaskStore

SERIES_SECONDS = 3600  # the status page charts the last hour
RECENT_REPLIES = 20


def _update_status() -> dict[str, Any] | None:
    """The OTA status of the running release (appliance/ota/updater.py), imported on the first status request.

    The update module (bundles, the boot updater, the installer) would otherwise stay in the idle daemon.
    """
    from appliance.ota.updater import running_status

    return running_status()


class ApplianceMetrics:
    """The picoagent_* metrics exported at /metrics."""

    def __init__(self, state: Monitor) -> None:
        self.registry = Registry()
        add = self.registry.add
        self.turns = add(Counter("picoagent_turns_total", "Turns answered, by route", ["route"]))
        self.routes = add(
            Counter(
                "picoagent_route_decisions_total",
                "Routing decisions: the route, what decided it, and why the cloud was not used when wanted",
                ["route", "why", "blocked"],
            )
        )
        self.cost = add(Counter("picoagent_cloud_cost_usd_total", "What the cloud cost, by the price table", []))
        self.tokens = add(Counter("picoagent_tokens_total", "Model tokens, by kind", ["kind"]))
        self.latency = add(
            Histogram(
                "picoagent_model_latency_seconds",
                "Model latency per turn: to the first token (ttft) and in all (total)",
                [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
                ["stage"],
            )
        )
        self.requests = add(Counter("picoagent_http_requests_total", "HTTP requests, by status class", ["code"]))
        add(Gauge("picoagent_queue_depth", "Model requests waiting", lambda: float(state.queue_depth())))
        add(Gauge("picoagent_model_loaded", "1 when the local model is in memory", lambda: float(state.model_loaded())))
        add(Gauge("picoagent_cpu_temperature_celsius", "CPU temperature", lambda: state.last_temperature))
        add(
            Gauge(
                "picoagent_uptime_seconds", "Seconds since the daemon started", lambda: time.time() - state.started_at
            )
        )

    def record(self, record: ReplyRecord) -> None:
        """Count one finished turn."""
        t = record.timings
        self.turns.inc(1, record.route)
        self.routes.inc(1, record.route, record.why or "-", record.blocked or "-")
        if t.cost_usd:
            self.cost.inc(t.cost_usd)
        self.tokens.inc(t.prompt_tokens, "prompt")
        self.tokens.inc(t.completion_tokens, "completion")
        self.latency.observe(t.ttft_s, "ttft")
        self.latency.observe(t.total_s, "total")


def stored_replies(db: Any, before: float, limit: int) -> list[dict[str, Any]]:
    """The last replies in the database from before ``before``, newest first, as the status page lists them."""
    if limit <= 0:
        return []
    rows = db.rows(
        "SELECT m.created_at, m.route, m.meta, c.channel, c.chat_id FROM messages m"
        " JOIN conversations c ON c.id = m.conversation_id"
        " WHERE m.role = 'assistant' AND m.route IS NOT NULL AND m.created_at < ? ORDER BY m.id DESC LIMIT ?",
        (before, limit),
    )
    replies = []
    for at, route, meta_text, channel, chat_id in rows:
        meta = json.loads(meta_text) if meta_text else {}
        timings = meta.get("timings") or {}
        replies.append(
            {
                "at": at,
                "route": route,
                "reason": meta.get("reason", ""),
                "session": f"{channel}:{chat_id}",
                "ttft_s": timings.get("ttft_s"),
                "total_s": timings.get("total_s"),
                "decode_tps": timings.get("decode_tps"),
                "actions": len(meta.get("actions") or []),
            }
        )
    return replies


@dataclass
class Monitor:
    """The daemon's own figures: recent replies, the charts, the metrics (the status page, /metrics, the assistant's
    sensors in Home Assistant); told of every finished turn from when it is made."""

    runtime: Runtime
    started_at: float = field(default_factory=time.time)
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_REPLIES))
    temperature: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=240))
    decode_tps: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=2000))
    # Local turns' (time, prompt tokens, cached tokens): the prompt cache's hit rate over the charted hour.
    local_tokens: deque[tuple[float, int, int]] = field(default_factory=lambda: deque(maxlen=2000))
    last_temperature: float | None = None
    metrics: ApplianceMetrics = field(init=False)
    _recent_loaded: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.metrics = ApplianceMetrics(self)
        self.runtime.agent.listeners.append(self.on_record)

    def queue_depth(self) -> int:
        """Requests waiting for the model, plus the one running."""
        queue = self.runtime.model_queue
        return queue.waiting + (1 if queue.busy else 0)

    def model_loaded(self) -> bool:
        """Whether the local model is in memory."""
        return self.runtime.model.loaded

    def on_record(self, record: ReplyRecord) -> None:
        """Keep a finished turn for the status page and the metrics."""
        now = time.time()
        self.metrics.record(record)
        self.recent.appendleft(
            {
                "at": now,
                "route": record.route,
                "reason": record.reason,
                "session": record.session,
                "ttft_s": record.timings.ttft_s,
                "total_s": record.timings.total_s,
                "decode_tps": record.timings.decode_tps,
                "actions": len(record.actions),
            }
        )
        if record.timings.decode_tps:
            self.decode_tps.append((now, float(record.timings.decode_tps)))
        if record.route == "local" and record.timings.prompt_tokens:
            self.local_tokens.append((now, record.timings.prompt_tokens, record.timings.cached_tokens))
        self.prune(now)

    async def load_recent(self) -> None:
        """Once: the replies stored before this daemon started, behind those it saw (a restart empties no card)."""
        if self._recent_loaded:
            return
        self._recent_loaded = True
        db = self.runtime.db
        older = await db.call(stored_replies, db, self.started_at, RECENT_REPLIES - len(self.recent))
        self.recent.extend(older)

    def routing_status(self) -> dict[str, Any]:
        """Routing for the status page: the mode, the provider, today's decisions and spending (database thread)."""
        config = self.runtime.config
        db = self.runtime.db
        today, month = db.spent_usd()
        return {
            "mode": config.routing.mode,
            "provider": config.routing.cloud_provider if config.routing.mode != "local_only" else "",
            "today": db.routes(1),
            "spent_today_usd": round(today, 4),
            "spent_month_usd": round(month, 4),
            "daily_budget_usd": config.routing.daily_budget_usd,
            "monthly_budget_usd": config.routing.monthly_budget_usd,
        }

    def add_temperature(self, value: float | None, now: float | None = None) -> None:
        """Keep one temperature sample for the chart."""
        self.last_temperature = value
        if value is not None:
            self.temperature.append((now or time.time(), value))

    def prune(self, now: float) -> None:
        """Forget chart points older than the charted hour."""
        for series in (self.temperature, self.decode_tps, self.local_tokens):
            while series and series[0][0] < now - SERIES_SECONDS:
                series.popleft()

    def recent_tps(self) -> float | None:
        """Decode speed of the latest reply that had one."""
        return self.decode_tps[-1][1] if self.decode_tps else None

    def prompt_cache(self) -> dict[str, Any]:
        """How much of the local turns' prompts the model did not read again in the last hour, and its cache."""
        prompt = sum(p for _, p, _ in self.local_tokens)
        cached = sum(c for _, _, c in self.local_tokens)
        stats = getattr(self.runtime.model, "prompt_cache_stats", None)
        cache = stats() if stats is not None else {}
        return {
            "hit_rate_1h": round(cached / prompt, 4) if prompt else None,
            "cached_tokens_1h": cached,
            "prompt_tokens_1h": prompt,
            "prefix": cache.get("prefix", "off"),
            "ram_mb": float(cache.get("ram_mb", 0.0)),
            "entries": int(cache.get("entries", 0)),
        }

    def status(self, health: dict[str, Any], sources: StatusSources) -> dict[str, Any]:
        """The /api/status document, with what ``sources`` report of the services around the site."""
        now = time.time()
        self.prune(now)
        model = self.runtime.model
        fetch = sources.model_fetch()
        wanted, pull = fetch.status() if fetch is not None else (None, None)
        from appliance.schedule.parse import resolve_zone

        zone = resolve_zone(self.runtime.config.scheduler.timezone)  # the appliance's time, as notifications show
        return {
            "version": __version__,
            "now": now,
            "started_at": self.started_at,
            "uptime_s": round(now - self.started_at, 1),
            "health": health,
            "model": {
                "name": model.name,
                "path": str(model.path),
                "loaded": model.loaded,
                "threads": model.threads_used or None,
                "recent_tps": self.recent_tps(),
                "queue_depth": self.queue_depth(),
                "wanted": wanted,  # what llm.model asks for (auto: this board's choice)
                "pull": pull,  # its background download and switch (appliance/model_fetch.py), or null
                "prompt_cache": self.prompt_cache(),
                # the model runner (appliance/llm/runner_client.py): its process, crashes, fallback, buffer types
                "runner": runner.status(zone) if (runner := getattr(model, "runner", None)) is not None else None,
            },
            "recent": list(self.recent),
            "series": {
                "cpu_temperature_c": [[round(t), v] for t, v in self.temperature],
                "decode_tps": [[round(t), v] for t, v in self.decode_tps],
            },
            "devices": [],
            "events": [],
            "update": _update_status(),
            "web": sources.serving(),
            "process_memory": process_memory(model, embedder := getattr(self.runtime.memory, "embedder", None)),
            "runner_memory": runner_memory(getattr(model, "runner", None), model, embedder),
            # {"connected", "broker", "reconnects", "last_error", "dropped", "commands", "devices"}; null: mqtt off
            "mqtt": sources.mqtt.status() if sources.mqtt is not None else None,
            # {"connected", "url", "reconnects", "last_error"}; null: homeassistant off
            "homeassistant": sources.homeassistant.status() if sources.homeassistant is not None else None,
            # {"source", "loaded_at", "restart_needed": [config keys], "refused"}: the last SIGHUP; null outside serve
            "config": sources.reloaded() if sources.reloaded is not None else None,
        }


@dataclass
class Streams:
    """What chat and /v1 have in flight: the turns (a stop lets them finish briefly) and the open chat sockets."""

    turns: set[asyncio.Task[Any] | asyncio.Future[Any]] = field(default_factory=set)
    sockets: set[web.WebSocketResponse] = field(default_factory=set)  # closed at stop

    def track(self, turn: asyncio.Task[Any] | asyncio.Future[Any]) -> None:
        """Keep ``turn`` among those in flight until it is done."""
        self.turns.add(turn)
        turn.add_done_callback(self.turns.discard)


@dataclass
class Automation:
    """The daemon's cron scheduler, task store and task runner (/api/cron, /api/tasks, the status page's cards);
    None outside the daemon."""

    cron: Scheduler | None = None
    tasks: TaskStore | None = None
    task_runner: TaskRunner | None = None  # woken when a task is added or resumed over HTTP


@dataclass
class DeviceView:
    """What the device routes keep beside the devices themselves: the event bus, the readings cache, and the rate
    of trial pulses (POST /api/devices/try)."""

    events: EventBus | None = None
    readings: dict[str, tuple[float, list[dict[str, Any]]]] = field(default_factory=dict)
    _trials: RateLimiter | None = field(default=None, init=False)

    @property
    def trials(self) -> RateLimiter:
        """The rate of trial pulses, made at the first trial (the idle daemon never loads the trial's code)."""
        if self._trials is None:
            from appliance.hardware.trial import pulse_limiter

            self._trials = pulse_limiter()
        return self._trials


def _nothing() -> None:
    return None


def _not_serving() -> dict[str, Any]:
    return {}


@dataclass
class StatusSources:
    """What /api/status reports of the services the site does not own; late-bound where the daemon builds them
    after the site (the model's pull, the reload record, how the site itself serves once it listens)."""

    mqtt: Any = None  # with mqtt.enabled: the MqttBridge (its status() is /api/status mqtt)
    homeassistant: Any = None  # with homeassistant.enabled: its client (status())
    model_fetch: Callable[[], ModelFetch | None] = _nothing  # the wanted model's background pull
    reloaded: Callable[[], dict[str, Any]] | None = None  # the last config reload (reload.py); None outside serve
    serving: Callable[[], dict[str, Any]] = _not_serving  # how the daemon serves: url, tls, certificate


@dataclass
class Settings:
    """What the settings routes use: the config file (opened on first use) and the daemon's reload, if any."""

    reload: Callable[[], dict[str, Any]] | None = None  # applies the file now (daemon.reload); None outside serve
    _file: ConfigFile | None = field(default=None, init=False)

    def file(self, runtime: Runtime) -> ConfigFile:
        """The config file the running appliance was loaded from."""
        from appliance.config.edit import ConfigFile
        from appliance.errors import ConfigError

        if self._file is None:
            config = runtime.config
            if config.source is None:
                raise ConfigError("this appliance was not started from a config file, so there is none to change")
            self._file = ConfigFile(config.source, data_dir=config.data_dir)
        return self._file


class WebState:
    """Everything the daemon's routes use, built before the site; each route group takes only its part."""

    def __init__(
        self,
        runtime: Runtime,
        auth: Auth,
        *,
        monitor: Monitor | None = None,
        streams: Streams | None = None,
        automation: Automation | None = None,
        devices: DeviceView | None = None,
        channels: ChannelSet | None = None,
        sources: StatusSources | None = None,
        settings: Settings | None = None,
    ) -> None:
        """``monitor``: the daemon's, made before the site (the MQTT bridge reads it); made here otherwise."""
        self.runtime = runtime
        self.auth = auth
        self.monitor = monitor or Monitor(runtime)
        self.streams = streams or Streams()
        self.automation = automation or Automation()
        self.devices = devices or DeviceView()
        self.channels = channels  # the running chat channels (status pages list them; webhooks reach them)
        self.sources = sources or StatusSources()
        self.settings = settings or Settings()  # the settings routes: the config file and the daemon's reload

    def status(self, health: dict[str, Any]) -> dict[str, Any]:
        """The /api/status document without the parts read on the database thread (see app.api_status)."""
        return self.monitor.status(health, self.sources)


STATE = web.AppKey("state", WebState)  # the status page and the site's own plumbing (middlewares, shutdown)
RUNTIME: web.AppKey[Runtime] = web.AppKey("runtime")
MONITOR = web.AppKey("monitor", Monitor)
STREAMS = web.AppKey("streams", Streams)
AUTOMATION = web.AppKey("automation", Automation)
DEVICES = web.AppKey("devices", DeviceView)
CHANNELS: web.AppKey[ChannelSet | None] = web.AppKey("channels")
