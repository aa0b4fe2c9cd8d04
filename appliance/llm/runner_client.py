r"""The daemon's side of the model runner (runner.py): start it, speak to it, and start it again when it dies.

:class:`ModelRunner` owns the process: the objects it hosts (runner_models.py: ``RunnerModel``,
``RunnerEmbedder``) are requests on the pipe, answered on :class:`concurrent.futures.Future`\ s, and are
made again in a new runner from the parameters they were first made with.

When the runner dies (a native crash: ``SIGSEGV`` in llama.cpp, the kernel's OOM killer, ``kill``),
every request in flight fails with :class:`~appliance.errors.ModelCrashed` (the agent answers from the
cloud when it may, else says the local model failed; nothing is answered twice, since a request is
never sent again) and a new runner starts at once. Repeated crashes fall back step by step, each said
in the log, on /api/status, ``picoagent status``, ``doctor`` and to the owner's channel:

    normal   --2 crashes in an hour-->  safe (no weight repacking, one thread)  --2 crashes-->
    no_chat  (the chat model is off: only embeddings run)            --2 crashes-->  stopped

The mode is kept in ``runner.json`` in the data dir, so a daemon restarted by systemd does not go
through the crashes again (a daemon started on a new llama.cpp or CPU starts over).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import itertools
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.errors import LocalModelOff, ModelCrashed, ModelError, PicoagentError
from appliance.llm.base import GenerationRequest

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

log = logging.getLogger(__name__)

MODES = ("normal", "safe", "no_chat", "stopped")
CRASHES_PER_STEP = 2  # crashes in one mode within WINDOW_S before the next, safer one
WINDOW_S = 3600.0
KEEP_CRASHES = 20
STATE_FILE = "runner.json"
FIX = (
    "it restarts by itself and falls back to safe settings if it keeps crashing; to choose yourself, set "
    "llm.weight_repack: off and llm.threads: 1 (see `picoagent doctor`)"
)


@dataclass
class Pending:
    """A request sent to the runner: its future, and for a generation what streams back and the request."""

    future: concurrent.futures.Future[Any]
    what: str
    on_text: Callable[[str], None] | None = None
    request: GenerationRequest | None = None
    logprobs: list[float] = field(default_factory=list)
    stopping: bool = False
    generation: int = 0  # the runner process it was sent to


def llama_cpp_version() -> str:
    """The installed llama-cpp-python's version, without importing it (the daemon never does)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        return ""


