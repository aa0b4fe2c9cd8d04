"""Sending a bundle to a device over SSH, and writing an image to an SD card."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from appliance.errors import PicoagentError

REMOTE_PICOAGENT = "/opt/picoagent/current/.venv/bin/picoagent"
# What the device says of itself before a bundle is built for it or sent: the Python its releases' venvs
# are made with (Debian's python3), its glibc, and its OS by name.
PROBE = (
    "python3 -c 'import os, platform; v = platform.python_version_tuple(); "
    'print(v[0] + "." + v[1], os.confstr("CS_GNU_LIBC_VERSION").split()[-1], '
    'platform.freedesktop_os_release().get("PRETTY_NAME", "?"))\''
)


class PushError(PicoagentError, RuntimeError):
    """The bundle did not reach the device, or the device refused or rolled it back."""


def remote_script(picoagent: str, apply_args: Sequence[str]) -> str:
    """The shell the device runs: receive the bundle on stdin into /var/tmp, apply it, remove it."""
    args = " ".join(shlex.quote(a) for a in apply_args)
    return (
        "set -u; f=$(mktemp /var/tmp/picoagent-bundle.XXXXXX) || exit 1; "
        'trap \'rm -f "$f"\' EXIT; cat > "$f" || exit 1; '
        f'{shlex.quote(picoagent)} update apply "$f" {args}'
    )


def _ssh(host: str, user: str, port: int | None, identity: Path | None, ssh_options: Sequence[str]) -> list[str]:
    argv = ["ssh", "-o", "BatchMode=yes"]
    if port:
        argv += ["-p", str(port)]
    if identity:
        argv += ["-i", str(identity)]
    for option in ssh_options:
        argv += ["-o", option]
    return [*argv, f"{user}@{host}"]


def device_system(
    host: str,
    *,
    user: str = "root",
    port: int | None = None,
    identity: Path | None = None,
    ssh_options: Sequence[str] = (),
) -> tuple[str, str, str]:
    """(python, glibc, OS name) of the device, asked over SSH: ("3.11", "2.36", "Debian GNU/Linux 12 (bookworm)")."""
    argv = [*_ssh(host, user, port, identity, ssh_options), PROBE]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    except FileNotFoundError as exc:
        raise PushError("ssh is not installed", fix="apt-get install openssh-client") from exc
    except subprocess.TimeoutExpired as exc:
        raise PushError(f"{user}@{host} did not answer over SSH in 60 s") from exc
    if proc.returncode == 255:
        raise PushError(
            f"ssh to {user}@{host} failed ({proc.stderr.strip()})",
            fix="check the host name, that your key is in the device's authorized_keys (picoagent-setup.yaml)",
        )
    parts = proc.stdout.strip().split(" ", 2)
    if proc.returncode != 0 or len(parts) != 3:
        raise PushError(f"{user}@{host} did not say which Python it runs: {proc.stderr.strip() or proc.stdout!r}")
    return parts[0], parts[1], parts[2]


def check_target(bundle: Path, system: tuple[str, str, str]) -> None:
    """Refuse, before sending it, a bundle whose wheels the device cannot run (its own check is the same;
    a device on an older release has none, and would only fail later, at the install step)."""
    from appliance.ota.bundle import peek_manifest

    manifest = peek_manifest(bundle)
    python, glibc, name = system
    if not manifest.python:
        return
    if not manifest.runs_on(python, glibc):
        raise PushError(
            f"{bundle.name} is built for {manifest.system()}; the device runs Python {python} on {name}: "
            "it cannot run this bundle's wheels, and nothing was sent",
            fix=f"build it for the device: python -m firmware_tools bundle --python {python} (make ota does it)",
        )


def push(
    bundle: Path,
    host: str,
    *,
    user: str = "root",
    port: int | None = None,
    identity: Path | None = None,
    ssh_options: Sequence[str] = (),
    picoagent: str = REMOTE_PICOAGENT,
    apply_args: Sequence[str] = (),
) -> int:
    """Stream ``bundle`` over one SSH connection and run ``picoagent update apply`` on the device.

    The device's output (verification, install, health, rollback) is shown as it happens; returns the
    remote exit status (0: switched and healthy).
    """
    if not bundle.is_file():
        raise PushError(f"{bundle} does not exist", fix="build one: python -m firmware_tools bundle")
    from appliance.ota.bundle import BundleError, peek_manifest

    try:
        says_python = bool(peek_manifest(bundle).python)
    except BundleError:
        says_python = False  # not a bundle this laptop can read: the device refuses it, with its reason
    if says_python:
        check_target(bundle, device_system(host, user=user, port=port, identity=identity, ssh_options=ssh_options))
    argv = [*_ssh(host, user, port, identity, ssh_options), remote_script(picoagent, apply_args)]
    with bundle.open("rb") as fh:
        try:
            proc = subprocess.run(argv, stdin=fh, check=False)
        except FileNotFoundError as exc:
            raise PushError("ssh is not installed", fix="apt-get install openssh-client") from exc
    if proc.returncode == 255:
        raise PushError(
            f"ssh to {user}@{host} failed",
            fix="check the host name, that your key is in the device's authorized_keys (picoagent-setup.yaml)",
        )
    return proc.returncode


def flash(image: Path, device: Path, *, yes: bool = False) -> None:
    """Write ``image`` to the block device ``device`` (an SD card) after checking it is not mounted."""
    if not image.is_file():
        raise PushError(f"{image} does not exist", fix="make image")
    name = device.resolve().name
    if not Path(f"/sys/block/{name}").exists():
        raise PushError(f"{device} is not a whole disk (e.g. /dev/sdb, /dev/mmcblk0)")
    mounts = Path("/proc/mounts").read_text()
    if any(line.split()[0].startswith(str(device)) for line in mounts.splitlines()):
        raise PushError(f"{device} has mounted partitions", fix=f"unmount them first: umount {device}*")
    removable = Path(f"/sys/block/{name}/removable").read_text().strip() == "1"
    if not yes:
        what = "a removable disk" if removable else "NOT marked removable"
        answer = input(f"erase {device} ({what}) and write {image.name}? type yes: ")
        if answer.strip() != "yes":
            raise PushError("nothing was written")
    with image.open("rb") as src, open(device, "wb", buffering=0) as dst:
        total, size = 0, image.stat().st_size
        while chunk := src.read(4 << 20):
            dst.write(chunk)
            total += len(chunk)
            print(f"\r{total >> 20} / {size >> 20} MB", end="", file=sys.stderr)
        os.fsync(dst.fileno())
    print(
        f"\nwrote {image.name} to {device}; eject it, edit picoagent-setup.yaml on its boot partition", file=sys.stderr
    )
