"""The Slack channel: the real Bolt app and slack_sdk's Socket Mode client against a fake Slack on 127.0.0.1.

The fake (tests/fakes/slack_api.py) speaks Slack's Web API and the Socket Mode websocket (hello, envelopes,
acks, re-delivery); the runtime is the real one (simulated devices) with a scripted instant model, so these
tests check the channel: who may talk, DMs, mentions answered in threads, the slash command, buttons,
streaming by chat.update, delivery of the outbox, and a refused token leaving the daemon running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from appliance.channels.pairing import create_code
from appliance.channels.registry import state_of
from appliance.channels.slack.channel import SlackChannel, slash_command
from appliance.channels.slack.text import escape, from_slack, split_message
from appliance.config import Config, DeviceConfig
from appliance.llm.scripted import ScriptedModel
from appliance.notify import Notifier
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests.agents import SlowModel
from tests.channel_harness import ChannelHarness, Clock, opened
from tests.channel_harness import run as run_on
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack
from tests.helpers import ROOT, started

BOT_TOKEN = "xoxb-test-bot"
APP_TOKEN = "xapp-test-app"
OWNER = "U0OWNER"  # in slack.allow_from
STRANGER = "U0STRANGER"
ROOM = "C0ROOM"


@dataclass(kw_only=True)
class Harness(ChannelHarness):
    fake: FakeSlack
    channel: SlackChannel

    @property
    def dm(self) -> str:
        """The owner's DM with the app."""
        return str(self.fake.im_with(OWNER)["id"])

    async def settle(self, timeout: float = 5.0) -> None:
        """Until every envelope was acknowledged and handled, and every answer finished."""
        await self.fake.wait_for(
            lambda: not self.fake.unacked() and not self.channel.handling and not self.channel.turns_in_flight,
            timeout,
            "the envelopes to be handled",
        )

    async def replies(self, channel: str, count: int = 1, *, thread_ts: str | None = None) -> list[dict[str, Any]]:
        """Wait for ``count`` of the app's messages in a conversation (a thread), and for the answers to finish."""
        await self.fake.wait_for(
            lambda: len(self.fake.bot_messages(channel, thread_ts=thread_ts)) >= count, what=f"a reply in {channel}"
        )
        await self.settle()
        return self.fake.bot_messages(channel, thread_ts=thread_ts)

    def new_channel(self) -> SlackChannel:
        channel = SlackChannel(self.runtime.config.slack, self.runtime, self.outbox, clock=self.clock)
        channel.ping_interval_s = 0.2  # type: ignore[misc]  # reconnects within a test's patience
        return channel


def slack_config(config: Config, fake: FakeSlack) -> None:
    sl = config.slack
    sl.enabled, sl.bot_token, sl.app_token, sl.api_base_url = True, BOT_TOKEN, APP_TOKEN, fake.base_url
    sl.allow_from, sl.edit_interval_s = [OWNER], 0.2


@contextlib.asynccontextmanager
async def slack(config: Config, model: ScriptedModel | None = None) -> AsyncIterator[Harness]:
    """The fake Slack, the runtime and a started channel pointed at it."""
    async with FakeSlack(BOT_TOKEN, APP_TOKEN) as fake:
        fake.add_user(OWNER, "ann")  # a member of the workspace
        slack_config(config, fake)

        def make(runtime: Runtime, outbox: Outbox, clock: Clock, model: ScriptedModel) -> Harness:
            harness = Harness(fake=fake, runtime=runtime, channel=None, outbox=outbox, model=model, clock=clock)
            harness.channel = harness.new_channel()
            return harness

        async with opened(config, model, make) as harness:
            assert harness.channel.up, harness.channel.problem
            yield harness


def run(config: Config, scenario: Callable[[Harness], Awaitable[None]], model: ScriptedModel | None = None) -> None:
    run_on(slack(config, model), scenario)


