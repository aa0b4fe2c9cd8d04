"""OTA on a device root in a temporary directory: signed bundles, refusals, health, rollback, SIGKILL.

The updater runs as a real process (`python -m appliance.ota apply --root ...`), the "service" is a
real HTTP server restarted by a real command, and kills are real SIGKILLs at each named step.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from appliance.ota import boot_updater
from appliance.ota.bundle import MANIFEST, BundleError, Manifest, parse_version, read_manifest
from appliance.ota.layout import RELEASE_FILE, release_info
from appliance.ota.updater import STEPS, Updater
from firmware_tools import release as host
from tests.fakes import ota_release
from tests.ota_device import ARCH, REPO, TAGGED, Device


@pytest.fixture
def device(tmp_path: Path, signing: tuple[Path, Path]):
    """A device that has run release 1.0 (installed by the updater onto an empty root)."""
    tools = tmp_path / "laptop"
    tools.mkdir()
    dev = Device(tmp_path / "root", tools, signing[0])
    first = dev.apply(dev.bundle("1.0"))
    assert first.returncode == 0, first.stderr
    assert dev.current() == "1.0"
    yield dev
    ota_release.stop_service(dev.root)


def test_a_good_bundle_switches_and_reports_healthy(device: Device) -> None:
    result = device.apply(device.bundle("1.1"))
    assert result.returncode == 0, result.stderr
    assert "1.1 is running and healthy" in result.stdout
    assert device.current() == "1.1"
    assert device.healthz() == {"status": "ok", "version": "1.1"}
    journal = device.journal()
    assert journal["last"]["result"] == "ok" and journal["previous"] == "1.0" and journal["pending"] is None
    assert (device.layout.releases / "1.1/.venv/installed").exists()  # the install step ran in the release
    check = json.loads(device.run("check", "--json", "--verify").stdout)
    assert check["version"] == "1.1" and check["releases"] == ["1.0", "1.1"] and check["modified_files"] == []
    assert os.readlink(device.layout.current) == "releases/1.1"  # relative: the root can move


def test_an_unhealthy_release_is_rolled_back_by_itself(device: Device) -> None:
    result = device.apply(device.bundle("1.1", "UNHEALTHY"), timeout=3)
    assert result.returncode == 1
    assert "1.1 was not healthy" in result.stderr and "rolled back to 1.0, which is healthy again" in result.stderr
    assert device.current() == "1.0"
    assert device.healthz()["version"] == "1.0"
    assert device.journal()["last"]["result"] == "rolled back"
    assert not (device.layout.releases / "1.1").exists()
    assert "rolled back: 1.1" in device.run("check").stdout


def database(device: Device, schema: int = 9) -> Path:
    """The device's picoagent.db at ``schema``, with one message the tests look for afterwards."""
    db = device.layout.database
    db.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE TABLE messages (text TEXT)")
        conn.execute("INSERT INTO messages VALUES ('the bins go out on Tuesday')")
        conn.execute(f"PRAGMA user_version={schema}")
        conn.commit()
    db.chmod(0o640)
    return db


