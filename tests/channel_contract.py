"""Every chat channel seen the same way, for the contract suite (tests/test_channel_contract.py).

A :class:`Platform` is one channel on its test harness (the fake servers of the channel's own suite:
Telegram's Bot API, Discord's REST and gateway, Slack's Web API and Socket Mode, dovecot and aiosmtpd,
Meta's Graph API, a signed webhook request and its receiver, and the in-memory platform), through the
channel's real library: what the owner and a stranger type, what reached the owner's chat, a send the
platform loses, a restart. A new channel adds its class here and one line in :data:`PLATFORMS`; the
contract's tests then run on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from appliance.channels.base import ChatChannel, button_command
from appliance.channels.discord.text import MESSAGE_LIMIT as DISCORD_LIMIT
from appliance.channels.slack.text import MESSAGE_LIMIT as SLACK_LIMIT
from appliance.channels.telegram.text import MESSAGE_LIMIT as TELEGRAM_LIMIT
from appliance.channels.whatsapp.graph import TEXT_LIMIT as WHATSAPP_LIMIT
from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests import telegram_harness as telegram
from tests import test_channel_base as memory
from tests import test_channel_discord as discord
from tests import test_channel_email as email
from tests import test_channel_slack as slack
from tests import test_channel_webhook as webhook
from tests import test_channel_whatsapp as whatsapp
from tests.helpers import eventually
from tests.test_automation_commands import automation


class Platform:
    """One channel on its harness ``h`` (which has ``channel``, ``runtime``, ``outbox``, ``model``, ``clock``)."""

    name = ""
    limit: int | None = None  # a message's length limit: a longer one is delivered in pieces; None: one message
    people = True  # False: its senders are not people the Pi knows (commands that decide are refused there)
    stranger = ""  # the id a stranger writes with, as the log names them ("": no one is turned away by name)
    strangers = True  # someone not allowed can write (and must not be processed)
    delivers = True  # a platform server the outbox delivers to, that can lose a send and go down
    credential = True  # a token or password the platform can refuse

    def __init__(self, h: Any) -> None:
        self.h = h

    @property
    def channel(self) -> ChatChannel:
        """The running channel (a new one after :meth:`restart`)."""
        return self.h.channel  # type: ignore[no-any-return]

    @property
    def runtime(self) -> Runtime:
        return self.h.runtime  # type: ignore[no-any-return]

    @property
    def outbox(self) -> Outbox:
        return self.h.outbox  # type: ignore[no-any-return]

    @property
    def model(self) -> ScriptedModel:
        return self.h.model  # type: ignore[no-any-return]

    def pin(self, number: int) -> bool:
        """A GPIO pin of the simulated Pi."""
        assert self.runtime.devices is not None
        return bool(self.runtime.devices.backend.pin_factory.pin(number).state)

    @property
    def owner_chat(self) -> str:
        """The owner's chat as the outbox names it."""
        target = self.channel.owner_target()
        assert target is not None
        return target

    async def owner_says(self, text: str) -> list[str]:
        """The owner types a line; the texts of the answers to it."""
        raise NotImplementedError

    async def press(self, data: str) -> None:
        """The owner presses the button ``data`` under the last message to them; where the platform shows no
        buttons, they type the command the message names instead."""
        answers = await self.owner_says(button_command(data))
        assert answers, f"no answer to {button_command(data)}"

    repeat_logged = True  # the channel logs a message that arrives again ("... arrived again")

    async def again(self) -> None:
        """The platform delivers the owner's last message a second time (its ack was lost); returns once the
        channel took it in (where ``repeat_logged``: it logs that it recognised it)."""
        raise NotImplementedError

    async def stranger_says(self, text: str) -> None:
        """Someone not allowed (nor paired) writes; returns once the channel turned the message away."""
        before = self.channel.doorkeeper.turned_away_total
        self.stranger_writes(text)
        await eventually(lambda: self.channel.doorkeeper.turned_away_total > before, 5, "the stranger turned away")

    def stranger_writes(self, text: str) -> None:
        """The platform hands a stranger's message to the channel."""
        raise NotImplementedError

    def to_stranger(self) -> list[str]:
        """What the channel said to the stranger."""
        raise NotImplementedError

    def owner_got(self) -> list[str]:
        """The texts that reached the owner's chat, in order."""
        raise NotImplementedError

    def lose_next(self, after: int) -> None:
        """The platform takes ``after`` more sends, then loses one (the connection drops, or a 5xx)."""
        raise NotImplementedError

    async def go_down(self) -> None:
        """The platform cannot be reached (the network is gone)."""
        raise NotImplementedError

    async def come_back(self) -> None:
        """The platform can be reached again."""
        raise NotImplementedError

    def refuse_credentials(self) -> str:
        """Put a credential the platform refuses into the config; the reason the channel gives."""
        raise NotImplementedError

    def new_channel(self) -> ChatChannel:
        return self.h.new_channel()  # type: ignore[no-any-return]

    async def restart(self) -> None:
        """Stop the channel (as the daemon does) and start a new one on the same database and outbox."""
        await self.h.channel.stop()
        self.h.channel = self.new_channel()
        await self.h.channel.start()


