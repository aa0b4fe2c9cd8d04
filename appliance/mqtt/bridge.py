"""picoagent in Home Assistant over MQTT: discovery, state, commands through the device policy, the assistant.

:class:`MqttBridge` is the daemon's ``mqtt`` service. At every (re)connect of the link it publishes the
discovery messages (appliance/mqtt/discovery.py, retained) and every device's state (again when a config
reload adds or rewires devices; one taken out has its entities removed: :meth:`MqttBridge.devices_changed`); then:

- **state on change**: a write (from any channel, an approval, a schedule, a command here) publishes the
  state the registry read back under the write's lock (its write listener hands it over: no second read);
  an input event (a press, motion) makes it read that device and publish its state document; every
  ``mqtt.state_interval_s`` all devices are read and published again (sensors change without events),
  with the assistant's state;
- **commands** on ``<base>/<device>/set`` (``ON``/``OFF``) and ``<base>/<device>/brightness/set`` (0-100) go
  through :meth:`DeviceRegistry.set` with ``requested_by="mqtt"``: the allow list, the rate limit and
  approvals apply exactly as to a Telegram or chat write, and its state goes out once, as any write's
  (one read, one publish per command). A write needing a person is a pending approval
  like any other (the status page, ``/approve`` in a person's chat, ``picoagent approvals``) and the entity's
  attributes say ``{"pending_approval": true}`` until it is decided: never its id, which every client of the
  broker would read (the bridge keeps it to itself); a refused command's reason is its ``last_error``;
- **the assistant**: decode speed, CPU temperature, queue depth and the last route after every turn and on
  the heartbeat; messages on the notify topic are chats (appliance/mqtt/chat.py).

Device reads run off the event loop (the registry's threads). Costs: a state document is ~60 bytes; the
five development devices and the assistant are 17 discovery messages (~9 KB) at each connect.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from appliance.errors import PicoagentError
from appliance.hardware.remote.mqtt import MqttLink
from appliance.mqtt.discovery import ASSISTANT, Topics, assistant_entities, device_entities

if TYPE_CHECKING:
    from appliance.config import MqttConfig
    from appliance.hardware.devices import DeviceRegistry
    from appliance.hardware.drivers.base import Reading
    from appliance.mqtt.chat import MqttChat
    from appliance.mqtt.offered import DiscoveredEntities

log = logging.getLogger(__name__)

LOCAL_INTERFACES = ("gpio", "i2c", "spi")  # announced by discovery; homeassistant and mqtt devices are not

DEVICE_READ_TIMEOUT_S = 10.0


def state_document(readings: list[Reading]) -> dict[str, Any]:
    """A device's readings as its state topic's JSON: booleans as ON/OFF, numbers as they are."""
    return {r.quantity: ("ON" if r.value else "OFF") if isinstance(r.value, bool) else r.value for r in readings}


def command_value(payload: bytes, *, brightness: bool) -> str:
    """An MQTT command as the registry takes it: ON/OFF -> on/off, a brightness 0-100 -> "40%"."""
    text = payload.decode("utf-8", errors="replace").strip()
    if brightness:
        try:
            level = float(text)
        except ValueError:
            return text  # the registry says what it takes
        return f"{max(0.0, min(100.0, level)):g}%"
    return text.lower()


class MqttBridge:
    """The ``mqtt`` service: the link, discovery, state, commands, the assistant's device and its chat."""

    name = "mqtt"

    def __init__(
        self,
        config: MqttConfig,
        devices: DeviceRegistry | None,
        *,
        assistant_name: str = "picoagent",
        assistant_state: Callable[[], dict[str, Any]] = dict,
        link: MqttLink,
        chat: MqttChat | None = None,
    ) -> None:
        """``chat``: the notify topic's chat channel, over this same link (the daemon's; None: no chat)."""
        self.config = config
        # The daemon's link: made before the devices, which use it too, and started and stopped as a service
        # of its own (runtime.remote_links), so the bridge neither starts nor stops it.
        self.link = link
        self.devices = devices
        self.topics = Topics.of(config)
        self.assistant_name = assistant_name
        self.assistant_state = assistant_state
        self.chat = chat
        self.attributes: dict[str, dict[str, Any]] = {}  # device -> its attributes document
        self._pending: dict[str, str] = {}  # device -> the id of its write waiting for a person (never published)
        self.commands = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        self._command_topics: dict[str, tuple[str, bool]] = {}  # topic -> (device, is brightness)
        self._announced: set[str] = set()  # the discovery topics published (a device taken out: emptied)
        self._discovered: DiscoveredEntities | None = None  # others' announcements, read at the first ask

    def discovered(self) -> DiscoveredEntities:
        """What other things announce on the broker for Home Assistant (the Settings page offers them)."""
        if self._discovered is None:
            from appliance.mqtt.offered import DiscoveredEntities

            self._discovered = DiscoveredEntities(self.link, self.config.discovery_prefix, self.config.base_topic)
        return self._discovered

    # --- lifecycle ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Subscribe the command topics, hook into the devices, start the link (returns at once)."""
        self._loop = asyncio.get_running_loop()
        self._subscribe_commands()
        if self.devices is not None:
            self.devices.write_listeners.append(self._on_write)
            self.devices.listeners.append(self._on_input)
        self.link.on_connect(self._on_connect)
        if self.link.connected:  # it connected before the bridge began: announce now, as on a connect
            self._on_connect()
        if self.chat is not None:
            await self.chat.start()
        self._heartbeat = asyncio.ensure_future(self._beat())

    def _subscribe_commands(self) -> None:
        """The command topics of the devices that may be set, each subscribed once (the link keeps it)."""
        wanted: dict[str, tuple[str, bool]] = {}
        for device in self._devices():
            if "set" not in device.allowed:
                continue
            wanted[self.topics.command(device.name)] = (device.name, False)
            if device.kind == "dimmer":
                wanted[self.topics.brightness_command(device.name)] = (device.name, True)
        for topic in wanted:
            if topic not in self._command_topics:
                self.link.subscribe(topic, self._on_command, replay_retained=False)
        # A topic no longer wanted stays subscribed (the link cannot unsubscribe) and is ignored (_on_command).
        self._command_topics = wanted

    def devices_changed(self, devices: DeviceRegistry | None) -> None:
        """A config reload added, rewired or took out devices (appliance/reload_devices.py): the new ones' command
        topics, discovery and state; a device gone has its entities removed from Home Assistant (an empty
        retained config)."""
        if self.devices is None and devices is not None and self._loop is not None:
            devices.write_listeners.append(self._on_write)
            devices.listeners.append(self._on_input)
        self.devices = devices
        if self._loop is None:
            return  # not started: start() does it all
        self._subscribe_commands()
        if not self.config.discovery:
            self._spawn(self.publish_all())
            return
        wanted = {topic for topic, _ in self.discovery_messages()}
        for topic in sorted(self._announced - wanted):
            self.link.publish(topic, b"", retain=True)
        self._announced &= wanted
        if self.link.connected:
            self._on_connect()  # discovery again (retained, so the same messages change nothing), the states

    async def stop(self) -> None:
        """Stop the heartbeat and the chat, and unhook from the devices (the link stops as its own service)."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
        if self.chat is not None:
            await self.chat.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.devices is not None:
            with contextlib.suppress(ValueError):
                self.devices.write_listeners.remove(self._on_write)
            with contextlib.suppress(ValueError):
                self.devices.listeners.remove(self._on_input)

    def status(self) -> dict[str, Any]:
        """The link's status and what the bridge did: for /api/status and ``picoagent status``."""
        return {**self.link.status(), "commands": self.commands, "devices": len(self._devices())}

    # --- publishing -------------------------------------------------------------------------------------

    def discovery_messages(self) -> list[tuple[str, dict[str, Any]]]:
        """Every discovery (topic, payload): the devices', then the assistant's."""
        found: list[tuple[str, dict[str, Any]]] = []
        for device in self._devices():
            found += device_entities(self.topics, device.info())
        from appliance.health import cpu_temperature

        return found + assistant_entities(self.topics, self.assistant_name, temperature=cpu_temperature() is not None)

    def _devices(self) -> list[Any]:
        """The devices wired to the Pi: one that lives in Home Assistant or on the broker already has its
        entity there, and announcing it again would show it twice (and let a command loop back)."""
        if self.devices is None:
            return []
        return [d for d in self.devices.devices.values() if d.spec.interface in LOCAL_INTERFACES]

    def _on_connect(self) -> None:
        if self.config.discovery:
            for topic, payload in self.discovery_messages():
                self.link.publish(topic, json.dumps(payload, ensure_ascii=False), retain=True)
                self._announced.add(topic)
        for name, attributes in self.attributes.items():
            self.link.publish(self.topics.attributes(name), json.dumps(attributes), retain=True)
        self._spawn(self.publish_all())

    async def publish_all(self) -> None:
        """Read every device and publish its state, then the assistant's."""
        await asyncio.gather(*(self.publish_state(d.name) for d in self._devices()))
        self.publish_assistant()

    async def publish_state(self, name: str, readings: list[Reading] | None = None) -> None:
        """Publish one device's state document: ``readings`` (a write's, read back under its lock), else read
        it now (a failed read is its attributes' last_error)."""
        assert self.devices is not None
        if readings is None:
            try:
                readings = await asyncio.wait_for(self.devices.read(name), DEVICE_READ_TIMEOUT_S)
            except (PicoagentError, TimeoutError, OSError) as exc:
                message = exc.message if isinstance(exc, PicoagentError) else f"reading failed: {exc or 'timed out'}"
                self._set_attributes(name, last_error=message)
                return
        self.link.publish(self.topics.state(name), json.dumps(state_document(readings)), retain=True)
        await self._check_pending(name)

    def publish_assistant(self) -> None:
        """The assistant's state document: decode speed, CPU temperature, queue depth, last route."""
        try:
            state = self.assistant_state()
        except Exception:  # a status read must never stop the heartbeat
            log.exception("mqtt: reading the assistant's state failed")
            return
        self.link.publish(self.topics.state(ASSISTANT), json.dumps(state), retain=True)

    def _set_attributes(self, name: str, **changes: Any) -> None:
        attributes = self.attributes.setdefault(name, {"pending_approval": False, "last_error": None})
        if all(attributes.get(k) == v for k, v in changes.items()):
            return
        attributes.update(changes)
        self.link.publish(self.topics.attributes(name), json.dumps(attributes), retain=True)

    async def _check_pending(self, name: str) -> None:
        """Clear a device's pending_approval once the approval is decided or expired."""
        pending = self._pending.get(name)
        if not pending or self.devices is None:
            return
        try:
            action = await asyncio.to_thread(self.devices.approvals.get, pending)
        except PicoagentError:
            action = None
        if action is None or action.status != "pending":
            self._pending.pop(name, None)
            self._set_attributes(name, pending_approval=False)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.config.state_interval_s)
            if self.link.connected:
                await self.publish_all()

    # --- events in (any thread) -------------------------------------------------------------------------

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _soon(self, name: str, readings: list[Reading] | None = None) -> None:
        """Publish a device's state soon (``readings``, else read then), from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop is closing: the daemon stops
            loop.call_soon_threadsafe(lambda: self._spawn(self.publish_state(name, readings)))

    def _on_write(self, name: str, _value: bool | float, _requested_by: str, state: list[Reading]) -> None:
        # A device whose reads are not allowed (allow: [set]) is not published from the write's read-back
        # either: publish_state's read says why in its attributes, as for every other read.
        readable = self.devices is not None and "read" in self.devices.get(name).allowed
        self._soon(name, state if readable else None)

    def _on_input(self, name: str, _event: str) -> None:
        self._soon(name)

    def on_turn(self, _record: Any) -> None:
        """After every turn (the agent's listener): the assistant's sensors now."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.publish_assistant)

    # --- commands -------------------------------------------------------------------------------------

    def _on_command(self, topic: str, payload: bytes) -> None:
        found = self._command_topics.get(topic)
        if found is None:
            return
        name, brightness = found
        self.commands += 1
        self._spawn(self.command(name, command_value(payload, brightness=brightness)))

    async def command(self, name: str, value: str) -> None:
        """One command from the broker, through the registry's policy; what happened goes to the attributes."""
        assert self.devices is not None
        try:
            result = await self.devices.set(name, value, requested_by="mqtt")
        except PicoagentError as exc:
            log.warning("mqtt: %s %s refused: %s", name, value, exc.message)
            self._set_attributes(name, last_error=exc.message)
            await self.publish_state(name)  # Home Assistant shows the state as it is, not as asked
            return
        if result.pending is not None:
            log.warning("mqtt: %s %s waits for approval %s", name, value, result.pending.id)
            self._pending[name] = result.pending.id
            self._set_attributes(name, pending_approval=True, last_error=None)
            return
        self._set_attributes(name, last_error=None)  # its state goes out from the write listener (_on_write)
