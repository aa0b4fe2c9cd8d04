"""The chat model's own embeddings, the fallback when no embedding model is installed (memory.embedding_model: chat).

The default embedding model, MiniLM, is tested in tests/test_embedding_model.py.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import llama_cpp
import pytest

from appliance.config import Config
from appliance.errors import ModelFormatError, ModelNotFoundError, UnknownModelError
from appliance.llm.embeddings import Embedder, HashingEmbedder, LocalEmbedder, embedder_for
from appliance.llm.local import LocalModel

# (query, the memory that answers it, a memory that does not). The chat model's mean-pooled vectors
# rank the right memory first for 17 of these 20 (measured with llama-cpp-python 0.3.36); the
# misses are near ties, so only the rate is asserted, with room for another CPU's rounding.
TRIPLES = [
    (
        "where is the shed key",
        "The key to the garden shed is under the flowerpot",
        "My sister's birthday is on 14 March",
    ),
    (
        "when is my sister's birthday",
        "My sister's birthday is on 14 March",
        "The key to the garden shed is under the flowerpot",
    ),
    ("what wifi password do we use", "The wifi password is tulip-42", "The dog goes to the vet on Tuesdays"),
    ("when does the dog see the vet", "The dog goes to the vet on Tuesdays", "The wifi password is tulip-42"),
    ("what temperature do I like the living room", "I like the living room at 21 degrees", "My car is a blue Toyota"),
    ("what car do I drive", "My car is a blue Toyota", "I like the living room at 21 degrees"),
    ("am I allergic to anything", "I am allergic to peanuts", "The bins go out on Thursday night"),
    ("which day are the bins collected", "The bins go out on Thursday night", "I am allergic to peanuts"),
    ("what is my daughter called", "My daughter's name is Alice", "The boiler was serviced in June"),
    ("when was the boiler last serviced", "The boiler was serviced in June", "My daughter's name is Alice"),
    ("who is my doctor", "My GP is Dr Patel at the Elm Street surgery", "I water the tomatoes every evening"),
    (
        "how often do I water the tomatoes",
        "I water the tomatoes every evening",
        "My GP is Dr Patel at the Elm Street surgery",
    ),
    (
        "what time do I wake up on weekdays",
        "I get up at 6:30 on work days",
        "The spare bulbs are in the kitchen drawer",
    ),
    ("where are the spare light bulbs", "The spare bulbs are in the kitchen drawer", "I get up at 6:30 on work days"),
    (
        "what music do I like",
        "I love listening to jazz, especially Miles Davis",
        "The greenhouse heater switches on below 5 degrees",
    ),
    (
        "when does the greenhouse heater come on",
        "The greenhouse heater switches on below 5 degrees",
        "I love listening to jazz, especially Miles Davis",
    ),
    ("what is my wife's favourite food", "My wife loves Thai green curry", "The front door camera is on relay 3"),
    ("which relay is the door camera on", "The front door camera is on relay 3", "My wife loves Thai green curry"),
    ("where did we go on holiday last year", "Last summer we went to Portugal", "The car's MOT is due in October"),
    ("when is the MOT due", "The car's MOT is due in October", "Last summer we went to Portugal"),
]


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def embedder(local_model: LocalModel) -> Iterator[LocalEmbedder]:
    """The chat model's own embeddings, run on the shared chat worker (loaded once for the module)."""
    emb = LocalEmbedder(local_model.path, worker=local_model, name="smollm2-135m (chat model)")
    yield emb
    emb.close()


def worker_ident(worker: LocalModel) -> int:
    ident: int = worker._submit(threading.get_ident).result()
    return ident


def test_dimensions_come_from_the_header_before_loading(model_path: Path) -> None:
    emb = LocalEmbedder(model_path)
    assert emb.dimensions == 576 and not emb.loaded
    assert isinstance(emb, Embedder)