class OnMemory(Platform):
    name = "memory"
    delivers = False  # no server to lose a send
    stranger = memory.STRANGER

    sent = 0

    async def owner_says(self, text: str) -> list[str]:
        before = len(memory.said_to(self.h.channel, f"dm-{memory.OWNER}"))
        self.sent += 1
        self.last = memory.dm(memory.OWNER, text, remote_id=f"m{self.sent}")
        await self.h.channel.handle(self.last)
        return memory.said_to(self.h.channel, f"dm-{memory.OWNER}")[before:]

    async def again(self) -> None:
        await self.h.channel.handle(self.last)

    refused = ""  # set by refuse_credentials: what the next channel's connect is told

    async def stranger_says(self, text: str) -> None:
        await self.h.channel.handle(memory.dm(memory.STRANGER, text))

    def owner_got(self) -> list[str]:
        return memory.said_to(self.h.channel, f"dm-{memory.OWNER}") + [
            text for chat, text in self.h.channel.delivered if chat == memory.OWNER
        ]

    def refuse_credentials(self) -> str:
        self.refused = "the memory platform refused the token"
        return self.refused

    def new_channel(self) -> ChatChannel:
        return memory.platform_class("memory")(
            self.runtime.config.discord, self.runtime, self.outbox, refuse=self.refused
        )

    def to_stranger(self) -> list[str]:
        return memory.said_to(self.h.channel, f"dm-{memory.STRANGER}")


class OnTelegram(Platform):
    name = "telegram"
    stranger = str(telegram.STRANGER)
    limit = TELEGRAM_LIMIT

    async def owner_says(self, text: str) -> list[str]:
        before = len(self.h.fake.bot_messages(telegram.OWNER))
        self.h.fake.push_message(telegram.OWNER, telegram.OWNER, text)
        return [str(m["text"]) for m in (await self.h.reply_to(telegram.OWNER, before + 1))[before:]]

    async def press(self, data: str) -> None:
        [message] = [m for m in self.h.fake.bot_messages(telegram.OWNER) if data in telegram.buttons(m)][-1:]
        query = self.h.fake.push_callback(telegram.OWNER, telegram.OWNER, message["message_id"], data)
        await self.h.fake.wait_for(lambda: self.h.fake.callback_answers[query] is not None, what="the answer")
        await self.h.settle()

    async def again(self) -> None:
        assert await self.h.channel.feed_update(self.h.fake.pushed[-1])  # as a webhook post Telegram repeats
        await self.h.settle()

    def stranger_writes(self, text: str) -> None:
        self.h.fake.push_message(telegram.STRANGER, telegram.STRANGER, text)

    def to_stranger(self) -> list[str]:
        """Every call to the stranger's chat (not even "typing…")."""
        return [c.method for c in self.h.fake.calls if c.params.get("chat_id") == telegram.STRANGER]

    def owner_got(self) -> list[str]:
        return self.h.fake.sent_texts(telegram.OWNER)  # type: ignore[no-any-return]

    def lose_next(self, after: int) -> None:
        self.h.fake.add_chat(telegram.OWNER)  # the owner pressed Start once
        self.h.fake.fail_next("sendMessage", 1, kind="network", after=after)

    async def go_down(self) -> None:
        self.h.fake.add_chat(telegram.OWNER)
        await self.h.fake.close()

    async def come_back(self) -> None:
        await self.h.fake.come_back()

    def refuse_credentials(self) -> str:
        self.runtime.config.telegram.token = "999:WRONG"
        return "Telegram refused telegram.token"


