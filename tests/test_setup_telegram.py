"""Telegram set up from the browser's API, against the project's fake Telegram Bot API on 127.0.0.1 and the
daemon in this process, with no restart: a token Telegram refuses is said beside the token, a good one names
the bot, saving it starts the channel at once, the pairing link's /start CODE pairs the owner, who then
switches the porch light from the chat; turned off, the channel stops."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from appliance.config import Config
from tests.fakes.telegram_api import FakeTelegram
from tests.helpers import eventually, started
from tests.test_web_settings import copy_of_shipped

OWNER = 4242


async def _save(http: aiohttp.ClientSession, change: dict[str, Any]) -> dict[str, Any]:
    version = (await (await http.get("/api/settings")).json())["version"]
    async with http.post("/api/settings", json={"version": version, "set": change}) as answer:
        said: dict[str, Any] = await answer.json()
        assert answer.status == 200, said
        return said


def test_telegram_from_the_setup_api_to_a_paired_chat_that_switches_the_porch_light(tmp_path: Path) -> None:
    from appliance.daemon import Daemon

    config: Config = copy_of_shipped(tmp_path, for_a_daemon=True)

    async def main() -> None:
        async with FakeTelegram() as telegram:
            daemon = Daemon(config, host="127.0.0.1", port=0)
            served = asyncio.ensure_future(daemon.run())
            try:
                await started(daemon, served)
                assert daemon.state is not None
                token = daemon.state.auth.add_token("owner", scope="admin")
                base = f"http://127.0.0.1:{daemon.web.port}"
                async with aiohttp.ClientSession(base, headers={"Authorization": f"Bearer {token}"}) as http:
                    await scenario(daemon, http, telegram)
            finally:
                daemon.stopping.set()
                assert await served == 0

    async def scenario(daemon: Any, http: aiohttp.ClientSession, telegram: FakeTelegram) -> None:
        await _save(http, {"telegram.api_base_url": telegram.base_url})  # where "Telegram" is, for this test
        refused = await http.post("/api/setup/telegram/check", json={"token": "999:WRONG"})
        said = await refused.json()
        assert refused.status == 400 and said["key"] == "telegram.token", said
        assert said["error"] == "Telegram refused the token (Unauthorized)" and "999:WRONG" not in str(said)
        checked = await (await http.post("/api/setup/telegram/check", json={"token": telegram.token})).json()
        assert checked == {"ok": True, "bot": {"username": "pico_test_bot", "name": "Pico"}}
        assert daemon.channels.get("telegram") is None

        saved = await _save(http, {"telegram.enabled": True, "telegram.token": telegram.token})
        assert saved["restart_needed"] == [] and "telegram.enabled" in saved["applied"], saved
        await eventually(lambda: (c := daemon.channels.get("telegram")) is not None and c.up, 15, "the channel up")
        pairing = await (await http.post("/api/setup/telegram/pairing")).json()
        assert pairing["link"] == f"https://t.me/pico_test_bot?start={pairing['code']}"
        assert pairing["qr_svg"].startswith("<svg") and 'xmlns="http://www.w3.org/2000/svg"' in pairing["qr_svg"]
        assert "<script" not in pairing["qr_svg"] and "style" not in pairing["qr_svg"]  # the pages' CSP allows it
        assert await (await http.get("/api/setup/telegram/pairing")).json() == {"paired": False, "users": []}

        telegram.push_message(OWNER, OWNER, f"/start {pairing['code']}")  # what the t.me link's Start sends
        await eventually(lambda: telegram.sent_texts(OWNER), timeout=15, what="the paired reply")
        paired = await (await http.get("/api/setup/telegram/pairing")).json()
        assert paired == {"paired": True, "users": [str(OWNER)]}

        telegram.push_message(OWNER, OWNER, "turn on the porch light")
        await eventually(lambda: len(telegram.sent_texts(OWNER)) >= 2, timeout=30, what="the switch's reply")
        readings = await (await http.get("/api/devices/porch_light")).json()
        assert any(r["quantity"] == "state" and r["value"] is True for r in readings["readings"]), readings

        await _save(http, {"telegram.enabled": False})
        await eventually(lambda: daemon.channels.get("telegram") is None, timeout=15, what="the channel stopping")
        telegram.push_message(OWNER, OWNER, "are you there?")
        await asyncio.sleep(1.5)
        assert len(telegram.sent_texts(OWNER)) == 2  # nobody reads Telegram any more: no answer

    asyncio.run(main())


# The shipped config's Telegram lines, as a person edits them by hand (then SIGHUP).
ENABLED = ("telegram:\n  # Run the bot inside the daemon.\n  enabled: false", "telegram:\n  enabled: true")


def _edit(path: Path, *changes: tuple[str, str]) -> None:
    text = path.read_text()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text)


def _telegram_services(daemon: Any) -> list[Any]:
    from appliance.channels.telegram.channel import TelegramChannel

    return [s for s in daemon.services.started if isinstance(s, TelegramChannel)]


def test_reloads_in_quick_succession_end_as_the_last_one_says(tmp_path: Path) -> None:
    """On then at once off: no bot is left polling; a refused token, then the right one: one bot, on the right
    one. Each reload's channel change waits for the one before and goes by the config as it is then."""
    from appliance.daemon import Daemon

    config: Config = copy_of_shipped(tmp_path, for_a_daemon=True)
    path = Path(str(config.source))

    async def main() -> None:
        async with FakeTelegram() as telegram:
            base = ("  api_base_url: https://api.telegram.org/bot", f"  api_base_url: {telegram.base_url}")
            daemon = Daemon(config, host="127.0.0.1", port=0, data_dir_override=str(tmp_path / "data"))
            served = asyncio.ensure_future(daemon.run())
            try:
                await started(daemon, served)
                token = ('  token: ""\n  # Telegram user ids', f'  token: "{telegram.token}"\n  # Telegram user ids')
                _edit(path, ENABLED, token, base)
                daemon.reload()
                _edit(path, (ENABLED[1], ENABLED[0]))
                daemon.reload()  # before the first one's bot could even log in
                assert daemon.reloaded.restart_needed == []
                await eventually(lambda: not daemon.chores._running, 15, "the channel changes")
                assert daemon.channels.get("telegram") is None and _telegram_services(daemon) == []
                telegram.push_message(OWNER, OWNER, "/help")
                await asyncio.sleep(1.0)
                assert telegram.pending_updates == 1  # nobody fetches Telegram's updates

                wrong = (f'  token: "{telegram.token}"', '  token: "999:WRONG"')
                _edit(path, (ENABLED[0], ENABLED[1]), wrong)
                daemon.reload()
                _edit(path, (wrong[1], wrong[0]))
                daemon.reload()
                await eventually(lambda: not daemon.chores._running, 15, "the channel changes")
                channel = daemon.channels.get("telegram")
                assert channel is not None and channel.up and channel.config.token == telegram.token
                assert _telegram_services(daemon) == [channel]
                await eventually(lambda: telegram.pending_updates == 0, 15, "the waiting update fetched")
            finally:
                daemon.stopping.set()
                assert await served == 0

    asyncio.run(main())


