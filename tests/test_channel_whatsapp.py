"""The WhatsApp channel: the daemon's real web app takes Meta's signed webhook posts, a fake Graph API on
127.0.0.1 takes the sends (tests/fakes/graph_api.py, speaking the Cloud API's payloads and errors).

The runtime is the real one (devices on the simulated backend) with a scripted instant model, so these
tests check the channel (signatures, once-only, buttons, approvals, delivery, errors), not answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels import base
from appliance.channels.pairing import create_code
from appliance.channels.registry import ChannelSet
from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.hosts import SiteNames
from appliance.channels.web.state import WebState
from appliance.channels.whatsapp.channel import ONLY_TEXT, WINDOW_CLOSED, WhatsAppChannel
from appliance.config import Config, DeviceConfig
from appliance.llm.scripted import ScriptedModel
from appliance.notify import Notifier
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests.channel_harness import ChannelHarness, Clock
from tests.channel_harness import run as run_on
from tests.fakes.graph_api import FakeGraph, MetaWebhook
from tests.helpers import eventually

OWNER = "4915112345678"  # in whatsapp.allow_from
STRANGER = "4917600000000"
VERIFY_TOKEN = "verify-me-0123456789"


@dataclass(kw_only=True)
class Harness(ChannelHarness):
    fake: FakeGraph
    channel: WhatsAppChannel
    meta: MetaWebhook
    client: TestClient[Any, Any]

    async def settle(self) -> None:
        """Until every post's events were handled and every answer finished."""
        await eventually(lambda: not self.channel.posts_in_flight and not self.channel.turns_in_flight)

    async def says(self, wa_id: str, text: str) -> int:
        """``wa_id`` writes ``text``: Meta posts it, signed; the events are handled; returns the HTTP status."""
        posted = await self.meta.post(self.fake.text_message(wa_id, text))
        await self.settle()
        return posted.status

    def rows(self) -> list[tuple[str, str, str | None]]:
        return self.runtime.db.rows("SELECT text, status, last_error FROM outbox ORDER BY id")

    def new_channel(self) -> WhatsAppChannel:
        return WhatsAppChannel(self.runtime.config.whatsapp, self.runtime, self.outbox, clock=self.clock)


def whatsapp_config(config: Config, fake: FakeGraph) -> Config:
    wa = config.whatsapp
    wa.enabled, wa.access_token, wa.app_secret, wa.verify_token = True, fake.token, fake.app_secret, VERIFY_TOKEN
    wa.phone_number_id, wa.api_base_url, wa.allow_from = fake.phone_number_id, fake.base_url, [OWNER]
    return config


@contextlib.asynccontextmanager
async def whatsapp(config: Config, *, fake: FakeGraph | None = None, start: bool = True) -> AsyncIterator[Harness]:
    """The fake Graph API, the runtime, the channel (started) and the daemon's web app, all wired as the daemon does."""
    async with contextlib.AsyncExitStack() as stack:
        if fake is None:
            fake = await stack.enter_async_context(FakeGraph())
        whatsapp_config(config, fake)
        model, clock = ScriptedModel(), Clock()
        runtime = Runtime.open(config, model=model)
        stack.callback(runtime.close)
        outbox = Outbox(runtime.db, clock=clock)
        channel = WhatsAppChannel(config.whatsapp, runtime, outbox, clock=clock)
        state = WebState(runtime, Auth(runtime.db), channels=ChannelSet(config, {"whatsapp": channel}))
        client: TestClient[Any, Any] = await stack.enter_async_context(TestClient(TestServer(build_app(state))))
        meta = MetaWebhook(str(client.make_url("/whatsapp/webhook")), fake.app_secret)
        harness = Harness(
            fake=fake,
            runtime=runtime,
            channel=channel,
            outbox=outbox,
            model=model,
            clock=clock,
            meta=meta,
            client=client,
        )
        if start:
            await channel.start()
        try:
            yield harness
        finally:
            await harness.channel.stop()


def run(config: Config, scenario: Callable[[Harness], Awaitable[None]]) -> None:
    run_on(whatsapp(config), scenario)


# --- who may talk, and the replies --------------------------------------------------------------------


