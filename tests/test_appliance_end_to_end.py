"""The whole daemon in one process: a doorbell press becomes a Telegram message to the owner."""

from __future__ import annotations

import asyncio

from appliance.config import Config
from appliance.daemon import Daemon
from tests.fakes.telegram_api import FakeTelegram
from tests.helpers import eventually, started

OWNER = 111


def test_a_doorbell_press_reaches_the_owner_on_telegram(config: Config) -> None:
    async def main() -> None:
        async with FakeTelegram("123:TEST") as fake:
            fake.add_chat(OWNER)  # the owner has talked to the bot before (else Telegram refuses: chat not found)
            tg = config.telegram
            tg.enabled, tg.token, tg.api_base_url, tg.allow_from = True, "123:TEST", fake.base_url, [OWNER]
            config.llm.preload = False
            config.scheduler.heartbeat_minutes = 0
            daemon = Daemon(config, host="127.0.0.1", port=0)
            served = asyncio.ensure_future(daemon.run())
            await started(daemon, served)
            devices = daemon.runtime.devices
            assert devices is not None
            pin = devices.backend.pin_factory.pin(22)
            pin.drive_low()  # the doorbell button, wired to ground
            await asyncio.sleep(0.1)  # held down as a finger would
            pin.drive_high()
            await eventually(
                lambda: any("doorbell: pressed" in t for t in fake.sent_texts(OWNER)), 20, "the press's message"
            )
            # The owner answers from the phone; the intent path switches the porch light.
            fake.push_message(OWNER, OWNER, "turn on the porch light")
            await eventually(lambda: devices.backend.pin_factory.pin(17).state == 1, 20, "the porch light on")
            daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())
