"""The OTA bundle: a tar holding a signed manifest and a release tree, and the code that checks it.

Layout, in this order (the order lets a device check the signature before it reads a single payload byte):

    manifest.json   version, minimum version, architecture, the Python and glibc its wheels are built for,
                    the commands to install and self-test the release, and for every file its size, mode
                    and sha256
    manifest.sig    the Ed25519 signature of manifest.json's bytes (64 raw bytes)
    release/...     the release tree: the app's files and the wheels for the device's architecture

The host side (``firmware_tools``) writes bundles with :func:`write_bundle`; the device reads them with
:func:`extract_verified`, which checks the signature first and every file's hash while it writes it, so a
tampered or truncated bundle is refused before anything is installed. Only the standard library and
``cryptography`` (Ed25519) are used: the boot-time rollback runs with Debian's python3.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

from appliance.errors import PicoagentError

if TYPE_CHECKING:
    import tarfile  # imported where a bundle is read or written: the idle daemon never needs it

FORMAT = 1
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
PREFIX = "release/"
# Files the install step consumes and deletes (a release does not keep 100 MB of wheels around).
CONSUMED_PREFIX = "wheels/"
_CHUNK = 1 << 20
_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*")  # ASCII digits (\d takes any script's); fullmatch: nothing after
# The manifest's selftest command exits with this when all it failed on was free memory now (appliance/selftest.py):
# the updater stops the running daemon, whose memory it needs, and asks again (a 512 MB board).
SELFTEST_SHORT_OF_MEMORY = 3
# The systems a release's wheels are built for: the device's CPython (the venv is made with Debian's python3)
# and the glibc its manylinux wheels need at least. Python -> (glibc, the Debian image that has both).
SYSTEMS = {"3.11": ("2.36", "Debian 12 (bookworm)"), "3.13": ("2.41", "Debian 13 (trixie)")}


class BundleError(PicoagentError, ValueError):
    """A bundle is not one this device may install: unsigned, tampered, truncated, foreign or too old."""


def parse_version(text: str) -> tuple[int, ...]:
    """``"0.1.0.317"`` -> ``(0, 1, 0, 317)``; dotted integers only, so that order is never ambiguous."""
    if not isinstance(text, str) or not _VERSION.fullmatch(text):
        raise BundleError(f"version {text!r} is not dotted numbers like 0.1.0.317")
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()  # 0.1 == 0.1.0
    return tuple(parts)


@dataclass(frozen=True)
class FileEntry:
    """One file of the release: where it goes, how big, its mode and its sha256."""

    path: str
    size: int
    sha256: str
    mode: int = 0o644


@dataclass(frozen=True)
class Manifest:
    """What a bundle says about itself (signed)."""

    version: str
    min_version: str
    arch: str
    files: tuple[FileEntry, ...]
    install: tuple[str, ...] = ()
    selftest: tuple[str, ...] = ()
    commit: str = ""
    created: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    python: str = ""  # "3.13": the CPython the wheels are for ("": not said, a bundle from before Debian 13)
    glibc: str = ""  # "2.41": the oldest glibc they run on

    def runs_on(self, python: str, glibc: str) -> bool:
        """Whether its wheels run on a device with this CPython and glibc (a bundle that says nothing: yes)."""
        if self.python and self.python != python:
            return False
        return not (self.glibc and glibc and parse_version(self.glibc) > parse_version(glibc))

    def system(self) -> str:
        """ "Python 3.13 (Debian 13 (trixie))", for messages; "" when the bundle does not say."""
        if not self.python:
            return ""
        name = SYSTEMS.get(self.python, ("", ""))[1]
        return f"Python {self.python}" + (f" ({name})" if name else "")

    def to_json(self) -> bytes:
        """Canonical bytes (sorted keys): what is signed."""
        data = {
            "format": FORMAT,
            "name": "picoagent",
            "version": self.version,
            "min_version": self.min_version,
            "arch": self.arch,
            "install": list(self.install),
            "selftest": list(self.selftest),
            "commit": self.commit,
            "created": self.created,
            "files": {f.path: {"size": f.size, "sha256": f.sha256, "mode": f.mode} for f in self.files},
        }
        if self.python:  # left out when unset: the same bytes as a bundle from before Debian 13
            data.update(python=self.python, glibc=self.glibc)
        return json.dumps(data, sort_keys=True, indent=1).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Manifest:
        """Parse and check a manifest's shape; every problem is a BundleError."""
        try:
            data = json.loads(raw)
            if data.get("format") != FORMAT or data.get("name") != "picoagent":
                raise BundleError(f"not a picoagent bundle of format {FORMAT}")
            files = tuple(
                FileEntry(_safe_path(path), int(f["size"]), str(f["sha256"]), int(f["mode"]) & 0o777)
                for path, f in data["files"].items()
            )
            manifest = cls(
                version=str(data["version"]),
                min_version=str(data["min_version"]),
                arch=str(data["arch"]),
                files=files,
                install=tuple(str(a) for a in data["install"]),
                selftest=tuple(str(a) for a in data["selftest"]),
                commit=str(data.get("commit", "")),
                created=str(data.get("created", "")),
                python=str(data.get("python", "")),
                glibc=str(data.get("glibc", "")),
            )
        except BundleError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BundleError(f"the bundle's manifest is malformed ({exc})") from exc
        parse_version(manifest.version)
        parse_version(manifest.min_version)
        for text in (manifest.python, manifest.glibc):
            if text:
                parse_version(text)
        return manifest

    def sha256(self) -> str:
        """The manifest's own hash: a release's identity."""
        return hashlib.sha256(self.to_json()).hexdigest()


