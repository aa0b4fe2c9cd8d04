"""Real mail servers for the e-mail tests: Debian's dovecot (IMAP) and aiosmtpd (SMTP) on 127.0.0.1.

They are not fakes: the channel talks to a real IMAP server (dovecot 2.3, IDLE, UIDPLUS, STARTTLS and
implicit TLS with a self-signed certificate made here) and a real SMTP server (aiosmtpd with STARTTLS
or implicit TLS, and AUTH only after TLS, as providers do). What is test-made is only the setup:

- :class:`Dovecot` starts ``/usr/sbin/dovecot -F`` with a throwaway config in its own folder (base_dir,
  state, log, passwd-files with plain passwords, Maildirs) on two free ports in ~0.02 s, and stops in
  ~0.1 s; a module-scoped fixture shares one per test file and :meth:`Dovecot.mailbox` gives each test
  a fresh account (a passwd-file of its own: dovecot misses a line added to a file it read in the same
  second). As root, dovecot will not run login processes as root nor touch mail as uid 0, so the login
  processes run as ``dovenull`` in their default chroot, the auth process as root (it reads the
  passwd-files in a 0700 tmp folder), and mail as the ``dovecot`` user chrooted into the Maildir folder
  (``mail_chroot``: the chroot is entered as root, so the 0700 folders above it need no opening up).
  As another user, everything runs as that user without chroots.
- :class:`SmtpServer` is aiosmtpd's ``Controller`` (its own thread and loop) with a submission port
  (STARTTLS required before MAIL and AUTH) and an implicit-TLS port. It accepts the accounts of the
  dovecot it delivers to; a message for one of its mailboxes is appended to that INBOX (so a person's
  mail reaches the appliance over SMTP as in real life), every message is also kept in
  :attr:`SmtpServer.received` for assertions. :meth:`SmtpServer.refuse` answers DATA with a 4xx/5xx
  until :meth:`SmtpServer.accept` (the server did not take the mail), :meth:`SmtpServer.hold` keeps
  DATA waiting (a send in flight), :meth:`SmtpServer.stop`/``start`` take it off and back on its ports.
  On 127.0.0.2 (:data:`NO_IDLE_HOST`) the same dovecot announces no IDLE, so a client polls.

The test side here uses the standard library (``imaplib``/``smtplib``), not the channel's libraries,
so a bug in how the channel drives them is not mirrored by the harness that checks it.
"""

from __future__ import annotations

import asyncio
import ctypes
import datetime
import email
import email.policy
import grp
import imaplib
import ipaddress
import itertools
import logging
import os
import pwd
import re
import shutil
import signal
import smtplib
import socket
import ssl
import subprocess
import tempfile
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage, Message
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.helpers import free_port, wait_for

DOVECOT = Path("/usr/sbin/dovecot")
NO_IDLE_HOST = "127.0.0.2"  # the same dovecot, announcing no IDLE there (as some providers do not)
DOMAIN = "pico.test"
SERVER_NAME = "mail.pico.test"  # what the servers call themselves (no DNS lookup of this host)


# --- the certificate both servers present -------------------------------------------------------------


@dataclass(frozen=True)
class Certificate:
    """A self-signed certificate for 127.0.0.1 and localhost; ``cert`` is also the file a client trusts."""

    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert))


