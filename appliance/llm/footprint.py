"""Where the daemon's memory goes: the process's figures from /proc and what each llama.cpp context holds.

A llama.cpp context holds three kinds of memory besides the model's weights (which are mapped from the
.gguf file, so they count as file pages the kernel can drop, shared with any other process mapping it):
the KV cache (``n_ctx`` cells × layers × K and V width, f16 or q8_0), the compute buffer (the worst-case
graph for one micro-batch of ``n_ubatch`` tokens, logits for every one of them included) and the output
buffer (logits of the tokens asked for: one per step here). llama.cpp says the sizes it allocated in its
log while the context is made; :func:`capture` collects those lines on the loading thread, so a report
costs nothing on request. The process's side (RSS, PSS, anonymous, the .gguf mappings) is read from
/proc/self/smaps_rollup and /proc/self/smaps: about 10 ms with a model loaded, so a report is kept 5 s.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIB = 1024 * 1024

# llama.cpp's log lines that say what it allocated (llama_kv_cache, llama_context, sched_reserve).
_SIZES = {
    "kv_cache": re.compile(r"KV buffer size =\s*([\d.]+) MiB"),
    "output": re.compile(r"output buffer size =\s*([\d.]+) MiB"),
    "compute": re.compile(r"compute buffer size =\s*([\d.]+) MiB"),
}


@dataclass
class BufferSizes:
    """Bytes llama.cpp allocated for one context, as its log said while making it."""

    kv_cache: int = 0
    output: int = 0
    compute: int = 0
    lines: list[str] = field(default_factory=list)

    def feed(self, text: str) -> None:
        """Take one log line; a size line adds to its kind (one line per backend buffer)."""
        for kind, pattern in _SIZES.items():
            match = pattern.search(text)
            if match:
                if kind == "compute" and "matches expectation" in text:
                    return  # the destructor's check, not a new buffer
                setattr(self, kind, getattr(self, kind) + int(float(match.group(1)) * MIB))
                self.lines.append(text.strip())
                return


_active = threading.local()
_sizes: weakref.WeakKeyDictionary[Any, BufferSizes] = weakref.WeakKeyDictionary()


_BUFFER_TYPE = re.compile(r"(\S+) model buffer size =")
buffer_types: set[str] = set()  # where llama.cpp put model weights in this process: CPU_Mapped, CPU_REPACK, AMX, ...


def llama_line(text: str) -> None:
    """Called with each llama.cpp log line (any level): feeds the capture running on this thread, if any."""
    found = _BUFFER_TYPE.search(text)
    if found:
        buffer_types.add(found.group(1))
    sizes = getattr(_active, "sizes", None)
    if sizes is not None:
        sizes.feed(text)


@contextlib.contextmanager
def capture() -> Iterator[BufferSizes]:
    """Collect the buffer sizes llama.cpp logs on this thread while the block runs (a context being made)."""
    sizes = BufferSizes()
    previous = getattr(_active, "sizes", None)
    _active.sizes = sizes
    try:
        yield sizes
    finally:
        _active.sizes = previous


def remember(llm: Any, sizes: BufferSizes) -> None:
    """Keep the sizes captured while ``llm`` was made, for as long as it lives."""
    _sizes[llm] = sizes


def buffers(llm: Any) -> BufferSizes:
    """The sizes captured for ``llm`` (zeros when none were: a model not made through open_llama)."""
    return _sizes.get(llm) or BufferSizes() if llm is not None else BufferSizes()


def context_report(llm: Any) -> dict[str, int]:
    """Bytes one llama-cpp-python ``Llama`` holds besides its mapped weights (zeros for None)."""
    if llm is None:
        return {"kv_cache_bytes": 0, "compute_bytes": 0, "logits_bytes": 0}
    sizes = buffers(llm)
    scores = getattr(llm, "scores", None)
    return {
        "kv_cache_bytes": sizes.kv_cache,
        "compute_bytes": sizes.compute,
        # llama.cpp's output buffer plus llama-cpp-python's own array of logits (one row unless logits_all)
        "logits_bytes": sizes.output + (int(scores.nbytes) if scores is not None else 0),
    }


# --- the process ------------------------------------------------------------------------------------


def smaps_rollup(pid: int | str = "self") -> dict[str, int]:
    """The process's totals from /proc/PID/smaps_rollup, in bytes (``Rss``, ``Pss``, ``Anonymous``, ...)."""
    out: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return out
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "kB":
            out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return out