class OnDiscord(Platform):
    name = "discord"
    stranger = str(discord.STRANGER)
    limit = DISCORD_LIMIT

    async def owner_says(self, text: str) -> list[str]:
        before = len(self.h.fake.bot_messages(self.h.dm()))
        self.last = self.h.fake.push_message(discord.OWNER, text)
        return [str(m["content"]) for m in (await self.h.replies(self.h.dm(), before + 1))[before:]]

    async def press(self, data: str) -> None:
        [message] = [m for m in self.h.fake.bot_messages(self.h.dm()) if data in discord.buttons(m)][-1:]
        press = self.h.fake.push_button(discord.OWNER, self.h.dm(), message["id"], data)
        await eventually(lambda: press["id"] in self.h.fake.callbacks, 5, "the press's answer")
        await self.h.settle()

    async def again(self) -> None:
        self.h.fake.dispatch("MESSAGE_CREATE", dict(self.last))  # a resumed gateway replays it
        await self.h.settle()

    def stranger_writes(self, text: str) -> None:
        self.h.fake.push_message(discord.STRANGER, text)

    def to_stranger(self) -> list[str]:
        return [str(m["content"]) for m in self.h.fake.bot_messages(self.h.dm(discord.STRANGER))]

    def owner_got(self) -> list[str]:
        return self.h.fake.sent_texts(self.h.dm())  # type: ignore[no-any-return]

    def lose_next(self, after: int) -> None:
        self.h.fake.dm_channel(discord.OWNER)
        self.h.fake.fail_next(discord.MESSAGES, 1, kind="network", after=after)

    async def go_down(self) -> None:
        self.h.fake.dm_channel(discord.OWNER)
        await self.h.fake.go_offline()

    async def come_back(self) -> None:
        await self.h.fake.go_online()

    def refuse_credentials(self) -> str:
        self.runtime.config.discord.token = "WRONG.TOKEN"
        return discord.REFUSED


class OnSlack(Platform):
    name = "slack"
    stranger = slack.STRANGER
    limit = SLACK_LIMIT

    async def owner_says(self, text: str) -> list[str]:
        before = len(self.h.fake.bot_messages(self.h.dm))
        self.last = self.h.fake.push_dm(slack.OWNER, text)
        return [str(m["text"]) for m in (await self.h.replies(self.h.dm, before + 1))[before:]]

    async def press(self, data: str) -> None:
        [message] = [m for m in self.h.fake.bot_messages(self.h.dm) if data in slack.buttons(m)][-1:]
        await self.h.fake.acked(slack.tap(self.h, slack.OWNER, self.h.dm, message, data))
        await self.h.settle()

    async def again(self) -> None:
        await self.h.fake.acked(await self.h.fake.redeliver(slack.envelope_of(self.h, self.last)))
        await self.h.settle()

    def stranger_writes(self, text: str) -> None:
        self.h.fake.push_dm(slack.STRANGER, text)

    def to_stranger(self) -> list[str]:
        return self.h.fake.sent_texts(str(self.h.fake.im_with(slack.STRANGER)["id"]))  # type: ignore[no-any-return]

    def owner_got(self) -> list[str]:
        return self.h.fake.sent_texts(self.h.dm)  # type: ignore[no-any-return]

    def lose_next(self, after: int) -> None:
        self.h.fake.fail_next("chat.postMessage", 1, "network", after=after)

    async def go_down(self) -> None:
        self._port = self.h.fake.port
        await self.h.fake.close()

    async def come_back(self) -> None:
        await self.h.fake.start(self._port)

    def refuse_credentials(self) -> str:
        self.runtime.config.slack.bot_token = "xoxb-revoked"
        return "Slack refused slack.bot_token (invalid_auth)"