def buttons(message: dict[str, Any]) -> dict[str, str]:
    """A message's buttons as value (the button's data) -> label."""
    return {
        element["value"]: element["text"]["text"]
        for block in message.get("blocks") or []
        if block["type"] == "actions"
        for element in block["elements"]
    }


def tap(h: Harness, user: str, channel: str, message: dict[str, Any], data: str) -> dict[str, Any]:
    """``user`` presses the button whose data is ``data`` on one of the app's messages; returns the envelope."""
    [action_id] = [
        e["action_id"]
        for block in message.get("blocks") or []
        if block["type"] == "actions"
        for e in block["elements"]
        if e["value"] == data
    ]
    return h.fake.push_action(user, channel, message["ts"], action_id)


def envelope_of(h: Harness, message: dict[str, Any]) -> dict[str, Any]:
    """The envelope that carried a person's message to the app."""
    [envelope] = [e for e in h.fake.envelopes if e["payload"].get("event", {}).get("ts") == message["ts"]]
    return envelope


def rows(h: Harness) -> list[tuple[str, str]]:
    return [(str(t), str(s)) for t, s in h.runtime.db.rows("SELECT text, status FROM outbox ORDER BY id")]


# --- who may talk, and the replies --------------------------------------------------------------------


def test_an_owners_dm_is_answered_with_the_footer(config: Config, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(h: Harness) -> None:
        caplog.set_level(logging.DEBUG)
        assert state_of(h.channel)["detail"] == "as @pico in Pico Test"
        asked = h.fake.push_dm(OWNER, "turn on the porch light")
        [reply] = await h.replies(h.dm)
        assert h.pin(17) is True and h.model.history == []  # the fast path: no model call
        await h.fake.acked(await h.fake.redeliver(envelope_of(h, asked)))  # Slack sent it again
        await h.settle()
        assert len(h.fake.bot_messages(h.dm)) == 1  # answered once
        assert "the porch light is on" in reply["text"] and "intent" in reply["text"]  # the footer names the route
        assert reply["blocks"][0] == {"type": "section", "text": {"type": "mrkdwn", "text": reply["text"]}}

        h.fake.push_dm(OWNER, "hello <@U0OTHER> & <https://example.com|the site>")
        [_, reply] = await h.replies(h.dm, 2)
        body, _, footer = reply["text"].rpartition("\n\n")
        assert body == "echo: hello @U0OTHER &amp; the site (https://example.com)"  # read plain, shown escaped
        assert footer.startswith("local · scripted · ") and len(h.model.history) == 1
        assert reply.get("thread_ts") is None  # a DM is answered in the DM itself
        logged = "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records)
        assert "Skipped self event" in logged  # the SDK's debug lines are there, and no token in them
        assert BOT_TOKEN not in logged and APP_TOKEN not in logged

    run(config, scenario)


def test_a_stranger_gets_nothing_and_costs_nothing(config: Config, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(h: Harness) -> None:
        caplog.set_level(logging.WARNING, logger="appliance.channels")
        h.fake.push_dm(OWNER, "/devices")
        [menu] = await h.replies(h.dm)
        stranger_dm = str(h.fake.im_with(STRANGER)["id"])
        h.fake.push_dm(STRANGER, "turn on the porch light")
        h.fake.push_mention(STRANGER, ROOM, "what is the weather")
        h.fake.push_command(STRANGER, ROOM, "status")
        tap(h, STRANGER, h.dm, menu, "dev:toggle:fan")
        await h.settle()
        assert h.model.history == [] and h.pin(17) is False and h.pin(27) is False
        assert not h.fake.bot_messages(stranger_dm) and not h.fake.bot_messages(ROOM)
        assert [r["text"] for r in h.fake.responses] == ["not allowed"]  # only the tap is told, only to them
        assert [c.params["user"] for c in h.fake.calls_of("users.info")] == [OWNER]  # not even a stranger's name
        assert len([r for r in caplog.records if STRANGER in r.getMessage()]) == 1  # one line a minute

        code = create_code(h.runtime.db, "slack", clock=h.clock)
        h.fake.push_dm(STRANGER, code)
        [paired] = await h.replies(stranger_dm)
        assert paired["text"] == "Paired: you can talk to me now."
        h.fake.push_dm(STRANGER, "hi")
        [_, reply] = await h.replies(stranger_dm, 2)
        assert reply["text"].startswith("echo: hi")

    run(config, scenario)


def test_a_mention_is_answered_in_its_thread_and_the_thread_is_one_session(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        asked = h.fake.push_mention(OWNER, ROOM, "remember the code word: heron")
        [reply] = await h.replies(ROOM)
        assert reply["thread_ts"] == asked["ts"] and reply["text"].startswith("echo: remember the code word: heron")
        assert len(h.fake.envelopes) >= 2  # the app_mention and the message event of the same mention: answered once

        h.fake.push_channel_message(OWNER, ROOM, "and what was it?", thread_ts=asked["ts"])  # no mention needed
        [_, follow_up] = await h.replies(ROOM, 2, thread_ts=asked["ts"])
        assert follow_up["text"].startswith("echo: and what was it?")
        second = [m.content for m in h.model.history[1].messages]
        assert any("heron" in c for c in second)  # the thread's first exchange is in the prompt: one session

        h.fake.push_mention(OWNER, ROOM, "/memory", thread_ts=asked["ts"])  # a command said in the thread
        [*_, memory] = await h.replies(ROOM, 3, thread_ts=asked["ts"])
        assert memory["text"].startswith("This conversation holds 4 messages")  # the thread's, not the channel's

        h.fake.push_channel_message(OWNER, ROOM, "chatter not for the app")
        h.fake.push_channel_message(OWNER, ROOM, "a thread the app is not in", thread_ts=reply["ts"][:-1] + "9")
        other = h.fake.push_mention(OWNER, ROOM, "a new question")  # a new thread: a new session
        await h.replies(ROOM, 4)
        assert len(h.model.history) == 3 and not any("heron" in m.content for m in h.model.history[2].messages)
        assert [m["thread_ts"] for m in h.fake.bot_messages(ROOM)] == [*[asked["ts"]] * 3, other["ts"]]

        h.channel.config.channels = ["C0ELSEWHERE"]  # mentions only there now
        h.fake.push_mention(OWNER, ROOM, "still there?")
        await h.settle()
        assert len(h.fake.bot_messages(ROOM)) == 4 and len(h.model.history) == 3

    run(config, scenario)


def test_the_slash_command_answers_only_whoever_typed_it(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        async def command(text: str, name: str = "/pico") -> dict[str, Any]:
            before = len(h.fake.responses)
            envelope = h.fake.push_command(OWNER, ROOM, text, command=name)
            assert await h.fake.acked(envelope) is None  # acknowledged at once, without a payload
            await h.fake.wait_for(lambda: len(h.fake.responses) > before, what=f"the answer to {name} {text}")
            await h.settle()
            return h.fake.responses[-1]

        status = await command("status")
        assert "Model scripted" in status["text"] and status["response_type"] == "ephemeral"
        assert "Model scripted" in (await command("", name="/status"))["text"]  # a command of its own name
        assert "/devices" in (await command(""))["text"]  # a bare /pico is /help
        devices = await command("devices")
        assert buttons(devices)["dev:toggle:fan"] == "fan: off"
        assert (await command("bogus"))["text"] == "Unknown command /bogus; /help lists them."
        assert (await command("cloud"))["text"] == "The next message is answered on the Pi: routing.mode is local_only."
        answer = await command("cloud what is up")  # with text: a turn, answered the same way
        assert answer["text"].startswith("echo: what is up") and "routing.mode is local_only" in answer["text"]
        assert not h.fake.bot_messages(ROOM)  # nothing was posted in the channel for everyone

        h.fake.push_dm(OWNER, "/status")  # typed in the DM, it is a command too
        [typed] = await h.replies(h.dm)
        assert "Model scripted" in typed["text"]

    run(config, scenario)


def test_buttons_on_a_slash_commands_answer_work_where_only_the_presser_sees_them(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.push_command(OWNER, ROOM, "devices")
        await h.fake.wait_for(lambda: h.fake.ephemeral, what="the ephemeral menu")
        await h.settle()
        [(ts, menu)] = h.fake.ephemeral.items()
        assert menu["user"] == OWNER and buttons(menu)["dev:toggle:fan"] == "fan: off"
        [action_id] = [e["action_id"] for b in menu["blocks"] if b["type"] == "actions" for e in b["elements"]
                       if e["value"] == "dev:toggle:fan"]  # fmt: skip
        h.fake.push_ephemeral_action(OWNER, ts, action_id)
        await h.settle()
        assert h.pin(27) is True and "fan is now on" in h.fake.ephemeral[ts]["text"]  # replaced where it was
        assert not h.fake.calls_of("chat.update") and not h.fake.bot_messages(ROOM)

        h.fake.fail_next("response_url", 1, "500")  # the answer cannot be shown there now
        h.fake.push_command(OWNER, ROOM, "status")
        await h.settle()
        await h.fake.wait_for(lambda: [s for _, s in rows(h)] == ["sent"], what="the stored answer")
        assert "Model scripted" in h.fake.sent_texts(h.dm)[0]  # in the person's DM, not for the whole channel
        assert not h.fake.bot_messages(ROOM)

    run(config, scenario)


def test_device_buttons_toggle_and_read_in_place(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.push_dm(OWNER, "/devices")
        [menu] = await h.replies(h.dm)
        assert buttons(menu) == {
            "dev:toggle:porch_light": "porch_light: off",
            "dev:toggle:fan": "fan: off",
            "dev:read:living_room": "living_room: read",
            "dev:read:soil": "soil: read",
            "dev:read:doorbell": "doorbell: read",
        }
        tap(h, OWNER, h.dm, menu, "dev:toggle:fan")
        await h.settle()
        [menu] = h.fake.bot_messages(h.dm)  # the same message, edited
        assert h.pin(27) is True and "fan is now on" in menu["text"] and buttons(menu)["dev:toggle:fan"] == "fan: on"
        tap(h, OWNER, h.dm, menu, "dev:read:living_room")
        await h.settle()
        assert "temperature" in h.fake.bot_messages(h.dm)[0]["text"] and len(h.fake.bot_messages(h.dm)) == 1

    run(config, scenario)


def test_an_approval_is_decided_once_even_when_slack_redelivers_the_tap(config: Config) -> None:
    config.devices["heater"] = DeviceConfig(driver="relay", pin=5, approval="required")

    async def scenario(h: Harness) -> None:
        devices = h.runtime.devices
        assert devices is not None
        switch_on = (await devices.set("heater", "on", requested_by="model")).pending
        switch_off = (await devices.set("heater", "off", requested_by="model")).pending
        assert switch_on is not None and switch_off is not None

        h.fake.push_dm(OWNER, "/approve")
        cards = await h.replies(h.dm, 2)
        by_action = {next(iter(buttons(c))).split(":")[2]: c for c in cards}
        card = by_action[switch_on.id]
        assert buttons(card) == {f"apr:approve:{switch_on.id}": "Approve", f"apr:deny:{switch_on.id}": "Deny"}
        styles = [e.get("style") for b in card["blocks"] if b["type"] == "actions" for e in b["elements"]]
        assert styles == ["primary", "danger"]

        pressed = tap(h, OWNER, h.dm, card, f"apr:approve:{switch_on.id}")
        await h.settle()
        again = await h.fake.redeliver(pressed)  # Slack did not get the ack in time: the same press again
        assert again["retry_attempt"] == 1
        await h.fake.acked(again)
        await h.settle()
        decided = devices.approvals.get(switch_on.id)
        assert decided.status == "approved" and decided.decided_by == f"slack:{OWNER}" and h.pin(5) is True
        assert devices.approvals.get(switch_off.id).status == "pending"  # only that action ran
        edits = [c for c in h.fake.calls_of("chat.update", ok_only=True) if c.params["ts"] == card["ts"]]
        assert len(edits) == 1 and h.fake.responses == []  # decided once, shown once, no second notice
        card = h.fake.messages[h.dm][card["ts"]]
        assert card["text"].startswith("Approved by") and not buttons(card)

        deny = by_action[switch_off.id]
        tap(h, STRANGER, h.dm, deny, f"apr:approve:{switch_off.id}")
        await h.settle()
        assert devices.approvals.get(switch_off.id).status == "pending"  # a stranger decides nothing

    run(config, scenario)


def test_a_streamed_reply_is_one_message_edited_with_chat_update(config: Config) -> None:
    model = SlowModel()
    # Two sentences: the reply guard shows a sentence once it is whole (appliance/agent/reply_guard.py)
    answer = "The Pi is a small computer. It runs me, your assistant, entirely at home."
    model.enqueue(answer)

    async def scenario(h: Harness) -> None:
        h.fake.push_dm(OWNER, "tell me about the Raspberry Pi")
        [reply] = await h.replies(h.dm)
        [posted] = h.fake.calls_of("chat.postMessage", ok_only=True)
        assert answer.startswith(posted.params["text"]) and posted.params["text"] != answer  # shown while growing
        updates = h.fake.calls_of("chat.update", ok_only=True)
        assert len(updates) >= 2 and {u.params["ts"] for u in updates} == {reply["ts"]}  # one message, edited
        body, _, footer = reply["text"].rpartition("\n\n")
        assert body == answer and footer.startswith("local · scripted · ")

    run(config, scenario, model)


def test_a_rate_limited_edit_waits_and_the_final_text_still_lands_in_the_same_message(config: Config) -> None:
    model = SlowModel()
    counted = "One. Two. Three. Four. Five. Six. Seven. Eight. Nine. Ten. Eleven. Twelve."
    model.enqueue(counted)  # sentences: shown as they are written

    async def scenario(h: Harness) -> None:
        h.fake.fail_next("chat.update", 2, "429", retry_after=1)
        h.fake.push_dm(OWNER, "count")
        await h.replies(h.dm)
        [reply] = h.fake.bot_messages(h.dm)
        assert reply["text"].startswith(counted + "\n\n")
        assert [c.outcome for c in h.fake.calls_of("chat.update")][:2] == ["429", "429"]
        assert len(h.fake.calls_of("chat.postMessage")) == 1 and rows(h) == []  # nothing left for the outbox

    run(config, scenario, model)


# --- delivery -----------------------------------------------------------------------------------------------


def test_a_proactive_message_waits_while_slack_is_down_and_arrives_when_it_is_back(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        notifier = Notifier(h.outbox, {"slack": h.channel}, lambda: ["slack"])
        port = h.fake.port
        await h.fake.close()  # the network is gone
        await h.fake.wait_for(lambda: not h.channel.up, what="the channel to notice")
        assert state_of(h.channel)["detail"] == "connecting"
        notifier.notify("The living room is over 28 °C.", "event")
        await h.fake.wait_for(lambda: h.outbox.next_due_in("slack") not in (None, 0.0), what="a failed attempt")
        assert rows(h) == [("The living room is over 28 °C.", "pending")]

        await h.fake.start(port)  # back
        await h.fake.wait_for(lambda: h.channel.up, timeout=10, what="the reconnection")
        h.clock.advance(60)
        h.channel.notify_wakeup()
        await h.fake.wait_for(lambda: rows(h) == [("The living room is over 28 °C.", "sent")], what="the delivery")
        assert h.fake.sent_texts(h.dm) == ["The living room is over 28 °C."]  # to the owner's DM
        [opened] = h.fake.calls_of("conversations.open", ok_only=True)
        assert opened.params["users"] == OWNER

    run(config, scenario)


def test_a_restart_mid_delivery_loses_nothing_and_sends_nothing_twice(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        texts = ["Doorbell: pressed", "Backup finished", "The living room is over 28 °C."]
        gate = h.fake.hold("chat.postMessage")  # Slack is slow to accept the first one
        for text in texts:
            h.outbox.enqueue("slack", OWNER, text, "event")
        h.channel.notify_wakeup()
        await h.fake.wait_for(lambda: h.fake.held.get("chat.postMessage") == 1, what="a send in flight")
        stopping = asyncio.ensure_future(h.channel.stop())  # the daemon stops meanwhile
        await h.fake.wait_for(lambda: h.channel.delivery._stopping, what="the stop to begin")
        gate.set()  # Slack accepts it: the pass in flight marks it sent before the channel is gone
        await stopping
        h.outbox.enqueue("slack", OWNER, "while stopped", "event")
        h.clock.advance(60)
        h.channel = h.new_channel()
        await h.channel.start()  # nothing else: its own loop delivers what is left
        everything = [*texts, "while stopped"]
        await h.fake.wait_for(lambda: rows(h) == [(t, "sent") for t in everything], what="the pending messages")
        assert h.fake.sent_texts(h.dm) == everything  # each once, in order
        assert len(h.fake.calls_of("chat.postMessage")) == 4

    run(config, scenario)


def test_rate_limits_pause_delivery_and_undeliverable_messages_give_up(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.fail_next("chat.postMessage", 1, "429", retry_after=30)
        h.outbox.enqueue("slack", OWNER, "first", "event")
        await h.channel.delivery.deliver_due()
        h.clock.advance(29)
        await h.channel.delivery.deliver_due()
        assert len(h.fake.calls_of("chat.postMessage")) == 1  # not before Retry-After
        h.clock.advance(1.5)
        await h.channel.delivery.deliver_due()
        assert h.fake.sent_texts(h.dm) == ["first"]

        h.fake.fail_next("chat.postMessage", 1, "500")
        h.outbox.enqueue("slack", OWNER, "second", "event")
        h.outbox.enqueue("slack", "C0GONE", "to a channel that is gone", "event")
        h.outbox.enqueue("slack", OWNER, "x" * 7000, "event")  # three messages under a section's limit
        for _ in range(3):
            await h.channel.delivery.deliver_due()
            h.clock.advance(10)
        first, second, *long = h.fake.sent_texts(h.dm)
        assert (first, second) == ("first", "second")
        assert len(long) == 3 and all(len(p) <= 3000 for p in long) and "".join(long) == "x" * 7000
        assert rows(h) == [
            ("first", "sent"),
            ("second", "sent"),
            ("to a channel that is gone", "failed"),
            ("x" * 7000, "sent"),
        ]

    run(config, scenario)


def test_a_reply_that_cannot_be_shown_goes_to_the_outbox_and_into_its_thread(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.channel.config.edit_interval_s = 60.0  # one chat.postMessage: the final one
        h.fake.fail_next("chat.postMessage", 1, "network")
        asked = h.fake.push_mention(OWNER, ROOM, "are you there?")
        await h.settle()
        await h.fake.wait_for(lambda: [s for _, s in rows(h)] == ["sent"], what="the stored reply to be delivered")
        [reply] = h.fake.bot_messages(ROOM)
        assert reply["text"].startswith("echo: are you there?") and reply["thread_ts"] == asked["ts"]

    run(config, scenario)


# --- the connection ----------------------------------------------------------------------------------------


def test_socket_mode_reconnects_when_slack_says_disconnect_and_nothing_is_lost(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        gate = h.fake.hold("chat.postMessage")  # the first answer is slow...
        h.fake.push_dm(OWNER, "before")
        await h.fake.wait_for(lambda: h.fake.held.get("chat.postMessage") == 1, what="the answer in flight")
        await h.fake.disconnect("refresh_requested")  # ...while Slack moves the app to a new connection
        await h.fake.wait_for(lambda: h.fake.connects == 2 and h.channel.up, what="the new connection")
        h.fake.push_dm(OWNER, "after")
        gate.set()
        await h.replies(h.dm, 2)
        assert sorted(t.split("\n")[0] for t in h.fake.sent_texts(h.dm)) == ["echo: after", "echo: before"]
        assert len(h.model.history) == 2  # each once

    run(config, scenario)


def test_a_refused_token_leaves_slack_off_and_the_daemon_running(config: Config) -> None:
    async def main() -> None:
        from appliance.daemon import Daemon

        async with FakeSlack(BOT_TOKEN, APP_TOKEN) as fake:
            slack_config(config, fake)
            config.slack.bot_token = "xoxb-revoked"
            config.llm.preload = False
            config.scheduler.heartbeat_minutes = 0
            daemon = Daemon(config, host="127.0.0.1", port=0)
            served = asyncio.ensure_future(daemon.run())
            await started(daemon, served)
            assert daemon.channels is not None
            [state] = [s for s in daemon.channels.states() if s["name"] == "slack"]
            assert state == {
                "name": "slack",
                "enabled": True,
                "up": False,
                "detail": "Slack refused slack.bot_token (invalid_auth)",
            }
            url = f"http://127.0.0.1:{daemon.web.port}/healthz"  # type: ignore[union-attr]
            status = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).status)
            assert status == 200 and not fake.calls_of("apps.connections.open")
            daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())


def test_a_wrong_app_token_or_no_network_is_reported_and_stops_quickly(config: Config) -> None:
    async def main() -> None:
        async with FakeSlack(BOT_TOKEN, APP_TOKEN) as fake:
            slack_config(config, fake)
            runtime = Runtime.open(config, model=ScriptedModel())
            try:
                config.slack.app_token = BOT_TOKEN  # the bot token where the app-level token belongs
                channel = SlackChannel(config.slack, runtime, Outbox(runtime.db))
                await channel.start()
                assert channel.problem == "Slack refused slack.app_token (not_allowed_token_type)"
                await channel.stop()

                config.slack.app_token, config.slack.api_base_url = APP_TOKEN, "http://127.0.0.1:9/api/"  # no one
                channel = SlackChannel(config.slack, runtime, Outbox(runtime.db))
                await channel.start()
                assert channel.problem is not None and channel.problem.startswith("cannot reach Slack at ")
                await asyncio.wait_for(channel.stop(), 2)  # the retry in the background is cancelled
            finally:
                runtime.close()

    asyncio.run(main())


def test_without_slack_neither_the_daemon_nor_chat_loads_its_libraries() -> None:
    code = (
        "import sys, appliance.daemon, appliance.channels.registry, appliance.channels.slack, appliance.cli;"
        "print(sorted(m for m in sys.modules if m.startswith(('slack_bolt', 'slack_sdk'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- Slack's text ---------------------------------------------------------------------------------------------


def test_slack_text_is_read_plain_and_written_escaped_within_limits() -> None:
    said = f"<@{BOT_USER_ID}> ping <@U1|ann> in <#C1|general>, <!here> &lt;b&gt; <mailto:a@b.c|a@b.c>"
    assert from_slack(said, BOT_USER_ID) == "ping @ann in #general, @here <b> a@b.c"
    assert escape("<!channel> & co") == "&lt;!channel&gt; &amp; co"  # a model cannot ping everyone
    pieces = split_message(escape("a&b " * 1000))
    assert all(len(p) <= 3000 for p in pieces) and "".join(pieces).count("&amp;") == 1000
    hard = split_message("&amp;" * 700)  # no space to cut at: never inside an entity
    assert all(p.endswith(";") for p in hard) and "".join(hard) == "&amp;" * 700
    known = {"status", "devices"}
    assert slash_command("/pico", "devices now", known) == ("devices", ["now"])
    assert slash_command("/status", "", known) == ("status", [])
    assert slash_command("/pico", "", known) == ("help", [])
