"""The message tool: a task or cron turn tells the owner something mid-run, through the real notifier.

Real parts: the agent loop driven by a scripted model, the tool registry, the SQLite feed and outbox,
the notifier and a channel of the in-memory chat platform that delivers from the outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from appliance.agent.context import TOOL_CALL_START
from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from appliance.notify import Notifier, recent
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from appliance.tools import message
from appliance.tools.result import ToolResult
from tests.fakes.chat_platform import MemoryChannel, platform_class
from tests.fakes.clock import ManualClock
from tests.helpers import eventually, started

OWNER = "owner-1"
START = 1_800_000_000.0


def call(text: str) -> str:
    return json.dumps({"name": "message", "arguments": {"text": text}})


@contextlib.asynccontextmanager
async def appliance(
    config: Config, clock: ManualClock, per_hour: int = 2
) -> AsyncIterator[tuple[Runtime, MemoryChannel]]:
    """A runtime on the scripted model, the owner's chat channel, and the message tool as the daemon registers it."""
    config.discord.allow_from = [OWNER]
    config.memory.extract_after_messages = 0  # no background model calls between the scripted ones
    runtime = Runtime.open(config, model=ScriptedModel())
    outbox = Outbox(runtime.db, clock=clock)
    channel = platform_class("chat")(config.discord, runtime, outbox, clock=clock)
    await channel.start()
    notifier = Notifier(outbox, {"chat": channel}, lambda: ["chat"], clock=clock)
    message.register(runtime.tools, notifier.notify, runtime.db, per_hour, clock=clock)
    try:
        yield runtime, channel
    finally:
        await channel.stop()
        runtime.close()


async def send(runtime: Runtime, text: str, channel: str = "task") -> ToolResult:
    turn = runtime.tools.turn("", channel)
    return await runtime.tools.execute("message", {"text": text}, turn=turn)


def test_a_task_turn_messages_the_owner_mid_run(config: Config) -> None:
    async def main() -> tuple[Any, list[dict[str, Any]], MemoryChannel]:
        async with appliance(config, ManualClock(START)) as (runtime, channel):
            model = runtime.model
            assert isinstance(model, ScriptedModel)
            model.enqueue(TOOL_CALL_START, call("The soil is dry (23 %): water the tomatoes."), "Checked the soil.")
            record = await runtime.agent.turn("see how the tomatoes are doing", channel="task", chat_id="7")
            await eventually(lambda: channel.delivered, 10, "the message in the owner's chat")
            return record, recent(runtime.db), channel

    record, feed, channel = asyncio.run(main())
    (action,) = record.actions
    assert action.tool == "message" and action.ok and action.result == "sent to the owner (notification 1)"
    assert [(n["kind"], n["text"], n["channel"]) for n in feed] == [
        ("message", "The soil is dry (23 %): water the tomatoes.", "chat")
    ]
    assert channel.delivered == [(OWNER, "The soil is dry (23 %): water the tomatoes.")]


def test_in_a_chat_turn_it_says_to_put_it_in_the_reply(config: Config) -> None:
    async def main() -> tuple[Any, list[dict[str, Any]]]:
        async with appliance(config, ManualClock(START)) as (runtime, _):
            model = runtime.model
            assert isinstance(model, ScriptedModel)
            model.enqueue(TOOL_CALL_START, call("hello"), "Hello!")
            record = await runtime.agent.turn("write me a greeting", channel="telegram", chat_id="42")
            return record, recent(runtime.db)

    record, feed = asyncio.run(main())
    (action,) = record.actions
    assert not action.ok and action.error == "you are talking to the owner now: put it in your reply"
    assert feed == []


def test_the_hourly_limit_holds_across_a_restart(config: Config) -> None:
    clock = ManualClock(START)

    async def before_restart() -> list[ToolResult]:
        async with appliance(config, clock) as (runtime, _):
            first = await send(runtime, "one")
            clock.advance(600)
            return [first, await send(runtime, "two", "cron"), await send(runtime, "three")]

    async def after_restart() -> list[ToolResult]:
        async with appliance(config, clock) as (runtime, _):
            refused = await send(runtime, "four")
            clock.advance(3000)  # the first message is an hour old now: one more may go
            return [refused, await send(runtime, "five"), await send(runtime, "six")]

    one, two, three = asyncio.run(before_restart())
    clock.advance(60)
    four, five, six = asyncio.run(after_restart())
    assert one.ok and two.ok and five.ok
    assert not three.ok and three.error is not None
    assert three.error.startswith(
        "not sent: at most 2 messages an hour (tools.message_per_hour) and 2 went out in the last hour; "
        "the next may go at "
    )
    assert "(in 50 minutes)" in three.error  # when "one" leaves the hour
    assert not four.ok and "(in 49 minutes)" in (four.error or "")
    assert not six.ok and "(in 9 minutes)" in (six.error or "")  # when "two" leaves it


def test_secrets_are_redacted_and_outside_text_is_owned_up_to(config: Config) -> None:
    secret = "garden-api-key-8f3a91"
    config.secret_values = frozenset({secret})

    async def main() -> list[dict[str, Any]]:
        async with appliance(config, ManualClock(START)) as (runtime, _):
            assert (await send(runtime, f"the key is {secret}")).ok
            turn = runtime.tools.turn("", "task")
            turn.trust.saw("a web page")
            assert (await runtime.tools.execute("message", {"text": "Plant in May."}, turn=turn)).ok
            return recent(runtime.db)

    newest, oldest = asyncio.run(main())
    assert oldest["text"] == "the key is [redacted]"
    assert newest["text"] == "Plant in May.\n\n(written after reading a web page)"


def test_only_the_daemon_offers_it(config: Config) -> None:
    """Where there is no notifier (chat -m, tools run) the model never sees it; the daemon registers it."""
    from appliance.daemon import Daemon

    runtime = Runtime.open(config, model=ScriptedModel())
    try:
        assert "message" not in runtime.tools.tools
    finally:
        runtime.close()

    config.llm.preload = False
    config.scheduler.heartbeat_minutes = 0

    async def main() -> set[str]:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        try:
            return set(daemon.runtime.tools.tools)
        finally:
            daemon.stopping.set()
            assert await served == 0

    assert "message" in asyncio.run(main())
