"""The local model worker: one llama.cpp model behind a queue, on its own thread.

llama.cpp is not re-entrant, so one ``Llama`` object serves every caller, one job at a time, on a
dedicated thread; the event loop only awaits futures. Tokens stream through a callback; a job stops at
the model's end-of-turn token, a stop sequence, ``max_tokens``, its cancel event or its deadline.
Prompts are rendered with the chat template stored in the GGUF file. The KV cache keeps the previous
prompt, so a new prompt that starts the same way (the system prompt, the conversation so far) is not
read again. Each sampled token's probability and the step's entropy are kept for routing.
"""

from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import dataclasses
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from appliance.errors import Cancelled, ContextOverflow, ModelError, ModelNotFoundError, ModelTooLargeError
from appliance.llm import footprint, gguf, threads
from appliance.llm.base import (
    ChatMessage,
    FinishReason,
    Generation,
    GenerationRequest,
    await_worker,
    on_the_loop,
)
from appliance.llm.prompt_state import PromptStates, StateFiles, common_prefix, model_identity, stable_prefix

log = logging.getLogger(__name__)


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (None where there is no such file)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


_LLAMA_LOG_LEVELS = {1: logging.DEBUG, 2: logging.DEBUG, 3: logging.INFO, 4: logging.DEBUG}
_log_callback: Any = None  # kept referenced: llama.cpp calls it from C


def _route_llama_logs() -> None:
    """Send llama.cpp's own messages to the ``llama_cpp`` logger instead of stderr.

    llama-cpp-python prints llama.cpp's error-level lines to stderr even with ``verbose=False``, and
    some are not errors at all ("model default pooling_type is [-1], but [1] was specified" lands in
    the middle of a terminal chat reply). Failures reach people as ModelError with a fix; the raw
    lines stay available at log_level debug/info.
    """
    global _log_callback
    if _log_callback is not None:
        return
    import ctypes

    import llama_cpp

    logger = logging.getLogger("llama_cpp")
    last = [logging.DEBUG]

    @llama_cpp.llama_log_callback
    def callback(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
        if level != 5:  # 5 continues the previous line at its level
            last[0] = _LLAMA_LOG_LEVELS.get(level, logging.DEBUG)
        footprint.llama_line(text.decode("utf-8", "replace"))  # the buffer sizes it allocates, for memory_report
        if logger.isEnabledFor(last[0]):
            logger.log(last[0], "%s", text.decode("utf-8", "replace").rstrip())

    _log_callback = callback
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))


def apply_repack(repack: bool) -> None:
    """Let llama.cpp repack weights into its extra buffer types, or not (``use_extra_bufts``), in this process.

    llama-cpp-python's ``Llama`` takes its model parameters from ``llama_model_default_params`` and has
    no argument for this field, so that function is wrapped once, before any model loads. The model runner
    applies ``llm.weight_repack``; any other process that loads a model here gets ``auto`` (see
    :func:`decide_repack`), so a test or a one-off script on an AMX CPU does not crash either.
    """
    global _repack_decided
    import llama_cpp.llama_cpp as lib

    original = getattr(lib.llama_model_default_params, "picoagent_original", lib.llama_model_default_params)

    def default_params() -> Any:
        params = original()
        params.use_extra_bufts = repack
        return params

    default_params.picoagent_original = original  # type: ignore[attr-defined]
    lib.llama_model_default_params = default_params
    _repack_decided = True


_repack_decided = False


def decide_repack() -> None:
    """``llm.weight_repack: auto`` for this CPU, unless this process already chose (the runner does, first)."""
    if not _repack_decided:
        from appliance.llm import cpu

        apply_repack(cpu.choose_repack("auto").repack)


