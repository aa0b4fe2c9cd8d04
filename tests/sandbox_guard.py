"""Keeping the sandbox tests harmless when the sandbox they test is broken.

The escape tests run real attacks (``rm -rf --no-preserve-root /`` among them), often as root. With one
wrong bubblewrap argument (the host's /tmp bound read-write instead of a private tmpfs) they deleted
files under the host's /tmp: a sandbox bug became data loss on the machine running the tests. So no
attack runs until a harmless probe, through the same path as the attacks, has shown the isolation:

- every mount inside that is writable and belongs to a host file system is the workspace (or under it)
  or one of the device nodes; a private tmpfs or /proc of its own is not the host's;
- canary folders outside the workspace (one under the host's /tmp, the workspace's parent, any the
  suite names) can be neither seen nor written from inside, by their paths or through
  ``/proc/<pid>/root``. The probe only reads, and creates files of a new name of its own; the host
  checks for those itself, whatever the probe says.

A probe that finds something, or gives no answer, fails the tests that needed it (it never skips them),
and the attacks are not run. After each attack the canaries are compared with their snapshot. Skipping
is for machines where bubblewrap cannot run at all (``sandbox.machine_problem``, which does not use the
sandbox's own command line): a broken command line fails its tests.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEVICE_NODES = {"/dev/null", "/dev/zero", "/dev/urandom"}  # what the sandbox binds from the host's /dev

# Runs inside the sandbox: argv is a fresh name for the files it tries to create, then the folders to try.
# It reads, and creates files of that name only (O_EXCL: it never opens an existing file for writing).
PROBE = r"""
import json, os, sys
name, folders = sys.argv[1], sys.argv[2:]
ways = [""] + ["/proc/" + p + "/root" for p in sorted(os.listdir("/proc")) if p.isdigit()]
seen, written = [], []
for folder in folders:
    for way in ways:
        path = way + folder
        if os.path.lexists(path):
            seen.append(path)
        try:
            os.close(os.open(os.path.join(path, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            written.append(path)
        except OSError:
            pass
with open("/proc/self/mountinfo") as f:  # the writable ones: the tool's output is cut at 4000 characters
    mounts = [line for line in f if "rw" in line.split()[5].split(",")]
print(json.dumps({"mounts": "".join(mounts), "seen": seen[:20], "written": written[:20]}))
"""


@dataclass(frozen=True)
class Mount:
    """One line of /proc/<pid>/mountinfo: the file system's device, the folder of it mounted, where, how."""

    device: str
    root: str
    point: str
    writable: bool


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def mounts(text: str) -> list[Mount]:
    """The mounts a mountinfo text lists, in its order."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 6:
            writable = "rw" in fields[5].split(",")
            found.append(Mount(fields[2], _unescape(fields[3]), _unescape(fields[4]), writable))
    return found


def host_place(path: Path) -> tuple[str, str]:
    """The device and the path within that file system of ``path`` on the host (what a bind shows)."""
    path = path.resolve()
    best: Mount | None = None
    for mount in mounts(Path("/proc/self/mountinfo").read_text()):
        point = Path(mount.point)
        if (point == path or point in path.parents) and (best is None or len(mount.point) >= len(best.point)):
            best = mount  # the longest, and of equal ones the last (the top of a stack), wins
    assert best is not None, f"no mount holds {path}"
    inside = os.path.relpath(path, best.point)
    return best.device, os.path.normpath(os.path.join(best.root, inside))


class HostCanaries:
    """Canary files where an escape could reach; ``probe`` proves the sandbox reaches none of them.

    ``tmp_folder`` is a folder of our own under the host's /tmp (not $TMPDIR: /tmp is what a wrong bind
    exposes); the workspace's parent and ``places`` get a canary file each. ``remove`` deletes only what
    was planted, and the tmp folder.
    """

    def __init__(self, workspace: Path, *places: Path) -> None:
        self.workspace = workspace.resolve()
        self.tmp_folder = Path(tempfile.mkdtemp(prefix="picoagent-canary-", dir="/tmp"))
        (self.tmp_folder / "nested").mkdir()
        (self.tmp_folder / "canary.txt").write_text("CANARY-HOST-TMP\n")
        (self.tmp_folder / "nested" / "precious.txt").write_text("CANARY-HOST-TMP-NESTED\n")
        self.places = [self.tmp_folder, self.workspace.parent, *(p.resolve() for p in places)]
        self.planted = []
        for place in self.places[1:]:
            planted = place / f"canary-{uuid.uuid4().hex[:8]}.txt"
            planted.write_text(f"CANARY-{place.name}\n")
            self.planted.append(planted)
        self.snapshot = self.files()

    def files(self) -> dict[Path, bytes]:
        """Every file in the canary places (the workspace excluded), with its content."""
        found: dict[Path, bytes] = {}
        for place in self.places:
            for path in sorted(place.rglob("*")):
                if path == self.workspace or self.workspace in path.parents or not path.is_file():
                    continue
                found[path] = path.read_bytes()
        return found

    def changes(self) -> list[str]:
        """What differs from the snapshot: files changed, gone or new."""
        now = self.files()
        said = [f"changed: {p}" for p in self.snapshot if p in now and now[p] != self.snapshot[p]]
        said += [f"gone: {p}" for p in self.snapshot if p not in now]
        said += [f"new: {p}" for p in now if p not in self.snapshot]
        return said

    def probe(self, run: Callable[[str], str]) -> list[str]:
        """What of the host the sandbox reaches ([] when nothing); ``run`` runs a command in it, returns its output."""
        name = f"isolation-probe-{uuid.uuid4().hex}"
        output = run(shlex.join(["python3", "-c", PROBE, name, *map(str, self.places)]))
        made = sorted({path for place in self.places for path in place.rglob(name)})
        problems = [f"created from inside: {path}" for path in made]
        for path in made:
            path.unlink()
        answers = [line for line in output.splitlines() if line.startswith("{")]
        if not answers:
            return [*problems, f"the isolation probe gave no answer; the sandbox said: {output[:800]!r}"]
        answer = json.loads(answers[-1])
        problems += [f"visible inside: {p}" for p in answer["seen"]]
        problems += [f"writable inside: {p}" for p in answer["written"]]
        return problems + self._open_mounts(mounts(answer["mounts"]))

    def _open_mounts(self, inside: list[Mount]) -> list[str]:
        host_devices = {m.device for m in mounts(Path("/proc/self/mountinfo").read_text())}
        device, root = host_place(self.workspace)
        problems = []
        for mount in inside:
            if not mount.writable or mount.device not in host_devices:
                continue  # read-only, or a file system of the sandbox's own (a private tmpfs, its /proc)
            if mount.device == device and (mount.root == root or mount.root.startswith(root + "/")):
                continue  # the workspace
            if mount.point in DEVICE_NODES:
                continue
            problems.append(f"writable inside at {mount.point}: the host's {mount.root} (device {mount.device})")
        return problems

    def remove(self) -> None:
        """Delete the tmp folder and the planted files (nothing else)."""
        shutil.rmtree(self.tmp_folder, ignore_errors=True)
        for planted in self.planted:
            planted.unlink(missing_ok=True)


def isolation_failure(problems: list[str]) -> str:
    """The message a test fails with when the probe found the sandbox open."""
    return "the sandbox is open to the host, so its escape attempts were not run:\n  " + "\n  ".join(problems)
