"""`picoagent devices`, `hw` and `approvals`: the named devices, the buses, and writes awaiting a person.

They go through the daemon when it runs (it owns the devices and the buses' locks); otherwise this
process opens them itself. `devices scan` (and `hw scan`, its older name) probes a bus as i2cdetect does
(appliance/hardware/scan.py) and prints what answers with the drivers that fit.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from appliance.cli.common import action, command_group, load, open_db
from appliance.cli.daemon_client import daemon_get

if TYPE_CHECKING:
    from appliance.config import Config


# What waits in `picoagent approvals` (appliance/hardware/approvals.py, appliance/tools/approvals.py).
APPROVALS = (
    "Device writes and tool calls waiting for a person's approval: a write to a device with approval: required,"
    " any device write the model makes after its turn read outside text, and a call of a tool named in"
    " tools.require_approval. Approved, a device write is made at once and a tool call runs in the daemon."
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `devices`, `hw` and `approvals` command groups."""
    dsub = command_group(sub, common, "devices", "list, read and set the named devices")
    action(dsub, common, "list", "the devices and their readings", cmd_devices_list)
    action(dsub, common, "read", "read a device now", cmd_devices_read).add_argument("name")
    dset = action(dsub, common, "set", "set a device: on, off or a brightness like 40%%", cmd_devices_set)
    dset.add_argument("name")
    dset.add_argument("value")
    scan_help = "which I2C addresses answer (probed as i2cdetect does) and the drivers that fit them"
    dscan = action(dsub, common, "scan", scan_help, cmd_devices_scan)
    dscan.add_argument("--bus", type=int, default=1, help="I2C bus number (default 1: /dev/i2c-1)")

    hsub = command_group(sub, common, "hw", "the buses themselves")
    scan = action(hsub, common, "scan", "the same as `picoagent devices scan`", cmd_devices_scan)
    scan.add_argument("--bus", type=int, default=1, help="I2C bus number (default 1)")

    asub = command_group(
        sub, common, "approvals", "device writes and tool calls waiting for a person", description=APPROVALS
    )
    action(asub, common, "list", "the device writes and tool calls waiting", cmd_approvals_list)
    for decision in ("approve", "deny"):
        text = f"{decision} a pending device write or tool call"
        action(asub, common, decision, text, cmd_approvals_decide, decision=decision).add_argument("id")


class _Direct:
    """The devices opened by this process (when no daemon owns them); closed on exit."""

    def __init__(self, config: Config) -> None:
        from appliance.runtime import device_registry

        self.db = open_db(config)
        try:
            self.devices, self.raw = device_registry(config, self.db)
        except Exception:
            self.db.close()
            raise

    def __enter__(self) -> Any:
        from appliance.errors import UnknownDeviceError

        if self.devices is None:
            self.close()
            raise UnknownDeviceError("no devices are configured", fix="declare them under devices: in the config")
        return self.devices

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.devices is not None:
            self.devices.close()
        self.db.close()


def _show_readings(name: str, readings: list[dict[str, Any]]) -> str:
    from appliance.hardware.drivers.base import Reading

    return f"{name}: " + ", ".join(str(Reading(r["quantity"], r["value"], r["unit"])) for r in readings)


def cmd_devices_list(args: argparse.Namespace) -> int:
    """The devices, through the daemon when it runs."""
    config = load(args)
    listed = daemon_get(config, "/api/devices")
    if listed is None:
        import asyncio

        from appliance.hardware.states import device_states

        with _Direct(config) as devices:
            listed = {"devices": asyncio.run(device_states(devices, {}))}
    if not listed["devices"]:
        print("no devices configured (declare them under devices: in the config)")
    # Where it lives: "gpio 17", "i2c-1 0x76", "spi 0.0 ch0", "homeassistant light.kitchen" (a daemon older than
    # the column sends none: the driver says enough then). Columns as wide as their longest entry (a long MQTT
    # topic broke them: walk 10).
    rows = [(d, d.get("where") or d["driver"]) for d in listed["devices"]]
    name_w = max([16, *(len(d["name"]) + 1 for d, _ in rows)])
    where_w = max([30, *(len(where) + 1 for _, where in rows)])
    for device, where in rows:
        room = f" · {device['room']}" if device.get("room") else ""
        state = device.get("error") or _show_readings(device["name"], device.get("readings", []))
        approval = " · approval required" if device["approval"] == "required" else ""
        print(f"{device['name']:{name_w}} {device['kind']:7} {where:{where_w}}{room}{approval}\n    {state}")
    return 0


def cmd_devices_read(args: argparse.Namespace) -> int:
    """Read one device."""
    config = load(args)
    answer = daemon_get(config, f"/api/devices/{args.name}")
    if answer is None:
        with _Direct(config) as devices:
            answer = {"readings": [r.as_dict() for r in devices.read_sync(args.name)]}
    print(_show_readings(args.name, answer["readings"]))
    return 0


