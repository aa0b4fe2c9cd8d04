"""Prompt states: the KV cache of a prompt prefix kept in RAM (between side jobs) and on disk (across restarts).

llama.cpp keeps one KV cache. A fact extraction, the heartbeat or a task between two chat turns replaces
the chat's prompt in it, and the next chat turn reads its whole system prompt again; a restart starts with
nothing. Here a prompt's KV contents are copied out of sequence 0 with ``llama_state_seq_get_data`` and
put back with ``llama_state_seq_set_data``, together with the token ids they hold, so that
llama-cpp-python's own prefix match (``Llama.generate``) reads only what follows.

Three mechanisms were measured on this 2-core x86 machine with SmolLM2-135M (f16 KV, 500-token prefix;
the machine shared with three other test runs, where a cold read of those 500 tokens took 2.5-16 s):

- (a) per-sequence state copy (chosen): copy out 6-12 ms, put back 1.1-1.5 ms, 8.3 MB in RAM
  (16.6 KB per token; half that with a q8_0 KV cache). Next-token logits identical to a cold read.
- (b) a parking sequence in the same KV cache (``n_seq_max=2, kv_unified``, ``llama_memory_seq_cp``):
  park 50-60 us, restore 30 us, no RAM, but the parked cells stay taken (500 of a 2048-token context, so
  a long chat would no longer fit) and llama-cpp-python's ``Llama`` opens a context with one sequence only
  (``n_seq_max``/``kv_unified`` are set for embedding models alone): it would need a context of our own
  making beside ``Llama``'s.
- (c) ``Llama.save_state``/``load_state`` (what ``LlamaRAMCache`` stores): 120-180 ms to save, 14-135 ms
  to load, 58.6 MB per entry: the whole context state plus a copy of the 256 x 49,152 score array.

In the appliance (tests/bench/prompt_state.py): the first reply after restarting ``picoagent serve`` with
a 766-token prompt, 747 tokens restored from the file, came in 0.13 s instead of 3.85 s; a chat turn right
after a fact extraction in 0.077 s, as fast as one after another chat turn (1.85 s without the RAM cache).

On disk a state file is a header line (JSON: key, token count, payload length and sha256) and the
payload, written to a temporary file and renamed into place. A file whose header, length or checksum
does not match is deleted and built again; llama.cpp never sees bytes that were not written by it.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance.fileio import fsync_dir
from appliance.llm.base import ChatMessage

log = logging.getLogger(__name__)

MAGIC = b"picoagent-kv-state 1\n"
SUFFIX = ".kvstate"
MIN_SNAPSHOT_TOKENS = 64  # fewer would be re-read in well under a second: not worth a copy
MIN_GAIN_TOKENS = 16  # a restore must save at least this many tokens over what the KV cache holds


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass(frozen=True)
class SeqState:
    """The KV contents of sequence 0 and the tokens they hold."""

    tokens: tuple[int, ...]
    data: bytes

    @property
    def nbytes(self) -> int:
        """RAM this state takes."""
        return len(self.data) + 8 * len(self.tokens)


def snapshot(llm: Any) -> SeqState:
    """Copy sequence 0 of this ``Llama`` out of its KV cache."""
    import llama_cpp

    ctx = llm.ctx
    size = llama_cpp.llama_state_seq_get_size(ctx, 0)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
    return SeqState(tuple(int(t) for t in llm._input_ids), ctypes.string_at(buffer, written))


def restore(llm: Any, state: SeqState) -> bool:
    """Put a state into sequence 0 (what was there is dropped); False when llama.cpp refuses it."""
    import llama_cpp

    llm._ctx.kv_cache_seq_rm(0, -1, -1)
    buffer = (ctypes.c_uint8 * len(state.data)).from_buffer_copy(state.data)
    ok = llama_cpp.llama_state_seq_set_data(llm.ctx, buffer, len(state.data), 0) == len(state.data)
    n = len(state.tokens) if ok else 0
    if not ok:
        llm._ctx.kv_cache_seq_rm(0, -1, -1)
    llm.input_ids[:n] = state.tokens[:n]
    llm.n_tokens = n
    llm._requires_eval = True  # the logits are not those of the last token: generate replays one
    return ok


def trim(llm: Any, keep: int) -> None:
    """Drop the KV cache's tokens from position ``keep`` on."""
    if llm.n_tokens > keep:
        llm._ctx.kv_cache_seq_rm(0, keep, -1)
        llm.n_tokens = keep
        llm._requires_eval = True


