"""The e-mail channel against real servers: dovecot (IMAP) and aiosmtpd (SMTP) on 127.0.0.1.

The runtime is the real one (devices on the simulated backend) with a scripted instant model, so these
tests check the channel: who is answered, threads, commands, approvals, pairing, loops, and that every
mail is answered exactly once through SMTP refusals and restarts. Each test has a fresh mailbox for the
assistant and one for its owner on the module's dovecot; mail arrives by IMAP APPEND (any sender, any
header) or, in the first test, the way it really does: the owner submits it over SMTP.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from email.message import EmailMessage
from typing import TYPE_CHECKING

import pytest

from appliance.channels import base
from appliance.channels.email.channel import EmailChannel
from appliance.channels.email.imap import ANSWERED
from appliance.channels.email.message import read_mail
from appliance.channels.pairing import create_code, is_paired
from appliance.channels.registry import state_of
from appliance.config import Config, DeviceConfig
from appliance.llm.base import Generation, GenerationRequest
from appliance.llm.scripted import ScriptedModel
from appliance.notify import Notifier, recent
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests.channel_harness import ChannelHarness, Clock, opened
from tests.channel_harness import run as run_on
from tests.helpers import ROOT, eventually, wait_for

if TYPE_CHECKING:  # the module is a pytest plugin: pytest imports it first, so its asserts are rewritten
    from tests.fakes.mail_servers import Mailbox, MailServers, StoredMail

pytest_plugins = ["tests.fakes.mail_servers"]

STRANGER = "stranger@else.test"


class BlockedModel(ScriptedModel):
    """A model that does not answer until ``go`` is set (a turn in flight when the daemon stops)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()
        self.asked = 0

    async def generate(self, request: GenerationRequest) -> Generation:
        self.asked += 1
        await self.go.wait()
        return await super().generate(request)


@dataclass(kw_only=True)
class Harness(ChannelHarness):
    mail: MailServers
    owner: Mailbox
    channel: EmailChannel

    @property
    def box(self) -> Mailbox:
        return self.mail.box

    async def write(self, body: str, subject: str = "hello", sender: str = "", **headers: str) -> EmailMessage:
        """A mail into the assistant's INBOX (IMAP APPEND), from the owner unless ``sender`` says otherwise."""
        message = a_mail(sender or self.owner.address, self.box.address, subject, body, **headers)
        await asyncio.to_thread(self.box.deliver, message)
        return message

    async def replies(self, count: int = 1, to: str = "") -> list[EmailMessage]:
        """Wait for ``count`` mails accepted by SMTP (to the owner by default) and for the turns to end."""
        address = to or self.owner.address
        await eventually(lambda: len(self.mail.smtp.to(address)) >= count, what=f"{count} mail(s) to {address}")
        await eventually(lambda: self.channel.turns_in_flight == 0, what="the turns to end")
        return [r.message for r in self.mail.smtp.to(address)]

    async def stored(self, condition: Callable[[list[StoredMail]], bool], what: str) -> list[StoredMail]:
        """The assistant's INBOX once ``condition`` holds for it (flags are stored right after SMTP's answer)."""
        for _ in range(500):
            found = await asyncio.to_thread(self.box.messages)
            if condition(found):
                return found
            await asyncio.sleep(0.02)
        raise AssertionError(f"{what} did not happen: {[(m.uid, sorted(m.flags)) for m in found]}")

    def new_channel(self) -> EmailChannel:
        return EmailChannel(self.runtime.config.email, self.runtime, self.outbox, clock=self.clock)


def a_mail(sender: str, to: str, subject: str, body: str, **headers: str) -> EmailMessage:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, to, subject
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    if "Message-ID" not in message:
        message["Message-ID"] = f"<{abs(hash((sender, subject, body)))}@owner.test>"
    message.set_content(body)
    return message


def rows(h: Harness) -> list[tuple[str, str]]:
    return h.runtime.db.rows("SELECT text, status FROM outbox ORDER BY id")


