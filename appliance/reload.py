"""SIGHUP: a new config applied to the running daemon key by key; what cannot apply is named, never implied.

The daemon's parts were built from the config it started with: some read it on every use (the agent, the
routing), others copied what they needed (a device's approval, the shell tool's limits, the cron jobs). So
a reload compares the config the daemon *started* with to the new file, key by key (``devices.fan.approval``,
``web.port``), and each changed key either applies here or waits for a restart. What waits is logged
("SIGHUP: web.port: restart needed") and kept in :attr:`Reload.restart_needed`, which /api/status,
`picoagent status` and the status page show until a restart (or an edit back) clears it. Comparing with the
started config, not the previous reload's, keeps the list true over any number of reloads.

What applies: ``agent``, ``llm`` (a new model is switched to; ``llm.weight_repack`` waits: the runner was
started with it), ``log_level``, ``secrets_file``, ``providers``, ``routing``, ``notify``, ``tasks``,
``memory`` (not its ``embedding_model``: stored vectors were made by the running one), ``scheduler``
(jobs, cron.yaml read again, ``timezone``; ``heartbeat_minutes`` when the heartbeat runs before and after),
``weather`` (the forecast source is made again for the weather tool and the answers; the sun jobs follow the
place, and a sun job made in chat while there was none is taken in),
``tools`` (limits, shell, web fetch and search, the workspace quota, the message tool, approvals, MCP servers
restarted; not ``plugins``: imported modules cannot be unloaded), ``hardware.approval_timeout_s``,
``hardware.raw_access`` (narrowing always; turning it on needs the raw tools, registered at start), and
``devices`` (appliance/reload_devices.py): a new device is built and known at once (the fast path, the grounded
answers, the status page, `picoagent devices`, MQTT discovery), a rewired one (a new pin, bus, address or
driver) is closed and built on its new wiring, one taken out is released and can no longer be driven, and a
running one takes its new ``approval``, ``allow``, ``writes_per_minute``, ``room`` and ``aliases``. A device
whose driver cannot be built waits for the restart, named (a rewired one keeps its old wiring meanwhile).
The chat channels (``telegram``, ``discord``, ``slack``, ``email``, ``whatsapp``, ``webhooks``;
appliance/reload_channels.py) are started, stopped or restarted on their new settings, in the background, the
others untouched; ``allow_from`` is set on the running one. Everything else (``web``, ``data_dir``,
``hardware.backend``, ``events``, ``mqtt``, ``homeassistant``) waits for the restart.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from appliance.config.schema import changed_keys
from appliance.errors import PicoagentError

if TYPE_CHECKING:
    from appliance.config import Config
    from appliance.daemon import Daemon

log = logging.getLogger(__name__)

# Whole top-level sections a reload applies as they are (the parts that read them hold this same Config).
APPLIED = ("agent", "log_level", "secrets_file", "providers", "routing", "notify", "tasks")
# The chat channels' sections a reload starts, stops or restarts them on (reload_channels.LIVE_SECTIONS, which
# loads at a reload only; tests/test_reload.py keeps the two equal).
LIVE_CHANNELS = ("telegram", "discord", "slack", "email", "whatsapp", "webhooks")
WAITING = {"llm.weight_repack", "memory.embedding_model", "tools.plugins", "hardware.backend"}
# A step that fails leaves these keys of other sections unapplied too: the scheduler binds sun jobs to the place.
ALSO_UNAPPLIED = {"scheduler": ("weather.latitude", "weather.longitude")}


def _section(key: str) -> str:
    return key.split(".", 1)[0]


@dataclass
class Reload:
    """What the last reload did: when, from where, and which keys wait for a restart (for /api/status)."""

    loaded_at: float
    source: str
    restart_needed: list[str] = field(default_factory=list)
    refused: str = ""  # the last SIGHUP's config error (the running config stayed), "" when it loaded

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"source", "loaded_at", "restart_needed": [keys], "refused"}``."""
        return dataclasses.asdict(self)