class StateCache:
    """Prompt states in RAM, least recently used dropped first, bounded in bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0  # RAM the states take (kept as a sum: read from other threads for /api/status)
        self._entries: OrderedDict[tuple[int, ...], SeqState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def fits(self, n_bytes: int) -> bool:
        """Whether a state of this size can be kept at all."""
        return 0 < n_bytes <= self.max_bytes

    def put(self, state: SeqState) -> None:
        """Keep a state; one whose tokens start another's replaces it (it holds all the other holds)."""
        if not self.fits(state.nbytes):
            return
        for tokens in list(self._entries):
            if tokens[: len(state.tokens)] == state.tokens:
                self._entries.move_to_end(tokens)
                return  # already covered by a longer one
            if state.tokens[: len(tokens)] == tokens:
                self._drop(tokens)
        self._entries[state.tokens] = state
        self.nbytes += state.nbytes
        while self.nbytes > self.max_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, tokens: tuple[int, ...]) -> None:
        self.nbytes -= self._entries.pop(tokens).nbytes

    def covers(self, tokens: tuple[int, ...]) -> bool:
        """Whether a kept state holds at least these tokens."""
        return any(kept[: len(tokens)] == tokens for kept in self._entries)

    def best(self, prompt: Sequence[int]) -> tuple[SeqState | None, int]:
        """The state sharing the longest prefix with ``prompt``, and how many tokens it shares."""
        best, best_n = None, 0
        for state in self._entries.values():
            n = common_prefix(state.tokens, prompt)
            if n > best_n:
                best, best_n = state, n
        return best, best_n

    def touch(self, state: SeqState) -> None:
        """Mark a state as just used (it goes out last)."""
        if state.tokens in self._entries:
            self._entries.move_to_end(state.tokens)

    def clear(self) -> None:
        """Forget every state."""
        self._entries.clear()
        self.nbytes = 0


