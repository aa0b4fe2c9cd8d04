"""The I2C scan (i2cdetect's safe default mode) with its driver suggestions, and trying a device not in the config.

On the simulated bus: a BME280 at 0x76, an SHT31 at 0x44, a BH1750 at 0x5C (in 0x50-0x5F, where a receive
byte is used instead of a quick write) and a chip at 0x68 a kernel driver owns, which nothing may touch.
The real bus's probe runs against a stand-in for smbus2 and the kernel's ioctl, so its errno handling is
tested here too. The CLI, the API (by scope) and the trial of a device go through their real edges.
"""

from __future__ import annotations

import asyncio
import errno
import json
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.openapi import openapi_document
from appliance.channels.web.state import WebState
from appliance.cli import main
from appliance.cli.devices import scan_table
from appliance.config import CHECKOUT_CONFIG, Config, DeviceConfig, load_config
from appliance.config.edit import FieldError
from appliance.config.trial import check_definition
from appliance.errors import ConfigError
from appliance.hardware import trial
from appliance.hardware.backends import SimulatedBackend
from appliance.hardware.buses import SMBusI2C
from appliance.hardware.scan import command_for, scan_bus
from appliance.hardware.sim.bh1750 import BH1750Chip
from appliance.hardware.sim.bme280 import BME280Chip
from appliance.hardware.sim.buses import SimulatedI2CBus
from appliance.hardware.sim.sht31 import SHT31Chip
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.helpers import config_file, free_port, picoagent

OWNED = 0x68  # an RTC with its kernel driver bound (dtoverlay=i2c-rtc): i2cdetect shows UU


