"""Every command of the shared set, typed by the owner, on every chat channel, each through its real library.

The channel tests each try a few commands; a command that failed on one platform only (Discord's
``say_or_keep`` called itself, so every typed command there ended in RecursionError, issue 31) passed
them all. Here each command of :meth:`ChatCommands.handlers` is typed on each platform's test harness
(the fake servers of the channel's own tests: Telegram's Bot API, Discord's REST and gateway, Slack's
Web API and Socket Mode, dovecot and aiosmtpd, Meta's Graph API, a signed webhook request, and the
in-memory platform), and the owner must get a sensible answer: the words that command says.

A new command needs its line in ``EXPECTED``, or :func:`test_every_command_has_an_expected_answer` fails.
The MQTT notify topic is not here on purpose: it carries messages, not commands (issue 31, finding 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import pytest

from appliance.channels.commands import ChatCommands
from appliance.channels.terminal import TerminalChat
from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests import test_channel_base as memory
from tests import test_channel_discord as discord
from tests import test_channel_email as email
from tests import test_channel_slack as slack
from tests import test_channel_webhook as webhook
from tests import test_channel_whatsapp as whatsapp
from tests import test_telegram as telegram
from tests.test_automation_commands import automation

if TYPE_CHECKING:
    from appliance.channels.base import ChatChannel
    from appliance.channels.telegram.channel import TelegramChannel
    from tests.fakes.mail_servers import MailServers

pytest_plugins = ["tests.fakes.mail_servers"]

Say = Callable[[str], Awaitable[list[str]]]  # the owner types a line; the texts of the answers to it

# command -> (what the owner types, words its answer must hold)
EXPECTED: dict[str, tuple[str, str]] = {
    "start": ("/start", "/approve"),
    "help": ("/help", "/approve"),
    "status": ("/status", "Model scripted"),
    "devices": ("/devices", "Devices: tap a switch"),
    "approve": ("/approve", "Nothing is waiting for approval."),
    "deny": ("/deny", "Say which one: /deny NAME"),
    "toggle": ("/toggle fan", "fan is now on"),
    "read": ("/read living_room", "living_room: "),
    "local": ("/local", "The next message stays on the Pi."),
    "cloud": ("/cloud", "The next message is answered on the Pi: routing.mode is local_only."),
    "private": ("/private on", "This chat stays on the Pi"),
    "reset": ("/reset", "Forgotten: the next message starts a new conversation."),
    "memory": ("/memory", "This conversation holds"),
    "tasks": ("/tasks", "No tasks."),
    "schedule": ("/schedule", "Scheduled: 1 job."),
}


def attach_automation(channel: ChatChannel | TelegramChannel, runtime: Runtime) -> None:
    """/tasks and /schedule as in the daemon: a real scheduler (one job) and task store on the runtime's file."""
    channel.commands.automation.attach(*automation(runtime), None)


# --- how the owner types on each platform -----------------------------------------------------------------


@contextlib.asynccontextmanager
async def on_memory(config: Config, _mail: MailServers | None) -> AsyncIterator[Say]:
    async with memory.board(config) as ch:
        attach_automation(ch, ch.runtime)

        async def say(text: str) -> list[str]:
            before = len(memory.said_to(ch, f"dm-{memory.OWNER}"))
            await ch.handle(memory.dm(memory.OWNER, text))
            return memory.said_to(ch, f"dm-{memory.OWNER}")[before:]

        yield say


@contextlib.asynccontextmanager
async def on_telegram(config: Config, _mail: MailServers | None) -> AsyncIterator[Say]:
    async with telegram.telegram(config) as h:
        attach_automation(h.channel, h.runtime)

        async def say(text: str) -> list[str]:
            before = len(h.fake.bot_messages(telegram.OWNER))
            h.fake.push_message(telegram.OWNER, telegram.OWNER, text)
            return [str(m["text"]) for m in (await h.reply_to(telegram.OWNER, before + 1))[before:]]

        yield say


@contextlib.asynccontextmanager
async def on_discord(config: Config, _mail: MailServers | None) -> AsyncIterator[Say]:
    async with discord.discord_bot(config) as h:
        attach_automation(h.channel, h.runtime)

        async def say(text: str) -> list[str]:
            before = len(h.fake.bot_messages(h.dm()))
            h.fake.push_message(discord.OWNER, text)
            return [str(m["content"]) for m in (await h.replies(h.dm(), before + 1))[before:]]

        yield say


@contextlib.asynccontextmanager
async def on_slack(config: Config, _mail: MailServers | None) -> AsyncIterator[Say]:
    async with slack.slack(config) as h:
        attach_automation(h.channel, h.runtime)

        async def say(text: str) -> list[str]:
            before = len(h.fake.bot_messages(h.dm))
            h.fake.push_dm(slack.OWNER, text)
            return [str(m["text"]) for m in (await h.replies(h.dm, before + 1))[before:]]

        yield say


