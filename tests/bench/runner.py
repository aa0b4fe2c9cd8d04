"""What the crash protection costs: llama.cpp in a model runner (a child process) against in this process.

Each side is a fresh process that does the same work with the packaged chat model and the default
embedding model: load both, embed a sentence, answer questions (the time from asking to the first token
arriving in this process: the pipe and the runner's threads included),
and then its memory is read: PSS of the process, plus its runner child's on the runner side. So the
difference is what the runner adds (a second interpreter, the pipe) less what the daemon side no longer
loads (llama_cpp, numpy). The .gguf pages are counted whole on both sides (other processes on a shared
machine may map them too).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from typing import Any

from tests.bench.common import ROOT, report

SIDE = r"""
import asyncio, json, os, sys, time
from pathlib import Path
from appliance.config import CHECKOUT_CONFIG, load_config
from appliance import runtime
from appliance.llm import footprint
from appliance.llm.choice import model_path, models_dir
from appliance.llm.base import ChatMessage, GenerationRequest
from appliance.llm.embeddings import embedder_for

mode, data = sys.argv[1], sys.argv[2]
config = load_config(CHECKOUT_CONFIG, data_dir=data)
config.llm.prompt_state = False
path = model_path(config)
if mode == "runner":
    model = runtime.local_model(config)
    embedder = embedder_for(config, model, models_dir(config), model.runner)
else:
    from appliance.llm.local import LocalModel
    model = LocalModel(path, context_tokens=config.llm.context_tokens, kv_type=config.llm.kv_type)
    embedder = embedder_for(config, model, models_dir(config))
asyncio.run(model.load())
embedder.embed(["is it stuffy in the living room"])
ttfts = []
for n in range(int(sys.argv[3])):
    question = [ChatMessage("user", f"Question {n}: what is the capital of France? Answer in one word.")]
    first = []
    async def ask():
        started = time.perf_counter()
        arrived = lambda piece: first.append(time.perf_counter())
        request = GenerationRequest(question, max_tokens=8, temperature=0.0, on_token=arrived)
        await model.generate(request)
        return first[0] - started
    ttfts.append(asyncio.run(ask()))
time.sleep(0.3)

def pss(pid):
    rollup = footprint.smaps_rollup(pid)
    files = footprint.mapped_files(pid=pid)
    shared_away = sum(f["Rss"] - f["Pss"] for name, f in files.items() if name.endswith(".gguf"))
    return rollup.get("Pss", 0) + shared_away, rollup.get("Rss", 0)

here = pss(os.getpid())
child = pss(model.runner.pid) if mode == "runner" else (0, 0)
print(json.dumps({"pss": here[0] + child[0], "rss": here[1] + child[1], "parent_pss": here[0],
                  "child_pss": child[0], "ttft": sorted(ttfts)[len(ttfts) // 2]}))
embedder.close()
model.close()
"""


def _side(mode: str, questions: int) -> dict[str, Any]:
    import tempfile

    with tempfile.TemporaryDirectory() as data:
        out = subprocess.run(
            [sys.executable, "-c", SIDE, mode, data, str(questions)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def bench_runner_cost(reps: int, questions: int) -> dict[str, Any]:
    """PSS and time to first token with the model runner vs the same work in one process (median of reps)."""
    runner = [_side("runner", questions) for _ in range(reps)]
    inside = [_side("in_process", questions) for _ in range(reps)]
    mib = 2**20
    pss, pss_base = statistics.median(r["pss"] for r in runner) / mib, statistics.median(r["pss"] for r in inside) / mib
    ttft, ttft_base = statistics.median(r["ttft"] for r in runner), statistics.median(r["ttft"] for r in inside)
    report(
        "runner_ttft_vs_in_process",
        ttft,
        ttft_base,
        "ratio <= 1.10",
        ttft / ttft_base <= 1.10,
        runs=reps,
        questions=questions,
    )
    return report(
        "runner_pss_vs_in_process_mib",
        pss,
        pss_base,
        "value - baseline <= 25 MiB",
        pss - pss_base <= 25,
        runs=reps,
        parent_mib=round(statistics.median(r["parent_pss"] for r in runner) / mib, 1),
        runner_mib=round(statistics.median(r["child_pss"] for r in runner) / mib, 1),
        rss_mib=round(statistics.median(r["rss"] for r in runner) / mib, 1),
        rss_in_process_mib=round(statistics.median(r["rss"] for r in inside) / mib, 1),
    )
