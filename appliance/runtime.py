"""Builds the services a command needs from the config: database, model, tools, workspace, agent.

The daemon (``serve``) and the one-process commands (``chat``, ``tools run``) share this, so that a
turn is the same wherever it is served.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.agent import skills
from appliance.agent.context import Workspace
from appliance.agent.escalation import CloudRoute
from appliance.agent.loop import Agent
from appliance.agent.skill_uses import SkillUses
from appliance.agent.skills import SkillCatalog
from appliance.config import Config, data_dir
from appliance.llm.base import ServedModel
from appliance.llm.choice import model_path, model_spec, models_dir
from appliance.llm.fair_queue import FairScheduler
from appliance.llm.runner_client import ModelRunner
from appliance.llm.runner_models import RunnerModel, runner_for
from appliance.memory.db import Database
from appliance.memory.keeper import MemoryKeeper
from appliance.memory.store import MemoryStore
from appliance.tools import builtin, shell, web_fetch, web_search
from appliance.tools import workspace as workspace_tools
from appliance.tools.approvals import ToolApprovals
from appliance.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from appliance.config.schema import ToolsConfig
    from appliance.hardware.approvals import ApprovalStore
    from appliance.hardware.devices import DeviceAccess, DeviceRegistry, SetResult
    from appliance.hardware.drivers.base import Reading
    from appliance.hardware.policy import RawBusPolicy
    from appliance.llm.embeddings import LocalEmbedder
    from appliance.llm.runner_models import RunnerEmbedder
    from appliance.mcp.client import McpClients
    from appliance.tasks import TaskStore
    from appliance.tools.scheduling import CronDesk
    from appliance.weather.source import WeatherSource

log = logging.getLogger(__name__)


def model_runner(config: Config) -> ModelRunner:
    """The model runner (a child process running llama.cpp: appliance/llm/runner.py) of this data dir."""
    return runner_for(config.llm.weight_repack, data_dir(config), config.log_level)


def local_model(config: Config, *, fallback: bool = False, name: str | None = None) -> RunnerModel:
    """The local chat model for this config, run in the model runner (loaded on first use); ``fallback``: see
    :func:`model_spec`; ``name``: this catalog model (installed) instead of the config's, with its settings."""
    from appliance.llm import models

    llm = config.llm
    path = model_path(config, fallback=fallback) if name is None else models.resolve_model(name, models_dir(config))
    return RunnerModel(
        model_runner(config),
        path,
        context_tokens=llm.context_tokens,
        threads=llm.threads,
        batch_threads=llm.batch_threads,
        batch_size=llm.batch_size,
        seed=llm.seed,
        timeout_s=llm.timeout_s,
        memory_margin_mb=llm.memory_margin_mb,
        extra_stop=llm.stop,
        name=name or model_spec(config, fallback=fallback),
        prompt_cache_mb=llm.prompt_cache_mb,
        state_dir=data_dir(config) / "prompt-state" if llm.prompt_state else None,
        state_disk_mb=llm.prompt_state_mb,
        kv_type=llm.kv_type,
        ubatch_size=None if llm.ubatch_size == "auto" else int(llm.ubatch_size),
    )


def base_registry(config: Config) -> ToolRegistry:
    """The built-in and workspace tools, with the config's limits, redaction and plugins."""
    from appliance.plugins import load_plugins
    from appliance.tools.registry import Redactor

    tools = config.tools
    registry = ToolRegistry(
        redact=Redactor(config.secret_values),
        max_output_chars=tools.max_output_chars,
        cache_s=tools.cache_s,
        per_turn=tools.per_turn,
    )
    builtin.register(registry)
    register_configured(registry, config, tools)
    load_plugins(registry.hooks, tools.plugins, data_dir(config) / "plugins")
    return registry


CONFIGURED_TOOLS = ("shell", "web_fetch", "web_search", "read_file", "write_file", "edit_file", "list_dir")


