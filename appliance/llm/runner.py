"""The model runner: the child process that owns every llama.cpp object (chat model, embedding model, prompt states).

llama.cpp is native code, and native code can crash: an AMX kernel of llama-cpp-python 0.3.36
segfaults at the first generation on Intel CPUs that have AMX (see cpu.py). Run inside the daemon,
such a crash took the web page, the chats, schedules and device control down with it; run here, it
costs the answer being computed, and the daemon (runner_client.py) starts a new runner. Ollama and
LocalAI run llama.cpp the same way.

The daemon starts ``python -m appliance.llm.runner FD`` with one end of a socket pair and speaks to it
with pickled tuples over :class:`multiprocessing.connection.Connection` (the daemon's own child, so
pickle is no trust boundary). The objects it hosts are the in-process classes, unchanged:
:class:`~appliance.llm.local.LocalModel` (one worker thread and queue: llama.cpp is not re-entrant) and
:class:`~appliance.llm.embeddings.LocalEmbedder`. Requests run on a small thread pool, so an embedding
or a status question never waits behind a chat reply. Messages::

    daemon -> runner  ("open", rid, oid, kind, params)    kind: chat | embedder (params: the constructor's)
                      ("call", rid, oid, method, args)    a method of CALLS[kind]
                      ("generate", rid, oid, wire)        a GenerationRequest's data (no callables)
                      ("cancel", rid) ("abort", rid)      stop a generation: cancelled / aborted
                      ("close", rid, oid) ("info", rid)
    runner -> daemon  ("ok", rid, value) ("err", rid, module, class, message, fix)
                      ("text", rid, piece)                streamed reply text
                      ("lp", rid, logprob)                each token's log-probability (routing's early abort)

Measured on this 2-core x86 machine with the packaged model: a token event costs ~15 us against ~12 ms a
token; the runner process itself (Python, llama_cpp, numpy) is in the README's Memory table.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import resource
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from appliance.errors import ModelError, PicoagentError
from appliance.llm.local import apply_repack

log = logging.getLogger("appliance.llm.runner")

# What the daemon may call on each kind of object (nothing else is reachable by name).
CALLS = {
    "chat": {"load", "count_tokens", "warm_prefix_sync", "prompt_cache_stats", "memory_report", "status"},
    "embedder": {"load", "embed", "embed_query_uncached", "embed_queries", "memory_report", "status"},
}
# PICOAGENT_RUNNER_FAULT=segv: the runner kills itself with SIGSEGV after the first token of every
# generation, as the AMX crash does. =slow: each token takes a further 0.2 s, so a reply outlasts a test's
# client on any CPU. Only for tests (tests/test_runner.py, tests/test_daemon.py); never set it.
FAULT = "PICOAGENT_RUNNER_FAULT"


def system_features() -> list[str]:
    """The CPU features llama.cpp's backend says it uses ("AVX2", "AMX_INT8", "REPACK", ...)."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    found = []
    for part in info.replace("|", "\n").splitlines():
        name, _, value = part.partition("=")
        if value.strip() == "1":
            found.append(name.split(":")[-1].strip())
    return found


class ChatHost:
    """A LocalModel as the runner serves it: the blocking calls the daemon makes through the pipe."""

    def __init__(self, params: dict[str, Any]) -> None:
        from appliance.llm.local import LocalModel

        params = dict(params)
        path = Path(params.pop("path"))
        if params.get("state_dir"):
            params["state_dir"] = Path(params["state_dir"])
        self.model = LocalModel(path, **params)

    def load(self) -> dict[str, Any]:
        """Load the chat model (on its worker thread); its status."""
        self.model._submit(self.model._load).result()
        return self.status()

    def count_tokens(self, messages: list[Any]) -> int:
        """Tokens of the rendered prompt."""
        return self.model.count_tokens(messages)

    def warm_prefix_sync(self, messages: list[Any]) -> dict[str, Any]:
        """LocalModel.warm_prefix, waited for."""
        import asyncio

        return asyncio.run(self.model.warm_prefix(messages))

    def prompt_cache_stats(self) -> dict[str, Any]:
        """The prompt-state cache's figures."""
        return self.model.prompt_cache_stats()

    def memory_report(self) -> dict[str, int]:
        """Bytes of its llama.cpp buffers."""
        return self.model.memory_report()

    def status(self) -> dict[str, Any]:
        """Loaded, threads, load time, queue."""
        m = self.model
        return {"loaded": m.loaded, "threads_used": m.threads_used, "load_s": m.load_s, "queue_depth": m.queue_depth}

    def close(self) -> None:
        """Free it."""
        self.model.close()


