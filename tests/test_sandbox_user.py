"""The daemon and the shell sandbox as the units run them: two users, one shared workspace.

There is no systemd as PID 1 here, so these tests take the identities the unit files declare (User=,
Group=, SupplementaryGroups=, UMask=, ProtectProc=, and the sandbox's view of /var/lib:
TemporaryFileSystem= and BindPaths=) and give them to real processes: each user and group name gets
a number of its own (the same name, the same number), setpriv switches to it, and a mount namespace
does what systemd would: /proc mounted ``hidepid=invisible`` for ProtectProc=invisible, a tmpfs over
/var/lib with only the workspace bound in. The kernel
then decides, as it would on the Pi, what code in the sandbox's unit can see and do to the daemon.
The workspace is made by systemd-tmpfiles from the shipped tmpfiles.d file, and the sandbox side
runs the real picoagent-sandbox service with real bubblewrap.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from appliance.tools import sandbox
from tests.helpers import settings_of

REPO = Path(__file__).resolve().parents[1]
DAEMON_UNIT = REPO / "systemd" / "picoagent.service"
SANDBOX_UNIT = REPO / "systemd" / "picoagent-sandbox@.service"
TMPFILES = REPO / "systemd" / "picoagent.tmpfiles"
SECRET = "tg-7781:SeCrEt-ValUe-42"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="switching to the units' users needs root"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is missing"),
]


@dataclass(frozen=True)
class Identity:
    """Who a unit's processes are: numbers for the unit's names, and what systemd sets around them."""

    user: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    umask: int
    hide_proc: bool  # ProtectProc=invisible
    tmpfs: tuple[str, ...] = ()  # TemporaryFileSystem=
    binds: tuple[str, ...] = ()  # BindPaths=

    def argv(self, base: Path, *command: str) -> list[str]:
        """``command`` run as this identity, in a mount namespace set up as the unit's (paths under ``base``)."""
        groups = ["--groups", ",".join(map(str, self.groups))] if self.groups else ["--clear-groups"]
        as_user = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", *groups, "--", *command]
        steps = ["mount -t proc -o hidepid=invisible proc /proc"] if self.hide_proc else []
        held = [(base / path.lstrip("/"), base / f".held-{n}") for n, path in enumerate(self.binds)]
        steps += [f"mkdir -p {h} && mount --bind {p} {h}" for p, h in held]  # before a tmpfs covers them
        steps += [f"mount -t tmpfs -o mode=0755 tmpfs {base / path.lstrip('/')}" for path in self.tmpfs]
        steps += [f"mkdir -p {p} && mount --bind {h} {p}" for p, h in held]
        script = " && ".join([*steps, f"umask {self.umask:04o}", f"exec {shlex.join(as_user)}"])
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]


class Names:
    """A number per user name and per group name: the same name always gets the same number."""

    def __init__(self) -> None:
        self.users: dict[str, int] = {}
        self.groups: dict[str, int] = {}

    def uid(self, name: str) -> int:
        return self.users.setdefault(name, 64000 + len(self.users))

    def gid(self, name: str) -> int:
        return self.groups.setdefault(name, 64100 + len(self.groups))

    def identity(self, unit: Path) -> Identity:
        s = settings_of(unit)
        user = s["User"][0]
        supplementary = " ".join(s.get("SupplementaryGroups", [])).split()
        return Identity(
            user,
            self.uid(user),
            self.gid(s.get("Group", [user])[0]),
            tuple(self.gid(g) for g in supplementary),
            int(s.get("UMask", ["0022"])[0], 8),
            s.get("ProtectProc", [""])[0] == "invisible",
            tuple(value.split(":")[0] for value in s.get("TemporaryFileSystem", [])),
            tuple(" ".join(s.get("BindPaths", [])).split()),
        )


@dataclass
class Host:
    base: Path
    names: Names
    daemon: Identity
    sandbox: Identity

    def path(self, absolute: str) -> Path:
        return self.base / absolute.lstrip("/")


