"""The Discord channel: the real discord.py against a fake of Discord's REST API and gateway on 127.0.0.1.

The runtime is the real one (devices on the simulated backend) with a scripted instant model, so these
tests check the channel (access, mentions, streaming, slash commands, buttons, approvals, pairing,
delivery, a refused token or no network), not answers. discord.py connects to the fake's gateway with
zlib-stream compression, exactly as it connects to Discord's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import discord
import pytest

from appliance.channels import base, pairing
from appliance.channels.commands import CommandCall, Said
from appliance.channels.discord import slash
from appliance.channels.discord.channel import NO_INTENT, REFUSED, DiscordChannel
from appliance.channels.discord.text import MESSAGE_LIMIT, split_message
from appliance.config import Config, DeviceConfig
from appliance.llm.scripted import ScriptedModel
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests.agents import SlowModel
from tests.channel_harness import ChannelHarness, Clock, opened
from tests.channel_harness import run as run_on
from tests.fakes.discord_api import INTENT_MESSAGE_CONTENT, FakeDiscord
from tests.helpers import eventually, started, wait_healthy

TOKEN = "TEST.BOT.TOKEN"
OWNER = 111111111111111111  # in discord.allow_from
STRANGER = 666666666666666666
GUILD = 500000000000000000
LISTENED = 510000000000000001  # in discord.channels
ELSEWHERE = 510000000000000002  # a channel of the same server the bot does not listen in
MESSAGES = "POST /channels/{channel_id}/messages"
EDITS = "PATCH /channels/{channel_id}/messages/{message_id}"
CALLBACK = "POST /interactions/{interaction_id}/{interaction_token}/callback"


@dataclass(kw_only=True)
class Harness(ChannelHarness):
    fake: FakeDiscord
    channel: DiscordChannel

    def dm(self, user: int = OWNER) -> str:
        """The DM channel's id between the bot and a user."""
        return str(self.fake.dm_channel(user)["id"])

    async def settle(self) -> None:
        await eventually(lambda: not self.channel.turns_in_flight, 5, "the answers to finish")

    async def replies(self, channel_id: int | str, count: int = 1) -> list[dict[str, Any]]:
        """Wait for ``count`` bot messages in a channel, and for the answers to finish."""
        await eventually(lambda: len(self.fake.bot_messages(channel_id)) >= count, 5, f"a reply in {channel_id}")
        await self.settle()
        return self.fake.bot_messages(channel_id)

    async def answered(self, interaction: dict[str, Any]) -> dict[str, Any]:
        """The message an interaction was answered with (after a deferral: once it was edited)."""
        token = interaction["token"]
        await eventually(lambda: token in self.fake.originals, 5, "the interaction's answer")
        message = self.fake.originals[token]
        await eventually(lambda: not message["flags"] & 128, 5, "a deferred answer")  # 128: "thinking…"
        return message

    def new_channel(self) -> DiscordChannel:
        return DiscordChannel(self.runtime.config.discord, self.runtime, self.outbox, clock=self.clock)


@contextlib.asynccontextmanager
async def discord_bot(config: Config, model: ScriptedModel | None = None, **fake: Any) -> AsyncIterator[Harness]:
    """The fake Discord, the runtime and a started channel pointed at it."""
    async with FakeDiscord(TOKEN, **fake) as api:
        api.add_guild(GUILD, [LISTENED, ELSEWHERE])
        dc = config.discord
        dc.enabled, dc.token, dc.api_base_url = True, TOKEN, api.api_base
        dc.allow_from, dc.channels, dc.edit_interval_s = [str(OWNER)], [str(LISTENED)], 0.2

        def make(runtime: Runtime, outbox: Outbox, clock: Clock, model: ScriptedModel) -> Harness:
            channel = DiscordChannel(dc, runtime, outbox, clock=clock)
            return Harness(fake=api, runtime=runtime, channel=channel, outbox=outbox, model=model, clock=clock)

        async with opened(config, model, make) as harness:
            yield harness


def run(config: Config, scenario: Callable[[Harness], Awaitable[None]], model: ScriptedModel | None = None) -> None:
    run_on(discord_bot(config, model), scenario)


def buttons(message: dict[str, Any]) -> dict[str, str]:
    """A message's components as custom id -> label."""
    return {b["custom_id"]: b["label"] for row in message.get("components", []) for b in row["components"]}


