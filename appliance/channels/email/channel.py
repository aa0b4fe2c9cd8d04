"""The e-mail channel: a mailbox of its own, read over IMAP (:mod:`.imap`), answered over SMTP (:mod:`.smtp`).

Every unread mail in ``email.folder`` is read (:mod:`.message`) and, unless a machine sent it (an
auto-reply, a bounce, a list: never answered, one log line, so no mail loop can start) or it is the
assistant's own, handed to :meth:`ChatChannel.handle` like any chat message: the allowlist and pairing
(a stranger's mail whose body is only a 6-digit code pairs that address), commands (``/status`` as the
body's first line or as the subject; buttons become reply commands such as ``/approve 3f2a``), one
turn per thread (a thread is a session), the answer with the footer. The answer goes out in the same
thread (In-Reply-To, References, "Re: subject"), as plain text plus a simple HTML part, and says which
attachments it did not read. Proactive messages go through the outbox to ``owner`` as new mails.

Exactly once, across restarts, with two IMAP flags and the ``inbound`` table (its key: the mail's
Message-ID, else ``imap:<uidvalidity>:<uid>``):

- ``\\Answered`` is set only after SMTP accepted the answer (250 to DATA): in :meth:`say` or, when
  SMTP refused or was unreachable, in :meth:`deliver` once the outbox gets it through.
- ``\\Seen`` is set when the mail needs nothing more from IMAP: it was ignored, or its answer is
  durable (accepted, or stored in the outbox, which resends it with the thread headers in its meta).
- Only ``UNSEEN`` mail is read. An unseen mail whose ``inbound`` row says *handled* had its answer
  stored but the flag not yet (a stop in between): it is only flagged. An unseen mail whose row says
  *received* and that no turn of this process is working on was interrupted by a restart before its
  answer was stored: its row is dropped and it is answered now, once. The one window left is a stop
  between SMTP's 250 and the row being marked (milliseconds); the resend then carries a new Message-ID.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
import time
from collections.abc import Callable
from email.message import EmailMessage
from typing import Any

from appliance.channels import base
from appliance.channels.base import ChannelDown, ChatChannel, Incoming
from appliance.channels.commands import Said
from appliance.channels.email.imap import ANSWERED, SEEN, Fetched, ImapSettings, Inbox
from appliance.channels.email.message import InboundMail, answer_mail, message_id, new_mail, read_mail
from appliance.channels.email.server import MailServer
from appliance.channels.email.smtp import SendFailed, Submission
from appliance.channels.pairing import forget_unhandled, inbound_status
from appliance.config import EmailConfig
from appliance.outbox import Outbox, Outcome, OutMessage
from appliance.runtime import Runtime

log = logging.getLogger(__name__)


class EmailChannel(ChatChannel):
    """The assistant's mailbox: unread mail from allowed senders answered in its thread."""

    name = "email"
    buttons = False

    def __init__(
        self, config: EmailConfig, runtime: Runtime, outbox: Outbox, *, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(config, runtime, outbox, clock=clock)
        self.config: EmailConfig = config
        # addresses compare in lower case, whatever the config wrote
        self.doorkeeper.allow_from = lambda: {a.strip().lower() for a in self.config.allow_from}
        self.inbox: Inbox | None = None
        self.submission: Submission | None = None
        self._watching: asyncio.Task[None] | None = None
        self._working: set[str] = set()  # remote ids a turn of this process is answering
        self._imap_problem: str | None = None
        self._smtp_problem: str | None = None

    def owner_target(self) -> str | None:
        """The owner's address (``owner``, else the first of ``allow_from``, else the first paired), lower case."""
        target = super().owner_target()
        return target.strip().lower() if target else None

    @property
    def address(self) -> str:
        """The assistant's own address."""
        return (self.config.address or self.config.username).strip().lower()

    # --- connecting ---------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Check the config and the SMTP login, open the folder, and watch it in the background."""
        tls = self._settings()
        self.submission = Submission(
            MailServer(
                self.config.smtp_host or self.config.imap_host,
                self.config.smtp_port,
                self.config.smtp_security,
                self.config.username,
                self.config.password,
                tls,
            )
        )
        await self.submission.check()
        self.inbox = self._new_inbox(tls)
        await self.inbox.open()
        self._imap_problem = self._smtp_problem = None
        self.detail = self._detail()
        self._watching = asyncio.ensure_future(self._watch(self.inbox))

    def _settings(self) -> ssl.SSLContext:
        c = self.config
        missing = [k for k in ("imap_host", "username", "password") if not getattr(c, k)]
        if missing:
            raise ChannelDown(f"email.{missing[0]} is empty", permanent=True)
        if "@" not in self.address:
            raise ChannelDown("email.address (or email.username) must be the mailbox's address", permanent=True)
        for key, host in (("imap_security", c.imap_host), ("smtp_security", c.smtp_host or c.imap_host)):
            if getattr(c, key) == "none" and not _is_loopback(host):
                raise ChannelDown(
                    f"email.{key}: none is only for a server on this machine; use tls or starttls", permanent=True
                )
        if c.ca_file:
            try:
                return ssl.create_default_context(cafile=c.ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ChannelDown(f"email.ca_file: cannot read {c.ca_file}: {exc}", permanent=True) from None
        return ssl.create_default_context()

    def _new_inbox(self, tls: ssl.SSLContext) -> Inbox:
        c = self.config
        settings = ImapSettings(
            c.imap_host, c.imap_port, c.imap_security, c.username, c.password, tls, folder=c.folder, poll_s=c.poll_s
        )
        return Inbox(settings, self._arrived)

    def _detail(self) -> str:
        how = "IDLE" if self.inbox is not None and self.inbox.idle else f"checked every {self.config.poll_s:g} s"
        return f"as {self.address} ({how})"

    async def _watch(self, inbox: Inbox) -> None:
        """Read the folder until stopped; reconnect (with backoff) when the connection fails."""
        attempt = 0
        while True:
            try:
                await inbox.run()
                return  # stopped
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._imap_problem = f"lost the IMAP connection: {exc or type(exc).__name__}"
                self._refresh()
            await inbox.close()
            while True:
                await asyncio.sleep(base.CONNECT_RETRY_S[min(attempt, len(base.CONNECT_RETRY_S) - 1)])
                attempt += 1
                try:
                    await inbox.open()
                except ChannelDown as exc:
                    await inbox.close()
                    self._imap_problem = exc.reason
                    self._refresh()
                    if exc.permanent:
                        log.error("email: %s; reading mail stopped until the config is fixed", exc.reason)
                        return
                    continue
                attempt = 0
                self._imap_problem = None
                self._refresh()
                break

    def _refresh(self) -> None:
        """up = IMAP and SMTP both usable (the notifier picks another channel otherwise)."""
        reason = self._imap_problem or self._smtp_problem
        if reason is None:
            self.came_up(self._detail())
        elif self.connected or self.problem != reason:
            self.went_down(reason)

    async def disconnect(self) -> None:
        """Stop watching and log out."""
        if self._watching is not None:
            if self.inbox is not None:
                self.inbox.stop_soon()
            while not self._watching.done():  # cancel again if a cancel was swallowed (3.11's wait_for can)
                self._watching.cancel()
                await asyncio.wait({self._watching}, timeout=1.0)
            self._watching = None
        if self.inbox is not None:
            await self.inbox.close()

    # --- receiving ----------------------------------------------------------------------------------

    async def _arrived(self, fetched: Fetched) -> None:
        """One unread mail: ignore it, flag it, or answer it (in a task of its own)."""
        inbox = self.inbox
        if inbox is None:
            return
        try:
            mail = read_mail(fetched.raw)
        except Exception:  # a mail the parser chokes on must not stop the folder
            log.exception("email: cannot read mail %d; leaving it unread", fetched.uid)
            return
        remote_id = mail.message_id or f"imap:{fetched.uidvalidity}:{fetched.uid}"
        if remote_id in self._working:
            return
        if mail.automatic or mail.sender == self.address:
            why = mail.automatic or "sent by this mailbox"
            log.info("email: not answering mail %d from %s (%s)", fetched.uid, mail.sender or "?", why)
            inbox.mark(fetched.uid, fetched.uidvalidity, SEEN)
            return
        status = await self.db.call(inbound_status, self.db, self.name, remote_id)
        if status == "handled":  # answered (or stored in the outbox) before the flag was set
            inbox.mark(fetched.uid, fetched.uidvalidity, SEEN)
            return
        if status == "received":
            log.warning("email: mail %s from %s was interrupted by a restart; answering it now", remote_id, mail.sender)
            await self.db.call(forget_unhandled, self.db, self.name, remote_id)
        self._working.add(remote_id)
        task = asyncio.ensure_future(self._take(fetched, mail, remote_id))
        self._turns.add(task)
        task.add_done_callback(self._turns.discard)

    async def _take(self, fetched: Fetched, mail: InboundMail, remote_id: str) -> None:
        incoming = Incoming(
            chat_id=mail.sender,
            user_id=mail.sender,
            user_name=mail.sender_name,
            text=mail.text,
            private=True,
            remote_id=remote_id,
            session=mail.thread,
            meta=_reply_meta(fetched, mail),
        )
        try:
            await self.handle(incoming)
        except Exception:
            log.exception("email: handling mail %s failed; it stays unread", remote_id)
            return
        finally:
            self._working.discard(remote_id)
        if not self._stopping and self.inbox is not None:
            self.inbox.mark(fetched.uid, fetched.uidvalidity, SEEN)  # its answer is durable, or it was ignored

    async def command(self, incoming: Incoming, name: str, words: list[str]) -> list[Said]:
        """A command's answers as one mail (/approve lists every pending approval in it)."""
        said = await super().command(incoming, name, words)
        return [Said("\n\n".join(s.text for s in said))] if said else []

    # --- sending ------------------------------------------------------------------------------------

    async def say(self, incoming: Incoming, said: Said) -> None:
        """Answer a mail in its thread; raises when SMTP did not accept it (the base keeps it in the outbox)."""
        mail = self._answer(incoming.chat_id, said.text, incoming.meta, message_id(self._domain()))
        await self._send(mail, incoming.meta)

    async def deliver(self, message: OutMessage) -> Outcome:
        """One outbox message: an answer (its meta has the thread) or a new mail; marked in the outbox."""
        key = (message.id, message.chat_id, message.text)
        if "uid" in message.meta:  # an answer that could not be sent at once
            mail = self._answer(message.chat_id, message.text, message.meta, message_id(self._domain(), *key))
        else:
            mail = new_mail(
                sender=self.address,
                to=message.chat_id,
                text=message.text,
                message_id=message_id(self._domain(), *key),
            )
        try:
            await self._send(mail, message.meta)
        except SendFailed as exc:
            if exc.permanent:
                await self.db.call(self.outbox.mark_failed, message.id, exc.reason)
                log.warning("email: message %d to %s cannot be delivered: %s", message.id, message.chat_id, exc)
                return "failed"
            await self.db.call(self.outbox.mark_retry, message, exc.reason)
            return "retry"
        await self.db.call(self.outbox.mark_sent, message.id, str(mail["Message-ID"]))
        return "sent"

    def _answer(self, to: str, text: str, meta: dict[str, Any], mid: str) -> EmailMessage:
        return answer_mail(
            sender=self.address,
            to=to,
            text=text,
            subject=str(meta.get("subject", "")),
            in_reply_to=str(meta.get("message_id", "")),
            references=[str(r) for r in meta.get("references", [])],
            message_id=mid,
            attachments=[str(a) for a in meta.get("attachments", [])],
        )

    async def _send(self, mail: EmailMessage, meta: dict[str, Any]) -> None:
        """Submit; on acceptance flag the mail it answers (\\Answered); SMTP's state feeds ``up``."""
        if self.submission is None:
            raise SendFailed("the e-mail channel is not connected")
        try:
            await self.submission.send(mail)
        except SendFailed as exc:
            log.warning("email: SMTP did not accept the mail to %s: %s", mail["To"], exc.reason)
            if exc.login or exc.unreachable:
                self._smtp_problem = exc.reason
                self._refresh()
            raise
        if self._smtp_problem is not None:
            self._smtp_problem = None
            self._refresh()
        uid = int(meta.get("uid", 0) or 0)
        if uid and self.inbox is not None:
            self.inbox.mark(uid, int(meta.get("uidvalidity", 0) or 0), SEEN, ANSWERED)

    def _domain(self) -> str:
        return self.address.partition("@")[2]


def _reply_meta(fetched: Fetched, mail: InboundMail) -> dict[str, Any]:
    """What an answer to this mail needs, also when it is sent later from the outbox."""
    return {
        "uid": fetched.uid,
        "uidvalidity": fetched.uidvalidity,
        "message_id": mail.message_id,
        "references": list(mail.references[-9:]),
        "subject": mail.subject,
        "attachments": list(mail.attachments),
    }


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
