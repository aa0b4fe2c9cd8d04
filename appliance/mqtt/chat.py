"""The notify topic as a chat channel: a message on ``<base_topic>/notify`` is a chat message to the assistant.

It goes through the same pipeline as Telegram or a webhook bridge (:class:`appliance.channels.base.ChatChannel`):
``/commands`` work, one turn at a time in its one conversation (``mqtt``), the reply with its footer. The reply
is published, retained, on ``<base_topic>/notify/reply`` (Home Assistant shows it as the assistant's "Last
reply" sensor; the whole text and its time are on ``.../reply/attributes``). A reply that cannot be published
(the broker is down) goes to the durable outbox and is published at the reconnect.

Who may talk: whoever may publish on the topic. The broker's accounts and ACL are this channel's allowlist;
there is no pairing. That is not a person the Pi knows (``people = False``): Home Assistant, any other
client, anyone on a shared broker. So a message here goes to the assistant, within each device's policy,
and the only command is ``/help``: ``/approve``, ``/deny``, ``/memory`` and every other command are refused
with where a person does them, so nobody approves the write they asked for on the ``set`` topic. Nothing it
publishes names an approval: ids in a reply become ``ID`` (the retained reply topic is readable by every
client). It takes no proactive messages (no ``owner_target``): the chat channels and Home Assistant's own
notifications do that.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, ClassVar

from appliance.channels.base import ChatChannel, Incoming
from appliance.channels.commands import Said
from appliance.hardware.approvals import hide_ids
from appliance.mqtt.discovery import Topics
from appliance.outbox import Outbox, Outcome, OutMessage
from appliance.runtime import Runtime

log = logging.getLogger(__name__)

MAX_TEXT = 4000  # characters of one message taken; the rest is cut (a sensor's state holds 255 anyway)
CHAT = "mqtt"


class MqttChat(ChatChannel):
    """Messages on the notify topic, answered on the reply topic."""

    name: ClassVar[str] = "mqtt"
    people: ClassVar[bool] = False  # whoever the broker lets publish: messages to the assistant, not commands

    def __init__(self, config: Any, runtime: Runtime, outbox: Outbox, link: Any) -> None:
        super().__init__(config, runtime, outbox)
        self.link = link
        self.topics = Topics.of(config)
        self._subscribed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.received = 0

    async def connect(self) -> None:
        """Listen on the notify topic (the link keeps the subscription across reconnects)."""
        if not self._subscribed:
            self.link.subscribe(self.topics.notify, self._on_message, replay_retained=False)
            self._subscribed = True
        self.detail = f"on {self.topics.notify}"

    async def disconnect(self) -> None:
        """The link is the bridge's: nothing to close here."""

    async def admit(self, incoming: Incoming) -> bool:
        """Whoever the broker lets publish on the notify topic may talk (its accounts and ACL)."""
        return True

    def owner_target(self) -> str | None:
        """No proactive messages go here."""
        return None

    def _on_message(self, _topic: str, payload: bytes) -> None:
        text = payload.decode("utf-8", errors="replace").strip()[:MAX_TEXT]
        if not text:
            return
        self.received += 1
        incoming = Incoming(chat_id=CHAT, user_id=CHAT, user_name="MQTT", text=text, private=True)
        task = asyncio.ensure_future(self.handle(incoming))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _publish(self, text: str) -> None:
        if not self.link.connected:
            raise ConnectionError("the broker is not connected")
        text = hide_ids(text)  # retained: every client of the broker reads it
        self.link.publish(self.topics.notify_reply, text, retain=True)
        attributes = {"text": text, "at": time.time()}
        self.link.publish(f"{self.topics.notify_reply}/attributes", json.dumps(attributes), retain=True)

    async def say(self, incoming: Incoming, said: Said) -> None:
        """Publish the answer on the reply topic; raise while the broker is down (the outbox keeps it)."""
        self._publish(said.text)

    async def deliver(self, message: OutMessage) -> Outcome:
        """Publish one stored message (a reply the broker was down for)."""
        try:
            self._publish(message.text)
        except ConnectionError as exc:
            await self.db.call(self.outbox.mark_retry, message, str(exc))
            return "retry"
        await self.db.call(self.outbox.mark_sent, message.id)
        return "sent"

    async def stop(self) -> None:
        """Let answers in flight finish (briefly), as every channel does."""
        await super().stop()
        for task in list(self._tasks):
            task.cancel()
