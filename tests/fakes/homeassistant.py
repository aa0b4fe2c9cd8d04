"""A fake Home Assistant: its REST API and WebSocket API on 127.0.0.1, speaking the documented payloads.

REST (developers.home-assistant.io/docs/api/rest): ``GET /api/`` -> ``{"message": "API running."}``;
``GET /api/states`` -> every state object; ``GET /api/states/<entity_id>`` -> the state object
(``entity_id``, ``state``, ``attributes``, ``last_changed``, ``last_updated``, ``context``) or 404
``{"message": "Entity not found."}``; ``POST /api/services/<domain>/<service>`` with ``{"entity_id": ...}``
-> the list of states it changed.
Every request needs ``Authorization: Bearer <token>``, else 401.

WebSocket (developers.home-assistant.io/docs/api/websocket): ``auth_required`` -> the client's ``auth``
-> ``auth_ok`` (or ``auth_invalid`` and the socket closes); then commands with ids that must increase
(``id_reuse`` otherwise): ``subscribe_events`` (``state_changed`` events arrive with that id) and
``get_states``.

Services behave as Home Assistant's do for the domains picoagent drives: ``turn_on`` / ``turn_off``
switch the state, a light's ``brightness_pct`` becomes its ``brightness`` attribute (0-255, as Home
Assistant stores it: the driver converts back to percent, this fake never with the driver's code).
Every call is recorded (:attr:`FakeHomeAssistant.calls`). Tests change a state as a device would
(:meth:`FakeHomeAssistant.set_state`: pushed to every subscribed WebSocket). It runs on a thread of its
own, so blocking callers (the drivers, a command) and the test's own event loop both reach it.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

HA_VERSION = "2024.11.0"
TOKEN = "hass-long-lived-token-for-tests-0123456789"


@dataclass(frozen=True)
class ServiceCall:
    """One POST /api/services/<domain>/<service> that was accepted."""

    domain: str
    service: str
    data: dict[str, Any]


def _now() -> str:
    return datetime.now(UTC).isoformat()


def state_object(entity_id: str, state: str, attributes: dict[str, Any]) -> dict[str, Any]:
    """A state as Home Assistant serialises it."""
    stamp = _now()
    return {
        "entity_id": entity_id,
        "state": state,
        "attributes": dict(attributes),
        "last_changed": stamp,
        "last_updated": stamp,
        "context": {"id": uuid.uuid4().hex, "parent_id": None, "user_id": None},
    }


class FakeHomeAssistant:
    """Home Assistant's REST and WebSocket API over a few entities; records every service call."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.states: dict[str, dict[str, Any]] = {}
        self.calls: list[ServiceCall] = []
        self.refused = 0  # requests and WebSocket logins with a wrong token
        self.subscribers: list[tuple[web.WebSocketResponse, int]] = []  # (socket, its subscription id)
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sending: set[asyncio.Future[None]] = set()  # events on their way (kept: the loop holds weak refs)

    # --- lifecycle ------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """What homeassistant.url is set to."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Listen on a free port of 127.0.0.1 (on a thread of its own)."""
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self._start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._stop())
            loop.close()

        self._thread = threading.Thread(target=serve, name="fake-homeassistant", daemon=True)
        self._thread.start()
        assert ready.wait(10), "the fake Home Assistant did not start"

    def stop(self) -> None:
        """Close every socket and stop listening."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = self._thread = None

    def __enter__(self) -> FakeHomeAssistant:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/api/", self._api)
        app.router.add_get("/api/states", self._all_states)
        app.router.add_get("/api/states/{entity_id}", self._get_state)
        app.router.add_post("/api/services/{domain}/{service}", self._call_service)
        app.router.add_get("/api/websocket", self._websocket)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self.port = self._runner.addresses[0][1]

    async def _stop(self) -> None:
        for ws, _ in list(self.subscribers):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # --- what tests call ------------------------------------------------------------------------------

    def add_entity(self, entity_id: str, state: str, **attributes: Any) -> None:
        """An entity Home Assistant knows (no event: it was there before)."""
        with self._lock:
            self.states[entity_id] = state_object(entity_id, state, attributes)

    def set_state(self, entity_id: str, state: str, **attributes: Any) -> None:
        """The entity changes (a door opens, a sensor reports): a state_changed event to every subscriber."""
        assert self._loop is not None, "start the fake first"
        self._loop.call_soon_threadsafe(self._change, entity_id, state, attributes)

    def calls_to(self, domain: str, service: str) -> list[dict[str, Any]]:
        """The data of every call of one service."""
        return [c.data for c in self.calls if (c.domain, c.service) == (domain, service)]

    # --- the server -----------------------------------------------------------------------------------

    def _change(self, entity_id: str, state: str, attributes: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            old = self.states.get(entity_id)
            merged = {**(old["attributes"] if old else {}), **attributes}
            new = state_object(entity_id, state, merged)
            self.states[entity_id] = new
        event = {
            "event_type": "state_changed",
            "data": {"entity_id": entity_id, "old_state": old, "new_state": new},
            "origin": "LOCAL",
            "time_fired": _now(),
            "context": new["context"],
        }
        for ws, subscription in list(self.subscribers):
            if not ws.closed:
                sending = asyncio.ensure_future(ws.send_json({"id": subscription, "type": "event", "event": event}))
                self._sending.add(sending)
                sending.add_done_callback(self._sending.discard)
        return new

    def _authorised(self, request: web.Request) -> bool:
        if request.headers.get("Authorization") == f"Bearer {self.token}":
            return True
        self.refused += 1
        return False

    async def _api(self, request: web.Request) -> web.StreamResponse:
        if not self._authorised(request):
            return web.Response(status=401, text="401: Unauthorized")
        return web.json_response({"message": "API running."})

    async def _all_states(self, request: web.Request) -> web.StreamResponse:
        if not self._authorised(request):
            return web.Response(status=401, text="401: Unauthorized")
        with self._lock:
            return web.json_response(list(self.states.values()))

    async def _get_state(self, request: web.Request) -> web.StreamResponse:
        if not self._authorised(request):
            return web.Response(status=401, text="401: Unauthorized")
        state = self.states.get(request.match_info["entity_id"])
        if state is None:
            return web.json_response({"message": "Entity not found."}, status=404)
        return web.json_response(state)

    async def _call_service(self, request: web.Request) -> web.StreamResponse:
        if not self._authorised(request):
            return web.Response(status=401, text="401: Unauthorized")
        domain, service = request.match_info["domain"], request.match_info["service"]
        if service not in ("turn_on", "turn_off", "toggle"):
            return web.json_response({"message": f"Service {domain}.{service} not found."}, status=400)
        data = await request.json() if request.can_read_body else {}
        self.calls.append(ServiceCall(domain, service, data))
        targets = data.get("entity_id", [])
        changed = []
        for entity_id in [targets] if isinstance(targets, str) else targets:
            if entity_id not in self.states or entity_id.partition(".")[0] != domain:
                continue  # Home Assistant ignores entities a service does not handle
            on = service == "turn_on" or (service == "toggle" and self.states[entity_id]["state"] == "off")
            attributes: dict[str, Any] = {}
            if domain == "light":
                if on and "brightness_pct" in data:
                    attributes["brightness"] = round(float(data["brightness_pct"]) * 255 / 100)
                elif on and self.states[entity_id]["attributes"].get("brightness") is None:
                    attributes["brightness"] = 255
                elif not on:
                    attributes["brightness"] = None
            changed.append(self._change(entity_id, "on" if on else "off", attributes))
        return web.json_response(changed)

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"type": "auth_required", "ha_version": HA_VERSION})
        auth = await ws.receive_json(timeout=10)
        if auth.get("type") != "auth" or auth.get("access_token") != self.token:
            self.refused += 1
            await ws.send_json({"type": "auth_invalid", "message": "Invalid access token or password"})
            await ws.close()
            return ws
        await ws.send_json({"type": "auth_ok", "ha_version": HA_VERSION})
        last_id = 0
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    break
                command = message.json()
                ident = command.get("id")
                if not isinstance(ident, int) or ident <= last_id:
                    error = {"code": "id_reuse", "message": "Identifier values have to increase."}
                    await ws.send_json({"id": ident, "type": "result", "success": False, "error": error})
                    continue
                last_id = ident
                if command.get("type") == "subscribe_events" and command.get("event_type") == "state_changed":
                    self.subscribers.append((ws, ident))
                    await ws.send_json({"id": ident, "type": "result", "success": True, "result": None})
                elif command.get("type") == "get_states":
                    with self._lock:
                        states = list(self.states.values())
                    await ws.send_json({"id": ident, "type": "result", "success": True, "result": states})
                else:
                    error = {"code": "unknown_command", "message": "Unknown command."}
                    await ws.send_json({"id": ident, "type": "result", "success": False, "error": error})
        finally:
            self.subscribers = [(s, i) for s, i in self.subscribers if s is not ws]
        return ws
