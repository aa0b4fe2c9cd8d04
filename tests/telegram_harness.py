"""The Telegram channel's test harness (the real channel against tests/fakes/telegram_api.py), shared by its suites."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from appliance.channels.telegram.channel import TelegramChannel
from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests.channel_harness import ChannelHarness, Clock, opened
from tests.channel_harness import run as run_on
from tests.fakes.telegram_api import FakeTelegram

TOKEN = "123:TEST"
OWNER = 111  # in telegram.allow_from; in a private chat the chat id is the user id
STRANGER = 666
GROUP = -1001
WEBHOOK_URL = "https://pi.example.net/telegram/webhook"
WEBHOOK_SECRET = "s3cret-token_0123456789"


@dataclass(kw_only=True)
class Harness(ChannelHarness):
    fake: FakeTelegram
    channel: TelegramChannel

    async def settle(self, timeout: float = 5.0) -> None:
        """Wait until every update was fetched and handled (gate and handlers), and every answer finished."""
        await self.fake.wait_for(lambda: self.fake.pending_updates == 0, timeout, "the updates to be fetched")
        app = self.channel.app
        if app is not None and app.running:
            # A fetched or posted update is in PTB's update queue, which marks it done once its gate and
            # handlers ran (rejected or not): join() returns exactly when nothing is left to handle.
            try:
                await asyncio.wait_for(app.update_queue.join(), timeout)
            except TimeoutError:
                raise AssertionError(f"timed out after {timeout} s waiting for the updates to be handled") from None
        await self.fake.wait_for(lambda: not self.channel.turns_in_flight, timeout, "the answers to finish")

    async def reply_to(self, chat_id: int, count: int = 1) -> list[dict[str, Any]]:
        """Wait for ``count`` bot messages in a chat, and for the answers to finish."""
        await self.fake.wait_for(lambda: len(self.fake.bot_messages(chat_id)) >= count, what=f"a reply in {chat_id}")
        await self.settle()
        return self.fake.bot_messages(chat_id)

    def new_channel(self) -> TelegramChannel:
        return TelegramChannel(self.runtime.config.telegram, self.runtime, self.outbox, clock=self.clock)


@contextlib.asynccontextmanager
async def telegram(config: Config, model: ScriptedModel | None = None) -> AsyncIterator[Harness]:
    """The fake Bot API, the runtime and a started channel pointed at it."""
    async with FakeTelegram(TOKEN) as fake:
        tg = config.telegram
        tg.enabled, tg.token, tg.api_base_url, tg.allow_from = True, TOKEN, fake.base_url, [OWNER]
        tg.edit_interval_s, tg.poll_timeout_s = 0.2, 2

        def make(runtime: Runtime, outbox: Outbox, clock: Clock, model: ScriptedModel) -> Harness:
            channel = TelegramChannel(tg, runtime, outbox, clock=clock)
            return Harness(fake=fake, runtime=runtime, channel=channel, outbox=outbox, model=model, clock=clock)

        async with opened(config, model, make) as harness:
            yield harness


def run(config: Config, scenario: Callable[[Harness], Awaitable[None]], model: ScriptedModel | None = None) -> None:
    run_on(telegram(config, model), scenario)


def buttons(message: dict[str, Any]) -> dict[str, str]:
    """An inline keyboard as callback data -> label."""
    rows = message.get("reply_markup", {}).get("inline_keyboard", [])
    return {button["callback_data"]: button["text"] for row in rows for button in row}