class ModelRunner:
    """One runner process: started on first use, restarted when it dies, stopped when nothing uses it."""

    def __init__(
        self,
        *,
        weight_repack: str = "auto",
        state_dir: Path | None = None,
        log_level: str = "warning",
        restart: bool = True,
    ) -> None:
        """``state_dir``: where runner.json keeps the mode across restarts (None: nowhere); ``restart``: start
        a new runner after a crash (the install's proof does not)."""
        from appliance.llm import cpu

        self.weight_repack = weight_repack
        self.log_level = log_level
        self.restart = restart
        self.state_path = state_dir / STATE_FILE if state_dir is not None else None
        self.choice = cpu.choose_repack(weight_repack)
        self.mode = "normal"
        self.saved_mode = "normal"  # the mode runner.json had when this runner was made (doctor shows it)
        self.crashes: list[dict[str, Any]] = []
        self.restarts = 0
        self.generation = 0  # which runner process this is (objects are opened again in each)
        self.info: dict[str, Any] = {}
        self.listeners: list[Callable[[str], None]] = []  # told (with a sentence) when the runner crashes
        self.restarted: list[Callable[[], None]] = []  # called (on a thread) after a restart
        self._objects: dict[str, tuple[str, dict[str, Any]]] = {}  # oid -> (kind, params), to open again
        self._opened: set[str] = set()
        self._pending: dict[int, Pending] = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._retired: set[int] = set()  # pipes closed on purpose: their end is no crash
        self._load_state()

    # --- state kept across daemon restarts ----------------------------------------------------

    def _identity(self) -> dict[str, Any]:
        return {"llama_cpp": llama_cpp_version(), "features": list(self.choice.features), "setting": self.weight_repack}

    def _load_state(self) -> None:
        if self.state_path is None:
            return
        try:
            saved = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return
        if not isinstance(saved, dict) or saved.get("identity") != self._identity():
            return  # a new llama.cpp, CPU or setting: start over
        self.crashes = [c for c in saved.get("crashes", []) if isinstance(c, dict)][-KEEP_CRASHES:]
        self.saved_mode = str(saved.get("mode", "normal"))
        if saved.get("mode") in MODES[1:]:
            self.mode = "safe"  # what it fell back to stays; the chat model gets one more try with safe settings
            log.warning("model runner: starting with safe settings (it crashed before: see picoagent doctor)")

    def _save_state(self) -> None:
        if self.state_path is None:
            return
        data = {"identity": self._identity(), "mode": self.mode, "crashes": self.crashes[-KEEP_CRASHES:]}
        tmp = self.state_path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
        try:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, self.state_path)
        except OSError as exc:
            log.warning("model runner: %s not written: %s", self.state_path, exc)

    # --- settings -----------------------------------------------------------------------------

    @property
    def repack(self) -> bool:
        """Whether this runner lets llama.cpp repack weights (never in the safe modes)."""
        return self.choice.repack and self.mode == "normal"

    @property
    def chat_off(self) -> bool:
        """Whether the chat model is off after repeated crashes."""
        return self.mode in ("no_chat", "stopped")

    def adjust(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        """The parameters an object gets in this mode: one thread once the runner fell back."""
        if self.mode != "normal" and kind == "chat":
            return {**params, "threads": 1, "batch_threads": 1}
        return params

    # --- the process --------------------------------------------------------------------------

    def _start(self) -> Connection:
        """The pipe to a running runner (started now when there is none)."""
        if self._conn is not None:
            return self._conn
        from multiprocessing.connection import Connection  # not on the idle daemon's path (0.25 MiB)

        if self.mode == "stopped":
            raise LocalModelOff(
                f"the local model runner stopped after {len(self.crashes)} crashes", fix=FIX + "; then restart"
            )
        ours, theirs = socket.socketpair()
        repack = {**self.choice.as_dict(), "repack": self.repack, "mode": self.mode}
        command = [
            sys.executable,
            "-m",
            "appliance.llm.runner",
            str(theirs.fileno()),
            json.dumps(repack),
            self.log_level,
        ]
        try:
            self._proc = subprocess.Popen(command, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self._conn = conn = Connection(os.dup(ours.fileno()))
        ours.close()
        self.generation += 1
        self._opened = set()
        self.info = {}
        proc = self._proc
        threading.Thread(target=self._read, args=(conn, proc), name="runner-reader", daemon=True).start()
        log.info("model runner started (pid %d, %s, weight repacking %s)", proc.pid, self.mode, self.repack)
        return conn

    @property
    def users(self) -> int:
        """How many objects (models) it hosts: it runs while there is one."""
        return len(self._objects)

    @property
    def pid(self) -> int | None:
        """The runner's process id (None while none runs)."""
        return self._proc.pid if self._proc is not None and self._conn is not None else None

    def _send(self, message: tuple[Any, ...]) -> None:
        with self._lock:
            conn = self._start()
            for oid, (kind, params) in self._objects.items():
                if oid not in self._opened:  # a new runner: the objects it hosted, made again
                    conn.send(("open", 0, oid, kind, self.adjust(kind, params)))
                    self._opened.add(oid)
            conn.send(message)

    def request(
        self, what: str, message: tuple[Any, ...], pending: Pending | None = None
    ) -> concurrent.futures.Future[Any]:
        """Send a request (its id is message[1], filled in here); the future holds the answer."""
        rid = next(self._ids)
        entry = pending or Pending(concurrent.futures.Future(), what)
        entry.future.rid = rid  # type: ignore[attr-defined]
        with self._lock:
            self._pending[rid] = entry
            try:
                self._send((message[0], rid, *message[2:]))
                entry.generation = self.generation
            except (OSError, ValueError, PicoagentError) as exc:
                self._pending.pop(rid, None)
                if isinstance(exc, PicoagentError):
                    raise
                raise ModelCrashed(f"the model runner cannot be reached ({exc})", fix=FIX) from None
        return entry.future

    def call(self, oid: str, method: str, *args: Any, what: str = "") -> Any:
        """A blocking call on a hosted object (never on the event loop for long ones)."""
        return self.request(what or method, ("call", 0, oid, method, args)).result()

    def signal_request(self, kind: str, rid: int) -> None:
        """Tell the runner to cancel or abort generation ``rid`` (ignored when it has ended)."""
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._conn.send((kind, rid))

    def open(self, oid: str, kind: str, params: dict[str, Any]) -> None:
        """Host an object (made in the runner when the next request is sent)."""
        with self._lock:
            self._objects[oid] = (kind, params)
            self._opened.discard(oid)

    def close_object(self, oid: str) -> None:
        """Free a hosted object; the runner stops when none is left."""
        with self._lock:
            if self._objects.pop(oid, None) is None:
                return
            self._opened.discard(oid)
            if not self._objects:
                self.stop()  # the process goes: nothing to free in it first
                return
            if self._conn is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._conn.send(("close", 0, oid))

    def stop(self) -> None:
        """Stop the runner (requests in flight fail); a later request starts a new one."""
        with self._lock:
            conn, proc = self._conn, self._proc
            self._conn = None
            if conn is not None:
                self._retired.add(id(conn))
        if conn is not None:
            with contextlib.suppress(OSError, ValueError):
                conn.send(("exit",))
            conn.close()
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # --- answers and deaths (the reader thread) -----------------------------------------------

    def _read(self, conn: Connection, proc: subprocess.Popen[bytes]) -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError, ValueError, TypeError):  # TypeError: closed by stop() meanwhile
                break
            self._dispatch(message)
        returncode = proc.wait()
        with self._lock:
            if self._conn is conn:
                self._conn = None
            generation = self.generation if self._conn is None else self.generation - 1
            failed = [entry for entry in self._pending.values() if entry.generation == generation]
            self._pending = {rid: e for rid, e in self._pending.items() if e.generation != generation}
            closing = id(conn) in self._retired
            self._retired.discard(id(conn))
        if closing or (returncode == 0 and not failed):
            for entry in failed:
                _settle(entry.future, error=ModelCrashed("the model runner was stopped", fix="try again"))
            return
        self._crashed(returncode, failed)

    def _dispatch(self, message: tuple[Any, ...]) -> None:
        kind, rid = message[0], message[1]
        entry = self._pending.get(rid)
        if entry is None:
            return
        if kind == "text":
            if entry.on_text is not None:
                entry.on_text(message[2])
            return
        if kind == "lp":
            self._watch(rid, entry, message[2])
            return
        with self._lock:
            self._pending.pop(rid, None)
        if kind == "ok":
            _settle(entry.future, result=message[2])
        else:
            _settle(entry.future, error=_error(*message[2:]))

    def _watch(self, rid: int, entry: Pending, logprob: float) -> None:
        """Each token: pass on a cancel from the daemon's side, and ask routing whether to give up."""
        entry.logprobs.append(logprob)
        request = entry.request
        if request is None or entry.stopping:
            return
        if request.cancel.is_set():
            entry.stopping = True
            self.signal_request("cancel", rid)
        elif request.should_stop is not None and request.should_stop(entry.logprobs):
            entry.stopping = True
            self.signal_request("abort", rid)

    def _crashed(self, returncode: int, failed: list[Pending]) -> None:
        how = f"signal {signal.Signals(-returncode).name}" if returncode < 0 else f"exit status {returncode}"
        during = ", ".join(sorted({entry.what for entry in failed})) or "idle"
        self.crashes.append({"at": time.time(), "how": how, "during": during, "mode": self.mode})
        recent = time.time() - WINDOW_S
        in_mode = sum(1 for c in self.crashes if c["mode"] == self.mode and c["at"] >= recent)
        before = self.mode
        if in_mode >= CRASHES_PER_STEP and self.mode != "stopped":
            self.mode = MODES[MODES.index(self.mode) + 1]
        self._save_state()
        sentence = self.describe_crash(how, during, before)
        log.error("%s", sentence)
        error = ModelCrashed(f"the local model crashed ({how}) while answering", fix=FIX)
        for entry in failed:
            _settle(entry.future, error=error)
        for listener in self.listeners:
            with contextlib.suppress(Exception):
                listener(sentence)
        if self.mode == "stopped" or not self._objects or not self.restart:
            return
        if self.mode == "no_chat" and all(kind == "chat" for kind, _ in self._objects.values()):
            return  # nothing left to run
        self.restarts += 1
        try:
            self._info_request()  # started again now: back within seconds, its objects made again
        except PicoagentError as exc:
            log.error("model runner: not restarted: %s", exc.for_people())
            return
        for hook in self.restarted:
            with contextlib.suppress(Exception):
                hook()

    def describe_crash(self, how: str, during: str, before: str) -> str:
        """One sentence for people: what died, and what the runner does now."""
        then = {
            "normal": "restarted",
            "safe": "restarted with safe settings (no weight repacking, one thread)",
            "no_chat": "the local chat model is now off (answers come from the cloud where allowed)",
            "stopped": "the model runner is now stopped (no local model, no embeddings) until a restart",
        }[self.mode]
        return f"The local model crashed ({how}, during {during}); {then}."

    # --- what people see ----------------------------------------------------------------------

    def status(self, zone: tzinfo | None = None) -> dict[str, Any]:
        """The /api/status ``runner`` document; ``zone``: the appliance's (scheduler.timezone) for its times."""
        last = self.crashes[-1] if self.crashes else None
        return {
            "pid": self.pid,
            "mode": self.mode,
            "crashes": len(self.crashes),
            "restarts": self.restarts,
            "last_crash": last,
            "weight_repack": {**self.choice.as_dict(), "repack": self.repack},
            "threads": "auto" if self.mode == "normal" else 1,
            "buffer_types": self.info.get("buffer_types", []),
            "llama_features": self.info.get("llama_features", []),
            "message": self.summary(zone=zone),
        }

    def summary(self, mode: str | None = None, zone: tzinfo | None = None) -> str:
        """A line for the status page and `picoagent status` ("" when nothing happened); ``mode``: another
        mode than the running one (doctor: the one runner.json says the daemon reached); ``zone``: the
        appliance's, named, as the notifications are (None: the machine's)."""
        if not self.crashes:
            return ""
        last = self.crashes[-1]
        when = datetime.fromtimestamp(last["at"], zone).astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")
        state = {
            "normal": "running again",
            "safe": "running with safe settings (no weight repacking, one thread)",
            "no_chat": "chat model off, embeddings only",
            "stopped": "stopped",
        }[mode or self.mode]
        return f"local model crashed {len(self.crashes)}× (last {when}, {last['how']}): {state}"

    def refresh_info(self) -> None:
        """Ask the runner what it loaded (buffer types, CPU features), without waiting for the answer."""
        with contextlib.suppress(PicoagentError):
            self._info_request()

    def _info_request(self) -> None:
        future = self.request("info", ("info", 0))
        future.add_done_callback(lambda f: self.info.update(f.result()) if f.exception() is None else None)


def _error(module: str, name: str, message: str, fix: str | None) -> PicoagentError:
    """The runner's error as the same class here (a ModelError when the class cannot be found)."""
    try:
        cls = getattr(importlib.import_module(module), name)
        if isinstance(cls, type) and issubclass(cls, PicoagentError):
            return cls(message, fix=fix)
    except (ImportError, AttributeError, TypeError):
        pass
    return ModelError(message, fix=fix)


def _settle(future: Any, *, result: Any = None, error: BaseException | None = None) -> None:
    """Answer a request's future, unless its caller already gave up on it (cancelled at a stop): the reader
    thread must outlive a cancelled request (it died of InvalidStateError at a daemon's quick stop)."""
    if future.done():
        return
    with contextlib.suppress(Exception):  # cancelled between the check and the answer: nobody waits
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