@pytest.fixture(scope="module")
def reachable() -> Iterator[None]:
    """Let the test users reach this checkout and its venv (they run its code) while the module runs.

    A checkout may sit in a folder only root can enter (a clone in `mktemp -d`, 0700): each such folder
    on the way gets o+x (enter, not list) for the duration, and its mode back afterwards.
    """
    changed: list[tuple[Path, int]] = []
    for top in {REPO, Path(sys.prefix)}:
        for folder in [top, *top.parents]:
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH:
                changed.append((folder, stat.S_IMODE(mode)))
                folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
    try:
        yield
    finally:
        for folder, mode in changed:
            folder.chmod(mode)


@pytest.fixture
def host(reachable: None) -> Iterator[Host]:
    names = Names()
    daemon, sandbox_id = names.identity(DAEMON_UNIT), names.identity(SANDBOX_UNIT)
    base = Path(tempfile.mkdtemp(prefix="picoagent-users-"))
    base.chmod(0o755)  # the test users must reach what is inside
    try:
        # The host's users and groups as the units name them, then the state directory and the
        # workspace made from the shipped tmpfiles.d file, by systemd-tmpfiles.
        users = [
            f"{u}:x:{uid}:{names.gid(u) if u in names.groups else 65534}::/:/usr/sbin/nologin"
            for u, uid in names.users.items()
        ]
        members = {
            gid: [who.user for who in (daemon, sandbox_id) if gid in who.groups] for gid in names.groups.values()
        }
        groups = [f"{g}:x:{gid}:{','.join(members[gid])}" for g, gid in names.groups.items()]
        (base / "etc").mkdir()
        (base / "etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n" + "\n".join(users) + "\n")
        (base / "etc/group").write_text("root:x:0:\n" + "\n".join(groups) + "\n")
        made = subprocess.run(
            ["systemd-tmpfiles", f"--root={base}", "--create", str(TMPFILES)], capture_output=True, text=True
        )
        assert made.returncode == 0, made.stderr
        yield Host(base, names, daemon, sandbox_id)
    finally:
        shutil.rmtree(base)