def test_an_owners_message_is_answered_with_the_footer(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        assert h.channel.up and h.channel.detail == "as +15550783881 (Pico Test)"
        assert await h.says(OWNER, "hello there") == 200
        [reply] = h.fake.sent_texts(OWNER)
        assert reply.startswith("echo: hello there\n\nlocal · scripted · ")
        [call] = h.fake.sent(OWNER)
        assert call.authorization == f"Bearer {h.fake.token}" and call.body["type"] == "text"
        assert len(h.model.history) == 1
        # The conversation is the phone number's, in the same history as every channel's.
        conversation = h.runtime.db.conversation("whatsapp", OWNER)
        history = [m.content for m in h.runtime.db.recent_messages(conversation, 10)]
        assert history == ["hello there", "echo: hello there"]

    run(config, scenario)


def test_pairing_with_a_code_lets_a_new_number_in(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        code = create_code(h.runtime.db, "whatsapp", clock=h.clock)
        await h.says(STRANGER, code)
        assert h.fake.sent_texts(STRANGER) == ["Paired: you can talk to me now."]
        await h.says(STRANGER, "hi")
        assert h.fake.sent_texts(STRANGER)[1].startswith("echo: hi")

    run(config, scenario)


def test_commands_are_typed_and_answered(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        await h.says(OWNER, "/status")
        await h.says(OWNER, "/toggle porch_light")
        texts = h.fake.sent_texts(OWNER)
        assert "model" in texts[0].lower() and texts[1] == "porch_light is now on"
        assert h.pin(17) is True and h.model.history == []

    run(config, scenario)


def test_an_image_gets_a_note_once_and_statuses_are_ignored(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        payload = h.fake.text_message(OWNER, "x")
        message = payload["entry"][0]["changes"][0]["value"]["messages"][0]
        del message["text"]
        message.update(type="image", image={"id": "1479537139650973", "mime_type": "image/jpeg"})
        await h.meta.post(payload)
        await h.meta.resend()
        for status in ("sent", "delivered", "read"):
            assert (await h.meta.post(h.fake.status("wamid.HBgLMTIz", status, OWNER))).status == 200
        await h.settle()
        assert h.fake.sent_texts(OWNER) == [ONLY_TEXT] and h.model.history == []

    run(config, scenario)


# --- the webhook: signatures, replays, the handshake -----------------------------------------------------


def test_signed_posts_are_answered_and_bad_or_replayed_ones_cost_nothing(
    config: Config, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(h: Harness) -> None:
        with caplog.at_level(logging.WARNING):
            forged = await h.meta.post(h.fake.text_message(OWNER, "forged"), secret="not-the-app-secret")
            unsigned = await h.meta.post(h.fake.text_message(OWNER, "unsigned"), unsigned=True)
            assert (forged.status, unsigned.status) == (401, 401)
        assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1  # one line, not one per post
        await h.settle()
        assert h.model.history == [] and h.fake.sent() == []

        assert await h.says(OWNER, "once") == 200
        replayed = await h.meta.resend()  # Meta re-sends the very same bytes (or someone replays them)
        await h.settle()
        assert replayed.status == 200
        assert len(h.model.history) == 1 and len(h.fake.sent_texts(OWNER)) == 1

        # A body changed after signing fails the check, even with a signature that was good for another body.
        body, headers = h.meta.last or (b"", {})
        response = await h.client.post("/whatsapp/webhook", data=body.replace(b"once", b"twice"), headers=headers)
        assert response.status == 401

    run(config, scenario)


def test_the_verify_handshake(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        good = await h.meta.verify(VERIFY_TOKEN, challenge="1158201444")
        assert (good.status, good.text) == (200, "1158201444")
        wrong = await h.meta.verify("guessed-token")
        assert wrong.status == 403 and "1158201444" not in wrong.text
        response = await h.client.get(
            "/whatsapp/webhook", params={"hub.mode": "unsubscribe", "hub.verify_token": VERIFY_TOKEN}
        )
        assert response.status == 403

    run(config, scenario)


def test_the_webhook_is_absent_without_the_channel_and_its_public_name_is_let_in(config: Config) -> None:
    async def main() -> None:
        runtime = Runtime.open(config, model=ScriptedModel())
        try:
            state = WebState(runtime, Auth(runtime.db))
            async with TestClient(TestServer(build_app(state))) as client:
                assert (await client.post("/whatsapp/webhook", data=b"{}")).status == 404
                assert (await client.get("/whatsapp/webhook")).status == 404
        finally:
            runtime.close()

    asyncio.run(main())
    config.whatsapp.webhook_url = "https://pico.example.net/whatsapp/webhook"
    site = SiteNames.for_config(config, hostname="pi", addresses=[])
    assert site.allows("pico.example.net") and not site.allows("evil.example.com")


# --- buttons and approvals -----------------------------------------------------------------------------


def test_an_approval_by_button_is_decided_once_when_meta_resends_it(config: Config) -> None:
    config.devices["heater"] = DeviceConfig(driver="relay", pin=5, approval="required")

    async def scenario(h: Harness) -> None:
        devices = h.runtime.devices
        assert devices is not None
        pending = (await devices.set("heater", "on", requested_by="model")).pending
        assert pending is not None and h.pin(5) is False

        await h.says(OWNER, "/approve")
        [card] = h.fake.sent(OWNER)
        assert card.body["type"] == "interactive"
        assert card.buttons == {f"apr:approve:{pending.id}": "Approve", f"apr:deny:{pending.id}": "Deny"}

        press = h.fake.button_reply(OWNER, f"apr:approve:{pending.id}", "Approve", context_id=card.message_id)
        assert (await h.meta.post(press)).status == 200
        await h.settle()
        assert (await h.meta.resend()).status == 200  # Meta did not get our 200 in time and posts it again
        await h.settle()
        assert h.pin(5) is True
        decided = devices.approvals.get(pending.id)
        assert decided.status == "approved" and decided.decided_by == f"whatsapp:{OWNER}"
        after = h.fake.sent_texts(OWNER)[1:]
        assert len(after) == 1 and after[0].startswith("Approved by")  # said once, not twice

        # A stranger's press of the same kind decides nothing.
        other = (await devices.set("heater", "off", requested_by="model")).pending
        assert other is not None
        await h.meta.post(h.fake.button_reply(STRANGER, f"apr:approve:{other.id}", "Approve", context_id="x"))
        await h.settle()
        assert devices.approvals.get(other.id).status == "pending" and h.pin(5) is True

    run(config, scenario)


def test_more_than_three_buttons_become_reply_codes(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        assert h.runtime.devices is not None and len(h.runtime.devices.describe()) > 3
        await h.says(OWNER, "/devices")
        [menu] = h.fake.sent(OWNER)
        assert menu.body["type"] == "text" and "reply /toggle porch_light" in menu.text

    run(config, scenario)


# --- delivery ------------------------------------------------------------------------------------------


def test_rate_limits_pause_and_errors_end_as_they_should(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        await h.channel.delivery.stop()  # these passes are the test's, by its clock
        for code, wait_s in (("131056", 10), ("130429", 30), ("429", 60)):
            h.fake.fail_next(1, code)  # type: ignore[arg-type]
            h.outbox.enqueue("whatsapp", OWNER, f"after {code}", "event")
            await h.channel.delivery.deliver_due()
            h.clock.advance(wait_s - 1)
            await h.channel.delivery.deliver_due()
            assert h.fake.sent_texts(OWNER)[-1:] != [f"after {code}"]  # not before the pause is over
            h.clock.advance(1.5)
            await h.channel.delivery.deliver_due()
            assert h.fake.sent_texts(OWNER)[-1] == f"after {code}"

        h.fake.fail_next(1, "500")
        h.fake.fail_next(1, "network")
        h.outbox.enqueue("whatsapp", OWNER, "after a 500 and a dropped connection", "event")
        await h.drain()
        assert h.rows()[-1][:2] == ("after a 500 and a dropped connection", "sent")
        assert h.fake.sent_texts(OWNER).count("after a 500 and a dropped connection") == 1

        h.fake.fail_next(1, "131047")  # the synchronous form; the webhook's is the next test's
        h.fake.fail_next(1, "131026")
        h.outbox.enqueue("whatsapp", "4930000000", "outside the window", "event")
        h.outbox.enqueue("whatsapp", "4930000001", "to no WhatsApp user", "event")
        await h.drain()
        assert h.rows()[-2] == ("outside the window", "failed", WINDOW_CLOSED)
        assert h.rows()[-1][1] == "failed" and "not a WhatsApp user" in str(h.rows()[-1][2])

    run(config, scenario)


def test_a_message_outside_the_24_hour_window_is_marked_failed_when_meta_says_so(config: Config) -> None:
    async def main() -> None:
        async with FakeGraph(enforce_window=True) as fake, whatsapp(config, fake=fake) as h:
            fake.clock = h.clock
            h.outbox.enqueue("whatsapp", OWNER, "the door opened", "event")
            await h.drain()
            assert h.rows() == [("the door opened", "sent", None)]  # accepted by the Graph API ...
            [failed] = fake.webhook_posts  # ... and reported undelivered in a statuses webhook
            assert (await h.meta.post(failed)).status == 200
            await h.settle()
            assert h.rows() == [("the door opened", "failed", WINDOW_CLOSED)]

            await h.says(OWNER, "I am here")  # the owner writes: the window is open again
            assert h.fake.sent_texts(OWNER)[-1].startswith("echo: I am here")
            assert len(fake.webhook_posts) == 1

    asyncio.run(main())


def test_a_proactive_message_waits_while_whatsapp_is_unreachable_and_goes_when_it_is_back(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base, "CONNECT_RETRY_S", (0.05,))  # the background reconnection, sooner

    async def main() -> None:
        async with FakeGraph() as fake:
            await fake.close()  # no network: nothing listens on the Graph API's port
            async with whatsapp(config, fake=fake) as h:
                assert not h.channel.up and h.channel.problem is not None
                assert h.channel.problem.startswith("cannot reach the Graph API")
                notifier = Notifier(h.outbox, {"whatsapp": h.channel}, lambda: ["whatsapp"])
                notifier.notify("The living room is over 28 °C.", "event")
                notifier.notify("Backup finished", "event")
                await fake.come_back()
                await eventually(lambda: len(fake.sent_texts(OWNER)) == 2, what="the waiting messages")
                assert h.channel.up
                assert fake.sent_texts(OWNER) == ["The living room is over 28 °C.", "Backup finished"]

    asyncio.run(main())


def test_a_reply_that_cannot_be_sent_goes_to_the_outbox(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        await h.channel.delivery.stop()
        h.fake.fail_next(1, "500")
        await h.says(OWNER, "are you there?")
        [(text, status, _)] = h.rows()
        assert text.startswith("echo: are you there?\n\nlocal · scripted · ") and status == "pending"
        await h.drain()
        assert h.fake.sent_texts(OWNER) == [text]

    run(config, scenario)


# --- a refused token, no network: the channel is off, the rest runs -----------------------------------------


def test_a_refused_token_turns_the_channel_off_and_the_rest_runs(config: Config) -> None:
    async def main() -> None:
        async with FakeGraph() as fake:
            async with whatsapp(config, fake=fake, start=False) as h:
                config.whatsapp.access_token = "EAAG-EXPIRED"
                await h.channel.start()
                assert not h.channel.up and h.channel.problem is not None
                assert "whatsapp.access_token" in h.channel.problem
                assert (await h.client.get("/healthz")).status == 200  # the daemon's web server runs on
                assert (await h.meta.verify(VERIFY_TOKEN)).status == 200

            # The token is revoked while the channel runs: the first 190 turns it off; nothing is lost.
            async with whatsapp(config, fake=fake) as h:
                assert h.channel.up
                fake.calls.clear()
                await h.channel.delivery.stop()
                fake.token = "EAAG-NEW-TOKEN"
                h.outbox.enqueue("whatsapp", OWNER, "kept for later", "event")
                await h.channel.delivery.deliver_due()
                assert not h.channel.up and "whatsapp.access_token" in (h.channel.problem or "")
                assert h.rows() == [("kept for later", "pending", None)]
                await h.channel.delivery.deliver_due()
                assert len(fake.calls) == 1  # one refused send: then paused, not hammering

    asyncio.run(main())


def test_the_daemon_builds_the_channel_from_the_config_and_serves_its_webhook(config: Config) -> None:
    """The whole appliance: the registry builds the channel, the daemon's web server takes Meta's posts."""
    from appliance.daemon import Daemon
    from tests.helpers import started

    config.llm.preload = False

    async def main() -> None:
        async with FakeGraph() as fake:
            whatsapp_config(config, fake)
            daemon = Daemon(config, host="127.0.0.1", port=0)
            served = asyncio.ensure_future(daemon.run())
            await started(daemon, served)
            try:
                assert daemon.web is not None and daemon.channels is not None
                meta = MetaWebhook(f"http://127.0.0.1:{daemon.web.port}/whatsapp/webhook", fake.app_secret)
                assert (await meta.verify(VERIFY_TOKEN, "42")).text == "42"
                assert (await meta.post(fake.text_message(OWNER, "turn on the porch light"))).status == 200
                await eventually(lambda: bool(fake.sent_texts(OWNER)), what="the answer")
                assert fake.sent_texts(OWNER)[0].startswith("Done: the porch light is")
                [state] = [s for s in daemon.channels.states() if s["name"] == "whatsapp"]
                assert state == {
                    "name": "whatsapp",
                    "enabled": True,
                    "up": True,
                    "detail": "as +15550783881 (Pico Test)",
                }
            finally:
                daemon.stopping.set()
                assert await served == 0

    asyncio.run(main())