def make_certificate(folder: Path) -> Certificate:
    """A fresh key and a self-signed certificate (valid now, for a day) in ``folder``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address(NO_IDLE_HOST)),
                    x509.DNSName("localhost"),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    found = Certificate(folder / "cert.pem", folder / "key.pem")
    found.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    found.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    found.key.chmod(0o600)
    return found


# --- dovecot ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredMail:
    """One message in a mailbox folder as IMAP shows it."""

    uid: int
    flags: frozenset[str]
    message: Message

    @property
    def seen(self) -> bool:
        return "\\Seen" in self.flags


@dataclass
class Mailbox:
    """One dovecot account: what the channel logs in with, and the test's own IMAP access to it."""

    server: Dovecot
    username: str
    password: str
    address: str

    def _connect(self) -> imaplib.IMAP4_SSL:
        client = imaplib.IMAP4_SSL("127.0.0.1", self.server.imaps_port, ssl_context=self.server.cert.client_context())
        client.login(self.username, self.password)
        return client

    def deliver(self, message: Message | bytes, folder: str = "INBOX", flags: str = "") -> int:
        """Put ``message`` into ``folder`` (IMAP APPEND); its UID."""
        raw = message if isinstance(message, bytes) else message.as_bytes(policy=email.policy.SMTP)
        client = self._connect()
        try:
            status, data = client.append(folder, f"({flags})" if flags else None, None, raw)
            assert status == "OK", data
            found = re.search(rb"APPENDUID \d+ (\d+)", data[0] or b"")
            assert found, data
            return int(found.group(1))
        finally:
            client.logout()

    def messages(self, folder: str = "INBOX") -> list[StoredMail]:
        """Every message in ``folder`` with its flags, oldest first (read without setting \\Seen)."""
        client = self._connect()
        try:
            status, _ = client.select(folder, readonly=True)
            assert status == "OK", f"no folder {folder}"
            status, data = client.uid("FETCH", "1:*", "(UID FLAGS BODY.PEEK[])")
            found: list[StoredMail] = []
            for item in data:
                if not isinstance(item, tuple):
                    continue
                head, body = item
                uid = re.search(rb"UID (\d+)", head)
                flags = re.search(rb"FLAGS \(([^)]*)\)", head)
                assert uid and flags, head
                message = email.message_from_bytes(body, policy=email.policy.default)
                found.append(StoredMail(int(uid.group(1)), frozenset(flags.group(1).decode().split()), message))
            return found
        finally:
            client.logout()


class Dovecot:
    """A dovecot IMAP server of its own in ``root`` on 127.0.0.1: ``imap_port`` (STARTTLS), ``imaps_port`` (TLS).

    On :data:`NO_IDLE_HOST` (127.0.0.2, the same ports) it announces no IDLE, so a client polls.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.imap_port = free_port()
        self.imaps_port = free_port()
        self.cert = make_certificate(root / "tls")
        self.passwd = root / "passwd"  # one passwd-file per account: dovecot reads a new one at its first login
        self.mail = root / "mail"
        self.log = root / "dovecot.log"
        self.mailboxes: dict[str, Mailbox] = {}
        self._names = itertools.count(1)
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._as_root = os.geteuid() == 0

    # the account owner of mail files: the dovecot user as root (mail as uid 0 is refused), else oneself
    def _mail_owner(self) -> tuple[int, int]:
        if self._as_root:
            user = pwd.getpwnam("dovecot")
            return user.pw_uid, user.pw_gid
        return os.getuid(), os.getgid()

    def _config(self) -> str:
        uid, gid = self._mail_owner()
        me, group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
        if self._as_root:
            users = f"""
default_internal_user = dovecot
default_internal_group = dovecot
default_login_user = dovenull
mail_uid = {uid}
mail_gid = {gid}
first_valid_uid = {uid}
first_valid_gid = {gid}
mail_chroot = {self.mail}
service auth {{
  user = root
}}
"""
            home = "/%u"  # inside the chroot
            anvil_chroot = ""
        else:
            users = f"""
default_internal_user = {me}
default_internal_group = {group}
default_login_user = {me}
first_valid_uid = {uid}
first_valid_gid = {gid}
service imap-login {{
  chroot =
}}
"""
            home = f"{self.mail}/%u"
            anvil_chroot = "  chroot =\n"
        return f"""# a throwaway dovecot for picoagent's tests
