"""The Telegram channel in webhook mode: Telegram posts updates to the web app's route, checked by the secret."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.registry import ChannelSet
from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import WebState
from appliance.channels.web.telegram_hook import SECRET_HEADER, WEBHOOK_PATH
from appliance.config import Config
from tests.telegram_harness import (
    OWNER,
    STRANGER,
    WEBHOOK_SECRET,
    WEBHOOK_URL,
    Harness,
    run,
)

# --- webhook mode ---------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def web_client(h: Harness, *, channel: bool = True) -> AsyncIterator[TestClient[Any, Any]]:
    """The daemon's web app (with the Telegram channel wired in, as the daemon does) on a real socket."""
    channels = ChannelSet(h.runtime.config, {"telegram": h.channel}) if channel else None
    state = WebState(h.runtime, Auth(h.runtime.db), channels=channels)
    async with TestClient(TestServer(build_app(state))) as client:
        yield client


async def post_update(client: TestClient[Any, Any], update: dict[str, Any], secret: str | None = WEBHOOK_SECRET) -> int:
    """Post an Update as Telegram does; returns the HTTP status."""
    headers = {SECRET_HEADER: secret} if secret is not None else {}
    response = await client.post(WEBHOOK_PATH, json=update, headers=headers)
    return response.status


def webhook_config(config: Config) -> Config:
    config.telegram.webhook_url, config.telegram.webhook_secret = WEBHOOK_URL, WEBHOOK_SECRET
    return config


def test_webhook_mode_sets_the_webhook_and_answers_what_telegram_posts(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        [set_call] = h.fake.calls_of("setWebhook", ok_only=True)
        assert (h.fake.webhook_url, h.fake.webhook_secret) == (WEBHOOK_URL, WEBHOOK_SECRET)
        assert h.fake.webhook_allowed_updates == ["message", "callback_query"]
        assert set_call.params.get("drop_pending_updates") in (None, False)  # what waited is still answered
        info = await h.channel.bot.get_webhook_info()
        assert info.url == WEBHOOK_URL and info.pending_update_count == 0
        assert not h.fake.calls_of("getUpdates") and not h.fake.calls_of("deleteWebhook")

        h.fake.push_message(OWNER, OWNER, "turn on the porch light")
        [update] = h.fake.webhook_updates
        async with web_client(h) as client:
            assert await post_update(client, update) == 200
            [reply] = await h.reply_to(OWNER)
            assert h.pin(17) is True
            assert "the porch light is on" in reply["text"] and "intent" in reply["text"]
            assert h.model.history == []

            await h.channel.stop()  # the webhook stays set: Telegram keeps what arrives while the Pi restarts
            assert h.fake.webhook_url == WEBHOOK_URL and not h.fake.calls_of("deleteWebhook")
            h.fake.push_message(OWNER, OWNER, "turn off the porch light")
            assert await post_update(client, h.fake.webhook_updates[-1]) == 503  # Telegram posts it again later
        assert not h.fake.calls_of("getUpdates")

        # Back to long polling: the webhook is deleted and what it had not delivered is fetched instead.
        h.runtime.config.telegram.webhook_url = ""
        h.channel = h.new_channel()
        await h.channel.start()
        assert h.fake.webhook_url == "" and h.fake.calls_of("deleteWebhook", ok_only=True)
        await h.reply_to(OWNER, 2)
        assert h.pin(17) is False

    run(webhook_config(config), scenario)


def test_webhook_posts_without_the_secret_change_nothing(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.push_message(OWNER, OWNER, "turn on the porch light")
        [update] = h.fake.webhook_updates
        async with web_client(h) as client:
            assert await post_update(client, update, secret=None) == 403
            assert await post_update(client, update, secret="wrong-secret-0123456789") == 403
            assert await post_update(client, update, secret=WEBHOOK_SECRET[:-1]) == 403
            response = await client.post(WEBHOOK_PATH, data=b"not json", headers={SECRET_HEADER: "x"})
            assert response.status == 403  # the secret is checked before the body is read
            await h.settle()
            assert h.pin(17) is False and not h.fake.calls_of("sendMessage") and not h.fake.calls_of("sendChatAction")

            # With the secret, but not an Update: refused, and the bot goes on.
            assert await post_update(client, {"update_id": 1, "message": 5}) == 400
            response = await client.post(WEBHOOK_PATH, data=b"[1, 2]", headers={SECRET_HEADER: WEBHOOK_SECRET})
            assert response.status == 400
            assert await post_update(client, update) == 200
            await h.reply_to(OWNER)
            assert h.pin(17) is True

    run(webhook_config(config), scenario)


def test_a_strangers_update_via_the_webhook_costs_nothing(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.push_message(STRANGER, STRANGER, "turn on the porch light")
        h.fake.push_message(STRANGER, STRANGER, "tell me a secret")
        async with web_client(h) as client:
            for update in h.fake.webhook_updates:
                assert await post_update(client, update) == 200
            await h.settle()
        assert h.pin(17) is False and h.model.history == []
        assert not [c for c in h.fake.calls if c.params.get("chat_id") == STRANGER]

    run(webhook_config(config), scenario)


def test_the_webhook_route_is_absent_without_a_webhook_channel(config: Config) -> None:
    async def scenario(h: Harness) -> None:  # polling mode
        h.fake.push_message(OWNER, OWNER, "turn on the porch light")
        update = {"update_id": 99, "message": h.fake.messages[OWNER][1]}
        await h.reply_to(OWNER)
        h.runtime.devices.backend.pin_factory.pin(17).state = False  # type: ignore[union-attr]
        for channel in (False, True):
            async with web_client(h, channel=channel) as client:
                assert await post_update(client, update) == 404
        await h.settle()
        assert h.pin(17) is False and len(h.fake.bot_messages(OWNER)) == 1

    run(config, scenario)


def test_a_webhook_telegram_refuses_is_reported(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        assert h.channel.problem is not None and "refused the webhook" in h.channel.problem
        assert "https url must be provided" in h.channel.problem.lower()

    config.telegram.webhook_secret = WEBHOOK_SECRET
    config.telegram.webhook_url = "http://pi.example.net/telegram/webhook"  # config validation forbids this
    run(config, scenario)
