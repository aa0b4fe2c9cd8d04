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
