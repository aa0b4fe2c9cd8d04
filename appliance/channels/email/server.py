"""Where and how to log in to a mail server, from EmailConfig: the SMTP submission's settings, and, with its
folder and how often to look, the IMAP inbox's (:class:`appliance.channels.email.imap.ImapSettings`)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass


@dataclass(frozen=True)
class MailServer:
    """A mail server and the mailbox's login on it."""

    host: str
    port: int
    security: str  # "tls" | "starttls" | "none"
    username: str
    password: str
    tls: ssl.SSLContext | None
