"""`picoagent selftest`: can this installation run? The OTA updater runs it in a new release before switching.

It checks what a broken build or a bad wheel would break, without the side effects of starting the
daemon: every module imports, the config loads, sqlite-vec loads, llama.cpp's library loads, and the
configured model file is a GGUF file that fits the context and generates a few tokens in a model runner
(a child process: a native crash on this CPU is a failed check, appliance/llm/proof.py), and the embedding
model (memory, device requests by meaning) loads and embeds a sentence (a conversion gone wrong would make
garbage silently).

Exit 0 when every check passed; ``SHORT_OF_MEMORY`` (3) when the only failures are model checks refused for
want of free memory now (beside a running daemon on a 512 MB board: the updater stops the daemon and asks
again, appliance/ota/updater.py); 1 otherwise.
"""

from __future__ import annotations

import importlib
import pkgutil
import sqlite3
import sys
from collections.abc import Callable

import appliance
from appliance.errors import ModelTooLargeError, PicoagentError
from appliance.ota.bundle import SELFTEST_SHORT_OF_MEMORY as SHORT_OF_MEMORY


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(appliance.__path__, prefix="appliance."):
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return names


def _embedding_check(config: object, report: Callable[..., None]) -> None:
    """The configured embedding model gives a unit vector of its stated width for a sentence."""
    import math

    from appliance.config import Config
    from appliance.llm.choice import models_dir
    from appliance.llm.embeddings import LocalEmbedder, choose_embedding

    assert isinstance(config, Config)
    try:
        choice = choose_embedding(config, models_dir(config))
        if choice.path is None:
            report("embeddings: the chat model's own" + (f" ({choice.note})" if choice.note else ""), None)
            return
        embedder = LocalEmbedder(
            choice.path, context_tokens=64, threads=1, batch_threads=1, memory_margin_mb=config.llm.memory_margin_mb
        )
        try:
            vector = embedder.embed(["is it stuffy in the living room"])[0]
        finally:
            embedder.close()
        norm = math.sqrt(sum(x * x for x in vector))
        bad = len(vector) != embedder.dimensions or abs(norm - 1.0) > 1e-3
        report(f"embedding model {choice.name} ({len(vector)} dimensions)", "not a unit vector" if bad else None)
    except PicoagentError as exc:
        report("embedding model", exc.for_people(), short_of_memory=isinstance(exc, ModelTooLargeError))


def run_selftest(config_file: str | None = None) -> int:
    """Print one line per check; exit 0 only when all pass."""
    failures = short = 0

    def report(name: str, error: str | None, *, short_of_memory: bool = False) -> None:
        nonlocal failures, short
        failures += error is not None
        short += error is not None and short_of_memory
        print(f"[{'FAIL' if error else 'ok  '}] {name}{': ' + error if error else ''}")

    broken = []
    for name in _modules():
        try:
            importlib.import_module(name)
        except Exception as exc:  # any import failure is the finding
            broken.append(f"{name} ({type(exc).__name__}: {exc})")
    report(f"{len(_modules())} modules import", "; ".join(broken) or None)

    try:
        import llama_cpp

        report(f"llama.cpp library {llama_cpp.__version__}", None)
    except Exception as exc:  # a wrong-architecture .so raises OSError, a missing one ImportError
        report("llama.cpp library", f"{type(exc).__name__}: {exc}")

    try:
        import sqlite_vec

        conn = sqlite3.connect(":memory:")
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        report(f"sqlite-vec {conn.execute('select vec_version()').fetchone()[0]}", None)
        conn.close()
    except (ImportError, sqlite3.Error, AttributeError) as exc:
        report("sqlite-vec", str(exc))

    from appliance.config import load_config
    from appliance.llm import choice

    try:
        config = load_config(config_file)
        report(f"config {config.source}", None)
        path = choice.model_path(config)
        choice.model_memory_bytes(config, path)
        report(f"model {path.name}", None)
    except PicoagentError as exc:
        report("config and model", exc.for_people())
    else:
        _embedding_check(config, report)
        from appliance.llm.proof import prove

        # In a child process: a native crash is a finding. The configured margin: an update's self-test runs
        # beside the daemon, and a 512 MB board (margin 64) failed it with the default 128.
        proof = prove(path, config.llm.weight_repack, memory_margin_mb=config.llm.memory_margin_mb)
        failed = None if proof.ok else f"{proof.line}; fix: {proof.fix}"
        report(proof.line if proof.ok else "local model runs", failed, short_of_memory=proof.short_of_memory)
    if failures and failures == short:
        print(f"self-test FAILED ({failures}): not enough free memory for the models now", file=sys.stderr)
        return SHORT_OF_MEMORY
    print("self-test passed" if not failures else f"self-test FAILED ({failures})", file=sys.stderr)
    return 0 if not failures else 1