def mapped_files(suffix: str = ".gguf", pid: int | str = "self") -> dict[str, dict[str, int]]:
    """``Rss`` and ``Pss`` in bytes of each mapped file whose name ends with ``suffix``, from /proc/PID/smaps.

    Two more entries: ``[heap]`` (the main malloc arena) and ``[pymalloc]`` (the anonymous mappings of
    exactly 1 MiB: CPython's small-object arenas).
    """
    found: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    anonymous = False
    try:
        with open(f"/proc/{pid}/smaps", encoding="utf-8", errors="replace") as f:
            for line in f:
                first = line.split(maxsplit=1)[0] if line.strip() else ""
                if "-" in first and not first.endswith(":"):  # a mapping's header: address range, ..., path
                    parts = line.split(maxsplit=5)
                    path = parts[5].strip() if len(parts) > 5 else ""
                    anonymous = not path
                    wanted = path.endswith(suffix) or path == "[heap]"
                    current = found.setdefault(path, {"Rss": 0, "Pss": 0}) if wanted else None
                elif anonymous and first == "Size:":
                    anonymous = line.split()[1] == "1024"
                    if anonymous:
                        current = found.setdefault("[pymalloc]", {"Rss": 0, "Pss": 0})
                elif current is not None and first in ("Rss:", "Pss:"):
                    current[first[:-1]] += int(line.split()[1]) * 1024
    except OSError:
        return {}
    return found


_last: tuple[float, tuple[int, int], dict[str, float]] | None = None
KEEP_S = 5.0  # reading /proc/self/smaps takes ~10 ms with a model loaded: a status page polling often reuses it


def process_memory(model: Any, embedder: Any = None) -> dict[str, float]:
    """The /api/status ``process_memory`` document (kept for ``KEEP_S`` seconds per model and embedder)."""
    global _last
    key = (id(model), id(embedder))
    now = time.monotonic()
    if _last is not None and _last[1] == key and now - _last[0] < KEEP_S:
        return dict(_last[2])
    report = measure_process_memory(model, embedder)
    _last = (now, key, report)
    return dict(report)


def measure_process_memory(model: Any, embedder: Any = None) -> dict[str, float]:
    """This process's memory and what holds it, in MiB, measured now.

    ``model`` and ``embedder`` are asked for ``memory_report()`` when they have one (a local model);
    ``model_map_mib`` is the chat model's .gguf mapping and ``embedding_mib`` the embedder's mapping plus
    its buffers. The buffers are what llama.cpp allocated: pages of them never written (KV cells not yet
    filled, the worst-case graph's logits) are not resident. ``python_heap_mib`` is the resident main
    malloc arena plus CPython's small-object arenas.
    """
    rollup = smaps_rollup()
    files = mapped_files()
    # A model served by the model runner holds its buffers there: they are the runner's (runner_memory), and
    # were shown here as the daemon's (a README walk)
    report = _report(model) if getattr(model, "runner", None) is None else {}
    embedding = _report(embedder) if getattr(embedder, "runner", None) is None else {}
    model_path = str(getattr(model, "path", "") or "")
    embedder_path = str(getattr(embedder, "path", "") or "") if embedder is not None else ""
    model_map = files.get(model_path, {}).get("Pss", 0) if model_path else 0
    embedding_map = files.get(embedder_path, {}).get("Pss", 0) if embedder_path and embedder_path != model_path else 0
    embedding_buffers = sum(embedding.get(k, 0) for k in ("kv_cache_bytes", "compute_bytes", "logits_bytes"))
    anon = rollup.get("Anonymous", 0)
    heap = files.get("[heap]", {}).get("Rss", 0) + files.get("[pymalloc]", {}).get("Rss", 0)
    return {
        "rss_mib": _mib(rollup.get("Rss", 0)),
        "pss_mib": _mib(rollup.get("Pss", 0)),
        "anon_mib": _mib(anon),
        "model_map_mib": _mib(model_map),
        "kv_cache_mib": _mib(report.get("kv_cache_bytes", 0)),
        "compute_mib": _mib(report.get("compute_bytes", 0)),
        "logits_mib": _mib(report.get("logits_bytes", 0)),
        "embedding_mib": _mib(embedding_map + embedding_buffers),
        "python_heap_mib": _mib(heap),
    }


