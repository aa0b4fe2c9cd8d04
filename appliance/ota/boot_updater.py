"""The boot-time updater: a copy of the updater, outside every release, that no release can replace.

picoagent-update-boot.service runs as root at every boot, before the daemon, to roll back a switch
that never confirmed its health (``appliance/ota/updater.py``). Running the files of ``current`` for
that meant running the files of the very release being rolled back, as root: whoever could change a
release's files (a checkout's owner, before install-service gave them to root) became root at the
next boot. So the unit runs ``/usr/local/lib/picoagent/updater.pyz`` with Debian's python3 in
isolated mode (``-I``: no PYTHONPATH, no user site, no current directory): a zip of the updater's
modules (standard library only), owned by root, 0644.

Who writes it, and when:

- ``make install-service`` and the image build, from the release they install (trusted as root is);
- ``update apply``, once a signed bundle's release has answered healthy: from that release's files,
  each checked again against the sha256 its signed manifest gives (what is zipped is the bytes that
  were checked), and only after ``python3 -I`` ran the new zip (``--help``). So an OTA update that
  changes the updater brings its boot-time copy along, and only signed code ever gets there.
- Nothing else: a rollback (by hand or at boot) keeps it, a release that is not from a bundle never
  replaces it, and a bundle that lacks one of the modules (or has one that no longer matches) leaves
  the old one in place, said in the update's output. The boot updater must therefore understand the
  layout and journal of every release it may roll back to, which ota/layout.py keeps compatible.

It is the *running* release that zips the new release's files, with its own list of modules and its
own ``MAIN``. Releases before ``appliance/ota/`` (issue 34) zip a fixed list (``appliance/update.py``,
``update_cli.py``, ``bundle.py``, ``boot_updater.py``, ``errors.py``, ``fileio.py``, ``__init__.py``)
and run ``from appliance.update import main``. Updating such a device to a release with ``ota/``:
those paths are still there (``appliance/update.py`` and the others re-export ``appliance.ota``), but
the old list does not zip ``ota/``, so the test run fails with the reason ``appliance/update.py``
gives, the update says "the boot-time updater was kept as it was: ...", and the device keeps its old
boot-time updater, which reads the unchanged layout and journal. The update after that is applied by
the new release's updater and zips ``ota/``. This one zips :data:`BOTTOM` and every module in
``appliance/ota/`` of the new release (a later release may add or split modules there and its boot-time
copy still comes along), and runs ``from appliance.ota.cli import main``: a later release keeps
``appliance/ota/cli.py``'s ``main`` and imports nothing else of ``appliance`` from ``ota/``
(tests/test_ota_boot_updater.py checks both), or its devices keep their older copy until the update after.

``python3 -m appliance.ota.boot_updater [--root DIR] [--release DIR]`` writes it (install-service, image).
Measured here: an 18 KB zip, written and test-run in 0.1 s; a boot with nothing to roll back, 0.1 s.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from appliance.errors import PicoagentError, exit_for_people
from appliance.fileio import fsync_dir

# What the updater imports from outside appliance/ota/ (the rest is the standard library and cryptography).
BOTTOM = ("appliance/__init__.py", "appliance/errors.py", "appliance/fileio.py")
PACKAGE = "appliance/ota"
MAIN = b"import sys\nfrom appliance.ota.cli import main\n\nsys.exit(main())\n"
RELATIVE_PATH = "usr/local/lib/picoagent/updater.pyz"
SYSTEM_PYTHON = "/usr/bin/python3"  # what the unit runs it with


class BootUpdaterError(PicoagentError, RuntimeError):
    """The boot-time updater could not be written; the one in place (if any) is kept."""


def modules(release: Path) -> tuple[str, ...]:
    """The files the zip holds, relative to ``release``: :data:`BOTTOM` and every module of its ``ota/``."""
    package = sorted(p.relative_to(release).as_posix() for p in (release / PACKAGE).glob("*.py"))
    if not package:
        raise BootUpdaterError(f"the release {release} has no {PACKAGE}/")
    return (*BOTTOM, *package)


def target(root: Path) -> Path:
    """Where the boot-time updater lives under ``root``."""
    return Path(root) / RELATIVE_PATH


def install(release: Path, root: Path, expected: Mapping[str, str] | None = None) -> Path:
    """Write the boot-time updater from ``release``'s modules; with ``expected`` (path -> sha256 from a
    signed manifest) each module must match it. Atomic: the old one stays until the new one runs."""
    members = {}
    for name in modules(release):
        try:
            data = (release / name).read_bytes()
        except OSError as exc:
            raise BootUpdaterError(f"the release {release} has no {name} ({exc.strerror})") from None
        if expected is not None:
            if name not in expected:
                raise BootUpdaterError(f"the signed manifest does not list {name}")
            if hashlib.sha256(data).hexdigest() != expected[name]:
                raise BootUpdaterError(f"{release / name} differs from its signed manifest")
        members[name] = data
    members["__main__.py"] = MAIN
    path = target(root)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_bytes(_zip(members))
        tmp.chmod(0o644)
        _check_runs(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return path


def _zip(members: Mapping[str, bytes]) -> bytes:
    """A zip with fixed timestamps and modes: the same modules always give the same bytes."""
    import zipfile  # only when the boot updater is (re)built: the idle daemon never needs it

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(members.items()):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()


def _check_runs(candidate: Path) -> None:
    """Run the new zip as the unit will (isolated): an updater that cannot start is never installed."""
    python = SYSTEM_PYTHON if os.access(SYSTEM_PYTHON, os.X_OK) else sys.executable
    try:
        done = subprocess.run(
            [python, "-I", str(candidate), "--help"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BootUpdaterError(f"the new boot-time updater did not run ({exc})") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise BootUpdaterError(f"the new boot-time updater does not start: {said[-1] if said else done.returncode}")


def main(argv: list[str] | None = None) -> int:
    """``python3 -m appliance.ota.boot_updater``: write the boot-time updater from a release."""
    parser = argparse.ArgumentParser(prog="python3 -m appliance.ota.boot_updater", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path("/"), help="the device's root directory")
    parser.add_argument("--release", type=Path, help="the release to take it from (default: current)")
    args = parser.parse_args(argv)
    release = args.release or (args.root / "opt/picoagent/current").resolve()

    def run() -> int:
        print(f"boot-time updater: {install(release, args.root)} (from {release.name})")
        return 0

    return exit_for_people(run)


if __name__ == "__main__":
    sys.exit(main())