# --- who may talk, and the replies --------------------------------------------------------------------


def test_an_owners_direct_message_is_answered_with_the_footer(
    config: Config, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)  # discord.py's own debug lines too: none may hold the token
    monkeypatch.setattr(discord.VoiceClient, "warn_nacl", True)  # as in a fresh process: the first client warns
    monkeypatch.setattr(discord.VoiceClient, "warn_dave", True)

    async def scenario(h: Harness) -> None:
        assert h.channel.up and h.channel.detail == "as @pico"
        [identify] = h.fake.gateway_ops(2)
        assert identify["d"]["intents"] & INTENT_MESSAGE_CONTENT  # and the gateway spoke zlib-stream
        h.fake.push_message(OWNER, "turn on the porch light")
        [reply] = await h.replies(h.dm())
        assert h.pin(17) is True
        assert "the porch light is on" in reply["content"] and "intent" in reply["content"]  # footer: the route
        [sent] = h.fake.calls_of(MESSAGES)
        assert not h.fake.calls_of(EDITS) and sent.body["allowed_mentions"]["parse"] == []  # it pings no one
        assert h.model.history == []  # the fast path: no model call

    run(config, scenario)
    assert any(r.name.startswith("discord.") for r in caplog.records)
    assert not [r for r in caplog.records if TOKEN in r.getMessage()]
    assert not [r for r in caplog.records if "voice will NOT be supported" in r.getMessage()]  # no voice here


def test_a_reply_streams_into_one_edited_message(config: Config) -> None:
    model = SlowModel()
    # Two sentences: the reply guard shows a sentence once it is whole (appliance/agent/reply_guard.py)
    answer = "The Pi is a small computer. It runs me, your assistant, entirely at home."
    model.enqueue(answer)

    async def scenario(h: Harness) -> None:
        h.fake.push_message(OWNER, "tell me about the Raspberry Pi")
        [reply] = await h.replies(h.dm())
        [sent] = h.fake.calls_of(MESSAGES)
        assert answer.startswith(sent.body["content"]) and sent.body["content"] != answer  # shown while growing
        edits = h.fake.calls_of(EDITS)
        assert len(edits) >= 2 and {c.path["message_id"] for c in edits} == {reply["id"]}  # one message, edited
        body, _, footer = reply["content"].rpartition("\n\n")
        assert body == answer and footer.startswith("local · scripted · ")
        assert h.fake.calls_of("POST /channels/{channel_id}/typing")
        assert len(model.history) == 1

    run(config, scenario, model)


