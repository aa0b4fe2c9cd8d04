"""Devices added, rewired and taken out of a running daemon, with no restart (appliance/reload_devices.py).

The first tests run a real `picoagent serve` on the checkout's config (hardware.backend: simulated) and change
it as a person does, through POST /api/settings; they look where a person looks: the chat's answer and its
route, `picoagent devices`, the status page's list, the config file. The last ones run the daemon in this
process, so the simulated GPIO pins (gpiozero's mock pins record their states) can be looked at.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import config_file, free_port, started, wait_healthy
from tests.test_daemon import Serve, cli
from tests.test_reload import api

STUDY = {"driver": "bme280", "bus": 1, "address": 0x77, "room": "study"}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    daemon = Serve(tmp_path, free_port())
    wait_healthy(daemon.port)
    yield daemon
    daemon.stop()


def save(serve: Serve, changes: dict[str, Any]) -> dict[str, Any]:
    """What the Settings page does: read the version, send the change."""
    version = api(serve, "/api/settings")["version"]
    return api(serve, "/api/settings", {"version": version, "set": changes})


def chat(serve: Serve, message: str) -> dict[str, Any]:
    return api(serve, "/api/chat", {"message": message, "session": "devices"})


def refused(serve: Serve, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(urllib.error.HTTPError) as caught:
        api(serve, path, body)
    return caught.value.code, json.loads(caught.value.read())


def test_a_bme280_added_in_the_settings_page_answers_how_warm_the_study_is_at_once(serve: Serve) -> None:
    """The issue's case: a BME280 added from the page, and the next question about the study is answered from it
    by the fast path (the simulated chip reads 21.5 °C), with no restart."""
    from appliance.config import load_config

    before = serve.config.read_text()
    said = save(serve, {"devices.study": STUDY})
    assert said["applied"] == ["devices.study"] and said["restart_needed"] == [] and said["refused"] == "", said
    assert "SIGHUP: device study added: i2c-1 0x77" in serve.text()

    reply = chat(serve, "how warm is it in the study?")
    assert reply["route"] == "intent", reply  # the fast path or a grounded answer: the model never ran
    assert "21.5" in reply["text"] and "°C" in reply["text"], reply["text"]

    listed = cli("devices", "list", data=serve.data, config=serve.config)
    row = [line for line in listed.stdout.splitlines() if line.split()[:1] == ["study"]]
    assert row and "sensor  i2c-1 0x77" in row[0] and row[0].endswith("· study"), listed.stdout
    assert "study: temperature: 21.5 °C" in listed.stdout, listed.stdout  # read by the daemon, which owns the bus
    read = cli("devices", "read", "study", data=serve.data, config=serve.config).stdout
    assert "temperature: 21.5 °C" in read, read
    status = api(serve, "/api/status")
    assert "study" in [d["name"] for d in status["devices"]], status["devices"]  # the status page's list
    assert status["config"]["restart_needed"] == []

    after = serve.config.read_text()
    comments = [line for line in before.splitlines() if line.lstrip().startswith("#")]
    assert [line for line in comments if line not in after.splitlines()] == []  # every comment kept
    loaded = load_config(serve.config, data_dir=serve.data)
    assert loaded.devices["study"].address == 0x77 and loaded.devices["study"].room == "study"


def test_a_relay_added_is_switched_and_one_taken_out_can_no_longer_be(serve: Serve) -> None:
    said = save(serve, {"devices.desk_lamp": {"driver": "relay", "pin": 5, "room": "study", "aliases": ["desk light"]}})
    assert said["applied"] == ["devices.desk_lamp"] and said["restart_needed"] == [], said
    reply = chat(serve, "turn on the desk light")
    assert reply["route"] == "intent" and "desk lamp is on" in reply["text"], reply
    assert "desk_lamp: state: on" in cli("devices", "read", "desk_lamp", data=serve.data, config=serve.config).stdout
    answer = api(serve, "/api/devices/desk_lamp", {"value": "off"})
    assert answer["done"] is True and answer["state"] == [{"quantity": "state", "value": False, "unit": ""}], answer

    said = save(serve, {"devices.desk_lamp": None})
    assert said["applied"] == ["devices.desk_lamp"] and said["restart_needed"] == [], said
    assert "desk_lamp" not in serve.config.read_text()
    code, error = refused(serve, "/api/devices/desk_lamp", {"value": "on"})
    assert code == 404 and "no device named 'desk_lamp'" in error["error"], error
    out = cli("devices", "set", "desk_lamp", "on", data=serve.data, config=serve.config)
    assert "no device named 'desk_lamp'" in out.stdout + out.stderr, out


def test_a_rewired_relay_is_said_to_apply_not_to_wait(serve: Serve) -> None:
    said = save(serve, {"devices.fan.pin": 5})
    assert said["applied"] == ["devices.fan.pin"] and said["restart_needed"] == [], said
    assert "SIGHUP: device fan rewired: gpio 5" in serve.text()
    assert api(serve, "/api/devices/fan", {"value": "on"})["done"] is True
    listed = cli("devices", "list", data=serve.data, config=serve.config).stdout
    assert [line for line in listed.splitlines() if line.startswith("fan ") and "gpio 5" in line], listed


# --- in this process: the pins themselves ------------------------------------------------------------------


def in_daemon(tmp_path: Path, check: Callable[[Any, Path], Awaitable[None]]) -> None:
    """Run the daemon in this process on the checkout's config, call ``check(daemon, config path)``, stop it."""
    from appliance.config import load_config
    from appliance.daemon import Daemon

    path = config_file(tmp_path, {"preload: true": "preload: false"})
    data = tmp_path / "data"

    async def main() -> None:
        daemon = Daemon(load_config(path, data_dir=data), host="127.0.0.1", port=0, data_dir_override=str(data))
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        try:
            await check(daemon, path)
        finally:
            daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def pin_state(daemon: Any, number: int) -> bool:
    return bool(daemon.runtime.devices.backend.pin_factory.pin(number).state)


