"""The models the daemon uses, run in the model runner: what ``LocalModel`` and ``LocalEmbedder`` were in-process.

Each call becomes a request to the runner (runner_client.py) answered on a future; a generation streams
its text and each token's log-probability back, so streaming, cancelling and routing's early abort work
as before. The agent, memory, understanding and the web face cannot tell the difference, except that a
crash of llama.cpp is now a :class:`~appliance.errors.ModelCrashed` error for the requests in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from appliance.errors import LocalModelOff, PicoagentError
from appliance.llm.base import ChatMessage, Generation, GenerationRequest, await_worker, on_the_loop
from appliance.llm.runner_client import FIX, ModelRunner, Pending

# --- the objects ----------------------------------------------------------------------------------

_oids = itertools.count(1)
REFRESH_EVERY_S = 2.0  # how stale the status page's prompt-cache and buffer figures may be after replies


class RunnerModel:
    """The chat model, run in the model runner (a ServedModel: what ``LocalModel`` was in-process)."""

    def __init__(self, runner: ModelRunner, path: Path, *, name: str | None = None, **params: Any) -> None:
        self.runner = runner
        self.path = Path(path)
        self.name = name or self.path.stem
        self.context_tokens = int(params.get("context_tokens", 2048))
        self.oid = f"chat{next(_oids)}"
        self._loaded_in = 0  # the runner generation the model was loaded in
        self._stats: dict[str, Any] = {"prefix": "none", "prefix_tokens": 0, "ram_mb": 0.0, "entries": 0}
        self._memory: dict[str, int] = {}
        self.threads_used = 0
        self.load_s = 0.0
        self._refreshed_at = 0.0
        self._closed = False
        runner.open(self.oid, "chat", {"path": str(self.path), "name": self.name, **params})

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory in the running runner."""
        return self._loaded_in == self.runner.generation and self.runner.pid is not None

    def _check(self) -> None:
        if self.runner.chat_off:
            raise LocalModelOff(
                f"the local model is off after {len(self.runner.crashes)} crashes of its runner",
                fix="answers come from the cloud where allowed; " + FIX + "; then restart picoagent",
            )

    def _apply_status(self, status: dict[str, Any]) -> None:
        """Take the runner's LocalModel.status() (threads of the last reply, load time)."""
        self.threads_used = int(status.get("threads_used") or self.threads_used)
        self.load_s = float(status.get("load_s") or self.load_s)

    def _loaded(self, status: dict[str, Any]) -> None:
        self._apply_status(status)
        first = self._loaded_in != self.runner.generation
        self._loaded_in = self.runner.generation
        if first:
            self.runner.refresh_info()
            self._refresh()

    def _refresh(self) -> None:
        """Fetch the prompt-state stats, buffer sizes and threads for /api/status, without waiting."""
        self._refreshed_at = time.monotonic()
        targets: list[tuple[str, dict[str, Any]]] = [
            ("prompt_cache_stats", self._stats),
            ("memory_report", self._memory),
        ]
        for method, target in targets:
            try:
                future = self.runner.request(method, ("call", 0, self.oid, method, ()))
            except PicoagentError:
                return
            future.add_done_callback(partial(_update, target))
        with contextlib.suppress(PicoagentError):
            status = self.runner.request("status", ("call", 0, self.oid, "status", ()))
            status.add_done_callback(lambda f: self._apply_status(f.result()) if f.exception() is None else None)

    def start_loading(self) -> None:
        """Start the runner and the model's load now, without waiting: the runner imports llama.cpp and maps
        the model while this process gets the rest ready (a one-shot `picoagent chat -m`)."""
        if self.runner.chat_off:
            return
        with contextlib.suppress(PicoagentError):
            future = self.runner.request("loading", ("call", 0, self.oid, "load", ()))
            future.add_done_callback(lambda f: self._loaded(f.result()) if f.exception() is None else None)

    async def load(self) -> None:
        """Load the model in the runner."""
        self._check()
        status = await asyncio.wrap_future(self.runner.request("loading", ("call", 0, self.oid, "load", ())))
        self._loaded(status)

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """How many tokens the rendered prompt takes (loads the model if needed)."""
        self._check()
        return int(self.runner.call(self.oid, "count_tokens", list(messages)))

    async def warm_prefix(self, messages: Sequence[ChatMessage]) -> dict[str, Any]:
        """Ready the stable prefix of these messages in the runner's KV cache (see LocalModel.warm_prefix)."""
        self._check()
        future = self.runner.request("warming", ("call", 0, self.oid, "warm_prefix_sync", (list(messages),)))
        result = dict(await asyncio.wrap_future(future))
        self._refresh()
        return result

    def prompt_cache_stats(self) -> dict[str, Any]:
        """The prompt-state cache as last reported by the runner."""
        return dict(self._stats)

    def memory_report(self) -> dict[str, int]:
        """Bytes of the KV cache, compute buffers and logits, as last reported (zeros when not loaded)."""
        if not self.loaded:
            return {"kv_cache_bytes": 0, "compute_bytes": 0, "logits_bytes": 0}
        return {"kv_cache_bytes": 0, "compute_bytes": 0, "logits_bytes": 0, **self._memory}

    @property
    def queue_depth(self) -> int:
        """Generations waiting or running in the runner."""
        return sum(1 for p in list(self.runner._pending.values()) if p.what == "generation")

    def _start(
        self, request: GenerationRequest, on_text: Callable[[str], None] | None
    ) -> concurrent.futures.Future[Any]:
        self._check()
        wire = {
            "messages": list(request.messages),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "repeat_penalty": request.repeat_penalty,
            "stop": list(request.stop),
            "json_schema": request.json_schema,
            "prefix": request.prefix,
            "seed": request.seed,
            "client": request.client,
            "stream": on_text is not None,
            "watch": True,  # every token's log-probability: a cancel or routing's abort is passed on at once
        }
        pending = Pending(concurrent.futures.Future(), "generation", on_text, request)
        return self.runner.request("generation", ("generate", 0, self.oid, wire), pending)

    def _finished(self, generation: Generation) -> Generation:
        if not self.loaded:
            self._loaded({})
        elif time.monotonic() - self._refreshed_at >= REFRESH_EVERY_S:  # not three more requests after every reply
            self._refresh()
        return generation

    def generate_sync(self, request: GenerationRequest) -> Generation:
        """One generation from a thread that is not the event loop (``on_token`` on the reader thread)."""
        return self._finished(self._start(request, request.on_token).result())

    async def generate(self, request: GenerationRequest) -> Generation:
        """One generation; cancelling the awaiting task stops it at the next token (see LocalModel.generate)."""
        on_text = None if request.on_token is None else on_the_loop(request.on_token, request.cancel)
        future = self._start(request, on_text)
        try:
            return self._finished(await await_worker(future))
        except asyncio.CancelledError:
            request.cancel.set()
            rid = getattr(future, "rid", None)
            if rid is not None:
                self.runner.signal_request("cancel", rid)
            raise

    def close(self) -> None:
        """Free the model in the runner (the runner stops when nothing else uses it)."""
        if not self._closed:
            self._closed = True
            self.runner.close_object(self.oid)


