"""The shell tool's two ways into bubblewrap (here, or the picoagent-sandbox service), and its refusals."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.cli.doctor import _check_sandbox
from appliance.config import Config, ShellConfig
from appliance.runtime import base_registry
from appliance.tools import sandbox, seccomp, shell
from appliance.tools.registry import ToolRegistry
from tests.helpers import needs_bwrap, write

REPO = Path(__file__).resolve().parents[1]


def run_shell(registry: ToolRegistry, command: str, timeout_s: float = 10.0) -> str:
    result = asyncio.run(registry.execute("shell", {"command": command}, timeout_s=timeout_s))
    return result.output if result.ok else f"ERROR: {result.error}"


@pytest.fixture
def unprobed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Forget the cached probe, before and after (the real one is cached for the other tests)."""
    saved = dict(sandbox._probed)
    sandbox._probed.clear()
    yield
    sandbox._probed.clear()
    sandbox._probed.update(saved)


def test_without_bubblewrap_the_shell_refuses_and_doctor_says_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unprobed: None
) -> None:
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    registry = ToolRegistry()
    config = ShellConfig(sandbox_socket="")
    shell.register(registry, config, tmp_path, 5.0)
    said = run_shell(registry, f"touch {tmp_path}/ran")
    assert said.startswith("ERROR: the shell is disabled: bubblewrap is not installed")
    assert "apt-get install bubblewrap" in said
    assert not (tmp_path / "ran").exists()  # never run bare
    loaded = _config(tmp_path, "")
    [check] = list(_check_sandbox(loaded))
    assert check.status == "fail" and "bubblewrap is not installed" in check.detail and "apt-get" in (check.fix or "")


def test_as_root_without_a_pids_cgroup_the_shell_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unprobed: None
) -> None:
    monkeypatch.setattr(sandbox.os, "getuid", lambda: 0)
    monkeypatch.setattr(sandbox, "_own_cgroup", lambda controller: None)
    problem = sandbox.check()
    assert problem is not None and "RLIMIT_NPROC" in problem.reason and "fork bomb" in problem.reason
    with pytest.raises(sandbox.SandboxUnavailable):
        sandbox.run(f"touch {tmp_path}/ran", tmp_path, sandbox.Limits(timeout_s=2))
    assert not (tmp_path / "ran").exists()


def test_when_namespaces_are_refused_the_reason_points_at_the_sandbox_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unprobed: None
) -> None:
    fake = tmp_path / "bwrap"  # what bwrap says under a unit with RestrictNamespaces=yes
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: str(fake))
    problem = sandbox.check()
    assert problem is not None and "No permissions to create new namespace" in problem.reason
    assert "sandbox_socket" in problem.fix and "user.max_user_namespaces" in problem.fix


@needs_bwrap
def test_a_broken_command_line_is_the_sandboxs_fault_not_the_machines(
    monkeypatch: pytest.MonkeyPatch, unprobed: None
) -> None:
    """needs_bwrap skips on machine_problem only: a bwrap_argv that bubblewrap refuses fails the tests."""
    real = sandbox.bwrap_argv
    monkeypatch.setattr(sandbox, "bwrap_argv", lambda *args, **kw: [*real(*args, **kw)[:1], "--no-such-option"])
    assert sandbox.machine_problem() is None
    problem = sandbox.check()
    assert (
        problem is not None and "could not set up the sandbox" in problem.reason and "--no-such-option" in str(problem)
    )


def test_a_configured_socket_that_is_missing_is_reported(tmp_path: Path) -> None:
    config = ShellConfig(sandbox_socket=str(tmp_path / "none.sock"))
    problem = shell.unavailable(config)
    assert problem is not None and "does not exist" in problem.reason and "picoagent-sandbox.socket" in problem.fix
    registry = ToolRegistry()
    shell.register(registry, config, tmp_path, 5.0)
    assert "is not reachable" in run_shell(registry, "true")


def _config(tmp_path: Path, sandbox_socket: str) -> object:
    from appliance.config import load_config

    path = write(tmp_path, f"tools:\n  shell:\n    sandbox_socket: '{sandbox_socket}'\n")
    return load_config(path)