def test_a_rewired_relay_switches_its_new_pin_and_frees_the_old_one(tmp_path: Path) -> None:
    async def check(daemon: Any, path: Path) -> None:
        from gpiozero import OutputDevice

        devices = daemon.runtime.devices
        await devices.set("fan", "on", requested_by="test")
        assert pin_state(daemon, 27)
        edit(path, "    pin: 27\n", "    pin: 5\n")
        daemon.reload()
        assert daemon.reloaded.restart_needed == []
        assert not pin_state(daemon, 27)  # released: the old driver closed, its pin dropped
        # the simulated switch starts at its kept state (on), as at a start; then a write drives the new pin
        assert pin_state(daemon, 5)
        await devices.set("fan", "off", requested_by="test")
        assert not pin_state(daemon, 5)
        await devices.set("fan", "on", requested_by="test")
        assert pin_state(daemon, 5) and not pin_state(daemon, 27)
        freed = OutputDevice(27, pin_factory=devices.backend.pin_factory)  # GPIOPinInUse if the old one held it
        freed.close()
        assert devices.get("fan").where == "gpio 5" and daemon.config.devices["fan"].pin == 5

    in_daemon(tmp_path, check)


def test_two_relays_swapping_pins_in_one_save_both_switch_their_new_pin(tmp_path: Path) -> None:
    async def check(daemon: Any, path: Path) -> None:
        devices = daemon.runtime.devices
        edit(path, "    pin: 17\n", "    pin: 99\n")
        edit(path, "    pin: 27\n", "    pin: 17\n")
        edit(path, "    pin: 99\n", "    pin: 27\n")
        daemon.reload()
        assert daemon.reloaded.restart_needed == [] and daemon.reloaded.refused == ""
        await devices.set("porch_light", "on", requested_by="test")
        assert pin_state(daemon, 27) and not pin_state(daemon, 17)
        await devices.set("fan", "on", requested_by="test")
        assert pin_state(daemon, 17)

    in_daemon(tmp_path, check)


def test_a_device_that_cannot_be_built_waits_named_and_a_rewired_one_keeps_its_old_wiring(tmp_path: Path) -> None:
    """An SHT31 answers at 0x77 where the new BME280 is said to be: the BME280 is not built and its key waits
    for the restart with the reason logged; the living room sensor moved there keeps reading at 0x76."""

    async def check(daemon: Any, path: Path) -> None:
        from appliance.hardware.sim import make_chip

        devices = daemon.runtime.devices
        devices.backend.i2c(1).attach(0x77, make_chip("appliance.hardware.sim.sht31:SHT31Chip"))
        text = path.read_text().replace("devices:\n", "devices:\n  study: {driver: bme280, bus: 1, address: 0x77}\n", 1)
        path.write_text(text)
        daemon.reload()
        assert daemon.reloaded.restart_needed == ["devices.study"]
        assert "study" not in devices.devices and "study" not in daemon.config.devices
        edit(path, "  study: {driver: bme280, bus: 1, address: 0x77}\n", "")
        edit(path, "    address: 0x76\n", "    address: 0x77\n")
        daemon.reload()
        assert daemon.reloaded.restart_needed == ["devices.living_room.address"]
        assert devices.get("living_room").where == "i2c-1 0x76"
        readings = await devices.read("living_room")
        assert [r.quantity for r in readings][:1] == ["temperature"]
        edit(path, "    address: 0x77\n", "    address: 0x76\n")  # put back: nothing waits any more
        daemon.reload()
        assert daemon.reloaded.restart_needed == []

    in_daemon(tmp_path, check)


