"""`python -m firmware_tools push` over real SSH to a real sshd on 127.0.0.1, applying on a device root.

sshd needs root (privilege separation) and OpenSSH installed (`make test` installs openssh-server);
the test is skipped, saying why, when either is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from firmware_tools import push
from tests.fakes import ota_release
from tests.helpers import free_port
from tests.ota_device import Device

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="sshd needs root for its privilege separation"),
    pytest.mark.skipif(not Path(SSHD).exists() or not shutil.which("ssh"), reason="OpenSSH is not installed"),
]


@pytest.fixture
def sshd(tmp_path: Path):
    """An sshd on 127.0.0.1:<free port> that lets in one key, for root, and nothing else."""
    etc = tmp_path / "sshd"
    etc.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(etc / "host_key")], check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(etc / "client_key")], check=True)
    (etc / "authorized_keys").write_text((etc / "client_key.pub").read_text())
    os.chmod(etc / "authorized_keys", 0o600)
    port = free_port()
    (etc / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1:{port}\n"
        f"HostKey {etc / 'host_key'}\n"
        f"AuthorizedKeysFile {etc / 'authorized_keys'}\n"
        f"PidFile {etc / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    log = etc / "sshd.log"
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(etc / "sshd_config")], stderr=log.open("w"))
    deadline = time.monotonic() + 10
    while "Server listening" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"sshd did not start:\n{log.read_text()}")
        time.sleep(0.05)
    yield port, etc / "client_key"
    proc.terminate()
    proc.wait(5)


def test_make_ota_pushes_over_ssh_and_the_device_switches(tmp_path: Path, sshd, signing) -> None:
    port, client_key = sshd
    tools = tmp_path / "laptop"
    tools.mkdir()
    device = Device(tmp_path / "root", tools, signing[0])
    try:
        assert device.apply(device.bundle("1.0")).returncode == 0
        bundle = device.bundle("1.1")
        apply_args = device.updater_argv("apply")[6:]  # --restart-command ... --stop-command CMD
        picoagent = str(Path(sys.executable).parent / "picoagent")
        result = subprocess.run(
            [
                sys.executable, "-m", "firmware_tools", "push", str(bundle),
                "--host", "127.0.0.1", "--port", str(port), "-i", str(client_key),
                "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={tmp_path / 'known_hosts'}",
                "--picoagent", picoagent,
                *[f"--apply-arg={arg}" for arg in ["--root", str(device.root), *apply_args]],
            ],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr + result.stdout
        assert "1.1 is running and healthy" in result.stdout  # the device's own output, over SSH
        assert device.current() == "1.1" and device.healthz()["version"] == "1.1"
        assert not list(Path("/var/tmp").glob("picoagent-bundle.*"))  # the upload was removed

        # The same push again is refused by the device (not newer), and ssh reports its exit status.
        again = subprocess.run(result.args, capture_output=True, text=True, timeout=120)
        assert again.returncode == 1 and "not newer than the running 1.1" in again.stderr
    finally:
        ota_release.stop_service(device.root)


def test_push_says_when_ssh_cannot_get_in(tmp_path: Path, sshd) -> None:
    port, _ = sshd
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    bundle = tmp_path / "x.bundle"
    bundle.write_bytes(b"not really")
    result = subprocess.run(
        [
            sys.executable, "-m", "firmware_tools", "push", str(bundle), "--host", "127.0.0.1",
            "--port", str(port), "-i", str(stranger), "-o", "StrictHostKeyChecking=no",
            "-o", f"UserKnownHostsFile={tmp_path / 'known_hosts'}",
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "ssh to root@127.0.0.1 failed" in result.stderr and "authorized_keys" in result.stderr


def test_push_asks_the_device_first_and_sends_nothing_it_cannot_run(tmp_path: Path, sshd, signing) -> None:
    """A bundle for the other image's Python is refused on the laptop: the device's Python, asked over SSH."""
    port, client_key = sshd
    tools = tmp_path / "laptop"
    tools.mkdir()
    device = Device(tmp_path / "root", tools, signing[0])
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"  # the "device" is this machine: Debian's python3 is ours
    other = "3.13" if here != "3.13" else "3.11"
    ssh = ["--port", str(port), "-i", str(client_key), "-o", "StrictHostKeyChecking=no",
           "-o", f"UserKnownHostsFile={tmp_path / 'known_hosts'}"]  # fmt: skip
    system = push.device_system("127.0.0.1", port=port, identity=client_key, ssh_options=ssh[5::2])
    assert system[0] == here and system[1].startswith("2.") and system[2]
    try:
        assert device.apply(device.bundle("1.0")).returncode == 0
        bundle = device.bundle("1.1", python=other)
        result = subprocess.run(
            [sys.executable, "-m", "firmware_tools", "push", str(bundle), "--host", "127.0.0.1", *ssh],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 1
        assert f"is built for Python {other}" in result.stderr and f"the device runs Python {here}" in result.stderr
        assert "nothing was sent" in result.stderr and "--python " + here in result.stderr
        assert device.current() == "1.0"
    finally:
        ota_release.stop_service(device.root)