def register_configured(registry: ToolRegistry, config: Config, tools: ToolsConfig) -> None:
    """The tools built from ``tools`` settings (:data:`CONFIGURED_TOOLS`: workspace files, shell, web fetch and
    search), at start and again at a reload (appliance/reload.py), so the two cannot drift apart."""
    workspace_root = data_dir(config) / "workspace"
    workspace_tools.register(registry, workspace_root, tools.workspace_max_mb)
    shell.register(registry, tools.shell, workspace_root, config.agent.tool_timeout_s, tools.workspace_max_mb)
    web_fetch.register(registry, tools.web_fetch)
    web_search.register(registry, tools.web_search)


def tool_registry(
    config: Config,
    devices: DeviceAccess | None = None,
    raw: RawBusPolicy | None = None,
    memory: MemoryStore | None = None,
    workspace: Workspace | None = None,
    weather: WeatherSource | None = None,
    *,
    skill_uses: SkillUses | None = None,
) -> ToolRegistry:
    """The tools the model may call: the built-ins, memory, skills (each use counted in ``skill_uses``), the
    device tools when there are devices, and the weather when a forecast source is configured."""
    registry = base_registry(config)
    if weather is not None:
        from appliance.weather import tool as weather_tool

        weather_tool.register(registry, weather)
    if workspace is not None:
        skills.sync_tool(registry, workspace, skill_uses)
    if memory is not None:
        from appliance.tools import memory as memory_tools

        memory_tools.register(registry, memory)
    if devices is not None:
        from appliance.tools import hardware

        hardware.register(registry, devices, raw)
    return registry


def forecast_source(config: Config) -> WeatherSource | None:
    """The forecast source (one per process: its cache is shared by the weather tool and the grounded answers);
    None when weather.enabled is off or there is no place."""
    from appliance.schedule.parse import resolve_zone
    from appliance.weather.source import weather_source

    return weather_source(config, resolve_zone(config.scheduler.timezone))


def memory_store(config: Config, db: Database, model: ServedModel, *, vector_cache: bool = True) -> MemoryStore:
    """Long-term memory: vectors from the local embedder (keyword-only when there is none)."""
    from appliance.llm.embeddings import embedder_for

    worker = model if isinstance(model, RunnerModel) else None
    embedder = embedder_for(config, worker, models_dir(config), model_runner(config) if worker is not None else None)
    store = MemoryStore(
        db,
        embedder.embed if embedder is not None else None,
        model_name=embedder.name if embedder is not None else "none",
        dimensions=embedder.dimensions if embedder is not None else 0,
        vector_cache=vector_cache,
        embed_query=embedder.embed_query if embedder is not None else None,
        embedder=embedder,  # closed with the runtime
    )
    return store


def understanding(memory: MemoryStore) -> LocalEmbedder | RunnerEmbedder | None:
    """The small embedding model behind memory, when it is one: device requests by meaning and tool
    ranking use it too. None with the chat model's own embeddings (76 ms a message: too slow for that)."""
    embedder = getattr(memory, "embedder", None)
    if embedder is None or embedder.worker is not None:
        return None
    return embedder


def approval_store(config: Config, db: Database) -> ApprovalStore:
    """The pending approvals (device writes and tool calls), with the configured expiry."""
    from appliance.hardware.approvals import ApprovalStore

    return ApprovalStore(db, timeout_s=config.hardware.approval_timeout_s)


def remote_links(config: Config) -> dict[str, Any]:
    """The links to the services devices live in, by interface, for what the config enables (nothing is
    imported for a section that is off): ``homeassistant`` -> the Home Assistant client, ``mqtt`` -> the
    MQTT link (the one connection to the broker: its devices' and the MQTT bridge's). Not yet started:
    the daemon starts them (a command with no daemon uses their blocking calls only; an unstarted MQTT
    link has no state to read and refuses writes, so `devices list` needs no broker)."""
    links: dict[str, Any] = {}
    if config.homeassistant.enabled:
        from appliance.hardware.remote.hass import HomeAssistantClient

        links["homeassistant"] = HomeAssistantClient(config.homeassistant)
    if config.mqtt.enabled:
        from appliance.hardware.drivers.mqtt import BrokerLink
        from appliance.hardware.remote.mqtt import MqttLink

        link: BrokerLink = MqttLink(config.mqtt)  # typed so that mypy holds the link to what its devices use
        links["mqtt"] = link
    return links


