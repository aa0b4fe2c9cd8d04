"""On-device OTA: verify a signed bundle, stage it as a new release, switch, health-check, roll back.

Where the releases, the link and the journal are: ota/layout.py. Every step leaves the device bootable
when the updater is killed right after it: a release directory appears by one rename only once it is
complete and self-tested, ``current`` changes by one rename, and a switch is journalled as *pending*
before it happens, so the next run (or the next boot, through picoagent-update-boot.service) rolls back
a release that never confirmed its health (ota/health.py). A switch away from a release that upgraded
the database puts the copy from before it back (ota/database.py).

Only the standard library and ``cryptography`` are used: the boot-time copy runs with Debian's python3
(``python3 -I updater.pyz boot``; ota/boot_updater.py), even when a release's venv is broken. A
release's files are never run as root at boot. The command line is ota/cli.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from appliance.errors import PicoagentError
from appliance.fileio import fsync_dir, write_atomic
from appliance.ota import boot_updater, database
from appliance.ota.bundle import (
    SELFTEST_SHORT_OF_MEMORY,
    SYSTEMS,
    BundleError,
    Manifest,
    extract_verified,
    load_public_keys,
    parse_version,
    verify_tree,
)
from appliance.ota.health import DEFAULT_HEALTH_URL, HealthCheck
from appliance.ota.layout import MANIFEST_COPY, RELEASE_FILE, Layout, release_info, timestamp

DEFAULT_RESTART = ("systemctl", "restart", "picoagent.service")
DEFAULT_STOP = ("systemctl", "stop", "picoagent.service")


class UpdateError(PicoagentError, RuntimeError):
    """An update was refused or failed; the device still runs a complete release."""

    status: int | None = None  # the exit status of the release's command that failed, if one did


class Updater:
    """Applies bundles to one device root; each public method takes the update lock first."""

    def __init__(
        self,
        root: Path = Path("/"),
        *,
        arch: str | None = None,
        restart: Sequence[str] | None = DEFAULT_RESTART,
        stop: Sequence[str] | None = DEFAULT_STOP,
        health_url: str = DEFAULT_HEALTH_URL,
        health_timeout_s: float = 180.0,
        step_timeout_s: float = 900.0,
        systemd: bool | None = None,
        say: Callable[[str], None] = print,
        python: str | None = None,
        glibc: str | None = None,
    ) -> None:
        self.layout = Layout(Path(root))
        self.arch = arch or platform.machine()
        # What a release's venv is made with here (Debian's python3, which runs this too) and its C library.
        self.python = python or f"{sys.version_info[0]}.{sys.version_info[1]}"
        self.glibc = glibc or device_glibc()
        self.restart_cmd = tuple(restart) if restart else ()
        self.stop_cmd = tuple(stop) if stop and restart else ()  # stopped only where it can be started again
        self.step_timeout_s = step_timeout_s
        # systemd's READY is checked when this is the real root and systemd runs it.
        under_systemd = systemd if systemd is not None else (str(root) == "/" and Path("/run/systemd/system").is_dir())
        self.health = HealthCheck(health_url, health_timeout_s, self.layout.web_certificate, under_systemd)
        self._say = say

    def say(self, text: str) -> None:
        """Progress for the person (over SSH); a closed connection must not stop an update halfway."""
        try:
            self._say(text)
            sys.stdout.flush()
        except OSError:
            pass

    # --- the journal ------------------------------------------------------------------------------

    def journal(self) -> dict[str, Any]:
        """The update journal ({} before the first update)."""
        try:
            data = json.loads(self.layout.journal.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _write_journal(self, **changes: Any) -> dict[str, Any]:
        data = self.journal() | changes
        write_atomic(self.layout.journal, json.dumps(data, indent=1, sort_keys=True) + "\n")
        return data

    def current_release(self) -> Path | None:
        """The release ``current`` points at, when it is complete."""
        try:
            target = self.layout.current.resolve(strict=True)
        except OSError:
            return None
        return target if release_info(target) else None

    def current_version(self) -> str | None:
        release = self.current_release()
        info = release_info(release) if release else None
        return str(info["version"]) if info else None

    def complete_releases(self) -> list[tuple[str, Path]]:
        """(version, dir) of every complete release, oldest version first."""
        found = []
        if self.layout.releases.is_dir():
            for child in self.layout.releases.iterdir():
                info = release_info(child) if not child.name.startswith(".") else None
                if info:
                    with contextlib.suppress(BundleError):
                        parse_version(str(info["version"]))
                        found.append((str(info["version"]), child))
        return sorted(found, key=lambda item: parse_version(item[0]))

    # --- locking and recovery ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.layout.base.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.layout.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise UpdateError("another update is running on this device", fix="wait for it to finish") from None
            yield  # the kernel drops the lock when this process dies, even by SIGKILL
        finally:
            os.close(fd)

    def _recover(self, *, restart: bool) -> str | None:
        """Undo what an interrupted run left: staging dirs, a half-made link, an unconfirmed switch."""
        releases = self.layout.releases
        current = self.layout.current.resolve()
        if releases.is_dir():
            for child in releases.iterdir():
                if child.is_dir() and release_info(child) is None and child.resolve() != current:
                    shutil.rmtree(child, ignore_errors=True)  # half-extracted or half-installed
        for stray in self.layout.base.glob(".current.*"):
            stray.unlink(missing_ok=True)
        note = None
        pending = self.journal().get("pending")
        if pending:
            note = f"the switch to {pending.get('version')} was never confirmed healthy"
            self._switch_back(pending, reason=note, restart=restart)
        elif self.current_release() is None:
            note = self._repair_current(restart=restart)
        return note

    def _repair_current(self, *, restart: bool) -> str | None:
        """``current`` is missing or points at an incomplete release: point it at the newest complete one."""
        releases = self.complete_releases()
        if not releases:
            return None
        version, path = releases[-1]
        self._switch(path)
        self._write_journal(current=version, last=self._result("repaired", version, "current was not a release"))
        if restart:
            self._restart()
        return f"current pointed at no complete release; now {version}"

    def _switch_back(self, pending: dict[str, Any], *, reason: str, restart: bool) -> None:
        previous = pending.get("previous")
        target = self.layout.releases / str(previous) if previous else None
        failed = str(pending.get("version"))
        if target is None or release_info(target) is None:
            # Nothing to go back to (the first install): keep the new release, say so.
            self._write_journal(pending=None, current=failed, last=self._result("unconfirmed", failed, reason))
            return
        self._switch(target)
        self._restore_database(failed, pending.get("database"))
        self._write_journal(
            pending=None, current=previous, last=self._result("rolled back", failed, reason, now=previous)
        )
        self.say(f"rolled back to {previous}: {reason}")
        if restart:
            self._restart()
        if failed != previous and not pending.get("by_hand"):
            shutil.rmtree(self.layout.releases / failed, ignore_errors=True)  # a bad update; not a good old one

    def _restore_database(self, leaving: str, copy: str | None) -> None:
        database.restore(self.layout.database, leaving, copy, self.say)

    @staticmethod
    def _result(result: str, version: str, detail: str = "", *, now: str | None = None) -> dict[str, Any]:
        return {"result": result, "version": version, "detail": detail, "at": timestamp(), "running": now or version}

    # --- the steps --------------------------------------------------------------------------------

    def check_bundle(self, bundle: Path, *, force: bool = False) -> Manifest:
        """Verify a bundle's signature and that this device may install it; nothing is written."""
        from appliance.ota.bundle import read_manifest

        return self._admissible(read_manifest(bundle, self._keys()), force=force)

    def _keys(self) -> list[Any]:
        paths = self.layout.trusted_keys
        if not paths:
            raise UpdateError(
                f"no OTA public key at {self.layout.root / 'etc/picoagent/ota.pub'}",
                fix="copy keys/ota.pub from the laptop that signs bundles (make keys) there",
            )
        return load_public_keys(paths)

    def _admissible(self, manifest: Manifest, *, force: bool) -> Manifest:
        if manifest.arch != self.arch:
            raise UpdateError(f"the bundle is built for {manifest.arch}; this device is {self.arch}")
        if not manifest.runs_on(self.python, self.glibc):
            here = SYSTEMS.get(self.python, ("", f"glibc {self.glibc}"))[1]
            raise UpdateError(
                f"the bundle is built for {manifest.system()} (glibc {manifest.glibc}); this device runs "
                f"Python {self.python} ({here}), which cannot run its wheels: nothing was changed",
                fix="build the bundle for this device (make ota HOST=... asks the device which Python it runs), "
                "or move the device to the Debian 13 image (README: 'From the Debian 12 image to Debian 13')",
            )
        current = self.current_version()
        if current is not None and not force:
            if parse_version(manifest.version) <= parse_version(current):
                raise UpdateError(
                    f"the bundle's version {manifest.version} is not newer than the running {current}",
                    fix="build a newer bundle, or pass --force to install it anyway (a downgrade)",
                )
            if parse_version(current) < parse_version(manifest.min_version):
                raise UpdateError(
                    f"the bundle needs at least version {manifest.min_version} installed; this device runs {current}",
                    fix="install the intermediate release first",
                )
        return manifest

    def apply(self, bundle: Path, *, force: bool = False) -> str:
        """Install ``bundle`` and switch to it; returns its version. Raises UpdateError after a rollback."""
        with self._locked():
            self._recover(restart=True)
            keys = self._keys()
            from appliance.ota.bundle import read_manifest

            manifest = self._admissible(read_manifest(bundle, keys), force=force)
            _step("verified")
            release = self._stage(bundle, keys, manifest)
            return self._switch_to(release, manifest)

    def _stage(self, bundle: Path, keys: list[Any], manifest: Manifest) -> Path:
        """Extract, install and self-test into releases/<version>; ``.release.json``, written last, completes it.

        The release is built where it will run (a venv cannot be moved), so completeness is that file,
        not a rename: recovery deletes any release directory without it.
        """
        releases = self.layout.releases
        releases.mkdir(parents=True, exist_ok=True)
        release = releases / manifest.version
        if release.resolve() == self.layout.current.resolve():
            raise UpdateError(f"release {manifest.version} is running; nothing to do")
        shutil.rmtree(release, ignore_errors=True)  # an earlier, unconfirmed or interrupted copy
        release.mkdir()
        fsync_dir(releases)
        stopped = False
        try:
            signed = extract_verified(bundle, keys, release)
            if signed.to_json() != manifest.to_json():
                raise UpdateError("the bundle changed while it was being installed")
            _step("extracted")
            self.say(f"release {manifest.version}: files verified, installing")
            self._run(manifest.install, release, "install")
            _step("installed")
            stopped = self._selftest(manifest, release)
            _step("selftested")
            (release / MANIFEST_COPY).write_bytes(manifest.to_json())
            info = {"version": manifest.version, "arch": manifest.arch, "installed": timestamp()}
            info["manifest_sha256"] = manifest.sha256()
            os.sync()  # every file of the release is on disk before the file that says it is complete
            write_atomic(release / RELEASE_FILE, json.dumps(info, indent=1) + "\n")
        except BaseException:
            shutil.rmtree(release, ignore_errors=True)
            if stopped:  # the old release serves again
                self._restart()
            raise
        _step("staged")
        return release

    def _selftest(self, manifest: Manifest, release: Path) -> bool:
        """Run the release's self-test; True when the daemon was stopped for it (the switch restarts it).

        On a 512 MB board the self-test's models do not fit beside the running daemon's, and it says so
        (SELFTEST_SHORT_OF_MEMORY): the daemon is stopped and it runs again, since the new release would
        run in that memory anyway. Should it still fail, the caller starts the old release again."""
        try:
            self._run(manifest.selftest, release, "self-test")
            return False
        except UpdateError as exc:
            if exc.status != SELFTEST_SHORT_OF_MEMORY or not self.stop_cmd:
                raise
        self.say("the self-test needs the memory the running assistant holds: stopping it for the self-test")
        self._service(self.stop_cmd, "stopping")
        try:
            self._run(manifest.selftest, release, "self-test")
        except BaseException:
            self.say("the self-test failed again: starting the running release again")
            self._restart()
            raise
        return True

    def _run(self, argv: Sequence[str], cwd: Path, what: str) -> None:
        if not argv:
            return
        try:
            proc = subprocess.run(
                list(argv), cwd=cwd, capture_output=True, text=True, timeout=self.step_timeout_s, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UpdateError(f"the release's {what} could not run ({exc}); nothing was switched") from exc
        if proc.returncode != 0:  # both: the self-test says which check failed on stdout, its verdict on stderr
            tail = "\n".join(part.strip() for part in (proc.stdout, proc.stderr) if part and part.strip())[-800:]
            error = UpdateError(f"the release's {what} failed (exit {proc.returncode}); nothing was switched:\n{tail}")
            error.status = proc.returncode
            raise error

    def _switch_to(self, release: Path, manifest: Manifest) -> str:
        previous = self.current_version()
        version = manifest.version
        copy = database.copy_before(self.layout.database, version)
        self._write_journal(
            pending={"version": version, "previous": previous, "started": timestamp(), "database": copy}
        )
        _step("pending")
        self._switch(release)
        _step("switched")
        self.say(f"switched to {version}; restarting and waiting for /healthz")
        self._restart()
        _step("restarted")
        healthy, why = self.health.wait(version)
        _step("checked")
        if not healthy:
            pending = {"version": version, "previous": previous, "database": copy}
            self._switch_back(pending, reason=why, restart=True)
            if previous is not None:
                ok, _ = self.health.wait(previous)
                state = "healthy again" if ok else "NOT healthy either"
                raise UpdateError(f"{version} was not healthy ({why}); rolled back to {previous}, which is {state}")
            raise UpdateError(f"{version} was not healthy ({why}) and there is no earlier release to go back to")
        self._write_journal(
            pending=None, current=version, previous=previous, last=self._result("ok", version, "healthy")
        )
        _step("confirmed")
        self._refresh_boot_updater(release, manifest)
        self._prune(keep={version, previous})
        self.say(f"{version} is running and healthy")
        return version

    def _refresh_boot_updater(self, release: Path, manifest: Manifest) -> None:
        """The boot-time updater from the new, healthy release's signed files; on any doubt keep the old."""
        try:
            boot_updater.install(release, self.layout.root, {f.path: f.sha256 for f in manifest.files})
        except (boot_updater.BootUpdaterError, OSError) as exc:
            self.say(f"the boot-time updater was kept as it was: {exc}")

    def _switch(self, release: Path) -> None:
        """Point ``current`` at ``release`` with one rename (a temporary link renamed over the old one)."""
        link = self.layout.current
        tmp = link.with_name(f".current.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        os.symlink(os.path.relpath(release, link.parent), tmp)
        os.replace(tmp, link)
        fsync_dir(link.parent)

    def _restart(self) -> None:
        self._service(self.restart_cmd, "restarting")

    def _service(self, argv: Sequence[str], doing: str) -> None:
        if not argv:
            return
        try:
            subprocess.run(list(argv), timeout=120, check=False, capture_output=True)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.say(f"warning: {doing} the service failed ({exc})")

    def _prune(self, keep: set[str | None]) -> None:
        """Keep the running and the previous release; remove older ones."""
        for version, path in self.complete_releases():
            if version not in keep:
                shutil.rmtree(path, ignore_errors=True)
                self.say(f"removed old release {version}")

    # --- the other commands -----------------------------------------------------------------------

    def rollback(self) -> str:
        """Switch back to the previous complete release, restart and wait for its health."""
        with self._locked():
            self._recover(restart=False)
            current = self.current_version()
            previous = self.journal().get("previous")
            candidates = [v for v, _ in self.complete_releases() if v != current]
            if previous not in candidates:
                previous = candidates[-1] if candidates else None
            if previous is None:
                raise UpdateError("there is no other release to roll back to")
            self._write_journal(
                pending={"version": previous, "previous": current, "started": timestamp(), "by_hand": True}
            )
            self._switch(self.layout.releases / previous)
            if current is not None:
                copy = database.copy_path(self.layout.database, current)
                self._restore_database(current, str(copy))
            _step("rollback-switched")
            self._restart()
            healthy, why = self.health.wait(previous)
            if not healthy:
                self._switch_back({"version": previous, "previous": current, "by_hand": True}, reason=why, restart=True)
                raise UpdateError(f"{previous} was not healthy ({why}); stayed on {current}")
            self._write_journal(
                pending=None, current=previous, previous=current, last=self._result("rolled back by hand", previous)
            )
            return str(previous)

    def boot(self) -> str | None:
        """At boot, before the service starts: roll back an unconfirmed switch, repair ``current``."""
        with self._locked():
            return self._recover(restart=False)

    def status(self) -> dict[str, Any]:
        """What ``update check`` shows and /api/status reports."""
        journal = self.journal()
        return {
            "version": self.current_version(),
            "previous": journal.get("previous"),
            "releases": [v for v, _ in self.complete_releases()],
            "pending": journal.get("pending"),
            "last": journal.get("last"),
        }

    def verify_current(self) -> list[str] | None:
        """The files of the running release that differ from its signed manifest; None when no complete
        release is current (a checkout, or a broken ``current``): then there is nothing to verify against."""
        release = self.current_release()
        if release is None:
            return None
        try:
            manifest = Manifest.from_json((release / MANIFEST_COPY).read_bytes())
        except OSError:
            return []  # installed by the image or install-service, not from a bundle
        return verify_tree(release, manifest)


def device_glibc() -> str:
    """This system's glibc version ("2.41"); "" where it is not glibc."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return ""
    version = text.rpartition(" ")[2]
    return version if version and version.replace(".", "").isdigit() else ""


def _step(name: str) -> None:
    """A named point between two steps. PICOAGENT_UPDATE_KILL_AT=name SIGKILLs the updater there (tests)."""
    if os.environ.get("PICOAGENT_UPDATE_KILL_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


STEPS = (
    "verified",
    "extracted",
    "installed",
    "selftested",
    "staged",
    "pending",
    "switched",
    "restarted",
    "checked",
    "confirmed",
)


def running_status() -> dict[str, Any] | None:
    """The update status of the release this process runs from (None outside a release layout)."""
    release = Path(sys.prefix).resolve().parent
    if release_info(release) is None or release.parent.name != "releases":
        return None
    root = release.parents[3]  # <root>/opt/picoagent/releases/<v>
    return Updater(root, restart=None, say=lambda _: None).status()
