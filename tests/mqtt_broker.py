"""A real mosquitto broker for the tests, on 127.0.0.1 at a free port with its config in a tmp folder.

``Broker`` starts, stops and restarts one (a restart keeps its port and, by default, loses every retained
message: mosquitto runs without persistence, which is what a broker restart looks like at its worst);
``users`` gives it a password file made with ``mosquitto_passwd`` and turns anonymous access off.
:class:`Watcher` is a paho client in a thread that records every message on a topic filter, for checking
what picoagent published. :func:`running` is what a suite's fixture wraps (anonymous, or with
``users={USER: PASSWORD}``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import free_port, wait_for

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
USER, PASSWORD = "pico", "s3cret-pass"


def have_mosquitto() -> bool:
    """Whether the broker and its password tool are installed."""
    return Path(MOSQUITTO).exists() and Path(PASSWD).exists()


def make_certificates(folder: Path) -> list[str]:
    """A CA and a server certificate for 127.0.0.1 signed by it (openssl); the listener lines that use them."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=picoagent test CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=127.0.0.1")  # fmt: skip
    (folder / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n", encoding="utf-8")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "san.cnf")  # fmt: skip
    return [f"certfile {folder / 'server.pem'}", f"keyfile {folder / 'server.key'}"]


class Broker:
    """One mosquitto process listening on 127.0.0.1:port only."""

    def __init__(self, folder: Path, *, users: dict[str, str] | None = None, tls: bool = False) -> None:
        self.folder = folder
        self.port = free_port()
        self.users = users or {}
        self.process: subprocess.Popen[bytes] | None = None
        folder.mkdir(parents=True, exist_ok=True)
        lines = [f"listener {self.port} 127.0.0.1", "persistence false", f"log_dest file {folder / 'mosquitto.log'}"]
        if os.geteuid() == 0:
            lines.append("user root")  # as root mosquitto would switch to its own user, who cannot read tmp
        self.ca_file = ""
        if tls:
            self.ca_file = str(folder / "ca.pem")
            lines += make_certificates(folder)
        if self.users:
            passwords = folder / "passwords"
            for i, (user, password) in enumerate(self.users.items()):
                create = ["-c"] if i == 0 else []
                subprocess.run([PASSWD, "-b", *create, str(passwords), user, password], check=True)
            passwords.chmod(0o600)
            lines += ["allow_anonymous false", f"password_file {passwords}"]
        else:
            lines.append("allow_anonymous true")
        self.conf = folder / "mosquitto.conf"
        self.conf.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def start(self) -> None:
        """Start it and wait until it accepts connections."""
        self.process = subprocess.Popen(
            [MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        wait_for(self.accepting, timeout=10, what=f"mosquitto on port {self.port}")

    def accepting(self) -> bool:
        """Whether a TCP connection to it succeeds now (and it is still running)."""
        import socket

        assert self.process is not None
        if self.process.poll() is not None:
            err = self.process.stderr.read().decode() if self.process.stderr else ""
            raise AssertionError(f"mosquitto exited with {self.process.returncode}: {err}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 5 s)."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stderr:
            self.process.stderr.close()
        self.process = None

    def restart(self) -> None:
        """Stop and start again on the same port (its retained messages are gone: no persistence)."""
        self.stop()
        self.start()


class Watcher:
    """A paho client (its own network thread) recording every message under ``topic_filter``."""

    def __init__(self, broker: Broker, topic_filter: str = "#", *, user: str = "", password: str = "") -> None:
        import paho.mqtt.client as paho

        self.messages: list[tuple[str, bytes, bool]] = []  # (topic, payload, retained), in arrival order
        self.lock = threading.Lock()
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"watcher-{free_port()}")
        if user:
            self.client.username_pw_set(user, password)
        subscribed = threading.Event()
        self.client.on_connect = lambda c, *_: c.subscribe(topic_filter, qos=1)
        self.client.on_subscribe = lambda *_: subscribed.set()
        self.client.on_message = self._record
        self.client.connect("127.0.0.1", broker.port)
        self.client.loop_start()
        assert subscribed.wait(10), "the watcher could not subscribe"

    def _record(self, _client: object, _userdata: object, message: object) -> None:
        with self.lock:
            self.messages.append((message.topic, message.payload, bool(message.retain)))  # type: ignore[attr-defined]

    def latest(self, topic: str) -> bytes | None:
        """The last payload seen on ``topic``."""
        with self.lock:
            found = [payload for t, payload, _ in self.messages if t == topic]
        return found[-1] if found else None

    def topics(self, prefix: str = "") -> set[str]:
        """Every topic seen (starting with ``prefix``)."""
        with self.lock:
            return {t for t, _, _ in self.messages if t.startswith(prefix)}

    def publish(self, topic: str, payload: str, *, retain: bool = False) -> None:
        """Publish as another client would (Home Assistant, mosquitto_pub)."""
        self.client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(5)

    def clear(self) -> None:
        """Forget what was recorded."""
        with self.lock:
            self.messages.clear()

    def close(self) -> None:
        """Disconnect."""
        self.client.loop_stop()
        self.client.disconnect()


@contextlib.contextmanager
def running(folder: Path, *, users: dict[str, str] | None = None, tls: bool = False) -> Iterator[Broker]:
    """A started broker (with ``users``: a password file, no anonymous access), stopped at the end.

    Skips the test when mosquitto is not installed (``make test`` installs it). A suite makes its fixture
    from this: ``with running(tmp_path / "mosquitto") as broker: yield broker``.
    """
    if not have_mosquitto():
        pytest.skip("mosquitto is not installed (apt-get install mosquitto mosquitto-clients)")
    broker = Broker(folder, users=users, tls=tls)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
