"""Run one shell command in bubblewrap, and make sure nothing of it is left when it returns.

What the command sees: the workspace read-write at /workspace, /usr (and the /bin, /lib links) and a
few /etc files read-only, a private size-limited /tmp, /proc of its own PID namespace, and /dev with
null, zero and urandom only. No network (its own empty network namespace), its own user, IPC, UTS and
cgroup namespaces, no capabilities, no further user namespaces, a new session (no TIOCSTI into ours),
an empty environment but PATH/HOME/LANG, SIGKILL when we die, and a seccomp filter that refuses bpf,
io_uring, the key store, userfaultfd, perf events, ptrace, mounts and the like (``seccomp.py``).

Limits: CPU seconds, address space, file size and open files per process (rlimits, inherited by
bwrap and everything under it); processes at once through RLIMIT_NPROC, which the kernel does not
enforce for root, so as root a pids (and memory) cgroup of our own takes over when we may create one.
On a Pi the picoagent-sandbox unit adds TasksMax and MemoryMax around it all, and runs it as a user
of its own (picoagent-sandbox), who shares only the workspace with the daemon, through a group. The
workspace's total size (``appliance.tools.quota``): a command that starts over the quota runs with a
file size limit of 0 (it can delete, not write), one that passes it is stopped, and the outcome says so.

Everything is gone when ``run`` returns: bwrap's PID 1 takes the whole namespace down with it when the
command exits (background processes too), and on a timeout, too much output or a cancel we kill bwrap,
whose child then dies by --die-with-parent; the cgroup, when there is one, is emptied with SIGKILL.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import resource
import select
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from appliance.tools import quota, seccomp
from appliance.tools.trust import LASTING

log = logging.getLogger(__name__)

SANDBOX_WORKSPACE = "/workspace"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
TMP_BYTES = 64 * 1024 * 1024
# Read-only files of /etc that ordinary programs need (dynamic linking, alternatives, time zone).
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf")
ROOT_UNCAPPED = (
    "running as root with no pids cgroup to join: the kernel does not apply RLIMIT_NPROC to root, "
    "so nothing would stop a fork bomb"
)
FIX_INSTALL = "install bubblewrap (sudo apt-get install bubblewrap)"
FIX_ARCH = "run picoagent on a 64-bit system (x86_64, or aarch64: 64-bit Raspberry Pi OS or Debian arm64)"
FIX_ROOT = "run picoagent as an ordinary user, or under systemd (make install-service)"
FIX_USERNS = (
    "allow unprivileged user namespaces (sysctl user.max_user_namespaces=10000, and on kernels that have it "
    "kernel.unprivileged_userns_clone=1); under the hardened picoagent unit set tools.shell.sandbox_socket "
    "to the picoagent-sandbox service's socket (make install-service does)"
)


@dataclass(frozen=True)
class Limits:
    """What one command may use."""

    timeout_s: float = 30.0
    memory_mb: int = 512
    cpu_s: int = 20
    max_file_mb: int = 64
    max_processes: int = 64
    max_output_bytes: int = 256 * 1024
    workspace_max_bytes: int = 0  # the workspace's quota (tools.workspace_max_mb); 0: none

    def as_dict(self) -> dict[str, Any]:
        """The limits as JSON-ready data (the sandbox service's request)."""
        return asdict(self)


@dataclass
class Outcome:
    """How a command ended, and what it printed (stdout and stderr together, in order)."""

    exit_code: int | None  # None: we stopped it
    output: str
    stopped: str = ""  # why we stopped it: "timeout", "output", "cancelled", "quota"
    duration_s: float = 0.0
    workspace: str = ""  # after it: the workspace is over its quota, and what to do ("" when it is not)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the sandbox service's answer)."""
        return asdict(self)


class SandboxUnavailable(Exception):
    """bubblewrap cannot run here; ``fix`` says what would make it work."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fix = fix


def bwrap_path() -> str | None:
    """Where bubblewrap is installed (None when it is not)."""
    return shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin:" + os.environ.get("PATH", ""))


def seccomp_fd() -> int:
    """A pipe's read end holding the seccomp program for ``bwrap --seccomp`` (the caller closes it)."""
    try:
        program = seccomp.program()
    except seccomp.UnsupportedArchitecture as exc:
        raise SandboxUnavailable(f"there is no seccomp filter for this architecture ({exc})", FIX_ARCH) from None
    read, write = os.pipe()  # a few hundred bytes: the pipe holds them all, bwrap reads to the end
    try:
        os.write(write, program)
    finally:
        os.close(write)
    return read


def lasting_fds(workspace: Path) -> dict[str, int]:
    """O_PATH fds of the workspace's SOUL.md, USER.md and skills/ (trust.LASTING), for read-only binds.

    Every later prompt reads them, so no command may change them (a page read this turn could have
    asked for it). Opened without following links and bound through /proc/self/fd: a link planted in
    their place is never bound, and nothing swapped in after this is either. The caller closes them.
    """
    fds: dict[str, int] = {}
    for name in LASTING:
        try:
            fd = os.open(workspace / name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            fds[name] = fd
        else:
            os.close(fd)
    return fds


def bwrap_argv(
    bwrap: str, workspace: Path, command: str, filter_fd: int, read_only: dict[str, int] | None = None
) -> list[str]:
    """The bwrap command line that runs ``command`` with /bin/sh in the sandbox; ``filter_fd``: seccomp_fd();
    ``read_only``: lasting_fds(), bound read-only over the workspace's own."""
    argv = [
        bwrap,
        "--unshare-all",  # IPC, PID, network, UTS, cgroup (and user when it can)
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        "--clearenv",
        "--setenv",
        "PATH",
        SANDBOX_PATH,
        "--setenv",
        "HOME",
        SANDBOX_WORKSPACE,
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "TMPDIR",
        "/tmp",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for top in ("bin", "lib", "lib64", "sbin", "lib32", "libx32"):
        path = Path("/") / top
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), f"/{top}"]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), f"/{top}"]
    for name in ETC_FILES:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    argv += [
        "--proc",
        "/proc",
        "--tmpfs",
        "/dev",
        *("--dev-bind", "/dev/null", "/dev/null"),
        *("--dev-bind", "/dev/zero", "/dev/zero"),
        *("--dev-bind", "/dev/urandom", "/dev/urandom"),
        *("--symlink", "/proc/self/fd", "/dev/fd"),
        *("--symlink", "/proc/self/fd/0", "/dev/stdin"),
        *("--symlink", "/proc/self/fd/1", "/dev/stdout"),
        *("--symlink", "/proc/self/fd/2", "/dev/stderr"),
        "--size",
        str(TMP_BYTES),
        "--tmpfs",
        "/tmp",
        "--bind",
        str(workspace),
        SANDBOX_WORKSPACE,
    ]
    for name, fd in (read_only or {}).items():
        argv += ["--ro-bind", f"/proc/self/fd/{fd}", f"{SANDBOX_WORKSPACE}/{name}"]
    argv += [
        "--chdir",
        SANDBOX_WORKSPACE,
        "--seccomp",
        str(filter_fd),
        "--",
        "/bin/sh",
        "-c",
        command,
    ]
    return argv


