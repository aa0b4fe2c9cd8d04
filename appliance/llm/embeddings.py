"""Text embeddings: the appliance's fast understanding layer, a GGUF model run by llama.cpp in embedding mode.

The default is all-MiniLM-L6-v2 (``minilm`` in the catalog, converted at install by ``bert_gguf``):
22 M parameters, 384 dimensions, a short message in ~5 ms on one core. One model serves four uses:
memory recall, device requests by meaning (``understanding/semantic.py``), the tools the local model is shown
(``understanding/tool_rank.py``) and the escalation signal (``understanding/difficulty.py``). A turn embeds its message
once: the last few query vectors are kept (``query_cache``), so every stage after the first reuses it.

A small embedding model (its file says how to pool) runs on one thread of its own, under a lock: a
query must not wait behind a chat reply that takes seconds, and one thread for ~5 ms barely disturbs
the chat model's decoding. The chat model's own embeddings remain as a fallback (``memory.embedding_model:
chat``, or when the default model is not installed): then every llama.cpp call, loading included, runs
as a job on the chat worker's thread, since two big models computing at once would each run at half
speed or worse (see ``threads.py``); llama.cpp maps the weights, so both contexts share the same pages.

Vectors are L2-normalised, so a dot product is the cosine similarity. A text longer than the model's
context is embedded in pieces and their vectors averaged (llama.cpp's truncation would drop the final
``[SEP]`` a BERT model needs). Models that want an instruction before a query or a stored text
(bge, nomic) get it from the catalog's ``query_prefix`` / ``document_prefix``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from appliance.errors import ModelError, ModelFormatError, ModelNotFoundError
from appliance.llm import gguf
from appliance.llm.local import LocalModel, check_model_file, open_llama, threads_policy

if TYPE_CHECKING:
    from appliance.config import Config
    from appliance.llm.runner_client import ModelRunner
    from appliance.llm.runner_models import RunnerEmbedder

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


@runtime_checkable
class QueryEmbedder(Embedder, Protocol):
    """An Embedder that also embeds queries (cached): what understanding and tool ranking need."""

    path: Path
    query_prefix: str

    def embed_query(self, text: str) -> list[float]:
        """The vector of a message or search query (blocking)."""
        ...

    async def aembed_query(self, text: str) -> list[float]:
        """``embed_query`` awaited."""
        ...

    async def aembed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Many short texts embedded as queries."""
        ...

    def cached_query(self, text: str) -> list[float] | None:
        """The vector of a query embedded moments ago, if it is still kept."""
        ...


