"""What people see of the chat channels: `picoagent status`, `channels list`, `doctor` and `notifications`.

The whole daemon runs in this process with Telegram enabled against the fake Bot API, which refuses the
token: the channel is off with its reason everywhere a person looks, and the appliance runs on. The CLI
runs as a person runs it (a subprocess reading the daemon's address from the data dir).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from appliance.config import CHECKOUT_CONFIG, Config
from appliance.daemon import Daemon
from tests.fakes.telegram_api import FakeTelegram
from tests.helpers import eventually, picoagent, started, write

OWNER = 111


def test_a_channel_that_is_down_is_listed_with_its_reason_and_notifications_still_show(
    config: Config, tmp_path: Path
) -> None:
    async def cli(*args: str) -> str:
        done = await asyncio.to_thread(
            picoagent, "--config", CHECKOUT_CONFIG, "--data-dir", config.data_dir, *args, cwd=tmp_path
        )
        return done.stdout + done.stderr

    async def main() -> None:
        async with FakeTelegram("123:THE-REAL-TOKEN") as fake:
            tg = config.telegram
            tg.enabled, tg.token, tg.api_base_url, tg.allow_from = True, "123:A-WRONG-TOKEN", fake.base_url, [OWNER]
            config.llm.preload = False
            config.scheduler.heartbeat_minutes = 0
            daemon = Daemon(config, host="127.0.0.1", port=0)
            served = asyncio.ensure_future(daemon.run())
            await started(daemon, served)
            try:
                status = await cli("status")
                assert "channel telegram: down, Telegram refused telegram.token" in status
                assert "channels off: discord, slack, whatsapp, email, webhook" in status
                listed = (await cli("channels", "list")).splitlines()
                assert "telegram  down  Telegram refused telegram.token" in listed
                assert "proactive messages: telegram" in listed
                doctor = await cli("doctor")
                assert "[FAIL] channel telegram: down: Telegram refused telegram.token" in doctor

                devices = daemon.runtime.devices
                assert devices is not None
                pin = devices.backend.pin_factory.pin(22)
                pin.drive_low()  # the doorbell
                await asyncio.sleep(0.1)
                pin.drive_high()
                await eventually(lambda: daemon.runtime.db.value("SELECT count(*) FROM notifications"), 10)
                shown = await cli("notifications")
                assert "doorbell: pressed  [telegram: pending]" in shown  # waiting for Telegram, and on the feed
                assert "doorbell: pressed  [telegram: pending]" in await cli("status")
            finally:
                daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())


def test_without_a_daemon_an_enabled_channel_reads_on_and_doctor_says_to_start_it(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        f"data_dir: {tmp_path / 'data'}\ndiscord:\n  enabled: true\n  token: ${{DISCORD_BOT_TOKEN}}\n",
        secrets="DISCORD_BOT_TOKEN=MTIz.fake",
    )
    listed = picoagent("--config", config, "channels", "list", cwd=tmp_path).stdout.splitlines()
    assert "discord   on    enabled; the daemon is not running" in listed
    assert "telegram  off   telegram.enabled is false" in listed
    doctor = picoagent("--config", config, "doctor", cwd=tmp_path).stdout
    assert "[warn] channel discord: enabled; the daemon is not running" in doctor
    assert "fix: start the daemon: picoagent serve" in doctor