def open_llama(path: Path, *, fix: str, purpose: str = "", **params: Any) -> Any:
    """A quiet llama_cpp.Llama on this file; llama.cpp's refusal becomes a ModelError carrying ``fix``."""
    from llama_cpp import Llama

    _route_llama_logs()
    decide_repack()
    try:
        with footprint.capture() as sizes:
            llm = Llama(model_path=str(path), verbose=False, **params)
    except (ValueError, RuntimeError) as exc:
        raise ModelError(f"llama.cpp could not load {path}{purpose} ({exc})", fix=fix) from None
    footprint.remember(llm, sizes)
    return llm


def check_model_file(
    path: Path, context_tokens: int, batch_size: int, margin_mb: int, kv_type: str = "f16", ubatch: int | None = None
) -> int:
    """Refuse a missing file, a non-GGUF file or a model too large for free memory; return bytes needed.

    ``kv_type`` and ``ubatch``: the KV cache type and micro-batch the context gets (footprint.resolved);
    the defaults are llama.cpp's own (an embedding context: f16, micro-batch = batch)."""
    if not path.exists():
        raise ModelNotFoundError(
            f"model file {path} does not exist",
            fix="run `picoagent models list` and `picoagent models pull NAME`, or fix llm.model",
        )
    need = gguf.estimate_memory_bytes(path, context_tokens, ubatch or batch_size, kv_type)
    free = available_memory_bytes()
    if free is not None and need + margin_mb * 1024 * 1024 > free:
        raise ModelTooLargeError(
            f"model {path.name} needs about {need // 2**20} MB with a {context_tokens}-token context, "
            f"but only {free // 2**20} MB are free (keeping {margin_mb} MB spare)",
            fix="pick a smaller model (`picoagent models list`), lower llm.context_tokens, or stop other programs",
        )
    return need