def cmd_devices_set(args: argparse.Namespace) -> int:
    """Set one device."""
    config = load(args)
    answer = daemon_get(config, f"/api/devices/{args.name}", {"value": args.value})
    if answer is None:
        with _Direct(config) as devices:
            answer = devices.set_sync(args.name, args.value, requested_by="cli").as_dict()
    pending = answer.get("pending_approval")
    if pending:
        print(
            f"{args.name} needs approval: pending action {pending['id']} (picoagent approvals approve {pending['id']})"
        )
        return 0
    print(_show_readings(args.name, answer["state"]))
    return 0


def cmd_devices_scan(args: argparse.Namespace) -> int:
    """Probe an I2C bus as i2cdetect does and print what answers, through the daemon when it runs."""
    config = load(args)
    answer = daemon_get(config, f"/api/devices/scan?bus={args.bus}")
    if answer is None:
        from appliance.hardware.backends import make_backend
        from appliance.hardware.scan import scan_bus

        backend = make_backend(config.hardware)
        try:
            backend.prepare(config.devices)  # the simulation puts its chips where the config has devices
            answer = scan_bus(backend, config.devices, args.bus).as_dict()
        finally:
            backend.close()
    print(scan_table(answer))
    return 0


def scan_table(scan: dict[str, Any]) -> str:
    """A scan (GET /api/devices/scan's answer) as a table a person reads."""
    rows = scan["addresses"]
    found = sum(row["state"] == "found" for row in rows)
    first, last = scan.get("range", ["0x08", "0x77"])
    head = f"I2C bus {scan['bus']} ({scan['backend']}), {first}-{last} probed as i2cdetect does: "
    lines = [head + (f"{found} devices answer" if found > 1 else "1 device answers" if found else "nothing answers")]
    if rows:
        lines.append(f"  {'address':8} {'state':7} {'drivers that fit':20} configured device")
    for row in rows:
        drivers = ", ".join(row["drivers"]) or "(none known)"
        configured = row["configured"] or "-"
        if row["state"] == "absent":
            configured += " (configured here, but nothing answers: check its wiring and address)"
        elif row["state"] == "busy":
            configured += " (a kernel driver owns this address: not probed)"
        elif row["state"] == "error":
            configured += f" (the bus said: {row['detail']})"
        lines.append(f"  {row['hex']:8} {row['state']:7} {drivers:20} {configured}")
    if scan.get("skipped"):
        lines.append(f"  not probed (the bus adapter cannot): {', '.join(scan['skipped'])}")
    if any(row["state"] == "found" and not row["configured"] and row["drivers"] for row in rows):
        lines.append("  add one under devices: in the config (driver, bus, address), or try it: POST /api/devices/try")
    return "\n".join(lines)


def cmd_approvals_list(args: argparse.Namespace) -> int:
    """Device writes and tool calls waiting for a person."""
    from appliance.hardware.approvals import PendingAction
    from appliance.runtime import approval_store

    config = load(args)
    answer = daemon_get(config, "/api/approvals")
    if answer is None:
        db = open_db(config)
        try:
            answer = {"pending": [p.as_dict() for p in approval_store(config, db).pending()]}
        finally:
            db.close()
    if not answer["pending"]:
        print("nothing is waiting for approval")
    from datetime import datetime

    from appliance.schedule.parse import resolve_zone

    now, zone = time.time(), resolve_zone(config.scheduler.timezone)  # the appliance's time, as notifications
    for item in answer["pending"]:
        action = PendingAction(**item)
        minutes = max(0, round((action.expires_at - now) / 60))
        at = datetime.fromtimestamp(action.expires_at, zone).strftime("%H:%M %Z")
        print(f"{action.describe()}, expires in {minutes} min (at {at})")
    return 0


def cmd_approvals_decide(args: argparse.Namespace) -> int:
    """Approve (and run) or deny a pending write or tool call."""
    import getpass

    config = load(args)
    answer = daemon_get(config, f"/api/approvals/{args.id}/{args.decision}", {})
    if answer is None:
        answer = _decide_here(config, args.id, args.decision == "approve", f"cli:{getpass.getuser()}")
    if args.decision == "deny":
        print(f"{args.id} denied")
    elif "tool" in answer:
        outcome = answer["output"] if answer["ok"] else f"failed: {answer['error']}"
        print(f"{args.id} approved: {answer['tool']} ran: {outcome}")
    else:
        print(f"{args.id} approved: " + _show_readings(answer["device"], answer["state"]))
    return 0


def _decide_here(config: Config, action_id: str, approve: bool, decided_by: str) -> dict[str, Any]:
    """A decision with no daemon running: a device write runs here; a tool call may only be denied here."""
    from appliance.errors import UsageError
    from appliance.runtime import approval_store

    db = open_db(config)
    try:
        store = approval_store(config, db)
        action = store.get(action_id)
        if action.tool is not None:
            if approve:
                raise UsageError(
                    f"approval {action_id} is a call of {action.tool}: approved calls run in the daemon",
                    fix="start it (picoagent serve, or systemctl start picoagent) and approve again",
                )
            return store.decide(action_id, False, decided_by).as_dict()
    finally:
        db.close()
    with _Direct(config) as devices:
        return dict(devices.decide_sync(action_id, approve, decided_by).as_dict())
