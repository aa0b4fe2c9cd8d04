"""The boot-time updater across the move of OTA into ``appliance/ota/`` (issue 34; ota/boot_updater.py).

A device zips its boot-time updater from a new release with the module list and entry point of the
release it *runs*. So a device still on a release from before ``ota/`` builds this release's zip with
its old list; that zip cannot start, the device keeps its old boot-time updater and says so, and the
old one must still roll back this release's switches. The update after that is applied by this
release's updater, whose zip has ``ota/`` and rolls back on its own. Both run as real processes on a
device root in a temporary directory; the old updater is the code of the last commit before ``ota/``.
"""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from appliance.ota import boot_updater
from tests.fakes import ota_release
from tests.ota_device import REPO, TAGGED, Device
from tests.test_layers import imports_in

# The last commit with OTA in appliance/update.py, and what its boot_updater.py zipped (its MODULES).
BEFORE_OTA = "739f7ec18ffcec259bad7237e07905d98fef8781"
OLD_MODULES = (
    "appliance/__init__.py",
    "appliance/update.py",
    "appliance/update_cli.py",
    "appliance/bundle.py",
    "appliance/errors.py",
    "appliance/fileio.py",
    "appliance/boot_updater.py",
)


def old_updater(where: Path) -> Path:
    """The updater of the release before ``ota/``, from git, with its __init__.py tagged "old"."""
    have = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{BEFORE_OTA}^{{commit}}"], check=False)
    if have.returncode != 0:
        pytest.skip(f"needs the commit {BEFORE_OTA[:7]} (a shallow clone lacks it)")
    for name in OLD_MODULES:
        text = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{BEFORE_OTA}:{name}"], capture_output=True, text=True, check=True
        ).stdout
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text + ("# old\n" if name == TAGGED else ""))
    return where


def boot_copy(device: Device) -> str:
    """The tag of the boot-time updater in place ("" when there is none)."""
    path = boot_updater.target(device.root)
    if not path.exists():
        return ""
    with zipfile.ZipFile(path) as archive:
        return archive.read(TAGGED).decode().rstrip().splitlines()[-1].removeprefix("# ")


def run_boot_copy(device: Device, *args: str) -> subprocess.CompletedProcess[str]:
    """What picoagent-update-boot.service runs: Debian's python3, isolated, from /."""
    argv = ["/usr/bin/python3", "-I", str(boot_updater.target(device.root)), *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd="/", timeout=60)


def a_switch_the_power_cut(device: Device, version: str) -> None:
    """``version`` was switched to and started, never confirmed healthy; then the power went."""
    killed = device.apply(device.bundle(version, updater=version), kill_at="restarted")
    assert killed.returncode == -9, killed.stderr
    assert device.journal()["pending"]["version"] == version
    ota_release.stop_service(device.root)


def rolled_back_at_boot(device: Device, to: str, bad: str) -> None:
    """The boot-time updater in place undid the switch to ``bad``: ``to`` runs, as the journal says."""
    booted = run_boot_copy(device, "boot", "--root", str(device.root))
    assert booted.returncode == 0, booted.stdout + booted.stderr
    assert f"the switch to {bad} was never confirmed healthy" in booted.stdout
    assert device.assert_current_complete() == to
    journal = device.journal()
    assert journal["pending"] is None and journal["last"]["result"] == "rolled back"
    assert journal["last"]["version"] == bad and journal["current"] == to
    assert not (device.layout.releases / bad).exists()
    ota_release.start_service(device.restart, device.root, device.port)
    assert device.healthz()["version"] == to


@pytest.fixture
def device(tmp_path: Path, signing: tuple[Path, Path]):
    tools = tmp_path / "laptop"
    tools.mkdir()
    dev = Device(tmp_path / "root", tools, signing[0])
    yield dev
    ota_release.stop_service(dev.root)