def schema_and_texts(db: Path) -> tuple[int, list[str]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        texts = [row[0] for row in conn.execute("SELECT text FROM messages")]
        return conn.execute("PRAGMA user_version").fetchone()[0], texts


def test_a_release_that_upgraded_the_database_and_failed_is_rolled_back_with_the_database(device: Device) -> None:
    """The old release refuses a newer schema: without the copy taken before the switch it would not start."""
    db = database(device)
    ota_release.start_service(device.restart, device.root, device.port)  # 1.0 opens it: schema 9 is its own
    result = device.apply(device.bundle("1.1", "UNHEALTHY", schema=10), timeout=3)
    assert result.returncode == 1
    assert "rolled back to 1.0, which is healthy again" in result.stderr, result.stderr
    assert "1.1 had upgraded the database: the copy from before it is back" in result.stdout
    assert schema_and_texts(db) == (9, ["the bins go out on Tuesday"])
    assert db.stat().st_mode & 0o777 == 0o640  # the daemon's file, as it was
    aside = db.with_name("picoagent.db.from-1.1")
    assert schema_and_texts(aside)[0] == 10  # what 1.1 wrote is kept, not lost
    assert device.healthz() == {"status": "ok", "version": "1.0"}


def test_a_rollback_by_hand_after_an_upgrade_puts_the_older_database_back(device: Device) -> None:
    db = database(device)
    assert device.apply(device.bundle("1.1", schema=10)).returncode == 0
    assert schema_and_texts(db)[0] == 10  # 1.1 upgraded it at start, and runs on it
    copy = db.with_name("picoagent.db.before-1.1")
    assert copy.stat().st_mode & 0o777 == 0o600 and schema_and_texts(copy)[0] == 9
    back = device.run("rollback")
    assert back.returncode == 0, back.stderr
    assert device.healthz() == {"status": "ok", "version": "1.0"}
    assert schema_and_texts(db) == (9, ["the bins go out on Tuesday"])


def test_a_power_cut_after_an_upgrading_switch_boots_the_old_release_on_its_database(device: Device) -> None:
    db = database(device)
    killed = device.apply(device.bundle("1.1", schema=10), kill_at="restarted")  # 1.1 runs, never confirmed
    assert killed.returncode == -9
    assert device.healthz()["version"] == "1.1"  # started: it has upgraded the database
    assert schema_and_texts(db)[0] == 10
    ota_release.stop_service(device.root)  # the power goes; at boot the rollback unit runs first
    assert device.run("boot").returncode == 0
    ota_release.start_service(device.restart, device.root, device.port)
    assert device.healthz() == {"status": "ok", "version": "1.0"}
    assert schema_and_texts(db) == (9, ["the bins go out on Tuesday"])


def test_an_update_that_keeps_the_schema_keeps_every_message_through_a_rollback(device: Device) -> None:
    db = database(device)
    assert device.apply(device.bundle("1.1")).returncode == 0
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("INSERT INTO messages VALUES ('written on 1.1')")
        conn.commit()
    assert device.run("rollback").returncode == 0
    assert schema_and_texts(db) == (9, ["the bins go out on Tuesday", "written on 1.1"])  # nothing put back


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("tampered", "does not match its sha256"),
        ("truncated", "truncated"),
        ("wrong key", "signature does not match"),
        ("unsigned manifest edit", "signature does not match"),
        ("downgrade", "not newer than the running 1.0"),
        ("same version", "not newer than the running 1.0"),
        ("foreign arch", "built for"),
        ("too old to update", "needs at least version 1.5"),
        ("self-test fails", "[FAIL] local model runs: refused on purpose\nself-test failed on purpose"),  # which check
        ("install fails", "install failed"),
        ("another python", "which cannot run its wheels: nothing was changed"),
    ],
)
def test_bad_bundles_are_refused_with_nothing_changed(
    device: Device, signing: tuple[Path, Path], case: str, message: str
) -> None:
    bundle = {
        "tampered": lambda: _rewrite_member(device.bundle("1.1"), "release/app/data.bin", flip=True),
        "truncated": lambda: _truncate(device.bundle("1.1")),
        "wrong key": lambda: device.bundle("1.1", key=signing[1]),
        "unsigned manifest edit": lambda: _rewrite_member(device.bundle("1.1"), MANIFEST, version="9.9"),
        "downgrade": lambda: device.bundle("0.9"),
        "same version": lambda: device.bundle("1.0"),
        "foreign arch": lambda: device.bundle("1.1", arch="riscv64" if ARCH != "riscv64" else "aarch64"),
        "too old to update": lambda: device.bundle("2.0", min_version="1.5"),
        "self-test fails": lambda: device.bundle("1.1", "FAIL_SELFTEST"),
        "install fails": lambda: device.bundle("1.1", "FAIL_INSTALL"),
        # wheels for the other image's Python: a Debian 12 device never installs a Debian 13 bundle
        "another python": lambda: device.bundle("1.1", python="3.13" if sys.version_info[:2] != (3, 13) else "3.11"),
    }[case]()
    before = device.snapshot()
    result = device.apply(bundle)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert device.snapshot() == before
    assert device.healthz()["version"] == "1.0"