base_dir = {self.root}/run
state_dir = {self.root}/state
log_path = {self.log}
protocols = imap
listen = 127.0.0.1, {NO_IDLE_HOST}
ssl = yes
ssl_cert = <{self.cert.cert}
ssl_key = <{self.cert.key}
disable_plaintext_auth = yes
auth_mechanisms = plain login
auth_failure_delay = 0
{users}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN {self.passwd}/%u
}}
userdb {{
  driver = passwd-file
  args = {self.passwd}/%u
  default_fields = home={home}
}}
mail_location = maildir:~/Maildir
local {NO_IDLE_HOST} {{
  protocol imap {{
    imap_capability = IMAP4rev1 LITERAL+ SASL-IR LOGIN-REFERRALS ID ENABLE UIDPLUS
  }}
}}
# no login penalty: after a refused password dovecot delays the next logins from that address 2-15 s
service anvil {{
{anvil_chroot}  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
service imap-login {{
  inet_listener imap {{
    port = {self.imap_port}
  }}
  inet_listener imaps {{
    port = {self.imaps_port}
  }}
}}
"""

    def start(self) -> None:
        """Start it and wait until both ports take connections."""
        for folder in ("run", "state", "mail"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        self.mail.chmod(0o755)  # the chroot's "/" for the mail processes
        self.passwd.mkdir(exist_ok=True)
        config = self.root / "dovecot.conf"
        config.write_text(self._config(), encoding="utf-8")
        self._process = subprocess.Popen(
            [str(DOVECOT), "-F", "-c", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() ends the master and its children at once
            preexec_fn=_end_with_parent,
        )

        def listening() -> bool:
            if self._process is not None and self._process.poll() is not None:
                raise AssertionError(f"dovecot exited: {self._output()}")
            return all(_accepts(port) for port in (self.imap_port, self.imaps_port))

        wait_for(listening, 10, "dovecot to listen")

    def _output(self) -> str:
        out = self._process.stdout.read().decode(errors="replace") if self._process and self._process.stdout else ""
        log = self.log.read_text(errors="replace") if self.log.exists() else ""
        return out + log

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            # SIGTERM to the master alone takes a second (it waits for its children); to the whole group
            # every process ends at once
            os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
        if self._process is not None and self._process.stdout is not None:
            self._process.stdout.close()
        self._process = None

    def mailbox(self, name: str = "") -> Mailbox:
        """A fresh account ``name`` (default pico1, pico2, ...) with a random password and an empty INBOX."""
        with self._lock:
            name = name or f"pico{next(self._names)}"
            assert name not in self.mailboxes, f"{name} exists"
            password = os.urandom(9).hex()
            home = self.mail / name
            home.mkdir(mode=0o700)
            os.chown(home, *self._mail_owner())
            (self.passwd / name).write_text(f"{name}:{{PLAIN}}{password}::::\n", encoding="utf-8")
            box = Mailbox(self, name, password, f"{name}@{DOMAIN}")
            self.mailboxes[box.address] = box
            return box

    def refuse_imap_login(self, box: Mailbox) -> None:
        """IMAP refuses this account's password from now on, SMTP still takes it (as when a provider turns
        IMAP off for an account); only for an account that has not logged in to IMAP yet."""
        (self.passwd / box.username).write_text(f"{box.username}:{{PLAIN}}not-{box.password}::::\n", encoding="utf-8")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _end_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies (a killed pytest leaves no dovecot)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


# --- SMTP ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    """One message the SMTP server accepted: the envelope, who logged in, and the message itself."""

    mail_from: str
    rcpt_tos: tuple[str, ...]
    login: str
    message: EmailMessage
    raw: bytes


def _no_login_data_warning(record: logging.LogRecord) -> bool:
    """aiosmtpd 1.4 warns that Session.login_data is deprecated at every AUTH, setting it itself."""
    return "login_data is deprecated" not in record.getMessage()


class _Handler:
    """aiosmtpd's hooks, answered by the server's state (in aiosmtpd's thread)."""

    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if not session.authenticated:
            return "530 5.7.0 Authentication required"
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        loop = asyncio.get_running_loop()
        if not self.server._open.is_set():
            with self.server._lock:
                self.server.holding += 1
            await loop.run_in_executor(None, self.server._open.wait, 30)
        return await loop.run_in_executor(None, self.server._data, session, envelope)


class SmtpServer:
    """aiosmtpd on 127.0.0.1: ``port`` needs STARTTLS before AUTH/MAIL, ``tls_port`` is implicit TLS.

    It accepts the login of any account of ``dovecot`` (as providers use one password for both) and
    delivers to the mailboxes of that dovecot; every accepted message is in :attr:`received`.
    """

    def __init__(self, dovecot: Dovecot) -> None:
        self.dovecot = dovecot
        self.port = free_port()
        self.tls_port = free_port()
        self.received: list[Received] = []
        self.refused: list[str] = []  # the Message-IDs of messages answered with an error
        self.logins: list[tuple[str, bool]] = []  # (username, accepted)
        self.holding = 0  # DATA commands that waited at :meth:`hold`
        self._refusal: str | None = None
        self._next: deque[str | None] = deque()  # refuse_next: per message, a refusal (None: taken)
        self._open = threading.Event()
        self._open.set()
        self._handler = _Handler(self)
        self._lock = threading.Lock()
        self._controllers: list[Controller] = []

    def start(self) -> None:
        logging.getLogger("mail.log").addFilter(_no_login_data_warning)
        cert = self.dovecot.cert
        common: dict[str, Any] = {
            "hostname": "127.0.0.1",
            "server_hostname": SERVER_NAME,
            "authenticator": self._authenticate,
        }
        self._controllers = [
            Controller(
                self._handler,
                port=self.port,
                tls_context=cert.server_context(),
                require_starttls=True,
                auth_required=True,
                **common,
            ),
            # aiosmtpd counts only STARTTLS as TLS for its AUTH rules; this port is TLS from the first byte,
            # and the handler refuses MAIL before AUTH itself
            Controller(
                self._handler, port=self.tls_port, ssl_context=cert.server_context(), auth_require_tls=False, **common
            ),
        ]
        for controller in self._controllers:
            controller.start()

    def stop(self) -> None:
        """Off: connections to both ports are refused until :meth:`start`."""
        for controller in self._controllers:
            controller.stop()
        self._controllers = []

    def refuse(self, code: str = "451 4.3.0 Try again later") -> None:
        """Answer DATA with ``code`` (4xx: a temporary failure, 5xx: permanent) until :meth:`accept`."""
        with self._lock:
            self._refusal = code

    def refuse_next(self, n: int = 1, code: str = "451 4.3.0 Try again later", *, after: int = 0) -> None:
        """Answer ``n`` messages' DATA with ``code``, ``after`` more were accepted."""
        with self._lock:
            self._next.extend([None] * after + [code] * n)

    def accept(self) -> None:
        """Accept messages again."""
        with self._lock:
            self._refusal = None

    def hold(self) -> None:
        """Keep the next messages waiting after DATA (the client waits for the answer) until :meth:`release`."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def reset(self) -> None:
        self.release()
        with self._lock:
            self._refusal = None
            self.holding = 0
            self.received.clear()
            self.refused.clear()
            self.logins.clear()

    def to(self, address: str) -> list[Received]:
        """What was accepted for ``address``."""
        with self._lock:
            return [r for r in self.received if address in r.rcpt_tos]

    # what a person's mail client does: submit a message (stdlib smtplib, STARTTLS, AUTH)
    def send(self, message: EmailMessage, *, login: Mailbox) -> None:
        """Submit ``message`` as ``login`` over the submission port; raises what smtplib raises."""
        with smtplib.SMTP("127.0.0.1", self.port, local_hostname="client.pico.test", timeout=10) as client:
            client.starttls(context=self.dovecot.cert.client_context())
            client.login(login.username, login.password)
            client.send_message(message)

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
    ) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        username, password = auth_data.login.decode(), auth_data.password.decode()
        box = next((b for b in self.dovecot.mailboxes.values() if b.username == username), None)
        ok = box is not None and box.password == password
        with self._lock:
            self.logins.append((username, ok))
        return AuthResult(success=ok, handled=False, auth_data=auth_data)

    def _data(self, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        with self._lock:
            refusal = self._next.popleft() if self._next else self._refusal
            if refusal is not None:
                self.refused.append(str(message.get("Message-ID", "")))
                return refusal
        for rcpt in envelope.rcpt_tos:
            box = self.dovecot.mailboxes.get(rcpt.lower())
            if box is not None:
                box.deliver(raw)
        login = session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else ""
        with self._lock:
            self.received.append(Received(str(envelope.mail_from), tuple(envelope.rcpt_tos), login, message, raw))
        return "250 2.0.0 OK: queued"


# --- fixtures (a test module takes them with `pytest_plugins = ["tests.fakes.mail_servers"]`) ---------


@dataclass
class MailServers:
    """What one test gets: the shared servers and a fresh mailbox for the appliance."""

    dovecot: Dovecot
    smtp: SmtpServer
    box: Mailbox


@pytest.fixture(scope="module")
def dovecot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dovecot]:
    """One dovecot per test module (start-up ~0.1 s; each test takes a fresh mailbox of it)."""
    if not DOVECOT.exists():
        pytest.skip("dovecot is not installed (apt install dovecot-imapd)")
    root = tmp_path_factory.mktemp("dovecot")
    if len(str(root)) > 60:  # unix socket paths under base_dir must stay under 108 bytes
        root = Path(tempfile.mkdtemp(prefix="dovecot-"))
    server = Dovecot(root)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        if not str(root).startswith(str(tmp_path_factory.getbasetemp())):
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def smtp_server(dovecot: Dovecot) -> Iterator[SmtpServer]:
    """One aiosmtpd (submission + implicit TLS) per test module, delivering into ``dovecot``."""
    server = SmtpServer(dovecot)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def mail(dovecot: Dovecot, smtp_server: SmtpServer) -> Iterator[MailServers]:
    """The servers with a fresh mailbox for this test; SMTP accepting and its record empty."""
    smtp_server.reset()
    if not smtp_server._controllers:
        smtp_server.start()
    yield MailServers(dovecot, smtp_server, dovecot.mailbox())
    smtp_server.reset()
