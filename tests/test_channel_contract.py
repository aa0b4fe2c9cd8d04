"""The contract every chat channel passes, each through its real library against its fake platform.

One module, parametrised over :data:`tests.channel_contract.PLATFORMS` (Telegram, Discord, Slack, e-mail,
WhatsApp, the webhook bridges, MQTT chat, and the in-memory platform of the shared core; where a part does
not apply, the platform's class says why, see :func:`~tests.channel_contract.having`): the owner is answered
with the footer; a stranger is not processed (one log line); every command of the shared set typed by the
owner is answered, and a button does what its command does; an approval acts once, also when the
platform sends it again; a restart in the middle of a delivery loses nothing and sends nothing twice; a
proactive message sent while the platform is down arrives once when it is back; a refused credential
leaves the channel off with the reason. A new channel gets all of it by adding its :class:`Platform` there.

A new command needs its line in ``EXPECTED``, or :func:`test_every_command_has_an_expected_answer`
(tests/test_channel_commands.py) fails. On the MQTT notify topic and a webhook bridge the senders are not
people the Pi knows: every command but /help is refused there, and an approval is never decided.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest

from appliance.channels.registry import state_of
from appliance.config import Config, DeviceConfig
from appliance.notify import Notifier
from tests.channel_contract import PLATFORMS, Platform, having
from tests.helpers import eventually

pytest_plugins = ["tests.fakes.mail_servers"]  # the e-mail platform's dovecot and SMTP

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
ANSWERED_EVERYWHERE = ("/help", "/start")  # where the senders are not people, every other command but /local is refused


def run(
    name: str, config: Config, request: pytest.FixtureRequest, scenario: Callable[[Platform], Awaitable[None]]
) -> None:
    async def main() -> None:
        async with PLATFORMS[name](config, request) as platform:
            await scenario(platform)

    asyncio.run(main())


@pytest.mark.parametrize("name", list(PLATFORMS))
def test_the_owner_is_answered_with_the_footer(name: str, config: Config, request: pytest.FixtureRequest) -> None:
    async def scenario(p: Platform) -> None:
        answers = await p.owner_says("tell me about the Pi")
        assert any(a.startswith("echo: tell me about the Pi\n\nlocal · scripted · ") for a in answers), answers
        assert len(p.model.history) == 1

    run(name, config, request, scenario)


@pytest.mark.parametrize("name", having("strangers"))
def test_a_stranger_is_not_processed_and_costs_one_log_line(
    name: str, config: Config, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(p: Platform) -> None:
        caplog.set_level(logging.INFO)
        for text in ("turn on the porch light", "tell me a secret", "/status"):
            await p.stranger_says(text)
        assert (await p.owner_says("hello"))[0].startswith("echo: hello")
        assert p.pin(17) is False and p.to_stranger() == []
        assert len(p.model.history) == 1  # the owner's message only
        if p.stranger:
            ignored = [r for r in caplog.records if p.stranger in r.getMessage()]
            assert len(ignored) == 1  # one log line per stranger per minute, not one per message

    run(name, config, request, scenario)


@pytest.mark.parametrize("name", list(PLATFORMS))
def test_every_command_typed_by_the_owner_is_answered(
    name: str, config: Config, request: pytest.FixtureRequest
) -> None:
    wrong: list[str] = []

    async def scenario(p: Platform) -> None:
        for typed, expected in EXPECTED.values():
            if not p.people and not typed.startswith("/local"):  # /help, /start say what it may do; /local asks
                helps = typed.startswith(ANSWERED_EVERYWHERE)
                expected = "its only command is /help" if helps else f"{typed.split()[0]} needs a person"
            try:
                answers = await p.owner_says(typed)
            except (AssertionError, TimeoutError) as exc:  # no answer came: the next command is still tried
                wrong.append(f"{typed}: no answer ({str(exc).splitlines()[0]})")
                continue
            if not any(expected in answer for answer in answers):
                wrong.append(f"{typed}: {answers!r} does not say {expected!r}")

    run(name, config, request, scenario)
    assert not wrong, f"on {name}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("name", having("people"))  # buttons are for people
def test_a_button_does_what_its_command_does(name: str, config: Config, request: pytest.FixtureRequest) -> None:
    async def scenario(p: Platform) -> None:
        assert any(a.startswith("Devices") for a in await p.owner_says("/devices"))
        assert p.pin(27) is False
        await p.press("dev:toggle:fan")  # a tap where the platform shows buttons, else the reply command
        assert p.pin(27) is True

    run(name, config, request, scenario)


def long_text(limit: int | None) -> str:
    """Two paragraphs: two messages where the platform has a length limit, else one."""
    size = int(limit * 0.6) if limit else 200
    first, second = " ".join(["first half"] * (size // 11)), " ".join(["second half"] * (size // 12))
    return f"{first}\n\n{second}"


@pytest.mark.parametrize("name", having("delivers"))
def test_a_restart_mid_delivery_loses_nothing_and_sends_nothing_twice(
    name: str, config: Config, request: pytest.FixtureRequest
) -> None:
    async def scenario(p: Platform) -> None:
        await p.channel.delivery.stop()  # these passes are the test's
        chat, text = p.owner_chat, long_text(p.limit)
        pieces = 2 if p.limit else 1
        p.outbox.enqueue(name, chat, "before the restart", "event")
        p.outbox.enqueue(name, chat, text, "event")
        p.outbox.enqueue(name, chat, "after it", "event")  # waits behind the message being retried
        p.lose_next(after=pieces)  # the long message's last piece is lost: the connection drops
        await p.channel.deliver_due()
        assert len(p.owner_got()) == pieces  # "before the restart" and the long message's pieces but the last
        await p.channel.stop()  # the daemon stops with the rest pending
        p.outbox.enqueue(name, chat, "while stopped", "event")
        p.h.clock.advance(60)
        p.h.channel = p.new_channel()
        await p.channel.start()  # nothing else: its own loop delivers
        await eventually(lambda: p.outbox.pending_count(name) == 0, 10, "the pending messages")
        first, *sent, after, stopped = p.owner_got()
        assert (first, after, stopped) == ("before the restart", "after it", "while stopped")
        assert "\n\n".join(sent) == text and len(sent) == pieces  # each piece once, in order
        assert {status for (status,) in p.runtime.db.rows("SELECT status FROM outbox")} == {"sent"}

    run(name, config, request, scenario)


@pytest.mark.parametrize("name", having("delivers"))
def test_a_proactive_message_while_the_channel_is_down_arrives_once_when_it_is_back(
    name: str, config: Config, request: pytest.FixtureRequest
) -> None:
    async def scenario(p: Platform) -> None:
        notifier = Notifier(p.outbox, {name: p.channel}, lambda: [name], clock=p.h.clock)
        await p.go_down()
        notifier.notify("Doorbell: pressed", "event")
        p.channel.notify_wakeup()
        await eventually(lambda: p.runtime.db.value("SELECT attempts FROM outbox") == 1, 10, "a failed attempt")
        assert p.runtime.db.rows("SELECT text, status FROM outbox") == [("Doorbell: pressed", "pending")]
        await p.come_back()

        def delivered() -> bool:
            if p.owner_got():
                return True
            p.h.clock.advance(60)  # past the retry's backoff (a pass before the reconnection backs off more)
            p.channel.notify_wakeup()
            return False

        await eventually(delivered, 15, "the delivery")
        assert p.owner_got() == ["Doorbell: pressed"]  # once
        # the platform has it; the outbox marks it sent right after the send returns (a loaded machine saw it pending)
        sent = [("Doorbell: pressed", "sent")]
        marked = "SELECT text, status FROM outbox"
        await eventually(lambda: p.runtime.db.rows(marked) == sent, 10, "the row marked sent")
        assert p.owner_got() == ["Doorbell: pressed"]  # still once
        await eventually(lambda: p.channel.up, 15, "the channel to be up")

    run(name, config, request, scenario)


@pytest.mark.parametrize("name", having("credential"))
def test_a_refused_credential_leaves_the_channel_off_with_the_reason(
    name: str, config: Config, request: pytest.FixtureRequest
) -> None:
    async def scenario(p: Platform) -> None:
        await p.channel.stop()
        reason = p.refuse_credentials()
        p.h.channel = p.new_channel()
        await asyncio.wait_for(p.channel.start(), 10)  # a refusal is not retried: start returns
        assert not p.channel.up and (p.channel.problem or "").startswith(reason), p.channel.problem
        assert state_of(p.channel) == {"name": name, "enabled": True, "up": False, "detail": p.channel.problem}

    run(name, config, request, scenario)


@pytest.mark.parametrize("name", list(PLATFORMS))
def test_an_approval_acts_once_also_when_the_platform_sends_it_again(
    name: str, config: Config, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    config.devices["heater"] = DeviceConfig(driver="relay", pin=5, approval="required")

    async def scenario(p: Platform) -> None:
        caplog.set_level(logging.INFO, logger="appliance.channels")
        devices = p.runtime.devices
        assert devices is not None
        pending = (await devices.set("heater", "on", requested_by="model")).pending
        assert pending is not None
        answers = await p.owner_says(f"/approve {pending.id}")
        decided = devices.approvals.get(pending.id)
        if not p.people:  # a bridge's caller is not a person: it decides nothing
            assert decided.status == "pending" and p.pin(5) is False
            assert any("/approve needs a person" in a for a in answers), answers
            return
        assert decided.status == "approved" and decided.decided_by.startswith(f"{name}:") and p.pin(5) is True
        said = len(p.model.history), p.runtime.db.value("SELECT COUNT(*) FROM messages"), len(p.owner_got())
        await p.again()
        if p.repeat_logged:
            await eventually(lambda: any("arrived again" in r.getMessage() for r in caplog.records), 10, "the repeat")
        assert devices.approvals.get(pending.id).decided_at == decided.decided_at  # decided once
        assert (len(p.model.history), p.runtime.db.value("SELECT COUNT(*) FROM messages"), len(p.owner_got())) == said

    run(name, config, request, scenario)
