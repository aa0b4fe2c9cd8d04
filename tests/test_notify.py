"""Proactive messages reach the owner through the first channel in notify.owner that is up (appliance/notify.py).

Two channels of the in-memory platform stand side by side; one is down at the start, or goes down with a
message waiting. Every message is also in the feed, which says where it went and whether it arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from appliance.config import Config, load_config
from appliance.errors import ConfigError
from appliance.llm.scripted import ScriptedModel
from appliance.notify import Notifier, recent
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests.fakes.chat_platform import MemoryChannel, platform_class
from tests.fakes.clock import ManualClock
from tests.helpers import eventually, write

OWNER = "owner-1"


@contextlib.asynccontextmanager
async def two_channels(
    config: Config, *, first_up: bool
) -> AsyncIterator[tuple[Notifier, MemoryChannel, MemoryChannel]]:
    """Channels "first" and "second" (first down when not ``first_up``) and a notifier trying them in that order."""
    config.discord.allow_from = [OWNER]
    clock = ManualClock()
    runtime = Runtime.open(config, model=ScriptedModel())
    outbox = Outbox(runtime.db, clock=clock)
    first = platform_class("first")(config.discord, runtime, outbox, clock=clock)
    second = platform_class("second")(config.discord, runtime, outbox, clock=clock)
    first.reachable = first_up
    try:
        await first.start()
        await second.start()
        notifier = Notifier(
            outbox,
            {"first": first, "second": second},
            lambda: ["first", "second"],
            fallback_after_s=lambda: 60,
            clock=clock,
        )
        yield notifier, first, second
    finally:
        await first.stop()
        await second.stop()
        runtime.close()


def test_the_second_channel_carries_a_message_when_the_first_is_down(config: Config) -> None:
    async def main() -> None:
        async with two_channels(config, first_up=False) as (notifier, first, second):
            assert not first.up and second.up
            notifier.notify("The living room is over 28 °C.", "event")
            await eventually(lambda: second.delivered, what="delivery through the second channel")
            assert second.delivered == [(OWNER, "The living room is over 28 °C.")] and first.delivered == []
            (item,) = recent(notifier.db)
            assert (item["text"], item["channel"], item["delivery"]) == (
                "The living room is over 28 °C.",
                "second",
                "sent",
            )

    asyncio.run(main())


def test_the_first_channel_is_preferred_while_it_is_up(config: Config) -> None:
    async def main() -> None:
        async with two_channels(config, first_up=True) as (notifier, first, second):
            notifier.notify("Backup finished", "cron")
            await eventually(lambda: first.delivered, what="delivery through the first channel")
            assert first.delivered == [(OWNER, "Backup finished")] and second.delivered == []

    asyncio.run(main())


def test_a_message_waiting_on_a_channel_that_went_down_moves_to_the_next_once(config: Config) -> None:
    async def main() -> None:
        async with two_channels(config, first_up=True) as (notifier, first, second):
            first.reachable = False  # the platform fails the send; the channel learns it is down
            notifier.notify("Doorbell: pressed", "event")
            await eventually(lambda: notifier.outbox.db.value("SELECT attempts FROM outbox") >= 1, what="a failed try")
            first.went_down("the gateway closed")
            assert notifier.reroute() == 0  # not waited long enough yet
            notifier.outbox.clock.advance(61)  # type: ignore[attr-defined]
            assert notifier.reroute() == 1
            await eventually(lambda: second.delivered, what="delivery through the second channel")
            first.reachable = True
            first.came_up()
            # A later message through the first channel: its outbox is read in order, so the doorbell would
            # have gone before it had it been left there too.
            notifier.notify("Backup finished", "cron")
            await eventually(lambda: first.delivered, what="the later message through the first channel")
            assert first.delivered == [(OWNER, "Backup finished")]
            assert second.delivered == [(OWNER, "Doorbell: pressed")]  # once, not twice
            doorbell = [i["channel"] for i in recent(notifier.db) if i["text"] == "Doorbell: pressed"]
            assert doorbell == ["second"]

    asyncio.run(main())


def test_without_any_channel_the_feed_still_has_it(config: Config) -> None:
    runtime = Runtime.open(config, model=ScriptedModel())
    try:
        notifier = Notifier(Outbox(runtime.db), {}, lambda: [])
        notifier.notify("Task 3 finished: the report is in workspace/report.md", "task")
        (item,) = recent(runtime.db)
        assert item["channel"] is None and item["delivery"] == "not sent (no channel)"
        assert runtime.db.value("SELECT count(*) FROM outbox") == 0
        assert recent(runtime.db, after_id=item["id"]) == []
    finally:
        runtime.close()


def test_notify_owner_names_known_channels_once(tmp_path: pytest.TempPathFactory) -> None:
    for owner, error in (
        ("[telegram, pigeon]", "notify.owner[1]: no channel named 'pigeon'"),
        ("[email, email]", "notify.owner[1]: email is listed twice"),
    ):
        path = write(tmp_path, f"notify:\n  owner: {owner}\n")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=error.replace("[", r"\[").replace("]", r"\]")):
            load_config(path)


def test_a_doorbell_press_reaches_the_owner_through_the_bridge_when_telegram_is_down(config: Config) -> None:
    """The whole daemon: notify.owner [telegram, webhook]; Telegram refuses the token, the bridge carries it."""
    from appliance.config import WebhookConfig
    from appliance.daemon import Daemon
    from tests.fakes.telegram_api import FakeTelegram
    from tests.fakes.webhook_receiver import WebhookReceiver
    from tests.helpers import started

    secret = "a-bridge-secret-of-32-characters"

    async def main() -> None:
        async with FakeTelegram("123:THE-REAL-TOKEN") as fake, WebhookReceiver(secret) as receiver:
            tg = config.telegram
            tg.enabled, tg.token, tg.api_base_url, tg.allow_from = True, "123:A-WRONG-TOKEN", fake.base_url, [111]
            config.webhooks["home_assistant"] = WebhookConfig(secret=secret, url=receiver.url)
            config.notify.owner = ["telegram", "webhook"]
            config.llm.preload = False
            config.scheduler.heartbeat_minutes = 0
            daemon = Daemon(config, host="127.0.0.1", port=0)
            served = asyncio.ensure_future(daemon.run())
            await started(daemon, served)
            try:
                assert daemon.channels is not None
                telegram, bridge = daemon.channels.get("telegram"), daemon.channels.get("webhook")
                assert telegram is not None and not telegram.up and bridge is not None and bridge.up
                devices = daemon.runtime.devices
                assert devices is not None
                pin = devices.backend.pin_factory.pin(22)
                pin.drive_low()  # the doorbell
                await asyncio.sleep(0.1)
                pin.drive_high()
                await eventually(lambda: receiver.texts, 10, "the press's message at the bridge's url")
                assert receiver.texts == ["doorbell: pressed"]
                assert fake.calls_of("sendMessage") == []  # nothing went (or was tried) through Telegram
                (item,) = recent(daemon.runtime.db)
                assert (item["channel"], item["delivery"]) == ("webhook", "sent")
            finally:
                daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())
