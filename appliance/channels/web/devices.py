"""Devices, approvals and hardware events over HTTP (the CLI uses these when the daemon runs).

A refusal or failure is raised, and the error middleware (``http.py``) answers it with its class's
status: an unknown device or approval 404, a decided one 409, a policy refusal 403, too many writes
429, a device or bus that failed 502.

The scan of a bus and the trial of a new device run here, in the daemon, when it runs: it owns the
buses' locks (a scan never interleaves with a sensor's read). They use the devices' backend, or one
made for the request when no device is configured. Both need ``admin``: probing a bus is no read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from appliance.channels.web.auth import principal
from appliance.channels.web.http import json_error, read_json
from appliance.channels.web.state import DEVICES, RUNTIME, STATE
from appliance.errors import UnknownDeviceError, UsageError
from appliance.hardware.approvals import UnknownApprovalError
from appliance.hardware.states import device_states

if TYPE_CHECKING:
    from appliance.hardware.backends import Backend
    from appliance.hardware.devices import DeviceRegistry
    from appliance.runtime import Runtime

Done = TypeVar("Done")

routes = web.RouteTableDef()  # device and approval routes, added to the app by app.build_app


def _who(request: web.Request) -> str:
    found = principal(request)
    return f"{found.kind}:{found.name}" if found else "unknown"


def _device(request: web.Request, fix: str) -> tuple[str, DeviceRegistry]:
    """The device the path names and the registry, or unknown (``fix``) when no devices are configured."""
    devices, name = request.app[RUNTIME].devices, request.match_info["name"]
    if devices is None:
        raise UnknownDeviceError(f"unknown device {name!r}", fix=fix)
    return name, devices


@routes.get("/api/devices")
async def list_devices(request: web.Request) -> web.Response:
    """Every device, its kind, room, what is allowed, and its readings."""
    readings = request.app[DEVICES].readings
    return web.json_response({"devices": await device_states(request.app[RUNTIME].devices, readings)})


@routes.get("/api/devices/offered")
async def offered_devices(request: web.Request) -> web.Response:
    """What the links know that could become a device: Home Assistant's entities of the kinds picoagent drives
    (light, switch, fan, input_boolean, sensor, binary_sensor), and what other things announce on the MQTT
    broker for Home Assistant (each as a ready mqtt device definition); each with a suggested name and whether
    it is configured already. null: that link is not configured. The Settings page adds one with POST
    /api/settings."""
    from appliance.hardware.drivers.homeassistant import KINDS, domain_of

    sources, config = request.app[STATE].sources, request.app[RUNTIME].config
    answer: dict[str, Any] = {"homeassistant": None, "mqtt": None}
    if sources.homeassistant is not None:
        states = await asyncio.to_thread(sources.homeassistant.list_states)
        used = {d.entity for d in config.devices.values() if d.driver == "homeassistant"}
        answer["homeassistant"] = sorted(
            (
                {
                    "entity": s["entity_id"],
                    "name": str(s.get("attributes", {}).get("friendly_name") or s["entity_id"]),
                    "kind": KINDS[domain_of(s["entity_id"])],
                    "suggested": s["entity_id"].partition(".")[2],
                    "configured": s["entity_id"] in used,
                }
                for s in states
                if domain_of(str(s["entity_id"])) in KINDS
            ),
            key=lambda e: e["entity"],
        )
    if sources.mqtt is not None:
        topics = {(d.state_topic, d.command_topic) for d in config.devices.values() if d.driver == "mqtt"}
        found = await sources.mqtt.discovered().offered()
        for thing in found:
            device = thing["device"]
            thing["configured"] = (device.get("state_topic", ""), device.get("command_topic", "")) in topics
        answer["mqtt"] = found
    return web.json_response(answer)


def bus_number(text: str) -> int:
    """An I2C bus number from a query (``?bus=1``), or a UsageError."""
    try:
        number = int(text, 0)
    except ValueError:
        number = -1
    if not 0 <= number <= 255:
        raise UsageError(f"bus: expected an I2C bus number from 0 to 255, got {text!r}", fix="e.g. ?bus=1 (/dev/i2c-1)")
    return number


def on_backend(runtime: Runtime, work: Callable[[Backend], Done]) -> Done:
    """``work`` on the devices' backend, or on one made for it (and closed after) when none is configured."""
    if runtime.devices is not None:
        return work(runtime.devices.backend)
    from appliance.hardware.backends import make_backend

    backend = make_backend(runtime.config.hardware)
    try:
        return work(backend)
    finally:
        backend.close()