def test_enabled_from_the_settings_api_on_a_real_serve_then_turned_off_with_no_restart(tmp_path: Path) -> None:
    """`picoagent serve` as a process: a token check against a Telegram it cannot reach, Telegram turned on by
    a save, a paired owner answered, turned off by a save and no longer polling; one process throughout, and
    the token never in its log."""
    from tests.helpers import free_port, wait_healthy
    from tests.test_daemon import Serve

    serve = Serve(tmp_path, free_port())
    try:
        wait_healthy(serve.port)
        bearer = {"Authorization": f"Bearer {(serve.data / 'cli.token').read_text().strip()}"}
        asyncio.run(_on_a_real_serve(serve, f"http://127.0.0.1:{serve.port}", bearer))
    finally:
        assert serve.stop() == 0
    log = serve.text()
    assert "123:TEST" not in log and "reload: telegram started" in log and "reload: telegram stopped" in log


async def _on_a_real_serve(serve: Any, base: str, bearer: dict[str, str]) -> None:
    pid = serve.proc.pid
    async with FakeTelegram() as telegram, aiohttp.ClientSession(base, headers=bearer) as http:
        await _save(http, {"telegram.api_base_url": "http://127.0.0.1:9/bot"})  # nothing listens there
        unreachable = await http.post("/api/setup/telegram/check", json={"token": telegram.token})
        said = await unreachable.json()
        assert unreachable.status == 400 and said["key"] == "telegram.token", said
        assert said["error"] == "cannot reach Telegram at http://127.0.0.1:9/bot" and telegram.token not in str(said)

        await _save(http, {"telegram.api_base_url": telegram.base_url})
        saved = await _save(http, {"telegram.enabled": True, "telegram.token": telegram.token})
        assert saved["restart_needed"] == [], saved
        await _until_up(http, True)
        pairing = await (await http.post("/api/setup/telegram/pairing")).json()
        telegram.push_message(OWNER, OWNER, f"/start {pairing['code']}")
        await telegram.wait_for(lambda: telegram.sent_texts(OWNER), 20, "the paired reply")
        assert telegram.sent_texts(OWNER) == ["Paired: you can talk to me now."]
        telegram.push_message(OWNER, OWNER, "turn on the porch light")
        await telegram.wait_for(lambda: len(telegram.sent_texts(OWNER)) >= 2, 30, "the answer")
        assert (await _telegram_row(http))["detail"] == "polling as @pico_test_bot"

        saved = await _save(http, {"telegram.enabled": False})
        assert saved["restart_needed"] == [], saved
        await telegram.wait_for(lambda: "reload: telegram stopped" in serve.text(), 20, "the bot stopping")
        telegram.push_message(OWNER, OWNER, "are you there?")
        await asyncio.sleep(1.5)
        assert telegram.pending_updates == 1 and len(telegram.sent_texts(OWNER)) == 2  # not fetched, not answered
        assert (await _telegram_row(http))["detail"] == "telegram.enabled is false"
        assert serve.proc.pid == pid and serve.proc.poll() is None


async def _telegram_row(http: aiohttp.ClientSession) -> dict[str, Any]:
    """The Telegram channel as /api/status shows it."""
    status = await (await http.get("/api/status")).json()
    row: dict[str, Any] = next(c for c in status["channels"] if c["name"] == "telegram")
    return row


async def _until_up(http: aiohttp.ClientSession, up: bool, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while (await _telegram_row(http))["up"] != up:
        assert asyncio.get_running_loop().time() < deadline, f"telegram not {'up' if up else 'down'} in {timeout} s"
        await asyncio.sleep(0.1)
