"""Named devices: built from config on a backend by the driver table, read and set safely, off the event loop.

Every access goes through here: the device must exist, the operation must be allowed, writes are
rate-limited per device and wait for a person when the device says ``approval: required``. Bus
calls block, so they run on a worker thread while holding that bus's lock (one lock per bus: two
sensors on I2C bus 1 never interleave their transactions).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from appliance.config import Config, DeviceConfig
from appliance.errors import PolicyError, RateLimited, UnknownDeviceError, UsageError, known
from appliance.hardware.approvals import ApprovalStore, PendingAction
from appliance.hardware.backends import Backend
from appliance.hardware.device_info import DeviceInfo
from appliance.hardware.drivers import DRIVERS, DriverSpec
from appliance.hardware.drivers.base import Reading
from appliance.ratelimit import RateLimiter

log = logging.getLogger(__name__)

_ON = {"on", "true", "1", "yes", "open", "start"}
_OFF = {"off", "false", "0", "no", "close", "closed", "stop"}


@dataclass
class Device:
    """One named device and its driver."""

    name: str
    config: DeviceConfig
    driver: Any
    lock: threading.Lock
    limiter: RateLimiter
    events: list[tuple[float, str]] = field(default_factory=list)

    @cached_property
    def spec(self) -> DriverSpec:
        """Its driver's entry in the driver table, made specific to it (a Home Assistant light is a dimmer)."""
        return DRIVERS[self.config.driver].for_device(self.config)

    @property
    def kind(self) -> str:
        """switch, dimmer, sensor or input (a Home Assistant device's from its entity's domain, an mqtt one's
        from its kind)."""
        return self.spec.kind

    @property
    def where(self) -> str:
        """Where it lives: "gpio 17", "i2c-1 0x76", "spi 0.0 ch0", "homeassistant light.kitchen", "mqtt a/b"."""
        return self.spec.where(self.config)

    @property
    def allowed(self) -> tuple[str, ...]:
        """The operations allowed on it."""
        can = ("read", "set") if self.spec.sets else ("read",)
        return tuple(op for op in can if not self.config.allow or op in self.config.allow)

    def info(self) -> DeviceInfo:
        """What the intent matcher knows of it."""
        return DeviceInfo(
            name=self.name,
            kind=self.kind,
            room=self.config.room or None,
            aliases=tuple(self.config.aliases),
            quantities=self.spec.quantities if self.kind == "sensor" else (),
            driver=self.config.driver,
            allowed=self.allowed,
        )


@dataclass(frozen=True)
class SetResult:
    """What a write did: done (with the new state) or waiting for approval."""

    device: str
    value: bool | float
    done: bool
    state: list[Reading] = field(default_factory=list)
    pending: PendingAction | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "device": self.device,
            "value": self.value,
            "done": self.done,
            "state": [r.as_dict() for r in self.state],
            "pending_approval": self.pending.as_dict() if self.pending else None,
        }

    def describe(self) -> str:
        """One sentence for people."""
        if self.pending is not None:
            return (
                f"{self.device} needs a person's approval: pending action {self.pending.id} "
                f"(approve with `picoagent approvals approve {self.pending.id}`)"
            )
        return state_words(self.device, self.state)


def state_words(device: str, state: list[Reading]) -> str:
    """A device's state as a sentence says it: "the fan is on", "the lamp is on, brightness 40 %"."""
    words: list[str] = []
    for reading in state:
        if reading.quantity == "state" and isinstance(reading.value, bool):
            words.insert(0, "on" if reading.value else "off")
        elif isinstance(reading.value, bool):
            words.append(f"{reading.quantity} {'on' if reading.value else 'off'}")
        else:
            words.append(f"{reading.quantity} {reading.value:g}{(' ' + reading.unit) if reading.unit else ''}")
    return f"the {device.replace('_', ' ')} is " + (", ".join(words) or "set")