def _serve(listener: socket.socket, workspace: Path) -> None:
    """What systemd's Accept=yes does: each connection becomes stdin and stdout of a new service process."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            subprocess.Popen(
                [sys.executable, "-m", "appliance.tools.sandbox_service", "--workspace", str(workspace)],
                stdin=conn.fileno(),
                stdout=conn.fileno(),
                cwd=REPO,
            )


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    path = str(tmp_path / "sandbox.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    threading.Thread(target=_serve, args=(listener, workspace), daemon=True).start()
    yield path, workspace
    listener.close()


@needs_bwrap
def test_commands_run_through_the_sandbox_service(service: tuple[str, Path], tmp_path: Path) -> None:
    path, workspace = service
    registry = ToolRegistry()
    shell.register(registry, ShellConfig(sandbox_socket=path), tmp_path / "elsewhere", 5.0)
    said = run_shell(registry, "echo hi > made.txt; cat made.txt; ls /dev; exit 4")
    assert said.startswith("[exit code 4]") and "hi" in said and "sda" not in said
    assert (workspace / "made.txt").read_text() == "hi\n"  # the service's workspace, never the caller's
    assert not (tmp_path / "elsewhere").exists()
    stopped = run_shell(registry, "sleep 30")
    assert stopped.startswith("[stopped: still running after 4 s")
    loaded = _config(tmp_path, path)
    [check] = list(_check_sandbox(loaded))
    assert check.status == "ok" and "picoagent-sandbox service" in check.detail


@needs_bwrap
def test_closing_the_connection_stops_the_command(service: tuple[str, Path]) -> None:
    path, _ = service
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    limits = sandbox.Limits(timeout_s=60)
    marker = f"sleep {4000 + os.getpid() % 1000}"
    conn.sendall(json.dumps({"command": f"{marker} & {marker}", "limits": limits.as_dict()}).encode() + b"\n")
    assert _wait(lambda: _running(marker), True), "the command never started"
    conn.close()
    assert _wait(lambda: _running(marker), False), "the command outlived its caller"


@needs_bwrap
def test_the_service_refuses_a_bad_request(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "appliance.tools.sandbox_service", "--workspace", str(tmp_path)],
        input=b'{"command": "true", "limits": {"timeout_s": 1, "workspace": "/"}}\n',
        capture_output=True,
        cwd=REPO,
        timeout=30,
        check=False,
    )
    answer = json.loads(done.stdout)
    assert done.returncode == 1 and answer["error"].startswith("bad request")


def _running(marker: str) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip() == marker.encode():
                    return True
            except OSError:
                continue
    return False


def _wait(probe: object, wanted: bool, timeout_s: float = 5.0) -> bool:
    assert callable(probe)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe() == wanted:
            return True
        time.sleep(0.05)
    return False


# --- the workspace quota (tools.workspace_max_mb) ---------------------------------------------------------


@needs_bwrap
@pytest.mark.parametrize("where", ["here", "service"])
def test_shell_calls_under_the_file_limit_cannot_fill_the_workspace_past_its_quota(
    where: str, config: Config, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each command writes less than tools.shell.max_file_mb; together they pass the quota: the command
    that passes it is told so, the next ones cannot write, and nothing the person had is lost."""
    config.data_dir = str(tmp_path)  # the workspace is tmp_path/workspace, as the service's below
    config.tools.workspace_max_mb = 1
    config.tools.shell.max_file_mb = 1
    config.tools.shell.sandbox_socket = request.getfixturevalue("service")[0] if where == "service" else ""
    root = tmp_path / "workspace"
    root.mkdir(exist_ok=True)
    registry = base_registry(config)
    part = "head -c 400000 /dev/zero > part{}.bin"  # 392 KiB on the disk, under the 1 MiB file limit
    assert run_shell(registry, part.format(1)) == "[exit code 0]"
    assert run_shell(registry, part.format(2)) == "[exit code 0]"
    passed = run_shell(registry, part.format(3))
    assert passed.startswith("[exit code 0]")
    assert "the workspace is over its quota" in passed and "tools.workspace_max_mb" in passed
    assert "rm " in passed  # what to do
    refused = run_shell(registry, part.format(4) + "; echo more >> part1.bin")
    assert "File size limit exceeded" in refused and "the workspace is over its quota" in refused
    assert (root / "part4.bin").stat().st_size == 0
    for kept in (1, 2, 3):  # nothing the person had is lost, nothing was appended
        assert (root / f"part{kept}.bin").stat().st_size == 400_000
    written = asyncio.run(registry.execute("write_file", {"path": "notes.txt", "content": "x"}, timeout_s=5))
    assert not written.ok and "the workspace is full" in (written.error or "")
    assert not (root / "notes.txt").exists()
    assert run_shell(registry, "rm part3.bin part4.bin && ls") == "[exit code 0]\npart1.bin\npart2.bin"
    assert run_shell(registry, "echo fits > notes.txt") == "[exit code 0]"


