"""The e-mail channel against real servers: dovecot (IMAP) and aiosmtpd (SMTP) on 127.0.0.1.

Phase 1 (before the channel): the servers work, and the chosen libraries (aioimaplib, aiosmtplib) do
IDLE, STARTTLS and authenticated submission against them.
"""

from __future__ import annotations

import asyncio
import ssl
from email.message import EmailMessage
from typing import TYPE_CHECKING

import aioimaplib
import aiosmtplib
import pytest
from aioimaplib.aioimaplib import Command

if TYPE_CHECKING:  # the module is a pytest plugin: imported by pytest first, so its asserts are rewritten
    from tests.fakes.mail_servers import MailServers

pytest_plugins = ["tests.fakes.mail_servers"]


def a_mail(sender: str, to: str, subject: str = "hello", body: str = "hi there") -> EmailMessage:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, to, subject
    message["Message-ID"] = f"<{subject.replace(' ', '-')}@owner.test>"
    message.set_content(body)
    return message


async def starttls(client: aioimaplib.IMAP4, context: ssl.SSLContext) -> None:
    protocol = client.protocol
    response = await protocol.execute(Command("STARTTLS", protocol.new_tag(), loop=protocol.loop))
    assert response.result == "OK", response
    loop = asyncio.get_running_loop()
    protocol.transport = await loop.start_tls(protocol.transport, protocol, context, server_hostname="127.0.0.1")
    await protocol.capability()


def test_idle_reports_a_new_mail_at_once(mail: MailServers) -> None:
    box, context = mail.box, mail.dovecot.cert.client_context()

    async def main() -> list[bytes]:
        client = aioimaplib.IMAP4(host="127.0.0.1", port=mail.dovecot.imap_port, timeout=5)
        await client.wait_hello_from_server()
        assert "STARTTLS" in client.protocol.capabilities
        await starttls(client, context)
        assert (await client.login(box.username, box.password)).result == "OK"
        assert (await client.select("INBOX")).result == "OK"
        idle = await client.idle_start(timeout=30)
        await asyncio.to_thread(mail.smtp.send, a_mail("owner@pico.test", box.address), login=box)
        pushed = await client.wait_server_push(timeout=10)
        client.idle_done()
        await asyncio.wait_for(idle, 5)
        found = await client.uid_search("UNSEEN")
        await client.logout()
        return [*pushed, *found.lines]

    lines = asyncio.run(main())
    assert b"1 EXISTS" in lines
    assert lines[-2] == b"1"  # the UID SEARCH UNSEEN answer


def test_submission_needs_tls_and_a_password(mail: MailServers) -> None:
    box, context = mail.box, mail.dovecot.cert.client_context()

    async def main() -> None:
        message = a_mail(box.address, "owner@pico.test", "reply")
        with pytest.raises(aiosmtplib.SMTPAuthenticationError):
            await aiosmtplib.send(
                message, hostname="127.0.0.1", port=mail.smtp.port, start_tls=True, tls_context=context,
                username=box.username, password="wrong",
            )  # fmt: skip
        mail.smtp.refuse(times=1)
        with pytest.raises(aiosmtplib.SMTPDataError) as refused:
            await aiosmtplib.send(
                message, hostname="127.0.0.1", port=mail.smtp.tls_port, use_tls=True, tls_context=context,
                username=box.username, password=box.password,
            )  # fmt: skip
        assert refused.value.code == 451
        await aiosmtplib.send(
            message, hostname="127.0.0.1", port=mail.smtp.tls_port, use_tls=True, tls_context=context,
            username=box.username, password=box.password,
        )  # fmt: skip

    asyncio.run(main())
    [sent] = mail.smtp.to("owner@pico.test")
    assert sent.login == mail.box.username and sent.message["Subject"] == "reply"
    assert mail.smtp.refused == ["<reply@owner.test>"]
    assert mail.box.messages() == []  # not for this mailbox: kept, not delivered
