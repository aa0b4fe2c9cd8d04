"""`picoagent serve`: the composition root. Builds every service and owns their one lifecycle.

One daemon per data dir: before anything there is touched, it takes the data dir's lock (daemon_lock.py);
a second daemon on it exits 2 naming the first (its pid and where it serves) and changes nothing.
The services, started in this order by :class:`appliance.lifecycle.Services` and stopped in reverse: the
runtime (database, model worker, agent, devices; see runtime.py), the links to the services devices live
in (Home Assistant's client, the MQTT link: made before the devices, which use them), background chores
(the model loading, MCP servers: a slow or broken one never holds up or stops the daemon), the web site
(channels/web/server.py: with ``web.tls: auto`` HTTPS with the data dir's certificate, renewed once a
day), the temperature sampler, the systemd watchdog, threshold watching, the outbox, every enabled chat
channel (channels/registry.py) and the notifier that picks one for proactive messages (notify.py), with
``mqtt.enabled`` Home Assistant discovery over the MQTT link (mqtt/bridge.py; imported only then), the
task runner, the cron scheduler and heartbeat, memory sweeps. Each is built with what it needs, in that order,
and the web site's parts (channels/web/state.py) from them; nothing is assigned into a part afterwards
(tests/test_wiring.py): where a cycle is real (the agent reads the cron scheduler, whose jobs are the agent's
turns; an approved tool call tells the owner through the notifier, whose channels use the runtime) the earlier
part gets a callable reading this daemon's own field. Then ``READY=1`` to systemd and
:attr:`Daemon.ready` set (tests wait on it). SIGTERM/SIGINT: stop taking requests, let turns in flight
finish (briefly), cancel the rest and the memory keeper's background work, close the model and the database,
exit 0; a service that fails to start stops those already started. SIGHUP: re-read the config; an invalid
one is refused, with the reason logged, and the running config stays; a valid one applies key by key, and
each key that waits for a restart is named in the log and /api/status (appliance/reload.py). SIGHUP also
re-reads the workspace's skills and retries the MCP servers that are down.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from appliance.channels.web.server import DaemonInfo as DaemonInfo  # where `picoagent status` finds us
from appliance.config import Config, exposed_secrets, load_config
from appliance.config.schema import changed_keys
from appliance.errors import ConfigError, PicoagentError
from appliance.lifecycle import Chores, Loop, RuntimeService, Service, Services, release_free_memory, sd_notify
from appliance.llm.choice import downloads_models
from appliance.llm.footprint import keep_big_blocks_returnable
from appliance.reload import Reload, Reloader
from appliance.runtime import Runtime, local_model, remote_links

if TYPE_CHECKING:
    from appliance.channels.base import ChatChannel
    from appliance.channels.registry import ChannelSet
    from appliance.channels.web.server import WebServer
    from appliance.channels.web.state import Automation, DeviceView, Monitor, WebState
    from appliance.hardware.events import ThresholdWatcher
    from appliance.llm.runner_models import RunnerModel
    from appliance.model_fetch import ModelFetch
    from appliance.mqtt.bridge import MqttBridge
    from appliance.notify import Notifier
    from appliance.outbox import Outbox
    from appliance.schedule.heartbeat import Heartbeat
    from appliance.schedule.scheduler import Scheduler
    from appliance.tasks import TaskRunner, TaskStore

log = logging.getLogger(__name__)

TASK_POLL_S = 5.0  # a task added by another process (the CLI) starts within this
TEMPERATURE_EVERY_S = 30.0


def assistant_sensors(monitor: Monitor) -> dict[str, Any]:
    """The assistant's own sensors in Home Assistant: decode speed, CPU temperature, queue depth, last route."""
    return {
        "decode_tps": monitor.recent_tps(),
        "cpu_temperature": monitor.last_temperature,
        "queue_depth": monitor.queue_depth(),
        "last_route": monitor.recent[0]["route"] if monitor.recent else None,
    }