class LocalEmbedder:
    """A GGUF model in llama.cpp's embedding mode, loaded on first use."""

    QUERY_CACHE = 32  # query vectors kept: a turn's stages (devices, tools, routing, recall) share one

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
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        self.path = Path(path)
        self.name = name or self.path.stem
        self.worker = worker
        self.memory_margin_mb = memory_margin_mb
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.truncated = 0  # texts embedded in pieces (longer than the context) so far
        self.embedded = 0  # texts embedded so far (cache hits not counted)
        self.logits_released = 0  # bytes of the never-written logits handed back after loading (footprint)
        self.load_s = 0.0
        self._queries: OrderedDict[str, list[float]] = OrderedDict()
        meta = _read_header(self.path)
        arch = str(meta.get("general.architecture", ""))
        self._dimensions = _int(meta.get(f"{arch}.embedding_length"))
        if not self._dimensions:
            raise ModelFormatError(
                f"{self.path} does not say its embedding width ({arch}.embedding_length is missing)",
                fix="use a GGUF file converted by llama.cpp's own tools (see `picoagent models list`)",
            )
        pooling = _int(meta.get(f"{arch}.pooling_type"))
        # An embedding model says how to pool; a chat model does not.
        self.is_embedding_model = f"{arch}.pooling_type" in meta and pooling != POOLING_NONE
        if pooling == POOLING_RANK:
            raise ModelFormatError(
                f"{self.path.name} is a reranker (it scores text pairs); it cannot embed single texts",
                fix="set memory.embedding_model to an embedding model, or to chat for the chat model's own",
            )
        # Embedding models say how to pool; a chat model says nothing (or "none": one vector per
        # token), and the mean of its token vectors is what works best for it.
        self.pooling = pooling if pooling in _POOLING_NAMES else POOLING_MEAN
        trained = self.trained_context = _int(meta.get(f"{arch}.context_length"))
        # BERT-style models have learned positions only up to their training context (often 512).
        self.context_tokens = min(context_tokens, trained) if trained else context_tokens
        self.fallback_note = ""  # why the chat model embeds although another model was configured
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
            "or set memory.embedding_model to another model (chat: the chat model's own embeddings)",
            embedding=True,
            n_ctx=self.context_tokens,
            n_batch=self.context_tokens,
            n_ubatch=self.context_tokens,
            n_threads=decode,
            n_threads_batch=batch,
            pooling_type=self.pooling,
        )
        from appliance.llm import footprint

        footprint.drop_logits_rows(llm)  # llama-cpp-python's own logits array: never written here either
        self.logits_released = footprint.release_embedding_logits(llm)
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

    def memory_report(self) -> dict[str, int]:
        """Bytes of the KV cache, compute buffers and logits of this embedding context (zeros when not loaded)."""
        from appliance.llm import footprint

        report = footprint.context_report(self._llm)
        if self._llm is not None:  # the released logits are allocated but no longer resident
            report["logits_bytes"] = max(0, report["logits_bytes"] - self.logits_released)
        return report

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
        inputs: list[str] = []
        pieces: list[int] = []  # how many inputs each text became
        for text in texts:
            tokens = llm.tokenize(text.encode("utf-8"))  # with [CLS] and [SEP] (or the model's BOS/EOS)
            if len(tokens) <= 2 and not text.strip():
                # llama.cpp has no output for a sequence of no tokens (llama-cpp-python then crashes);
                # a blank stands in for an empty text.
                inputs.append(" ")
                pieces.append(1)
            elif len(tokens) > self.context_tokens:
                self.truncated += 1
                chunks = _chunks(llm, text, self.context_tokens - 4)
                log.debug("embedding a text of %d tokens in %d pieces (%s)", len(tokens), len(chunks), self.name)
                inputs.extend(chunks)
                pieces.append(len(chunks))
            else:
                inputs.append(text)
                pieces.append(1)
        # One call for the whole list: llama-cpp-python packs as many texts as fit into each batch.
        vectors: list[list[float]] = llm.embed(inputs, normalize=True, truncate=True)
        self.embedded += len(texts)
        out: list[list[float]] = []
        at = 0
        for n in pieces:
            if n == 1:
                out.append([float(x) for x in vectors[at]])
            else:  # the mean of the pieces' unit vectors, made unit length again
                mean = [sum(col) / n for col in zip(*vectors[at : at + n], strict=True)]
                norm = math.sqrt(sum(x * x for x in mean)) or 1.0
                out.append([x / norm for x in mean])
            at += n
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per stored text (blocking; long texts are embedded in pieces)."""
        batch = [self.document_prefix + t for t in _check_texts(texts)]
        return self._call(lambda: self._embed(batch)) if batch else []

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed`` awaited: the work runs on the chat model's worker (or a thread), not the event loop."""
        batch = [self.document_prefix + t for t in _check_texts(texts)]
        return await self._acall(lambda: self._embed(batch)) if batch else []

    def cached_query(self, text: str) -> list[float] | None:
        """The vector of a query embedded moments ago, if it is still kept."""
        vector = self._queries.get(text)
        if vector is not None:
            self._queries.move_to_end(text)
        return vector

    def _keep(self, text: str, vector: list[float]) -> list[float]:
        self._queries[text] = vector
        while len(self._queries) > self.QUERY_CACHE:
            self._queries.popitem(last=False)
        return vector

    def embed_query(self, text: str) -> list[float]:
        """The vector of a message or search query (blocking); the same text again costs nothing."""
        cached = self.cached_query(text)
        if cached is not None:
            return cached
        prefixed = self.query_prefix + text
        return self._keep(text, self._call(lambda: self._embed([prefixed]))[0])

    async def aembed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Many short texts embedded as queries (with the query prefix), off the event loop; not cached."""
        batch = [self.query_prefix + t for t in _check_texts(texts)]
        return await self._acall(lambda: self._embed(batch)) if batch else []

    async def aembed_query(self, text: str) -> list[float]:
        """``embed_query`` awaited, off the event loop."""
        cached = self.cached_query(text)
        if cached is not None:
            return cached
        prefixed = self.query_prefix + text
        return self._keep(text, (await self._acall(lambda: self._embed([prefixed])))[0])


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


CHAT = "chat"  # memory.embedding_model's value for the chat model's own embeddings
EMBEDDING_CONTEXT = 128  # tokens a small embedding model reads at once


@dataclass(frozen=True)
class EmbeddingChoice:
    """Which file memory.embedding_model resolves to (None: the chat model's own), and why."""

    path: Path | None
    name: str
    query_prefix: str = ""
    document_prefix: str = ""
    note: str = ""  # why the chat model is used although another model was configured


def choose_embedding(config: Config, models_dir: Path) -> EmbeddingChoice:
    """Resolve memory.embedding_model: a catalog name, a .gguf path, or "chat" (or empty).

    The default model (minilm) falls back to the chat model's embeddings, with a note, when it is not
    installed; any other model that is missing is an error naming the key.
    """
    from appliance.llm import models

    spec = config.memory.embedding_model.strip()
    if not spec or spec == CHAT:
        return EmbeddingChoice(None, CHAT)
    entry = models.load_catalog().get(spec)
    lookup = str(config.resolve_path(spec)) if "/" in spec or spec.endswith(".gguf") else spec
    try:
        path = models.resolve_model(lookup, models_dir)
    except ModelNotFoundError as exc:
        if spec != models.default_embedding_model_name():
            raise type(exc)(f"memory.embedding_model: {exc.message}", fix=exc.fix) from None
        note = f"{spec} is not installed, so memory uses the chat model's embeddings (fix: {exc.fix})"
        return EmbeddingChoice(None, CHAT, note=note)
    except ModelError as exc:
        raise type(exc)(f"memory.embedding_model: {exc.message}", fix=exc.fix) from None
    prefixes = (entry.query_prefix, entry.document_prefix) if entry is not None else ("", "")
    return EmbeddingChoice(path, spec, *prefixes)


def embedder_for(
    config: Config, worker: Any, models_dir: Path, runner: ModelRunner | None = None
) -> LocalEmbedder | RunnerEmbedder | None:
    """The embedder memory.embedding_model names (see :func:`choose_embedding`).

    A small embedding model runs on a thread of its own; a chat model's file (the chat model's own
    embeddings, or another chat model named on purpose) runs on ``worker``'s thread, one job at a time
    with chat. None when that is wanted but there is no local chat worker (a scripted or remote model).
    With ``runner`` (the daemon's and the commands': ``worker`` is then a RunnerModel) the model runs in
    the model runner's process (runner.py), else in this one (``worker`` a LocalModel, or None).
    """
    choice = choose_embedding(config, models_dir)

    def make(path: Path, params: dict[str, Any], on_worker: Any) -> LocalEmbedder | RunnerEmbedder:
        spec = LocalEmbedder(path, worker=on_worker if runner is None else None, **params)  # reads the header only
        if runner is None:
            return spec
        from appliance.llm.runner_models import RunnerEmbedder

        return RunnerEmbedder(runner, spec, params, on_worker)

    if choice.path is not None:
        # 128 tokens hold any message, device profile or tool description, and most facts (a longer
        # text is embedded in pieces): 16 MiB less llama.cpp working memory than 256 (measured).
        params: dict[str, Any] = {
            "name": choice.name,
            "query_prefix": choice.query_prefix,
            "document_prefix": choice.document_prefix,
            "context_tokens": EMBEDDING_CONTEXT,
            "threads": 1,
            "batch_threads": 1,
            "memory_margin_mb": config.llm.memory_margin_mb,
        }
        embedder = make(choice.path, params, None)
        if embedder.is_embedding_model:
            return embedder
        embedder.close()
    if choice.note:
        log.warning("memory.embedding_model: %s", choice.note)
    if worker is None:
        return None
    path = choice.path or worker.path
    params = {
        "name": choice.name if choice.path is not None else f"{worker.name} (chat model)",
        "threads": config.llm.threads,
        "batch_threads": config.llm.batch_threads,
        "memory_margin_mb": config.llm.memory_margin_mb,
    }
    embedder = make(path, params, worker)
    embedder.fallback_note = choice.note
    return embedder


# --- helpers --------------------------------------------------------------------------------------


def _read_header(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ModelNotFoundError(
            f"embedding model file {path} does not exist",
            fix="fix memory.embedding_model (a catalog name or a .gguf path), or set it to chat to use "
            "the chat model's own embeddings",
        )
    return gguf.read_metadata(path, {"{arch}.embedding_length", "{arch}.pooling_type", "{arch}.context_length"})


def _chunks(llm: Any, text: str, tokens: int) -> list[str]:
    """A long text cut at word boundaries into pieces of at most ``tokens`` tokens each."""
    words = text.split()
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for word in words:
        n = len(llm.tokenize(word.encode("utf-8"), add_bos=False))
        if current and size + n > tokens:
            pieces.append(" ".join(current))
            current, size = [], 0
        current.append(word)
        size += n
    if current:
        pieces.append(" ".join(current))
    return pieces or [text[:1000]]


def _int(value: Any) -> int:
    if isinstance(value, list):  # some per-layer keys are arrays; the first entry is the one that counts
        value = value[0] if value else 0
    return int(value or 0)


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):  # a bare string would be embedded letter by letter
        raise TypeError("embed() takes a list of texts, not a single string")
    return list(texts)