class EmbedderHost:
    """A LocalEmbedder as the runner serves it (on the chat model's worker when it is the chat model's own)."""

    def __init__(self, params: dict[str, Any], worker: ChatHost | None) -> None:
        from appliance.llm.embeddings import LocalEmbedder

        params = dict(params)
        path = Path(params.pop("path"))
        self.embedder = LocalEmbedder(path, worker=worker.model if worker is not None else None, **params)

    def load(self) -> dict[str, Any]:
        """Load the embedding model; its status."""
        self.embedder.load()
        return self.status()

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors of stored texts."""
        return self.embedder.embed(texts)

    def embed_query_uncached(self, text: str) -> list[float]:
        """The vector of a query (the daemon's side keeps the recent ones)."""
        return self.embedder._call(lambda: self.embedder._embed([self.embedder.query_prefix + text]))[0]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Vectors of many queries."""
        prefix = self.embedder.query_prefix
        batch = [prefix + t for t in texts]
        return self.embedder._call(lambda: self.embedder._embed(batch)) if batch else []

    def memory_report(self) -> dict[str, int]:
        """Bytes of its llama.cpp buffers."""
        return self.embedder.memory_report()

    def status(self) -> dict[str, Any]:
        """Loaded, load time, counts."""
        e = self.embedder
        return {"loaded": e.loaded, "load_s": e.load_s, "embedded": e.embedded, "truncated": e.truncated}

    def close(self) -> None:
        """Free it."""
        self.embedder.close()


class Runner:
    """The runner's side of the pipe: hosts objects by id, answers requests on a thread pool."""

    def __init__(self, conn: Connection, repack: dict[str, Any]) -> None:
        self.conn = conn
        self.repack = repack
        self.objects: dict[str, ChatHost | EmbedderHost] = {}
        self.broken: dict[str, PicoagentError] = {}  # objects that could not be made, and why
        self.running: dict[int, tuple[threading.Event, threading.Event]] = {}  # rid -> (cancel, abort)
        self._send_lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="runner")
        self.fault = os.environ.get(FAULT, "")

    def send(self, *message: Any) -> None:
        """Send one message to the daemon (from any thread)."""
        with self._send_lock:
            self.conn.send(message)

    def serve(self) -> None:
        """Answer until the daemon closes its end (or says exit)."""
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                return
            kind = message[0]
            if kind == "exit":
                return
            if kind in ("cancel", "abort"):
                events = self.running.get(message[1])
                if events is not None:
                    events[0 if kind == "cancel" else 1].set()
                continue
            if kind == "open":  # at once, in order: the requests sent after it use it
                self._open(*message[2:])
                continue
            if kind == "generate":
                cancel, abort = threading.Event(), threading.Event()
                self.running[message[1]] = (cancel, abort)
            self._pool.submit(self._answer, message)

    def _open(self, oid: str, what: str, params: dict[str, Any]) -> None:
        """Make a hosted object (cheap: nothing loads); a failure is kept and raised by its first call."""
        self.broken.pop(oid, None)
        try:
            if what == "chat":
                self.objects[oid] = ChatHost(params)
            else:
                worker = self.objects.get(params.pop("worker", "") or "")
                self.objects[oid] = EmbedderHost(params, worker if isinstance(worker, ChatHost) else None)
        except PicoagentError as exc:
            self.broken[oid] = exc

    def _answer(self, message: tuple[Any, ...]) -> None:
        rid = message[1]
        try:
            value = self._handle(message)
        except PicoagentError as exc:
            self.send("err", rid, type(exc).__module__, type(exc).__qualname__, exc.message, exc.fix)
        except Exception as exc:  # anything else reaches the daemon as a ModelError naming it
            log.exception("runner: %s failed", message[0])
            self.send("err", rid, ModelError.__module__, "ModelError", f"{type(exc).__name__}: {exc}", None)
        else:
            self.send("ok", rid, value)
        finally:
            self.running.pop(rid, None)

    def _handle(self, message: tuple[Any, ...]) -> Any:
        kind = message[0]
        if kind == "info":
            import llama_cpp.llama_cpp as lib

            from appliance.llm import footprint

            return {
                "pid": os.getpid(),
                "repack": self.repack,
                "llama_features": system_features(),
                "buffer_types": sorted(footprint.buffer_types),
                "use_extra_bufts": bool(lib.llama_model_default_params().use_extra_bufts),  # what models load with
            }
        if kind == "close":
            host = self.objects.pop(message[2], None)
            if host is not None:
                host.close()
            return None
        if kind == "generate":
            return self._generate(message[1], message[2], message[3])
        if kind == "call":
            _, _, oid, method, args = message
            if oid in self.broken:
                raise self.broken[oid]
            host = self.objects[oid]
            what = "chat" if isinstance(host, ChatHost) else "embedder"
            if method not in CALLS[what]:
                raise ModelError(f"the runner has no {what} call {method!r}")
            return getattr(host, method)(*args)
        raise ModelError(f"the runner does not know the request {kind!r}")

    def _generate(self, rid: int, oid: str, wire: dict[str, Any]) -> Any:
        from appliance.llm.base import GenerationRequest

        if oid in self.broken:
            raise self.broken[oid]
        host = self.objects[oid]
        assert isinstance(host, ChatHost)
        cancel, abort = self.running[rid]
        stream, watch = wire.pop("stream"), wire.pop("watch")

        def on_token(piece: str) -> None:
            self.send("text", rid, piece)

        def should_stop(logprobs: Any) -> bool:
            if self.fault == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)  # see FAULT: a native crash in the middle of a reply
            if self.fault == "slow":
                time.sleep(0.2)  # see FAULT: a reply that cannot finish before the test's client gives up
            if watch:
                self.send("lp", rid, logprobs[-1])
            return abort.is_set()

        request = GenerationRequest(
            **wire, cancel=cancel, on_token=on_token if stream else None, should_stop=should_stop
        )
        return host.model.generate_sync(request)


def main(argv: list[str] | None = None) -> int:
    """``python -m appliance.llm.runner FD REPACK LOG_LEVEL``: serve the daemon on file descriptor FD."""
    args = sys.argv[1:] if argv is None else argv
    fd, repack_json, level = int(args[0]), args[1], args[2] if len(args) > 2 else "WARNING"
    import json

    logging.basicConfig(level=level.upper(), format="runner: %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    # The daemon decides when its runner stops: Ctrl-C (SIGINT to the terminal's process group) and systemd's
    # SIGTERM (to every process of the unit) reach both; the daemon then says "exit", or its end closes the pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # No core file: a crash of llama.cpp is expected here (the daemon restarts the runner), and a core of the
    # runner (its models' pages included) would cost the SD card hundreds of MB each time.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    repack = json.loads(repack_json)
    apply_repack(bool(repack["repack"]))
    from appliance.llm.footprint import keep_big_blocks_returnable

    keep_big_blocks_returnable()  # before any model is loaded (see footprint.py)
    conn = Connection(fd)
    Runner(conn, repack).serve()
    os._exit(0)  # the model threads hold no state worth a clean shutdown; the daemon is waiting


if __name__ == "__main__":
    sys.exit(main())
