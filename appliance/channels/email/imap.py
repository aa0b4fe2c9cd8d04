"""The IMAP side of the e-mail channel: one connection (aioimaplib) that finds unread mail and marks it.

Why aioimaplib: it is asyncio-native, so waiting in IDLE for minutes costs no thread and stopping is a
task cancel; every command has a timeout; and it speaks IDLE (the standard library's imaplib has no
IDLE before Python 3.14, and a blocking read in a thread cannot be interrupted cleanly). It has no
STARTTLS (an open issue upstream), so :meth:`Inbox.open` sends the command and upgrades the socket with
asyncio's own ``loop.start_tls`` — ten lines, exercised against dovecot in the tests.

The loop (:meth:`Inbox.run`): ``UID SEARCH UNSEEN``, each unread mail fetched with ``BODY.PEEK[]`` (which
does not set \\Seen) and handed to the channel once per connection; then the flags the channel asked for
are stored (``UID STORE +FLAGS``), and the connection waits: in IDLE where the server announces it
(renewed every 5 minutes, see :data:`IDLE_RENEW_S`), else ``poll_s`` seconds; a flag to store ends the
wait early. Closing stores the flags still due first. What the flags mean is the channel's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aioimaplib
from aioimaplib.aioimaplib import Command

from appliance.channels.base import ChannelDown
from appliance.channels.email.server import MailServer

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0  # any one IMAP command
# RFC 2177: re-issue IDLE within 29 minutes. Sooner, because a home router may forget a connection that
# is quiet for minutes, and because a mail reported while a SEARCH ran (aioimaplib drops such unsolicited
# EXISTS) is then found by the next SEARCH at the latest.
IDLE_RENEW_S = 5 * 60.0
SEEN = "\\Seen"
ANSWERED = "\\Answered"


@dataclass(frozen=True)
class Fetched:
    """One unread mail: where it is (UID within the folder's UIDVALIDITY) and its raw bytes."""

    uid: int
    uidvalidity: int
    raw: bytes


@dataclass(frozen=True)
class ImapSettings(MailServer):
    """Where and how to log in (from EmailConfig), the folder to read and how often to look without IDLE."""

    folder: str
    poll_s: float


class Inbox:
    """One IMAP session on one folder: :meth:`open`, then :meth:`run` until it raises or is cancelled."""

    def __init__(self, settings: ImapSettings, on_mail: Callable[[Fetched], Awaitable[None]]) -> None:
        self.settings = settings
        self.on_mail = on_mail  # called once per unread mail and connection; must return quickly
        self.uidvalidity = 0
        self.idle = False  # whether the server announced IDLE
        self._client: aioimaplib.IMAP4 | None = None
        self._idling: asyncio.Future[Any] | None = None  # the IDLE command while it runs
        self._done_sent = False  # whether DONE was sent for it
        self._closing = False
        self._offered: set[int] = set()  # UIDs handed to on_mail on this connection
        self._flags: dict[tuple[int, int], set[str]] = {}  # (uidvalidity, uid) -> flags still to store
        self._wake = asyncio.Event()
        self._lost = asyncio.Event()

    # --- connecting ---------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, log in, select the folder; :class:`ChannelDown` says why not (permanent: fix the config)."""
        s = self.settings
        where = f"the IMAP server {s.host}:{s.port}"
        self._lost.clear()
        self._offered.clear()
        self._idling, self._done_sent = None, False
        client = aioimaplib.IMAP4(
            host=s.host,
            port=s.port,
            timeout=TIMEOUT_S,
            conn_lost_cb=self._connection_lost,
            ssl_context=s.tls if s.security == "tls" else None,
        )
        self._client = client
        try:
            await client.wait_hello_from_server()
            if s.security == "starttls":
                await self._starttls(client)
            if "LOGINDISABLED" in client.protocol.capabilities:
                raise ChannelDown(
                    f"{where} wants TLS before the password: set email.imap_security to tls or starttls",
                    permanent=True,
                )
            login = await client.login(s.username, s.password)
            if login.result != "OK":
                text = _text(login.lines)
                if "UNAVAILABLE" in text or "temporar" in text.lower():
                    raise ChannelDown(f"{where} cannot log in now: {text}")
                raise ChannelDown("the IMAP server refused email.username/password", permanent=True)
            selected = await client.select(s.folder)
            if selected.result != "OK":
                raise ChannelDown(f"{where} has no folder {s.folder!r} (email.folder)", permanent=True)
        except ChannelDown:
            raise
        except ssl.SSLCertVerificationError as exc:
            raise ChannelDown(
                f"the certificate of {where} is not trusted ({exc.verify_message});"
                " email.ca_file can name the one to trust"
            ) from None
        except (OSError, TimeoutError, aioimaplib.AioImapException) as exc:
            raise ChannelDown(f"cannot reach {where}: {_reason(exc)}") from None
        self.uidvalidity = _uidvalidity(selected.lines)
        self.idle = client.has_capability("IDLE")
        log.info(
            "email: reading %s on %s as %s (%s)",
            s.folder,
            s.host,
            s.username,
            "IDLE" if self.idle else f"checking every {s.poll_s:g} s",
        )

    async def _starttls(self, client: aioimaplib.IMAP4) -> None:
        protocol = client.protocol
        if "STARTTLS" not in protocol.capabilities:
            raise ChannelDown(
                f"the IMAP server {self.settings.host} offers no STARTTLS: set email.imap_security to tls",
                permanent=True,
            )
        response = await asyncio.wait_for(
            protocol.execute(Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)), TIMEOUT_S
        )
        if response.result != "OK":
            raise ChannelDown(f"the IMAP server {self.settings.host} refused STARTTLS: {_text(response.lines)}")
        loop = asyncio.get_running_loop()
        context = self.settings.tls or ssl.create_default_context()
        transport = await asyncio.wait_for(
            loop.start_tls(protocol.transport, protocol, context, server_hostname=self.settings.host),
            TIMEOUT_S,
        )
        protocol.transport = transport
        await asyncio.wait_for(protocol.capability(), TIMEOUT_S)  # what the server offers may change with TLS

    def stop_soon(self) -> None:
        """End :meth:`run` at its next step (a cancel alone can be lost: Python 3.11's wait_for may swallow it)."""
        self._closing = True
        self._wake.set()

    def _connection_lost(self, exc: Exception | None) -> None:
        self._lost.set()
        self._wake.set()

    async def close(self) -> None:
        """End IDLE, store the flags still due and log out (each briefly), then drop the connection."""
        client, self._client = self._client, None
        if client is None:
            return
        try:
            if not self._lost.is_set() and client.has_pending_idle():
                if not self._done_sent:
                    client.idle_done()
                    self._done_sent = True
                if self._idling is not None:
                    await asyncio.wait({self._idling}, timeout=2.0)  # never cancels the IDLE command itself
            if not self._lost.is_set() and not client.has_pending_idle():
                await asyncio.wait_for(self._store_flags(client), 2.0)
                await asyncio.wait_for(client.logout(), 2.0)
        except Exception as exc:  # closing anyway; flags not stored are stored after the next login
            log.debug("email: closing the IMAP connection: %s", _reason(exc))
        finally:
            transport = getattr(client.protocol, "transport", None)
            if transport is not None:
                transport.close()

    # --- flags --------------------------------------------------------------------------------------

    def mark(self, uid: int, uidvalidity: int, *flags: str) -> None:
        """Store ``flags`` on a mail soon (a mail of an older UIDVALIDITY is no longer addressable: skipped)."""
        if uid <= 0:
            return
        self._flags.setdefault((uidvalidity, uid), set()).update(flags)
        self._wake.set()

    async def _store_flags(self, client: aioimaplib.IMAP4) -> None:
        while self._flags:
            key = next(iter(self._flags))
            flags = self._flags.pop(key)
            uidvalidity, uid = key
            if uidvalidity != self.uidvalidity:
                log.info("email: mail %d is from an older UIDVALIDITY; not flagging it", uid)
                continue
            try:
                stored = await client.uid("store", str(uid), "+FLAGS", f"({' '.join(sorted(flags))})")
            except BaseException:
                self._flags.setdefault(key, set()).update(flags)  # stored on the next connection
                raise
            if stored.result != "OK":
                log.warning("email: could not flag mail %d %s: %s", uid, sorted(flags), _text(stored.lines))

    # --- the loop -----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Find unread mail, store flags, wait for news: until :meth:`stop_soon`; raises when the connection fails."""
        client = self._client
        if client is None:
            raise RuntimeError("the inbox is not open")
        while not self._closing:
            if self._lost.is_set():
                raise ConnectionError("the IMAP server closed the connection")
            self._wake.clear()
            await self._store_flags(client)
            await self._fetch_unread(client)
            if self._wake.is_set():
                continue  # flags (or a stop) arrived meanwhile
            if self.idle:
                await self._idle(client)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.settings.poll_s)

    async def _fetch_unread(self, client: aioimaplib.IMAP4) -> None:
        found = await client.uid_search("UNSEEN", charset=None)
        if found.result != "OK":
            raise ConnectionError(f"UID SEARCH failed: {_text(found.lines)}")
        uids = sorted({int(u) for line in found.lines[:-1] for u in _bytes(line).split() if u.isdigit()})
        for uid in uids:
            if uid in self._offered:
                continue
            fetched = await client.uid("fetch", str(uid), "(BODY.PEEK[])")
            raw = next((bytes(item) for item in fetched.lines if isinstance(item, bytearray)), None)
            if fetched.result != "OK" or raw is None:
                log.warning("email: could not fetch mail %d: %s", uid, _text(fetched.lines))
                continue
            self._offered.add(uid)
            await self.on_mail(Fetched(uid, self.uidvalidity, raw))

    async def _idle(self, client: aioimaplib.IMAP4) -> None:
        """Wait in IDLE until the server reports a change, a flag is to be stored, or it is time to renew."""
        idle = self._idling = await client.idle_start(timeout=IDLE_RENEW_S)
        self._done_sent = False
        push = asyncio.ensure_future(client.wait_server_push(timeout=IDLE_RENEW_S + 60))
        wake = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({push, wake}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            push.cancel()
            wake.cancel()
        if self._lost.is_set():
            raise ConnectionError("the IMAP server closed the connection")
        client.idle_done()
        self._done_sent = True  # DONE twice would be a protocol error (close() checks this)
        await asyncio.wait_for(asyncio.shield(idle), TIMEOUT_S)  # a stop here leaves the command to close()
        self._idling = None


def _bytes(line: Any) -> str:
    return bytes(line).decode(errors="replace") if isinstance(line, bytes | bytearray) else str(line)


def _text(lines: list[Any]) -> str:
    return " ".join(_bytes(line) for line in lines if not isinstance(line, bytearray)).strip()


def _uidvalidity(lines: list[Any]) -> int:
    for line in lines:
        found = re.search(r"UIDVALIDITY (\d+)", _bytes(line))
        if found:
            return int(found.group(1))
    return 0


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer (timed out)"
    return str(exc) or type(exc).__name__