def runner_memory(runner: Any, model: Any = None, embedder: Any = None) -> dict[str, float] | None:
    """The model runner process's memory in MiB (None when there is no runner or it is not running).

    The /api/status ``runner_memory`` document: ``rss_mib``, ``pss_mib``, ``anon_mib``, the PSS of every
    .gguf file it maps (``maps_mib``, by file name), and the llama.cpp buffers of the ``model`` and
    ``embedder`` it serves (``kv_cache_mib``, ``compute_mib``, ``logits_mib``, ``embedding_mib``: the
    buffers only, their files are in ``maps_mib``). Read from /proc/PID: ~10 ms, kept ``KEEP_S`` seconds.
    """
    global _last_runner
    pid = getattr(runner, "pid", None)
    if not pid:
        return None
    now = time.monotonic()
    if _last_runner is not None and _last_runner[1] == pid and now - _last_runner[0] < KEEP_S:
        return dict(_last_runner[2])
    rollup = smaps_rollup(pid)
    if not rollup:
        return None
    maps = {
        Path(path).name: _mib(sizes["Pss"]) for path, sizes in mapped_files(pid=pid).items() if path.endswith(".gguf")
    }
    report: dict[str, Any] = {
        "pid": pid,
        "rss_mib": _mib(rollup.get("Rss", 0)),
        "pss_mib": _mib(rollup.get("Pss", 0)),
        "anon_mib": _mib(rollup.get("Anonymous", 0)),
        "maps_mib": maps,
    }
    served = _report(model) if getattr(model, "runner", None) is runner else {}
    embedding = _report(embedder) if getattr(embedder, "runner", None) is runner else {}
    report |= {
        "kv_cache_mib": _mib(served.get("kv_cache_bytes", 0)),
        "compute_mib": _mib(served.get("compute_bytes", 0)),
        "logits_mib": _mib(served.get("logits_bytes", 0)),
        "embedding_mib": _mib(sum(embedding.get(k, 0) for k in ("kv_cache_bytes", "compute_bytes", "logits_bytes"))),
    }
    _last_runner = (now, pid, report)
    return dict(report)


_last_runner: tuple[float, int, dict[str, Any]] | None = None


def _report(thing: Any) -> dict[str, int]:
    memory_report = getattr(thing, "memory_report", None)
    return memory_report() if callable(memory_report) else {}


def _mib(n: int) -> float:
    return round(n / MIB, 1)


# --- the settings that size a chat context -----------------------------------------------------------

KV_TYPES = ("auto", "f16", "q8_0")
AUTO_KV = "q8_0"  # what kv_type auto means (measured: see the README's Memory section)
AUTO_UBATCH = 64  # micro-batch for ubatch_size None (measured likewise)


def resolved(kv_type: str, batch_size: int, ubatch_size: int | None) -> tuple[str, int]:
    """The KV cache type and micro-batch a chat context gets for these settings ("auto" and None resolved)."""
    return (AUTO_KV if kv_type == "auto" else kv_type), min(batch_size, ubatch_size or AUTO_UBATCH)


