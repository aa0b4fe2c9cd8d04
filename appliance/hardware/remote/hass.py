"""Home Assistant's API: REST for reads and service calls, a WebSocket that keeps every state fresh.

Drivers block (they run on worker threads, appliance/hardware/drivers/base.py), so the calls they make
are blocking REST calls over the standard library's urllib: ``GET /api/states/<entity_id>`` and
``POST /api/services/<domain>/<service>``, with the long-lived token as ``Authorization: Bearer``. A
command with no daemon (``picoagent devices list``) uses only these.

The daemon also starts the WebSocket (:meth:`HomeAssistantClient.start`, on its event loop, aiohttp):
``auth_required`` -> ``auth`` -> ``auth_ok``, then ``subscribe_events`` for ``state_changed`` and one
``get_states`` (ids counting up from 1 on each connection). From then on every state Home Assistant
pushes lands in a cache, so a read costs no round trip, and a binary_sensor's change reaches its
driver's event callbacks (on one thread of their own, in order, as gpiozero's thread calls a button's).
The connection comes back by itself with a backoff (1 s doubling to 60 s); while it is down reads go
to REST again, and on reconnect ``get_states`` fills the cache and reports what changed meanwhile.

Failures are :class:`HardwareError` with the fix (Home Assistant unreachable, the token refused, no such
entity): the device shows as unavailable with that message, and the daemon goes on. The token is never
put in a message or a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from appliance.config.homeassistant import TOKEN_FIX
from appliance.hardware.buses import HardwareError

if TYPE_CHECKING:
    from appliance.config.homeassistant import HomeAssistantConfig

log = logging.getLogger(__name__)

State = dict[str, Any]  # Home Assistant's state object: entity_id, state, attributes, last_changed...
Watcher = Callable[[State | None, State], None]  # (old state, new state), on the client's event thread

UNAVAILABLE = ("unavailable", "unknown")
BACKOFF_S = (1.0, 60.0)  # the first wait before reconnecting, and the longest


class AuthRefused(HardwareError):
    """Home Assistant refused the token (HTTP 401, or auth_invalid on the WebSocket)."""


class HomeAssistantClient:
    """One Home Assistant: its states (cached from the WebSocket once started) and its services.

    Also a daemon service (``name``, ``start``, ``stop``): the daemon starts it with the others.
    """

    name = "homeassistant"

    def __init__(self, config: HomeAssistantConfig) -> None:
        self.url = config.url.rstrip("/")
        self._token = config.token
        self.timeout_s = config.timeout_s
        self.verify_tls = config.verify_tls
        self._states: dict[str, State] = {}
        self._lock = threading.Lock()
        self._watchers: dict[str, list[Watcher]] = {}
        self._events: ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None
        self.connected = False  # the WebSocket is subscribed and the cache filled
        self.reconnects = 0
        self.last_error = ""

    # --- REST (blocking: drivers, doctor, commands) -----------------------------------------------------

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None, *, missing: str = "") -> Any:
        import ssl
        import urllib.error
        import urllib.request

        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        request.add_header("Content-Type", "application/json")
        context = None
        if self.url.startswith("https://"):
            context = ssl.create_default_context()
            if not self.verify_tls:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=context) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                refused = f"Home Assistant at {self.url} refused the token ({exc.code})"
                raise AuthRefused(refused, fix=TOKEN_FIX) from None
            if exc.code == 404 and missing:
                raise HardwareError(missing, fix="check the entity id in Home Assistant (Settings, Entities)") from None
            raise HardwareError(f"Home Assistant at {self.url} answered {method} {path} with {exc.code}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise HardwareError(
                f"cannot reach Home Assistant at {self.url}: {reason}",
                fix="check homeassistant.url, that Home Assistant runs, and that this Pi reaches it on the network",
            ) from None

    def check_api(self) -> str:
        """``GET /api/``: Home Assistant's answer ("API running."), or a HardwareError saying what is wrong."""
        answer = self._request("GET", "/api/")
        return str(answer.get("message", "")) if isinstance(answer, dict) else ""

    def list_states(self) -> list[State]:
        """``GET /api/states``: every entity Home Assistant has (the Settings page offers them as devices)."""
        states = self._request("GET", "/api/states")
        return [s for s in states if isinstance(s, dict) and "entity_id" in s] if isinstance(states, list) else []

    def fetch_state(self, entity_id: str) -> State:
        """``GET /api/states/<entity_id>`` now (and keep it)."""
        state = self._request("GET", f"/api/states/{entity_id}", missing=f"Home Assistant has no entity {entity_id}")
        if not isinstance(state, dict) or "state" not in state:
            raise HardwareError(f"Home Assistant sent no state for {entity_id}")
        self._store(state)
        return state

    def state(self, entity_id: str) -> State:
        """The entity's state: the last one the WebSocket pushed, else fetched now."""
        with self._lock:
            cached = self._states.get(entity_id) if self.connected else None
        return cached if cached is not None else self.fetch_state(entity_id)

    def call_service(self, domain: str, service: str, data: dict[str, Any]) -> None:
        """``POST /api/services/<domain>/<service>``; the states it changed are kept at once."""
        changed = self._request("POST", f"/api/services/{domain}/{service}", data)
        for state in changed if isinstance(changed, list) else ():
            if isinstance(state, dict) and "entity_id" in state:
                self._store(state)

    def watch(self, entity_id: str, callback: Watcher) -> None:
        """Call ``callback(old, new)`` whenever the entity's state changes (once the WebSocket runs)."""
        self._watchers.setdefault(entity_id, []).append(callback)

    def _store(self, state: State) -> None:
        """Keep a state; tell the entity's watchers when it changed."""
        entity_id = state["entity_id"]
        with self._lock:
            old = self._states.get(entity_id)
            self._states[entity_id] = state
        if old is None or old.get("state") == state.get("state"):
            return  # the first state seen is no change; nor is a new attribute (a brightness) of the same state
        events = self._events
        for callback in self._watchers.get(entity_id, ()):
            if events is not None:
                with contextlib.suppress(RuntimeError):  # stopped meanwhile: the daemon is going down
                    events.submit(_safely, callback, old, state)

    # --- the WebSocket (the daemon's event loop) --------------------------------------------------------

    @property
    def ws_url(self) -> str:
        """The WebSocket API's address: ws(s)://host:port/api/websocket."""
        return "ws" + self.url.removeprefix("http") + "/api/websocket"

    async def start(self) -> None:
        """Connect in the background (returns at once); reconnects with a backoff until :meth:`stop`."""
        if self._task is None:
            self._events = ThreadPoolExecutor(1, thread_name_prefix="hass-events")
            self._task = asyncio.get_running_loop().create_task(self._run(), name="homeassistant websocket")

    async def stop(self) -> None:
        """Close the WebSocket and the event thread."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.connected = False
        events, self._events = self._events, None
        if events is not None:
            await asyncio.to_thread(events.shutdown)

    def status(self) -> dict[str, Any]:
        """For the doctor and the status page."""
        return {
            "connected": self.connected,
            "url": self.url,
            "reconnects": self.reconnects,
            "last_error": self.last_error,
        }

    async def _run(self) -> None:
        import aiohttp

        delay = BACKOFF_S[0]
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, connect=self.timeout_s)) as session:
            while True:
                try:
                    await self._connection(session)
                    self.last_error = "the connection closed"
                except AuthRefused as exc:
                    self.last_error = exc.message
                    delay = BACKOFF_S[1]  # a refused token stays refused until someone changes it
                except Exception as exc:  # whatever went wrong, the link tries again: it never ends the daemon
                    self.last_error = getattr(exc, "message", None) or str(exc) or type(exc).__name__
                if self.connected:
                    delay = BACKOFF_S[0]  # it had worked: try again soon
                self.connected = False
                log.warning("Home Assistant WebSocket at %s: %s; again in %.0f s", self.url, self.last_error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_S[1])
                self.reconnects += 1

    async def _connection(self, session: Any) -> None:
        """One connection: authenticate, subscribe, fill the cache, then keep every pushed state."""
        import aiohttp

        timeout = aiohttp.ClientWSTimeout(ws_receive=None, ws_close=self.timeout_s)
        async with session.ws_connect(self.ws_url, ssl=self.verify_tls, heartbeat=30, timeout=timeout) as ws:
            hello = await ws.receive_json(timeout=self.timeout_s)
            if hello.get("type") != "auth_required":
                raise ValueError(f"expected auth_required, got {hello.get('type')!r}")
            await ws.send_json({"type": "auth", "access_token": self._token})
            answer = await ws.receive_json(timeout=self.timeout_s)
            if answer.get("type") == "auth_invalid":
                raise AuthRefused(f"Home Assistant at {self.url} refused the token", fix=TOKEN_FIX)
            if answer.get("type") != "auth_ok":
                raise ValueError(f"expected auth_ok, got {answer.get('type')!r}")
            subscribe, get_states = 1, 2
            await ws.send_json({"id": subscribe, "type": "subscribe_events", "event_type": "state_changed"})
            await ws.send_json({"id": get_states, "type": "get_states"})
            async for message in ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    break
                data = json.loads(message.data)
                for item in data if isinstance(data, list) else [data]:  # coalesced messages arrive as a list
                    self._received(item, subscribe, get_states)

    def _received(self, message: dict[str, Any], subscribe: int, get_states: int) -> None:
        if message.get("type") == "result" and not message.get("success", False):
            error = message.get("error") or {}
            raise ValueError(f"request {message.get('id')} failed: {error.get('message', 'no reason given')}")
        if message.get("type") == "result" and message.get("id") == get_states:
            for state in message.get("result") or ():
                self._store(state)
            self.connected = True
            self.last_error = ""
            log.info("Home Assistant at %s: connected, %d entities", self.url, len(self._states))
        elif message.get("type") == "event" and message.get("id") == subscribe:
            data = (message.get("event") or {}).get("data") or {}
            new = data.get("new_state")
            if isinstance(new, dict) and "entity_id" in new:
                self._store(new)


def _safely(callback: Watcher, old: State | None, new: State) -> None:
    try:
        callback(old, new)
    except Exception:  # one watcher's bug must not stop the others' events
        log.exception("Home Assistant watcher for %s failed", new.get("entity_id"))