def run_as(host: Host, who: Identity, *command: str, stdin: str = "", env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        who.argv(host.base, *command), input=stdin, capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert done.returncode == 0, f"as {who.user}: {done.stdout}{done.stderr}"
    return done.stdout


def test_code_that_leaves_bubblewrap_in_the_sandbox_unit_cannot_reach_the_daemon(host: Host) -> None:
    secrets = host.path("/etc/picoagent/secrets.env")  # as install-service makes it: 0640 root:picoagent
    secrets.parent.mkdir(parents=True)
    secrets.write_text(f"TELEGRAM_TOKEN={SECRET}\n")
    os.chown(secrets, 0, host.daemon.gid)
    secrets.chmod(0o640)
    database = host.path("/var/lib/picoagent/picoagent.db")  # made by the daemon, with its unit's UMask
    database.write_text("CANARY-DATABASE\n")
    os.chown(database, host.daemon.uid, host.daemon.gid)
    database.chmod(0o666 & ~host.daemon.umask)
    stand_in = subprocess.Popen(
        host.daemon.argv(host.base, "/usr/bin/python3", "-c", "import time; time.sleep(120)"),
        env={"PATH": "/usr/bin:/bin", "TELEGRAM_TOKEN": SECRET},
    )
    try:
        pid = _child_pid(stand_in.pid, host.daemon.uid)
        probe = f"""
import json, os
pid = {pid}
def read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError as exc:
        return type(exc).__name__
try:
    os.kill(pid, 0)
    signal = True
except OSError:
    signal = False
print(json.dumps({{
    "sees the daemon in /proc": str(pid) in os.listdir("/proc"),
    "reads its environment": {SECRET!r} in read(f"/proc/{{pid}}/environ"),
    "reads secrets.env through its root": {SECRET!r} in read(f"/proc/{{pid}}/root{secrets}"),
    "reads the database through its root": "CANARY" in read(f"/proc/{{pid}}/root{database}"),
    "may signal it": signal,
}}))
"""
        reached = json.loads(run_as(host, host.sandbox, "/usr/bin/python3", "-c", probe))
    finally:
        stand_in.kill()
        stand_in.wait()
    print(f"daemon uid {host.daemon.uid}, sandbox uid {host.sandbox.uid}: {reached}")
    assert host.sandbox.uid != host.daemon.uid and host.sandbox.gid not in (host.daemon.gid, 0)
    assert not any(reached.values()), reached


def _child_pid(parent: int, uid: int) -> int:
    """The stand-in daemon's pid: the python that unshare's sh execs as ``uid`` (it keeps the pid)."""
    for _ in range(500):
        try:
            if os.stat(f"/proc/{parent}").st_uid == uid:
                return parent
        except OSError:
            pass
        time.sleep(0.01)
    raise AssertionError("the stand-in daemon did not start")


DAEMON_SIDE = """
import sys
from pathlib import Path
from appliance.agent.context import Workspace
from appliance.tools.workspace import WorkspaceFiles
root, step = Path(sys.argv[1]), sys.argv[2]
files = WorkspaceFiles(root)
if step == "before":
    Workspace(root).ensure("Pico")  # SOUL.md, USER.md on first start
    files.write_file("notes/todo.md", "milk\\n")  # the model's write_file, in a folder it makes
else:
    sys.stdout.write(files.read_file("made/out.txt") + files.read_file("notes/todo.md"))
    try:
        files.read_file("private.txt")
    except Exception as exc:  # what the model reads: why, and how to share it again
        sys.stdout.write(str(exc) + "\\n")
    files.edit_file("made/out.txt", "by the sandbox", "edited by the daemon")  # a file the sandbox owns
    files.write_file("made/deeper/new.md", "new\\n")  # in a folder the sandbox made
"""
SANDBOX_SIDE = (
    "cat SOUL.md notes/todo.md >/dev/null && echo oat >> notes/todo.md && mkdir made && "
    "echo 'by the sandbox' > made/out.txt && (umask 077 && echo mine > private.txt) && ls -ld . made made/out.txt"
)
SANDBOX_AGAIN = "cat made/out.txt made/deeper/new.md && echo more >> made/deeper/new.md && rm notes/todo.md"


def test_the_daemon_and_the_sandbox_share_the_workspace_both_ways(host: Host) -> None:
    if sandbox.check() is not None:
        pytest.fail(f"bubblewrap cannot run here: {sandbox.check()}")
    workspace = host.path("/var/lib/picoagent/workspace")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}

    run_as(host, host.daemon, sys.executable, "-c", DAEMON_SIDE, str(workspace), "before", env=env)
    answer = ask_service(host, workspace, SANDBOX_SIDE, env)
    assert answer.get("exit_code") == 0, answer
    said = run_as(host, host.daemon, sys.executable, "-c", DAEMON_SIDE, str(workspace), "after", env=env)
    hint = "cannot read 'private.txt': Permission denied (if a shell command made it private, share it again"
    assert said.startswith(f"by the sandbox\nmilk\noat\n{hint}") and "chmod -R g+rwX private.txt" in said, said
    again = ask_service(host, workspace, SANDBOX_AGAIN, env)
    assert again.get("exit_code") == 0 and "edited by the daemon\nnew\n" in again["output"], again
    assert (workspace / "made/deeper/new.md").read_text() == "new\nmore\n"
    assert not (workspace / "notes/todo.md").exists()
    # Everything in it stays in the workspace's group, so the next one in the other user reads it too.
    group = host.names.gid("picoagent-sandbox")
    assert {p.stat().st_gid for p in workspace.rglob("*")} == {group}, answer["output"]


def ask_service(host: Host, workspace: Path, command: str, env: dict[str, str]) -> dict[str, object]:
    """One request to the picoagent-sandbox service run as the sandbox unit's identity, over a socket
    as systemd's Accept=yes hands it over (closing our end would cancel the command)."""
    ours, theirs = socket.socketpair()
    service = [sys.executable, "-m", "appliance.tools.sandbox_service", "--workspace", str(workspace)]
    with ours:
        proc = subprocess.Popen(
            host.sandbox.argv(host.base, *service), stdin=theirs, stdout=theirs, stderr=subprocess.PIPE, env=env
        )
        theirs.close()
        request = {"command": command, "limits": sandbox.Limits(timeout_s=20).as_dict()}
        ours.sendall(json.dumps(request).encode() + b"\n")
        reply = b"".join(iter(lambda: ours.recv(65536), b""))
        _, err = proc.communicate(timeout=60)
    assert reply, err.decode()
    answer: dict[str, object] = json.loads(reply)
    return answer