def context_params(kv_type: str, batch_size: int, ubatch_size: int | None) -> dict[str, Any]:
    """llama-cpp-python keyword arguments for a chat context: KV cache type and micro-batch size.

    A q8_0 V cache needs flash attention on the CPU backend; flash attention also spares the compute
    buffer the n_ctx × n_ubatch attention matrix of every head.
    """
    import llama_cpp

    kind, ubatch = resolved(kv_type, batch_size, ubatch_size)
    params: dict[str, Any] = {"n_ubatch": ubatch}
    if kind == "q8_0":
        params.update(flash_attn=True, type_k=llama_cpp.GGML_TYPE_Q8_0, type_v=llama_cpp.GGML_TYPE_Q8_0)
    elif kind == "f16":
        params.update(type_k=llama_cpp.GGML_TYPE_F16, type_v=llama_cpp.GGML_TYPE_F16)
    else:
        raise ValueError(f"unknown KV cache type {kv_type!r} (expected one of {', '.join(KV_TYPES)})")
    return params


def drop_logits_rows(llm: Any) -> None:
    """Give llama-cpp-python's ``scores`` array one row instead of ``n_batch`` (n_vocab floats each).

    It is only written with ``logits_all`` (never here: each step's logits are read from llama.cpp
    itself), but ``save_state`` copies it and ``load_state`` zeroes it whole: 48 MiB touched at n_batch
    256 with a 49k vocabulary. One row keeps both working.
    """
    import numpy as np

    if getattr(llm, "_logits_all", False):
        return
    llm.scores = np.zeros((1, llm.n_vocab()), dtype=np.single)


MADV_DONTNEED = 4  # <sys/mman.h> on Linux


def release_embedding_logits(llm: Any) -> int:
    """Hand back the pages of the logits an embedding context never writes; the bytes released (0: none).

    llama.cpp sizes an embedding context's output buffer for ``n_seq_max`` outputs of logits *and*
    embeddings, and zero-fills it when it allocates it, so the logits part is resident though pooled
    embeddings never touch it: 15 MiB for MiniLM (128 outputs × 30,522 vocabulary × 4 bytes). The
    buffer is cleared only when it is (re)allocated, which its first size already covers (``n_batch`` =
    ``n_seq_max``), so the pages stay out. ``MADV_DONTNEED`` on private anonymous memory only drops the
    zeros: a page read again is a zero page, one written is allocated again, so nothing can go wrong.
    """
    import ctypes
    import mmap

    import llama_cpp

    pointer = ctypes.cast(llama_cpp.llama_get_logits(llm.ctx), ctypes.c_void_p).value
    if not pointer:
        return 0
    size = int(llama_cpp.llama_n_seq_max(llm.ctx)) * int(llm.n_vocab()) * ctypes.sizeof(ctypes.c_float)
    page = mmap.PAGESIZE
    start = (pointer + page - 1) // page * page
    end = (pointer + size) // page * page
    if end <= start:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if libc.madvise(start, end - start, MADV_DONTNEED) != 0:
        return 0
    return end - start


# --- the C heap ----------------------------------------------------------------------------------------

M_MMAP_THRESHOLD = -3  # glibc's <malloc.h>
MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value


def keep_big_blocks_returnable() -> bool:
    """Pin glibc's mmap threshold at 128 KiB, so big blocks are mapped on their own and given back when freed.

    glibc starts there but raises the threshold to the size of each mapped block that is freed (up to
    32 MiB): after a few turns, the model's KV states, prompt reads and embeddings (hundreds of KiB to
    tens of MiB each, on the model's worker threads) come from those threads' heap arenas instead, and
    freed they stay resident there. Setting it disables that. Measured after 20 web chats with the
    packaged model: anonymous memory 201 -> 142 MiB (MALLOC_ARENA_MAX=2 on top: no change). False without
    glibc (nothing to do).
    """
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (ImportError, OSError, AttributeError):
        return False