class StateFiles:
    """Prompt states on disk, one file per key, the oldest used removed past ``max_bytes``."""

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes

    def path(self, key: str) -> Path:
        """Where the state for this key lives."""
        return self.folder / f"{key}{SUFFIX}"

    def load(self, key: str, tokens: Sequence[int]) -> SeqState | None:
        """The state saved for this key; None (and the file removed) when absent, stale or damaged."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("prompt state %s cannot be read (%s): building it again", path.name, exc)
            return None
        state = _parse(raw, key, tokens)
        if state is None:
            log.warning("prompt state %s is damaged or stale: building it again", path.name)
            path.unlink(missing_ok=True)
            return None
        _touch(path)  # recently used: kept longest
        return state

    def save(self, key: str, state: SeqState) -> None:
        """Write the state atomically, then remove the oldest files past the bound."""
        if len(state.data) > self.max_bytes:
            log.info("prompt state of %d MB exceeds llm.prompt_state_mb: not saved", len(state.data) // 2**20)
            return
        header = {
            "key": key,
            "tokens": len(state.tokens),
            "tokens_sha256": _tokens_digest(state.tokens),
            "bytes": len(state.data),
            "sha256": hashlib.sha256(state.data).hexdigest(),
        }
        path = self.path(key)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(MAGIC + json.dumps(header).encode() + b"\n")
                f.write(state.data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            fsync_dir(self.folder)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            log.warning("prompt state not saved in %s: %s", self.folder, exc)
            return
        _touch(path)
        self.prune(keep=path)

    def prune(self, keep: Path | None = None) -> None:
        """Remove the least recently used files until the rest fit in ``max_bytes``."""
        files = []
        for path in self._files():
            try:
                info = path.stat()
            except OSError:
                continue
            files.append((info.st_mtime, info.st_size, path))
        files.sort()
        total = sum(size for _, size, _ in files)
        for _, size, path in files:
            if total <= self.max_bytes:
                break
            if path == keep:
                continue
            path.unlink(missing_ok=True)
            total -= size

    def total_bytes(self) -> int:
        """Bytes the state files take."""
        return sum(p.stat().st_size for p in self._files())

    def _files(self) -> list[Path]:
        try:
            return list(self.folder.glob(f"*{SUFFIX}")) if self.folder.is_dir() else []
        except OSError:
            return []


def _touch(path: Path) -> None:
    """Mark a file as just used (to the nanosecond: the file system's own clock may tick every few ms)."""
    now = time.time_ns()
    with contextlib.suppress(OSError):
        os.utime(path, ns=(now, now))


def _parse(raw: bytes, key: str, tokens: Sequence[int]) -> SeqState | None:
    if not raw.startswith(MAGIC):
        return None
    end = raw.find(b"\n", len(MAGIC))
    if end < 0:
        return None
    try:
        header = json.loads(raw[len(MAGIC) : end])
    except ValueError:
        return None
    data = raw[end + 1 :]
    if (
        not isinstance(header, dict)
        or header.get("key") != key
        or header.get("tokens") != len(tokens)
        or header.get("tokens_sha256") != _tokens_digest(tokens)
        or header.get("bytes") != len(data)
        or header.get("sha256") != hashlib.sha256(data).hexdigest()
    ):
        return None
    return SeqState(tuple(tokens), data)


def _tokens_digest(tokens: Sequence[int]) -> str:
    return hashlib.sha256(",".join(map(str, tokens)).encode()).hexdigest()


def stable_prefix(tokens_of: Callable[[list[ChatMessage]], list[int]], messages: Sequence[ChatMessage]) -> list[int]:
    """The tokens every prompt that starts with these messages starts with, whatever the chat template.

    Two renderings that differ only after the last message's text share exactly the stable part (a token
    too many is harmless: the prefix match of the next prompt stops before it).
    """
    *head, last = messages
    a, b = (tokens_of([*head, ChatMessage(last.role, last.content + tail)]) for tail in ("A", "Z"))
    return a[: common_prefix(a, b)]


def state_key(identity: dict[str, Any], tokens: Sequence[int]) -> str:
    """The file key of a prefix: the model file, llama.cpp, the context's parameters and the tokens."""
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode())
    digest.update(b"\0" + ",".join(map(str, tokens)).encode())
    return digest.hexdigest()[:32]


def model_identity(path: Path, llm: Any) -> dict[str, Any]:
    """What a saved state depends on besides its tokens: file, llama.cpp version, KV layout."""
    import llama_cpp

    info = path.stat()
    params = llm.context_params
    return {
        "model": path.name,
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "llama_cpp": llama_cpp.__version__,
        "n_ctx": int(params.n_ctx),
        "type_k": int(params.type_k),
        "type_v": int(params.type_v),
        "flash_attn": int(getattr(params, "flash_attn_type", getattr(params, "flash_attn", 0))),
        "swa_full": bool(getattr(params, "swa_full", False)),
    }