def parse_value(device: Device, value: Any) -> bool | float:
    """on/off/true/false/0-100% for a device, or a UsageError saying what it takes."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _ON:
        return True
    if text in _OFF:
        return False
    if device.kind == "dimmer":
        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%?", text)
        if match:
            number = float(match.group(1))
            level = number / 100 if "%" in text or number > 1 else number
            if 0 <= level <= 1:
                return level
    takes = "on or off, or a brightness like 40%" if device.kind == "dimmer" else "on or off"
    raise UsageError(f"{device.name} takes {takes}, not {value!r}")


def make_driver(config: DeviceConfig, backend: Backend) -> tuple[Any, threading.Lock]:
    """The driver for a device, built as its driver table entry says, and the lock of the bus it sits on.

    Built holding that bus's lock: a driver reads its chip as it is made (the BME280 its calibration), and a
    device added to a running daemon (a config reload) must not interleave with a read of its neighbour."""
    spec = DRIVERS[config.driver].for_device(config)
    if spec.interface == "i2c":
        assert config.bus is not None
        lock = backend.i2c(config.bus).lock
    elif spec.interface == "spi":
        assert config.bus is not None and config.device is not None
        lock = backend.spi(config.bus, config.device).lock
    else:
        # a pin is the device's alone; a remote entity needs no bus lock
        return spec.build(config, backend), threading.Lock()
    with lock:
        return spec.build(config, backend), lock


class DeviceAccess(Protocol):
    """What the model's tools need of the devices."""

    def describe(self) -> list[dict[str, Any]]:
        """Every device's configuration."""
        ...

    async def read(self, name: str) -> list[Reading]:
        """Read a device."""
        ...

    def outside(self, name: str) -> str:
        """What the device's readings are when other people's software writes them ("" on the Pi)."""
        ...

    async def set(self, name: str, value: Any, *, requested_by: str, approval: str = "") -> SetResult:
        """Set a device (or ask for approval; ``approval``: why a person must approve, whatever the device says)."""
        ...