def _safe_path(path: str) -> str:
    """A relative path inside the release; absolute paths, ``..`` and odd names are refused."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or any(part in ("", ".", "..") for part in path.split("/")) or "\\" in path:
        raise BundleError(f"the bundle names an unsafe path {path!r}")
    if path.startswith(".release") or path.startswith(".manifest"):
        raise BundleError(f"the bundle may not carry {path!r} (the device writes it)")
    return path


def sha256_file(path: Path) -> str:
    """The sha256 of a file, read in 1 MB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# --- keys -----------------------------------------------------------------------------------------


def load_public_keys(paths: Iterable[Path]) -> list[Any]:
    """The trusted Ed25519 public keys (PEM files); a file that is not one is an error, not skipped."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    keys = []
    for path in paths:
        try:
            key = load_pem_public_key(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise BundleError(f"cannot read the OTA public key {path} ({exc})") from exc
        if not isinstance(key, Ed25519PublicKey):
            raise BundleError(f"{path} is not an Ed25519 public key")
        keys.append(key)
    return keys


def load_private_key(path: Path) -> Any:
    """The Ed25519 signing key (PEM, unencrypted; kept 0600 on the laptop, never committed)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise BundleError(f"cannot read the signing key {path} ({exc})", fix="make keys") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise BundleError(f"{path} is not an Ed25519 private key")
    return key


def _check_signature(manifest: bytes, signature: bytes, keys: list[Any]) -> None:
    from cryptography.exceptions import InvalidSignature

    for key in keys:
        try:
            key.verify(signature, manifest)
            return
        except InvalidSignature:
            continue
    raise BundleError(
        "the bundle's signature does not match this device's OTA key",
        fix="sign bundles with the key whose public half is in the image (/etc/picoagent/ota.pub)",
    )


# --- writing (host side) --------------------------------------------------------------------------


def write_bundle(out: Path, tree: Path, manifest: Manifest, private_key: Any) -> None:
    """Write a signed bundle of ``tree`` (whose files ``manifest`` lists) to ``out``, atomically."""
    import tarfile

    body = manifest.to_json()
    signature = private_key.sign(body)
    tmp = out.with_name(f".{out.name}.part")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in ((MANIFEST, body), (SIGNATURE, signature)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, _bytes_io(data))
        for entry in manifest.files:
            source = tree / entry.path
            info = tarfile.TarInfo(PREFIX + entry.path)
            info.size, info.mode = entry.size, entry.mode
            with source.open("rb") as fh:
                tar.addfile(info, fh)
    os.replace(tmp, out)


def _bytes_io(data: bytes) -> IO[bytes]:
    import io

    return io.BytesIO(data)


def manifest_for(
    tree: Path, paths: Iterable[str], *, version: str, min_version: str, arch: str, **kwargs: Any
) -> Manifest:
    """Hash every file of ``paths`` (relative to ``tree``) into a manifest."""
    entries = []
    for rel in sorted(set(paths)):
        source = tree / rel
        st = source.lstat()
        if not stat.S_ISREG(st.st_mode):
            raise BundleError(f"{rel} is not a regular file; a bundle carries files only")
        mode = 0o755 if st.st_mode & 0o111 else 0o644
        entries.append(FileEntry(_safe_path(rel), st.st_size, sha256_file(source), mode))
    parse_version(version)
    parse_version(min_version)
    return Manifest(version=version, min_version=min_version, arch=arch, files=tuple(entries), **kwargs)


# --- reading (device side) ------------------------------------------------------------------------