@needs_bwrap
def test_a_command_that_writes_past_the_quota_is_stopped(tmp_path: Path) -> None:
    limits = sandbox.Limits(timeout_s=120, max_file_mb=1, workspace_max_bytes=1 << 20)
    outcome = sandbox.run(
        "for i in 1 2 3 4; do head -c 400000 /dev/zero > f$i; done; echo written; sleep 100", tmp_path, limits
    )
    assert outcome.stopped == "quota" and outcome.exit_code is None
    assert "written" in outcome.output
    said = shell.describe(outcome, limits)
    assert said.startswith("[stopped: the workspace passed its quota of 1 MiB (tools.workspace_max_mb)")


# Each: a system call, and arguments with which the kernel itself answers something other than EPERM
# (a bad pointer, an unknown command, no such process), so EPERM can only come from the filter.
PROBE = r"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
x86 = os.uname().machine == "x86_64"
calls = {
    "bpf": (321 if x86 else 280, 9999, None, 0),
    "io_uring_setup": (425, 0, None),
    "io_uring_enter": (426, -1, 0, 0, 0, None, 0),
    "io_uring_register": (427, -1, 0, None, 0),
    "keyctl": (250 if x86 else 219, 9999, 0, 0, 0, 0),
    "add_key": (248 if x86 else 217, None, None, None, 0, 0),
    "request_key": (249 if x86 else 218, None, None, None, 0),
    "userfaultfd": (323 if x86 else 282, 1 | 0x100000),  # user-mode only (allowed), plus a bad flag
    "perf_event_open": (298 if x86 else 241, None, 0, -1, -1, 0),
    "ptrace": (101 if x86 else 117, 16, 999999999, 0, 0),  # PTRACE_ATTACH to no process
    "process_vm_readv": (310 if x86 else 270, 999999999, None, 0, None, 0, 0),
}
for name, (nr, *args) in calls.items():
    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *args)
    print(name, errno.errorcode.get(ctypes.get_errno(), "?") if result == -1 else "allowed")
print("getpid", "allowed" if libc.syscall(ctypes.c_long(39 if x86 else 172)) == os.getpid() else "broken")
"""


@needs_bwrap
def test_kernel_interfaces_are_refused_inside_the_sandbox(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    outcome = sandbox.run("python3 probe.py", tmp_path, sandbox.Limits(timeout_s=20))
    assert outcome.exit_code == 0, outcome.output
    said = dict(line.split() for line in outcome.output.splitlines())
    print(said)
    assert said.pop("getpid") == "allowed"  # everything else still works
    assert said == {name: "EPERM" for name in said} and len(said) == 11, outcome.output
    if os.uname().machine == "x86_64":  # an x32 system call is not a way around the table: it is killed
        x32 = "python3 -c 'import ctypes; ctypes.CDLL(None).syscall(ctypes.c_long(0x40000000 | 39))'; echo $?"
        killed = sandbox.run(x32, tmp_path, sandbox.Limits(timeout_s=20))
        assert killed.output.strip().splitlines()[-1] == str(128 + signal.SIGSYS), killed.output


def _kernel_numbers(header: Path) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)\b", header.read_text())}


def test_the_seccomp_numbers_are_the_kernels() -> None:
    """Our tables against the installed kernel headers (linux-libc-dev): x86_64's, and the generic one aarch64 uses."""
    x86 = [
        *Path("/usr/include").glob("*/asm/unistd_64.h"),
        *Path("/usr").glob("x86_64-linux-gnu/include/asm/unistd_64.h"),
    ]
    generic = Path("/usr/include/asm-generic/unistd.h")
    if not x86 or not generic.exists():
        pytest.fail("the kernel headers are missing: sudo apt-get install linux-libc-dev")
    for arch, header in (("x86_64", x86[0]), ("aarch64", generic)):
        kernel = _kernel_numbers(header)
        ours = seccomp.NUMBERS[arch]
        known = {name for name in ours if name in kernel}  # newer headers drop removed calls (lookup_dcookie)
        assert {name: kernel[name] for name in known} == {name: ours[name] for name in known}, arch
        assert len(known) >= len(ours) - 2, f"{arch}: the header at {header} lacks most of our calls"
        missing = {name for name in seccomp.DENIED if name in kernel} - set(ours)
        assert not missing, f"{arch}: denied but not in our table: {missing}"
    assert set(seccomp.DENIED) - set(seccomp.NUMBERS["aarch64"]) == {"iopl", "ioperm"}  # x86 only


def test_an_architecture_without_a_table_is_refused_with_a_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seccomp.platform, "machine", lambda: "armv7l")
    with pytest.raises(sandbox.SandboxUnavailable) as caught:
        sandbox.seccomp_fd()
    assert "armv7l" in caught.value.reason and "64-bit" in caught.value.fix