def test_a_device_from_before_ota_keeps_its_boot_updater_which_still_rolls_this_release_back(
    device: Device, tmp_path: Path
) -> None:
    old = old_updater(tmp_path / "old")
    wrote = subprocess.run(  # install-service's way, on the old release
        [sys.executable, "-m", "appliance.boot_updater", "--root", str(device.root), "--release", str(old)],
        capture_output=True,
        text=True,
        cwd=old,
        env=dict(os.environ, PYTHONPATH=str(old)),
    )
    assert wrote.returncode == 0 and boot_copy(device) == "old", wrote.stderr
    before = boot_updater.target(device.root).read_bytes()
    assert device.apply(device.bundle("1.0"), code=old).returncode == 0  # the device runs the old updater

    # The old updater applies this release: healthy, but the zip its old list makes of it cannot start.
    update = device.apply(device.bundle("1.1", updater="1.1"), code=old)
    assert update.returncode == 0, update.stderr
    assert "1.1 is running and healthy" in update.stdout
    kept = next(line for line in update.stdout.splitlines() if line.startswith("the boot-time updater was kept"))
    assert "does not start" in kept and "appliance/ota/" in kept and "the boot-time updater in place stays" in kept
    assert boot_updater.target(device.root).read_bytes() == before and boot_copy(device) == "old"

    # This release's updater (now the running one) switches to the next; the power goes before it is
    # confirmed; the old boot-time updater reads the layout and journal this release wrote, and rolls back.
    a_switch_the_power_cut(device, "1.2")
    assert boot_copy(device) == "old"
    rolled_back_at_boot(device, to="1.1", bad="1.2")


def test_the_update_after_brings_a_boot_updater_of_ota_that_rolls_back_on_its_own(device: Device) -> None:
    assert device.apply(device.bundle("1.0")).returncode == 0
    update = device.apply(device.bundle("1.1", updater="1.1"))
    assert update.returncode == 0, update.stderr
    assert "the boot-time updater was kept" not in update.stdout and boot_copy(device) == "1.1"
    with zipfile.ZipFile(boot_updater.target(device.root)) as archive:
        names = set(archive.namelist())
    assert set(boot_updater.modules(REPO)) | {"__main__.py"} == names
    assert "appliance/update.py" not in names  # a later release may drop the old paths
    helped = run_boot_copy(device, "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: python3 -m appliance.ota"), helped.stderr

    a_switch_the_power_cut(device, "1.2")
    rolled_back_at_boot(device, to="1.1", bad="1.2")


def test_the_boot_updater_zips_only_signed_modules_of_ota(tmp_path: Path) -> None:
    release = tmp_path / "release"
    for name in boot_updater.modules(REPO):
        (release / name).parent.mkdir(parents=True, exist_ok=True)
        (release / name).write_bytes((REPO / name).read_bytes())
    signed = {name: hashlib.sha256((release / name).read_bytes()).hexdigest() for name in boot_updater.modules(release)}
    (release / "appliance/ota/extra.py").write_text("print('not in the manifest')\n")
    with pytest.raises(boot_updater.BootUpdaterError, match=r"does not list appliance/ota/extra\.py"):
        boot_updater.install(release, tmp_path, signed)
    with pytest.raises(boot_updater.BootUpdaterError, match=r"has no appliance/ota/"):
        boot_updater.install(tmp_path / "a release without ota", tmp_path)
    assert not boot_updater.target(tmp_path).exists()


def test_ota_imports_only_what_its_zip_holds() -> None:
    """Inside ``appliance``, the modules of ``ota/`` import only each other and :data:`BOTTOM`; MAIN's entry
    point is ``appliance.ota.cli.main``: what the next releases keep for this one's zip (boot_updater.py)."""
    bottom = {name.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for name in boot_updater.BOTTOM}
    outside = [
        f"{imp.path.name}:{imp.line} {imp.imported}"
        for path in sorted((REPO / boot_updater.PACKAGE).glob("*.py"))
        for imp in imports_in(path)
        if imp.imported not in bottom and not imp.imported.startswith("appliance.ota")
    ]
    assert outside == []
    main = ast.parse(boot_updater.MAIN.decode())
    assert [(n.module, [a.name for a in n.names]) for n in ast.walk(main) if isinstance(n, ast.ImportFrom)] == [
        ("appliance.ota.cli", ["main"])
    ]
    from appliance.ota import cli

    assert callable(cli.main)