class Reloader:
    """Applies a new config to a running daemon (see the module docstring for what applies)."""

    def __init__(self, daemon: Daemon, started: Config) -> None:
        self.daemon = daemon
        self.started = started  # a copy of the config the daemon started with: what its restart-only parts run
        self.unbuilt: list[str] = []  # the devices this reload could not build (they wait for the restart)

    def waiting(self, new: Config) -> list[str]:
        """The keys of ``new`` that differ from what the daemon started with and cannot apply while it runs."""
        raw_started = self.started.hardware.raw_access.enabled
        heartbeat = self.daemon.heartbeat is not None
        keys = []
        for key in changed_keys(self.started, new):
            section = _section(key)
            if key in WAITING:
                keys.append(key)
            elif section in (*APPLIED, "memory", "scheduler", "tools", "weather") or (section == "llm"):
                if key == "scheduler.heartbeat_minutes" and (not heartbeat or not new.scheduler.heartbeat_minutes):
                    keys.append(key)
            elif section == "devices" or key == "hardware.approval_timeout_s":
                continue  # a device that cannot be built is named by apply
            elif section in LIVE_CHANNELS:  # (reload_channels.LIVE)
                continue  # the channel is started, stopped or restarted on it (reload_channels.py)
            elif key.startswith("hardware.raw_access"):
                if not raw_started and new.hardware.raw_access.enabled:
                    keys.append(key)  # the raw bus tools are registered at start
            else:
                keys.append(key)
        return sorted(set(keys))

    def apply(self, new: Config, waiting: list[str]) -> list[str]:
        """Apply what can be applied of ``new`` to the running config and parts (``llm`` is the daemon's: it
        switches models); ``waiting`` (:meth:`waiting`) and the keys of a section that failed to apply."""
        old = self.daemon.config
        waiting = list(waiting)
        for name in APPLIED:
            setattr(old, name, getattr(new, name))
        old.secret_values = new.secret_values  # the secrets file read again: its values are redacted from now on
        self.daemon.runtime.tools.redact.update(new.secret_values)
        steps = (
            ("channels", self._channels),
            ("devices", self._devices),
            ("hardware", self._hardware),
            ("tools", self._tools),
            ("memory", self._memory),
            ("scheduler", self._scheduler),
            ("weather", self._weather),  # after the scheduler: the forecast is said in its (new) time zone
            ("tasks", self._tasks),
        )
        for section, step in steps:
            try:
                step(old, new)
            except (PicoagentError, ValueError) as exc:
                why = exc.for_people() if isinstance(exc, PicoagentError) else str(exc)
                log.error("SIGHUP: %s could not be applied: %s", section, why)
                also = ALSO_UNAPPLIED.get(section, ())
                waiting += [k for k in changed_keys(self.started, new) if _section(k) == section or k in also]
        self.daemon.runtime.agent.reread_config()
        return sorted(set(waiting + self.unbuilt))

    def _channels(self, old: Config, new: Config) -> None:
        """Chat channels started, stopped or restarted on their new settings (appliance/reload_channels.py)."""
        from appliance.reload_channels import apply_channels

        apply_channels(self.daemon, old, new)

    def _devices(self, old: Config, new: Config) -> None:
        """Devices added, rewired, taken out, re-set (appliance/reload_devices.py); one not built waits."""
        from appliance.reload_devices import apply_devices  # at a reload only: the idle daemon never needs it

        self.unbuilt = apply_devices(self.daemon, old, new)

    def _hardware(self, old: Config, new: Config) -> None:
        """The approval expiry; raw bus access (changed in place: the raw tools' policy reads this object)."""
        old.hardware.approval_timeout_s = new.hardware.approval_timeout_s
        runtime = self.daemon.runtime
        if runtime.approvals is not None:
            runtime.approvals.store.expire_after(new.hardware.approval_timeout_s)
        raw, wanted = old.hardware.raw_access, new.hardware.raw_access
        if raw.enabled or not wanted.enabled:
            for f in dataclasses.fields(raw):
                setattr(raw, f.name, getattr(wanted, f.name))

    def _tools(self, old: Config, new: Config) -> None:
        """The registry's limits, the tools built from settings registered again, approvals, MCP servers."""
        from appliance.runtime import CONFIGURED_TOOLS, register_configured

        daemon, runtime = self.daemon, self.daemon.runtime
        previous, tools = old.tools, replace(new.tools, plugins=old.tools.plugins)
        registry = runtime.tools
        registry.limit(per_turn=tools.per_turn, max_output_chars=tools.max_output_chars, cache_s=tools.cache_s)
        for name in (*CONFIGURED_TOOLS, "message"):
            registry.remove(name)
        register_configured(registry, old, tools)
        if tools.message_per_hour and daemon.notifier is not None:
            from appliance.tools import message

            message.register(registry, daemon.notifier.notify, runtime.db, tools.message_per_hour)
        if runtime.approvals is not None:  # an approved call's own time limit is agent.tool_timeout_s
            runtime.approvals.configure(tools.require_approval, timeout_s=old.agent.tool_timeout_s)
        old.tools = tools
        if tools.mcp != previous.mcp:
            daemon.chores.spawn(self._restart_mcp())

    async def _restart_mcp(self) -> None:
        """Stop the running MCP servers, forget their tools, start the new config's."""
        await self.daemon.runtime.replace_mcp()
        await self.daemon._start_mcp()

    def _memory(self, old: Config, new: Config) -> None:
        """Recall and extraction settings (the embedding model stays: stored vectors were made with it)."""
        old.memory = replace(new.memory, embedding_model=old.memory.embedding_model)
        keeper = self.daemon.runtime.agent.memory
        if keeper is not None:
            keeper.use_settings(old.memory)

    def _scheduler(self, old: Config, new: Config) -> None:
        """The config's and cron.yaml's jobs (read again), the time zone, the heartbeat's interval."""
        from appliance.config import load_jobs

        daemon = self.daemon
        sched = new.scheduler
        heartbeat = daemon.heartbeat
        minutes = sched.heartbeat_minutes if heartbeat is not None and sched.heartbeat_minutes else None
        if daemon.cron is not None:
            jobs = load_jobs(sched.jobs, daemon.runtime.workspace.root, old.devices)
            file_ids = {job.id for job in jobs[len(sched.jobs) :]}
            daemon.cron.reload(jobs, tz=sched.timezone, file_ids=file_ids, place=new.weather.coordinates)
        if heartbeat is not None and minutes is not None:
            heartbeat.reschedule(minutes, sched.timezone)
        old.scheduler = replace(sched, heartbeat_minutes=minutes or old.scheduler.heartbeat_minutes)

    def _weather(self, old: Config, new: Config) -> None:
        """The place and the forecast source: the sun answers read the config; the forecast source is made again
        (the weather tool and the forecast answers get it) when it or the time zone changed."""
        from appliance.schedule.parse import resolve_zone

        runtime = self.daemon.runtime
        running = runtime.weather
        same_zone = running is None or running.zone == resolve_zone(old.scheduler.timezone)
        if new.weather == old.weather and same_zone:
            return
        old.weather = new.weather
        runtime.use_forecast(old)

    def _tasks(self, old: Config, new: Config) -> None:
        """New tasks' default budgets."""
        if self.daemon.task_store is not None:
            self.daemon.task_store.use_settings(old.tasks)