def device_registry(
    config: Config, db: Database, approvals: ApprovalStore | None = None, links: dict[str, Any] | None = None
) -> tuple[DeviceRegistry | None, RawBusPolicy | None]:
    """The named devices on the configured backend (None when nothing is configured).

    ``links``: the services devices live in (the daemon's, which it starts and stops); None: made here
    from the config (:func:`remote_links`), so a command with no daemon reaches them too.
    """
    if not config.devices and not config.hardware.raw_access.enabled:
        return None, None
    return open_registry(config, db, approvals, links)


def open_registry(
    config: Config, db: Database, approvals: ApprovalStore | None = None, links: dict[str, Any] | None = None
) -> tuple[DeviceRegistry, RawBusPolicy]:
    """The device registry on the configured backend, even with no devices (a daemon started with none opens
    it at the reload that adds the first: appliance/reload_devices.py); see :func:`device_registry`."""
    from appliance.hardware.backends import make_backend
    from appliance.hardware.devices import DeviceRegistry
    from appliance.hardware.events import record_write
    from appliance.hardware.policy import RawBusPolicy

    links = remote_links(config) if links is None else links
    backend = make_backend(config.hardware, data_dir(config) / "simulated-devices.json", links)
    devices = DeviceRegistry(config, backend, approvals or approval_store(config, db))
    # Every write lands in the events table, whichever process made it (the daemon, or `devices set`
    # with no daemon running), so "when did the fan go on?" has one answer.
    devices.write_listeners.append(lambda name, value, by, _state: record_write(db, name, value, by))
    return devices, RawBusPolicy(config.hardware.raw_access, lambda: backend)


class LazyDevices:
    """The device registry, opened on first use: listing tools must not claim the GPIO lines."""

    def __init__(self, config: Config, db: Database) -> None:
        self.config = config
        self.db = db
        self._devices: DeviceRegistry | None = None
        self._raw: RawBusPolicy | None = None

    def open(self) -> DeviceRegistry:
        """The registry (opening the backend and the devices the first time)."""
        if self._devices is None:
            self._devices, self._raw = device_registry(self.config, self.db)
            if self._devices is None:
                from appliance.errors import UnknownDeviceError

                raise UnknownDeviceError("no devices are configured", fix="declare them under devices: in the config")
        return self._devices

    def raw_policy(self) -> RawBusPolicy:
        """The raw bus policy on the same backend (opened lazily)."""
        from appliance.hardware.policy import RawBusPolicy

        return RawBusPolicy(self.config.hardware.raw_access, lambda: self.open().backend)

    def describe(self) -> list[dict[str, Any]]:
        """Every device's configuration."""
        return self.open().describe()

    async def read(self, name: str) -> list[Reading]:
        """Read a device."""
        return await self.open().read(name)

    def outside(self, name: str) -> str:
        """What the device's readings are when other people's software writes them ("" on the Pi)."""
        return self.open().outside(name)

    async def set(self, name: str, value: Any, *, requested_by: str, approval: str = "") -> SetResult:
        """Set a device (``approval``: why a person must approve it, see DeviceRegistry.set_sync)."""
        return await self.open().set(name, value, requested_by=requested_by, approval=approval)

    def close(self) -> None:
        """Release the devices if they were opened."""
        if self._devices is not None:
            self._devices.close()


