"""Named devices on the simulated backend: config checks, policy, approvals, rate limits, events."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.config import CHECKOUT_CONFIG, Config, DeviceConfig, EventRule, I2CAllow, SPIAllow, load_config
from appliance.errors import ConfigError, PolicyError, UnknownDeviceError, UsageError
from appliance.hardware.approvals import ApprovalError, ApprovalStore
from appliance.hardware.backends import SimulatedBackend, make_backend
from appliance.hardware.devices import DeviceRegistry
from appliance.hardware.drivers import DRIVERS
from appliance.hardware.events import EventBus, ThresholdWatcher, device_history
from appliance.hardware.policy import RawBusPolicy
from appliance.hardware.sim.buses import SimulatedI2CBus, SimulatedSPIBus
from appliance.memory.db import Database
from appliance.runtime import tool_registry
from tests.fakes.clock import ManualClock
from tests.helpers import picoagent, wait_for

ROOT = Path(__file__).resolve().parent.parent


class Clock(ManualClock):
    start = 1_000.0


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def registry(config: Config, tmp_path: Path, clock: Clock) -> Iterator[DeviceRegistry]:
    config.devices["gate"] = DeviceConfig(driver="relay", pin=5, approval="required", room="garden")
    config.devices["lamp"] = DeviceConfig(driver="led", pin=12, room="kitchen")
    db = Database(tmp_path / "hw.db")
    devices = DeviceRegistry(config, SimulatedBackend(), ApprovalStore(db, timeout_s=60, clock=clock))
    yield devices
    devices.close()
    db.close()


def pin_state(devices: DeviceRegistry, pin: int) -> bool:
    return bool(devices.backend.pin_factory.pin(pin).state)


# --- config -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("  lamp2:\n    driver: relay\n    pin: 17\n", "devices.lamp2.pin: GPIO 17 is already used by porch_light"),
        (
            "  t2:\n    driver: bme280\n    bus: 1\n    address: 0x80\n",
            "devices.t2.address: expected a 7-bit I2C address",
        ),
        (
            "  t3:\n    driver: bme280\n    bus: 1\n    address: 0x76\n",
            "I2C bus 1 address 0x76 is already used by living_room",
        ),
        ("  x:\n    driver: servo\n    pin: 5\n", 'devices.x.driver: expected one of "relay"'),
        ("  y:\n    driver: relay\n", "devices.y.pin: a relay device needs a pin"),
        ("  z:\n    driver: relay\n    pin: 40\n", "devices.z.pin: expected a GPIO number from 0 to 27"),
        ("  w:\n    driver: bh1750\n    bus: 1\n    address: 0x23\n    allow: [set]\n", "a bh1750 cannot be set"),
        ("  Bad-Name:\n    driver: relay\n    pin: 6\n", "devices.Bad-Name: device names are lower-case"),
        (
            "  a:\n    driver: mcp3008\n    bus: 0\n    device: 0\n    channel: 9\n",
            "expected an ADC channel from 0 to 7",
        ),
    ],
)
def test_bad_devices_are_refused_by_name(tmp_path: Path, extra: str, message: str) -> None:
    path = tmp_path / "picoagent.yaml"
    marker = "\n# Sensor conditions"  # the new device goes last in the devices: block
    text = CHECKOUT_CONFIG.read_text().replace(marker, extra + marker, 1)
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert message in str(err.value), str(err.value)


def test_a_bad_event_rule_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "picoagent.yaml"
    path.write_text(CHECKOUT_CONFIG.read_text().replace("living_room.temperature > 28", "kitchen.temperature >> 28"))
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert "events[0].when: expected DEVICE.QUANTITY OP NUMBER" in str(err.value)


def with_devices(tmp_path: Path, devices: str) -> Config:
    """The shipped config (simulated backend) with ``devices`` (YAML lines) added to its devices: block."""
    path = tmp_path / "picoagent.yaml"
    marker = "\n# Sensor conditions"  # the new devices go last in the devices: block
    path.write_text(CHECKOUT_CONFIG.read_text().replace(marker, devices + marker, 1))
    config = load_config(path, data_dir=tmp_path / "data", environ={})
    assert config.hardware.backend == "simulated"
    return config


def test_every_driver_in_the_table_is_configured_built_and_read_on_the_simulated_backend(
    tmp_path: Path, clock: Clock
) -> None:
    pins = iter((5, 6, 12, 13, 16, 19, 20, 21, 23, 24, 25, 26))  # not the shipped config's 17, 22 and 27
    yaml = ""
    # A device living in a service has no simulated chip: tests/test_homeassistant.py runs it against a fake
    # Home Assistant.
    on_the_pi = {name: spec for name, spec in DRIVERS.items() if spec.on_the_pi}
    for index, (name, spec) in enumerate(on_the_pi.items()):
        if spec.interface == "gpio":
            wiring = [f"pin: {next(pins)}"]
        elif spec.interface == "i2c":  # at the part's default address, on a bus the shipped config leaves free
            wiring = ["bus: 3", f"address: {spec.addresses[0]:#04x}"]
        else:
            wiring = ["bus: 1", "device: 1", f"channel: {index % 8}"]
        yaml += f"  every_{name}:\n    driver: {name}\n" + "".join(f"    {line}\n" for line in wiring)
    config = with_devices(tmp_path, yaml)
    db = Database(tmp_path / "hw.db")
    registry = DeviceRegistry(config, make_backend(config.hardware), ApprovalStore(db, timeout_s=60, clock=clock))
    try:
        for name, spec in on_the_pi.items():
            device = registry.get(f"every_{name}")
            assert device.kind == spec.kind and ("set" in device.allowed) == bool(spec.sets)
            assert tuple(reading.quantity for reading in registry.read_sync(device.name)) == spec.quantities
    finally:
        registry.close()
        db.close()


def test_the_shipped_config_lists_every_driver() -> None:
    (line,) = [line for line in CHECKOUT_CONFIG.read_text().splitlines() if line.startswith("#   driver:")]
    assert line.split(":", 1)[1].replace("|", " ").split() == list(DRIVERS)


# --- reading and setting ---------------------------------------------------------------------------------


def test_relays_switch_their_pins_and_report_their_state(registry: DeviceRegistry) -> None:
    result = registry.set_sync("fan", "on", requested_by="test")
    assert result.done and pin_state(registry, 27) is True
    assert registry.read_sync("fan")[0].value is True
    registry.set_sync("fan", False, requested_by="test")
    assert pin_state(registry, 27) is False


def test_an_led_dims(registry: DeviceRegistry) -> None:
    registry.set_sync("lamp", "40%", requested_by="test")
    readings = {r.quantity: r.value for r in registry.read_sync("lamp")}
    assert readings == {"state": True, "brightness": 40.0}
    assert registry.backend.pin_factory.pin(12).state == pytest.approx(0.4)


def test_sensors_read_plausible_values_with_units(registry: DeviceRegistry) -> None:
    readings = {r.quantity: (r.value, r.unit) for r in registry.read_sync("living_room")}
    assert -40 < readings["temperature"][0] < 85 and readings["temperature"][1] == "°C"
    assert 0 <= readings["humidity"][0] <= 100 and readings["humidity"][1] == "%"
    assert 300 < readings["pressure"][0] < 1100 and readings["pressure"][1] == "hPa"
    soil = {r.quantity: r.value for r in registry.read_sync("soil")}
    assert 0 <= soil["level"] <= 100 and 0 <= soil["voltage"] <= 3.3


def test_unknown_devices_and_bad_values_are_clear(registry: DeviceRegistry) -> None:
    with pytest.raises(UnknownDeviceError) as err:
        registry.read_sync("garage")
    assert "fan" in (err.value.fix or "")
    with pytest.raises(UsageError):
        registry.set_sync("fan", "purple", requested_by="test")
    with pytest.raises(PolicyError):
        registry.set_sync("living_room", "on", requested_by="test")
    assert pin_state(registry, 27) is False


def test_writes_are_rate_limited_per_device(registry: DeviceRegistry) -> None:
    limit = registry.get("fan").config.writes_per_minute
    for i in range(limit):
        registry.set_sync("fan", i % 2 == 0, requested_by="test")
    state = pin_state(registry, 27)
    with pytest.raises(PolicyError) as err:
        registry.set_sync("fan", not state, requested_by="test")
    assert "times in the last minute" in str(err.value)
    assert pin_state(registry, 27) is state  # the refused write did not reach the pin
    registry.set_sync("porch_light", "on", requested_by="test")  # other devices are unaffected


# --- approvals -------------------------------------------------------------------------------------------


def test_a_write_needing_approval_waits_for_a_person(registry: DeviceRegistry, clock: Clock) -> None:
    result = registry.set_sync("gate", "on", requested_by="model")
    assert not result.done and result.pending is not None
    assert pin_state(registry, 5) is False  # nothing moved
    assert [p.id for p in registry.approvals.pending()] == [result.pending.id]
    done = registry.decide_sync(result.pending.id, True, "owner")
    assert pin_state(registry, 5) is True
    assert getattr(done, "value", None) is True  # exactly what was asked
    with pytest.raises(ApprovalError):
        registry.decide_sync(result.pending.id, True, "owner")  # once only


def test_denied_and_expired_approvals_never_run(registry: DeviceRegistry, clock: Clock) -> None:
    denied = registry.set_sync("gate", "on", requested_by="model").pending
    assert denied is not None
    registry.decide_sync(denied.id, False, "owner")
    expired = registry.set_sync("gate", "on", requested_by="model").pending
    assert expired is not None
    clock.now += 61
    with pytest.raises(ApprovalError) as err:
        registry.decide_sync(expired.id, True, "owner")
    assert "expired" in str(err.value)
    assert pin_state(registry, 5) is False
    assert registry.approvals.pending() == []


class _OtherDeciderSlipsIn:
    """Our database connection, with another process's decision run right after our statement number ``at``.

    Only between transactions, as SQLite would let another connection in. Deciding again at every ``at``
    puts the competing decision at every point of ours: between a check and an update, if there is one.
    """

    def __init__(self, conn: Any, at: int, other: Any) -> None:
        self._conn, self.at, self.other, self.count = conn, at, other, 0

    def execute(self, sql: str, params: Any = ()) -> Any:
        cursor = self._conn.execute(sql, params)
        self.count += 1
        if self.count == self.at and not self._conn.in_transaction:
            self.other()
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_an_approve_and_a_deny_at_the_same_moment_never_both_act(
    registry: DeviceRegistry, clock: Clock, tmp_path: Path
) -> None:
    db = registry.approvals.db
    other_db = Database(tmp_path / "hw.db")  # another process (the CLI, a Telegram button) on its own connection
    other = ApprovalStore(other_db, timeout_s=60, clock=clock)
    try:
        for at in range(12):  # 0: the deny comes first; past our last statement: it comes after us
            pending = registry.set_sync("gate", "on", requested_by="model").pending
            assert pending is not None
            outcomes: dict[str, str] = {}

            def other_denies(action_id: str = pending.id, outcomes: dict[str, str] = outcomes) -> None:
                try:
                    other.decide(action_id, False, "cli:other")
                    outcomes["deny"] = "won"
                except ApprovalError as exc:
                    outcomes["deny"] = exc.message

            if at == 0:
                other_denies()
            real = db._conn
            db._conn = _OtherDeciderSlipsIn(real, at, other_denies)
            try:
                registry.decide_sync(pending.id, True, "owner")
                outcomes["approve"] = "won"
            except ApprovalError as exc:
                outcomes["approve"] = exc.message
            finally:
                db._conn = real
            if "deny" not in outcomes:
                other_denies()
            stored = registry.approvals.get(pending.id)
            winners = [who for who, outcome in outcomes.items() if outcome == "won"]
            assert len(winners) == 1, (at, outcomes)
            if winners == ["approve"]:
                assert stored.status == "approved" and pin_state(registry, 5) is True, at
                assert outcomes["deny"] == f"approval {pending.id} was already approved"
            else:
                assert stored.status == "denied" and pin_state(registry, 5) is False, (at, outcomes)
                assert outcomes["approve"] == f"approval {pending.id} was already denied"
            registry.devices["gate"].driver.set(False)
    finally:
        other_db.close()


def test_the_model_has_no_way_to_approve(config: Config, registry: DeviceRegistry) -> None:
    tools = tool_registry(config, registry)
    assert {t.name for t in tools} >= {"devices_list", "device_read", "device_set"}
    assert not any("approv" in t.name or "approv" in t.description.lower() for t in tools)

    async def model_sets_gate() -> str:
        result = await tools.execute("device_set", {"name": "gate", "value": "on"})
        assert result.ok
        return result.output

    output = asyncio.run(model_sets_gate())
    assert "needs a person's approval" in output and pin_state(registry, 5) is False


def test_device_tools_report_refusals_to_the_model(config: Config, registry: DeviceRegistry) -> None:
    tools = tool_registry(config, registry)

    async def run(name: str, args: dict[str, Any]) -> Any:
        return await tools.execute(name, args)

    unknown = asyncio.run(run("device_read", {"name": "garage"}))
    assert not unknown.ok and "no device named 'garage'" in (unknown.error or "")
    read = asyncio.run(run("device_read", {"name": "living_room"}))
    assert read.ok and "°C" in read.output and "hPa" in read.output


# --- raw bus policy --------------------------------------------------------------------------------------


def policy(config: Config, backend: SimulatedBackend) -> RawBusPolicy:
    return RawBusPolicy(config.hardware.raw_access, lambda: backend)


def test_raw_access_is_off_by_default_and_touches_nothing(config: Config, registry: DeviceRegistry) -> None:
    backend = registry.backend
    assert isinstance(backend, SimulatedBackend)
    bus = backend.i2c(1)
    assert isinstance(bus, SimulatedI2CBus)
    before = len(bus.log)
    with pytest.raises(PolicyError) as err:
        policy(config, backend).i2c_read(1, 0x76, 0xD0, 1)
    assert "nothing was sent on the bus" in str(err.value)
    assert len(bus.log) == before


def test_raw_access_only_within_the_allowlist(config: Config, registry: DeviceRegistry) -> None:
    backend = registry.backend
    assert isinstance(backend, SimulatedBackend)
    raw = config.hardware.raw_access
    raw.enabled = True
    raw.i2c = [I2CAllow(bus=1, address=0x76, registers="0xD0-0xD0")]
    raw.spi = [SPIAllow(bus=0, device=0, max_bytes=3)]
    allowed = policy(config, backend)
    bus = backend.i2c(1)
    assert isinstance(bus, SimulatedI2CBus)
    assert allowed.i2c_read(1, 0x76, 0xD0, 1) == bytes([0x60])  # the BME280's chip id
    before = len(bus.log)
    for refused in (
        lambda: allowed.i2c_read(1, 0x76, 0xD0, 2),  # runs past the range
        lambda: allowed.i2c_read(1, 0x77, 0xD0, 1),  # another address
        lambda: allowed.i2c_read(2, 0x76, 0xD0, 1),  # another bus
        lambda: allowed.i2c_write(1, 0x76, 0xD0, b"\x00"),  # writes not allowed
        lambda: allowed.i2c_scan(2),
    ):
        with pytest.raises(PolicyError):
            refused()
    assert len(bus.log) == before  # none of them touched the bus
    assert 0x76 in allowed.i2c_scan(1)
    spi = backend.spi(0, 0)
    assert isinstance(spi, SimulatedSPIBus)
    sent = len(spi.log)
    with pytest.raises(PolicyError):
        allowed.spi_transfer(0, 0, bytes(4))  # too long
    with pytest.raises(PolicyError):
        allowed.spi_transfer(0, 1, bytes(3))  # not allowlisted
    assert len(spi.log) == sent
    assert len(allowed.spi_transfer(0, 0, bytes([1, 0x80, 0]))) == 3


# --- events ----------------------------------------------------------------------------------------------


def test_button_presses_become_stored_events(registry: DeviceRegistry, tmp_path: Path) -> None:
    bus = EventBus(registry.approvals.db)
    seen: list[str] = []
    bus.subscribe(lambda event: seen.append(event.message))
    registry.listeners.append(bus.input_listener)
    pin = registry.backend.pin_factory.pin(22)
    pin.drive_low()  # pressed: the button pulls the pin to ground
    wait_for(lambda: "doorbell: pressed" in seen, timeout=5, what="the doorbell's press event")
    pin.drive_high()
    wait_for(lambda: "doorbell: released" in seen, timeout=5, what="the doorbell's release event")
    assert bus.recent()[0].device == "doorbell"


def test_thresholds_fire_when_they_turn_true_and_respect_the_cooldown(registry: DeviceRegistry, clock: Clock) -> None:
    backend = registry.backend
    assert isinstance(backend, SimulatedBackend)
    chip = backend.chips["living_room"]
    bus = EventBus(registry.approvals.db)
    rule = EventRule(when="living_room.temperature > 28", message="hot", every_s=10, cooldown_s=100)
    watcher = ThresholdWatcher([rule], registry.read, bus, clock=clock)

    def step(temperature: float, advance: float = 10) -> int:
        chip.set_environment(temperature_c=temperature)
        clock.now += advance
        return len(asyncio.run(watcher.check()))

    assert step(22) == 0
    assert step(30) == 1  # turned true
    assert step(31) == 0  # still true: no repeat
    assert step(25) == 0
    assert step(30) == 0  # true again, but within the cooldown
    assert step(25, 100) == 0
    assert step(30) == 1  # after the cooldown
    assert [e.message for e in bus.recent()] == ["hot", "hot"]


# --- the command line ------------------------------------------------------------------------------------


def cli(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    return picoagent("--data-dir", data, *args, cwd=data, timeout=120)


def test_devices_cli_without_a_daemon(tmp_path: Path) -> None:
    listed = cli("devices", "list", data=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "porch_light" in listed.stdout and "temperature:" in listed.stdout
    read = cli("devices", "read", "living_room", data=tmp_path)
    assert read.returncode == 0 and "°C" in read.stdout and "hPa" in read.stdout and "%" in read.stdout
    assert "state: on" in cli("devices", "set", "fan", "on", data=tmp_path).stdout
    db = Database(tmp_path / "picoagent.db")  # a write made with no daemon is an event too
    try:
        assert [(e.kind, e.data["value"]) for e in device_history(db, "fan")] == [("set", True)]
    finally:
        db.close()
    unknown = cli("devices", "read", "garage", data=tmp_path)
    assert (
        unknown.returncode == 1 and "no device named 'garage'" in unknown.stderr and "Traceback" not in unknown.stderr
    )
    scan = cli("hw", "scan", data=tmp_path)
    assert scan.stdout.splitlines()[2].split() == ["0x76", "found", "bme280", "living_room"]


def test_turn_on_the_fan_is_an_intent_with_no_model(tmp_path: Path) -> None:
    out = cli("chat", "-m", "turn on the fan", "--json", data=tmp_path)
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert record["route"] == "intent"
    assert record["timings"]["prompt_tokens"] == 0  # no model was asked
    action = record["actions"][0]
    assert action["tool"] == "device_set" and action["arguments"] == {"name": "fan", "value": "on"} and action["ok"]
    assert action["result"]["state"][0] == {"quantity": "state", "value": True, "unit": ""}


# --- real hardware (skipped unless asked for) ------------------------------------------------------------

HW = os.environ.get("PICOAGENT_HW_TESTS") == "1"


@pytest.mark.skipif(not HW, reason="real-hardware test: set PICOAGENT_HW_TESTS=1 (and PICOAGENT_HW_RELAY_PIN)")
def test_real_relay_switches(tmp_path: Path) -> None:
    from appliance.hardware.backends import RealBackend
    from appliance.hardware.drivers.gpio import Relay

    backend = RealBackend()
    relay = Relay(backend.pin_factory, int(os.environ["PICOAGENT_HW_RELAY_PIN"]))
    try:
        relay.set(True)
        assert relay.read()[0].value is True
        relay.set(False)
        assert relay.read()[0].value is False
    finally:
        relay.close()
        backend.close()


@pytest.mark.skipif(not HW, reason="real-hardware test: set PICOAGENT_HW_TESTS=1 (and PICOAGENT_HW_BME280=BUS:ADDR)")
def test_real_bme280_reads() -> None:
    from appliance.hardware.buses import SMBusI2C
    from appliance.hardware.drivers.bme280 import BME280

    bus_number, address = os.environ.get("PICOAGENT_HW_BME280", "1:0x76").split(":")
    readings = {r.quantity: r.value for r in BME280(SMBusI2C(int(bus_number)), int(address, 0)).read()}
    assert -40 < float(readings["temperature"]) < 85 and 300 < float(readings["pressure"]) < 1100


def test_an_ambiguous_command_asks_and_the_answer_acts(config: Config, tmp_path: Path) -> None:
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    config.devices["kitchen_light"] = DeviceConfig(driver="relay", pin=6, room="kitchen")
    model = ScriptedModel()
    runtime = Runtime.open(config, model=model)
    try:
        question = asyncio.run(runtime.agent.turn("turn on the light"))
        assert question.route == "intent" and "which" in question.text.lower() and not question.actions
        answer = asyncio.run(runtime.agent.turn("the kitchen one"))
        assert answer.route == "intent" and answer.actions[0].arguments == {"name": "kitchen_light", "value": "on"}
        assert runtime.devices is not None and pin_state(runtime.devices, 6) is True
        assert pin_state(runtime.devices, 17) is False  # the porch light stayed off
        assert model.history == []  # no model call at all
    finally:
        runtime.close()


def test_motion_and_button_drivers_follow_their_pins() -> None:
    from gpiozero.pins.mock import MockFactory

    from appliance.hardware.drivers.gpio import Button, Motion

    factory = MockFactory()
    events: list[str] = []
    motion = Motion(factory, 23)
    button = Button(factory, 24)
    motion.on_event(events.append)
    button.on_event(events.append)
    # The motion sensor samples its pin on a thread: until that has seen "still", a high pin is no edge.
    assert motion.device.wait_for_inactive(timeout=5), "the motion sensor never sampled its pin"
    factory.pin(23).drive_high()
    wait_for(lambda: "motion" in events, timeout=5, what="the motion event")
    assert motion.read()[0].value is True
    factory.pin(24).drive_low()  # a button to ground, with the pull-up
    assert button.read()[0].value is True and "pressed" in events
    motion.close()
    button.close()
    factory.close()