class _StopMatcher:
    """Finds stop sequences in streamed text and holds back text that may be the start of one."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s for s in stops if s]

    def split(self, text: str) -> tuple[str, str, bool]:
        """(text safe to emit, text held back, stopped) for the reply so far."""
        for stop in self.stops:
            at = text.find(stop)
            if at >= 0:
                return text[:at], "", True
        hold = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(text)), 0, -1):
                if text.endswith(stop[:n]):
                    hold = max(hold, n)
                    break
        return (text[: len(text) - hold], text[len(text) - hold :], False) if hold else (text, "", False)


@dataclasses.dataclass(eq=False)
class LocalModel:
    """A GGUF model run by llama-cpp-python on one worker thread.

    ``prompt_cache_mb``: RAM for prompt states kept across side jobs (0: none); ``state_dir``: where the stable
    prompt prefix's state is saved across restarts (None: not saved); see prompt_state.py."""

    path: Path
    _: dataclasses.KW_ONLY
    context_tokens: int = 2048
    threads: dataclasses.InitVar[int | str] = "auto"
    batch_threads: dataclasses.InitVar[int | str] = "auto"
    batch_size: int = 256
    seed: int = 42
    timeout_s: float = 120.0
    memory_margin_mb: int = 128
    extra_stop: Sequence[str] = ()
    name: str = ""  # empty: the file's stem
    prompt_cache_mb: dataclasses.InitVar[int] = 16
    state_dir: dataclasses.InitVar[Path | None] = None
    state_disk_mb: dataclasses.InitVar[int] = 64
    kv_type: str = "auto"
    ubatch_size: int | None = None

    def __post_init__(
        self,
        threads: int | str,
        batch_threads: int | str,
        prompt_cache_mb: int,
        state_dir: Path | None,
        state_disk_mb: int,
    ) -> None:
        self.name = self.name or self.path.stem
        self.extra_stop = list(self.extra_stop)
        self.load_s = 0.0
        self.threads_used = 0
        self._llm: Any = None
        self._formatter: Any = None
        self._eog: set[int] = set()
        self._grammars: dict[str, Any] = {}
        self._pieces: dict[int, bytes] = {}
        self._vocab: Any = None
        self._jobs: queue.Queue[tuple[Callable[[], Any], concurrent.futures.Future[Any]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._threads = threads_policy(threads, batch_threads)
        files = StateFiles(state_dir, state_disk_mb * 2**20) if state_dir is not None else None
        self._states = PromptStates(prompt_cache_mb * 2**20, files)

    # --- the worker thread ------------------------------------------------------------------

    def _submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        with self._thread_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="llama-worker", daemon=True)
                self._thread.start()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((fn, future))
        return future

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

    @property
    def queue_depth(self) -> int:
        """Jobs waiting for the model (not counting the one running)."""
        return self._jobs.qsize()

    def close(self) -> None:
        """Stop the worker thread and free the model."""
        with self._thread_lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(None)
            thread.join(timeout=30)
        self._states.cache.clear()  # its RAM goes with the model (a replaced model may linger a while)
        if self._llm is not None:
            self._llm.close()
            self._llm = None

    # --- loading ----------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory."""
        return self._llm is not None

    def _load(self) -> None:
        if self._llm is not None:
            return
        started = time.perf_counter()
        kind, micro = footprint.resolved(self.kv_type, self.batch_size, self.ubatch_size)
        check_model_file(self.path, self.context_tokens, self.batch_size, self.memory_margin_mb, kind, micro)
        from llama_cpp import llama_chat_format

        decode, batch = self._threads.choose()
        llm = open_llama(
            self.path,
            fix="the file is damaged, truncated, or of an architecture this llama.cpp does not know: "
            "pull it again (picoagent models pull NAME) or pick another model",
            n_ctx=self.context_tokens,
            n_batch=self.batch_size,
            n_threads=decode,
            n_threads_batch=batch,
            seed=self.seed,
            **footprint.context_params(self.kv_type, self.batch_size, self.ubatch_size),
        )
        footprint.drop_logits_rows(llm)
        arch = llm.metadata.get("general.architecture", "")
        if llm.metadata.get(f"{arch}.pooling_type", "0") not in ("0", "-1"):
            llm.close()  # it pools its tokens into one vector: it embeds text, it cannot write a reply
            raise ModelError(
                f"{self.path.name} is an embedding model, not a chat model",
                fix="pick a chat model for llm.model or `picoagent models use` (`picoagent models list`); "
                "an embedding model belongs in memory.embedding_model",
            )
        template = llm.metadata.get("tokenizer.chat_template")
        eos_id, bos_id = llm.token_eos(), llm.token_bos()
        eos = llm._model.token_get_text(eos_id) if eos_id != -1 else ""
        bos = llm._model.token_get_text(bos_id) if bos_id != -1 else ""
        if not template:
            # No template in the file: ChatML, which most small instruct models use.
            template = (
                "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}"
                "{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}"
            )
        self._formatter = llama_chat_format.Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
        import llama_cpp

        vocab = self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._eog = {t for t in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)}
        self._llm = llm
        self.threads_used = decode
        self.load_s = time.perf_counter() - started
        log.info("loaded %s in %.2f s (threads %d/%d)", self.path.name, self.load_s, decode, batch)

    async def load(self) -> None:
        """Load the model on the worker thread (generate does this on first use too)."""
        await asyncio.wrap_future(self._submit(self._load))

    def memory_report(self) -> dict[str, int]:
        """Bytes of the KV cache, compute buffers and logits arrays this model holds (zeros when not loaded)."""
        return footprint.context_report(self._llm)

    # --- prompts ----------------------------------------------------------------------------

    def render(self, messages: Sequence[ChatMessage], prefix: str = "") -> str:
        """The prompt text for these messages, ending where the assistant's reply starts."""
        result = self._formatter(messages=[m.as_dict() for m in messages])
        return str(result.prompt) + prefix

    def _tokenize(self, text: str) -> list[int]:
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _piece(self, token: int) -> bytes:
        """The bytes of one token (cached: the same few thousand tokens come back all the time)."""
        piece = self._pieces.get(token)
        if piece is None:
            import ctypes

            import llama_cpp

            size = 64
            while True:
                buffer = ctypes.create_string_buffer(size)
                n = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, size, 0, False)
                if n >= 0:
                    piece = self._pieces[token] = buffer.raw[:n]
                    break
                size = -n  # too small: llama.cpp says how much it needs
        return piece

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """How many tokens the rendered prompt takes (loads the model if needed)."""

        def count() -> int:
            self._load()
            return len(self._tokenize(self.render(messages)))

        return int(self._submit(count).result())

    def _grammar(self, schema: dict[str, Any]) -> Any:
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema)  # key order kept: "name" before "arguments" reads naturally to a model
        if key not in self._grammars:
            grammar = LlamaGrammar.from_json_schema(key, verbose=False)
            # llama.cpp's JSON grammar lets raw control characters into strings; JSON does not, and
            # a small model uses that to wander off into newlines inside a string until max_tokens.
            grammar._grammar = grammar._grammar.replace('char ::= [^"\\\\]', 'char ::= [^"\\\\\\x00-\\x1F]')
            self._grammars[key] = grammar
        return self._grammars[key]

    # --- prompt states (appliance/llm/prompt_state.py) ---------------------------------------

    def _prefix_tokens(self, messages: Sequence[ChatMessage]) -> list[int]:
        return stable_prefix(lambda ms: self._tokenize(self.render(ms)), messages)

    async def warm_prefix(self, messages: Sequence[ChatMessage]) -> dict[str, Any]:
        """Ready the stable prefix of these messages in the KV cache: its saved state, else read and save it.

        Returns ``{"state": "loaded"|"built"|"off", "tokens": N, "seconds": s}``; "off" without a state
        folder (llm.prompt_state false) or messages.
        """
        if self._states.files is None or not messages:
            self._states.prefix = "off"
            return {"state": "off", "tokens": 0, "seconds": 0.0}
        self._states.prefix = "building"

        def warm() -> dict[str, Any]:
            self._load()
            tokens = self._prefix_tokens(messages)
            if not tokens or len(tokens) >= self.context_tokens - 1:
                self._states.prefix = "off"
                return {"state": "off", "tokens": len(tokens), "seconds": 0.0}
            try:
                result = self._states.warm(self._llm, tokens, model_identity(self.path, self._llm))
            except (RuntimeError, OSError) as exc:  # llama.cpp failed to read it, or the model file went away
                raise ModelError(
                    f"the prompt prefix could not be prepared ({exc})", fix="check the model file and the log"
                ) from None
            log.info("prompt prefix %s: %d tokens in %.2f s", result["state"], len(tokens), result["seconds"])
            return result

        try:
            return dict(await asyncio.wrap_future(self._submit(warm)))
        except BaseException:
            self._states.prefix = "none"
            raise

    def prompt_cache_stats(self) -> dict[str, Any]:
        """The prompt-state cache: the prefix's state, RAM used and entries (see prompt_state.py)."""
        return self._states.stats()

    # --- generation -------------------------------------------------------------------------

    def _generate(self, request: GenerationRequest, submitted: float) -> Generation:
        import llama_cpp
        import numpy as np

        started = time.perf_counter()
        if request.cancel.is_set():
            raise Cancelled("cancelled before it started")
        self._load()
        llm = self._llm
        decode_threads, batch_threads = self._threads.choose()
        if decode_threads != self.threads_used:
            llama_cpp.llama_set_n_threads(llm.ctx, decode_threads, batch_threads)
            self.threads_used = decode_threads
        prompt = self._tokenize(self.render(request.messages, request.prefix))
        budget = self.context_tokens - len(prompt)
        if budget < 1:
            raise ContextOverflow(
                f"the prompt takes {len(prompt)} tokens, more than the {self.context_tokens}-token context",
                fix="shorten the message, lower agent.history_messages or raise llm.context_tokens",
            )
        max_tokens = min(request.max_tokens, budget)
        self._states.before_read(llm, prompt)  # keep what this prompt replaces; put back a better start
        cached = common_prefix(llm._input_ids.tolist(), prompt) if llm.n_tokens else 0
        if request.seed is not None:
            llm.set_seed(request.seed)
        temp = request.temperature
        tokens = llm.generate(
            prompt,
            temp=temp,
            top_k=40 if temp > 0 else 1,
            top_p=0.95,
            min_p=0.05,
            repeat_penalty=request.repeat_penalty,
            grammar=self._grammar(request.json_schema) if request.json_schema else None,
        )
        stops = _StopMatcher([*request.stop, *self.extra_stop])
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        ctx = llm.ctx
        n_vocab = llm.n_vocab()
        deadline = started + self.timeout_s
        text, emitted = "", 0
        logprobs: list[float] = []
        entropies: list[float] = []
        finish: FinishReason = "length"
        first_at = last_at = 0.0
        for token in tokens:
            now = time.perf_counter()
            if not first_at:
                first_at = now
            last_at = now
            if token in self._eog:
                finish = "stop"
                break
            # The logits the token was sampled from; the model's own, before temperature or grammar.
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
            top = logits.max()
            weights = np.exp(logits - top)
            total = weights.sum()
            logprobs.append(float(logits[token] - top - np.log(total)))
            probs = weights / total
            entropies.append(float(-(probs * np.log(probs + 1e-12)).sum()))
            text += decoder.decode(self._piece(token))
            safe, _held, stopped = stops.split(text)
            if stopped:
                text = safe
                finish = "stop"
            if request.on_token and len(safe) > emitted:
                request.on_token(safe[emitted:])
                emitted = len(safe)
            if stopped:
                break
            if len(logprobs) >= max_tokens:
                break
            if request.should_stop is not None and request.should_stop(logprobs):
                finish = "aborted"
                break
            if request.cancel.is_set():
                finish = "cancelled"
                break
            if now > deadline:
                finish = "timeout"
                break
        tokens.close()
        if finish == "length" and len(logprobs) < request.max_tokens:
            log.info("reply cut at the end of the context window (%d tokens)", self.context_tokens)
        text += decoder.decode(b"", final=True)
        if request.on_token and finish == "stop" and len(text) > emitted:
            request.on_token(text[emitted:])
        finished = time.perf_counter()
        return Generation(
            text=text,
            finish_reason=finish,
            prompt_tokens=len(prompt),
            completion_tokens=len(logprobs),
            cached_tokens=cached,
            queued_s=started - submitted,
            ttft_s=(first_at or finished) - started,
            decode_s=last_at - first_at if first_at else 0.0,
            total_s=finished - started,
            token_logprobs=logprobs,
            token_entropies=entropies,
        )

    def generate_sync(self, request: GenerationRequest) -> Generation:
        """Run one generation from a thread that is not the event loop."""
        submitted = time.perf_counter()
        return self._submit(lambda: self._generate(request, submitted)).result()

    async def generate(self, request: GenerationRequest) -> Generation:
        """Run one generation; cancelling the awaiting task stops it at the next token.

        ``on_token`` is called on the event loop's thread (never after a cancel), so channels can
        write to sockets and terminals from it without locks.
        """
        submitted = time.perf_counter()
        if request.on_token is not None:
            request = dataclasses.replace(request, on_token=on_the_loop(request.on_token, request.cancel))
        future = self._submit(lambda: self._generate(request, submitted))
        try:
            return await await_worker(future)
        except asyncio.CancelledError:
            request.cancel.set()
            future.cancel()  # still queued: never runs
            raise


def threads_policy(decode: int | str, batch: int | str) -> threads.ThreadPolicy:
    """The thread policy for these config values."""
    return threads.ThreadPolicy(
        decode=None if decode == "auto" else int(decode),
        batch=None if batch == "auto" else int(batch),
    )
