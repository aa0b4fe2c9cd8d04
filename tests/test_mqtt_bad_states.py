"""States no device sends but anyone on the broker can: numbers out of range, NaN, JSON nested past Python's
recursion limit. Each is refused as a clear reading error (the device shows as unknown, never as ``inf``),
logged as one line, at most one per device per minute with a count of the ones left out; never a traceback.

The value templates' filters on their own, then the same payloads through a real mosquitto.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from appliance.hardware.buses import HardwareError
from appliance.hardware.drivers import mqtt as mqtt_driver
from appliance.hardware.drivers.base import Reading
from appliance.hardware.drivers.template import TemplateError, parse_template
from tests.helpers import eventually
from tests.mqtt_broker import Broker, Watcher
from tests.test_mqtt_devices import DEVICES, connected, mqtt_config

DEEP = b"[" * 100_000 + b"]" * 100_000  # deeper than Python's recursion limit
HUGE = b"1" + b"0" * 400  # an integer no float holds
# A sensor without a value_template: its payload is the number itself.
ATTIC = """  attic_temperature:
    driver: mqtt
    kind: sensor
    state_topic: attic/temperature
    quantity: temperature
    unit: °C
"""


# --- the filters ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "payload"),
    [
        ("{{ value | int }}", b"1e999"),
        ("{{ value | int }}", b"NaN"),
        ("{{ value | int }}", b"-inf"),
        ("{{ value | int }}", b"9" * 5000),  # past int()'s digit limit as text, and inf as a float
        ("{{ value | float }}", b"1e999"),
        ("{{ value | float }}", b"nan"),
        ("{{ value | round(1) }}", b"Infinity"),
        ("{{ value_json.t | int }}", b'{"t": NaN}'),
        ("{{ value_json.t | int }}", b'{"t": 1e999}'),
        ("{{ value_json.t | round }}", b'{"t": -Infinity}'),
        ("{{ value_json.t | float }}", b'{"t": ' + HUGE + b"}"),
        ("{{ value_json.t | int }}", b'{"t": ' + HUGE + b"}"),
        ("{{ value_json.t }}", DEEP),
        ("{{ value_json.t | float }}", b'{"t": ' + DEEP + b"}"),
        ("{{ value_json.t | lower }}", b'{"t": ' + b"[" * 900 + b"]" * 900 + b"}"),
    ],
)
def test_a_number_filter_refuses_what_is_no_finite_number_as_a_template_error(template: str, payload: bytes) -> None:
    with pytest.raises(TemplateError) as caught:  # nothing else: OverflowError, a bare ValueError, RecursionError
        parse_template(template).render(payload)
    said = str(caught.value)
    assert type(caught.value) is TemplateError and template in said
    assert "\n" not in said and len(said) < 300, said  # one line, the payload cut short


def test_the_number_filters_still_read_every_finite_number() -> None:
    assert parse_template("{{ value | int }}").render(b"21.7") == 21
    assert parse_template("{{ value | round(1) }}").render(b" 21.46\n") == 21.5
    assert parse_template("{{ value_json.t | float }}").render(b'{"t": 1e308}') == 1e308
    assert parse_template("{{ value_json.t | int }}").render(b'{"t": -3}') == -3
    assert parse_template("{{ value_json.t | float }}").render(b'{"t": 12345678901234567890}') == 1.2345678901234567e19
    assert parse_template("{{ value_json.t | lower }}").render(b'{"t": "ON"}') == "on"
    assert parse_template("{{ value_json.t }}").render(b'{"t": [[1]]}') == [[1]]


# --- over a real broker -------------------------------------------------------------------------------------------


class Clock:
    """The devices' clock for their log throttle: moved by the test, not by sleeping a minute."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _reading(devices: Any, name: str) -> list[Reading] | HardwareError:
    try:
        return list(devices.read_sync(name))
    except HardwareError as exc:
        return exc


async def _reads(devices: Any, name: str, expected: list[Reading]) -> None:
    """Wait until ``name`` reads ``expected``."""
    await eventually(lambda: _reading(devices, name) == expected, 5, f"{name} reading {expected}")


async def _refuses(devices: Any, name: str) -> HardwareError:
    """Wait until a read of ``name`` is refused; the error it is refused with."""
    await eventually(lambda: isinstance(_reading(devices, name), HardwareError), 5, f"{name} refusing its state")
    refused = _reading(devices, name)
    assert isinstance(refused, HardwareError)
    return refused