class OnEmail(Platform):
    name = "email"
    stranger = email.STRANGER

    async def owner_says(self, text: str) -> list[str]:
        before = len(self.h.mail.smtp.to(self.h.owner.address))
        self.last = await self.h.write(text, f"asking {text}")
        return [email.text_of(m) for m in (await self.h.replies(before + 1))[before:]]

    repeat_logged = False  # a mail answered before is only marked read

    async def again(self) -> None:
        await asyncio.to_thread(self.h.box.deliver, self.last)  # the same mail in the INBOX again
        await self.h.stored(lambda found: found and all(m.seen for m in found), "the copy read")

    async def stranger_says(self, text: str) -> None:
        before = self.channel.doorkeeper.turned_away_total
        await self.h.write(text, f"from a stranger: {text}", sender=email.STRANGER)
        await eventually(lambda: self.channel.doorkeeper.turned_away_total > before, 10, "the stranger turned away")

    def to_stranger(self) -> list[str]:
        return [email.text_of(r.message) for r in self.h.mail.smtp.to(email.STRANGER)]

    def owner_got(self) -> list[str]:
        return [email.text_of(r.message).rstrip("\n") for r in self.h.mail.smtp.to(self.h.owner.address)]

    def lose_next(self, after: int) -> None:
        self.h.mail.smtp.refuse_next(1, after=after)

    async def go_down(self) -> None:
        self.h.mail.smtp.stop()

    async def come_back(self) -> None:
        self.h.mail.smtp.start()

    def refuse_credentials(self) -> str:
        self.runtime.config.email.password = "wrong"
        return "the SMTP server refused email.username/password"


class OnWhatsApp(Platform):
    name = "whatsapp"
    stranger = whatsapp.STRANGER
    limit = WHATSAPP_LIMIT

    async def owner_says(self, text: str) -> list[str]:
        before = len(self.h.fake.sent_texts(whatsapp.OWNER))
        assert await self.h.says(whatsapp.OWNER, text) == 200
        return self.h.fake.sent_texts(whatsapp.OWNER)[before:]  # type: ignore[no-any-return]

    async def again(self) -> None:
        assert (await self.h.meta.resend()).status == 200  # Meta did not get our 200 in time
        await self.h.settle()

    async def stranger_says(self, text: str) -> None:
        assert await self.h.says(whatsapp.STRANGER, text) == 200  # Meta must not re-send it

    def to_stranger(self) -> list[str]:
        return self.h.fake.sent_texts(whatsapp.STRANGER)  # type: ignore[no-any-return]

    def owner_got(self) -> list[str]:
        return self.h.fake.sent_texts(whatsapp.OWNER)  # type: ignore[no-any-return]

    def lose_next(self, after: int) -> None:
        self.h.fake.fail_next(1, "network", after=after)

    async def go_down(self) -> None:
        await self.h.fake.close()

    async def come_back(self) -> None:
        await self.h.fake.come_back()

    def refuse_credentials(self) -> str:
        self.runtime.config.whatsapp.access_token = "EAAG-EXPIRED"
        return "WhatsApp refused whatsapp.access_token"


class OnWebhook(Platform):
    """A bridge: its caller proves itself with the bridge's secret; one without it is the stranger."""

    name = "webhook"
    people = False
    credential = False  # no login of its own: a receiver refusing its signature fails that message

    async def owner_says(self, text: str) -> list[str]:
        self.h.clock.advance(1)  # each request signed a second apart: none is a replay of the one before
        status, answer = await self.h.ask({"text": text, "chat": "kitchen"})
        assert status == 200, answer
        return [str(answer["text"])]

    async def stranger_says(self, text: str) -> None:
        self.h.clock.advance(1)
        status, _answer = await self.h.ask({"text": text, "chat": "kitchen"}, secret="not-the-bridges-secret")
        assert status == 401

    def to_stranger(self) -> list[str]:
        return []  # a refused request is answered 401 and nothing else

    def owner_got(self) -> list[str]:
        return self.h.receiver.texts  # type: ignore[no-any-return]

    def lose_next(self, after: int) -> None:
        self.h.receiver.fail_next(1, 500, after=after)

    async def go_down(self) -> None:
        await self.h.receiver.go_down()

    async def come_back(self) -> None:
        await self.h.receiver.come_back()


def attach_automation(channel: ChatChannel, runtime: Runtime) -> None:
    """/tasks and /schedule as in the daemon: a real scheduler (one job) and task store on the runtime's file."""
    channel.commands.automation.attach(*automation(runtime), None)