@contextlib.asynccontextmanager
async def on_email(config: Config, mail: MailServers | None) -> AsyncIterator[Say]:
    assert mail is not None
    async with email.harness(config, mail) as h:
        attach_automation(h.channel, h.runtime)

        async def say(text: str) -> list[str]:
            before = len(h.mail.smtp.to(h.owner.address))
            await h.write(text, f"asking {text}")
            return [email.text_of(m) for m in (await h.replies(before + 1))[before:]]

        yield say


@contextlib.asynccontextmanager
async def on_whatsapp(config: Config, _mail: MailServers | None) -> AsyncIterator[Say]:
    async with whatsapp.whatsapp(config) as h:
        attach_automation(h.channel, h.runtime)

        async def say(text: str) -> list[str]:
            before = len(h.fake.sent_texts(whatsapp.OWNER))
            assert await h.says(whatsapp.OWNER, text) == 200
            return h.fake.sent_texts(whatsapp.OWNER)[before:]

        yield say


@contextlib.asynccontextmanager
async def on_webhook(config: Config, _mail: MailServers | None) -> AsyncIterator[Say]:
    async with webhook.bridges(config) as h:
        attach_automation(h.channel, h.runtime)

        async def say(text: str) -> list[str]:
            h.clock.advance(1)  # each request signed a second apart: none is a replay of the one before
            status, answer = await h.ask({"text": text, "chat": "kitchen"})
            assert status == 200, answer
            return [str(answer["text"])]

        yield say


PLATFORMS: dict[str, Callable[[Config, MailServers | None], contextlib.AbstractAsyncContextManager[Say]]] = {
    "memory": on_memory,
    "telegram": on_telegram,
    "discord": on_discord,
    "slack": on_slack,
    "email": on_email,
    "whatsapp": on_whatsapp,
    "webhook": on_webhook,
}
# Channels whose senders are not people the Pi knows (ChatChannel.people false, issue 31 finding 1): every
# command but /help and /start is refused there, saying where a person can use it.
NOT_PEOPLE = {"webhook"}
ANSWERED_EVERYWHERE = ("/help", "/start")


def test_every_command_has_an_expected_answer(config: Config) -> None:
    runtime = Runtime.open(config, model=ScriptedModel())
    try:
        names = set(ChatCommands("memory", runtime, Outbox(runtime.db)).handlers())
    finally:
        runtime.close()
    assert names == set(EXPECTED), f"commands without an expected answer here: {sorted(names - set(EXPECTED))}"


@pytest.mark.parametrize("platform", list(PLATFORMS))
def test_every_command_typed_by_the_owner_is_answered(
    platform: str, config: Config, request: pytest.FixtureRequest
) -> None:
    mail = request.getfixturevalue("mail") if platform == "email" else None  # dovecot only where it is used

    async def main() -> list[str]:
        wrong = []
        async with PLATFORMS[platform](config, mail) as say:
            for typed, expected in EXPECTED.values():
                if platform in NOT_PEOPLE:  # /help and /start say what such a channel may do; the rest is refused
                    helps = typed.startswith(ANSWERED_EVERYWHERE)
                    expected = "its only command is /help" if helps else f"{typed.split()[0]} needs a person"
                try:
                    answers = await say(typed)
                except (AssertionError, TimeoutError) as exc:  # no answer came: the next command is still tried
                    wrong.append(f"{typed}: no answer ({str(exc).splitlines()[0]})")
                    continue
                if not any(expected in answer for answer in answers):
                    wrong.append(f"{typed}: {answers!r} does not say {expected!r}")
        return wrong

    wrong = asyncio.run(main())
    assert not wrong, f"on {platform}:\n" + "\n".join(wrong)


def test_every_terminal_command_is_answered(config: Config) -> None:
    """The terminal has its own few commands (the owner at the Pi): each of them answers too."""
    runtime = Runtime.open(config, model=ScriptedModel())
    out = io.StringIO()
    lines = iter(["/help", "/private on", "/private off", "/reset", "/cloud what is up", "/status", "/quit"])
    try:
        assert TerminalChat(runtime, out=out).interactive(read=lambda _prompt: next(lines)) == 0
    finally:
        runtime.close()
    shown = out.getvalue()
    assert "/private on|off" in shown  # /help
    assert "(this chat stays on the Pi)" in shown and "(this chat routes as configured: routing.mode)" in shown
    assert "(conversation reset)" in shown
    assert "echo: what is up" in shown and "routing.mode is local_only" in shown  # /cloud TEXT: a turn
    assert "unknown command /status; /help lists them" in shown
    assert next(lines, None) is None  # /quit ended it