class RunnerEmbedder:
    """An embedding model run in the model runner (an Embedder: what ``LocalEmbedder`` was in-process).

    ``spec`` is a LocalEmbedder made here but never loaded: it read the file's header (width, pooling,
    context), so this side knows what the runner's copy will do, and keeps the recent query vectors here
    (its ``cached_query``: a turn's stages share one vector without a round trip); ``params`` are its
    constructor's.
    """

    def __init__(self, runner: ModelRunner, spec: Any, params: dict[str, Any], worker: RunnerModel | None) -> None:
        self.runner = runner
        self.spec = spec
        self.path = spec.path
        self.name = spec.name
        self.worker = worker  # the chat model whose own embeddings these are (None: a model of its own)
        self.is_embedding_model = spec.is_embedding_model
        self.query_prefix = spec.query_prefix
        self.document_prefix = spec.document_prefix
        self.fallback_note = ""
        self.oid = f"embedder{next(_oids)}"
        self._loaded_in = 0
        self._closed = False
        wire = {"path": str(spec.path), "name": spec.name, **params}
        if worker is not None:
            wire["worker"] = worker.oid
        runner.open(self.oid, "embedder", wire)

    @property
    def dimensions(self) -> int:
        """Length of every vector (from the file's header)."""
        return int(self.spec.dimensions)

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory in the running runner."""
        return self._loaded_in == self.runner.generation and self.runner.pid is not None

    def _run(self, method: str, *args: Any) -> concurrent.futures.Future[Any]:
        future = self.runner.request("embedding", ("call", 0, self.oid, method, args))
        generation = self.runner.generation
        future.add_done_callback(lambda f: self._answered(f, generation))
        return future

    def _answered(self, future: concurrent.futures.Future[Any], generation: int) -> None:
        """A call that answered means the model is loaded in that runner; one cancelled (the daemon stopping
        while it loaded) or failed means nothing (``exception()`` of a cancelled future raises: a traceback in
        the log at every stop during the first load)."""
        if not future.cancelled() and future.exception() is None:
            self._loaded_in = generation

    def load(self) -> None:
        """Load the model in the runner now."""
        self._run("load").result()

    def start_loading(self) -> None:
        """Start loading the model in the runner, without waiting (see RunnerModel.start_loading)."""
        with contextlib.suppress(PicoagentError):
            self._run("load")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per stored text (blocking)."""
        batch = _texts(texts)
        return list(self._run("embed", batch).result()) if batch else []

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed`` awaited."""
        batch = _texts(texts)
        return list(await asyncio.wrap_future(self._run("embed", batch))) if batch else []

    def cached_query(self, text: str) -> list[float] | None:
        """The vector of a query embedded moments ago, if it is still kept."""
        return self.spec.cached_query(text)

    def _keep(self, text: str, vector: list[float]) -> list[float]:
        return self.spec._keep(text, vector)

    def embed_query(self, text: str) -> list[float]:
        """The vector of a message or search query (blocking); the same text again costs nothing."""
        cached = self.cached_query(text)
        return cached if cached is not None else self._keep(text, self._run("embed_query_uncached", text).result())

    async def aembed_query(self, text: str) -> list[float]:
        """``embed_query`` awaited."""
        cached = self.cached_query(text)
        if cached is not None:
            return cached
        return self._keep(text, await asyncio.wrap_future(self._run("embed_query_uncached", text)))

    async def aembed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Many short texts embedded as queries, not cached."""
        batch = _texts(texts)
        return list(await asyncio.wrap_future(self._run("embed_queries", batch))) if batch else []

    def memory_report(self) -> dict[str, int]:
        """Bytes of this embedding context (zeros here: they live in the runner; see its process figures)."""
        return {"kv_cache_bytes": 0, "compute_bytes": 0, "logits_bytes": 0}

    def close(self) -> None:
        """Free the model in the runner."""
        if not self._closed:
            self._closed = True
            self.runner.close_object(self.oid)


def _update(target: dict[str, Any], future: concurrent.futures.Future[Any]) -> None:
    if future.exception() is None:
        target.update(future.result())


def _texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):  # a bare string would be embedded letter by letter
        raise TypeError("embed() takes a list of texts, not a single string")
    return list(texts)


# --- one runner per data dir ----------------------------------------------------------------------

_runners: dict[tuple[str, str], ModelRunner] = {}
_runners_lock = threading.Lock()


def runner_for(weight_repack: str, state_dir: Path | None, log_level: str = "warning") -> ModelRunner:
    """The runner of this data dir and setting (one process serves every model of a daemon)."""
    key = (weight_repack, str(state_dir))
    with _runners_lock:
        runner = _runners.get(key)
        if runner is None or (runner.mode == "stopped" and runner.users <= 0):
            runner = _runners[key] = ModelRunner(weight_repack=weight_repack, state_dir=state_dir, log_level=log_level)
        return runner