class Daemon:
    """The long-running appliance process."""

    def __init__(
        self, config: Config, *, host: str | None = None, port: int | None = None, data_dir_override: str | None = None
    ) -> None:
        self.config = config
        self.host = host or config.web.host
        self.port = port if port is not None else config.web.port
        # what the command line set over the config: a reload that changes these keys changes nothing, even at
        # a restart with the same flags, so it says so rather than "restart needed"
        self.flags = {
            key: f"{flag} {value}"
            for key, flag, value in (("web.host", "--host", host), ("web.port", "--port", port))
            if value is not None
        }
        self.data_dir_override = data_dir_override
        self.stopping = asyncio.Event()
        self.ready = asyncio.Event()  # set once every service has started and systemd was told READY=1
        self.started_config = copy.deepcopy(config)  # what the restart-only parts run (appliance/reload.py)
        self.reloaded = Reload(time.time(), str(config.source or ""), [])
        self.services = Services()
        self.chores = Chores()
        self._runtime: Runtime | None = None
        self.state: WebState | None = None  # what the web routes use, in parts (channels/web/state.py)
        self.web: WebServer | None = None
        self.outbox: Outbox | None = None
        self.notifier: Notifier | None = None
        self.channels: ChannelSet | None = None
        self.task_store: TaskStore | None = None
        self.task_runner: TaskRunner | None = None
        self.cron: Scheduler | None = None
        self.heartbeat: Heartbeat | None = None
        self.model_fetch: ModelFetch | None = None  # the wanted model's background pull (llm.model: auto)
        self.mqtt: MqttBridge | None = None  # with mqtt.enabled: the broker link and Home Assistant discovery
        self.links: dict[str, Any] = {}  # the services devices live in, by name (runtime.remote_links)

    @property
    def reloader(self) -> Reloader:
        """What applies a new config to this daemon (SIGHUP)."""
        return Reloader(self, self.started_config)

    @property
    def runtime(self) -> Runtime:
        """The runtime the daemon runs (once :meth:`run` has begun)."""
        assert self._runtime is not None, "the daemon has not started"
        return self._runtime

    async def run(self) -> int:
        """Serve until SIGTERM or SIGINT; returns the exit status. One daemon per data dir (daemon_lock.py):
        a second is refused before it touches anything (the CLI token, daemon.json, the database)."""
        from appliance.config import data_dir
        from appliance.daemon_lock import DataDirLock

        lock = DataDirLock(data_dir(self.config))
        lock.acquire()
        try:
            return await self._serve()
        finally:
            lock.release()  # after every service stopped (and daemon.json is gone)

    async def _serve(self) -> int:
        loop = asyncio.get_running_loop()
        if (exposed := exposed_secrets(self.config.secrets_path)) is not None:
            log.warning("%s: chmod 600 %s", exposed, self.config.secrets_path)
        keep_big_blocks_returnable()  # before any model is loaded
        # The services devices live in (Home Assistant, the MQTT link), made before the devices that use them;
        # started below.
        self.links = remote_links(self.config)
        # The cron scheduler, the task store and the notifier are built after the runtime out of its parts (the
        # scheduler's jobs are the agent's turns; the notifier's channels answer with this runtime), yet the
        # agent and the tool approvals use them: they get them late-bound, through this daemon's own fields.
        self._runtime = runtime = Runtime.open(  # the packaged model meanwhile (llm.model: auto)
            self.config,
            fallback=True,
            links=self.links,
            start_model=self.config.llm.preload,
            cron=lambda: self.cron,
            tasks=lambda: self.task_store,
            notify=self._notify,  # an approved tool call's result goes to the owner
        )
        self._watch_runner(runtime, loop)
        await self.services.start(self._services(runtime))
        state = self.state
        assert state is not None and self.web is not None
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        loop.add_signal_handler(signal.SIGHUP, self.reload)
        sd_notify(f"READY=1\nSTATUS=serving on {self.host}:{self.web.port}")
        self.ready.set()
        release_free_memory()  # what starting up left free goes back to the system: a Pi Zero has 512 MB

        await self.stopping.wait()
        sd_notify("STOPPING=1\nSTATUS=stopping")
        log.warning("stopping: finishing %d turn(s) in flight", len(state.streams.turns))
        await self.services.stop()
        log.warning("stopped")
        return 0

    def _services(self, runtime: Runtime) -> list[Service]:
        """Every part built, each with what it needs, in order; then every service, in start order (they stop
        in reverse)."""
        from appliance.channels.web.state import Monitor

        monitor = Monitor(runtime)  # before the MQTT bridge, whose assistant sensors read it
        devices, watcher = self._watch_devices(runtime)
        channel_services = self._channel_services(runtime)
        bridge = self._mqtt(runtime, monitor) if self.config.mqtt.enabled else None  # else nothing MQTT imported
        task_services = self._task_services(runtime)
        schedule_services, automation = self._schedule_services(runtime)
        fetch = self._model_fetch(runtime) if downloads_models(self.config) else None  # else not even imported
        web = self._web(runtime, monitor, devices, automation, bridge)
        # The links right after the runtime: they stop before it closes the devices that use them.
        services: list[Service] = [RuntimeService(runtime), *self.links.values(), self.chores, web]
        services.append(Loop("temperature", self._sample_temperature))
        watchdog_us = int(os.environ.get("WATCHDOG_USEC", "0") or 0)
        if watchdog_us > 0:
            services.append(Loop("watchdog", lambda: self._watchdog(watchdog_us / 2e6)))
        services.append(Loop("certificate renewal", web.renew_certificate))  # with web.tls: auto; a day first
        if watcher is not None:
            services.append(Loop("threshold watching", watcher.run))
        services += channel_services
        if bridge is not None:
            services.append(bridge)
        services += task_services
        services += schedule_services
        if runtime.agent.memory is not None:
            services.append(Loop("memory sweeps", runtime.agent.memory.run_sweeps))
        if self.config.llm.preload:
            self.chores.spawn(self._preload())
        if fetch is not None:
            services.append(fetch)
        self.chores.spawn(self._start_mcp())
        memory = runtime.memory
        if memory is not None and memory.needs_reembed():
            # A new embedding model: memories are re-embedded in the background; search uses keywords meanwhile.
            log.warning("memory: re-embedding with %s in the background", memory.model_name)
            self.chores.spawn(asyncio.to_thread(memory.reembed))
        return services

    def _watch_runner(self, runtime: Runtime, loop: asyncio.AbstractEventLoop) -> None:
        """The model runner's crashes go to the log, systemd's status and the owner; after a restart the
        model is loaded and its prompt prefix warmed again (appliance/llm/runner_client.py)."""
        runner = getattr(runtime.model, "runner", None)
        if runner is None:
            return

        def crashed(sentence: str) -> None:
            sd_notify(f"STATUS={sentence}")
            if self.notifier is not None:
                self.notifier.notify(sentence, "alert")

        def restarted() -> None:
            if self.config.llm.preload and not self.stopping.is_set():
                self.chores.spawn(self._preload())

        runner.listeners.append(lambda sentence: loop.call_soon_threadsafe(crashed, sentence))
        runner.restarted.append(lambda: loop.call_soon_threadsafe(restarted))

    def _web(
        self,
        runtime: Runtime,
        monitor: Monitor,
        devices: DeviceView,
        automation: Automation,
        bridge: MqttBridge | None,
    ) -> WebServer:
        """The web site and what its routes use (channels/web/state.py), built from the parts made before it."""
        from appliance.channels.web.auth import Auth
        from appliance.channels.web.server import WebServer
        from appliance.channels.web.state import Settings, StatusSources, WebState
        from appliance.config import data_dir

        web_cfg = self.config.web
        auth = Auth(runtime.db, session_ttl_s=web_cfg.session_days * 86400, secure_cookies=web_cfg.secure_cookies)
        sources = StatusSources(
            mqtt=bridge,
            homeassistant=self.links.get("homeassistant"),
            model_fetch=lambda: self.model_fetch,  # also made at a reload that turns llm.model: auto on
            reloaded=lambda: self.reloaded.as_dict(),
            serving=lambda: self.web.serving() if self.web is not None else {},  # the site below, once listening
        )
        self.state = state = WebState(
            runtime,
            auth,
            monitor=monitor,
            automation=automation,
            devices=devices,
            channels=self.channels,
            sources=sources,
            settings=Settings(reload=self.reload_now),
        )
        self.web = WebServer(self.config, state, data_dir(self.config), self.host, self.port)
        return self.web

    def _notify(self, text: str, kind: str) -> None:
        """Tell the owner through the notifier (nothing before it is built: see _serve)."""
        if self.notifier is not None:
            self.notifier.notify(text, kind)

    def _model_fetch(self, runtime: Runtime) -> Service:
        """The background pull of the wanted model and the switch to it (appliance/model_fetch.py)."""
        from appliance.llm.choice import models_dir, wanted_model
        from appliance.model_fetch import ModelFetch

        self.model_fetch = ModelFetch(
            models_dir(self.config),
            lambda: wanted_model(self.config),
            lambda: self.runtime.model.name,
            self._switch_to_installed,
        )
        return Loop("model fetch", self.model_fetch.run)

    async def _switch_to_installed(self, name: str) -> None:
        """Serve the installed catalog model ``name``, loaded, and record it like `picoagent models use`.

        Should it not load (memory, a damaged file), the packaged model serves again and the error is raised.
        """
        from appliance.llm import models
        from appliance.llm.choice import models_dir

        replacement = local_model(self.config, name=name)
        await asyncio.shield(self.switch_model(replacement, f"{name} is downloaded and verified"))
        try:
            await replacement.load()
        except PicoagentError:
            if self.runtime.model is replacement:
                self.switch_model(local_model(self.config, name=models.default_model_name()), f"{name} did not load")
            raise
        await asyncio.to_thread(models.select_model, name, models_dir(self.config))

    def switch_model(self, model: RunnerModel, reason: str) -> asyncio.Future[None]:
        """Serve ``model`` from now on: the next turn uses it, the web face and open websockets stay up.

        The replaced model finishes the job it is running, then closes (off the event loop; the returned
        future is done when it has); the new one is readied by :meth:`_preload` (with llm.preload) once the
        old one is closed, so that a 1 GB board never holds both. SIGHUP and the background pull switch here.
        """
        previous = self.runtime.use_model(model)
        closed = asyncio.get_running_loop().run_in_executor(None, previous.close)  # after its current job
        if model.name == previous.name:  # the same model again (a reload): "X now serves instead of X" read oddly
            log.warning("model: %s loaded again (%s)", model.name, reason)
        else:
            log.warning("model: %s now serves instead of %s (%s)", model.name, previous.name, reason)
        if self.config.llm.preload:
            self.chores.spawn(self._preload_after(closed))
        return closed

    async def _preload_after(self, closed: asyncio.Future[None]) -> None:
        await asyncio.shield(closed)  # a stop cancels this chore, not the close
        await self._preload()

    def _channel_services(self, runtime: Runtime) -> list[Service]:
        """The outbox, every enabled chat channel, and the notifier that picks one for proactive messages.

        A channel that cannot be built (its library missing) is reported and left off; its start never
        raises for a bad token or no network (see its ``problem``).
        """
        from appliance.channels.registry import ChannelSet, build, enabled_names
        from appliance.notify import Notifier
        from appliance.outbox import Outbox

        config = self.config
        self.outbox = Outbox(runtime.db)
        running: dict[str, ChatChannel] = {}
        for name in enabled_names(config):
            try:
                running[name] = build(name, config, runtime, self.outbox)
            except ImportError as exc:
                log.error("%s: the channel cannot run: %s (reinstall picoagent)", name, exc)
        self.channels = channels = ChannelSet(config, running)
        services: list[Service] = list(running.values())
        self.notifier = notifier = Notifier(
            self.outbox,
            channels.channels,
            lambda: list(config.notify.owner) or enabled_names(config),
            fallback_after_s=lambda: config.notify.fallback_after_s,
            feed_keep=lambda: config.notify.feed_keep,
        )
        services.append(Loop("notification fallback", notifier.run))
        if config.tools.message_per_hour:  # only where a notifier is: the model never sees a tool that cannot work
            from appliance.tools import message

            message.register(runtime.tools, notifier.notify, runtime.db, config.tools.message_per_hour)
        if channels.channels:
            from appliance.channels.pairing import prune_inbound_daily

            services.append(Loop("message id pruning", lambda: prune_inbound_daily(runtime.db)))
        return services

    def _mqtt(self, runtime: Runtime, monitor: Monitor) -> MqttBridge:
        """The MQTT link with Home Assistant discovery (appliance/mqtt/bridge.py): started after the devices
        (the runtime), stopped before them; its notify topic is a chat channel of its own."""
        from appliance.mqtt.bridge import MqttBridge
        from appliance.mqtt.chat import MqttChat

        assert self.outbox is not None
        config = self.config.mqtt
        link = self.links["mqtt"]  # the one connection, made before the devices (runtime.remote_links)
        self.mqtt = bridge = MqttBridge(
            config,
            runtime.devices,
            assistant_name=self.config.agent.name,
            assistant_state=lambda: assistant_sensors(monitor),
            link=link,
            chat=MqttChat(config, runtime, self.outbox, link),
        )
        runtime.agent.listeners.append(bridge.on_turn)
        return bridge

    def _watch_devices(self, runtime: Runtime) -> tuple[DeviceView, ThresholdWatcher | None]:
        """What the device routes keep: the event bus for inputs and thresholds (stored, and told to the owner);
        the threshold watcher."""
        from appliance.channels.web.state import DeviceView
        from appliance.hardware.events import EventBus, ThresholdWatcher

        events = EventBus(runtime.db)  # also with no devices: the reload that adds the first hooks it (reload_devices)
        events.subscribe(self._notify_event)
        if runtime.devices is None:
            return DeviceView(events), None
        runtime.devices.listeners.append(events.input_listener)
        watcher = ThresholdWatcher(self.config.events, runtime.devices.read, events) if self.config.events else None
        return DeviceView(events), watcher

    def _task_services(self, runtime: Runtime) -> list[Service]:
        """The persistent task runner, after putting back the tasks a crash left running."""
        from appliance.tasks import Step, Task, TaskRunner, TaskStore, make_agent_step, spawn

        assert self.notifier is not None
        self.task_store = TaskStore(runtime.db, settings=self.config.tasks)
        recovered = self.task_store.recover()  # tasks left running by a crash go back to pending, with their steps
        if recovered:
            log.warning("resuming %d task(s) left running: %s", len(recovered), recovered)
        store = self.task_store
        reflector: list[Callable[[Task, list[Step]], Awaitable[None]]] = []

        async def reflect(task: Task, steps: list[Step]) -> None:
            """After a task ends: lessons into workspace/LEARNINGS.md and memory, maybe a proposed skill.
            Imported at the first ended task: the idle daemon never needs it."""
            if not reflector:
                from appliance.agent.reflection import make_reflector

                reflector.append(
                    make_reflector(runtime.agent, runtime.workspace.root, memory=runtime.memory, tasks=store)
                )
            await reflector[0](task, steps)

        self.task_runner = runner = TaskRunner(
            self.task_store, make_agent_step(runtime.agent), self.notifier.notify, on_end=reflect
        )
        spawn.register(runtime.tools, runner)  # subtasks, worked inline by this runner inside their parent's step
        return [Loop("task runner", lambda: runner.run_forever(poll_s=TASK_POLL_S))]

    def _schedule_services(self, runtime: Runtime) -> tuple[list[Service], Automation]:
        """Cron jobs (config, workspace/cron.yaml, made in chat) with the model's tools for them, and the heartbeat;
        with the task store and runner, what /api/cron and /api/tasks use."""
        from appliance.channels.web.state import Automation
        from appliance.config import load_jobs
        from appliance.schedule.heartbeat import Heartbeat, device_readings
        from appliance.schedule.jobs import make_job_runner, task_queued
        from appliance.schedule.scheduler import Scheduler
        from appliance.tasks.capable import can_work
        from appliance.tools import scheduling

        assert self.notifier is not None and self.task_store is not None and self.task_runner is not None
        sched = self.config.scheduler
        store, runner = self.task_store, self.task_runner

        async def start_task(goal: str) -> str:
            task = await runtime.db.call(store.add, goal)
            runner.wake()
            return task_queued(task.id, task.goal)

        try:
            jobs = load_jobs(sched.jobs, runtime.workspace.root, self.config.devices)
        except ConfigError as exc:
            # A typo in workspace/cron.yaml must not keep the appliance off the network: run the config's jobs.
            log.error("cron jobs: %s; running the config's jobs only", exc.for_people())
            jobs = list(sched.jobs)
        self.cron = cron = Scheduler(
            jobs,
            tz=sched.timezone,
            run_job=make_job_runner(runtime.agent, lambda: runtime.devices, start_task),  # a reload may add them
            notify=self.notifier.notify,
            db=runtime.db,
            file_ids={job.id for job in jobs[len(sched.jobs) :]},
            devices=list(self.config.devices),
            place=self.config.weather.coordinates,
        )
        # The model schedules and starts tasks through this scheduler and task store (every channel's turns); the
        # agent's "remind me at 7" and "what reminders do I have?" reach them through Runtime.open's cron and tasks.
        scheduling.register(runtime.tools, cron, store, runner.wake, can_work=lambda: can_work(runtime))
        if self.channels is not None:
            self.channels.attach_automation(cron, store, runner.wake)  # /tasks and /schedule in the chats
        services: list[Service] = [Loop("cron", cron.run)]
        if sched.heartbeat_minutes:
            self.heartbeat = heartbeat = Heartbeat(
                runtime.workspace.root / "HEARTBEAT.md",
                runtime.model_queue,  # the local model behind the fair queue; never a cloud model
                self.notifier.notify,
                readings=lambda: device_readings(runtime.devices),  # the devices now (a reload adds some)
                every_minutes=sched.heartbeat_minutes,
                tz=sched.timezone,
            )
            services.append(Loop("heartbeat", heartbeat.run))
        return services, Automation(cron, store, runner)

    def _notify_event(self, event: Any) -> None:
        """Tell the owner of thresholds, presses and motion (releases and "still" are only stored)."""
        if event.kind == "threshold" or event.data.get("event") in ("pressed", "motion"):
            assert self.notifier is not None
            self.notifier.notify(event.message, "event")

    @property
    def _port(self) -> int:
        return self.web.port if self.web is not None else self.port

    async def _preload(self) -> None:
        sd_notify("STATUS=loading the model")
        try:
            await self.runtime.model.load()
        except PicoagentError as exc:
            log.error("the model did not load: %s", exc.for_people())
            sd_notify(f"STATUS=model failed to load: {exc.message}")
        else:
            sd_notify(f"STATUS=serving on {self.host}:{self._port}, model {self.runtime.model.name} loaded")
            await self._warm_prefix()
        await self.runtime.agent.prepare_understanding()  # the embedding model: ~0.3 s

    async def _start_mcp(self) -> None:
        """Start the MCP servers; their tools join the system prompt, so its kept prefix is warmed again."""
        await self.runtime.start_mcp()
        if self.runtime.mcp is not None:
            await self._warm_prefix()

    async def _warm_prefix(self) -> None:
        """Put the system prompt's saved state into the loaded model (or read and save it): see prompt_state.py."""
        model = self.runtime.model
        warm = getattr(model, "warm_prefix", None)
        if warm is None or not model.loaded:
            return  # not a local model, or not loaded yet: _preload warms it after loading
        try:
            await warm(self.runtime.agent.prefix_messages())
        except PicoagentError as exc:
            log.error("the prompt prefix was not prepared: %s", exc.for_people())

    async def _watchdog(self, every_s: float) -> None:
        while True:
            sd_notify("WATCHDOG=1")
            await asyncio.sleep(every_s)

    async def _sample_temperature(self) -> None:
        from appliance.health import cpu_temperature

        while True:
            assert self.state is not None
            self.state.monitor.add_temperature(await asyncio.to_thread(cpu_temperature))
            await asyncio.sleep(TEMPERATURE_EVERY_S)

    def reload(self) -> None:
        """SIGHUP: apply a new config (appliance/reload.py: what applies, what waits for a restart, named), or
        keep the running one and say why; re-read skills; retry MCP."""
        from appliance.logs import daemon_level

        runtime = self.runtime
        self._reload_skills(runtime)
        if getattr(runtime.model, "warm_prefix", None) is not None:
            self.chores.spawn(self._warm_prefix())  # SOUL.md, USER.md or the skills may have changed the prompt
        if runtime.mcp is not None and runtime.mcp.problems:
            self.chores.spawn(runtime.start_mcp())
        try:
            new = load_config(self.config.source, data_dir=self.data_dir_override)
        except PicoagentError as exc:
            log.error("SIGHUP: the new config is refused, keeping the running one: %s", exc.for_people())
            sd_notify(f"STATUS=config reload refused: {exc.message}")
            self.reloaded = replace(self.reloaded, refused=exc.message)
            return
        old = self.config
        waiting = self.reloader.waiting(new)
        for key in [key for key in waiting if key in self.flags]:
            waiting.remove(key)
            log.warning("SIGHUP: %s: the daemon was started with %s, which wins over the config", key, self.flags[key])
        new.llm.weight_repack = old.llm.weight_repack  # the running model runner was started with it
        try:
            replacement = local_model(new, fallback=True) if new.llm != old.llm else None
        except PicoagentError as exc:
            log.error("SIGHUP: keeping the running model and its llm settings: %s", exc.for_people())
            waiting += [key for key in changed_keys(old.llm, new.llm, "llm.")]
            new.llm, replacement = old.llm, None
        routing_changed = (new.providers, new.routing) != (old.providers, old.routing)
        # Apply in place: the agent and handlers hold this same object.
        waiting = self.reloader.apply(new, waiting)
        old.llm = new.llm
        if replacement is not None:
            self.switch_model(replacement, "SIGHUP: the llm settings changed")
        if self.model_fetch is not None:
            self.model_fetch.wake()  # a pull waiting to retry tries now; a changed llm.model is re-read
        elif downloads_models(old):
            self.chores.spawn(self.services.add(self._model_fetch(runtime)))
        if routing_changed:
            from appliance.agent.escalation import CloudRoute

            previous_cloud = runtime.use_cloud(CloudRoute(old, runtime.db))
            if previous_cloud is not None:
                self.chores.spawn(previous_cloud.close())
        logging.getLogger().setLevel(daemon_level(old.log_level))
        self.reloaded = Reload(time.time(), str(old.source or ""), waiting)
        for key in waiting:
            log.warning("SIGHUP: %s: restart needed", key)
        log.warning("SIGHUP: config reloaded from %s", old.source)
        sd_notify("STATUS=config reloaded" + (f"; restart needed for {', '.join(waiting)}" if waiting else ""))

    def reload_now(self) -> dict[str, Any]:
        """Apply the config file now, as SIGHUP does (the settings page saved it), and say how it went."""
        self.reload()
        return self.reloaded.as_dict()

    def _reload_skills(self, runtime: Runtime) -> None:
        """Re-read workspace/skills: the next turn's prompt lists the new set, load_skill reads it."""
        catalog = runtime.reload_skills()
        problems = f"; {len(catalog.problems)} problem(s), see `picoagent skills list`" if catalog.problems else ""
        log.info("SIGHUP: %d skill(s) loaded%s", len(catalog), problems)