def text_of(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    assert part is not None
    return str(part.get_content()).replace("\r\n", "\n")


def configure(config: Config, mail: MailServers, owner: Mailbox) -> None:
    c = config.email
    c.enabled, c.address, c.username, c.password = True, mail.box.address, mail.box.username, mail.box.password
    c.imap_host, c.imap_port, c.imap_security = "127.0.0.1", mail.dovecot.imaps_port, "tls"
    c.smtp_host, c.smtp_port, c.smtp_security = "127.0.0.1", mail.smtp.port, "starttls"
    c.ca_file, c.allow_from, c.poll_s = str(mail.dovecot.cert.cert), [owner.address.upper()], 3600.0


@contextlib.asynccontextmanager
async def harness(
    config: Config, mail: MailServers, model: ScriptedModel | None = None, owner: Mailbox | None = None
) -> AsyncIterator[Harness]:
    """A started channel on the test's mailbox; ``owner`` given: the config was set up by the test."""
    if owner is None:
        owner = mail.dovecot.mailbox()
        configure(config, mail, owner)

    def make(runtime: Runtime, outbox: Outbox, clock: Clock, model: ScriptedModel) -> Harness:
        channel = EmailChannel(config.email, runtime, outbox, clock=clock)
        return Harness(
            mail=mail, owner=owner, runtime=runtime, channel=channel, outbox=outbox, model=model, clock=clock
        )

    async with opened(config, model, make) as h:
        yield h


def run(
    config: Config,
    mail: MailServers,
    scenario: Callable[[Harness], Awaitable[None]],
    model: ScriptedModel | None = None,
    owner: Mailbox | None = None,
) -> None:
    run_on(harness(config, mail, model, owner), scenario)


# --- answers -------------------------------------------------------------------------------------------


def test_a_mail_submitted_by_the_owner_is_answered_in_its_thread_with_text_and_html(
    config: Config, mail: MailServers
) -> None:
    async def scenario(h: Harness) -> None:
        assert h.channel.up and h.channel.inbox is not None and h.channel.inbox.idle  # poll_s is an hour
        asked = a_mail(h.owner.address, h.box.address, "Porch", "turn on the porch light\n\n-- \nThe owner")
        asked["References"] = "<older@owner.test>"
        await asyncio.to_thread(h.mail.smtp.send, asked, login=h.owner)  # SMTP delivers it into the INBOX
        [reply] = await h.replies()
        assert h.runtime.devices is not None and h.runtime.devices.backend.pin_factory.pin(17).state
        assert h.model.history == []  # the intent fast path: no model call
        assert reply["Subject"] == "Re: Porch" and reply["To"] == h.owner.address
        assert reply["From"].addresses[0].addr_spec == h.box.address
        assert reply["In-Reply-To"] == asked["Message-ID"]
        assert reply["References"].split() == ["<older@owner.test>", asked["Message-ID"]]
        assert reply["Auto-Submitted"] == "auto-replied"
        assert reply.get_content_type() == "multipart/alternative"
        assert [p.get_content_type() for p in reply.iter_parts()] == ["text/plain", "text/html"]
        text = text_of(reply)
        assert "the porch light is on" in text and "\n\nintent · " in text  # the footer
        assert "the porch light is on" in str(reply.get_body(preferencelist=("html",)).get_content())  # type: ignore[union-attr]
        [stored] = await h.stored(lambda found: len(found) == 1 and ANSWERED in found[0].flags, "the \\Answered flag")
        assert stored.seen
        await asyncio.to_thread(wait_for, lambda: len(h.owner.messages()) == 1, 10, "the answer in the owner's INBOX")

        # the owner answers the answer: the same thread, so the same conversation
        h.model.enqueue("first answer", "second answer")
        first = await h.write("what are you?", "Question")
        [_, answer] = await h.replies(2)
        await h.write("and why?", "Re: Question", In_Reply_To=answer["Message-ID"], References=" ".join(
            [first["Message-ID"], answer["Message-ID"]]))  # fmt: skip
        [*_, again] = await h.replies(3)
        assert again["Subject"] == "Re: Question"
        assert [m.content for m in h.model.history[-1].messages if m.role == "user"][-2:] == [
            "what are you?",
            "and why?",
        ]

    run(config, mail, scenario)


def test_a_stranger_is_not_processed_and_costs_one_log_line(
    config: Config, mail: MailServers, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(h: Harness) -> None:
        caplog.set_level(logging.WARNING, logger="appliance.channels")
        await h.write("turn on the porch light", sender=STRANGER)
        await h.write("tell me a secret", "Secret", sender=STRANGER)
        await h.write("/status", sender=STRANGER)
        await h.stored(lambda found: len(found) == 3 and all(m.seen for m in found), "the strangers' mails read")
        await h.write("hello")
        await h.replies()
        assert h.runtime.devices is not None and not h.runtime.devices.backend.pin_factory.pin(17).state
        assert [r.rcpt_tos for r in h.mail.smtp.received] == [(h.owner.address,)]
        assert len(h.model.history) == 1  # the owner's mail only
        assert len([r for r in caplog.records if STRANGER in r.getMessage()]) == 1
        found = await h.stored(lambda found: len(found) == 4, "four mails")
        assert [ANSWERED in m.flags for m in found] == [False, False, False, True]

    run(config, mail, scenario)


def test_auto_replies_bounces_and_lists_are_never_answered(
    config: Config, mail: MailServers, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(h: Harness) -> None:
        caplog.set_level(logging.INFO, logger="appliance.channels.email")
        await h.write("I am on holiday until Monday.", "Out of office", Auto_Submitted="auto-replied")
        await h.write("Newsletter", "News", Precedence="bulk")
        await h.write("Delivery failed", "Undelivered", sender="MAILER-DAEMON@owner.test")
        await h.write("Re: hello", "List", List_Id="<family.lists.owner.test>")
        await h.stored(lambda found: len(found) == 4 and all(m.seen for m in found), "the four mails read")
        await h.write("hello")
        await h.replies()
        assert len(h.mail.smtp.received) == 1 and len(h.model.history) == 1
        said = [r.getMessage() for r in caplog.records if "not answering" in r.getMessage()]
        assert len(said) == 4 and "Auto-Submitted: auto-replied" in said[0] and "mailer-daemon" in said[2]

    run(config, mail, scenario)


def test_an_attachment_is_ignored_and_the_answer_says_so(config: Config, mail: MailServers) -> None:
    async def scenario(h: Harness) -> None:
        message = a_mail(h.owner.address, h.box.address, "Report", "what do you think of it?")
        message.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename="report.pdf")
        await asyncio.to_thread(h.box.deliver, message)
        [reply] = await h.replies()
        assert text_of(reply).startswith("(I cannot open attachments, so I did not read report.pdf.)\n\necho: ")
        assert h.model.history[0].messages[-1].content == "what do you think of it?"

    run(config, mail, scenario)


def test_commands_come_as_the_body_or_the_subject_over_starttls_imap_and_tls_smtp(
    config: Config, mail: MailServers
) -> None:
    owner = mail.dovecot.mailbox()
    configure(config, mail, owner)
    config.email.imap_port, config.email.imap_security = mail.dovecot.imap_port, "starttls"
    config.email.smtp_port, config.email.smtp_security = mail.smtp.tls_port, "tls"

    async def scenario(h: Harness) -> None:
        await h.write("/status\nSent from my phone")
        [status] = await h.replies()
        assert "Model scripted" in text_of(status)
        await h.write("", "/help")
        [_, helped] = await h.replies(2)
        assert "/approve" in text_of(helped) and helped["Subject"] == "Re: /help"
        assert h.model.history == []

    run(config, mail, scenario, owner=owner)


def test_approvals_by_reply_code_act_exactly_once(config: Config, mail: MailServers) -> None:
    config.devices["heater"] = DeviceConfig(driver="relay", pin=5, approval="required")

    async def scenario(h: Harness) -> None:
        devices = h.runtime.devices
        assert devices is not None
        pending = (await devices.set("heater", "on", requested_by="model")).pending
        assert pending is not None
        await h.write("/approve")
        [listed] = await h.replies()
        assert f"reply /approve {pending.id}" in text_of(listed)
        html = str(listed.get_body(preferencelist=("html",)).get_content())  # type: ignore[union-attr]
        assert f'href="mailto:{h.box.address}?subject=/approve%20{pending.id}"' in html.replace("&amp;", "&")

        approve = await h.write(f"/approve {pending.id}", "Re: /approve")
        await h.replies(2)
        assert devices.backend.pin_factory.pin(5).state and devices.approvals.get(pending.id).status == "approved"
        assert devices.approvals.get(pending.id).decided_by == f"email:{h.owner.address}"
        await asyncio.to_thread(h.box.deliver, approve)  # the same mail delivered again: handled once
        await h.stored(lambda found: len(found) == 3 and all(m.seen for m in found), "the copy read")
        await h.write(f"/approve {pending.id}", "again")  # a new mail: the approval store says it is done
        [*_, again] = await h.replies(3)
        assert "already approved" in text_of(again) and len(h.mail.smtp.received) == 3

    run(config, mail, scenario)


def test_a_code_in_a_strangers_mail_pairs_that_address_once(config: Config, mail: MailServers) -> None:
    async def scenario(h: Harness) -> None:
        code = create_code(h.runtime.db, "email", clock=h.clock)
        await h.write(f"{(int(code) + 1) % 10**6:06d}", "pair", sender=STRANGER)
        await h.write(f"{code}\n\n-- \nA friend", "pair", sender="Friend@Else.test")
        [paired] = await h.replies(to="friend@else.test")
        assert text_of(paired).startswith("Paired: you can talk to me now.")
        assert is_paired("email", h.runtime.db, "friend@else.test") and not is_paired("email", h.runtime.db, STRANGER)
        await h.write(code, "pair", sender="other@else.test")  # used already
        await h.write("hello", "hi", sender="friend@else.test")
        await h.replies(2, to="friend@else.test")
        assert not h.mail.smtp.to(STRANGER) and not h.mail.smtp.to("other@else.test")
        assert h.model.history[-1].messages[-1].content == "hello"

    run(config, mail, scenario)


def test_a_subject_that_decodes_to_a_line_break_is_answered_on_one_line_and_stops_no_later_mail(
    config: Config, mail: MailServers
) -> None:
    """Issue 31 finding 5: RFC 2047 made a CR LF of the subject, the answer could not be built, and the
    outbox, oldest first, sent nothing on this channel again. Headers are cleaned where mail comes in
    and where mail is built; a mail that cannot be built is marked failed and the next one goes."""
    evil = base64.b64encode(b"hi\r\nBcc: thief@else.test").decode()

    async def scenario(h: Harness) -> None:
        raw = (
            f"From: Owner <{h.owner.address}>\r\nTo: {h.box.address}\r\nSubject: =?utf-8?b?{evil}?=\r\n"
            "Message-ID: <crlf@owner.test>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nhello\r\n"
        ).encode()
        await asyncio.to_thread(h.box.deliver, raw)
        [reply] = await h.replies()
        assert reply["Subject"] == "Re: hi Bcc: thief@else.test" and reply["Bcc"] is None
        assert reply["In-Reply-To"] == "<crlf@owner.test>"

        notifier = Notifier(h.outbox, {"email": h.channel}, lambda: ["email"])
        notifier.notify("Alarm\rBcc: thief@else.test\nsmoke in the kitchen", "event")  # a CR in its first line
        notifier.notify("Doorbell: pressed", "event")
        [_, alarm, doorbell] = await h.replies(3)
        assert alarm["Subject"] == "Alarm Bcc: thief@else.test" and doorbell["Subject"] == "Doorbell: pressed"
        assert [r.rcpt_tos for r in h.mail.smtp.received] == [(h.owner.address,)] * 3  # no Bcc anywhere

        # A row that can never be built (no address to send it to): failed, on the feed, and the next one goes.
        lost = h.outbox.enqueue("email", "owner\r\nBcc: thief@else.test", "Backup finished", "reply")
        notifier.notify("Window open", "event")
        [*_, window] = await h.replies(4)
        assert window["Subject"] == "Window open"
        status, error = h.runtime.db.rows("SELECT status, last_error FROM outbox WHERE id = ?", (lost,))[0]
        assert status == "failed" and error.startswith("ValueError: ") and "is not an e-mail address" in error
        [feed] = [item for item in recent(h.runtime.db) if item["kind"] == "undelivered"]
        assert feed["delivery"] == "failed" and feed["text"].endswith("could not be sent: Backup finished")

    run(config, mail, scenario)


# --- exactly once --------------------------------------------------------------------------------------


def test_smtp_refusing_leaves_the_mail_unanswered_until_it_accepts_then_answers_once(
    config: Config, mail: MailServers
) -> None:
    async def scenario(h: Harness) -> None:
        h.mail.smtp.refuse("451 4.3.0 Mailbox busy")
        asked = await h.write("are you there?", "Ping")
        await eventually(lambda: rows(h) != [] and h.channel.turns_in_flight == 0, what="the answer stored")
        [(text, status)] = rows(h)
        assert text.startswith("echo: are you there?") and status == "pending"
        [stored] = await h.stored(lambda found: found[0].seen, "the mail read")
        assert ANSWERED not in stored.flags and not h.mail.smtp.received
        assert h.channel.up  # a 451 is not an outage

        h.mail.smtp.accept()
        await h.drain()
        [reply] = await h.replies()
        assert reply["In-Reply-To"] == asked["Message-ID"] and reply["Subject"] == "Re: Ping"
        await h.stored(lambda found: ANSWERED in found[0].flags, "the \\Answered flag")
        h.clock.advance(3600)
        await h.channel.delivery.deliver_due()
        assert len(h.mail.smtp.received) == 1 and len(h.mail.smtp.refused) >= 1 and len(h.model.history) == 1

    run(config, mail, scenario)


def test_a_restart_between_receiving_and_answering_answers_exactly_once(
    config: Config, mail: MailServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base, "STOP_GRACE_S", 0.05)  # the stop cancels the turn: as a power cut would
    model = BlockedModel()

    async def scenario(h: Harness) -> None:
        asked = await h.write("what should I cook tonight?", "Time")  # a question for the model
        await eventually(lambda: model.asked == 1, what="the turn to start")
        await h.channel.stop()
        status = h.runtime.db.value("SELECT status FROM inbound WHERE remote_id = ?", (asked["Message-ID"],))
        assert status == "received" and not h.mail.smtp.received
        [stored] = await asyncio.to_thread(h.box.messages)
        assert not stored.seen

        model.go.set()
        h.channel = h.new_channel()
        await h.channel.start()
        [reply] = await h.replies()
        assert reply["In-Reply-To"] == asked["Message-ID"]
        await h.stored(lambda found: ANSWERED in found[0].flags, "the \\Answered flag")
        await h.channel.stop()
        h.channel = h.new_channel()  # and once more: nothing is answered again
        await h.channel.start()
        await h.write("and now?", "Later")
        await h.replies(2)
        assert [r.message["Subject"] for r in h.mail.smtp.received] == ["Re: Time", "Re: Later"]

    run(config, mail, scenario, model)


def test_a_proactive_message_reaches_the_owner_when_smtp_is_back(
    config: Config, mail: MailServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base, "CONNECT_RETRY_S", (0.05,))
    mail.smtp.stop()

    async def scenario(h: Harness) -> None:
        assert not h.channel.up and h.channel.problem is not None
        assert h.channel.problem.startswith(f"cannot reach the SMTP server 127.0.0.1:{h.mail.smtp.port}")
        notifier = Notifier(h.outbox, {"email": h.channel}, lambda: ["email"])
        notifier.notify("The living room is over 28 °C.\nOpen a window?", "event")
        assert rows(h) == [("The living room is over 28 °C.\nOpen a window?", "pending")]
        h.mail.smtp.start()
        [sent] = await h.replies()
        assert h.channel.up and sent["Subject"] == "The living room is over 28 °C."
        assert sent["Auto-Submitted"] == "auto-generated" and "Open a window?" in text_of(sent)
        await h.channel.delivery.deliver_due()
        assert rows(h) == [("The living room is over 28 °C.\nOpen a window?", "sent")]

    try:
        run(config, mail, scenario)
    finally:
        if not mail.smtp._controllers:
            mail.smtp.start()


def test_a_restart_mid_delivery_loses_nothing_and_sends_nothing_twice(config: Config, mail: MailServers) -> None:
    async def scenario(h: Harness) -> None:
        notifier = Notifier(h.outbox, {"email": h.channel}, lambda: ["email"])
        h.mail.smtp.hold()
        notifier.notify("Doorbell: pressed", "event")
        await eventually(lambda: h.mail.smtp.holding == 1, what="the first mail in SMTP's DATA")
        stopping = asyncio.ensure_future(h.channel.stop())  # waits for the send in flight
        notifier.notify("Backup finished", "event")  # while stopping: stays for the next start
        h.mail.smtp.release()
        await stopping
        h.channel = h.new_channel()
        await h.channel.start()
        await h.replies(2)
        await h.drain()
        subjects = [r.message["Subject"] for r in h.mail.smtp.received]
        assert subjects == ["Doorbell: pressed", "Backup finished"]
        assert [status for _, status in rows(h)] == ["sent", "sent"]

    run(config, mail, scenario)


# --- connecting ----------------------------------------------------------------------------------------


def test_without_idle_the_folder_is_polled(config: Config, mail: MailServers) -> None:
    from tests.fakes.mail_servers import NO_IDLE_HOST

    owner = mail.dovecot.mailbox()
    configure(config, mail, owner)
    config.email.imap_host, config.email.smtp_host, config.email.poll_s = NO_IDLE_HOST, "127.0.0.1", 0.2

    async def scenario(h: Harness) -> None:
        assert h.channel.inbox is not None and not h.channel.inbox.idle
        assert state_of(h.channel)["detail"] == f"as {h.box.address} (checked every 0.2 s)"
        await h.write("hello")
        await h.replies()

    run(config, mail, scenario, owner=owner)


def test_a_refused_password_or_an_unreachable_server_leaves_the_channel_off_with_the_reason(
    config: Config, mail: MailServers
) -> None:
    async def main() -> None:
        configure(config, mail, mail.box)
        runtime = Runtime.open(config, model=ScriptedModel())
        try:
            config.email.password = "wrong"
            channel = EmailChannel(config.email, runtime, Outbox(runtime.db))
            await channel.start()
            assert channel.problem == "the SMTP server refused email.username/password" and not channel.up
            await channel.stop()

            config.email.password, config.email.ca_file = mail.box.password, ""  # the system's CAs only
            channel = EmailChannel(config.email, runtime, Outbox(runtime.db))
            await channel.start()
            assert channel.problem is not None and "is not trusted; email.ca_file can name" in channel.problem
            await asyncio.wait_for(channel.stop(), 2)

            config.email.ca_file = str(mail.dovecot.cert.cert)
            config.email.imap_port = 9  # nothing listens there
            channel = EmailChannel(config.email, runtime, Outbox(runtime.db))
            await channel.start()
            assert channel.problem is not None and channel.problem.startswith("cannot reach the IMAP server")
            await asyncio.wait_for(channel.stop(), 2)  # the retry in the background is cancelled
        finally:
            runtime.close()

    asyncio.run(main())


def test_a_wrong_imap_password_is_reported_and_the_daemon_runs_on(config: Config, mail: MailServers) -> None:
    from appliance.daemon import Daemon
    from tests.helpers import started

    configure(config, mail, mail.box)
    config.llm.preload = False
    mail.dovecot.refuse_imap_login(mail.box)  # SMTP takes the login, so IMAP's refusal is what is reported

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        assert daemon.channels is not None
        email = daemon.channels.get("email")
        assert email is not None and email.problem == "the IMAP server refused email.username/password"
        [state] = [s for s in daemon.channels.states() if s["name"] == "email"]
        assert state == {"name": "email", "enabled": True, "up": False, "detail": email.problem}
        assert not served.done()
        daemon.stopping.set()
        assert await served == 0

    asyncio.run(main())


# --- reading mail --------------------------------------------------------------------------------------


def test_reading_a_mail_keeps_what_was_written_now() -> None:
    quoted = a_mail("Ann <Ann@Home.test>", "pico@pico.test", "Re: Re: Lights", "", References="<a@x> <b@x>")
    quoted.set_content("yes please\n\nOn Mon, 1 Jan 2029, pico wrote:\n> Turn the porch light on?\n")
    mail = read_mail(bytes(quoted))
    assert (mail.sender, mail.sender_name, mail.subject) == ("ann@home.test", "Ann", "Lights")
    assert mail.text == "yes please" and mail.thread == "<a@x>" and mail.automatic == ""

    html_only = a_mail("ann@home.test", "pico@pico.test", "Hi", "")
    html_only.set_content("<p>turn on<br>the fan</p><blockquote>old</blockquote>", subtype="html")
    assert read_mail(bytes(html_only)).text == "turn on\nthe fan"
    assert read_mail(bytes(a_mail("ann@home.test", "p@p.test", "/status", ""))).text == "/status"
    report = a_mail("ann@home.test", "p@p.test", "x", "y")
    report.replace_header("Content-Type", "multipart/report; report-type=delivery-status; boundary=b")
    assert read_mail(bytes(report)).automatic == "a delivery report"
    assert read_mail(b"\xff\xfe not a mail").sender == ""  # nothing to answer, nothing raised

    # Header values come in on one line, or not at all (RFC 2047 can encode any control character).
    name = base64.b64encode("Ann\u2028Smith\x1b[31m".encode()).decode()  # a line separator, an escape
    raw = (
        f"From: =?utf-8?b?{name}?= <ann@home.test>\r\nTo: p@p.test\r\nSubject: =?utf-8?q?a=0Db=E2=80=A8c?=\r\n"
        "Message-ID: <bad\x01id@x>\r\nReferences: <good@x> <also\x7fbad@x>\r\n\r\nhi\r\n"
    ).encode()
    odd = read_mail(raw)
    assert (odd.sender, odd.sender_name, odd.subject) == ("ann@home.test", "Ann Smith [31m", "a b c")
    assert odd.message_id == "" and odd.references == ("<good@x>",)
    crlf = base64.b64encode(b"Ann\r\nBcc: x@else.test").decode()
    assert read_mail(raw.replace(name.encode(), crlf.encode())).sender == ""  # CR LF in From: nobody to answer


def test_the_mail_libraries_load_only_with_the_channel() -> None:
    code = (
        "import sys, appliance.daemon, appliance.channels.registry, appliance.channels.email.message\n"
        "print(sorted(m for m in sys.modules if m.startswith(('aioimaplib', 'aiosmtplib'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_password_reaches_no_log_line(config: Config, mail: MailServers, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario(h: Harness) -> None:
        await h.write("hello")
        await h.replies()

    run(config, mail, scenario)
    password = mail.box.password
    plain = base64.b64encode(f"\0{mail.box.username}\0{password}".encode()).decode()  # SMTP AUTH PLAIN
    secrets = [password, plain, base64.b64encode(password.encode()).decode()]
    logged = [r.getMessage() + repr(r.args) for r in caplog.records]
    assert any("LOGIN" in line for line in logged)  # the IMAP conversation is logged at DEBUG, scrubbed
    assert not [line for line in logged if any(s in line for s in secrets)]