def mcp_clients(config: Config, registry: ToolRegistry, cwd: Path | None = None) -> McpClients | None:
    """The enabled tools.mcp servers, not started yet, adding their tools to ``registry`` (None: none)."""
    if not any(server.enabled for server in config.tools.mcp.values()):
        return None
    from appliance.mcp.client import McpClients

    return McpClients.from_config(config, registry, cwd=cwd)


def cli_tool_registry(config: Config, db: Database) -> tuple[ToolRegistry, LazyDevices]:
    """The tools as the `tools` command sees them; devices open only when a device tool runs."""
    lazy = LazyDevices(config, db)
    registry = base_registry(config)
    weather = forecast_source(config)
    if weather is not None:
        from appliance.weather import tool as weather_tool

        weather_tool.register(registry, weather)
    skills.sync_tool(registry, Workspace(data_dir(config) / "workspace"), SkillUses(db))
    if config.devices or config.hardware.raw_access.enabled:
        from appliance.tools import hardware

        hardware.register(registry, lazy, lazy.raw_policy())
    return registry, lazy


@dataclass
class Runtime:
    """Everything one turn needs, owned together and closed together."""

    config: Config
    db: Database
    model: ServedModel
    model_queue: FairScheduler  # the model, shared fairly between clients (not the cron scheduler)
    tools: ToolRegistry
    workspace: Workspace
    agent: Agent
    owns_model: bool = True
    devices: DeviceRegistry | None = None
    memory: MemoryStore | None = None
    cloud: CloudRoute | None = None  # where messages escalate to (its provider is None when there is none)
    mcp: McpClients | None = None  # the tools.mcp servers (started by whoever runs turns: start_mcp)
    approvals: ToolApprovals | None = None  # every pending approval, decided here (tools.require_approval)
    weather: WeatherSource | None = None  # the forecast (weather.enabled with a place): the tool's and Facts.weather

    @classmethod
    def open(
        cls,
        config: Config,
        *,
        model: ServedModel | None = None,
        fallback: bool = False,
        links: dict[str, Any] | None = None,
        start_model: bool = False,
        cron: Callable[[], CronDesk | None] = lambda: None,
        tasks: Callable[[], TaskStore | None] = lambda: None,
        notify: Callable[[str, str], object] | None = None,
    ) -> Runtime:
        """Open the database and workspace and prepare (not yet load) the model.

        ``model``: share an existing worker instead (tests share one loaded model); it is not closed.
        ``fallback``: run the packaged model while the wanted one is not installed (see :func:`model_spec`).
        ``links``: the services devices live in, set on the backend before the devices are built (the
        daemon's, see :func:`remote_links`); None: made here from the config. ``start_model``: start loading
        the model in its runner now (the daemon with llm.preload, `picoagent chat`).

        ``cron``, ``tasks``, ``notify``: late-bound, because each is built after the runtime out of its parts
        (the cron scheduler runs its jobs on this agent; the notifier's channels answer with this runtime):
        the agent's "remind me at 7" and "what reminders do I have?" read the scheduler and the task store
        through them when a message comes, and an approved tool call's result goes to the owner through
        ``notify``. Their owner (the daemon, `picoagent chat`) holds what they return; None until it is built.
        """
        root = data_dir(config)
        workspace = Workspace(root / "workspace")
        for created in workspace.ensure(config.agent.name):
            log.info("created %s", created)
        owns_model = model is None
        model = model or local_model(config, fallback=fallback)
        if start_model and isinstance(model, RunnerModel):
            model.start_loading()  # the runner starts and loads while the rest is opened here
        model_queue = FairScheduler(model)
        db = Database(root / "picoagent.db")
        store = approval_store(config, db)
        try:
            devices, raw = device_registry(config, db, store, links)
        except Exception:
            db.close()
            raise
        try:
            memory = memory_store(config, db, model)
        except Exception:
            if devices is not None:
                devices.close()
            db.close()
            raise
        embedder = getattr(memory, "embedder", None)
        if start_model and embedder is not None and hasattr(embedder, "start_loading"):
            embedder.start_loading()  # in the runner, beside the chat model
        weather = forecast_source(config)
        tools = tool_registry(config, devices, raw, memory, workspace, weather, skill_uses=SkillUses(db))
        keeper = MemoryKeeper(config.memory, memory, db, model_queue, context_tokens=config.llm.context_tokens)
        cloud = CloudRoute(config, db)
        agent = Agent(
            config,
            model_queue,
            db,
            tools,
            workspace,
            devices,
            keeper,
            cloud,
            understanding=understanding(memory),
            cron=cron,
            tasks=tasks,
            weather=weather,  # "is it going to rain tomorrow" from the same forecast as the tool
        )
        mcp = mcp_clients(config, tools, workspace.root)
        approvals = ToolApprovals(
            store,
            tools,
            config.tools.require_approval,
            devices=devices,
            timeout_s=config.agent.tool_timeout_s,
            notify=notify,
        )
        return cls(
            config,
            db,
            model,
            model_queue,
            tools,
            workspace,
            agent,
            owns_model,
            devices,
            memory,
            cloud,
            mcp,
            approvals,
            weather,
        )

    def reload_skills(self, catalog: SkillCatalog | None = None) -> SkillCatalog:
        """Read workspace/skills again (SIGHUP), or take ``catalog`` read already (a skill installed or removed):
        the next turn's prompt lists the new set, and load_skill is offered while there is one."""
        catalog = self.workspace.reload_skills(catalog)
        skills.sync_tool(self.tools, self.workspace, SkillUses(self.db))
        return catalog

    def use_forecast(self, config: Config) -> None:
        """The forecast source made again from ``config`` (SIGHUP: a new place, weather.enabled, the time zone)
        and handed to the weather tool (offered only while there is a source) and the grounded answers."""
        self.weather = forecast_source(config)
        self.tools.remove("weather")
        if self.weather is not None:
            from appliance.weather import tool as weather_tool

            weather_tool.register(self.tools, self.weather)
        self.agent.grounding.use_weather(self.weather)

    def use_model(self, model: ServedModel) -> ServedModel:
        """Serve ``model`` from now (behind the same fair queue, which the agent and the memory keeper hold);
        returns the one it replaces, for its owner to close once its current generation is done."""
        previous, self.model = self.model, model
        self.model_queue.serve(model)
        return previous

    def use_cloud(self, cloud: CloudRoute) -> CloudRoute | None:
        """Escalate to ``cloud`` from now (SIGHUP changed providers or routing); returns the previous route,
        for its owner to close on the event loop."""
        previous, self.cloud = self.cloud, cloud
        self.agent.use_cloud(cloud)
        return previous

    async def start_mcp(self) -> None:
        """Start the MCP servers (each failure is logged and kept in ``mcp.problems``, never raised)."""
        if self.mcp is not None:
            await self.mcp.start()

    async def replace_mcp(self) -> None:
        """Stop the running MCP servers and forget their tools; the config's servers, not started yet, from now
        (a reload changed ``tools.mcp``: its owner starts them)."""
        if self.mcp is not None:
            await self.mcp.stop()
            for server in list(self.mcp.servers):
                for name in self.mcp.tool_names(server):
                    self.tools.remove(name)
        self.mcp = mcp_clients(self.config, self.tools, self.workspace.root)

    async def stop_mcp(self) -> None:
        """Stop the MCP servers (on the event loop that started them)."""
        if self.mcp is not None:
            await self.mcp.stop()

    async def close_cloud(self) -> None:
        """Close the cloud provider's HTTP session (on the event loop that used it)."""
        if self.cloud is not None:
            await self.cloud.close()

    def close(self) -> None:
        """Stop the model worker (when this runtime made it) and close the database."""
        embedder = getattr(self.memory, "embedder", None)
        if embedder is not None:
            embedder.close()  # before the model: it runs on the model's worker thread
        if self.owns_model:
            self.model.close()
        if self.devices is not None:
            self.devices.close()
        self.db.close()
