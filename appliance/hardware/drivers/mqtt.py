"""Any MQTT device (Zigbee2MQTT, Tasmota, ESPHome...) as a named device: ``driver: mqtt``.

A device names its ``kind`` with Home Assistant's MQTT platform words, as the homeassistant driver's
entity domains do (:data:`KINDS`): a ``switch`` is a switch, a ``light`` a dimmer (on, off and a brightness
in percent), a ``sensor`` a sensor (its ``quantity`` with its ``unit``), a ``binary_sensor`` an input whose
changes are events like a button's or a motion sensor's (its ``quantity`` names the events: motion gives
motion/still, door opened/closed, as for Home Assistant's binary sensors).

- **Reading** is free: the device subscribes its ``state_topic`` through the MQTT link (kept across
  reconnects) and a read returns the last state that arrived, picked out of JSON by a ``value_template``
  (:mod:`appliance.hardware.drivers.template`). Before any state arrived, a read is a HardwareError ("no
  state received yet"): the device shows as unavailable, as a Home Assistant entity does.
- **Setting** publishes ``payload_on``/``payload_off`` on the ``command_topic`` (never retained: a command
  is for its moment) through the link, which is thread-safe, then waits up to :data:`CONFIRM_S` for the
  device to report its new state. A device that does not answer in time (or has no state topic: optimistic,
  as Home Assistant calls it) is taken to be in the state it was sent. With no broker connection the
  write is refused with that reason, so nothing is silently lost.

The driver blocks like any other (a set waits on a condition, off the event loop); the state callbacks
run on the event loop and only decode a payload of a few bytes.

A state is anyone's on the broker: one that cannot be read (not a finite number, JSON nested too deeply,
neither payload) makes the device's state unknown, as a read error saying why, never a wrong value. It is
logged as one line, at most one per device per :data:`LOG_EVERY_S` with a count of the ones left out, so
a flood of bad states costs the log (the Pi's SD card) nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from appliance.hardware.buses import HardwareError
from appliance.hardware.drivers.base import Buses, DriverSpec, Kind, Reading, Sensor, Wiring
from appliance.hardware.drivers.homeassistant import EVENTS
from appliance.hardware.drivers.homeassistant import KINDS as HASS_KINDS
from appliance.hardware.drivers.template import TemplateError, ValueTemplate, finite_number, parse_template, shown

log = logging.getLogger(__name__)

# The kinds an mqtt device may be (Home Assistant's MQTT platforms), as picoagent's kinds of device.
KINDS: dict[str, Kind] = {name: HASS_KINDS[name] for name in ("switch", "light", "sensor", "binary_sensor")}
SETTABLE = ("switch", "light")  # the kinds with a command topic
CONFIRM_S = 2.0  # how long a write waits for the device to report its new state
LOG_EVERY_S = 60.0  # at most one line per device in this long about the states it could not read


class BrokerLink(Protocol):
    """What a device needs of the broker connection: :class:`appliance.hardware.remote.mqtt.MqttLink` (the
    config reads this driver's table, so the driver names the link by what it does, not by import)."""

    @property
    def connected(self) -> bool:
        """Whether the broker is connected now."""
        ...

    def status(self) -> dict[str, Any]:
        """The link's state: broker, connected, last_error."""
        ...

    def subscribe(
        self, topic_filter: str, callback: Callable[[str, bytes], None], *, replay_retained: bool = True
    ) -> None:
        """Call ``callback(topic, payload)`` for each message on ``topic_filter``, across reconnects."""
        ...

    def publish(self, topic: str, payload: str | bytes, *, retain: bool = False, qos: int = 1) -> None:
        """Send a message (from any thread)."""
        ...


class MqttDevice:
    """One device on the broker: its state topic's last state, its command topic's payloads."""

    clock = staticmethod(time.monotonic)  # for the log's throttle (a test moves it)

    def __init__(self, link: BrokerLink, wiring: Wiring) -> None:
        self.link = link
        self.kind = wiring.kind
        self.state_topic = wiring.state_topic
        self.command_topic = wiring.command_topic
        self.payload_on, self.payload_off = wiring.payload_on, wiring.payload_off
        self.template = _template(wiring.value_template)
        self.brightness_template = _template(wiring.brightness_value_template)
        self.brightness_topic = wiring.brightness_command_topic
        self.scale = wiring.brightness_scale
        self.quantity = wiring.quantity or ("state" if self.kind in ("switch", "light", "binary_sensor") else "value")
        self.unit = wiring.unit
        self._changed = threading.Condition()
        self._readings: list[Reading] | None = None  # the last state, decoded
        self._error: HardwareError | None = None  # or why the last state could not be read
        self._received = 0  # states arrived so far (a write waits for the next)
        self._callbacks: list[Callable[[str], None]] = []
        self._logged_at: float | None = None  # when the last unreadable state was logged
        self._unlogged = 0  # unreadable states since then, not logged
        if self.state_topic:
            link.subscribe(self.state_topic, self._message)

    # --- the driver ---------------------------------------------------------------------------------

    def read(self) -> list[Reading]:
        """The last state the device reported (or was sent, when it does not report)."""
        with self._changed:
            readings, error = self._readings, self._error
        if error is not None:
            raise error
        if readings is None:
            raise self._nothing_yet()
        return list(readings)

    def set(self, value: bool | float) -> None:
        """Publish on or off (a light: its brightness first, when it has a brightness topic); wait for the state."""
        if not self.link.connected:
            status = self.link.status()
            why = status.get("last_error") or "the daemon, picoagent serve, keeps the connection"
            raise HardwareError(
                f"not connected to the MQTT broker at {status.get('broker')}, so nothing was sent to "
                f"{self.command_topic} ({why})",
                fix="start the broker or the daemon; `picoagent status` shows the link",
            )
        on = bool(value)
        # A level only means something to a light with a brightness topic; else it is plain on.
        dims = self.kind == "light" and bool(self.brightness_topic)
        level = float(value) if dims and not isinstance(value, bool) and on else None
        with self._changed:
            seen = self._received
        if level is not None:
            self.link.publish(self.brightness_topic, str(round(level * self.scale)))
        self.link.publish(self.command_topic, self.payload_on if on else self.payload_off)
        assumed = [Reading("state", on, "")]
        if self.kind == "light":
            brightness = float(round(level * 100)) if level is not None else 100.0 * on
            assumed.append(Reading("brightness", brightness, "%"))
        with self._changed:
            if self.state_topic and self._changed.wait_for(lambda: self._received > seen, CONFIRM_S):
                return
            if self.state_topic:
                log.info("%s did not report its state within %g s; taking it as sent", self.state_topic, CONFIRM_S)
            self._readings, self._error = assumed, None

    def on_event(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(event)`` when a binary_sensor turns on or off (from the event loop)."""
        self._callbacks.append(callback)

    def close(self) -> None:
        """Nothing to release: the link belongs to whoever opened it."""

    # --- inside ---------------------------------------------------------------------------------------

    def _message(self, _topic: str, payload: bytes) -> None:
        try:
            readings, error = self._decode(payload), None
        except HardwareError as exc:
            readings, error = None, exc
            self._refused(exc)
        except Exception as exc:  # a bug some payload found: the state is unknown, its traceback rate-limited too
            readings, error = None, HardwareError(f"{self.state_topic}: the state could not be read ({exc!r:.80})")
            self._refused(error, exc)
        with self._changed:
            before = self._readings
            self._readings, self._error = readings, error
            self._received += 1
            self._changed.notify_all()
        if self.kind != "binary_sensor" or readings is None:
            return
        on = readings[0].value
        if before is not None and before[0].value == on:
            return  # a repeated state (an attribute changed, a retained copy): no new event
        on_event, off_event = EVENTS.get(self.quantity, ("on", "off"))
        for callback in list(self._callbacks):
            callback(on_event if on else off_event)

    def _refused(self, error: HardwareError, bug: Exception | None = None) -> None:
        """Log an unreadable state: one line, at most one per :data:`LOG_EVERY_S`, saying how many were left out."""
        now = self.clock()
        if self._logged_at is not None and now - self._logged_at < LOG_EVERY_S:
            self._unlogged += 1
            return
        left_out = f" ({self._unlogged} more since the last such line, not logged)" if self._unlogged else ""
        self._logged_at, self._unlogged = now, 0
        log.warning("mqtt: refused a state: %s%s", error.message, left_out, exc_info=bug)

    def _decode(self, payload: bytes) -> list[Reading]:
        value = self._render(self.template, payload)
        if self.kind == "sensor":
            try:
                number = finite_number(value)
            except TemplateError as exc:
                raise HardwareError(f"{self.state_topic}: {exc}") from None
            return [Reading(self.quantity, number, self.unit)]
        on = self._on(value)
        if self.kind == "binary_sensor":
            return [Reading("state", on, "")]
        readings = [Reading("state", on, "")]
        if self.kind == "light":
            level = 100.0 * on
            if on and self.brightness_template is not None:
                raw = self._render(self.brightness_template, payload)
                try:
                    number = finite_number(raw)
                except TemplateError:
                    number = -1.0
                if not 0 <= number <= self.scale:
                    raise HardwareError(
                        f"{self.state_topic} reported a brightness of {shown(raw)}, not a number from 0 to {self.scale}"
                    )
                level = float(round(number / self.scale * 100))
            readings.append(Reading("brightness", level, "%"))
        return readings

    def _render(self, template: ValueTemplate | None, payload: bytes) -> Any:
        if template is None:
            return payload.decode("utf-8", errors="replace").strip()
        try:
            return template.render(payload)
        except TemplateError as exc:
            raise HardwareError(f"{self.state_topic}: {exc}", fix="check the device's value_template") from None

    def _on(self, value: Any) -> bool:
        if isinstance(value, bool):  # JSON true/false (Zigbee2MQTT's occupancy, contact)
            return value
        text = str(value) if isinstance(value, (str, int, float)) else None  # JSON lists and objects are no state
        if text == self.payload_on:
            return True
        if text == self.payload_off:
            return False
        raise HardwareError(
            f"{self.state_topic} reported {shown(value)}, neither payload_on {self.payload_on!r} "
            f"nor payload_off {self.payload_off!r}",
            fix="set payload_on/payload_off (or a value_template) to what the device sends",
        )

    def _nothing_yet(self) -> HardwareError:
        if not self.state_topic:
            return HardwareError(
                f"{self.command_topic}: no state known yet (the device has no state_topic: picoagent knows only "
                "what it sent, and has sent nothing yet)"
            )
        if not self.link.connected:
            why = self.link.status().get("last_error") or "the daemon, picoagent serve, keeps the connection"
            return HardwareError(f"no state received yet on {self.state_topic}: not connected to the broker ({why})")
        return HardwareError(
            f"no state received yet on {self.state_topic}",
            fix=f"the device has not reported since picoagent connected; see mosquitto_sub -v -t '{self.state_topic}'",
        )


def _template(source: str) -> ValueTemplate | None:
    """The parsed template (the config checks have parsed it once already), None when none is given."""
    return parse_template(source) if source else None


def _build(wiring: Wiring, buses: Buses) -> Sensor:
    return MqttDevice(buses.link("mqtt"), wiring)


def _variant(wiring: Wiring) -> DriverSpec:
    """The spec of this device's kind (the config checks have made sure it is one of KINDS)."""
    if wiring.kind == "sensor":
        return DriverSpec("mqtt", "sensor", "mqtt", (wiring.quantity or "value",), _build)
    return _BY_KIND[wiring.kind]


_BY_KIND: dict[str, DriverSpec] = {
    "light": DriverSpec("mqtt", "dimmer", "mqtt", ("state", "brightness"), _build, sets=("state", "brightness")),
    "switch": DriverSpec("mqtt", "switch", "mqtt", ("state",), _build, sets=("state",)),
    "binary_sensor": DriverSpec("mqtt", "input", "mqtt", ("state",), _build),
}
# The table's entry: what every mqtt device can be at most; each device's own is its variant.
SPEC = DriverSpec("mqtt", "switch", "mqtt", ("state",), _build, sets=("state", "brightness"), variant=_variant)
