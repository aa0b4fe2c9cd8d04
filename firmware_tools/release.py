"""Host side of OTA: signing keys, the release version, and building a signed bundle from this checkout."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Sequence
from pathlib import Path

from appliance.ota.bundle import SYSTEMS, BundleError, manifest_for, write_bundle

ROOT = Path(__file__).resolve().parent.parent
# What a device runs in the unpacked release: a venv from the bundle's wheels, then `picoagent selftest`.
INSTALL = ("/bin/sh", "firmware_tools/install-release.sh")
SELFTEST = (".venv/bin/picoagent", "selftest")
WHEELHOUSE = ROOT / "image" / "wheelhouse.sh"
# The Python of the image `make image` builds (Debian 13); a device on the Debian 12 image runs 3.11.
IMAGE_PYTHON = "3.13"


def keygen(directory: Path, *, force: bool = False) -> tuple[Path, Path]:
    """Make ``ota.key`` (private, 0600) and ``ota.pub`` in ``directory``; never overwrite unless forced."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private, public = directory / "ota.key", directory / "ota.pub"
    if private.exists() and not force:
        raise BundleError(
            f"{private} exists; a new key would lock out devices that trust the old one",
            fix="keep it (and back it up), or pass --force if no device uses it yet",
        )
    directory.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    os.chmod(private, 0o600)
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def version() -> str:
    """pyproject's version plus the commit count: ``0.1.0.317`` (always increases along one branch)."""
    base = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    try:
        count = _git("rev-list", "--count", "HEAD")
    except (OSError, subprocess.CalledProcessError):
        count = "0"
    return f"{base}.{count}"


def tracked_files() -> list[str]:
    """The checkout's tracked files that exist (what a release carries besides its wheels)."""
    names = _git("ls-files", "-z").split("\0")
    return [n for n in names if n and (ROOT / n).is_file() and not (ROOT / n).is_symlink()]


def system_of(python: str) -> tuple[str, str]:
    """(python, glibc) of a device running this CPython on one of the images; an unknown one is refused."""
    if python not in SYSTEMS:
        known = ", ".join(f"{p} ({name})" for p, (_, name) in SYSTEMS.items())
        raise BundleError(f"no device image runs Python {python}", fix=f"build for one of: {known}")
    return python, SYSTEMS[python][0]


def build_wheels(arch: str, out: Path, python: str = IMAGE_PYTHON) -> None:
    """Fill ``out`` with the wheels a release needs on ``arch`` with this Python (image/wheelhouse.sh; cached)."""
    if not WHEELHOUSE.exists():
        raise BundleError(f"{WHEELHOUSE} is missing; cannot build wheels for {arch}", fix="pass --wheels DIR")
    python, glibc = system_of(python)
    env = {**os.environ, "PYTHON_VERSION": python, "GLIBC": glibc}
    subprocess.run(["sh", str(WHEELHOUSE), arch, str(out)], check=True, env=env)


def build_bundle(
    out: Path,
    key: Path,
    *,
    arch: str,
    wheels: Path | None = None,
    tree: Path | None = None,
    version_text: str | None = None,
    min_version: str = "0",
    install: Sequence[str] = INSTALL,
    selftest: Sequence[str] = SELFTEST,
    allow_dirty: bool = False,
    python: str | None = None,
) -> Path:
    """Build and sign a bundle; returns its path (``out`` may be a directory).

    By default the release is this checkout's tracked files plus ``wheels`` (or wheels built for
    ``arch`` and ``python``, the image's by default); ``tree`` bundles every file of another directory
    instead (tests, custom releases), saying no Python unless ``python`` is given. The manifest names the
    Python and glibc, and a device running another refuses the bundle before it changes anything.
    """
    from appliance.ota.bundle import load_private_key

    private = load_private_key(key)
    commit = ""
    if tree is None:
        if not allow_dirty and _git("status", "--porcelain", "--untracked-files=no"):
            raise BundleError(
                "the checkout has uncommitted changes; a bundle's version must name one commit",
                fix="commit first, or pass --allow-dirty for a test bundle",
            )
        commit = _git("rev-parse", "HEAD")
    ver = version_text or version()
    python = python if python is not None else ("" if tree is not None else IMAGE_PYTHON)
    glibc = system_of(python)[1] if python else ""
    with tempfile.TemporaryDirectory(prefix="picoagent-bundle-") as tmp:
        if tree is None:
            stage = Path(tmp) / "release"
            files = tracked_files()
            for rel in files:
                (stage / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / rel, stage / rel)
            # Downloads and the cross-built llama-cpp-python are reused from build/ota/wheels-<arch>-cp<N>;
            # wheelhouse.sh rebuilds picoagent's own wheel from this checkout every time.
            wheel_dir = wheels or ROOT / "build" / "ota" / f"wheels-{arch}-cp{python.replace('.', '')}"
            if wheels is None:
                build_wheels(arch, wheel_dir, python)
            found = sorted(wheel_dir.glob("*.whl"))
            if not found:
                raise BundleError(f"no wheels in {wheel_dir}")
            (stage / "wheels").mkdir()
            for wheel in found:
                shutil.copy2(wheel, stage / "wheels" / wheel.name)
                files.append(f"wheels/{wheel.name}")
        else:
            stage = tree
            files = [str(p.relative_to(tree)) for p in sorted(tree.rglob("*")) if p.is_file()]
        manifest = manifest_for(
            stage,
            files,
            version=ver,
            min_version=min_version,
            arch=arch,
            install=tuple(install),
            selftest=tuple(selftest),
            commit=commit,
            created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            python=python,
            glibc=glibc,
        )
        target = out / f"picoagent-{ver}-{arch}.bundle" if out.is_dir() else out
        write_bundle(target, stage, manifest, private)
    return target
