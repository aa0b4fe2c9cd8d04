"""MqttLink against a real mosquitto: availability and last will, resend after a broker restart, auth errors."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.config import MqttConfig
from appliance.hardware.remote import mqtt as link_module
from appliance.hardware.remote.mqtt import MqttLink, probe
from tests.helpers import eventually, free_port
from tests.mqtt_broker import PASSWORD, USER, Broker, Watcher, running


@pytest.fixture
def mqtt_broker(tmp_path: Path) -> Iterator[Broker]:
    with running(tmp_path / "mosquitto") as broker:
        yield broker


@pytest.fixture
def mqtt_broker_auth(tmp_path: Path) -> Iterator[Broker]:
    with running(tmp_path / "mosquitto-auth", users={USER: PASSWORD}) as broker:
        yield broker


def _config(broker: Broker, **kw: object) -> MqttConfig:
    return MqttConfig(enabled=True, host="127.0.0.1", port=broker.port, base_topic="pa", **kw)  # type: ignore[arg-type]


def test_online_then_offline_and_retained_state_survives_a_broker_restart(mqtt_broker: Broker) -> None:
    watcher = Watcher(mqtt_broker, "pa/#")
    received: list[tuple[str, bytes]] = []
    connects: list[int] = []

    async def main() -> None:
        link = MqttLink(_config(mqtt_broker))
        link.subscribe("pa/+/set", lambda t, p: received.append((t, p)))
        link.publish("pa/early", "kept", retain=True)  # before start: kept for the first connection
        link.publish("pa/lost", "gone")  # not retained, not connected: dropped and counted
        link.on_connect(lambda: connects.append(1))
        await link.start()
        await eventually(lambda: link.connected, what="the link connecting")
        await eventually(lambda: watcher.latest("pa/early") == b"kept", what="the retained message")
        assert watcher.latest("pa/status") == b"online"
        assert link.status()["dropped"] == 1 and watcher.latest("pa/lost") is None
        watcher.publish("pa/relay/set", "ON")
        await eventually(lambda: received == [("pa/relay/set", b"ON")], what="the command reaching the callback")

        await asyncio.to_thread(mqtt_broker.stop)
        await eventually(lambda: not link.connected, what="the link seeing the broker go")
        await eventually(lambda: link.status()["last_error"] is not None, what="the drop in the status")
        assert "dropped" in link.status()["last_error"] or "reach" in link.status()["last_error"]
        link.publish("pa/early", "newer", retain=True)  # while down: only the latest payload is kept
        await asyncio.to_thread(mqtt_broker.start)  # no persistence: the broker forgot every retained message
        watcher2 = await asyncio.to_thread(Watcher, mqtt_broker, "pa/#")
        await eventually(lambda: link.connected and len(connects) == 2, timeout=15, what="the reconnect")
        await eventually(lambda: watcher2.latest("pa/early") == b"newer", what="the retained state republished")
        assert watcher2.latest("pa/status") == b"online"
        assert link.status()["reconnects"] == 1
        watcher2.publish("pa/fan/set", "OFF")  # the subscription was kept across the reconnect
        await eventually(lambda: ("pa/fan/set", b"OFF") in received, what="a command after the reconnect")
        await link.stop()
        await eventually(lambda: watcher2.latest("pa/status") == b"offline", what="offline at stop")
        watcher2.close()

    asyncio.run(main())
    watcher.close()


def test_last_will_says_offline_when_the_daemon_dies(mqtt_broker: Broker) -> None:
    watcher = Watcher(mqtt_broker, "pa/status")

    async def main() -> None:
        link = MqttLink(_config(mqtt_broker, keepalive_s=5))
        await link.start()
        await eventually(lambda: watcher.latest("pa/status") == b"online", what="online")
        client = link._client
        assert client is not None
        client._client.socket().close()  # the process dies: no DISCONNECT, so the broker sends the will
        await eventually(lambda: watcher.latest("pa/status") == b"offline", timeout=15, what="the last will")
        await link.stop()

    asyncio.run(main())
    watcher.close()


def test_retained_commands_are_not_replayed_at_a_reconnect(mqtt_broker: Broker) -> None:
    watcher = Watcher(mqtt_broker, "pa/#")
    watcher.publish("pa/relay/set", "ON", retain=True)  # retained on purpose, before picoagent starts
    got: list[bytes] = []

    async def main() -> None:
        link = MqttLink(_config(mqtt_broker))
        link.subscribe("pa/+/set", lambda _t, p: got.append(p), replay_retained=False)
        await link.start()
        await eventually(lambda: got == [b"ON"], what="the retained command at the first connection")
        client = link._client
        assert client is not None
        client._client.disconnect()  # the connection drops; the retained command is still at the broker
        await eventually(lambda: link.status()["reconnects"] == 1 and link.connected, what="the reconnect")
        watcher.publish("pa/relay/set", "OFF")  # a live one: arrives after anything the reconnect delivered
        await eventually(lambda: got[-1] == b"OFF", what="the live command")
        assert got == [b"ON", b"OFF"]  # the retained ON was not applied again
        await link.stop()

    asyncio.run(main())
    watcher.close()


def test_probe_says_why_a_broker_refuses_or_cannot_be_reached(mqtt_broker_auth: Broker) -> None:
    good = _config(mqtt_broker_auth, username=USER, password=PASSWORD)
    assert asyncio.run(probe(good)) is None
    problem, fix = asyncio.run(probe(_config(mqtt_broker_auth, username=USER, password="wrong-one")))  # type: ignore[misc]
    assert "refused the login as 'pico'" in problem and "MQTT_PASSWORD" in fix
    assert "wrong-one" not in problem + fix
    anonymous = asyncio.run(probe(_config(mqtt_broker_auth)))
    assert anonymous is not None and "refused the login anonymously" in anonymous[0]
    nowhere = MqttConfig(enabled=True, port=free_port())
    problem, fix = asyncio.run(probe(nowhere))  # type: ignore[misc]
    assert "cannot reach the broker" in problem and "mqtt.host" in fix


def test_a_link_to_a_wrong_password_is_a_status_not_a_crash(
    mqtt_broker_auth: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(link_module, "RETRY_MAX_S", 0.5)

    async def main() -> None:
        link = MqttLink(_config(mqtt_broker_auth, username=USER, password="nope-nope"))
        await link.start()
        await eventually(lambda: link.status()["last_error"] is not None, what="the refusal in the status")
        status = link.status()
        assert status["connected"] is False and "refused the login" in status["last_error"]
        assert "nope-nope" not in str(status)
        await link.stop()

    asyncio.run(main())


def test_tls_with_the_brokers_own_ca_and_a_clear_error_without_it(tmp_path: Path) -> None:
    with running(tmp_path / "mosquitto-tls", tls=True) as broker:
        assert asyncio.run(probe(_config(broker, tls=True, ca_file=broker.ca_file))) is None
        problem = asyncio.run(probe(_config(broker, tls=True)))  # the system's CAs do not know the test CA
        assert problem is not None and "TLS with the broker" in problem[0] and "mqtt.ca_file" in problem[1]
        plain = asyncio.run(probe(_config(broker), timeout_s=2))  # plain MQTT to a TLS port
        assert plain is not None and "mqtt.tls" in plain[1]


def test_a_handler_that_fails_on_what_anyone_publishes_is_logged_once_a_minute(
    mqtt_broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """Anyone on the broker can publish what trips a handler: the link goes on, the log gets one traceback."""
    watcher = Watcher(mqtt_broker, "pa/#")
    calls: list[bytes] = []

    def fragile(_topic: str, payload: bytes) -> None:
        calls.append(payload)
        raise ValueError(f"cannot read {payload!r}")

    async def main() -> None:
        link = MqttLink(_config(mqtt_broker))
        link.subscribe("pa/in", fragile)
        await link.start()
        await eventually(lambda: link.connected, what="the link connecting")
        for n in range(5):
            watcher.publish("pa/in", f"junk {n}")
        await eventually(lambda: len(calls) == 5, what="five messages handled")
        assert link.connected
        await link.stop()

    with caplog.at_level("ERROR", logger="appliance.hardware.remote.mqtt"):
        asyncio.run(main())
    watcher.close()
    failures = [r for r in caplog.records if "the handler of pa/in failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None


def test_a_broker_stopping_with_the_daemon_leaves_no_unread_error(tmp_path: Path) -> None:
    """The broker and the daemon stopped together: aiomqtt's disconnect error is read, not logged by asyncio as
    "Future exception was never retrieved" (a README walk saw it; before the fix 2 of 6 such stops logged it)."""
    said: list[str] = []
    for round_ in range(6):
        with running(tmp_path / f"mosquitto-{round_}") as broker:

            async def main(broker: Broker = broker) -> None:
                asyncio.get_running_loop().set_exception_handler(lambda _, context: said.append(context["message"]))
                link = MqttLink(_config(broker))
                await link.start()
                await eventually(lambda: link.connected, what="the link connecting")
                await asyncio.gather(asyncio.to_thread(broker.stop), link.stop())

            asyncio.run(main())
            # An unread future's error is reported (to the loop's handler, closed or not) when it is collected:
            # once the loop has ended, every future it made is settled, so this sees them all.
            gc.collect()
    assert said == []