class PromptStates:
    """The local model's prompt states: which to copy out before a prompt replaces them, which to put back.

    Called on the model's worker thread only (llama.cpp is not re-entrant); nothing here locks.
    """

    def __init__(self, ram_bytes: int, files: StateFiles | None) -> None:
        self.cache = StateCache(ram_bytes)
        self.files = files
        self.prefix = "none"  # loaded | built | building | off | none (the /api/status contract)
        self.prefix_tokens: tuple[int, ...] = ()
        self.restores = 0
        self.snapshots = 0

    @property
    def enabled(self) -> bool:
        """Whether states are kept in RAM at all."""
        return self.cache.max_bytes > 0

    def before_read(self, llm: Any, prompt: Sequence[int]) -> None:
        """Before ``prompt`` replaces the KV cache: keep what it would destroy, put back a better start.

        The current contents are copied out when the new prompt would drop ``MIN_SNAPSHOT_TOKENS`` or
        more of them (trimmed first to what the RAM bound can hold, never below what the prompt shares);
        then the kept state sharing the longest prefix with the prompt goes in, when it saves at least
        ``MIN_GAIN_TOKENS`` over the current contents.
        """
        if not self.enabled:
            return
        shared = common_prefix(llm._input_ids, prompt)
        state, n = self.cache.best(prompt)  # first: the copy made next may push it out of the cache
        if llm.n_tokens - shared >= MIN_SNAPSHOT_TOKENS:
            self._snapshot(llm, shared)
        if state is not None and n >= shared + MIN_GAIN_TOKENS:
            if restore(llm, state):
                self.cache.touch(state)
                self.restores += 1
            else:
                log.warning("llama.cpp refused a kept prompt state: reading the prompt instead")
                self.cache.clear()

    def _snapshot(self, llm: Any, shared: int) -> None:
        n = llm.n_tokens
        per_token = max(1, self._bytes_per_token(llm))
        fit = self.cache.max_bytes // (per_token + 8)
        keep = min(n, fit)
        if keep < max(shared, MIN_SNAPSHOT_TOKENS):
            return
        trim(llm, keep)  # what lies past it is about to be dropped anyway
        if self.cache.covers(tuple(int(t) for t in llm._input_ids)):
            return  # kept already (the prefix put back before the last prompt, say): no copy
        self.cache.put(snapshot(llm))
        self.snapshots += 1

    def _bytes_per_token(self, llm: Any) -> int:
        import llama_cpp

        return int(llama_cpp.llama_state_seq_get_size(llm.ctx, 0)) // max(1, llm.n_tokens)

    def warm(self, llm: Any, tokens: Sequence[int], identity: dict[str, Any]) -> dict[str, Any]:
        """Put the state of this prefix into the KV cache: from RAM or disk, else read it (and save it).

        What the KV cache held before is kept in RAM first (see :meth:`before_read`).
        """
        started = time.perf_counter()
        tokens = tuple(tokens)
        key = state_key(identity, tokens)
        self.before_read(llm, tokens)
        how = "loaded"
        if common_prefix(llm._input_ids, tokens) < len(tokens):
            state = self.files.load(key, tokens) if self.files is not None else None
            if state is not None and not restore(llm, state):
                log.warning("llama.cpp refused the saved prompt state %s: building it again", key)
                if self.files is not None:
                    self.files.path(key).unlink(missing_ok=True)
        shared = common_prefix(llm._input_ids, tokens)
        trim(llm, shared)
        if shared < len(tokens):
            how = "built"
            llm.eval(tokens[shared:])
        state = snapshot(llm)
        if self.files is not None and not self.files.path(key).exists():
            self.files.save(key, state)
        self.cache.put(state)
        self.prefix, self.prefix_tokens = how, tokens
        return {"state": how, "tokens": len(tokens), "seconds": round(time.perf_counter() - started, 4)}

    def stats(self) -> dict[str, Any]:
        """RAM use and counts, for /api/status."""
        return {
            "prefix": self.prefix,
            "prefix_tokens": len(self.prefix_tokens),
            "ram_mb": round(self.cache.nbytes / 2**20, 2),
            "entries": len(self.cache),
            "restores": self.restores,
            "snapshots": self.snapshots,
        }
