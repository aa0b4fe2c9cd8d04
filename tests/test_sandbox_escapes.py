"""Escape attempts through the shell tool, each checked against the same invariants.

A stand-in for the appliance's state sits around the workspace: the database and the secrets file
next to it, canary files elsewhere (one folder under the host's /tmp), a secret in our environment, a
TCP listener on every interface, an abstract Unix socket, and a "daemon" process. After every attempt:
the canaries are unchanged and nothing new appeared next to them, the secret is absent from what the
model reads, the listeners saw no connection, the daemon lives, and no process of the sandbox is left.

The attempts are real (``rm -rf --no-preserve-root /`` among them) and the suite often runs as root, so
none runs before a harmless probe through the same tool has shown that the sandbox reaches none of
the canaries and writes to no host file system but the workspace (``tests/sandbox_guard.py``). When it
does, every attempt fails unrun, saying what the probe found.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from appliance.config import ShellConfig
from appliance.tools import sandbox, shell
from appliance.tools.registry import Redactor, ToolRegistry
from appliance.tools.result import ToolResult
from tests.helpers import needs_bwrap
from tests.sandbox_guard import HostCanaries, isolation_failure

pytestmark = needs_bwrap

SECRET = "tg-7781:SeCrEt-ValUe-42"
TOOL_TIMEOUT_S = 4.0  # the sandbox stops commands at 3 s


@dataclass
class Scene:
    """The host around the sandbox, and what to compare against after each attempt."""

    root: Path
    workspace: Path
    data: Path
    outside: Path
    secrets: Path
    port: int
    abstract: str
    daemon: subprocess.Popen[bytes]
    registry: ToolRegistry
    canaries: HostCanaries
    connections: list[str] = field(default_factory=list)
    open_to_host: list[str] = field(default_factory=list)  # what the isolation probe found

    @property
    def tmp_canary(self) -> Path:
        return self.canaries.tmp_folder / "canary.txt"

    def fill(self, text: str) -> str:
        """The attempt's command with this scene's paths and numbers."""
        values = dict(
            canary=self.outside / "canary.txt",
            outside=self.outside,
            data=self.data,
            db=self.data / "picoagent.db",
            secrets=self.secrets,
            tmpcanary=self.tmp_canary,
            port=self.port,
            pid=self.daemon.pid,
            abstract=self.abstract,
            ws=self.workspace,
            py=sys.executable,
        )
        for key, value in values.items():
            text = text.replace("{" + key + "}", str(value))
        return text

    def run(self, command: str) -> str:
        """What ``command`` printed in the sandbox, through the tool (no invariants checked)."""
        result = asyncio.run(self.registry.execute("shell", {"command": command}, timeout_s=TOOL_TIMEOUT_S + 2))
        return result.output + (result.error or "")


def _listen(scene_connections: list[str]) -> tuple[socket.socket, socket.socket, int, str]:
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("0.0.0.0", 0))
    tcp.listen(16)
    abstract = f"picoagent-escape-{os.getpid()}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\0" + abstract)
    unix.listen(16)

    def accept(server: socket.socket, kind: str) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            scene_connections.append(kind)
            conn.close()

    for server, kind in ((tcp, "tcp"), (unix, "unix")):
        threading.Thread(target=accept, args=(server, kind), daemon=True).start()
    return tcp, unix, tcp.getsockname()[1], abstract


@pytest.fixture(scope="module")
def scene() -> Iterator[Scene]:
    with tempfile.TemporaryDirectory(prefix="picoagent-escape-") as folder:
        root = Path(folder)
        data = root / "data"
        workspace = data / "workspace"
        outside = root / "outside"
        for path in (workspace, outside):
            path.mkdir(parents=True)
        (outside / "canary.txt").write_text("CANARY-OUTSIDE\n")
        (data / "picoagent.db").write_text("CANARY-DATABASE\n")
        secrets = root / "etc" / "secrets.env"
        secrets.parent.mkdir()
        secrets.write_text(f"TELEGRAM_TOKEN={SECRET}\n")
        (workspace / "SOUL.md").write_text("I am Pico.\n")
        canaries = HostCanaries(workspace, root, outside, secrets.parent)  # and a folder under the host's /tmp
        connections: list[str] = []
        tcp, unix, port, abstract = _listen(connections)
        daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", "stand-in-daemon"])
        registry = ToolRegistry(redact=Redactor({SECRET}))
        config = ShellConfig(max_processes=32, memory_mb=512, cpu_s=10, max_file_mb=8, max_output_kb=64)
        shell.register(registry, config, workspace, TOOL_TIMEOUT_S)
        old_env = os.environ.get("TELEGRAM_TOKEN")
        os.environ["TELEGRAM_TOKEN"] = SECRET  # as the daemon would hold it
        scene = Scene(root, workspace, data, outside, secrets, port, abstract, daemon, registry, canaries)
        scene.connections = connections
        scene.open_to_host = canaries.probe(scene.run)  # harmless: before any attempt
        try:
            yield scene
        finally:
            if old_env is None:
                os.environ.pop("TELEGRAM_TOKEN", None)
            else:
                os.environ["TELEGRAM_TOKEN"] = old_env
            daemon.kill()
            daemon.wait()
            tcp.close()
            unix.close()
            canaries.remove()


def _mount_ns(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return ""


def _foreign_processes() -> set[str]:
    """Processes in another mount namespace than ours (every sandbox process is)."""
    ours = _mount_ns("self")
    return {p for p in os.listdir("/proc") if p.isdigit() and _mount_ns(p) not in ("", ours)}


def attempt(scene: Scene, command: str) -> ToolResult:
    """Run one attempt through the tool and check every invariant; the result, for specific checks.

    Only in a sandbox the isolation probe found closed: otherwise the test fails without running it."""
    if scene.open_to_host:
        pytest.fail(isolation_failure(scene.open_to_host))
    before = _foreign_processes()
    scene.connections.clear()  # an earlier failure is that attempt's, not this one's
    result = asyncio.run(
        scene.registry.execute("shell", {"command": scene.fill(command)}, timeout_s=TOOL_TIMEOUT_S + 2)
    )
    text = result.output + (result.error or "")
    assert SECRET not in text
    changed = scene.canaries.changes()
    assert not changed, f"files outside the workspace changed or appeared: {changed}"
    assert scene.connections == [], f"the sandbox reached a listener: {scene.connections}"
    assert scene.daemon.poll() is None, "the stand-in daemon died"
    deadline = time.monotonic() + 2
    while (left := _foreign_processes() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"sandbox processes still running: {left}"
    return result


DEVICES = {"null", "zero", "urandom", "fd", "stdin", "stdout", "stderr"}  # the last four: links into /proc
B64_RM = base64.b64encode(b"rm -rf --no-preserve-root / 2>/dev/null; echo done").decode()
B64_CAT = base64.b64encode(b"cat {canary}").decode()

# Each: an id, and the command. The invariants above hold for all of them.
ESCAPES: list[tuple[str, str]] = [
    # Deleting outside the workspace
    ("rm-root", "rm -rf --no-preserve-root / 2>&1 | tail -3"),
    ("rm-r-f-parent", "rm -r -f ../ ../../ 2>&1 | tail -3"),
    ("rm-absolute-canary", "rm -f {canary} {db} {secrets} {tmpcanary}; ls {outside} 2>&1"),
    ("rm-via-variables", "R=rm; F=-rf; T={outside}; $R $F $T 2>&1"),
    ("rm-via-base64", f"echo {B64_RM} | base64 -d | sh"),
    ("rm-via-python", "python3 -c 'import shutil; shutil.rmtree(\"{outside}\")' 2>&1 | tail -1"),
    ("rm-via-find", "find / -xdev -name canary.txt -delete 2>&1 | tail -2"),
    ("rm-in-child-shell", "sh -c 'bash -c \"rm -rf {data}\"' 2>&1"),
    ("rm-via-proc-root", "rm -rf /proc/1/root/../../{outside} 2>&1; ls /proc/1/root/"),
    # Writing outside the workspace
    ("write-absolute", "echo pwned > {canary} 2>&1; echo pwned >> {db} 2>&1"),
    ("write-parent", "echo pwned > ../picoagent.db 2>&1; echo pwned > ../../outside/canary.txt 2>&1"),
    ("write-usr", "touch /usr/pwned /usr/bin/pwned 2>&1; ls /usr/pwned 2>&1"),
    ("write-etc", "echo evil > /etc/ld.so.preload 2>&1; ls -la /etc"),
    ("write-host-tmp", "echo pwned > {tmpcanary}; ls -la /tmp"),
    ("write-through-symlink", "ln -s {canary} link && echo pwned > link; cat link; rm -f link"),
    ("write-via-python", 'python3 -c \'open("{canary}", "w").write("x")\' 2>&1 | tail -1'),
    ("write-via-dd", "dd if=/dev/zero of={db} bs=1k count=1 2>&1 | tail -1"),
    ("write-mv-out", "echo x > f && mv f {outside}/new 2>&1; mv f ../new 2>&1; ls"),
    # Reading outside the workspace, secrets, the environment
    ("read-canary", "cat {canary} {db} {tmpcanary} 2>&1"),
    ("read-secrets-file", "cat {secrets} /etc/picoagent/secrets.env 2>&1"),
    ("read-via-base64", f"echo {B64_CAT} | base64 -d | sh 2>&1"),
    ("read-hardlink", "ln {canary} hard 2>&1; cat hard 2>&1"),
    ("read-environment", "env; printenv TELEGRAM_TOKEN; cat /proc/self/environ | tr '\\0' '\\n'"),
    ("read-all-environ", "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'"),
    ("grep-for-secret", "grep -rs 'SeCrEt' /etc /tmp /proc/[0-9]*/environ /workspace /root /home 2>&1 | head"),
    ("read-etc-passwd-shadow", "cat /etc/passwd /etc/shadow 2>&1"),
    ("read-daemon-memory", "cat /proc/{pid}/environ /proc/{pid}/maps 2>&1 | head -3"),
    # Network: the local listener, the abstract socket, the internet
    ("tcp-loopback-bash", "bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' 2>&1"),
    ("tcp-loopback-python", "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)' 2>&1"),
    (
        "tcp-host-addresses",
        "for a in $(hostname -I 2>/dev/null) 10.0.2.2 172.17.0.1; do "
        'timeout 1 bash -c "echo > /dev/tcp/$a/{port}" 2>&1; done; echo tried',
    ),
    (
        "abstract-unix-socket",
        "python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"\\0{abstract}\")' 2>&1 | tail -1",
    ),
    ("dns-and-internet", "python3 -c 'import socket; print(socket.getaddrinfo(\"pypi.org\", 443))' 2>&1 | tail -1"),
    ("network-interfaces", "cat /proc/net/dev; ip addr 2>&1 | head -5"),
    # The daemon and other processes
    ("kill-daemon", "kill -9 {pid} 2>&1; kill -9 -1 2>&1; echo killed"),
    ("pkill-daemon", "pkill -9 -f stand-in-daemon 2>&1; pkill -9 python3 2>&1; echo done"),
    ("ps-sees-nothing-outside", "ps -e -o pid,comm 2>&1"),
    # Resources
    ("fork-bomb-sh", "bomb() { bomb | bomb & }; bomb; sleep 1; echo survived"),
    ("fork-bomb-python", "python3 -c 'import os\nwhile True:\n    os.fork()' 2>&1 | tail -1"),
    ("runaway-output", "yes pwned"),
    ("runaway-binary", "cat /dev/urandom"),
    ("cpu-burn", "while :; do :; done"),
    ("memory-hog", "python3 -c 'x = bytearray(3 * 1024 ** 3)' 2>&1 | tail -1"),
    ("big-file", "head -c 64M /dev/zero > big; ls -la big; rm -f big"),
    ("fill-tmp", "head -c 200M /dev/zero > /tmp/fill 2>&1; df /tmp | tail -1; rm -f /tmp/fill"),
    # Processes left behind
    ("background-sleep", "sleep 1000 & echo started"),
    ("background-nohup-setsid", "nohup sleep 1001 >/dev/null 2>&1 & setsid sleep 1002 & echo started"),
    (
        "double-fork-daemon",
        "python3 -c 'import os,time\nif os.fork()==0:\n os.setsid()\n if os.fork()==0: time.sleep(999)'",
    ),
    ("background-holding-output", "(sleep 1003; echo late) & echo early"),
    # Devices and kernel interfaces
    ("devices-listed", "ls /dev"),
    ("block-and-gpio-devices", "cat /dev/sda /dev/mmcblk0 /dev/mem /dev/gpiochip0 /dev/i2c-1 2>&1"),
    ("mknod", "mknod disk b 8 0 2>&1; mknod mem c 1 1 2>&1; ls"),
    ("sys-and-sysrq", "ls /sys 2>&1; echo h > /proc/sysrq-trigger 2>&1; cat /proc/kmsg 2>&1 | head -1"),
    # Privilege and namespaces
    ("mount-and-remount", "mount -t tmpfs none /usr 2>&1; mount -o remount,rw /usr 2>&1; mount --bind / mnt 2>&1"),
    ("new-user-namespace", "unshare -r id 2>&1; unshare -m -p -f id 2>&1"),
    ("chroot-nsenter", "chroot / id 2>&1; nsenter -t 1 -m -- id 2>&1"),
    ("hostname", "hostname evil 2>&1; hostname"),
    ("sudo-su", "sudo id 2>&1; su -c id 2>&1"),
]


@pytest.mark.parametrize(("name", "command"), ESCAPES, ids=[e[0] for e in ESCAPES])
def test_escape_attempt_fails(scene: Scene, name: str, command: str) -> None:
    result = attempt(scene, command)
    text = result.output + (result.error or "")
    assert result.ok, text  # a sandboxed command's failure is its output, not a tool failure
    assert "CANARY-" not in text
    specific = {
        "read-environment": lambda: "TELEGRAM_TOKEN" not in text and "PATH=/usr/local/bin" in text,
        "devices-listed": lambda: text.split("\n")[1:] == sorted(DEVICES),
        "runaway-output": lambda: "[stopped: output passed 64 KiB" in text,
        "runaway-binary": lambda: "[stopped: output passed 64 KiB" in text,
        "cpu-burn": lambda: "[stopped: still running after 3 s" in text,
        "big-file": lambda: "File size limit exceeded" in text and "8388608" in text,
        "memory-hog": lambda: "MemoryError" in text,
        "fork-bomb-sh": lambda: "ork" in text,  # "Cannot fork" / "fork: retry"
        "ps-sees-nothing-outside": lambda: "stand-in" not in text and len(text.splitlines()) <= 6,
        "hostname": lambda: "sandbox" in text,
        "network-interfaces": lambda: "eth" not in text.split("[exit")[0],
    }
    check = specific.get(name)
    assert check is None or check(), text
    assert len(ESCAPES) >= 40


def test_the_workspace_itself_works(scene: Scene) -> None:
    (scene.workspace / "SOUL.md").write_text("I am Pico.\n")  # an attempt above may have removed it
    result = attempt(scene, "echo hello > made.txt && cat SOUL.md made.txt && pwd && id -u && ls /tmp")
    assert result.ok and result.output.startswith("[exit code 0]")
    assert "I am Pico." in result.output and "hello" in result.output and "/workspace" in result.output
    assert (scene.workspace / "made.txt").read_text() == "hello\n"
    failing = attempt(scene, "exit 3")
    assert failing.output == "[exit code 3]"


def test_the_sandbox_reaches_nothing_of_the_host(scene: Scene) -> None:
    """The probe that guards the attempts above: no canary seen or written, no host file system writable."""
    assert scene.open_to_host == [], isolation_failure(scene.open_to_host)
    assert scene.canaries.changes() == []


def _with_host_tmp(argv: list[str]) -> list[str]:
    """The sandbox's command line with the host's /tmp bound read-write instead of a private tmpfs."""
    at = argv.index("/tmp", argv.index("/proc"))
    assert argv[at - 3 : at] == ["--size", str(sandbox.TMP_BYTES), "--tmpfs"], f"no private /tmp in {argv}"
    return [*argv[: at - 3], "--bind", "/tmp", "/tmp", *argv[at + 1 :]]


def test_the_probe_finds_the_hosts_tmp_bound_writable(tmp_path: Path) -> None:
    """The regression that once let these attempts delete files under the host's /tmp, made on purpose
    (only the harmless probe runs in it): the probe must see it, or the guard guards nothing."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    canaries = HostCanaries(workspace)

    def run_open(command: str) -> str:
        bwrap = sandbox.bwrap_path()
        assert bwrap is not None
        filter_fd = sandbox.seccomp_fd()
        try:
            argv = _with_host_tmp(sandbox.bwrap_argv(bwrap, workspace, command, filter_fd))
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=30, pass_fds=(filter_fd,), env={"PATH": "/usr/bin:/bin"}
            )
        finally:
            os.close(filter_fd)
        return done.stdout + done.stderr

    try:
        problems = canaries.probe(run_open)
        assert f"writable inside: {canaries.tmp_folder}" in problems, problems
        assert "writable inside at /tmp: the host's /tmp" in " ".join(problems), problems
        assert canaries.changes() == []  # the probe's own files are gone again
    finally:
        canaries.remove()