def test_a_stranger_gets_nothing_and_costs_nothing(config: Config, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(h: Harness) -> None:
        caplog.set_level(logging.WARNING, logger="appliance.channels")
        h.fake.push_message(STRANGER, "turn on the porch light")
        h.fake.push_message(STRANGER, "tell me a secret")
        slash = h.fake.push_slash(STRANGER, "status")
        await eventually(lambda: any(str(STRANGER) in r.getMessage() for r in caplog.records), 5, "the log line")
        h.fake.push_message(OWNER, "hello")
        await h.replies(h.dm())
        assert h.pin(17) is False and len(h.model.history) == 1  # the owner's message only
        assert not h.fake.bot_messages(h.dm(STRANGER)) and slash["id"] not in h.fake.callbacks
        assert not h.fake.calls_of("POST /users/@me/channels")  # not even a DM was opened to them
        ignored = [r for r in caplog.records if str(STRANGER) in r.getMessage()]
        assert len(ignored) == 1  # one log line per stranger per minute, not one per message

    run(config, scenario)


def test_mentions_are_answered_only_in_the_listed_channels(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.push_message(OWNER, "tell me a joke", channel_id=ELSEWHERE, mention=True)  # not listed
        h.fake.push_message(OWNER, "what a nice day", channel_id=LISTENED)  # not addressed
        asked = h.fake.push_message(OWNER, "tell me a story", channel_id=LISTENED, mention=True)
        [reply] = await h.replies(LISTENED)
        assert [r.messages[-1].content for r in h.model.history] == ["tell me a story"]  # mention stripped
        assert reply["message_reference"]["message_id"] == asked["id"]  # shown as a reply to it
        assert reply["content"].startswith("echo: tell me a story")
        assert not h.fake.bot_messages(ELSEWHERE)

        h.fake.push_message(STRANGER, "open the door", channel_id=LISTENED, mention=True)
        h.fake.push_message(OWNER, "and another one?", channel_id=LISTENED, reply_to=reply["id"])  # a reply to it
        await h.replies(LISTENED, 2)
        assert len(h.model.history) == 2 and h.model.history[-1].messages[-1].content == "and another one?"

    run(config, scenario)


def test_long_replies_are_split_under_2000_characters(config: Config) -> None:
    # 1499 characters each, all words different (the same words again would be a loop the reply guard cuts)
    long_reply = "\n\n".join(" ".join(f"w{p}{i:03d}" for i in range(250)) for p in range(3))
    model = ScriptedModel()
    model.enqueue(long_reply)

    async def scenario(h: Harness) -> None:
        h.fake.push_message(OWNER, "write a lot")
        messages = await h.replies(h.dm(), 3)
        assert len(messages) == 3 and all(len(m["content"]) <= MESSAGE_LIMIT for m in messages)
        joined = "\n\n".join(m["content"] for m in messages)
        assert joined.startswith(long_reply) and len(joined.split()) >= 750
        assert split_message("😀" * 1500) == ["😀" * 1000, "😀" * 500]  # counted as UTF-16, the safe side

    run(config, scenario, model)


# --- slash commands and buttons -------------------------------------------------------------------------


def test_slash_commands_are_registered_and_answered_through_the_interaction(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        registered = {c["name"]: c for c in h.fake.commands}
        assert set(registered) >= {"status", "devices", "approve", "cloud", "local", "private", "reset", "memory"}
        assert [o["name"] for o in registered["cloud"]["options"]] == ["text"]
        assert [c["value"] for c in registered["private"]["options"][0]["choices"]] == ["on", "off"]

        status = h.fake.push_slash(OWNER, "status")
        answer = await h.answered(status)
        [callback] = h.fake.callbacks[status["id"]]
        assert callback["type"] == 4 and "Model scripted" in callback["data"]["content"]  # answered at once
        assert answer["content"] == callback["data"]["content"]

        private = await h.answered(h.fake.push_slash(OWNER, "private", {"mode": "on"}))
        assert "stays on the Pi" in private["content"]
        assert await h.runtime.db.call(h.runtime.db.is_private, "discord", str(OWNER))

        asked = h.fake.push_slash(OWNER, "cloud", {"text": "what is up"})
        assert (await h.answered(asked))["content"] == "/cloud: what is up"
        replies = await h.replies(h.dm(), 3)  # status, private, the question's echo; then the answer
        assert any("echo: what is up" in m["content"] and "local_only" in m["content"] for m in replies)

        elsewhere = h.fake.push_slash(OWNER, "status", channel_id=ELSEWHERE)
        assert "only in direct messages" in (await h.answered(elsewhere))["content"]
        assert h.fake.callbacks[elsewhere["id"]][0]["data"]["flags"] == 64  # only they see it

    run(config, scenario)


def test_a_slow_command_is_deferred_and_its_answer_edited_in(config: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slash, "ACK_WITHIN_S", 0.05)

    async def scenario(h: Harness) -> None:
        quick = h.channel.commands.status

        async def slow_status(call: CommandCall) -> list[Said]:
            await asyncio.sleep(0.3)  # longer than the acknowledgement may wait
            return await quick(call)

        h.channel.commands.status = slow_status  # type: ignore[method-assign]
        status = h.fake.push_slash(OWNER, "status")
        answer = await h.answered(status)
        assert [c["type"] for c in h.fake.callbacks[status["id"]]] == [5]  # "thinking…" first
        assert "Model scripted" in answer["content"]  # then the answer, edited into that message
        assert len(h.fake.calls_of("PATCH /webhooks/{application_id}/{interaction_token}/messages/@original")) == 1

    run(config, scenario)


def test_a_question_by_meaning_gets_buttons_and_a_press_answers_it(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.push_message(OWNER, "it's dark on the porch")
        [question] = await h.replies(h.dm())
        assert question["content"].startswith("Turn the porch light on? (yes or no)")
        assert buttons(question) == {"say:yes": "yes", "say:no": "no"} and h.pin(17) is False

        press = h.fake.push_button(OWNER, h.dm(), question["id"], "say:yes")
        done = (await h.replies(h.dm(), 2))[1]
        assert h.pin(17) is True and done["content"].startswith("Done: the porch light is on")
        assert h.fake.callbacks[press["id"]][0]["type"] == 7
        assert question["content"].endswith("→ yes") and not question["components"]  # the buttons are gone

    run(config, scenario)


def test_a_device_button_toggles_once_even_when_discord_delivers_it_twice(
    config: Config, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(h: Harness) -> None:
        caplog.set_level(logging.INFO, logger="appliance.channels")
        menu = await h.answered(h.fake.push_slash(OWNER, "devices"))
        assert buttons(menu)["dev:toggle:fan"] == "fan: off" and "dev:read:living_room" in buttons(menu)

        stranger = h.fake.push_button(STRANGER, menu["channel_id"], menu["id"], "dev:toggle:fan")
        await eventually(lambda: stranger["id"] in h.fake.callbacks, 5, "the stranger's answer")
        assert h.pin(27) is False and h.fake.callbacks[stranger["id"]][0]["data"]["content"] == "not allowed"

        press = h.fake.push_button(OWNER, menu["channel_id"], menu["id"], "dev:toggle:fan")
        await eventually(lambda: press["id"] in h.fake.callbacks, 5, "the press's answer")
        assert h.pin(27) is True
        assert h.fake.callbacks[press["id"]][0]["type"] == 7  # the menu itself is updated
        assert "fan is now on" in menu["content"] and buttons(menu)["dev:toggle:fan"] == "fan: on"

        h.fake.dispatch("INTERACTION_CREATE", press)  # the same press again (a resumed gateway replays it)
        await eventually(lambda: any("arrived again" in r.getMessage() for r in caplog.records), 5, "the replay")
        assert h.pin(27) is True  # toggled once, not back off
        assert len([c for c in h.fake.calls_of(CALLBACK) if c.path["interaction_id"] == press["id"]]) == 1

    run(config, scenario)


def test_an_approval_runs_exactly_the_stored_action_once(config: Config) -> None:
    config.devices["heater"] = DeviceConfig(driver="relay", pin=5, approval="required")

    async def scenario(h: Harness) -> None:
        devices = h.runtime.devices
        assert devices is not None
        switch_on = (await devices.set("heater", "on", requested_by="model")).pending
        switch_off = (await devices.set("heater", "off", requested_by="model")).pending
        assert switch_on is not None and switch_off is not None and h.pin(5) is False

        approve = h.fake.push_slash(OWNER, "approve")
        first = await h.answered(approve)
        await eventually(lambda: len(h.fake.bot_messages(h.dm())) == 2, 5, "the second card, as a follow-up")
        cards = {next(iter(buttons(c))).split(":")[2]: c for c in h.fake.bot_messages(h.dm())}
        assert set(cards) == {switch_on.id, switch_off.id} and first in cards.values()
        card = cards[switch_on.id]
        assert buttons(card) == {f"apr:approve:{switch_on.id}": "Approve", f"apr:deny:{switch_on.id}": "Deny"}

        press = h.fake.push_button(OWNER, h.dm(), card["id"], f"apr:approve:{switch_on.id}")
        await eventually(lambda: press["id"] in h.fake.callbacks, 5, "the approval's answer")
        assert h.pin(5) is True
        decided = devices.approvals.get(switch_on.id)
        assert decided.status == "approved" and decided.decided_by == f"discord:{OWNER}"
        assert devices.approvals.get(switch_off.id).status == "pending"  # only that action ran
        assert card["content"].startswith("Approved by") and not card["components"]

        h.fake.dispatch("INTERACTION_CREATE", press)  # delivered twice
        again = h.fake.push_button(OWNER, h.dm(), card["id"], f"apr:approve:{switch_on.id}")  # pressed twice
        await eventually(lambda: again["id"] in h.fake.callbacks, 5, "the second press's answer")
        assert "already approved" in h.fake.callbacks[again["id"]][0]["data"]["content"]
        assert len(devices.approvals.pending()) == 1

        deny = cards[switch_off.id]
        stranger = h.fake.push_button(STRANGER, h.dm(), deny["id"], f"apr:approve:{switch_off.id}")
        await eventually(lambda: stranger["id"] in h.fake.callbacks, 5, "the stranger's answer")
        assert devices.approvals.get(switch_off.id).status == "pending"  # a stranger decides nothing
        press = h.fake.push_button(OWNER, h.dm(), deny["id"], f"apr:deny:{switch_off.id}")
        await eventually(lambda: press["id"] in h.fake.callbacks, 5, "the denial's answer")
        assert devices.approvals.get(switch_off.id).status == "denied" and h.pin(5) is True

    run(config, scenario)


def test_pairing_by_a_code_in_a_direct_message(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        code = pairing.create_code(h.runtime.db, "discord", clock=h.clock)
        h.fake.push_message(222222222222222222, code)
        [paired] = await h.replies(h.dm(222222222222222222))
        assert paired["content"] == "Paired: you can talk to me now."
        h.fake.push_message(222222222222222222, "hello")
        await h.replies(h.dm(222222222222222222), 2)
        assert h.model.history[-1].messages[-1].content == "hello"

    run(config, scenario)


# --- proactive delivery -------------------------------------------------------------------------------------


def rows(h: Harness) -> list[tuple[str, str]]:
    return h.runtime.db.rows("SELECT text, status FROM outbox ORDER BY id")


def test_a_proactive_message_waits_while_discord_is_down_and_arrives_when_it_is_back(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        await h.fake.go_offline()
        await eventually(lambda: not h.channel.up, 5, "the channel to notice")
        assert h.channel.problem is not None and "reconnecting" in h.channel.problem
        h.outbox.enqueue("discord", str(OWNER), "Doorbell: pressed", "event")
        h.channel.notify_wakeup()
        await eventually(lambda: h.runtime.db.value("SELECT attempts FROM outbox") == 1, 5, "a failed attempt")
        h.fake.push_message(OWNER, "are you back?")  # sent while the bot is away: Discord keeps it

        await h.fake.go_online()
        await eventually(lambda: h.channel.up, 15, "the gateway to resume")
        assert h.fake.gateway_ops(6), "the session was resumed, not identified anew"
        h.clock.advance(10)  # past the retry's backoff
        h.channel.notify_wakeup()
        await eventually(lambda: rows(h) == [("Doorbell: pressed", "sent")], 5, "the delivery")
        texts = await h.replies(h.dm(), 2)
        assert texts[0]["content"] == "Doorbell: pressed" and texts[1]["content"].startswith("echo: are you back?")

    run(config, scenario)


def test_a_reply_that_cannot_be_shown_goes_to_the_outbox(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.channel.config.edit_interval_s = 60.0  # one message, the final one: no partial reply to retry it
        h.fake.fail_next(MESSAGES, 1, kind="network")
        h.fake.push_message(OWNER, "are you there?", channel_id=LISTENED, mention=True)
        await eventually(lambda: rows(h), 5, "the reply in the outbox")
        await h.settle()
        h.clock.advance(3)
        await h.channel.delivery.deliver_due()
        [(text, status)] = rows(h)
        assert text.startswith("echo: are you there?\n\nlocal · scripted · ") and status == "sent"
        assert [m["content"] for m in h.fake.bot_messages(LISTENED)] == [text]  # in the channel it was asked in

    run(config, scenario)


def test_rate_limits_are_waited_out_or_pause_the_delivery(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.dm_channel(OWNER)
        h.fake.fail_next(MESSAGES, 1, kind="429", retry_after=0.2)  # short: discord.py waits it out itself
        h.outbox.enqueue("discord", str(OWNER), "first", "event")
        await h.channel.delivery.deliver_due()
        await eventually(lambda: h.fake.sent_texts(h.dm()) == ["first"], 5, "the first message")
        assert [c.outcome for c in h.fake.calls_of(MESSAGES)] == ["429", "ok"]

        h.fake.fail_next(MESSAGES, 1, kind="429", retry_after=120)  # long: the delivery pauses
        h.outbox.enqueue("discord", str(OWNER), "second", "event")
        await h.channel.delivery.deliver_due()
        assert h.channel.delivery.paused_until == h.clock.now + 120
        h.clock.advance(119)
        await h.channel.delivery.deliver_due()
        assert len(h.fake.calls_of(MESSAGES)) == 3 and rows(h)[-1] == ("second", "pending")  # not before
        h.clock.advance(2)
        await h.channel.delivery.deliver_due()
        assert h.fake.sent_texts(h.dm()) == ["first", "second"]

        h.fake.blocked.add(str(OWNER))  # the owner no longer accepts DMs from the bot: given up, not retried
        h.outbox.enqueue("discord", str(OWNER), "third", "event")
        await h.channel.delivery.deliver_due()
        assert rows(h)[-1] == ("third", "failed") and h.fake.calls_of(MESSAGES)[-1].outcome == "403"

    run(config, scenario)


# --- a refused token, no network, no intent ----------------------------------------------------------------


def test_a_refused_token_leaves_discord_off_and_the_daemon_running(config: Config) -> None:
    from appliance.daemon import Daemon

    config.llm.preload = False

    async def main() -> None:
        async with FakeDiscord(TOKEN) as api:
            dc = config.discord
            dc.enabled, dc.token, dc.api_base_url, dc.allow_from = True, "WRONG.TOKEN", api.api_base, [str(OWNER)]
            daemon = Daemon(config, host="127.0.0.1", port=0)
            served = asyncio.ensure_future(daemon.run())
            await started(daemon, served)
            assert daemon.channels is not None
            channel = daemon.channels.get("discord")
            assert channel is not None and channel.problem == REFUSED and not channel.up
            [state] = [s for s in daemon.channels.states() if s["name"] == "discord"]
            assert state == {"name": "discord", "enabled": True, "up": False, "detail": REFUSED}
            assert daemon.web is not None
            await asyncio.to_thread(wait_healthy, daemon.web.port)  # the rest runs
            assert [c.outcome for c in api.calls] == ["401"] and not api.gateway_ops(2)  # and it stays off
            daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())


def test_no_network_leaves_it_off_until_discord_can_be_reached(config: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "CONNECT_RETRY_S", (0.05,))

    async def main() -> None:
        async with FakeDiscord(TOKEN) as api:
            await api.go_offline()
            dc = config.discord
            dc.enabled, dc.token, dc.api_base_url, dc.allow_from = True, TOKEN, api.api_base, [str(OWNER)]
            runtime = Runtime.open(config, model=ScriptedModel())
            try:
                channel = DiscordChannel(dc, runtime, Outbox(runtime.db))
                await channel.start()
                assert channel.problem is not None and channel.problem.startswith("cannot reach Discord")
                await api.go_online()
                await eventually(lambda: channel.up, 5, "the retry in the background")
                api.push_message(OWNER, "hello")
                await eventually(lambda: api.bot_messages(api.dm_channel(OWNER)["id"]), 5, "an answer")
                await channel.stop()
            finally:
                runtime.close()

    asyncio.run(main())


def test_without_the_message_content_intent_it_says_what_to_enable(config: Config) -> None:
    async def main() -> None:
        async with FakeDiscord(TOKEN, allowed_intents=0) as api:
            dc = config.discord
            dc.enabled, dc.token, dc.api_base_url = True, TOKEN, api.api_base
            runtime = Runtime.open(config, model=ScriptedModel())
            try:
                channel = DiscordChannel(dc, runtime, Outbox(runtime.db))
                await channel.start()
                assert channel.problem == NO_INTENT and not channel.up
                await channel.stop()
            finally:
                runtime.close()

    asyncio.run(main())


def test_an_id_that_is_not_a_discord_id_is_named(config: Config) -> None:
    async def main() -> None:
        dc = config.discord
        dc.enabled, dc.token, dc.allow_from = True, TOKEN, [str(OWNER), "@bob"]  # a name, not an id
        runtime = Runtime.open(config, model=ScriptedModel())
        try:
            channel = DiscordChannel(dc, runtime, Outbox(runtime.db))
            await channel.start()
            assert channel.problem is not None and channel.problem.startswith("discord.allow_from[1]: '@bob'")
            await channel.stop()
        finally:
            runtime.close()

    asyncio.run(main())


def test_the_daemon_without_discord_never_imports_discord_py() -> None:
    code = (
        "import sys\n"
        "from appliance.config import CHECKOUT_CONFIG, load_config\n"
        "from appliance.channels.registry import enabled_names\n"
        "import appliance.daemon, appliance.channels.discord\n"
        "assert enabled_names(load_config(CHECKOUT_CONFIG)) == [], enabled_names(load_config(CHECKOUT_CONFIG))\n"
        "print(sorted(m for m in sys.modules if m == 'discord' or m.startswith('discord.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout
