"""The daemon's one connection to the MQTT broker (aiomqtt on paho-mqtt): kept up, and never a crash.

:class:`MqttLink` connects in the background and reconnects with backoff (0.5 s doubling to 30 s) for as
long as the daemon runs; a broker that is down, unreachable or refuses the credentials is a status
(:meth:`MqttLink.status`, ``picoagent status``), never an exception in the daemon.

- **Availability**: ``<base_topic>/status`` is ``online`` (retained) once connected; the broker publishes the
  last will ``offline`` (retained) when the connection drops, and :meth:`MqttLink.stop` publishes it itself.
- **Nothing lost while down**: the link keeps the latest payload of every retained topic it was given and
  publishes them all again after every (re)connect, so a broker restarted without persistence has every
  discovery message and state again; then the ``on_connect`` callbacks run (the bridge reads the devices
  again). A non-retained message given while disconnected is dropped and counted (``dropped``): it was an
  answer or an event of that moment, and late it would mislead.
- **No replayed commands**: the session is clean (``clean_session=True``), so the broker queues nothing for
  picoagent while it is away; a subscription made with ``replay_retained=False`` (the command topics) also
  skips retained messages after the first connection of the process, so a command retained on purpose is
  applied once at start, not again at every reconnect.
- **Threads**: :meth:`publish` may be called from any thread (drivers run on worker threads); the sending
  happens on the event loop. Callbacks run on the event loop.

aiomqtt and paho are imported by this module only: the daemon imports it when ``mqtt.enabled`` is true.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiomqtt

from appliance.config import MqttConfig
from appliance.ratelimit import RateLimiter

log = logging.getLogger(__name__)

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0
CONNECT_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 3.0
IN_FLIGHT = 8  # publishes awaiting the broker's acknowledgement at once

Callback = Callable[[str, bytes], None]


@dataclass
class _Subscription:
    topic_filter: str
    callback: Callback
    replay_retained: bool


def availability_topic(config: MqttConfig) -> str:
    """Where ``online``/``offline`` is published (retained; ``offline`` is the last will)."""
    return f"{config.base_topic}/status"


def explain(exc: BaseException, config: MqttConfig) -> tuple[str, str]:
    """A failed connection as (what happened, what to do) for people; never shows the password."""
    broker = f"{config.host}:{config.port}"
    code = getattr(exc, "rc", None)
    value = getattr(code, "value", code)
    if value in (4, 5, 134, 135):  # bad user name or password / not authorised (mosquitto 2 says the latter)
        who = f"as {config.username!r}" if config.username else "anonymously"
        return (
            f"the broker at {broker} refused the login {who}: wrong user name or password, or not allowed",
            "check mqtt.username and MQTT_PASSWORD in the secrets file against the broker's password file",
        )
    text = str(exc) or type(exc).__name__
    lowered = text.lower()
    if "refused" in lowered or "unreachable" in lowered or "name or service" in lowered or "timed out" in lowered:
        return (
            f"cannot reach the broker at {broker}: {text}",
            "start the broker (systemctl start mosquitto) or fix mqtt.host and mqtt.port",
        )
    if "disconnected" in lowered or "connection lost" in lowered:
        return (
            f"the connection to the broker at {broker} dropped",
            "picoagent reconnects by itself; if it keeps dropping, read the broker's log",
        )
    if "ssl" in lowered or "certificate" in lowered or "tls" in lowered:
        return (
            f"TLS with the broker at {broker} failed: {text}",
            "check mqtt.tls, mqtt.port (8883 for TLS) and mqtt.ca_file",
        )
    return (f"the broker at {broker}: {text}", "check the mqtt: section and the broker's log")


PENDING_WARN = 200  # publishes awaiting the broker's ack before aiomqtt's warning: a real backlog, not a start


def make_client(config: MqttConfig, *, will: bool = True) -> aiomqtt.Client:
    """An aiomqtt client as the config says (TLS, credentials, last will); not yet connected."""
    tls = ssl.create_default_context(cafile=config.ca_file or None) if config.tls else None
    last_will = aiomqtt.Will(availability_topic(config), "offline", qos=1, retain=True) if will else None
    client = aiomqtt.Client(
        config.host,
        config.port,
        username=config.username or None,
        password=config.password or None,
        identifier=config.client_id,
        will=last_will,
        clean_session=True,  # the broker keeps nothing for us while we are away: no stale commands
        keepalive=config.keepalive_s,
        timeout=CONNECT_TIMEOUT_S,
        tls_context=tls,
    )
    # Discovery publishes a config per device and the states at once (a dozen in a small home): aiomqtt warns
    # "There are N pending publish calls" above 10, which read as trouble in the log at every start.
    client.pending_calls_threshold = PENDING_WARN
    return client


async def probe(config: MqttConfig, timeout_s: float = 5.0) -> tuple[str, str] | None:
    """Connect once (credentials, TLS) and disconnect: None when it worked, else (problem, fix). For doctor."""
    probe_config = dataclasses.replace(config, client_id=f"{config.client_id}-doctor")  # not the daemon's session
    try:
        async with asyncio.timeout(timeout_s):
            async with make_client(probe_config, will=False):
                return None
    except TimeoutError:
        return (
            f"no answer from the broker at {config.host}:{config.port} within {timeout_s:g} s",
            "check mqtt.host, mqtt.port and mqtt.tls (a TLS port spoken to in plain text stays silent)",
        )
    except (aiomqtt.MqttError, OSError) as exc:
        return explain(exc, config)


def _read_when_done(client: aiomqtt.Client) -> None:
    """Read the error aiomqtt sets on the client's disconnect future when the broker goes away. When the daemon
    stops at that moment nothing awaits it, and asyncio logged "Future exception was never retrieved" (code
    128) at the stop (a README walk saw it with the broker and the daemon stopped together). The future is
    aiomqtt's own (``_disconnected``, set after connecting): looked up, not relied on."""
    future = getattr(client, "_disconnected", None)
    if isinstance(future, asyncio.Future):
        future.add_done_callback(lambda done: None if done.cancelled() else done.exception())


