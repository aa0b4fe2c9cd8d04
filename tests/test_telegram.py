"""The Telegram channel: the real python-telegram-bot against a fake Bot API server on 127.0.0.1.

The runtime is the real one (devices on the simulated backend) with a scripted instant model, so
these tests check the channel (access, streaming, buttons, approvals, pairing, delivery), not answers.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import logging
from pathlib import Path

import pytest

from appliance.channels.pairing import create_code, is_paired
from appliance.channels.telegram.channel import TelegramChannel
from appliance.channels.telegram.text import MESSAGE_LIMIT, split_message
from appliance.cli.common import load
from appliance.config import CHECKOUT_CONFIG, Config, DeviceConfig
from appliance.llm.scripted import ScriptedModel
from appliance.notify import Notifier
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests.agents import SlowModel
from tests.fakes.telegram_api import FakeTelegram, utf16_len
from tests.telegram_harness import (
    GROUP,
    OWNER,
    STRANGER,
    TOKEN,
    Harness,
    buttons,
    run,
)

# --- who may talk, and the replies --------------------------------------------------------------------


def test_an_allowed_user_switches_a_device_on_the_fast_path(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        assert {c["command"] for c in h.fake.commands} >= {"help", "status", "devices", "approve", "reset"}
        assert h.fake.calls_of("deleteWebhook", ok_only=True) and not h.fake.calls_of("setWebhook")  # polling
        h.fake.push_message(OWNER, OWNER, "turn on the porch light")
        [reply] = await h.reply_to(OWNER)
        assert h.pin(17) is True
        assert "the porch light is on" in reply["text"] and "intent" in reply["text"]  # the footer names the route
        assert len(h.fake.calls_of("sendMessage")) == 1 and not h.fake.calls_of("editMessageText")
        assert h.model.history == []  # no model call

    run(config, scenario)


def test_an_ordinary_message_streams_the_models_reply(config: Config) -> None:
    model = SlowModel()
    # Two sentences: the reply guard shows a sentence once it is whole (appliance/agent/reply_guard.py)
    answer = "The Pi is a small computer. It runs me, your assistant, entirely at home."
    model.enqueue(answer)

    async def scenario(h: Harness) -> None:
        h.fake.push_message(OWNER, OWNER, "tell me about the Raspberry Pi")
        [reply] = await h.reply_to(OWNER)
        methods = [c.method for c in h.fake.calls if c.method in ("sendMessage", "editMessageText")]
        assert methods[0] == "sendMessage" and methods.count("sendMessage") == 1
        assert methods.count("editMessageText") >= 2  # at least one while streaming, and the final one
        first = h.fake.calls_of("sendMessage")[0].params["text"]
        assert answer.startswith(first) and first != answer  # sent while the reply was still growing
        body, _, footer = reply["text"].rpartition("\n\n")
        assert body == answer and footer.startswith("local · scripted · ")
        edits = [c.at for c in h.fake.calls_of("editMessageText")]
        assert all(b - a >= 0.15 for a, b in itertools.pairwise(edits))  # edit_interval_s is 0.2
        assert any(c.params["action"] == "typing" for c in h.fake.calls_of("sendChatAction"))
        assert len(model.history) == 1

    run(config, scenario, model)


def test_group_messages_are_answered_only_when_the_bot_is_addressed(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.push_message(OWNER, GROUP, "what a nice day", chat_type="group")
        asked = h.fake.push_message(OWNER, GROUP, "@pico_test_bot tell me a joke", chat_type="group")
        [reply] = await h.reply_to(GROUP)
        assert [r.messages[-1].content for r in h.model.history] == ["tell me a joke"]  # mention stripped
        assert reply["reply_to_message"]["message_id"] == asked["message_id"]
        h.fake.push_message(OWNER, GROUP, "and another one?", chat_type="group", reply_to=reply["message_id"])
        await h.reply_to(GROUP, 2)
        assert h.model.history[-1].messages[-1].content == "and another one?"
        h.fake.push_message(STRANGER, GROUP, "@pico_test_bot open the door", chat_type="group")
        await h.settle()
        assert len(h.model.history) == 2

    run(config, scenario)


def test_long_replies_are_split_under_the_limit(config: Config) -> None:
    # 1499 characters each, all words different (the same words again would be a loop the reply guard cuts)
    paragraphs = [" ".join(f"w{p}{i:03d}" for i in range(250)) for p in range(6)]
    long_reply = "\n\n".join(paragraphs)
    model = ScriptedModel()
    model.enqueue(long_reply)

    async def scenario(h: Harness) -> None:
        h.fake.push_message(OWNER, OWNER, "write a lot")
        await h.fake.wait_for(lambda: len(h.fake.bot_messages(OWNER)) >= 3)
        messages = await h.reply_to(OWNER, 3)
        assert len(messages) == 3 and all(utf16_len(m["text"]) <= MESSAGE_LIMIT for m in messages)
        joined = "\n\n".join(m["text"] for m in messages)
        assert joined.startswith(long_reply) and len(joined.split()) >= 1500

    run(config, scenario, model)


def test_split_message_prefers_paragraphs_then_lines_then_spaces() -> None:
    assert split_message("short") == ["short"]
    text = "a" * 3000 + "\n\n" + "b" * 3000
    assert split_message(text) == ["a" * 3000, "b" * 3000]
    lines = "\n".join(["x" * 99] * 100)  # 9999 characters, no paragraph break
    pieces = split_message(lines)
    assert all(len(p) <= MESSAGE_LIMIT and not p.startswith("\n") for p in pieces)
    assert "\n".join(pieces) == lines
    assert split_message("y" * 5000) == ["y" * 4096, "y" * 904]  # no boundary at all: a hard cut
    emoji = "😀" * 3000  # two UTF-16 code units each, as Telegram counts
    assert [utf16_len(p) for p in split_message(emoji)] == [4096, 1904]


# --- commands and buttons -----------------------------------------------------------------------------


def test_commands_answer(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        async def command(text: str) -> str:
            before = len(h.fake.bot_messages(OWNER))
            h.fake.push_message(OWNER, OWNER, text)
            return str((await h.reply_to(OWNER, before + 1))[-1]["text"])

        assert "/devices" in await command("/help")
        status = await command("/status")
        assert "Model scripted" in status and "queue 0" in status and "Devices 5" in status
        assert await command("/cloud") == "The next message is answered on the Pi: routing.mode is local_only."
        assert h.channel.commands.forced_route == {str(OWNER): "cloud"}
        assert await command("/local") == "The next message stays on the Pi."
        await command("hello")
        assert h.channel.commands.forced_route == {}  # used by that message
        assert "stays on the Pi" in await command("/private on")
        assert await h.runtime.db.call(h.runtime.db.is_private, "telegram", str(OWNER))
        off = await command("/private off")
        assert off == (
            "This chat is routed as configured: routing.mode is local_only, so every message stays on the Pi anyway. "
            "/private on keeps it on the Pi."
        ), off
        answer = await command("/cloud what is up")  # with text: answered at once, on the Pi (local_only)
        assert "what is up" in answer and "routing.mode is local_only" in answer  # the footer says why
        assert "holds 4 messages" in await command("/memory")
        assert "/memory WORDS searches" in await command("/memory")
        await command("/reset")
        assert "holds 0 messages" in await command("/memory")

    run(config, scenario)


def test_device_buttons_toggle_and_read(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.push_message(OWNER, OWNER, "/devices")
        [menu] = await h.reply_to(OWNER)
        assert buttons(menu)["dev:toggle:fan"] == "fan: off"
        assert "dev:read:living_room" in buttons(menu)

        h.fake.push_callback(STRANGER, OWNER, menu["message_id"], "dev:toggle:fan")
        await h.settle()
        assert h.pin(27) is False
        assert [a["text"] for a in h.fake.callback_answers.values() if a] == ["not allowed"]

        query = h.fake.push_callback(OWNER, OWNER, menu["message_id"], "dev:toggle:fan")
        await h.fake.wait_for(lambda: h.fake.callback_answers[query] is not None)
        await h.settle()
        assert h.pin(27) is True
        assert h.fake.callback_answers[query]["text"] == "fan is now on"  # type: ignore[index]
        menu = h.fake.bot_messages(OWNER)[0]
        assert buttons(menu)["dev:toggle:fan"] == "fan: on" and "fan is now on" in menu["text"]

        query = h.fake.push_callback(OWNER, OWNER, menu["message_id"], "dev:read:living_room")
        await h.fake.wait_for(lambda: h.fake.callback_answers[query] is not None)
        assert "temperature" in h.fake.callback_answers[query]["text"]  # type: ignore[index]

    run(config, scenario)


def test_a_question_by_meaning_gets_buttons_and_a_tap_answers_it(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.push_message(OWNER, OWNER, "it's dark on the porch")
        [question] = await h.reply_to(OWNER)
        assert question["text"].startswith("Turn the porch light on? (yes or no)")
        assert buttons(question) == {"say:yes": "yes", "say:no": "no"}
        assert h.pin(17) is False  # nothing is done before the answer

        h.fake.push_callback(STRANGER, OWNER, question["message_id"], "say:yes")
        await h.settle()
        assert h.pin(17) is False  # a stranger's tap is turned away like a stranger's message

        h.fake.push_callback(OWNER, OWNER, question["message_id"], "say:yes")
        await h.fake.wait_for(lambda: len(h.fake.bot_messages(OWNER)) >= 2, what="the answer to the tap")
        await h.settle()
        assert h.pin(17) is True
        question, done = h.fake.bot_messages(OWNER)[:2]
        assert question["text"].endswith("→ yes") and "reply_markup" not in question  # the buttons are gone
        assert done["text"].startswith("Done: the porch light is on")

    run(config, scenario)


def test_approve_runs_exactly_the_stored_action_once(config: Config) -> None:
    config.devices["heater"] = DeviceConfig(driver="relay", pin=5, approval="required")

    async def scenario(h: Harness) -> None:
        devices = h.runtime.devices
        assert devices is not None
        switch_on = (await devices.set("heater", "on", requested_by="model")).pending
        switch_off = (await devices.set("heater", "off", requested_by="model")).pending
        assert switch_on is not None and switch_off is not None and h.pin(5) is False

        h.fake.push_message(OWNER, OWNER, "/approve")
        cards = await h.reply_to(OWNER, 2)
        by_action = {next(iter(buttons(c))).split(":")[2]: c for c in cards}
        assert set(by_action) == {switch_on.id, switch_off.id}
        card = by_action[switch_on.id]
        assert buttons(card) == {f"apr:approve:{switch_on.id}": "Approve", f"apr:deny:{switch_on.id}": "Deny"}

        h.fake.push_callback(OWNER, OWNER, card["message_id"], f"apr:approve:{switch_on.id}")
        await h.settle()
        assert h.pin(5) is True
        decided = devices.approvals.get(switch_on.id)
        assert decided.status == "approved" and decided.decided_by == f"telegram:{OWNER}"
        assert devices.approvals.get(switch_off.id).status == "pending"  # only that action ran
        assert card["text"].startswith("Approved by") and "reply_markup" not in card

        again = h.fake.push_callback(OWNER, OWNER, card["message_id"], f"apr:approve:{switch_on.id}")
        await h.fake.wait_for(lambda: h.fake.callback_answers[again] is not None)
        assert "already approved" in h.fake.callback_answers[again]["text"]  # type: ignore[index]

        deny = by_action[switch_off.id]
        h.fake.push_callback(STRANGER, OWNER, deny["message_id"], f"apr:approve:{switch_off.id}")
        await h.settle()
        assert devices.approvals.get(switch_off.id).status == "pending"  # a stranger decides nothing
        h.fake.push_callback(OWNER, OWNER, deny["message_id"], f"apr:deny:{switch_off.id}")
        await h.settle()
        assert devices.approvals.get(switch_off.id).status == "denied" and h.pin(5) is True

    run(config, scenario)


# --- pairing ------------------------------------------------------------------------------------------------


def test_pairing_works_once_and_only_once(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        code = create_code(h.runtime.db, "telegram", clock=h.clock)
        wrong = f"{(int(code) + 1) % 10**6:06d}"
        h.fake.push_message(222, 222, wrong)
        await h.settle()
        assert not is_paired("telegram", h.runtime.db, 222) and not h.fake.bot_messages(222)

        h.fake.push_message(222, 222, code)
        [paired] = await h.reply_to(222)
        assert paired["text"] == "Paired: you can talk to me now." and is_paired("telegram", h.runtime.db, 222)

        h.fake.push_message(333, 333, code)  # the same code again
        await h.settle()
        assert not is_paired("telegram", h.runtime.db, 333) and not h.fake.bot_messages(333)

        h.fake.push_message(222, 222, "hello")
        await h.reply_to(222, 2)
        assert h.model.history[-1].messages[-1].content == "hello"
        assert h.channel.owner_target() == str(OWNER)

        link_code = create_code(h.runtime.db, "telegram", clock=h.clock)
        h.fake.push_message(777, 777, f"/start {link_code}")  # what a t.me/<bot>?start=<code> link sends
        [paired] = await h.reply_to(777)
        assert paired["text"] == "Paired: you can talk to me now." and is_paired("telegram", h.runtime.db, 777)

    run(config, scenario)


def test_guessing_codes_is_cut_off(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        code = create_code(h.runtime.db, "telegram", clock=h.clock)
        guesses = [f"{(int(code) + i) % 10**6:06d}" for i in range(1, 6)]
        for guess in guesses:
            h.fake.push_message(444, 444, guess)
        await h.settle()
        h.fake.push_message(444, 444, code)  # right, but after five wrong guesses this hour
        await h.settle()
        assert not is_paired("telegram", h.runtime.db, 444) and not h.fake.bot_messages(444)

    run(config, scenario)


def test_an_expired_code_does_nothing(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        code = create_code(h.runtime.db, "telegram", ttl_s=600, clock=lambda: h.clock.now - 601)
        h.fake.push_message(555, 555, code)
        await h.settle()
        assert not is_paired("telegram", h.runtime.db, 555)

    run(config, scenario)


# --- proactive delivery ---------------------------------------------------------------------------------------


def rows(h: Harness) -> list[tuple[str, str]]:
    return h.runtime.db.rows("SELECT text, status FROM outbox ORDER BY id")


def test_dropped_connections_lose_nothing_and_duplicate_nothing(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.add_chat(OWNER)  # the owner pressed Start once
        notifier = Notifier(h.outbox, {"telegram": h.channel}, lambda: ["telegram"])
        texts = ["The living room is over 28 °C.", "Doorbell: pressed", "Backup finished"]
        h.fake.fail_next("sendMessage", 2, kind="network")
        for text in texts:
            notifier.notify(text, "event")
        await h.drain(60)
        assert h.fake.sent_texts(OWNER) == texts  # each exactly once, in order
        attempts = [c.params["text"] for c in h.fake.calls_of("sendMessage")]
        assert attempts == [texts[0], texts[0], *texts]  # nothing overtook the message being retried
        assert rows(h) == [(t, "sent") for t in texts]

    run(config, scenario)


@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")  # PTB's own RetryAfter()
def test_flood_control_is_honoured_and_permanent_errors_give_up(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        h.fake.add_chat(OWNER)
        h.fake.fail_next("sendMessage", 1, kind="429", retry_after=30)
        h.outbox.enqueue("telegram", str(OWNER), "first", "event")
        await h.channel.deliver_due()
        h.clock.advance(29)
        await h.channel.deliver_due()
        assert len(h.fake.calls_of("sendMessage")) == 1  # not before retry_after
        h.clock.advance(1.5)
        await h.channel.deliver_due()
        assert h.fake.sent_texts(OWNER) == ["first"]

        h.fake.fail_next("sendMessage", 1, kind="500")
        h.outbox.enqueue("telegram", str(OWNER), "second", "event")
        h.outbox.enqueue("telegram", "999", "to nobody", "event")  # a chat the bot cannot reach
        await h.drain(60)
        assert h.fake.sent_texts(OWNER) == ["first", "second"]
        assert rows(h) == [("first", "sent"), ("second", "sent"), ("to nobody", "failed")]

    run(config, scenario)


def test_a_reply_that_cannot_be_delivered_goes_to_the_outbox(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        # One sendMessage, the final one: a turn slower than the edit interval would first show a partial
        # reply (and that failed push would be retried by the final one, not by the outbox).
        h.channel.config.edit_interval_s = 60.0
        h.fake.fail_next("sendMessage", 1, kind="network")
        h.fake.push_message(OWNER, OWNER, "are you there?")
        await h.settle()
        await h.drain(60)
        [(text, status)] = rows(h)
        assert text.startswith("echo: are you there?\n\nlocal · scripted · ") and status == "sent"
        assert [m["text"] for m in h.fake.bot_messages(OWNER)] == [text]

    run(config, scenario)


def test_the_gate_fails_closed(config: Config) -> None:
    async def scenario(h: Harness) -> None:
        async def broken(user_id: int) -> bool:
            raise RuntimeError("the database is gone")

        h.channel.is_allowed = broken  # type: ignore[method-assign]
        h.fake.push_message(OWNER, OWNER, "turn on the porch light")
        await h.settle()
        assert h.pin(17) is False and not h.fake.bot_messages(OWNER)

    run(config, scenario)


def test_a_refused_token_or_an_unreachable_telegram_does_not_stop_the_daemon(config: Config) -> None:
    async def main() -> None:
        async with FakeTelegram(TOKEN) as fake:
            tg = config.telegram
            tg.enabled, tg.token, tg.api_base_url, tg.allow_from = True, "999:WRONG", fake.base_url, [OWNER]
            runtime = Runtime.open(config, model=ScriptedModel())
            try:
                channel = TelegramChannel(tg, runtime, Outbox(runtime.db))
                await channel.start()
                assert channel.problem == "Telegram refused telegram.token"
                await channel.stop()

                tg.token, tg.api_base_url = TOKEN, "http://127.0.0.1:9/bot"  # nothing listens there
                channel = TelegramChannel(tg, runtime, Outbox(runtime.db))
                await channel.start()
                # in words, not httpx's "ConnectError: All connection attempts failed"
                assert channel.problem == (
                    "cannot reach Telegram at http://127.0.0.1:9 (no connection: is the Pi online? it retries by "
                    "itself)"
                ), channel.problem
                await asyncio.wait_for(channel.stop(), 2)  # the retry in the background is cancelled
            finally:
                runtime.close()

    asyncio.run(main())


# --- the token in the log -------------------------------------------------------------------------------------


def test_the_bot_token_never_reaches_the_log_even_at_debug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx logs every request's URL, and a Bot API URL holds the token: at log_level debug, through the
    CLI's own logging setup, a whole exchange with the real library must leave no token in the log."""
    path = tmp_path / "picoagent.yaml"
    path.write_text(CHECKOUT_CONFIG.read_text().replace("\nlog_level: warning\n", "\nlog_level: debug\n"))
    monkeypatch.setattr(logging.root, "handlers", [])  # pytest's own handlers come back afterwards
    monkeypatch.setattr(logging.root, "level", logging.root.level)
    for name in ("httpx", "httpcore"):
        monkeypatch.setattr(logging.getLogger(name), "level", logging.getLogger(name).level)
    stream = io.StringIO()
    config = load(argparse.Namespace(config=str(path), data_dir=str(tmp_path / "data")), log_stream=stream)
    assert config.log_level == "debug" and logging.getLogger().isEnabledFor(logging.DEBUG)

    async def scenario(h: Harness) -> None:
        h.fake.push_message(OWNER, OWNER, "turn on the porch light")
        await h.reply_to(OWNER)
        logging.getLogger("telegram.elsewhere").debug("a URL logged by anything: %s%s/getMe", h.fake.base_url, TOKEN)

    run(config, scenario)
    logged = stream.getvalue()
    assert "DEBUG telegram" in logged  # debug logging was really on, for the library too
    assert TOKEN not in logged and TOKEN.split(":")[1] not in logged
    assert "/bot[redacted]/getMe" in logged  # the second guard, for whatever else logs such a URL