def test_bad_states_on_the_broker_are_refused_cleanly_and_logged_once_a_minute(
    tmp_path: Path, broker: Broker, watcher: Watcher, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    clock = Clock()
    monkeypatch.setattr(mqtt_driver.MqttDevice, "clock", clock)
    runtime = Runtime.open(mqtt_config(tmp_path, broker.port, DEVICES + ATTIC), model=ScriptedModel())
    # device, its state topic, a good state and what it reads as, then the bad states
    cases: list[tuple[str, str, bytes, list[Reading], list[bytes]]] = [
        (
            "garage_climate",  # {{ value_json.temperature | round(1) }}
            "zigbee2mqtt/garage_climate",
            b'{"temperature": 21.46}',
            [Reading("temperature", 21.5, "°C")],
            [
                b'{"temperature": 1e999}',
                b'{"temperature": NaN}',
                b'{"temperature": -Infinity}',
                b'{"temperature": ' + HUGE + b"}",
                DEEP,
            ],
        ),
        (
            "attic_temperature",  # no template: the payload is the number
            "attic/temperature",
            b"19.0",
            [Reading("temperature", 19.0, "°C")],
            [b"1e999", b"NaN", b"-inf", HUGE * 12],
        ),
        (
            "garage_light",  # {{ value_json.brightness }} scaled from 0-254
            "zigbee2mqtt/garage_light",
            b'{"state": "ON", "brightness": 127}',
            [Reading("state", True, ""), Reading("brightness", 50.0, "%")],
            [
                b'{"state": "ON", "brightness": 1e999}',
                b'{"state": "ON", "brightness": NaN}',
                b'{"state": "ON", "brightness": ' + HUGE + b"}",
                DEEP,
            ],
        ),
        (
            "garage_motion",  # {{ value_json.occupancy }}
            "zigbee2mqtt/garage_motion",
            b'{"occupancy": true}',
            [Reading("state", True, "")],
            [DEEP, b'{"occupancy": ' + b"[" * 900 + b"]" * 900 + b"}"],
        ),
    ]

    async def main() -> None:
        devices = runtime.devices
        link = await connected(runtime)
        try:
            for name, topic, good, reads, bad in cases:
                for payload in bad:
                    watcher.publish(topic, good)
                    await _reads(devices, name, reads)
                    watcher.publish(topic, payload)
                    refused = await _refuses(devices, name)
                    assert topic in refused.message and "\n" not in refused.message
                    assert len(refused.message) < 300, refused.message  # one readable line, the payload cut short
            # A minute later, the next bad state logs a line again, with the count of those left out.
            clock.now += 61
            watcher.publish("attic/temperature", b"nan")
            watcher.publish("attic/temperature", b"19.0")
            await _reads(devices, "attic_temperature", [Reading("temperature", 19.0, "°C")])
        finally:
            await link.stop()

    with caplog.at_level(logging.INFO):
        try:
            asyncio.run(main())
        finally:
            runtime.close()
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], "a traceback was logged"
    lines = {name: [r.getMessage() for r in caplog.records if topic in r.getMessage()] for name, topic, *_ in cases}
    for name, topic, *_ in cases:
        first, *rest = lines[name]
        assert topic in first and "\n" not in first and len(first) < 400, first
        if name != "attic_temperature":
            assert rest == [], rest  # the other bad states of that minute are not logged
    [_, again] = lines["attic_temperature"]
    assert "3 more" in again, again  # the attic's 4 bad states of the first minute: one logged, 3 left out


class Link:
    """The few parts of the MQTT link a device uses to read: the subscriptions, to call as the link does."""

    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def subscribe(self, topic: str, callback: Any) -> None:
        self.handlers[topic] = callback


def test_a_bug_a_state_finds_makes_the_state_unknown_and_its_traceback_is_rate_limited_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setattr(mqtt_driver.MqttDevice, "clock", clock)
    wiring = mqtt_config(tmp_path, 1883, DEVICES + ATTIC).devices["attic_temperature"]
    link = Link()
    device = mqtt_driver.MqttDevice(link, wiring)
    link.handlers["attic/temperature"]("attic/temperature", b"19.0")
    assert device.read() == [Reading("temperature", 19.0, "°C")]

    def broken(_payload: bytes) -> list[Reading]:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(device, "_decode", broken)
    with caplog.at_level(logging.WARNING):
        for _ in range(5):
            link.handlers["attic/temperature"]("attic/temperature", b"19.5")
    with pytest.raises(HardwareError, match=r"attic/temperature: the state could not be read \(ZeroDivisionError"):
        device.read()  # unknown, not the 19.0 of before
    [logged] = caplog.records  # the bug's traceback, once for the five
    assert logged.exc_info is not None and logged.exc_info[0] is ZeroDivisionError
