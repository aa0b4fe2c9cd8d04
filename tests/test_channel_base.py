"""The core every chat channel shares (appliance/channels/base.py), on a platform kept in memory.

Each real channel's tests (test_channel_*.py, test_telegram.py) run this core through the platform's real
library; here it is alone: who may talk, once only, typed commands and buttons as reply commands, one turn
per conversation, the outbox when a reply cannot be shown, and a channel that cannot connect staying off.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from appliance.channels.base import Incoming, as_text, button_command
from appliance.channels.commands import Button, Said
from appliance.channels.core import footer
from appliance.channels.pairing import create_code, prune_inbound
from appliance.channels.registry import CHANNELS, build
from appliance.cli.channels import feed_lines
from appliance.config import Config, DeviceConfig
from appliance.llm.scripted import ScriptedModel
from appliance.notify import Notifier, recent
from appliance.outbox import Delivery, Outbox, Outcome, OutMessage
from appliance.runtime import Runtime
from tests.fakes.chat_platform import MemoryChannel, platform_class
from tests.helpers import eventually

OWNER = "u-owner"
STRANGER = "u-stranger"


def said_to(channel: MemoryChannel, chat: str) -> list[str]:
    return [text for chat_id, text in channel.said if chat_id == chat]


def dm(user: str, text: str, remote_id: str = "") -> Incoming:
    return Incoming(
        chat_id=f"dm-{user}", user_id=user, user_name=user.title(), text=text, private=True, remote_id=remote_id
    )


@contextlib.asynccontextmanager
async def board(config: Config, model: ScriptedModel | None = None, **kw: object) -> AsyncIterator[MemoryChannel]:
    config.discord.allow_from = [OWNER]  # the memory platform borrows a section with allow_from and owner
    runtime = Runtime.open(config, model=model or ScriptedModel())
    try:
        channel = platform_class("memory")(config.discord, runtime, Outbox(runtime.db), **kw)
        await channel.start()
        try:
            yield channel
        finally:
            await channel.stop()
    finally:
        runtime.close()


def run(config: Config, scenario: Callable[[MemoryChannel], Awaitable[None]], **kw: object) -> None:
    async def main() -> None:
        async with board(config, **kw) as channel:
            await scenario(channel)

    asyncio.run(main())


def test_the_owner_is_answered_with_the_footer_and_a_stranger_costs_nothing(config: Config) -> None:
    model = ScriptedModel()

    async def scenario(ch: MemoryChannel) -> None:
        await ch.handle(dm(STRANGER, "what is the weather"))
        await ch.handle(dm(STRANGER, "/status"))
        assert ch.said == [] and model.history == []  # no reply, no model call, no command
        await ch.handle(dm(OWNER, "hello there"))
        (reply,) = said_to(ch, f"dm-{OWNER}")
        assert reply.startswith("echo: hello there") and reply.endswith(
            "local · scripted · " + reply.rsplit(" · ", 1)[1]
        )
        assert len(model.history) == 1

    async def main() -> None:
        async with board(config, model) as channel:
            await scenario(channel)

    asyncio.run(main())


def test_a_message_delivered_twice_is_answered_once(config: Config) -> None:
    async def scenario(ch: MemoryChannel) -> None:
        await ch.handle(dm(OWNER, "hello", remote_id="m-1"))
        await ch.handle(dm(OWNER, "hello", remote_id="m-1"))  # the platform re-sent it
        assert len(said_to(ch, f"dm-{OWNER}")) == 1
        status = ch.db.value("SELECT status FROM inbound WHERE channel = 'memory' AND remote_id = 'm-1'")
        assert status == "handled"

    run(config, scenario)


def test_ids_of_messages_handled_long_ago_are_forgotten(config: Config) -> None:
    async def scenario(ch: MemoryChannel) -> None:
        await ch.handle(dm(OWNER, "hello", remote_id="old"))
        now = time.time()
        assert prune_inbound(ch.db, clock=lambda: now + 29 * 86400) == 0
        assert prune_inbound(ch.db, clock=lambda: now + 31 * 86400) == 1
        assert ch.db.value("SELECT count(*) FROM inbound") == 0

    run(config, scenario)


def test_pairing_by_code_in_a_private_chat_only(config: Config) -> None:
    async def scenario(ch: MemoryChannel) -> None:
        code = create_code(ch.db, "memory")
        group = Incoming(chat_id="room", user_id=STRANGER, user_name="S", text=code, private=False)
        await ch.handle(group)
        assert ch.said == []  # a code said in a group pairs nobody
        await ch.handle(dm(STRANGER, code))
        assert said_to(ch, f"dm-{STRANGER}") == ["Paired: you can talk to me now."]
        await ch.handle(dm(STRANGER, "hi"))
        assert said_to(ch, f"dm-{STRANGER}")[-1].startswith("echo: hi")
        assert ch.owner_target() == OWNER  # allow_from comes before the paired

    run(config, scenario)


def test_typed_commands_show_buttons_as_replies_and_an_approval_runs_once(config: Config) -> None:
    config.devices["heater"] = DeviceConfig(driver="relay", pin=5, approval="required")

    async def scenario(ch: MemoryChannel) -> None:
        devices = ch.runtime.devices
        assert devices is not None
        await ch.handle(dm(OWNER, "/devices"))
        menu = said_to(ch, f"dm-{OWNER}")[-1]
        assert "• heater: off (needs approval): reply /toggle heater" in menu
        pending = (await devices.set("heater", "on", requested_by="model")).pending
        assert pending is not None
        await ch.handle(dm(OWNER, "/approve"))
        assert f"• Approve: reply /approve {pending.id}" in said_to(ch, f"dm-{OWNER}")[-1]
        await ch.handle(dm(OWNER, f"/approve {pending.id}"))
        await ch.handle(dm(OWNER, f"/approve {pending.id}"))  # typed twice
        first, second = said_to(ch, f"dm-{OWNER}")[-2:]
        assert first.startswith("Approved by U-Owner: the heater is on") and "already approved" in second
        decided = devices.approvals.get(pending.id)
        assert decided.status == "approved" and decided.decided_by == f"memory:{OWNER}"
        assert devices.backend.pin_factory.pin(5).state  # type: ignore[attr-defined]

    run(config, scenario)


def test_a_reply_that_cannot_be_shown_goes_to_the_outbox_and_is_delivered_once_back(config: Config) -> None:
    async def scenario(ch: MemoryChannel) -> None:
        ch.reachable = False
        await ch.handle(dm(OWNER, "are you there"))
        assert ch.said == [] and ch.outbox.pending_count("memory") == 1
        ch.reachable = True
        ch.notify_wakeup()
        await eventually(lambda: ch.delivered, what="the stored reply to be delivered")
        ((chat, text),) = ch.delivered
        assert chat == f"dm-{OWNER}" and text.startswith("echo: are you there")

    run(config, scenario)


def test_a_message_that_can_never_be_sent_is_marked_failed_on_the_feed_and_blocks_none_after_it(
    config: Config,
) -> None:
    """The shared delivery (every channel's, Telegram's too): a send that raises instead of answering
    sent/retry/failed is a message its platform cannot build; it fails once, says so, and the rest go."""

    async def scenario(ch: MemoryChannel) -> None:
        notifier = Notifier(ch.outbox, {"memory": ch}, lambda: ["memory"])
        ch.broken["Alarm: smoke"] = ValueError("Header values may not contain linefeed or carriage return characters")
        ch.broken["a reply"] = TypeError("unsupported operand")
        notifier.notify("Alarm: smoke", "event")
        ch.outbox.enqueue("memory", OWNER, "a reply", "reply")
        notifier.notify("Backup finished", "task")  # the owner's chat, after the two that cannot go
        ch.outbox.enqueue("memory", "dm-other", "to someone else", "reply")
        await eventually(lambda: len(ch.delivered) == 2, what="the messages after the broken ones")
        assert ch.delivered == [(OWNER, "Backup finished"), ("dm-other", "to someone else")]
        await eventually(lambda: ch.outbox.pending_count("memory") == 0, what="the broken ones to be settled")
        rows = ch.db.rows("SELECT text, status, last_error FROM outbox ORDER BY id")
        assert [(text, status) for text, status, _ in rows][:2] == [("Alarm: smoke", "failed"), ("a reply", "failed")]
        assert "ValueError: Header values may not contain" in rows[0][2] and "TypeError" in rows[1][2]

        feed = recent(ch.db)
        [alarm] = [item for item in feed if item["text"] == "Alarm: smoke"]
        assert alarm["delivery"] == "failed" and "linefeed" in alarm["error"]
        assert feed_lines([alarm], config)[0].endswith(f"Alarm: smoke  [memory: failed ({alarm['error']})]")  # status
        [lost] = [item for item in feed if item["kind"] == "undelivered"]  # a reply is not in the feed: now it is
        assert lost["channel"] == "memory" and lost["delivery"] == "failed" and "TypeError" in lost["error"]
        assert lost["text"] == f"A reply to {OWNER} on memory could not be sent: a reply"
        assert [item["delivery"] for item in feed if item["text"] == "Backup finished"] == ["sent"]

        # A network error that escapes a platform's send is worth another try: pending, not failed.
        ch.broken["Door open"] = ConnectionResetError("reset by peer")
        notifier.notify("Door open", "event")
        await eventually(
            lambda: ch.db.value("SELECT attempts FROM outbox WHERE text = 'Door open'") == 1, what="one attempt"
        )
        status, error = ch.db.rows("SELECT status, last_error FROM outbox WHERE text = 'Door open'")[0]
        assert status == "pending" and error == "ConnectionResetError: reset by peer"

    run(config, scenario)


@pytest.mark.parametrize("name", list(CHANNELS))
def test_every_channels_delivery_fails_a_message_its_send_raises_for_and_sends_the_next(
    name: str, config: Config
) -> None:
    """Each real channel delivers through the shared :class:`Delivery` (not a loop of its own), so the
    guard above holds for all of them: here its send raises for the first message of the owner's chat."""

    async def main() -> None:
        runtime = Runtime.open(config, model=ScriptedModel())
        try:
            outbox = Outbox(runtime.db)
            channel = build(name, config, runtime, outbox)
            assert isinstance(channel.delivery, Delivery) and channel.delivery.outbox is outbox
            broken = outbox.enqueue(name, "owner", "cannot be built", "event")
            after = outbox.enqueue(name, "owner", "the next one", "event")

            async def send(message: OutMessage) -> Outcome:
                if message.id == broken:
                    raise ValueError("Header values may not contain linefeed or carriage return characters")
                outbox.mark_sent(message.id)
                return "sent"

            channel.delivery.send = send
            assert await channel.delivery.deliver_due() == 1
            statuses = dict(runtime.db.rows("SELECT id, status FROM outbox"))
            assert statuses == {broken: "failed", after: "sent"}
        finally:
            runtime.close()

    asyncio.run(main())


def test_buttons_become_the_commands_that_do_the_same() -> None:
    assert button_command("apr:approve:3f2a") == "/approve 3f2a"
    assert button_command("dev:toggle:fan") == "/toggle fan"
    assert button_command("say:porch") == "porch"
    assert button_command("bogus") == ""
    shown = as_text(Said("Pick one", [[Button("Approve", "apr:approve:1"), Button("Deny", "apr:deny:1")]]))
    assert shown.text == "Pick one\n• Approve: reply /approve 1\n• Deny: reply /deny 1" and shown.buttons == []


def test_answers_to_tap_become_quoted_replies_on_a_platform_without_buttons(config: Config) -> None:
    config.devices["porch_light"] = DeviceConfig(driver="relay", pin=5)
    config.devices["desk_light"] = DeviceConfig(driver="relay", pin=6)

    async def scenario(ch: MemoryChannel) -> None:
        assert not ch.buttons
        await ch.handle(dm(OWNER, "turn on the light"))
        (reply,) = said_to(ch, f"dm-{OWNER}")
        # each typed as shown, before the footer, which stays last (walk 9 read it after the footer)
        assert '\n\nReply "porch light" or "desk light".\n\nintent · answered without the model' in reply, reply
        await ch.handle(dm(OWNER, '"desk light"'))  # copied with its quotes
        assert said_to(ch, f"dm-{OWNER}")[1].startswith("Done: the desk light is on.")
        await ch.handle(dm(OWNER, "it's dark on the porch"))  # asks "Turn the porch light on? (yes or no)"
        asked = said_to(ch, f"dm-{OWNER}")[2]
        assert asked.startswith("Turn the porch light on? (yes or no)\n\nintent · "), asked
        assert "Reply" not in asked  # the question offers them already

    run(config, scenario)


def test_a_device_request_refused_says_not_done_in_its_footer(config: Config) -> None:
    config.devices["fan"] = DeviceConfig(driver="relay", pin=5, writes_per_minute=1)
    runtime = Runtime.open(config, model=ScriptedModel())
    try:
        done = asyncio.run(runtime.agent.turn("turn the fan on"))
        refused = asyncio.run(runtime.agent.turn("turn the fan off"))  # one write a minute: refused
    finally:
        runtime.close()
    assert done.text == "Done: the fan is on." and footer(done, detailed=True).startswith(
        "[answered without the model · intent fast path: "
    )
    assert "switched 1 time" in refused.text, refused.text  # the reply says why
    # the footer says what was asked and that it was not done (it read "set fan off" as if it were)
    assert ", not done ·" in footer(refused, detailed=True) and ", not done" not in footer(done, detailed=True)
