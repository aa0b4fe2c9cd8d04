"""Text embeddings for memory recall: a GGUF model run by llama.cpp in embedding mode.

``LocalEmbedder`` keeps its own ``Llama`` (created with ``embedding=True``), separate from the chat
model's, because a chat context cannot pool a sentence into one vector. When it is given the chat
model's worker, every llama.cpp call it makes (loading included) runs as a job on that worker's
thread: a Pi has few cores, and two models decoding at once would each run at half speed or worse
(see ``threads.py``). Embedding with the chat model's own file costs little memory, since llama.cpp
maps the weights and both contexts share the same pages.

Vectors are L2-normalised, so a dot product is the cosine similarity. A chat model's vectors are
anisotropic (unrelated sentences still score 0.6-0.8), so rank by similarity rather than compare
with a fixed threshold.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from appliance.errors import ModelError, ModelFormatError, ModelNotFoundError
from appliance.llm import gguf
from appliance.llm.local import LocalModel, check_model_file, open_llama, threads_policy

if TYPE_CHECKING:
    from appliance.config import Config

log = logging.getLogger(__name__)

T = TypeVar("T")

# llama.cpp's enum llama_pooling_type, as stored in a GGUF file's {arch}.pooling_type.
POOLING_NONE, POOLING_MEAN, POOLING_CLS, POOLING_LAST, POOLING_RANK = 0, 1, 2, 3, 4
_POOLING_NAMES = {POOLING_MEAN: "mean", POOLING_CLS: "cls", POOLING_LAST: "last"}


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors whose dot products say how close their meanings are."""

    name: str

    @property
    def dimensions(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order (blocking: never call it on the event loop)."""
        ...

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed`` without blocking the event loop."""
        ...


class LocalEmbedder:
    """A GGUF model in llama.cpp's embedding mode, loaded on first use."""

    def __init__(
        self,
        path: Path,
        *,
        worker: LocalModel | None = None,
        name: str | None = None,
        context_tokens: int = 512,
        threads: int | str = "auto",
        batch_threads: int | str = "auto",
        memory_margin_mb: int = 128,
    ) -> None:
        self.path = Path(path)
        self.name = name or self.path.stem
        self.worker = worker
        self.memory_margin_mb = memory_margin_mb
        self.truncated = 0  # texts cut to fit the context so far
        self.load_s = 0.0
        meta = _read_header(self.path)
        arch = str(meta.get("general.architecture", ""))
        self._dimensions = _int(meta.get(f"{arch}.embedding_length"))
        if not self._dimensions:
            raise ModelFormatError(
                f"{self.path} does not say its embedding width ({arch}.embedding_length is missing)",
                fix="use a GGUF file converted by llama.cpp's own tools (see `picoagent models list`)",
            )
        pooling = _int(meta.get(f"{arch}.pooling_type"))
        if pooling == POOLING_RANK:
            raise ModelFormatError(
                f"{self.path.name} is a reranker (it scores text pairs); it cannot embed single texts",
                fix="set memory.embedding_model to an embedding model, or leave it empty for the chat model's",
            )
        # Embedding models say how to pool; a chat model says nothing (or "none": one vector per
        # token), and the mean of its token vectors is what works best for it.
        self.pooling = pooling if pooling in _POOLING_NAMES else POOLING_MEAN
        trained = _int(meta.get(f"{arch}.context_length"))
        # BERT-style models have learned positions only up to their training context (often 512).
        self.context_tokens = min(context_tokens, trained) if trained else context_tokens
        self._threads = threads_policy(threads, batch_threads)
        self._threads_used = (0, 0)
        self._llm: Any = None
        self._lock = threading.Lock()  # llama.cpp is not re-entrant; serialises callers without a worker

    @property
    def dimensions(self) -> int:
        """Length of every vector (from the file's header, known before the model is loaded)."""
        return self._dimensions

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory."""
        return self._llm is not None

    def __repr__(self) -> str:
        pooling = _POOLING_NAMES[self.pooling]
        return f"LocalEmbedder({self.name!r}, {self._dimensions} dims, {pooling} pooling, {self.context_tokens} tokens)"

    # --- running on the right thread ------------------------------------------------------------

    def _locked(self, fn: Callable[[], T]) -> Callable[[], T]:
        def run() -> T:
            with self._lock:
                return fn()

        return run

    def _on_worker_thread(self) -> bool:
        return self.worker is not None and self.worker._thread is threading.current_thread()

    def _call(self, fn: Callable[[], T]) -> T:
        """Run fn where llama.cpp work belongs: the chat model's worker thread, or here under the lock."""
        job = self._locked(fn)
        if self.worker is None or self._on_worker_thread():  # a job on the worker must not wait for itself
            return job()
        result: T = self.worker._submit(job).result()
        return result

    async def _acall(self, fn: Callable[[], T]) -> T:
        job = self._locked(fn)
        if self.worker is None:
            return await asyncio.to_thread(job)
        result: T = await asyncio.wrap_future(self.worker._submit(job))
        return result

    # --- loading --------------------------------------------------------------------------------

    def _load(self) -> None:
        if self._llm is not None:
            return
        started = time.perf_counter()
        check_model_file(self.path, self.context_tokens, self.context_tokens, self.memory_margin_mb)
        decode, batch = self._threads.choose()
        # n_batch = n_ubatch = the context: llama.cpp must see each text in one piece to pool it
        # (non-causal models cannot split a sequence across micro-batches at all).
        llm = open_llama(
            self.path,
            purpose=" for embeddings",
            fix="the file is damaged or of an architecture this llama.cpp does not know: pull it again, "
            "or set memory.embedding_model to another model (empty: the chat model's own embeddings)",
            embedding=True,
            n_ctx=self.context_tokens,
            n_batch=self.context_tokens,
            n_ubatch=self.context_tokens,
            n_threads=decode,
            n_threads_batch=batch,
            pooling_type=self.pooling,
        )
        self._llm = llm
        self._threads_used = (decode, batch)
        self.load_s = time.perf_counter() - started
        log.info(
            "loaded embedding model %s in %.2f s (%d dims, %s pooling)",
            self.path.name,
            self.load_s,
            self._dimensions,
            _POOLING_NAMES[self.pooling],
        )

    def load(self) -> None:
        """Load the model now (embed does this on first use too)."""
        self._call(self._load)

    def close(self) -> None:
        """Free the model (it loads again on the next embed)."""
        with self._lock:
            llm, self._llm = self._llm, None
        if llm is not None:
            llm.close()

    # --- embedding ------------------------------------------------------------------------------

    def _embed(self, texts: list[str]) -> list[list[float]]:
        import llama_cpp

        self._load()
        llm = self._llm
        threads = self._threads.choose()
        if threads != self._threads_used:
            llama_cpp.llama_set_n_threads(llm.ctx, *threads)
            self._threads_used = threads
        inputs = []
        for text in texts:
            n = len(llm.tokenize(text.encode("utf-8")))
            if n == 0:
                # llama.cpp has no output for a sequence of no tokens (llama-cpp-python then crashes);
                # a blank stands in for an empty text.
                text = " "
            elif n > self.context_tokens:
                # llama-cpp-python keeps the first context_tokens tokens; the rest does not count.
                self.truncated += 1
                log.debug("embedding %d of %d tokens of a text (%s)", self.context_tokens, n, self.name)
            inputs.append(text)
        # One call for the whole list: llama-cpp-python packs as many texts as fit into each batch.
        vectors: list[list[float]] = llm.embed(inputs, normalize=True, truncate=True)
        return [[float(x) for x in v] for v in vectors]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text (blocking; texts longer than the context are truncated)."""
        batch = _check_texts(texts)
        return self._call(lambda: self._embed(batch)) if batch else []

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed`` awaited: the work runs on the chat model's worker (or a thread), not the event loop."""
        batch = _check_texts(texts)
        return await self._acall(lambda: self._embed(batch)) if batch else []


class HashingEmbedder:
    """A model-free embedder: hashed word counts, so texts that share words score higher.

    Deterministic and instant, it records what it embedded: a stand-in for tests of code that stores
    and ranks vectors, where loading a model would only make them slow.
    """

    def __init__(self, dimensions: int = 64, name: str = "hashing") -> None:
        self.name = name
        self._dimensions = dimensions
        self.calls: list[list[str]] = []  # every batch embedded, for tests to inspect

    @property
    def dimensions(self) -> int:
        """Length of every vector."""
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text (the zero text gets a fixed unit vector)."""
        batch = _check_texts(texts)
        self.calls.append(batch)
        out = []
        for text in batch:
            vector = [0.0] * self._dimensions
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
                vector[int.from_bytes(digest[:4], "little") % self._dimensions] += 1.0 if digest[4] & 1 else -1.0
            norm = math.sqrt(sum(x * x for x in vector))
            out.append([x / norm for x in vector] if norm else [1.0] + [0.0] * (self._dimensions - 1))
        return out

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed`` (it never blocks for long)."""
        return self.embed(texts)


def embedder_for(config: Config, worker: LocalModel, models_dir: Path) -> LocalEmbedder:
    """The embedder memory.embedding_model names, else one using the chat model's own file.

    Either way its llama.cpp work runs on ``worker``'s thread, one job at a time with chat.
    """
    from appliance.llm import models

    spec = config.memory.embedding_model.strip()
    if spec:
        if "/" in spec or spec.endswith(".gguf"):
            spec = str(config.resolve_path(spec))  # a path: relative to the config file's folder
        try:
            path = models.resolve_model(spec, models_dir)
        except ModelError as exc:
            raise type(exc)(f"memory.embedding_model: {exc.message}", fix=exc.fix) from None
        name = config.memory.embedding_model.strip()
    else:
        path, name = worker.path, f"{worker.name} (chat model)"
    return LocalEmbedder(
        path,
        worker=worker,
        name=name,
        threads=config.llm.threads,
        batch_threads=config.llm.batch_threads,
        memory_margin_mb=config.llm.memory_margin_mb,
    )


# --- helpers --------------------------------------------------------------------------------------


def _read_header(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ModelNotFoundError(
            f"embedding model file {path} does not exist",
            fix="fix memory.embedding_model (a catalog name or a .gguf path), or leave it empty to use "
            "the chat model's own embeddings",
        )
    return gguf.read_metadata(path, {"{arch}.embedding_length", "{arch}.pooling_type", "{arch}.context_length"})


def _int(value: Any) -> int:
    if isinstance(value, list):  # some per-layer keys are arrays; the first entry is the one that counts
        value = value[0] if value else 0
    return int(value or 0)


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):  # a bare string would be embedded letter by letter
        raise TypeError("embed() takes a list of texts, not a single string")
    return list(texts)