def test_a_self_test_short_of_memory_beside_the_daemon_runs_again_with_the_daemon_stopped(device: Device) -> None:
    """On a 512 MB board the new release's models do not fit beside the running daemon's (make image-test MEM=512:
    every update failed its self-test). The self-test says so (exit 3); the updater stops the daemon and asks
    again, since the new release will run in that memory."""
    stops = device.root / "run/stops"
    result = device.apply(device.bundle("1.1", "NEEDS_ROOM"))
    assert result.returncode == 0, result.stderr
    assert "stopping it for the self-test" in result.stdout
    assert stops.read_text() == "stop\n"  # once, for the second self-test
    assert device.current() == "1.1" and device.healthz() == {"status": "ok", "version": "1.1"}

    # an ordinary update never stops it
    assert device.apply(device.bundle("1.2")).returncode == 0
    assert stops.read_text() == "stop\n"


def test_a_self_test_that_fails_with_the_daemon_stopped_too_starts_the_old_release_again(device: Device) -> None:
    before = device.snapshot()
    result = device.apply(device.bundle("1.1", "NEEDS_ROOM", "FAIL_SELFTEST"))
    assert result.returncode == 1
    assert "stopping it for the self-test" in result.stdout and "starting the running release again" in result.stdout
    assert "[FAIL] local model runs: refused on purpose" in result.stderr  # the second run's finding
    assert device.snapshot() == before
    assert device.healthz() == {"status": "ok", "version": "1.0"}  # serving again


def test_force_allows_a_downgrade(device: Device) -> None:
    result = device.apply(device.bundle("0.9"), "--force")
    assert result.returncode == 0, result.stderr
    assert device.current() == "0.9" and device.healthz()["version"] == "0.9"


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("then", ["run again", "reboot"])
def test_a_killed_update_always_leaves_a_complete_verified_release(device: Device, step: str, then: str) -> None:
    bundle = device.bundle("1.1")
    killed = device.apply(bundle, kill_at=step)
    assert killed.returncode == -9, killed.stderr  # it really died by SIGKILL at that step
    confirmed = step == "confirmed"  # the journal says 1.1 is healthy: it stays
    if then == "run again":
        again = device.apply(bundle)
        if confirmed:
            assert again.returncode == 1 and "not newer than the running 1.1" in again.stderr
        else:
            assert again.returncode == 0, again.stderr
        assert device.assert_current_complete() == "1.1"
        assert device.healthz()["version"] == "1.1"
    else:
        ota_release.stop_service(device.root)  # the power goes; at boot the rollback unit runs first
        boot = device.run("boot")
        assert boot.returncode == 0, boot.stderr
        # A switch that never confirmed its health does not survive a reboot.
        expected = "1.1" if confirmed else "1.0"
        assert device.assert_current_complete() == expected
        ota_release.start_service(device.restart, device.root, device.port)
        assert device.healthz()["version"] == expected
        assert device.journal().get("pending") is None


def test_the_last_two_releases_are_kept_and_rollback_goes_back_one(device: Device) -> None:
    for version in ("1.1", "1.2", "1.3"):
        assert device.apply(device.bundle(version)).returncode == 0
    assert sorted(p.name for p in device.layout.releases.iterdir()) == ["1.2", "1.3"]
    back = device.run("rollback")
    assert back.returncode == 0, back.stderr
    assert "now running 1.2" in back.stdout
    assert device.current() == "1.2" and device.healthz()["version"] == "1.2"
    assert device.journal()["last"]["result"] == "rolled back by hand"


def test_an_interrupted_rollback_keeps_both_releases(device: Device) -> None:
    assert device.apply(device.bundle("1.1")).returncode == 0
    assert device.run("rollback", kill_at="rollback-switched").returncode == -9
    assert device.run("boot").returncode == 0
    assert device.assert_current_complete() == "1.1"  # the journalled switch was undone...
    assert (device.layout.releases / "1.0" / RELEASE_FILE).exists()  # ...and the older release kept
    back = device.run("rollback")
    assert back.returncode == 0 and device.current() == "1.0", back.stderr