def test_vectors_are_unit_length_with_the_stated_dimensions(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed(["where is the shed key", "Hello!", "The boiler was serviced in June"])
    assert len(vectors) == 3
    for v in vectors:
        assert len(v) == embedder.dimensions
        assert math.isclose(math.sqrt(dot(v, v)), 1.0, abs_tol=1e-5)


def test_the_same_text_gives_the_same_vector(embedder: LocalEmbedder) -> None:
    first = embedder.embed(["The key to the garden shed is under the flowerpot"])[0]
    embedder.embed(["something else entirely, to disturb any state"])
    again = embedder.embed(["The key to the garden shed is under the flowerpot"])[0]
    assert first == again


def test_a_related_memory_is_closer_than_an_unrelated_one(embedder: LocalEmbedder) -> None:
    q, related, unrelated = embedder.embed(list(TRIPLES[0]))
    assert dot(q, related) > dot(q, unrelated) + 0.03  # measured 0.852 against 0.775


def test_related_memories_rank_first_for_most_queries(embedder: LocalEmbedder) -> None:
    hits = []
    for q, related, unrelated in TRIPLES:
        vq, vr, vu = embedder.embed([q, related, unrelated])
        hits.append(dot(vq, vr) > dot(vq, vu))
    print(f"related ranked first for {sum(hits)} of {len(hits)} queries")
    assert sum(hits) >= 15


def test_a_batch_gives_the_vectors_of_one_by_one(embedder: LocalEmbedder) -> None:
    texts = [t for triple in TRIPLES[:4] for t in triple]
    batch = embedder.embed(texts)
    for text, vector in zip(texts, batch, strict=True):
        # The same up to float rounding: llama.cpp's kernels sum in another order for a bigger batch.
        assert dot(vector, embedder.embed([text])[0]) > 0.999


def test_empty_and_overlong_texts(embedder: LocalEmbedder) -> None:
    assert embedder.embed([]) == []
    before = embedder.truncated
    over = embedder.context_tokens // 3 + 1  # four words, at least a token each: a third more than the context
    empty, long = embedder.embed(["", "the garden shed key " * over])
    assert math.isclose(dot(empty, empty), 1.0, abs_tol=1e-5)
    assert math.isclose(dot(long, long), 1.0, abs_tol=1e-5)
    assert embedder.truncated == before + 1
    with pytest.raises(TypeError, match="list of texts"):
        embedder.embed("a bare string")


class RecordingLlama:
    """Wraps llama_cpp.Llama to record the thread of every llama.cpp call."""

    threads: ClassVar[list[int]] = []

    real = llama_cpp.Llama

    def __init__(self, **kw: Any) -> None:
        self.threads.append(threading.get_ident())
        self._real = self.real(**kw)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if not callable(attr):
            return attr

        def recorded(*args: Any, **kw: Any) -> Any:
            self.threads.append(threading.get_ident())
            return attr(*args, **kw)

        return recorded


def test_every_llama_call_runs_on_the_chat_worker_thread(
    local_model: LocalModel, model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_cpp, "Llama", RecordingLlama)
    RecordingLlama.threads = []
    emb = LocalEmbedder(model_path, worker=local_model)
    try:
        emb.embed(["where is the shed key"])
        asyncio.run(emb.aembed(["where is the shed key", "My sister's birthday is on 14 March"]))
        # A job already on the worker (say, memory extraction) may embed without waiting for itself.
        inside = local_model._submit(lambda: emb.embed(["nested"])).result(timeout=60)
        calls = list(RecordingLlama.threads)
    finally:
        emb.close()
    assert len(inside) == 1
    assert len(calls) >= 4  # load, then tokenize and embed calls
    assert set(calls) == {worker_ident(local_model)}


def test_without_a_worker_aembed_keeps_the_event_loop_free(model_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_cpp, "Llama", RecordingLlama)
    RecordingLlama.threads = []
    emb = LocalEmbedder(model_path)

    async def main() -> tuple[int, list[list[float]]]:
        return threading.get_ident(), await emb.aembed(["where is the shed key"])

    try:
        loop_thread, vectors = asyncio.run(main())
        calls = list(RecordingLlama.threads)
    finally:
        emb.close()
    assert len(vectors) == 1 and calls
    assert loop_thread not in calls


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as err:
        LocalEmbedder(tmp_path / "nope.gguf")
    assert "does not exist" in str(err.value)
    assert err.value.fix and "memory.embedding_model" in err.value.fix


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"<html>404 not found</html>" * 10)
    with pytest.raises(ModelFormatError, match="not a GGUF"):
        LocalEmbedder(bad)


def test_embedder_for_defaults_to_the_chat_model(config: Config, local_model: LocalModel, tmp_path: Path) -> None:
    config.memory.embedding_model = ""
    emb = embedder_for(config, local_model, tmp_path / "models")
    assert emb.path == local_model.path and emb.worker is local_model
    assert emb.name == "smollm2-135m (chat model)"
    assert emb.dimensions == 576


def test_embedder_for_takes_a_catalog_name_or_a_path(
    config: Config, local_model: LocalModel, model_path: Path, tmp_path: Path
) -> None:
    config.memory.embedding_model = "smollm2-135m"  # packaged, so installed without a pull
    assert embedder_for(config, local_model, tmp_path / "models").path == model_path
    config.memory.embedding_model = str(model_path)
    assert embedder_for(config, local_model, tmp_path / "models").path == model_path


def test_embedder_for_names_the_key_when_the_model_is_wrong(
    config: Config, local_model: LocalModel, tmp_path: Path
) -> None:
    config.memory.embedding_model = "no-such-model"
    with pytest.raises(UnknownModelError, match=r"memory\.embedding_model"):
        embedder_for(config, local_model, tmp_path / "models")
    config.memory.embedding_model = str(tmp_path / "missing.gguf")
    with pytest.raises(ModelNotFoundError, match=r"memory\.embedding_model"):
        embedder_for(config, local_model, tmp_path / "models")


def test_hashing_embedder_is_a_deterministic_stand_in() -> None:
    emb = HashingEmbedder(dimensions=32)
    assert isinstance(emb, Embedder)
    a, b, c, empty = emb.embed(["the shed key", "the key of the shed", "birthday in March", ""])
    assert all(math.isclose(dot(v, v), 1.0) for v in (a, b, c, empty))
    assert dot(a, b) > dot(a, c)
    assert emb.embed(["the shed key"])[0] == a
    assert asyncio.run(emb.aembed(["the shed key"])) == [a]
    assert emb.calls[0] == ["the shed key", "the key of the shed", "birthday in March", ""]
