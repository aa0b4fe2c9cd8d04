"""The devices at a config reload: added, rewired, taken out and given new settings while the daemon runs.

A device added to the config (the Settings page, an edit and SIGHUP) is built by the same code as at start
(:meth:`DeviceRegistry.add`: the driver table, the backend's buses with their locks, its simulated chip put on
the bus first) and registered; everything that knows the devices asks the registry when it needs them (the
device tools, the web routes, `picoagent devices`, the grounded answers, the cron jobs, the heartbeat), and
what copied them is told here: the intent fast path and the by-meaning matcher (the agent's
``reread_config``, after every step), the scheduler's list of the devices a new job may set, and the MQTT
bridge (command topics, discovery). A daemon started with no devices opens its registry at the reload that
adds the first, and hands it to the parts that would have had it at start (:func:`open_devices`).

A rewired device (a new pin, bus, address, driver or entity) is closed first, its pins released, then built
on its new wiring, all rewired devices closed before any is built (two relays swapping pins). The first
minute's writes still count against its rate limit. Closing a relay's pin drops it, as a restart would; a
simulated switch starts at its kept state, as at start. What cannot be built (a chip that does not answer, a
service that is off) is logged with why and named among the keys waiting for a restart; a rewired device that
cannot be built gets its old wiring back. A device taken out of the config is released and can no longer be
driven. An MQTT or Home Assistant device's close releases nothing (the link is the daemon's): its
subscription stays, feeding nothing, until the restart.

Cost: building a device runs on the event loop, like the rest of the reload (SIGHUP's handler, the Settings
page's save). Measured off-Pi: a simulated BME280 (its chip id and calibration read over the simulated bus) or
relay, 0.1 ms; a real BME280 reads 34 bytes in 5 transactions at 100 kHz, about 4 ms, under its bus's lock.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from appliance.errors import PicoagentError

if TYPE_CHECKING:
    from appliance.config import Config, DeviceConfig
    from appliance.daemon import Daemon
    from appliance.hardware.devices import Device, DeviceRegistry

log = logging.getLogger(__name__)

# A device's settings that a reload applies to the running device; the rest is its wiring (rebuilt).
DEVICE_SETTINGS = ("approval", "allow", "writes_per_minute", "room", "aliases")


def wiring(config: DeviceConfig) -> dict[str, Any]:
    """What a device's driver is built from: every key but its settings (:data:`DEVICE_SETTINGS`)."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in DEVICE_SETTINGS}


def settings(config: DeviceConfig) -> dict[str, Any]:
    """The keys a running device takes without being rebuilt."""
    return {key: getattr(config, key) for key in DEVICE_SETTINGS}


def _why(exc: Exception) -> str:
    return exc.for_people() if isinstance(exc, PicoagentError) else f"{type(exc).__name__}: {exc}"


def apply_devices(daemon: Daemon, old: Config, new: Config) -> list[str]:
    """Make the running devices those of ``new`` (see the module docstring); ``old`` (the running config) follows.
    Returns the keys of the devices that could not be built: they wait for a restart (the reason is logged)."""
    registry = daemon.runtime.devices
    if registry is None:
        if not new.devices:
            return []
        registry = open_devices(daemon)
    was = {name: device.config for name, device in registry.devices.items()}  # to tell the others of a change
    for name in [name for name in registry.devices if name not in new.devices]:
        registry.remove(name)
        old.devices.pop(name, None)
        log.warning("SIGHUP: device %s is no longer in the config: released", name)
    rewired: dict[str, Device] = {}
    for name, device in list(registry.devices.items()):
        if wiring(device.config) != wiring(new.devices[name]):
            rewired[name] = registry.remove(name)  # every one closed before any is built: pins may be swapped
    unbuilt: list[str] = []
    for name, wanted in new.devices.items():
        running = registry.devices.get(name)
        if running is not None:
            if settings(wanted) != settings(running.config):
                registry.configure(name, replace(running.config, **settings(wanted)))
                old.devices[name] = registry.devices[name].config
            continue
        before = rewired.get(name)
        try:
            device = registry.add(name, wanted, limiter=before.limiter if before is not None else None)
        except Exception as exc:  # any driver's failure (gpiozero's, a bus's): the other devices still apply
            unbuilt += _not_built(registry, old, name, wanted, before, _why(exc))
            continue
        old.devices[name] = device.config
        log.warning("SIGHUP: device %s %s: %s", name, "rewired" if before is not None else "added", device.where)
    if {name: device.config for name, device in registry.devices.items()} != was:
        _tell(daemon, old)
    return unbuilt


def _not_built(
    registry: DeviceRegistry, old: Config, name: str, wanted: DeviceConfig, before: Device | None, why: str
) -> list[str]:
    """A device whose new driver could not be built: logged, its old wiring put back (a rewired one), and the
    keys that wait for a restart."""
    if before is None:
        log.error("SIGHUP: device %s could not be added: %s", name, why)
        old.devices.pop(name, None)
        return [f"devices.{name}"]
    keys = [f"devices.{name}.{key}" for key, value in wiring(wanted).items() if value != wiring(before.config)[key]]
    try:
        registry.add(name, replace(before.config, **settings(wanted)), limiter=before.limiter)
    except Exception as again:  # not even as it was: released, as a device taken out
        log.error("SIGHUP: device %s could not be rewired (%s) nor built again as it was (%s)", name, why, _why(again))
        old.devices.pop(name, None)
        return [f"devices.{name}"]
    old.devices[name] = registry.devices[name].config
    log.error("SIGHUP: device %s could not be rewired, it keeps its old wiring: %s", name, why)
    return keys


def open_devices(daemon: Daemon) -> DeviceRegistry:
    """The registry of a daemon started with no devices, opened empty on the configured backend and handed to
    the parts that hold it from the start: the device tools, the approvals, the agent, the event bus."""
    from appliance.runtime import open_registry
    from appliance.tools import hardware

    runtime = daemon.runtime
    store = runtime.approvals.store if runtime.approvals is not None else None
    registry, raw = open_registry(daemon.config, runtime.db, store, daemon.links)
    runtime.devices = registry
    hardware.register(runtime.tools, registry, raw)
    if runtime.approvals is not None:
        runtime.approvals.devices = registry
    runtime.agent.devices = registry
    events = daemon.state.devices.events if daemon.state is not None else None
    if events is not None:
        registry.listeners.append(events.input_listener)
    log.warning("SIGHUP: the device registry is open (%s backend)", registry.backend.name)
    return registry


def _tell(daemon: Daemon, old: Config) -> None:
    """What copied the device names: the scheduler's check of new jobs, the MQTT bridge."""
    if daemon.cron is not None:
        daemon.cron.devices = list(old.devices)
    if daemon.mqtt is not None:
        daemon.mqtt.devices_changed(daemon.runtime.devices)