# --- a cgroup of our own (root only: the kernel does not apply RLIMIT_NPROC to root) ----------------

_serial = itertools.count()


class _Cgroup:
    """A pids (and memory) cgroup around one command, when we may make one; removed afterwards."""

    def __init__(self, limits: Limits) -> None:
        self.dirs: list[Path] = []
        self._procs: list[str] = []
        if os.geteuid() != 0:
            return
        name = f"picoagent-sandbox-{os.getpid()}-{next(_serial)}"
        for controller, settings in (
            ("pids", {"pids.max": str(limits.max_processes)}),
            ("memory", {"memory.limit_in_bytes": str(limits.memory_mb * 4 << 20)}),
        ):
            base = _own_cgroup(controller)
            if base is None:
                continue
            path = base / name
            try:
                path.mkdir()
                for key, value in settings.items():
                    (path / key).write_text(value)
            except OSError as exc:
                log.debug("no %s cgroup for the sandbox: %s", controller, exc)
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
            self.dirs.append(path)
        self._procs = [str(d / "cgroup.procs") for d in self.dirs]

    @property
    def caps_processes(self) -> bool:
        """Whether a pids cgroup limits the command."""
        return any("pids" in str(d) for d in self.dirs)

    def enter(self) -> None:
        """Move the calling (child) process into the cgroups; runs between fork and exec (plain os calls)."""
        for path in self._procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def remove(self) -> None:
        """Kill whatever is still in the cgroups and remove them."""
        for path in self.dirs:
            for _ in range(50):
                try:
                    pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.01)
            with contextlib.suppress(OSError):
                path.rmdir()


def _own_cgroup(controller: str) -> Path | None:
    """Our cgroup in a v1 hierarchy of this controller, when it is mounted and writable."""
    root = Path("/sys/fs/cgroup") / controller
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            folder = root / path.lstrip("/")
            return folder if os.access(folder, os.W_OK) else None
    return None


def process_cap_available() -> bool:
    """Whether a command's process count can be capped as root (a writable pids cgroup)."""
    return _own_cgroup("pids") is not None