def test_a_second_updater_waits_its_turn(device: Device) -> None:
    import fcntl

    fd = os.open(device.layout.lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        result = device.apply(device.bundle("1.1"))
    finally:
        os.close(fd)
    assert result.returncode == 1 and "another update is running" in result.stderr
    assert device.current() == "1.0"


def test_a_device_without_the_public_key_refuses(device: Device) -> None:
    (device.root / "etc/picoagent/ota.pub").unlink()
    result = device.apply(device.bundle("1.1"))
    assert result.returncode == 1 and "no OTA public key" in result.stderr


def test_verify_on_the_laptop(device: Device, signing: tuple[Path, Path]) -> None:
    good = device.bundle("1.1")
    pub = signing[0].with_suffix(".pub")
    ok = subprocess.run(
        [sys.executable, "-m", "firmware_tools", "verify", str(good), "--pub", str(pub)], capture_output=True, text=True
    )
    assert ok.returncode == 0 and "all hashes match" in ok.stdout
    bad = _rewrite_member(device.bundle("1.2"), "release/serve.py", flip=True)
    refused = subprocess.run(
        [sys.executable, "-m", "firmware_tools", "verify", str(bad), "--pub", str(pub)], capture_output=True, text=True
    )
    assert refused.returncode == 1 and "serve.py does not match its sha256" in refused.stderr


def test_a_bundle_of_the_checkout_carries_its_tracked_files_and_wheels(tmp_path: Path, signing) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "example-1.0-py3-none-any.whl").write_bytes(b"PK\x05\x06" + bytes(18))
    path = host.build_bundle(tmp_path, signing[0], arch="aarch64", wheels=wheels, allow_dirty=True)
    manifest = read_manifest(path, [_public(signing[0])])
    names = {f.path for f in manifest.files}
    carried = {"appliance/ota/updater.py", "appliance/update.py", "firmware_tools/install-release.sh"}
    assert {*carried, "wheels/example-1.0-py3-none-any.whl"} <= names
    assert manifest.arch == "aarch64" and manifest.version == host.version() and len(manifest.commit) == 40
    assert manifest.install == host.INSTALL and manifest.selftest == host.SELFTEST


def boot_copy(device: Device) -> str:
    """Which tag the boot-time updater carries ("" when there is none; tests/ota_device.py TAGGED)."""
    path = boot_updater.target(device.root)
    if not path.exists():
        return ""
    with zipfile.ZipFile(path) as archive:
        text = archive.read(TAGGED).decode()
    last = text.rstrip().splitlines()[-1]
    return last[2:] if last.startswith("# 1.") else "untagged"