class DeviceRegistry:
    """The named devices of this appliance."""

    def __init__(self, config: Config, backend: Backend, approvals: ApprovalStore) -> None:
        self.config = config
        self.backend = backend
        self.approvals = approvals
        self.devices: dict[str, Device] = {}
        self.listeners: list[Callable[[str, str], None]] = []  # (device, event) from inputs
        # (device, value, requested_by, state) after every write that happened, with the state read back
        # under the write's lock: the events table keeps the write, the MQTT bridge publishes the state
        # (so a write is read once, wherever it came from)
        self.write_listeners: list[Callable[[str, bool | float, str, list[Reading]], None]] = []
        backend.prepare(config.devices)
        for name, device_config in config.devices.items():
            try:
                self.devices[name] = self._build(name, device_config)
            except Exception:
                self.close()
                raise

    def _build(self, name: str, config: DeviceConfig, limiter: RateLimiter | None = None) -> Device:
        """One device's driver built and hooked up (not yet registered); ``limiter``: the one it had before."""
        driver, lock = make_driver(config, self.backend)
        device = Device(name, config, driver, lock, limiter or RateLimiter(config.writes_per_minute, 60.0))
        kept = self.backend.kept_state(name) if device.spec.on_the_pi and device.spec.sets else None
        if kept is not None:  # a simulated switch as the last process left it (SimulatedBackend)
            driver.set(kept)
        if hasattr(driver, "on_event"):
            driver.on_event(lambda event, name=name: self._input_event(name, event))
        return device

    def _input_event(self, name: str, event: str) -> None:
        log.info("%s: %s", name, event)
        for listener in list(self.listeners):
            listener(name, event)

    def close(self) -> None:
        """Release every pin and bus."""
        for device in self.devices.values():
            try:
                device.driver.close()
            except Exception:  # closing must go on for the others
                log.warning("closing %s failed", device.name, exc_info=True)
        self.backend.close()

    def configure(self, name: str, config: DeviceConfig) -> None:
        """New settings for a running device (a config reload): its approval, allow list and rate apply to the
        next write; its wiring stays what the driver was built with."""
        device = self.get(name)
        device.limiter.limit = config.writes_per_minute  # the last minute's writes still count
        device.config = config

    def remove(self, name: str) -> Device:
        """Take a device out (gone from the config at a reload): released (its pins free), never driven again here."""
        device = self.devices.pop(name)
        with device.lock:
            try:
                device.driver.close()
            except Exception:
                log.warning("closing %s failed", name, exc_info=True)
        return device

    def add(self, name: str, config: DeviceConfig, *, limiter: RateLimiter | None = None) -> Device:
        """A device added to the running registry (a config reload), built exactly as at start (its simulated chip
        put on the bus first); from now on everything that asks the registry knows it. A driver that cannot be
        built raises, and nothing is kept. ``limiter``: a rewired device's, so its last minute's writes count."""
        if name in self.devices:
            raise UsageError(f"a device named {name!r} is running already")
        self.backend.prepare({name: config})
        self.devices[name] = device = self._build(name, config, limiter)
        log.info("device %s added: %s", name, device.where)
        return device

    def get(self, name: str) -> Device:
        """A device by name, or UnknownDeviceError listing the known ones."""
        device = self.devices.get(name)
        if device is None:
            raise UnknownDeviceError(
                f"no device named {name!r}", fix=f"known devices: {known(self.devices, 'none are configured')}"
            )
        return device

    def infos(self) -> list[DeviceInfo]:
        """Every device as the intent matcher sees it."""
        return [d.info() for d in self.devices.values()]

    def describe(self) -> list[dict[str, Any]]:
        """Every device's configuration, for lists and the status page."""
        return [
            {
                "name": d.name,
                "driver": d.config.driver,
                "kind": d.kind,
                "where": d.where,
                "room": d.config.room or None,
                "aliases": d.config.aliases,
                "allowed": list(d.allowed),
                "approval": d.config.approval,
            }
            for d in self.devices.values()
        ]

    def outside(self, name: str) -> str:
        """What its readings are when other people's software writes them: "a device state from the MQTT
        broker", "a device state from Home Assistant"; "" for a device wired to the Pi."""
        return self.get(name).spec.outside

    def read_sync(self, name: str) -> list[Reading]:
        """Read a device now (blocking; holds its bus lock)."""
        device = self.get(name)
        if "read" not in device.allowed:
            raise PolicyError(f"reading {name} is not allowed", fix=f"add read to devices.{name}.allow")
        with device.lock:
            return list(device.driver.read())

    async def read(self, name: str) -> list[Reading]:
        """Read a device without blocking the event loop."""
        return await asyncio.to_thread(self.read_sync, name)

    def _check_set(self, name: str, value: Any) -> tuple[Device, bool | float]:
        device = self.get(name)
        if "set" not in device.allowed:
            why = "it is a sensor" if not device.spec.sets else f"devices.{name}.allow leaves it out"
            raise PolicyError(f"{name} cannot be set: {why}")
        return device, parse_value(device, value)

    def _write(self, device: Device, value: bool | float, requested_by: str = "") -> list[Reading]:
        wait = device.limiter.hit(device.name)
        if wait:
            raise RateLimited(
                f"{device.name} was switched {device.config.writes_per_minute} times in the last minute; "
                f"try again in {wait:.0f} s",
                fix=f"raise devices.{device.name}.writes_per_minute if this is intended",
            )
        with device.lock:
            device.driver.set(value)
            state = list(device.driver.read())
            if device.spec.on_the_pi:
                self.backend.keep_state(device.name, value)
        log.info("%s set to %s", device.name, value)
        for listener in list(self.write_listeners):
            try:
                listener(device.name, value, requested_by, list(state))
            except Exception:  # a record that could not be kept must not undo the write
                log.exception("write listener failed")
        return state

    def set_sync(self, name: str, value: Any, *, requested_by: str, approval: str = "") -> SetResult:
        """Set a device (blocking); a device needing approval gets a pending action instead.

        ``approval``: why this write needs a person even when the device does not ("this turn read a
        web page"); it is kept with the pending action, so whoever decides sees it.
        """
        device, parsed = self._check_set(name, value)
        if device.config.approval == "required" or approval:
            pending = self.approvals.request(name, parsed, f"{requested_by}: {approval}" if approval else requested_by)
            log.info("%s: write %s waits for approval %s", name, parsed, pending.id)
            return SetResult(name, parsed, False, pending=pending)
        return SetResult(name, parsed, True, self._write(device, parsed, requested_by))

    async def set(self, name: str, value: Any, *, requested_by: str, approval: str = "") -> SetResult:
        """Set a device without blocking the event loop (``approval``: see set_sync)."""
        return await asyncio.to_thread(self.set_sync, name, value, requested_by=requested_by, approval=approval)

    def decide_sync(self, action_id: str, approve: bool, decided_by: str) -> PendingAction | SetResult:
        """A person's decision on a pending write; an approved one runs now, exactly as it was asked."""
        if self.approvals.get(action_id).tool is not None:  # checked before deciding: nothing is left half done
            raise UsageError(
                f"approval {action_id} is a tool call: it runs in the daemon",
                fix="start the daemon (picoagent serve) and decide it there, or deny it",
            )
        action = self.approvals.decide(action_id, approve, decided_by)
        if action.status != "approved":
            return action
        return self.run_approved(action, decided_by)

    def run_approved(self, action: PendingAction, decided_by: str) -> SetResult:
        """Perform a write a person's decision has just approved (the row that decision won), once."""
        # What runs is the stored row this decision won: its device and value, nothing the caller passed.
        if action.tool is not None or action.value is None:
            raise UsageError(f"approval {action.id} is a tool call, not a device write")
        device = self.get(action.device)
        try:
            state = self._write(device, action.value, f"{action.requested_by}, approved by {decided_by}")
        except Exception as exc:
            self.approvals.record_result(action.id, str(exc), failed=True)
            raise
        self.approvals.record_result(action.id, ", ".join(str(r) for r in state))
        return SetResult(action.device, action.value, True, state)

    async def decide(self, action_id: str, approve: bool, decided_by: str) -> PendingAction | SetResult:
        """Decide off the event loop."""
        return await asyncio.to_thread(self.decide_sync, action_id, approve, decided_by)
