"""What people see of the chat channels: `picoagent status`, `channels list`, `doctor` and `notifications`.

The whole daemon runs in this process with Telegram enabled against the fake Bot API, which refuses the
token: the channel is off with its reason everywhere a person looks, and the appliance runs on. The CLI
runs as a person runs it (a subprocess reading the daemon's address from the data dir).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from appliance.config import Config
from appliance.daemon import Daemon
from tests.fakes.telegram_api import FakeTelegram
from tests.helpers import eventually, picoagent, started, write

RELOAD = "reload picoagent to apply (systemctl reload picoagent, or save it in Settings)"

OWNER = 111


def test_a_channel_that_is_down_is_listed_with_its_reason_and_notifications_still_show(
    config: Config, tmp_path: Path
) -> None:
    from tests.helpers import config_file

    files: list[Path] = []

    async def cli(*args: str) -> str:
        done = await asyncio.to_thread(
            picoagent, "--config", files[0], "--data-dir", config.data_dir, *args, cwd=tmp_path
        )
        return done.stdout + done.stderr

    async def main() -> None:
        async with FakeTelegram("123:THE-REAL-TOKEN") as fake:
            tg = config.telegram
            tg.enabled, tg.token, tg.api_base_url, tg.allow_from = True, "123:A-WRONG-TOKEN", fake.base_url, [OWNER]
            # The file the CLI reads says what the daemon runs (a channel it contradicts says so: the test below).
            on = {
                "telegram:\n  # Run the bot inside the daemon.\n  enabled: false": "telegram:\n  enabled: true",
                '  token: ""\n  # Telegram user ids': '  token: "123:A-WRONG-TOKEN"\n  # Telegram user ids',
            }
            files.append(config_file(tmp_path / "etc", on))
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
                assert re.search(r" \d\d:\d\d [A-Z][A-Za-z0-9+-]*  doorbell: pressed", shown), shown  # its zone named
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


def test_a_channel_the_config_turns_on_while_the_daemon_runs_it_off_says_both_and_a_reload(tmp_path: Path) -> None:
    """Issue 33: `telegram.enabled: true` written beside a running daemon: `doctor`, `status` and `channels list`
    say the daemon runs it off, the file turns it on, a reload applies it; and the reload does (issue 35)."""
    from appliance.config import load_config
    from tests.helpers import config_file

    path = config_file(tmp_path / "etc", {"preload: true": "preload: false"})
    data = tmp_path / "data"
    config = load_config(path, data_dir=data)
    telegram = {
        "telegram:\n  # Run the bot inside the daemon.\n  enabled: false": "telegram:\n  enabled: true",
        '  token: ""\n  # Telegram user ids': '  token: "123456:test-token"\n  # Telegram user ids',
    }

    async def cli(*args: str) -> str:
        done = await asyncio.to_thread(picoagent, "--config", path, "--data-dir", data, *args, cwd=tmp_path)
        return done.stdout + done.stderr

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0, data_dir_override=str(data))
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        try:
            text = path.read_text()
            for old, new in telegram.items():
                text = text.replace(old, new)
            path.write_text(text)
            for when in ("before the reload",):
                listed = (await cli("channels", "list")).splitlines()
                turned_on = f"off in the running daemon; the config turns it on: {RELOAD}"
                assert f"telegram  off   {turned_on}" in listed, (when, listed)
                assert listed[-1] == (  # not "no channel is enabled": the file turns one on
                    "proactive messages: the status page only (no channel runs; "
                    f"the config turns on telegram: {RELOAD})"
                ), listed
                doctor = await cli("doctor")
                assert f"[warn] channel telegram: {turned_on}" in doctor, (when, doctor)
                status = (await cli("status")).splitlines()  # status said nothing of it (walk 7)
                assert f"channel telegram: {turned_on}" in status, (when, status)  # not "off, off in ..." (walk 11)
                assert not any(line.startswith("channels off:") and "telegram" in line for line in status), status
                assert "telegram.enabled is false" not in doctor, when
            daemon.reload()
            assert "telegram.enabled" not in daemon.reloaded.restart_needed
            await eventually(lambda: daemon.channels.get("telegram") is not None, what="the reload starting it")
            listed = (await cli("channels", "list")).splitlines()
            assert not any(RELOAD in line for line in listed), listed
        finally:
            daemon.stopping.set()
        assert await served == 0

    asyncio.run(main())


def test_each_disagreement_between_the_running_daemon_and_the_config_is_said_with_a_reload(config: Config) -> None:
    """The rows /api/status gives, told against the file: on here and off there, either way; agreement unchanged."""
    from appliance.cli.channels import as_configured, state_word

    daemon_rows = [
        {"name": "telegram", "enabled": True, "up": True, "detail": "@picoagent_bot"},
        {"name": "discord", "enabled": False, "up": False, "detail": "discord.enabled is false"},
        {"name": "slack", "enabled": False, "up": False, "detail": "slack.enabled is false"},
    ]
    config.discord.enabled = True  # the file turns discord on; telegram is off in it (the checkout's config)
    told = {row["name"]: row for row in as_configured(daemon_rows, config)}
    assert (state_word(told["telegram"]), told["telegram"]["detail"]) == (
        "up",
        f"on in the running daemon (@picoagent_bot); the config turns it off: {RELOAD}",
    )
    assert (state_word(told["discord"]), told["discord"]["detail"]) == (
        "off",
        f"off in the running daemon; the config turns it on: {RELOAD}",
    )
    assert told["telegram"]["restart_needed"] and told["discord"]["restart_needed"]
    assert told["slack"] == daemon_rows[2]


def test_proactive_messages_name_only_the_owner_channels_that_run() -> None:
    """README walk 7: `notify.owner: [telegram, webhook]` with Telegram off read "telegram -> webhook", as if Telegram
    carried them."""
    from appliance.cli.channels import proactive_words
    from appliance.config import Config

    config = Config()
    config.notify.owner = ["telegram", "webhook"]
    rows = [{"name": "telegram", "enabled": False}, {"name": "webhook", "enabled": True}]
    assert proactive_words(rows, config) == "webhook (telegram in notify.owner is off)"
    rows[1]["enabled"] = False
    assert (
        proactive_words(rows, config)
        == "the status page only (no channel runs; telegram, webhook in notify.owner are off)"
    )