def test_an_update_brings_its_boot_updater_and_nothing_else_replaces_it(device: Device) -> None:
    assert boot_copy(device) == ""  # 1.0 carried no updater: none was written
    assert device.apply(device.bundle("1.1", updater="1.1")).returncode == 0
    assert boot_copy(device) == "1.1"  # from the signed, healthy release
    bad = device.apply(device.bundle("1.2", "UNHEALTHY", updater="1.2"), timeout=3)
    assert bad.returncode == 1 and boot_copy(device) == "1.1"  # never from a release that was not healthy
    (device.layout.releases / "1.1/appliance/ota/cli.py").write_text("raise SystemExit('changed')\n")
    assert device.run("rollback").returncode == 0 and boot_copy(device) == "1.1"  # a rollback keeps it
    # It is what picoagent-update-boot.service runs: isolated, on its own.
    booted = subprocess.run(
        ["/usr/bin/python3", "-I", str(boot_updater.target(device.root)), "boot", "--root", str(device.root)],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert booted.returncode == 0 and booted.stdout.strip() == "nothing to do", booted.stdout + booted.stderr


def test_the_boot_updater_takes_only_checked_modules_that_run(tmp_path: Path) -> None:
    release = tmp_path / "release"
    for name in boot_updater.modules(REPO):
        (release / name).parent.mkdir(parents=True, exist_ok=True)
        (release / name).write_bytes((REPO / name).read_bytes())
    signed = {name: hashlib.sha256((release / name).read_bytes()).hexdigest() for name in boot_updater.modules(REPO)}
    first = boot_updater.install(release, tmp_path, signed)
    before = first.read_bytes()
    assert boot_updater.install(release, tmp_path, signed).read_bytes() == before  # the same bytes every time
    (release / "appliance/errors.py").write_text("changed after it was checked\n")
    with pytest.raises(boot_updater.BootUpdaterError, match="differs from its signed manifest"):
        boot_updater.install(release, tmp_path, signed)
    with pytest.raises(boot_updater.BootUpdaterError, match=r"does not list appliance/__init__\.py"):
        boot_updater.install(release, tmp_path, {k: v for k, v in signed.items() if k != "appliance/__init__.py"})
    (release / "appliance/errors.py").write_text("import a_module_the_zip_lacks\n")
    with pytest.raises(boot_updater.BootUpdaterError, match=r"does not start.*a_module_the_zip_lacks"):
        boot_updater.install(release, tmp_path)  # install-service's way: no manifest, but it must run
    assert first.read_bytes() == before and [p.name for p in first.parent.iterdir()] == ["updater.pyz"]


def test_versions_order_numerically_and_refuse_words() -> None:
    assert parse_version("0.1.0.10") > parse_version("0.1.0.9")
    assert parse_version("1.0") == parse_version("1.0.0")
    with pytest.raises(BundleError):
        parse_version("1.0-beta")


@pytest.mark.parametrize("text", ["1.2.3\n", "\u0661.\u0662", "1.2.3 ", " 1.2", "", "1..2"])
def test_a_version_is_ascii_dotted_numbers_and_nothing_after(text: str) -> None:
    """It names a folder (releases/<version>): a trailing newline or other digits must not get through."""
    with pytest.raises(BundleError, match="is not dotted numbers"):
        parse_version(text)
    raw = json.loads(Manifest("1.0", "0", ARCH, ()).to_json())
    raw["version"] = text
    with pytest.raises(BundleError):
        Manifest.from_json(json.dumps(raw).encode())


def test_a_manifest_may_not_escape_the_release(tmp_path: Path) -> None:
    raw = json.loads(Manifest("1.0", "0", ARCH, ()).to_json())
    raw["files"] = {"../../etc/passwd": {"size": 1, "sha256": "0" * 64, "mode": 420}}
    with pytest.raises(BundleError, match="unsafe path"):
        Manifest.from_json(json.dumps(raw).encode())


# --- helpers --------------------------------------------------------------------------------------


def _public(private: Path):
    from appliance.ota.bundle import load_public_keys

    return load_public_keys([private.with_suffix(".pub")])[0]


def _rewrite_member(bundle: Path, name: str, *, flip: bool = False, version: str | None = None) -> Path:
    """A copy of ``bundle`` with one member changed and the signature left as it was."""
    out = bundle.with_name(bundle.stem + "-changed.bundle")
    with tarfile.open(bundle) as src, tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as dst:
        for member in src:
            data = src.extractfile(member).read()  # type: ignore[union-attr]
            if member.name == name and flip:
                data = bytes([data[0] ^ 1]) + data[1:]
            if member.name == name and version:
                data = data.replace(b'"version": "1.1"', f'"version": "{version}"'.encode())
            member.size = len(data)
            import io

            dst.addfile(member, io.BytesIO(data))
    return out


def _truncate(bundle: Path) -> Path:
    out = bundle.with_name(bundle.stem + "-truncated.bundle")
    data = bundle.read_bytes()
    out.write_bytes(data[: len(data) * 2 // 3])
    return out


def test_release_file_is_what_marks_a_release_complete(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    assert release_info(tmp_path / "r") is None
    (tmp_path / "r" / RELEASE_FILE).write_text('{"version": "1.0"}')
    assert release_info(tmp_path / "r") == {"version": "1.0"}


def test_the_health_check_follows_the_redirect_to_https_trusting_the_appliance_certificate_only(
    tmp_path: Path,
) -> None:
    """An image serves HTTPS (web.tls: auto): http://127.0.0.1:8080/healthz answers with a redirect."""
    import asyncio

    from aiohttp import web

    from appliance.channels.web.certificate import ensure_certificate
    from appliance.channels.web.hosts import SiteNames
    from appliance.channels.web.listener import DualSite

    names = SiteNames(frozenset({"localhost"}), frozenset({"127.0.0.1"}))
    root = tmp_path / "root"
    ensure_certificate(root / "var/lib/picoagent", names)  # the device's own data dir
    impostor, _ = ensure_certificate(tmp_path / "elsewhere", names)

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "version": "2.0"})

    async def check(served_by: Path) -> tuple[bool, str]:
        app = web.Application()
        app.router.add_get("/healthz", healthz)
        runner = web.AppRunner(app)
        await runner.setup()
        certificate, _ = ensure_certificate(served_by, names)
        site = DualSite(runner, "127.0.0.1", 0, ssl_context=certificate.server_context(), site_names=names)
        await site.start()
        try:
            url = f"http://127.0.0.1:{site.port}/healthz"
            updater = Updater(root, restart=None, health_url=url, health_timeout_s=3, systemd=False, say=print)
            return await asyncio.to_thread(updater.health.wait, "2.0")
        finally:
            await runner.cleanup()

    assert asyncio.run(check(root / "var/lib/picoagent")) == (True, "healthy")
    healthy, why = asyncio.run(check(impostor.cert_path.parent.parent))
    assert not healthy and "CERTIFICATE_VERIFY_FAILED" in why


def test_verify_where_no_release_is_installed_says_there_is_nothing_to_verify(tmp_path: Path) -> None:
    """`picoagent update check --verify` in a git checkout: no release layout, so no files to compare."""
    from tests.helpers import picoagent

    out = picoagent("update", "check", "--verify", "--root", tmp_path, cwd=tmp_path)
    assert out.returncode == 1, out.stderr  # nothing was verified: a script must not read it as "all match"
    files = next(line for line in out.stdout.splitlines() if line.startswith("files"))
    missing = tmp_path / "opt" / "picoagent" / "current"
    assert files == f"files     no release is installed here: nothing to verify (a checkout? no {missing})"
    assert "CHANGED" not in out.stdout
    data = json.loads(picoagent("update", "check", "--verify", "--json", "--root", tmp_path, cwd=tmp_path).stdout)
    assert data["modified_files"] is None  # not a list of files that differ


def test_a_bundle_says_which_python_it_is_for_and_an_old_one_reads_the_same(tmp_path: Path, signing) -> None:
    trixie = Manifest("1.0", "0", ARCH, (), python="3.13", glibc="2.41")
    assert Manifest.from_json(trixie.to_json()) == trixie
    assert trixie.system() == "Python 3.13 (Debian 13 (trixie))"
    old = Manifest("1.0", "0", ARCH, ())
    assert "python" not in json.loads(old.to_json())  # the bytes a bundle from before Debian 13 signed
    assert Manifest.from_json(old.to_json()).python == ""


@pytest.mark.parametrize(
    ("device_python", "device_glibc", "bundle_python", "bundle_glibc", "admitted"),
    [
        ("3.13", "2.41", "3.13", "2.41", True),
        ("3.13", "2.42", "3.13", "2.41", True),  # a newer glibc runs older wheels
        ("3.11", "2.36", "3.13", "2.41", False),  # the Debian 12 image and a Debian 13 bundle
        ("3.13", "2.41", "3.11", "2.36", False),  # and the other way round: its venv would not import
        ("3.13", "2.36", "3.13", "2.41", False),  # the right Python on too old a C library
        ("3.11", "2.36", "", "", True),  # a bundle that does not say (from before Debian 13)
    ],
)
def test_the_device_admits_only_bundles_for_its_python_and_glibc(
    tmp_path: Path, device_python: str, device_glibc: str, bundle_python: str, bundle_glibc: str, admitted: bool
) -> None:
    updater = Updater(tmp_path, arch=ARCH, python=device_python, glibc=device_glibc, restart=None)
    manifest = Manifest("1.0", "0", ARCH, (), python=bundle_python, glibc=bundle_glibc)
    if admitted:
        assert updater._admissible(manifest, force=False) is manifest
        return
    with pytest.raises(Exception) as refused:
        updater._admissible(manifest, force=True)  # --force allows a downgrade, never foreign wheels
    assert f"this device runs Python {device_python}" in str(refused.value)
    assert "Debian 13 image" in refused.value.fix


def test_a_release_s_install_step_refuses_wheels_for_another_python(tmp_path: Path) -> None:
    """What a device on an older release (whose updater reads no Python from the manifest) runs."""
    (tmp_path / "wheels").mkdir()
    other = "cp313" if sys.version_info[:2] != (3, 13) else "cp311"
    (tmp_path / "wheels" / f"aiohttp-3.13.2-{other}-{other}-manylinux_2_17_aarch64.whl").write_bytes(b"")
    (tmp_path / "wheels" / "cryptography-46.0.1-cp311-abi3-manylinux_2_34_aarch64.whl").write_bytes(b"")
    script = REPO / "firmware_tools" / "install-release.sh"
    done = subprocess.run(
        ["/bin/sh", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert done.returncode == 3
    assert f"this bundle's wheels are for CPython {other}" in done.stderr
    assert not (tmp_path / ".venv").exists()