def peek_manifest(bundle: Path) -> Manifest:
    """The manifest WITHOUT checking its signature: for the laptop's own hints about its own bundle only
    (which device it suits); a device reads a bundle with read_manifest, signature first."""
    import tarfile

    with _open(bundle) as tar:
        try:
            first = tar.next()
            if first is None or first.name != MANIFEST:
                raise BundleError("the bundle does not start with its manifest")
            return Manifest.from_json(_read_member(tar, first, limit=16 << 20))
        except (OSError, tarfile.TarError) as exc:
            raise BundleError(f"the bundle is damaged ({exc})") from exc


def read_manifest(bundle: Path, keys: list[Any]) -> Manifest:
    """The bundle's manifest, after checking its signature; nothing is extracted."""
    with _open(bundle) as tar:
        return _signed_manifest(tar, keys)


def _open(bundle: Path) -> tarfile.TarFile:
    import tarfile

    try:
        return tarfile.open(bundle, "r:")
    except (OSError, tarfile.TarError) as exc:
        raise BundleError(f"{bundle} is not a readable bundle ({exc})") from exc


def _signed_manifest(tar: tarfile.TarFile, keys: list[Any]) -> Manifest:
    import tarfile

    try:
        first, second = tar.next(), tar.next()
        if first is None or second is None or (first.name, second.name) != (MANIFEST, SIGNATURE):
            raise BundleError("the bundle does not start with its manifest and signature")
        body = _read_member(tar, first, limit=16 << 20)
        signature = _read_member(tar, second, limit=1024)
    except (OSError, tarfile.TarError) as exc:
        raise BundleError(f"the bundle is damaged ({exc})") from exc
    _check_signature(body, signature, keys)
    return Manifest.from_json(body)


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo, *, limit: int) -> bytes:
    if not member.isfile() or member.size > limit:
        raise BundleError(f"the bundle's {member.name} is not a small regular file")
    fh = tar.extractfile(member)
    assert fh is not None  # a regular file always has a reader
    data = fh.read()
    if len(data) != member.size:
        raise BundleError(f"the bundle is truncated in {member.name}")
    return data


def extract_verified(bundle: Path, keys: list[Any], dest: Path) -> Manifest:
    """Check the signature, then write every file into ``dest`` (new, empty) checking size and sha256.

    Raises BundleError on a bad signature, a file the manifest does not list, a hash or size mismatch,
    a missing file or a truncated archive. The caller removes ``dest`` then; nothing outside it is touched.
    """
    import tarfile

    with _open(bundle) as tar:
        manifest = _signed_manifest(tar, keys)
        expected = {f.path: f for f in manifest.files}
        seen: set[str] = set()
        try:
            for index, member in enumerate(tar):
                if index < 2:
                    continue  # the manifest and signature, read above (iteration starts from the top)
                name = member.name
                if not name.startswith(PREFIX) or not member.isfile():
                    raise BundleError(f"the bundle carries {name!r}, which is not a release file")
                rel = name[len(PREFIX) :]
                entry = expected.get(rel)
                if entry is None or rel in seen:
                    raise BundleError(f"the bundle carries {rel!r}, which its manifest does not list once")
                seen.add(rel)
                _extract_one(tar, member, entry, dest / rel)
        except (OSError, tarfile.TarError, EOFError) as exc:
            raise BundleError(f"the bundle is damaged or truncated ({exc})") from exc
    missing = sorted(set(expected) - seen)
    if missing:
        raise BundleError(f"the bundle is truncated: {len(missing)} files are missing (first: {missing[0]})")
    return manifest


def _extract_one(tar: tarfile.TarFile, member: tarfile.TarInfo, entry: FileEntry, target: Path) -> None:
    if member.size != entry.size:
        raise BundleError(f"{entry.path} has {member.size} bytes, the manifest says {entry.size}")
    source = tar.extractfile(member)
    assert source is not None
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, written = hashlib.sha256(), 0
    with target.open("xb") as out:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
            written += len(chunk)
    if written != entry.size:
        raise BundleError(f"the bundle is truncated in {entry.path}")
    if digest.hexdigest() != entry.sha256:
        raise BundleError(f"{entry.path} does not match its sha256 in the signed manifest (tampered?)")
    os.chmod(target, entry.mode)


def verify_tree(tree: Path, manifest: Manifest) -> list[str]:
    """The release files under ``tree`` that no longer match the manifest (installed wheels excepted)."""
    bad = []
    for entry in manifest.files:
        if entry.path.startswith(CONSUMED_PREFIX):
            continue
        path = tree / entry.path
        try:
            if path.stat().st_size != entry.size or sha256_file(path) != entry.sha256:
                bad.append(entry.path)
        except OSError:
            bad.append(entry.path)
    return bad