class OnMqtt(Platform):
    """The notify topic: whoever the broker lets publish writes there; the reply is published, retained."""

    name = "mqtt"
    people = False
    strangers = delivers = credential = False  # the broker's ACL is its allowlist; no proactive messages here

    async def owner_says(self, text: str) -> list[str]:
        watcher = self.h.watcher
        watcher.clear()
        watcher.publish("picoagent/notify", text)
        await eventually(lambda: watcher.latest("picoagent/notify/reply") is not None, 10, "a reply")
        await eventually(lambda: self.channel.turns_in_flight == 0, 5, "the turn to end")
        return [(watcher.latest("picoagent/notify/reply") or b"").decode()]


@dataclass
class _Parts:
    """What a platform without a harness of its own (the memory platform, MQTT chat) is made of."""

    channel: Any
    runtime: Runtime
    outbox: Outbox
    model: ScriptedModel
    watcher: Any = None


@contextlib.asynccontextmanager
async def _started(kind: type[Platform], harness: contextlib.AbstractAsyncContextManager[Any]) -> AsyncIterator[Any]:
    async with harness as h:
        attach_automation(h.channel, h.runtime)
        yield kind(h)


@contextlib.asynccontextmanager
async def _memory(config: Config, _request: pytest.FixtureRequest) -> AsyncIterator[Platform]:
    async with memory.board(config) as channel:
        attach_automation(channel, channel.runtime)
        yield OnMemory(_Parts(channel, channel.runtime, channel.outbox, channel.runtime.model))


@contextlib.asynccontextmanager
async def _mqtt(config: Config, request: pytest.FixtureRequest) -> AsyncIterator[Platform]:
    """The daemon's MQTT parts on a real broker: the link, the bridge and its notify chat."""
    from appliance.config import MqttConfig
    from appliance.mqtt.bridge import MqttBridge
    from appliance.mqtt.chat import MqttChat
    from appliance.runtime import remote_links
    from tests.mqtt_broker import Watcher, running

    with running(request.getfixturevalue("tmp_path") / "mosquitto") as broker:
        config.mqtt = MqttConfig(enabled=True, host="127.0.0.1", port=broker.port, state_interval_s=60)
        links = remote_links(config)
        runtime = Runtime.open(config, model=ScriptedModel(), links=links)
        link = links["mqtt"]
        bridge = MqttBridge(config.mqtt, runtime.devices, link=link)
        bridge.chat = chat = MqttChat(config.mqtt, runtime, Outbox(runtime.db), link)
        watcher = Watcher(broker, "picoagent/#")
        await link.start()
        await bridge.start()
        try:
            await eventually(lambda: link.connected and chat.up, 10, "the link")
            attach_automation(chat, runtime)
            yield OnMqtt(_Parts(chat, runtime, chat.outbox, runtime.model, watcher))  # type: ignore[arg-type]
        finally:
            await bridge.stop()
            await link.stop()
            watcher.close()
            runtime.close()


Opener = Callable[[Config, pytest.FixtureRequest], contextlib.AbstractAsyncContextManager[Platform]]

# name -> how to open it (fixtures such as the mail servers are taken only where they are used)
PLATFORMS: dict[str, Opener] = {
    "memory": _memory,
    "telegram": lambda config, _request: _started(OnTelegram, telegram.telegram(config)),
    "discord": lambda config, _request: _started(OnDiscord, discord.discord_bot(config)),
    "slack": lambda config, _request: _started(OnSlack, slack.slack(config)),
    "email": lambda config, request: _started(OnEmail, email.harness(config, request.getfixturevalue("mail"))),
    "whatsapp": lambda config, _request: _started(OnWhatsApp, whatsapp.whatsapp(config)),
    "webhook": lambda config, _request: _started(OnWebhook, webhook.bridges(config)),
    "mqtt": _mqtt,
}
KINDS: dict[str, type[Platform]] = {
    "memory": OnMemory,
    "telegram": OnTelegram,
    "discord": OnDiscord,
    "slack": OnSlack,
    "email": OnEmail,
    "whatsapp": OnWhatsApp,
    "webhook": OnWebhook,
    "mqtt": OnMqtt,
}


def having(what: str) -> list[str]:
    """The platforms a part of the contract applies to (``strangers``, ``delivers``, ``credential``, ``people``)."""
    return [name for name, kind in KINDS.items() if getattr(kind, what)]