def test_a_daemon_started_with_no_devices_opens_them_at_the_reload_that_adds_the_first(tmp_path: Path) -> None:
    """The Pi image's config declares no devices: the first one added is still known at once, to the fast path,
    the device tools, the job runner and the approvals."""
    from appliance.config import CronJob, load_config
    from appliance.daemon import Daemon

    path = config_file(tmp_path, {"preload: true": "preload: false"})
    text = path.read_text()
    start, end = text.index("\ndevices:\n") + 1, text.index("  # A light Home Assistant knows")
    text = text[:start] + "devices: {}\n" + text[end:]
    rule = "  - when: living_room.temperature > 28\n    message: The living room is over 28 °C.\n"
    path.write_text(text.replace("events:\n" + rule + "    every_s: 60\n    cooldown_s: 1800\n", "events: []\n"))
    data = tmp_path / "data"

    async def main() -> None:
        daemon = Daemon(load_config(path, data_dir=data), host="127.0.0.1", port=0, data_dir_override=str(data))
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        try:
            runtime = daemon.runtime
            assert runtime.devices is None and "device_set" not in runtime.tools.tools
            added = "devices:\n  study: {driver: bme280, bus: 1, address: 0x77, room: study}\n"
            edit(path, "devices: {}\n", added + "  desk_lamp: {driver: relay, pin: 5, room: study}\n")
            daemon.reload()
            assert daemon.reloaded.restart_needed == []
            assert runtime.devices is not None and set(runtime.devices.devices) == {"study", "desk_lamp"}
            assert "device_read" in runtime.tools.tools and runtime.agent.devices is runtime.devices
            record = await runtime.agent.turn("how warm is it in the study?", channel="api", chat_id="t")
            assert record.route == "intent" and "21.5" in record.text, (record.route, record.text)
            assert daemon.cron is not None and "desk_lamp" in daemon.cron.devices  # a job made in chat may set it
            said = await daemon.cron.run_job(CronJob(id="lamp", schedule="daily 07:00", device="desk_lamp", value="on"))
            assert "desk lamp is on" in said and pin_state(daemon, 5), said
        finally:
            daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())


def test_mqtt_discovery_announces_a_device_added_and_removes_one_taken_out(tmp_path: Path, broker: Any) -> None:
    """With mqtt on: the BME280 added is announced to Home Assistant with its state, the relay added is switched
    by its command topic, and the doorbell taken out has its entity removed (an empty retained config)."""
    from appliance.config import load_config
    from appliance.daemon import Daemon
    from tests.helpers import eventually
    from tests.mqtt_broker import Watcher

    host = "  # The broker's host"
    mqtt = {"  enabled: false\n" + host: "  enabled: true\n" + host, "  port: 1883\n": f"  port: {broker.port}\n"}
    path = config_file(tmp_path, {"preload: true": "preload: false", **mqtt})
    data = tmp_path / "data"
    watcher = Watcher(broker, "#")
    doorbell = "homeassistant/binary_sensor/picoagent/doorbell/config"
    study = "homeassistant/sensor/picoagent/study_temperature/config"

    async def main() -> None:
        daemon = Daemon(load_config(path, data_dir=data), host="127.0.0.1", port=0, data_dir_override=str(data))
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        try:
            await eventually(lambda: bool(watcher.latest(doorbell)), what="the doorbell announced")
            edit(path, "  doorbell:\n    driver: button\n    pin: 22\n    room: hallway\n", "")
            edit(path, "devices:\n", "devices:\n  study: {driver: bme280, bus: 1, address: 0x77, room: study}\n")
            edit(path, "devices:\n", "devices:\n  desk_lamp: {driver: relay, pin: 5, room: study}\n")
            daemon.reload()
            assert daemon.reloaded.restart_needed == []
            await eventually(lambda: watcher.latest(study) is not None, what="the study's temperature announced")
            assert json.loads(watcher.latest(study) or b"{}")["unit_of_measurement"] == "°C"
            state = "picoagent/study/state"
            await eventually(lambda: watcher.latest(state) is not None, what="the study's state")
            assert json.loads(watcher.latest(state) or b"{}")["temperature"] == 21.5
            await eventually(lambda: watcher.latest(doorbell) == b"", what="the doorbell's entity removed")
            watcher.publish("picoagent/desk_lamp/set", "ON")
            await eventually(lambda: pin_state(daemon, 5), what="the desk lamp switched by its command topic")
        finally:
            daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())
    watcher.close()