# Before /api/devices/{name}: aiohttp matches in order, and "scan" and "try" are no device's name (the config
# refuses them, checks.RESERVED_DEVICE_NAMES).
@routes.get("/api/devices/scan")
async def scan_devices(request: web.Request) -> web.Response:
    """Probe an I2C bus as i2cdetect does (?bus=N, default 1): what answers, what is busy, which drivers fit."""
    from appliance.hardware.scan import scan_bus

    number, runtime = bus_number(request.query.get("bus", "1")), request.app[RUNTIME]
    found = await asyncio.to_thread(on_backend, runtime, lambda b: scan_bus(b, runtime.config.devices, number))
    return web.json_response(found.as_dict())


@routes.post("/api/devices/try")
async def try_device(request: web.Request) -> web.Response:
    """Read a device that is not in the config yet once, or pulse a switch on then off: the body is its definition."""
    from appliance.config.edit import FieldError
    from appliance.config.trial import check_definition
    from appliance.hardware.trial import try_device as trial

    runtime, limiter = request.app[RUNTIME], request.app[DEVICES].trials
    try:
        device = check_definition(runtime.config, await read_json(request))
    except FieldError as exc:
        return json_error(400, exc.message, key=exc.key, fix=exc.fix)
    result = await asyncio.to_thread(on_backend, runtime, lambda b: trial(device, b, limiter))
    return web.json_response(result.as_dict())


@routes.get("/api/devices/{name}")
async def read_device(request: web.Request) -> web.Response:
    """Read one device now."""
    name, devices = _device(request, "no devices are configured")
    readings = await devices.read(name)
    return web.json_response({"device": name, "readings": [r.as_dict() for r in readings]})


@routes.post("/api/devices/{name}")
async def set_device(request: web.Request) -> web.Response:
    """Set a device: {"value": "on" | "off" | "40%" | true | false}."""
    name, devices = _device(request, "GET /api/devices lists the devices")
    body = await read_json(request)
    if "value" not in body or not isinstance(body["value"], str | bool | int | float):
        return json_error(400, 'expected "value": "on", "off", a percentage, true or false')
    result = await devices.set(name, body["value"], requested_by=_who(request))
    request.app[DEVICES].readings.pop(name, None)
    return web.json_response(result.as_dict(), status=200 if result.done else 202)


@routes.get("/api/approvals")
async def list_approvals(request: web.Request) -> web.Response:
    """Device writes and tool calls waiting for a person."""
    desk = request.app[RUNTIME].approvals
    pending = await asyncio.to_thread(desk.pending) if desk is not None else []
    return web.json_response({"pending": [p.as_dict() for p in pending]})


@routes.post("/api/approvals/{id}/{decision:approve|deny}")
async def decide_approval(request: web.Request) -> web.Response:
    """Approve (and run) or deny one pending write or tool call (a person's session or token, never the model)."""
    desk = request.app[RUNTIME].approvals
    action_id, decision = request.match_info["id"], request.match_info["decision"]
    if desk is None:
        raise UnknownApprovalError(f"no approval {action_id!r}")
    result = await desk.decide(action_id, decision == "approve", _who(request))
    return web.json_response(result.as_dict())


@routes.get("/api/events")
async def list_events(request: web.Request) -> web.Response:
    """The latest events: hardware, device writes and settings changes."""
    from appliance.hardware.events import recent_events

    db = request.app[RUNTIME].db
    recent = await db.call(recent_events, db, 50)
    return web.json_response({"events": [e.as_dict() for e in recent]})