class MqttLink:
    """One connection to the broker, kept up in the background; publish from anywhere, subscribe any time.

    Also a daemon service (``name``, ``start``, ``stop``): the daemon makes it before the devices (the
    ``driver: mqtt`` devices subscribe and publish through it) and starts it right after them.
    """

    name = "mqtt link"

    def __init__(self, config: MqttConfig) -> None:
        self.config = config
        self.availability_topic = availability_topic(config)
        self._subscriptions: list[_Subscription] = []
        self._handler_failures = RateLimiter(1, 60.0)  # a failing handler's traceback: once a minute per topic
        self._connect_callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()  # guards the outgoing state below (publish runs on any thread)
        self._retained: dict[str, tuple[bytes, int]] = {}  # every retained topic's latest payload
        self._unsent_retained: set[str] = set()  # retained topics not yet sent on this connection
        self._unsent_plain: list[tuple[str, bytes, int]] = []
        self._deletions: dict[str, int] = {}  # retained topics to clear at the broker (empty payload), once
        self._client: aiomqtt.Client | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._connected = False
        self._connections = 0
        self._stopping = False
        self.last_error: str | None = None
        self.last_fix: str | None = None
        self.dropped = 0  # non-retained messages given while disconnected

    # --- the contract ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Return at once; the connection is made (and remade) in the background."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Publish ``offline`` on the availability topic (when connected) and disconnect."""
        self._stopping = True
        client = self._client
        if client is not None and self._connected:
            with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                await client.publish(self.availability_topic, "offline", qos=1, retain=True, timeout=STOP_TIMEOUT_S)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._connected = False

    def subscribe(self, topic_filter: str, callback: Callback, *, replay_retained: bool = True) -> None:
        """Call ``callback(topic, payload)`` on the event loop for each message matching ``topic_filter``.

        Kept across reconnects. ``replay_retained=False``: a retained message is delivered on the first
        connection only (a command retained on purpose runs once at start, not at every reconnect).
        """
        subscription = _Subscription(topic_filter, callback, replay_retained)
        self._subscriptions.append(subscription)
        client = self._client
        if client is not None and self._connected and self._loop is not None:
            self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._subscribe(client, topic_filter)))

    def publish(self, topic: str, payload: str | bytes, *, retain: bool = False, qos: int = 1) -> None:
        """Send a message (any thread). While disconnected a retained topic keeps its latest payload for the
        reconnect; a non-retained message is dropped and counted."""
        data = payload.encode() if isinstance(payload, str) else bytes(payload)
        with self._lock:
            if retain:
                if data:
                    self._retained[topic] = (data, qos)
                    self._deletions.pop(topic, None)
                else:  # an empty retained payload deletes the topic at the broker: nothing to resend later
                    self._retained.pop(topic, None)
                    self._deletions[topic] = qos
                self._unsent_retained.add(topic)
            elif self._connected:
                self._unsent_plain.append((topic, data, qos))
            else:
                self.dropped += 1
                return
        self._kick()

    def on_connect(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` on the event loop after every (re)connect (republish state there)."""
        self._connect_callbacks.append(callback)

    @property
    def connected(self) -> bool:
        """Whether the broker is connected now."""
        return self._connected

    def status(self) -> dict[str, Any]:
        """For /api/status and ``picoagent status``: connected, broker, reconnects, last_error, dropped."""
        scheme = "mqtts" if self.config.tls else "mqtt"
        return {
            "connected": self._connected,
            "broker": f"{scheme}://{self.config.host}:{self.config.port}",
            "reconnects": max(0, self._connections - 1),
            "last_error": self.last_error,
            "dropped": self.dropped,
        }

    # --- inside ---------------------------------------------------------------------------------------

    def _kick(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is None or wake is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the daemon is stopping
            loop.call_soon_threadsafe(wake.set)

    async def _run(self) -> None:
        delay = RETRY_FIRST_S
        while not self._stopping:
            try:
                await self._session()
                delay = RETRY_FIRST_S  # it was up: the next attempt comes soon
            except asyncio.CancelledError:
                raise
            except (aiomqtt.MqttError, OSError) as exc:
                was_up = self._connected
                problem, fix = explain(exc, self.config)
                if problem != self.last_error or was_up:
                    log.warning("mqtt: %s (%s); retrying in the background", problem, fix)
                self.last_error, self.last_fix = problem, fix
                if was_up:
                    delay = RETRY_FIRST_S
            except Exception:  # a bug must not end the link for good
                log.exception("mqtt: the connection failed")
                self.last_error = "the connection failed; see the log"
            finally:
                self._connected = False
                self._client = None
            if self._stopping:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    async def _session(self) -> None:
        """One connection: subscribe, announce, resend what is retained, then deliver and send until it drops."""
        client = make_client(self.config)
        async with client:
            _read_when_done(client)
            self._client = client
            first = self._connections == 0
            self._connections += 1
            subscribed = {s.topic_filter for s in self._subscriptions}
            for topic_filter in subscribed:
                await self._subscribe(client, topic_filter)
            await client.publish(self.availability_topic, "online", qos=1, retain=True)
            with self._lock:
                self._connected = True
                self._unsent_retained = set(self._retained) | set(self._deletions)
            # Made while the ones above were sent (subscribe saw no connection yet): from here on subscribe does it.
            for topic_filter in {s.topic_filter for s in self._subscriptions} - subscribed:
                await self._subscribe(client, topic_filter)
            self.last_error = self.last_fix = None
            log.info("mqtt: connected to %s:%s", self.config.host, self.config.port)
            for callback in list(self._connect_callbacks):
                try:
                    callback()
                except Exception:  # one callback's bug must not keep the others from republishing
                    log.exception("mqtt: an on_connect callback failed")
            sender = asyncio.ensure_future(self._send_forever(client))
            try:
                async for message in client.messages:
                    self._deliver(message, first)
            finally:
                sender.cancel()
                await asyncio.gather(sender, return_exceptions=True)
                if sender.done() and not sender.cancelled() and sender.exception() is not None:
                    raise sender.exception()  # type: ignore[misc]

    async def _subscribe(self, client: aiomqtt.Client, topic_filter: str) -> None:
        try:
            await client.subscribe(topic_filter, qos=1)
        except aiomqtt.MqttError as exc:
            log.warning("mqtt: subscribing to %s failed: %s", topic_filter, exc)

    def _deliver(self, message: aiomqtt.Message, first_connection: bool) -> None:
        topic = message.topic.value
        payload = message.payload
        data = payload if isinstance(payload, bytes) else str(payload if payload is not None else "").encode()
        for subscription in list(self._subscriptions):
            if not message.topic.matches(subscription.topic_filter):
                continue
            if message.retain and not subscription.replay_retained and not first_connection:
                continue
            try:
                subscription.callback(topic, data)
            except Exception:  # one handler's bug must not stop the others or the link
                # Anyone on the broker can send what trips it: its traceback at most once a minute per topic.
                if self._handler_failures.hit(topic) == 0:
                    log.exception("mqtt: the handler of %s failed (logged at most once a minute)", topic)

    async def _send_forever(self, client: aiomqtt.Client) -> None:
        assert self._wake is not None
        while True:
            self._wake.clear()
            await self._send_pending(client)
            await self._wake.wait()

    async def _send_pending(self, client: aiomqtt.Client) -> None:
        with self._lock:
            topics, self._unsent_retained = self._unsent_retained, set()
            plain, self._unsent_plain = self._unsent_plain, []
            deletions = self._deletions
            batch = [(t, *self._retained[t], True) for t in topics if t in self._retained]
            batch += [(t, b"", deletions.pop(t), True) for t in topics if t in deletions and t not in self._retained]
            batch += [(t, data, qos, False) for t, data, qos in plain]
        if not batch:
            return
        results: list[BaseException | None] = []
        for start in range(0, len(batch), IN_FLIGHT):  # aiomqtt warns past 10 unconfirmed publishes
            results += await asyncio.gather(
                *(
                    client.publish(t, data, qos=qos, retain=retain)
                    for t, data, qos, retain in batch[start : start + IN_FLIGHT]
                ),
                return_exceptions=True,
            )
        failed = [item for item, result in zip(batch, results, strict=True) if isinstance(result, BaseException)]
        if failed:
            with self._lock:
                for topic, _data, _qos, retain in failed:
                    if retain:
                        self._unsent_retained.add(topic)
                    else:
                        self.dropped += 1
            first = next(r for r in results if isinstance(r, BaseException))
            raise first if isinstance(first, aiomqtt.MqttError) else aiomqtt.MqttError(str(first))
