"""The SMTP side of the e-mail channel: submitting the assistant's mails (aiosmtplib).

aiosmtplib is asyncio-native like the IMAP side (no thread per send, cancellable, a timeout on every
step) and does implicit TLS (465) and STARTTLS (587) itself. One connection per mail: the assistant
sends a few mails an hour, and a fresh connection is never a stale one. A mail counts as sent only
when the server answered its DATA with 250 (:meth:`Submission.send` returns); every failure is a
:class:`SendFailed` saying whether trying again can help (a 4xx or no network) or not (a 5xx).
"""

from __future__ import annotations

import logging
import socket
import ssl
from email.message import EmailMessage

import aiosmtplib

from appliance.channels.base import ChannelDown
from appliance.channels.email.server import MailServer

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0
REFUSED_LOGIN = "the SMTP server refused email.username/password"


class SendFailed(Exception):
    """A mail was not accepted: ``reason`` for people; ``permanent``: sending it again will not help;
    ``login``: the server refused the password or our settings; ``unreachable``: no connection. (Both
    mean no mail goes out now: the channel reports itself down until a send works again.)"""

    def __init__(self, reason: str, *, permanent: bool = False, login: bool = False, unreachable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent
        self.login = login
        self.unreachable = unreachable


class Submission:
    """Mail submission to one SMTP server, with the mailbox's login."""

    def __init__(self, settings: MailServer) -> None:
        self.settings = settings
        self.where = f"the SMTP server {settings.host}:{settings.port}"

    def _client(self) -> aiosmtplib.SMTP:
        s = self.settings
        return aiosmtplib.SMTP(
            hostname=s.host,
            port=s.port,
            use_tls=s.security == "tls",
            start_tls=s.security == "starttls",
            tls_context=s.tls if s.security != "none" else None,
            timeout=TIMEOUT_S,
            local_hostname=socket.gethostname() or "localhost",  # no DNS lookup of our own name
        )

    async def check(self) -> None:
        """Connect and log in once: :class:`ChannelDown` when mail could not be sent now."""
        try:
            client = self._client()
            await client.connect()
            try:
                await client.login(self.settings.username, self.settings.password)
            finally:
                await _quit(client)
        except (aiosmtplib.SMTPException, OSError) as exc:
            failed = self._failure(exc)
            raise ChannelDown(failed.reason, permanent=failed.login) from None

    async def send(self, message: EmailMessage) -> None:
        """Submit ``message`` to its To address; returns once the server accepted it, else :class:`SendFailed`."""
        try:
            client = self._client()
            await client.connect()
            try:
                await client.login(self.settings.username, self.settings.password)
                await client.send_message(message)
            finally:
                await _quit(client)
        except (aiosmtplib.SMTPException, OSError) as exc:
            raise self._failure(exc) from None

    def _failure(self, exc: Exception) -> SendFailed:
        if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
            return SendFailed(REFUSED_LOGIN, permanent=False, login=True)
        if isinstance(exc, aiosmtplib.SMTPNotSupported):
            fix = "set email.smtp_security to tls" if self.settings.security == "starttls" else "check email.smtp_*"
            return SendFailed(f"{self.where}: {exc} ({fix})", permanent=True, login=True)
        if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
            codes = [r.code for r in exc.recipients]
            said = "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in exc.recipients)
            return SendFailed(f"{self.where} refused the recipient: {said}", permanent=all(c >= 500 for c in codes))
        if isinstance(exc, aiosmtplib.SMTPResponseException):
            return SendFailed(f"{self.where} answered {exc.code} {exc.message}", permanent=exc.code >= 500)
        if isinstance(exc, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(exc):
            reason = f"the certificate of {self.where} is not trusted; email.ca_file can name the one to trust"
            return SendFailed(reason, unreachable=True)
        if isinstance(exc, aiosmtplib.SMTPConnectError | aiosmtplib.SMTPTimeoutError | OSError):
            return SendFailed(f"cannot reach {self.where}: {exc}", unreachable=True)
        return SendFailed(f"{self.where}: {exc}", unreachable=True)


async def _quit(client: aiosmtplib.SMTP) -> None:
    if client.is_connected:
        try:
            await client.quit()
        except (aiosmtplib.SMTPException, OSError):
            client.close()
