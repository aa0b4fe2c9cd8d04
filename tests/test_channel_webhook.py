"""Webhook bridges: signed requests to the daemon's real web app, and the bridge's signed posts to a real
receiver on 127.0.0.1 (tests/fakes/webhook_receiver.py, which checks the signatures on its own).

The runtime is the real one with a scripted instant model: these tests check the bridge (signatures,
replays, the answer in the response, delivery to the url), not answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.registry import ChannelSet
from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import WebState
from appliance.channels.webhook import WebhookChannel
from appliance.config import Config, DeviceConfig, WebhookConfig, load_config
from appliance.llm.base import Generation, GenerationRequest
from appliance.llm.scripted import ScriptedModel
from appliance.notify import Notifier
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests.channel_harness import ChannelHarness, Clock
from tests.channel_harness import run as run_on
from tests.fakes.webhook_receiver import WebhookReceiver, signed_request
from tests.helpers import eventually

SECRET = "ha-secret-0123456789abcdef"
SCRIPT_SECRET = "script-secret-0123456789"


@dataclass(kw_only=True)
class Harness(ChannelHarness):
    receiver: WebhookReceiver
    channel: WebhookChannel
    client: TestClient[Any, Any]

    async def ask(
        self, payload: dict[str, Any] | bytes, *, bridge: str = "ha", secret: str = SECRET, at: float | None = None
    ) -> tuple[int, dict[str, Any]]:
        """A signed request, as a caller sends it; the status and the JSON answer."""
        body, headers = signed_request(secret, payload, timestamp=self.clock() if at is None else at)
        return await self.post(bridge, body, headers)

    async def post(self, bridge: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        response = await self.client.post(f"/api/webhook/{bridge}", data=body, headers=headers)
        return response.status, await response.json()

    def notifier(self) -> Notifier:
        return Notifier(self.outbox, {"webhook": self.channel}, lambda: ["webhook"], clock=self.clock)

    def rows(self) -> list[tuple[str, str, str | None]]:
        return self.runtime.db.rows("SELECT text, status, last_error FROM outbox ORDER BY id")

    def new_channel(self) -> WebhookChannel:
        return WebhookChannel(self.runtime.config.webhooks, self.runtime, self.outbox, clock=self.clock)


@contextlib.asynccontextmanager
async def bridges(config: Config, model: ScriptedModel | None = None) -> AsyncIterator[Harness]:
    """A receiver, the runtime, the bridges "ha" (with the receiver's url) and "script" (answers only), the web app."""
    clock = Clock()
    async with contextlib.AsyncExitStack() as stack:
        receiver = await stack.enter_async_context(WebhookReceiver(SECRET, clock=clock))
        config.webhooks = {
            "ha": WebhookConfig(secret=SECRET, url=receiver.url),
            "script": WebhookConfig(secret=SCRIPT_SECRET),
        }
        model = model or ScriptedModel()
        runtime = Runtime.open(config, model=model)
        stack.callback(runtime.close)
        outbox = Outbox(runtime.db, clock=clock)
        channel = WebhookChannel(config.webhooks, runtime, outbox, clock=clock)
        state = WebState(runtime, Auth(runtime.db), channels=ChannelSet(config, {"webhook": channel}))
        client: TestClient[Any, Any] = await stack.enter_async_context(TestClient(TestServer(build_app(state))))
        harness = Harness(
            receiver=receiver, runtime=runtime, channel=channel, outbox=outbox, model=model, clock=clock, client=client
        )
        await channel.start()
        try:
            yield harness
        finally:
            await harness.channel.stop()


def run(config: Config, scenario: Callable[[Harness], Awaitable[None]], model: ScriptedModel | None = None) -> None:
    run_on(bridges(config, model), scenario)


# --- requests in ---------------------------------------------------------------------------------------


def test_a_signed_request_is_answered_with_the_reply_and_its_footer(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        assert h.channel.up and h.channel.detail == f"bridges: ha -> {h.receiver.url}, script (answers only)"
        status, answer = await h.ask({"text": "hello there", "chat": "kitchen"})
        assert status == 200
        assert answer["reply"] == "echo: hello there" and answer["route"] == "local"
        assert answer["footer"].startswith("local · scripted · ") and answer["reason"]
        assert answer["text"] == f"{answer['reply']}\n\n{answer['footer']}"
        assert (answer["bridge"], answer["chat"]) == ("ha", "kitchen")
        assert len(h.model.history) == 1

        # Each chat of a bridge is a conversation of its own, in the same history as every channel's.
        await h.ask({"text": "and the garage?", "chat": "garage"})
        await h.ask({"text": "from the script"}, bridge="script", secret=SCRIPT_SECRET)
        db = h.runtime.db
        for chat_id, first in (("ha:kitchen", "hello there"), ("ha:garage", "and the garage?")):
            assert db.recent_messages(db.conversation("webhook", chat_id), 10)[0].content == first
        assert db.recent_messages(db.conversation("webhook", "script"), 10)[0].content == "from the script"
        assert h.receiver.received == []  # answers go in the response, never to the url

    run(config, scenario)


def test_unsigned_wrong_old_and_replayed_requests_are_refused_and_cost_nothing(
    config: Config, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(h: Harness) -> None:
        good_body, good_headers = signed_request(SECRET, {"text": "turn on the porch light"}, timestamp=h.clock())
        with caplog.at_level(logging.WARNING):
            refused = [
                await h.post("ha", good_body, {"Content-Type": "application/json"}),  # unsigned
                await h.ask({"text": "hi"}, secret="not-the-secret-0123456789"),  # wrong secret
                await h.ask({"text": "hi"}, bridge="nope"),  # no such bridge
                await h.ask({"text": "hi"}, bridge="script"),  # another bridge's secret
                await h.post("ha", good_body.replace(b"porch", b"front"), good_headers),  # changed after signing
                await h.ask({"text": "hi"}, at=h.clock() - 301),  # too old
                await h.ask({"text": "hi"}, at=h.clock() + 301),  # from the future
            ]
        assert [status for status, _ in refused] == [401, 401, 401, 401, 401, 403, 403]
        assert all("error" in answer and "porch" not in str(answer) for _, answer in refused)
        assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1  # one line, not seven
        assert h.model.history == []

        status, _ = await h.post("ha", good_body, good_headers)
        assert status == 200 and h.runtime.devices is not None
        replayed, answer = await h.post("ha", good_body, good_headers)  # the same request again
        assert replayed == 403 and "replay" in answer["error"]
        # The once-only record is in the database: a channel made anew (a restart) refuses it too.
        assert h.runtime.db.value("SELECT count(*) FROM inbound WHERE channel = 'webhook'") == 1

        # A request that is signed but not a message: a 400 saying why, no model call.
        bad = [await h.ask(b"not json"), await h.ask({"chat": "kitchen"}), await h.ask({"text": "x", "chat": "a b"})]
        assert [status for status, _ in bad] == [400, 400, 400] and h.model.history == []

    run(config, scenario)


def test_a_replay_with_the_signature_spelled_differently_is_refused_and_acts_once(config: Config) -> None:
    """The once-only key is the HMAC the Pi computed, not the header's text: case, prefix and spaces change nothing."""
    config.devices["fan"] = DeviceConfig(driver="relay", pin=6)

    def respelled(sent: str) -> list[str]:
        digest = sent.removeprefix("sha256=")
        return [
            "sha256=" + digest.upper(),  # the hex in upper case
            "SHA256=" + digest,  # the prefix in upper case
            "Sha256=" + digest.upper(),
            f"  {sent} ",  # padded
            digest,  # no prefix at all
            "sha256=sha256=" + digest,
        ]

    async def scenario(h: Harness) -> None:
        pin = h.runtime.devices.backend.pin_factory.pin(6) if h.runtime.devices else None
        assert pin is not None and not pin.state
        for payload in (
            {"text": "turn on the fan"},
            {"text": "tell me a joke about owls"},
        ):  # a device write, a question
            body, headers = signed_request(SECRET, payload, timestamp=h.clock())
            assert (await h.post("ha", body, headers))[0] == 200
            for variant in respelled(headers["X-Picoagent-Signature"]):
                status, answer = await h.post("ha", body, {**headers, "X-Picoagent-Signature": variant})
                assert status in (401, 403) and "error" in answer, (variant, status, answer)
                if variant.strip().lower() == headers["X-Picoagent-Signature"]:  # a valid signature: a replay
                    assert status == 403 and "replay" in answer["error"], (variant, answer)
        assert bool(pin.state) is True  # switched by the intent fast path, once, not once per spelling:
        assert h.runtime.db.value("SELECT count(*) FROM messages WHERE route = 'intent'") == 1
        assert len(h.model.history) == 1  # the message reached the model once
        assert h.runtime.db.value("SELECT count(*) FROM inbound WHERE channel = 'webhook'") == 2

    run(config, scenario)


def test_without_bridges_every_request_is_refused_alike(config: Config) -> None:
    async def main() -> None:
        runtime = Runtime.open(config, model=ScriptedModel())
        try:
            async with TestClient(TestServer(build_app(WebState(runtime, Auth(runtime.db))))) as client:
                body, headers = signed_request(SECRET, {"text": "hi"})
                response = await client.post("/api/webhook/ha", data=body, headers=headers)
                assert response.status == 401 and "fix" in await response.json()
        finally:
            runtime.close()

    asyncio.run(main())


def test_a_bridge_is_not_a_person_it_cannot_approve_its_own_write_nor_read_the_memories(config: Config) -> None:
    """Whatever holds the secret (Home Assistant, a script) talks to the assistant; deciding is a person's."""
    config.devices["heater"] = DeviceConfig(driver="relay", pin=5, approval="required")

    async def scenario(h: Harness) -> None:
        devices, memory = h.runtime.devices, h.runtime.memory
        assert devices is not None and memory is not None
        await h.runtime.db.call(memory.add, "The alarm code is 7319.", source="test")
        status, asked = await h.ask({"text": "turn on the heater"})  # a write the bridge asks for waits
        [pending] = await asyncio.to_thread(devices.approvals.pending)
        assert status == 200 and "approval" in asked["text"] and pending.requested_by == "webhook:ha"
        for n, text in enumerate(["/approve", f"/approve {pending.id}", f"/deny {pending.id}", "/memory alarm code"]):
            h.clock.advance(1)  # a new request, not a replay: signed a second later
            status, answer = await h.ask({"text": text})
            assert status == 200 and answer["route"] == "command", answer
            assert answer["text"].startswith(f"/{text.split()[0][1:]} needs a person"), (n, answer["text"])
            assert "7319" not in answer["text"] and "reply /approve" not in answer["text"]
        h.clock.advance(1)
        _, helped = await h.ask({"text": "/help"})
        assert "only command is /help" in helped["text"]
        assert devices.approvals.get(pending.id).status == "pending"
        assert bool(devices.backend.pin_factory.pin(5).state) is False and h.model.history == []
        # /local TEXT is a question for the small model, what a decline here offers (walk 8 found it refused)
        h.clock.advance(1)
        h.model.enqueue("Paris, I think.")
        _, local = await h.ask({"text": "/local what is the capital of France?"})
        assert local["route"] == "local" and local["text"].startswith("Paris, I think."), local
        assert h.model.history[-1].messages[-1].content.endswith("what is the capital of France?")

    run(config, scenario)


class GatedModel(ScriptedModel):
    """The scripted model answering only once :attr:`gate` is set (a slow turn, without sleeping)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def generate(self, request: GenerationRequest) -> Generation:
        await self.gate.wait()
        return await super().generate(request)


def test_a_reply_whose_caller_hung_up_goes_to_the_url(config: Config) -> None:
    model = GatedModel()

    async def scenario(h: Harness) -> None:
        body, headers = signed_request(SECRET, {"text": "a slow question", "chat": "kitchen"}, timestamp=h.clock())
        with pytest.raises(TimeoutError):
            await h.client.post("/api/webhook/ha", data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=0.3))
        await eventually(lambda: h.channel.callers_waiting == 0, what="the server to see the caller go")
        model.gate.set()
        await eventually(lambda: bool(h.receiver.accepted), what="the reply at the url")
        [posted] = h.receiver.accepted
        assert posted["text"].startswith("echo: a slow question\n\nlocal · scripted")
        assert (posted["bridge"], posted["chat"], posted["kind"]) == ("ha", "kitchen", "reply")
        assert [r.valid for r in h.receiver.received] == [True]

    run(config, scenario, model)


# --- messages out --------------------------------------------------------------------------------------


def test_a_proactive_message_is_posted_signed_to_the_url(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        assert h.channel.owner_target() == "ha"  # the first bridge with a url
        h.notifier().notify("Doorbell: pressed", "event")
        await eventually(lambda: bool(h.receiver.received), what="the post")
        [post] = h.receiver.received
        assert post.valid and post.status == 200  # the receiver checked the signature and the timestamp itself
        assert post.body == {"bridge": "ha", "chat": "", "kind": "event", "text": "Doorbell: pressed", "id": 1}
        assert post.delivery == "1"
        # marked sent once the receiver's answer is read, a moment after the receiver has it (CI under load: pending)
        await eventually(lambda: h.rows() != [("Doorbell: pressed", "pending", None)], what="the answer read")
        assert h.rows() == [("Doorbell: pressed", "sent", None)]

    run(config, scenario)


def test_the_receiver_down_then_back_gets_each_message_once_in_order(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        await h.channel.delivery.stop()  # these passes are the test's, by its clock
        await h.receiver.go_down()
        notifier = h.notifier()
        texts = ["The living room is over 28 °C.", "Doorbell: pressed", "Backup finished"]
        for text in texts:
            notifier.notify(text, "event")
        for _ in range(3):
            await h.channel.delivery.deliver_due()
            h.clock.advance(30)
        assert not h.channel.up and h.channel.problem is not None
        assert h.channel.problem.startswith(f"cannot reach {h.receiver.url}")
        # Down for proactive messages, the bridge still answers its callers.
        assert (await h.ask({"text": "still there?"}))[0] == 200

        await h.receiver.come_back()
        h.receiver.fail_next(1, 503)  # back, but not ready yet for a moment
        await h.drain()
        assert h.receiver.texts == texts  # each once, in order
        assert [r.delivery for r in h.receiver.received] == ["1", "1", "2", "3"]  # a repeat carries its id
        assert h.channel.up

    run(config, scenario)


def test_a_receiver_that_refuses_the_signature_is_not_retried_for_nothing(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        await h.channel.delivery.stop()
        h.receiver.secret = "the-receiver-has-another-secret"
        h.outbox.enqueue("webhook", "ha", "refused", "event")
        h.outbox.enqueue("webhook", "script", "nowhere to go", "event")
        await h.drain()
        [refused, nowhere] = h.rows()
        assert refused[1] == "failed" and "HTTP 401" in str(refused[2]) and "secret" in str(refused[2])
        assert nowhere == ("nowhere to go", "failed", "webhooks.script.url is empty: nowhere to post it")
        assert len(h.receiver.received) == 1

    run(config, scenario)


def test_proactive_messages_go_to_the_first_bridge_that_may_carry_them(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        hooks = h.runtime.config.webhooks
        hooks["ha"].owner = False
        assert h.channel.owner_target() is None  # "script" has no url
        hooks["script"].url = "http://127.0.0.1:9/hook"
        assert h.channel.owner_target() == "script"

    run(config, scenario)


def test_the_daemon_builds_the_bridges_from_the_config_and_serves_them(config: Config) -> None:
    """The whole appliance: the registry builds the channel, /api/status lists it, a bridge answers, notify posts."""
    from appliance.daemon import Daemon
    from tests.helpers import started

    config.llm.preload = False

    async def main() -> None:
        async with WebhookReceiver(SECRET) as receiver:
            config.webhooks = {"ha": WebhookConfig(secret=SECRET, url=receiver.url)}
            daemon = Daemon(config, host="127.0.0.1", port=0)
            served = asyncio.ensure_future(daemon.run())
            await started(daemon, served)
            try:
                assert daemon.web is not None and daemon.channels is not None and daemon.notifier is not None
                base = f"http://127.0.0.1:{daemon.web.port}"
                body, headers = signed_request(SECRET, {"text": "turn on the porch light"})
                async with (
                    aiohttp.ClientSession() as http,
                    http.post(f"{base}/api/webhook/ha", data=body, headers=headers) as response,
                ):
                    answer = await response.json()
                assert response.status == 200 and answer["route"] == "intent", answer
                [state] = [s for s in daemon.channels.states() if s["name"] == "webhook"]
                assert state["enabled"] and state["up"]
                await asyncio.to_thread(daemon.notifier.notify, "Backup finished", "task")
                await eventually(lambda: receiver.texts == ["Backup finished"], what="the post to the url")
            finally:
                daemon.stopping.set()
                assert await served == 0

    asyncio.run(main())


def test_a_bridge_added_changed_and_removed_at_a_reload_applies_with_no_restart(tmp_path: Path) -> None:
    """webhooks edited in the file and reloaded: a new bridge answers at once, a new secret replaces the old
    one, and a bridge taken out is refused like any unknown one; nothing waits for a restart."""
    from appliance.daemon import Daemon
    from tests.helpers import config_file, started

    path = config_file(tmp_path, {"preload: true": "preload: false"})
    config = load_config(path, data_dir=tmp_path / "data")

    def bridges(text: str) -> None:
        path.write_text(re.sub(r"\nwebhooks:.*?\n", f"\nwebhooks: {text}\n", path.read_text(), count=1))

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0, data_dir_override=str(tmp_path / "data"))
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        assert daemon.web is not None and daemon.channels is not None
        url = f"http://127.0.0.1:{daemon.web.port}/api/webhook/ha"

        async def status(secret: str) -> int:
            body, headers = signed_request(secret, {"text": "/help"})
            async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=headers) as response:
                return response.status

        async def reloaded(text: str) -> None:
            bridges(text)
            daemon.reload()
            assert daemon.reloaded.restart_needed == []
            await eventually(lambda: not daemon.chores._running, 15, "the channel change")

        try:
            assert await status(SECRET) == 401 and daemon.channels.get("webhook") is None
            await reloaded(f"{{ha: {{secret: {SECRET}}}}}")
            assert await status(SECRET) == 200
            await reloaded(f"{{ha: {{secret: {SCRIPT_SECRET}}}}}")
            assert await status(SECRET) == 401 and await status(SCRIPT_SECRET) == 200
            await reloaded("{}")
            assert await status(SCRIPT_SECRET) == 401 and daemon.channels.get("webhook") is None
        finally:
            daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())