def _tasks_of(uid: int) -> int:
    """How many tasks (threads count) this user runs now: RLIMIT_NPROC counts them all."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                count += len(os.listdir(entry / "task"))
        except OSError:
            continue
    return count


# --- running -----------------------------------------------------------------------------------------


def run(command: str, workspace: Path, limits: Limits, *, cancel_fd: int | None = None) -> Outcome:
    """Run ``command`` in the sandbox; blocking. ``cancel_fd`` readable (or closed) stops it."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap is not installed", FIX_INSTALL)
    workspace = workspace.resolve()
    workspace.mkdir(parents=True, exist_ok=True)
    filter_fd = seccomp_fd()
    cgroup = _Cgroup(limits)
    if os.getuid() == 0 and not cgroup.caps_processes:
        cgroup.remove()
        os.close(filter_fd)
        raise SandboxUnavailable(ROOT_UNCAPPED, FIX_ROOT)
    nproc = limits.max_processes + (_tasks_of(os.getuid()) if os.getuid() != 0 else 0)
    watch = quota.Watch(workspace, limits.workspace_max_bytes)
    file_bytes = watch.file_limit(limits.max_file_mb * 1024 * 1024)

    def limit_child() -> None:  # between fork and exec, in the child: inherited by bwrap and the command
        mb = 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb,) * 2)
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes,) * 2)
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        cgroup.enter()

    read_only = lasting_fds(workspace)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            bwrap_argv(bwrap, workspace, command, filter_fd, read_only),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=limit_child,  # rlimits and the cgroup must be in place before bwrap forks
            start_new_session=True,
            close_fds=True,
            pass_fds=(filter_fd, *read_only.values()),
            env={"PATH": SANDBOX_PATH},
        )
    except OSError as exc:
        cgroup.remove()
        raise SandboxUnavailable(f"cannot start bubblewrap: {exc}", FIX_INSTALL) from None
    finally:
        for fd in (filter_fd, *read_only.values()):
            os.close(fd)
    assert proc.stdout is not None
    output = bytearray()
    stopped = ""
    deadline = started + limits.timeout_s
    watched = [proc.stdout.fileno()] + ([cancel_fd] if cancel_fd is not None else [])
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                stopped = "timeout"
                break
            ready, _, _ = select.select(watched, [], [], min(left, 1.0))
            if cancel_fd is not None and cancel_fd in ready:
                stopped = "cancelled"
                break
            if proc.stdout.fileno() in ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break  # every writer is gone: the namespace has ended
                output += chunk
                if len(output) > limits.max_output_bytes:
                    del output[limits.max_output_bytes :]
                    stopped = "output"
                    break
            if watch.passed():
                stopped = "quota"
                break
    finally:
        if stopped or proc.poll() is None:
            _kill(proc)
        proc.stdout.close()
        cgroup.remove()
    code = proc.wait()
    return Outcome(
        None if stopped else code,
        output.decode("utf-8", errors="replace"),
        stopped,
        round(time.monotonic() - started, 3),
        watch.note(),
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill bwrap (its child and the namespace follow by --die-with-parent) and wait for it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()


_probed: dict[str, SandboxUnavailable | None] = {}


def check() -> SandboxUnavailable | None:
    """Why the sandbox cannot run here (None when it can); probed once per process."""
    if "result" not in _probed:
        _probed["result"] = _probe()
    return _probed["result"]


def machine_problem() -> SandboxUnavailable | None:
    """Why bubblewrap cannot run here at all, whatever we ask of it (None when it can).

    Not installed, no seccomp table for this architecture, root without a pids cgroup, or namespaces
    refused to a minimal bwrap that does not use ``bwrap_argv``: a fault of that command line is not the
    machine's, so the tests skip on this and fail on ``check``.
    """
    bwrap = bwrap_path()
    if bwrap is None:
        return SandboxUnavailable("bubblewrap is not installed", FIX_INSTALL)
    if os.getuid() == 0 and not process_cap_available():
        return SandboxUnavailable(ROOT_UNCAPPED, FIX_ROOT)
    try:
        os.close(seccomp_fd())
    except SandboxUnavailable as exc:
        return exc
    minimal = [bwrap, "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "--", "true"]
    return _refused(minimal, (), "bubblewrap cannot create its namespaces here")


def _probe() -> SandboxUnavailable | None:
    problem = machine_problem()
    if problem is not None:
        return problem
    bwrap = bwrap_path()
    assert bwrap is not None
    probe_dir = Path("/tmp") if os.access("/tmp", os.W_OK) else Path.cwd()
    filter_fd = seccomp_fd()
    try:
        argv = bwrap_argv(bwrap, probe_dir, "exit 0", filter_fd)
        return _refused(argv, (filter_fd,), "bubblewrap could not set up the sandbox here")
    finally:
        os.close(filter_fd)


def _refused(argv: list[str], fds: tuple[int, ...], what: str) -> SandboxUnavailable | None:
    """Why ``argv`` (a bwrap that runs a command doing nothing) failed, as ``what`` (reason); None when it ran."""
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=10, env={"PATH": SANDBOX_PATH}, pass_fds=fds, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxUnavailable(f"bubblewrap did not run: {exc}", FIX_INSTALL)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        reason = said[-1] if said else f"exit code {done.returncode}"
        return SandboxUnavailable(f"{what} ({reason})", FIX_USERNS)
    return None