class RecordingChip:
    """A chip that records every access that reaches it, whatever kind."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def read(self, register: int, length: int) -> bytes:
        self.calls.append(f"read {register:#04x}")
        return bytes(length)

    def write(self, register: int, data: bytes) -> None:
        self.calls.append(f"write {register:#04x}")

    def read_bytes(self, length: int) -> bytes:
        self.calls.append("read_bytes")
        return bytes(length)

    def write_bytes(self, data: bytes) -> None:
        self.calls.append("write_bytes")


def populate(bus: SimulatedI2CBus) -> RecordingChip:
    """The test bench: BME280 0x76 (unless placed already), SHT31 0x44, BH1750 0x5C, an owned chip at 0x68."""
    if 0x76 not in bus.chips:
        bus.attach(0x76, BME280Chip())
    bus.attach(0x44, SHT31Chip())
    bus.attach(0x5C, BH1750Chip())
    owned = RecordingChip()
    bus.attach(OWNED, owned)
    bus.claim(OWNED)
    return owned


def sim_bus(backend: SimulatedBackend, number: int = 1) -> SimulatedI2CBus:
    bus = backend.i2c(number)
    assert isinstance(bus, SimulatedI2CBus)
    return bus


def shown(scan: Any) -> list[tuple[str, str, tuple[str, ...], str]]:
    return [(f"0x{r.address:02x}", r.state, r.drivers, r.configured) for r in scan.rows]


# --- the scan -----------------------------------------------------------------------------------------


def test_the_scan_finds_the_sensors_suggests_their_drivers_and_never_touches_an_owned_address(config: Config) -> None:
    backend = SimulatedBackend()
    backend.prepare(config.devices)  # the shipped config's living_room: a BME280 at 0x76 on bus 1
    bus = sim_bus(backend)
    owned = populate(bus)

    scan = scan_bus(backend, config.devices, 1)

    assert shown(scan) == [
        ("0x44", "found", ("sht31",), ""),
        ("0x5c", "found", ("bh1750",), ""),
        ("0x68", "busy", (), ""),
        ("0x76", "found", ("bme280",), "living_room"),
    ]
    assert scan.found == [0x44, 0x5C, 0x76]
    assert owned.calls == []  # nothing reached the chip a kernel driver owns
    assert [entry for entry in bus.log if entry[1] == OWNED] == []  # nor the wire
    assert scan.as_dict()["addresses"][0] == {
        "address": 0x44,
        "hex": "0x44",
        "state": "found",
        "probe": "quick write",
        "drivers": ["sht31"],
        "configured": None,
        "detail": None,
    }


def test_each_address_is_probed_once_and_eeprom_ranges_with_a_receive_byte(config: Config) -> None:
    backend = SimulatedBackend()
    bus = sim_bus(backend)
    populate(bus)

    scan = scan_bus(backend, {}, 1)

    probed = {address: op for op, address, _, _ in bus.log}
    assert len(bus.log) == len(probed) == 0x77 - 0x08 + 1 - 1  # 0x08-0x77, each once, but the owned one
    assert min(probed) == 0x08 and max(probed) == 0x77  # the reserved 0x00-0x07 and 0x78-0x7F are left alone
    readers = sorted(a for a, op in probed.items() if op == "read_byte")
    assert readers == [*range(0x30, 0x38), *range(0x50, 0x60)]
    assert {op for a, op in probed.items() if a not in readers} == {"quick"}
    assert probed[0x5C] == "read_byte" and probed[0x44] == "quick" and probed[0x76] == "quick"
    assert [(r.address, r.command) for r in scan.rows if r.state == "found"] == [
        (0x44, "quick"),
        (0x5C, "read"),
        (0x76, "quick"),
    ]
    assert command_for(0x2F) == "quick" and command_for(0x30) == "read" and command_for(0x60) == "quick"


def test_a_bus_error_is_reported_not_raised_and_a_missing_configured_device_shows(config: Config) -> None:
    backend = SimulatedBackend()
    bus = sim_bus(backend)
    populate(bus)
    bus.faults = {0x20: errno.EAGAIN, 0x21: errno.EREMOTEIO, 0x22: errno.ETIMEDOUT, 0x23: errno.ENXIO}
    devices = {"porch": DeviceConfig(driver="sht31", bus=1, address=0x45)}  # configured, not wired

    scan = scan_bus(backend, devices, 1)

    rows = {f"0x{r.address:02x}": r for r in scan.rows}
    assert rows["0x20"].state == "error" and rows["0x20"].detail == "Resource temporarily unavailable"
    assert not {"0x21", "0x22", "0x23"} & set(rows)  # "no device" errors are just nothing there
    assert (rows["0x45"].state, rows["0x45"].configured, rows["0x45"].drivers) == ("absent", "porch", ("sht31",))
    assert [a for a in range(0x08, 0x78) if a not in (OWNED,)] == sorted(a for _, a, _, _ in bus.log)  # went on


@dataclass
class FakeSMBus:
    """What SMBusI2C uses of smbus2's SMBus: its fd, its adapter's functions, quick write and receive byte."""

    funcs: int
    answers: dict[int, int]  # address -> 0 (acknowledges) or the errno the transfer fails with
    fd: int = 99

    def __post_init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    def _transfer(self, what: str, address: int) -> int:
        self.sent.append((what, address))
        code = self.answers.get(address, errno.EREMOTEIO)  # the Pi's i2c-bcm2835 on a NACK
        if code:
            raise OSError(code, "")
        return 0

    def write_quick(self, address: int, force: bool | None = None) -> None:
        assert force is False  # never I2C_SLAVE_FORCE
        self._transfer("quick", address)

    def read_byte(self, address: int, force: bool | None = None) -> int:
        assert force is False
        return self._transfer("read_byte", address)


def test_the_real_bus_leaves_a_kernel_owned_address_alone_and_tells_errors_from_absence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import fcntl

    from smbus2.smbus2 import I2C_SLAVE, I2cFunc

    selected: list[int] = []

    def ioctl(fd: int, request: int, address: int) -> None:
        assert (fd, request) == (99, I2C_SLAVE)
        if address == OWNED:
            raise OSError(errno.EBUSY, "Device or resource busy")
        selected.append(address)

    monkeypatch.setattr(fcntl, "ioctl", ioctl)
    bus = object.__new__(SMBusI2C)
    bus.number, bus.lock = 1, threading.Lock()
    fake = FakeSMBus(int(I2cFunc.SMBUS_QUICK | I2cFunc.SMBUS_READ_BYTE), {0x76: 0, 0x50: 0, 0x20: errno.EAGAIN})
    bus._bus = fake  # type: ignore[assignment]

    assert bus.detect(OWNED, "quick").state == "busy"
    assert OWNED not in selected and fake.sent == []  # refused at the ioctl: nothing was sent
    assert bus.detect(0x76, "quick").state == "found" and fake.sent[-1] == ("quick", 0x76)
    assert bus.detect(0x50, "read").state == "found" and fake.sent[-1] == ("read_byte", 0x50)
    assert bus.detect(0x44, "quick").state == "absent"
    failed = bus.detect(0x20, "quick")
    assert (failed.state, failed.detail) == ("error", "Resource temporarily unavailable")
    fake.funcs = int(I2cFunc.SMBUS_READ_BYTE)  # an adapter without quick write: i2cdetect skips those addresses
    sent = len(fake.sent)
    assert bus.detect(0x76, "quick").state == "skipped" and len(fake.sent) == sent


# --- the command line ---------------------------------------------------------------------------------


def test_the_scan_table_reads_as_a_person_reads_it(config: Config) -> None:
    backend = SimulatedBackend()
    backend.prepare(config.devices)
    bus = sim_bus(backend)
    populate(bus)
    bus.faults = {0x20: errno.EAGAIN}

    lines = scan_table(scan_bus(backend, config.devices, 1).as_dict()).splitlines()

    assert lines[0] == "I2C bus 1 (simulated), 0x08-0x77 probed as i2cdetect does: 3 devices answer"
    rows = [" ".join(line.split()) for line in lines[1:]]  # as read: the columns' padding aside
    assert rows == [
        "address state drivers that fit configured device",
        "0x20 error (none known) - (the bus said: Resource temporarily unavailable)",
        "0x44 found sht31 -",
        "0x5c found bh1750 -",
        "0x68 busy (none known) - (a kernel driver owns this address: not probed)",
        "0x76 found bme280 living_room",
        "add one under devices: in the config (driver, bus, address), or try it: POST /api/devices/try",
    ]
    assert len({line.index("found") for line in lines if " found " in line}) == 1  # the columns line up


def test_devices_scan_with_no_daemon_scans_the_bus_itself(tmp_path: Path) -> None:
    extra = "\n".join(["", "  shed:", "    driver: sht31", "    bus: 1", "    address: 0x44", ""])
    folder = tmp_path / "config"
    config = config_file(folder, {"\n  doorbell:\n": extra + "  doorbell:\n"})
    where = ["--config", config, "--data-dir", tmp_path / "data"]

    done = picoagent(*where, "devices", "scan", "--bus", "1", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("probed as i2cdetect does: 2 devices answer"), done.stdout
    assert lines[2].split() == ["0x44", "found", "sht31", "shed"]
    assert lines[3].split() == ["0x76", "found", "bme280", "living_room"]
    assert picoagent(*where, "hw", "scan", "--bus", "1", cwd=tmp_path).stdout == done.stdout  # the older name


# --- the web API --------------------------------------------------------------------------------------


@dataclass
class Site:
    state: WebState  # an app is built on it for each event loop (aiohttp serves an app on one loop only)
    runtime: Runtime
    tokens: dict[str, str]
    bus: SimulatedI2CBus
    owned: RecordingChip


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    shutil.copy(CHECKOUT_CONFIG, tmp_path / "picoagent.yaml")
    config = load_config(tmp_path / "picoagent.yaml", data_dir=tmp_path / "data")
    del config.devices["living_room"]  # the BME280 is on the bus, but not in the config yet
    config.events = []  # its rule named it
    runtime = Runtime.open(config, model=ScriptedModel())
    auth = Auth(runtime.db)
    tokens = {scope: auth.add_token(f"{scope}-token", scope=scope) for scope in ("read", "devices", "admin")}
    assert runtime.devices is not None and isinstance(runtime.devices.backend, SimulatedBackend)
    bus = sim_bus(runtime.devices.backend)
    owned = populate(bus)
    yield Site(WebState(runtime, auth), runtime, tokens, bus, owned)
    runtime.close()


Request = tuple[str, str, str, Any]  # (method, path, the token's scope, JSON body or None)


def calls(site: Site, *requests: Request) -> list[tuple[int, Any]]:
    """Each request through the real server and middleware, in order: (status, JSON answer)."""

    async def main() -> list[tuple[int, Any]]:
        answers = []
        async with TestClient(TestServer(build_app(site.state))) as client:
            for method, path, scope, body in requests:
                headers = {"Authorization": f"Bearer {site.tokens[scope]}"}
                answer = await client.request(method, path, json=body, headers=headers)
                answers.append((answer.status, await answer.json()))
        return answers

    return asyncio.run(main())


def trying(definition: Any, scope: str = "admin") -> Request:
    return ("POST", "/api/devices/try", scope, definition)


def test_the_scan_over_http_needs_admin(site: Site) -> None:
    scan = ("GET", "/api/devices/scan?bus=1")
    read, devices = calls(site, (*scan, "read", None), (*scan, "devices", None))
    assert (read[0], read[1]["needed"], devices[0]) == (403, "admin", 403), (read, devices)
    assert site.bus.log == []  # a refused scan probed nothing

    bad_bus = ("GET", "/api/devices/scan?bus=seven", "admin", None)
    (status, body), (bad, _) = calls(site, (*scan, "admin", None), bad_bus)

    assert status == 200, body
    found = {row["hex"]: (row["state"], row["drivers"], row["configured"]) for row in body["addresses"]}
    assert found == {
        "0x44": ("found", ["sht31"], None),
        "0x5c": ("found", ["bh1750"], None),
        "0x68": ("busy", [], None),
        "0x76": ("found", ["bme280"], None),
    }
    assert site.owned.calls == []
    assert bad == 400
    operation = openapi_document()["paths"]["/api/devices/scan"]["get"]
    assert operation["x-scope"] == "admin" and operation["parameters"][0]["name"] == "bus"


def test_try_reads_a_bme280_not_in_the_config_once(site: Site) -> None:
    bme280 = {"driver": "bme280", "bus": 1, "address": 0x76}
    (refused, _), (status, body) = calls(site, trying(bme280, "devices"), trying(bme280))

    assert refused == 403  # driving a device that is no configured one is the owner's
    assert status == 200, body
    assert (body["action"], body["kind"], body["where"]) == ("read", "sensor", "i2c-1 0x76")
    readings = {r["quantity"]: (round(r["value"], 1), r["unit"]) for r in body["readings"]}
    assert readings == {"temperature": (21.5, "°C"), "humidity": (45.0, "%"), "pressure": (1013.2, "hPa")}
    forced = [e for e in site.bus.log if e[:3] == ("write", 0x76, 0xF2)]  # ctrl_hum + ctrl_meas: one measurement
    assert len(forced) == 1
    assert site.runtime.devices is not None and len(site.runtime.devices.devices) == 4  # it did not stay


def test_try_pulses_a_relay_once_and_keeps_the_approval_rule(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trial, "PULSE_S", 0.0)
    assert site.runtime.devices is not None
    factory = site.runtime.devices.backend.pin_factory

    ((refused, why),) = calls(site, trying({"driver": "relay", "pin": 6, "approval": "required"}))
    assert refused == 403 and "approval" in why["error"] and "nothing was switched" in why["error"], why
    assert not any(6 in info.names for info in factory.pins)  # the pin was never even opened

    ((status, body),) = calls(site, trying({"driver": "relay", "pin": 6}))

    assert status == 200, body
    assert body["action"] == "pulse" and body["where"] == "gpio 6"
    assert body["readings"] == [{"quantity": "state", "value": True, "unit": ""}]
    assert body["after"] == [{"quantity": "state", "value": False, "unit": ""}]
    assert [bool(s.state) for s in factory.pin(6).states] == [False, True, False]  # on once, then off


@pytest.mark.parametrize(
    ("definition", "field", "says"),
    [
        ({"driver": "relay", "pin": 17}, "pin", "pin: GPIO 17 is already used by porch_light"),
        ({"driver": "bme280", "bus": 1, "address": 0x80}, "address", "address: expected a 7-bit I2C address"),
        ({"driver": "servo", "pin": 6}, "driver", 'driver: expected one of "relay"'),
        ({"driver": "bme280", "bus": 1}, "address", "address: a bme280 device needs an address"),
        ({"driver": "relay", "pin": 6, "colour": "red"}, "colour", "colour: unknown key"),
        ({"pin": 6}, "driver", "driver: required, but missing"),
    ],
)
def test_a_bad_definition_is_a_400_naming_its_field(
    site: Site, definition: dict[str, Any], field: str, says: str
) -> None:
    ((status, body),) = calls(site, trying(definition))
    assert status == 400, body
    assert body["key"] == field and body["error"].startswith(says), body
    assert "new_device" not in body["error"]  # the stand-in name the check used stays inside


def test_a_definition_is_checked_beside_the_configured_devices(config: Config) -> None:
    with pytest.raises(FieldError) as taken:
        check_definition(config, {"driver": "bme280", "bus": 1, "address": 0x76})
    assert taken.value.key == "address" and "already used by living_room" in taken.value.message
    assert check_definition(config, {"driver": "bme280", "bus": 1, "address": 0x77}).address == 0x77
    assert "new_device_1" not in config.devices  # the config itself is unchanged
    with pytest.raises(ConfigError, match=r"^devices\.scan: scan is taken by the web API"):
        config.devices["scan"] = DeviceConfig(driver="relay", pin=6)
        check_definition(config, {"driver": "relay", "pin": 7})


def test_the_cli_asks_the_running_daemon(site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With the daemon up, `devices scan` is its answer: the SHT31 it shows is on the daemon's bus only."""
    port, loop = free_port(), asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = web.AppRunner(build_app(site.state))
    asyncio.run_coroutine_threadsafe(runner.setup(), loop).result()
    asyncio.run_coroutine_threadsafe(web.TCPSite(runner, "127.0.0.1", port).start(), loop).result()
    try:
        data = Path(site.runtime.config.data_dir)
        (data / "daemon.json").write_text(json.dumps({"host": "127.0.0.1", "port": port}))
        (data / "cli.token").write_text(site.tokens["admin"])
        folder = tmp_path / "cli"
        folder.mkdir()
        assert main(["--config", str(site.runtime.config.source), "--data-dir", str(data), "devices", "scan"]) == 0
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("3 devices answer"), out
    assert out[2].split() == ["0x44", "found", "sht31", "-"]
