"""Anyone who can publish on the broker is not a person: the notify topic takes messages, never decisions.

The attack of issue 31 (High 1), against ``picoagent serve`` and a real mosquitto: a client on the broker
switches ``porch_light: approval: required`` by publishing ``ON`` on its ``set`` topic, reading the
approval's id from the retained attributes and publishing ``/approve <id>`` on the notify topic; it reads
the memories with ``/memory``. Each is refused with a reply that says where a person decides, the light
stays off, the approval stays pending for the owner, and no approval id is retained anywhere on the broker.
"""

from __future__ import annotations

import asyncio
import json
import re

from appliance.config import Config, MqttConfig
from tests.helpers import eventually, started, wait_for
from tests.mqtt_broker import Broker, Watcher

ALARM = "The alarm code is 7319."
ID = re.compile(r"\ba-[0-9a-f]{8}\b")  # an approval id, as people type it (/approve a-3f2a91c0)


def retained(broker: Broker) -> dict[str, bytes]:
    """Every retained message on the broker now, as a client subscribing afresh receives them."""
    fresh = Watcher(broker, "#")
    try:
        # The broker sends the retained messages right after the subscription, so before the answer to a
        # message this client publishes after it: once that is back, every retained one is in.
        fresh.publish("test/retained-end", "end")
        wait_for(lambda: fresh.latest("test/retained-end") == b"end", what="the end-of-retained marker")
        with fresh.lock:
            return {t: p for t, p, kept in fresh.messages if kept}
    finally:
        fresh.close()


def test_a_broker_client_cannot_approve_its_own_write_nor_read_the_memories(config: Config, broker: Broker) -> None:
    from appliance.daemon import Daemon

    config.llm.preload = False
    config.mqtt = MqttConfig(enabled=True, host="127.0.0.1", port=broker.port, state_interval_s=60)
    config.devices["porch_light"].approval = "required"
    watcher = Watcher(broker, "picoagent/#")

    async def ask(text: str) -> str:
        """Publish on the notify topic as any broker client can; the reply published for it."""
        watcher.clear()
        watcher.publish("picoagent/notify", text)
        await eventually(lambda: watcher.latest("picoagent/notify/reply") is not None, what=f"a reply to {text}")
        return (watcher.latest("picoagent/notify/reply") or b"").decode()

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        runtime = daemon.runtime
        devices, desk, memory = runtime.devices, runtime.approvals, runtime.memory
        assert devices is not None and desk is not None and memory is not None
        await runtime.db.call(memory.add, ALARM, source="test")
        try:
            await eventually(lambda: daemon.mqtt is not None and daemon.mqtt.link.connected, what="the link")

            # The held write: the attributes say it waits, but not which approval it is.
            watcher.publish("picoagent/porch_light/set", "ON")
            await eventually(lambda: b"pending_approval" in (watcher.latest("picoagent/porch_light/attributes") or b""))
            [held] = await asyncio.to_thread(desk.pending)
            attributes = json.loads(watcher.latest("picoagent/porch_light/attributes") or b"{}")
            assert attributes["pending_approval"] is True, attributes

            # A tool call held in another channel's conversation waits in the same desk.
            tool = await asyncio.to_thread(desk.store.request_tool, "shell", {"command": "id"}, "model", "telegram:1")

            # Even knowing the ids, the notify topic decides nothing and lists nothing.
            for text in (f"/approve {held.id}", f"/deny {held.id}", f"/approve {tool.id}", f"/deny {tool.id}"):
                reply = await ask(text)
                assert "needs a person" in reply and "picoagent approvals" in reply, reply
            listed = await ask("/approve")
            assert "needs a person" in listed and held.id not in listed and tool.id not in listed, listed
            assert (await devices.read("porch_light"))[0].value is False
            assert {a.id for a in await asyncio.to_thread(desk.pending)} == {held.id, tool.id}

            # Nor does it read the memories.
            reply = await ask("/memory alarm code")
            assert "7319" not in reply and "needs a person" in reply, reply

            # A write asked for in a message waits too, and its reply (retained) does not name the approval.
            reply = await ask("turn on the porch light")
            asked = [a for a in await asyncio.to_thread(desk.pending) if a.id not in (held.id, tool.id)]
            assert len(asked) == 1 and "approv" in reply and not ID.search(reply), reply
            assert "only command is /help" in await ask("/help")

            # No approval id is retained on the broker (the attributes, the reply topic, anything).
            kept = await asyncio.to_thread(retained, broker)
            assert "picoagent/porch_light/attributes" in kept and "picoagent/notify/reply" in kept
            for topic, payload in kept.items():
                assert not ID.search(payload.decode(errors="replace")), (topic, payload)
                assert b"7319" not in payload, topic

            # The owner decides: the write runs then, and the attribute clears.
            await desk.decide(held.id, True, "telegram:1")
            assert (await devices.read("porch_light"))[0].value is True
            await eventually(
                lambda: (
                    json.loads(watcher.latest("picoagent/porch_light/attributes") or b"{}").get("pending_approval")
                    is False
                ),
                what="the attribute cleared",
            )
        finally:
            daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())
    watcher.close()
