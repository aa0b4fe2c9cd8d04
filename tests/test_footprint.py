"""Where the memory goes: the model's buffers as llama.cpp allocated them, the process's figures, the new llm keys."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from appliance.config import CHECKOUT_CONFIG, load_config
from appliance.errors import ConfigError
from appliance.llm import footprint
from appliance.llm.base import ChatMessage, GenerationRequest
from appliance.llm.local import LocalModel

MIB = 1024 * 1024


def test_a_model_not_loaded_holds_nothing(model_path: Path) -> None:
    model = LocalModel(model_path)
    assert model.memory_report() == {"kv_cache_bytes": 0, "compute_bytes": 0, "logits_bytes": 0}


def test_a_loaded_model_reports_its_buffers_and_they_add_up(local_model: LocalModel) -> None:
    asyncio.run(local_model.load())
    report = local_model.memory_report()
    # SmolLM2-135M: 30 layers x 2048 cells x 2 x 192 wide; q8_0 is 34 bytes per 32 values (f16: 2 per value)
    assert report["kv_cache_bytes"] == pytest.approx(30 * 2048 * 2 * 192 * 34 / 32, rel=0.01)
    assert 1 * MIB < report["compute_bytes"] < 30 * MIB  # one 64-token micro-batch, not 256 tokens of logits
    assert report["logits_bytes"] < 1 * MIB  # one row of the vocabulary, not n_batch rows

    memory = footprint.measure_process_memory(local_model)
    assert set(memory) == {
        "rss_mib",
        "pss_mib",
        "anon_mib",
        "model_map_mib",
        "kv_cache_mib",
        "compute_mib",
        "logits_mib",
        "embedding_mib",
        "python_heap_mib",
    }
    assert all(isinstance(v, float) for v in memory.values())
    assert memory["kv_cache_mib"] == round(report["kv_cache_bytes"] / MIB, 1)
    assert 0 < memory["model_map_mib"] <= model_path_mib(local_model) + 0.1
    assert memory["pss_mib"] <= memory["rss_mib"]
    assert memory["anon_mib"] + memory["model_map_mib"] <= memory["rss_mib"] + 0.2
    assert 0 < memory["python_heap_mib"] <= memory["anon_mib"]


def model_path_mib(model: LocalModel) -> float:
    return model.path.stat().st_size / MIB


def test_the_q8_0_kv_cache_answers_sanely(model_path: Path) -> None:
    model = LocalModel(model_path, context_tokens=512, kv_type="q8_0", ubatch_size=32)
    try:
        request = GenerationRequest(
            [ChatMessage("user", "What is the capital of France?")], max_tokens=24, temperature=0.0
        )
        reply = model.generate_sync(request)
        assert "Paris" in reply.text
        kv = model.memory_report()["kv_cache_bytes"]
    finally:
        model.close()
    assert kv == pytest.approx(30 * 512 * 2 * 192 * 34 / 32, rel=0.01)


def test_the_llama_log_lines_give_the_sizes() -> None:
    sizes = footprint.BufferSizes()
    for line in (
        "llama_context:        CPU  output buffer size =     0.19 MiB",
        "llama_kv_cache:        CPU KV buffer size =    45.00 MiB",
        "sched_reserve:        CPU compute buffer size =    12.41 MiB",
        "~llama_context:        CPU compute buffer size is  12.4100 MiB, matches expectation of  12.4100 MiB",
        "llama_context: n_ctx = 2048",
    ):
        sizes.feed(line)
    assert (sizes.kv_cache, sizes.compute, sizes.output) == (45 * MIB, int(12.41 * MIB), int(0.19 * MIB))


def test_an_unknown_kv_type_is_refused() -> None:
    with pytest.raises(ValueError, match="q4"):
        footprint.context_params("q4", 256, None)


def test_the_new_llm_keys_load_and_bad_values_are_refused(tmp_path: Path) -> None:
    config = load_config(CHECKOUT_CONFIG, environ={})
    assert config.llm.kv_type == "auto" and config.llm.ubatch_size == "auto"
    for key, bad in (("kv_type", "q4_0"), ("ubatch_size", "0"), ("ubatch_size", "lots")):
        text = CHECKOUT_CONFIG.read_text().replace(f"  {key}: auto", f"  {key}: {bad}")
        path = tmp_path / "picoagent.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_config(path, environ={})
        assert f"llm.{key}" in str(info.value)
    path.write_text(CHECKOUT_CONFIG.read_text().replace("  kv_type: auto", "  kv_type: f16"))
    assert load_config(path, environ={}).llm.kv_type == "f16"


_BIG_BLOCK = """
import ctypes, sys
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def anon_kib():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("RssAnon:"))
if sys.argv[1] == "pinned":
    from appliance.daemon import keep_big_blocks_returnable
    assert keep_big_blocks_returnable()
libc.free(libc.malloc(8 << 20))  # a mapped 8 MiB block freed: glibc would raise its threshold to 8 MiB
before = anon_kib()
block = libc.malloc(4 << 20)
ctypes.memset(block, 1, 4 << 20)
libc.malloc(64)  # something after it, so freeing it cannot just shrink the heap's top
libc.free(block)
print(anon_kib() - before)
"""


@pytest.mark.parametrize(("mode", "kept"), [("glibc", True), ("pinned", False)])
def test_the_daemon_gives_big_freed_blocks_back(mode: str, kept: bool) -> None:
    """serve pins glibc's mmap threshold: a freed 4 MiB buffer leaves the process instead of the heap."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", _BIG_BLOCK, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    ).stdout
    still_resident_kib = int(out.strip())
    assert (still_resident_kib > 3 * 1024) is kept, still_resident_kib


def test_the_buffers_of_a_model_the_runner_serves_are_the_runner_s_not_the_daemon_s() -> None:
    """A README walk: /api/status's process_memory (the daemon's) showed the KV cache and compute buffers of the
    model the runner process holds. They are in runner_memory now, and the daemon's own figures hold none."""
    import os

    class Runner:
        pid = os.getpid()  # any process with a /proc entry: its figures are read, whichever it is

    runner = Runner()

    class Served:  # RunnerModel's shape: it names its runner, and memory_report() is the runner's buffers
        def __init__(self, kv: int) -> None:
            self.runner, self.kv = runner, kv

        def memory_report(self) -> dict[str, int]:
            return {"kv_cache_bytes": self.kv, "compute_bytes": 2 * MIB, "logits_bytes": 0}

    model, embedder = Served(12 * MIB), Served(3 * MIB)
    daemon = footprint.measure_process_memory(model, embedder)
    assert daemon["kv_cache_mib"] == daemon["compute_mib"] == daemon["embedding_mib"] == 0.0, daemon
    footprint._last_runner = None  # not a figure kept from another test
    served = footprint.runner_memory(runner, model, embedder)
    assert served is not None
    assert (served["kv_cache_mib"], served["compute_mib"], served["embedding_mib"]) == (12.0, 2.0, 5.0), served
