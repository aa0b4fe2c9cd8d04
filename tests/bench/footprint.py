"""The daemon's memory with the packaged model: `picoagent serve` after a run of web chats, and what holds it.

``serve_model_pss_mib``: a real `serve` subprocess with the packaged model and the default config, sent
chat turns over POST /api/chat, then its PSS read from /proc (PSS, not RSS: the model's mapped weights are
shared with the page cache and any other process mapping the file; pages of the .gguf files another
process maps too, such as a test run on a shared machine, are counted whole, as on a Pi where serve is
alone with its models, and ``pss_measured_mib`` is the raw figure). The breakdown comes from the same
/proc files and from /api/status's ``process_memory``. Its baseline is the same daemon with the old
llama.cpp settings (f16 KV cache without flash attention, one micro-batch of the whole batch), so the
ratio is the cut measured in one run.

``llama_context_cuts``: each setting alone, in this process with the packaged model: the context's
buffers as llama.cpp allocated them, the resident memory it added, and prompt and decode speed (a
~500-token prompt read from scratch, then 48 tokens decoded), each variant loaded in turn and repeated.
"""

from __future__ import annotations

import gc
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from appliance.config import CHECKOUT_CONFIG
from appliance.llm import footprint
from tests.bench.common import ROOT, report
from tests.bench.daemon import _free_port, _get, _stop, _until_healthy, children, start_serve

MIB = 1024 * 1024
THREADS = 1  # one thread: the speeds compare settings, not cores a busy neighbour may take
OLD_LLM = {"kv_type": "f16", "ubatch_size": 256, "flash": False}  # the settings before issue 20

MESSAGES = [
    "hi",
    "tell me about owls",
    "say ok",
    "thanks",
    "how are you?",
    "tell me a short joke",
    "name a colour",
    "good night",
]


def _config(tmp: Path, llm: dict[str, Any], root: Path = ROOT) -> Path:
    """The checkout's config (of ``root``) with these ``llm`` keys set (the file's own lines for them replaced)."""
    out: list[str] = []
    section = ""
    for line in (root / CHECKOUT_CONFIG.relative_to(ROOT)).read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            section = line.split(":")[0]
        key = line.strip().split(":")[0]
        if section == "llm" and line.startswith("  ") and not line.startswith("   ") and key in llm:
            line = f"  {key}: {llm[key]}"
        out.append(line)
    path = tmp / "picoagent.yaml"
    path.write_text("\n".join(out) + "\n")
    return path


def _post(url: str, body: dict[str, Any], token: str) -> Any:
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def serve_after_chats(
    turns: int, llm: dict[str, Any] | None = None, root: Path = ROOT, extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Start `serve` from ``root`` with the packaged model, send ``turns`` chats; its memory afterwards."""
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        port = _free_port()
        config = _config(tmp, llm or {}, root)
        proc = start_serve(config, tmp / "d", port, root, extra_env)
        try:
            _until_healthy(port, timeout=60)
            token = (tmp / "d" / "cli.token").read_text().strip()
            base = f"http://127.0.0.1:{port}"
            decode_tps: list[float] = []
            for i in range(turns):
                record = _post(f"{base}/api/chat", {"message": MESSAGES[i % len(MESSAGES)], "session": "bench"}, token)
                timings = record.get("timings", {})
                if timings.get("decode_tps"):
                    decode_tps.append(float(timings["decode_tps"]))
            time.sleep(0.5)  # the turn's bookkeeping after its reply (ledger, memory extraction job queued)
            status = _get(f"{base}/api/status", token)
            # The daemon and its model runner (the child that holds the models), added up.
            pids = [proc.pid, *children(proc.pid)]
            rollup = _sum([footprint.smaps_rollup(pid) for pid in pids])
            files: dict[str, dict[str, int]] = {}
            for pid in pids:
                for name, sizes in footprint.mapped_files(pid=pid).items():
                    files[name] = _sum([files.get(name, {}), sizes])
        finally:
            _stop(proc)
    breakdown = status.get("process_memory")
    if breakdown is None and root == ROOT:
        raise RuntimeError("/api/status has no process_memory")
    # the buffers of the models the runner serves are in runner_memory (the daemon's own figures hold none)
    served = status.get("runner_memory") or {}
    breakdown = {**(breakdown or {}), **{k: served[k] for k in BUFFERS if k in served}}
    model_path = status["model"]["path"]
    ggufs = [f for name, f in files.items() if name.endswith(".gguf")]
    shared_away = sum(f["Rss"] - f["Pss"] for f in ggufs)  # model pages other processes map too (tests, a CLI)
    return {
        # PSS as if nothing else mapped the models: the figure for a Pi, where serve is alone with them
        "pss_mib": round((rollup.get("Pss", 0) + shared_away) / MIB, 1),
        "pss_measured_mib": round(rollup.get("Pss", 0) / MIB, 1),
        "rss_mib": round(rollup.get("Rss", 0) / MIB, 1),
        "anon_mib": round(rollup.get("Anonymous", 0) / MIB, 1),
        "model_map_mib": round(files.get(model_path, {}).get("Rss", 0) / MIB, 1),
        "gguf_maps_mib": round(sum(f["Rss"] for f in ggufs) / MIB, 1),
        "decode_tps": round(statistics.median(decode_tps), 1) if decode_tps else 0.0,
        **{k: v for k, v in breakdown.items() if k not in ("rss_mib", "pss_mib", "anon_mib", "model_map_mib")},
    }


BUFFERS = ("kv_cache_mib", "compute_mib", "logits_mib", "embedding_mib")


def _sum(parts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for part in parts:
        for key, value in part.items():
            total[key] = total.get(key, 0) + value
    return total


def bench_serve_model_pss(turns: int = 20) -> dict[str, Any]:
    """`serve` with the packaged model after ``turns`` web chats: PSS and its breakdown (baseline: old llm settings)."""
    now = serve_after_chats(turns)
    old = serve_after_chats(turns, {"kv_type": OLD_LLM["kv_type"], "ubatch_size": OLD_LLM["ubatch_size"]})
    value = now["pss_mib"]
    return report(
        "serve_model_pss_mib",
        value,
        old["pss_mib"],
        # Issue 20's 200 MiB was below what its parts need (README, Memory). Not to grow: the one-process
        # daemon measured 259 MiB in the same conditions, and the model runner (a second interpreter with
        # numpy and llama-cpp-python, README: the model runner) costs ~29 more: 290 MiB.
        "value <= 290 MiB",
        value <= 290,
        turns=turns,
        **now,
        old_settings={
            k: old[k] for k in ("pss_mib", "rss_mib", "anon_mib", "kv_cache_mib", "compute_mib", "decode_tps")
        },
    )


# --- each llama.cpp setting alone, in this process ----------------------------------------------------


def _rss() -> int:
    return footprint.smaps_rollup().get("Rss", 0)


def _variant(path: Path, params: dict[str, Any], prompt: str, decode: int, drop_logits: bool) -> dict[str, float]:
    """Load the model with ``params``, read ``prompt`` from scratch, decode ``decode`` tokens; sizes and speeds."""
    from appliance.llm.local import open_llama

    gc.collect()
    before = _rss()
    llm = open_llama(
        path, fix="", n_ctx=2048, n_batch=256, n_threads=THREADS, n_threads_batch=THREADS, seed=1, **params
    )
    if drop_logits:
        footprint.drop_logits_rows(llm)
    tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    started = time.perf_counter()
    llm.eval(tokens)
    read = time.perf_counter() - started
    started = time.perf_counter()
    n = 0
    for _ in llm.generate([], temp=0.0, top_k=1, reset=False):
        n += 1
        if n >= decode:
            break
    decoded = time.perf_counter() - started
    sizes = footprint.context_report(llm)
    added = _rss() - before
    llm.close()
    return {
        "prompt_tps": len(tokens) / read,
        "decode_tps": n / decoded,
        "rss_added_mib": added / MIB,
        "kv_mib": sizes["kv_cache_bytes"] / MIB,
        "compute_mib": sizes["compute_bytes"] / MIB,
        "logits_mib": sizes["logits_bytes"] / MIB,
    }


VARIANTS: dict[str, tuple[dict[str, Any], bool]] = {
    "old (f16, ubatch 256)": ({"n_ubatch": 256}, False),
    "logits one row": ({"n_ubatch": 256}, True),
    "ubatch 64": ({"n_ubatch": 64}, True),
    "ubatch 32": ({"n_ubatch": 32}, True),
    "flash f16, ubatch 256": ({"n_ubatch": 256, "flash_attn": True}, True),
    "q8_0 kv, ubatch 256": ({"n_ubatch": 256, **footprint.context_params("q8_0", 256, 256)}, True),
    "new (q8_0 kv, ubatch 64)": ({**footprint.context_params("auto", 256, None)}, True),
}

SMOKE_VARIANTS = ("old (f16, ubatch 256)", "new (q8_0 kv, ubatch 64)")


def bench_context_cuts(path: Path, reps: int = 3, decode: int = 48, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Each llama.cpp setting alone: buffers, resident memory added, prompt and decode tok/s (medians)."""
    prompt = " ".join(f"Line {i}: the kitchen sensor read {20 + i % 7} degrees at {i % 24}:00." for i in range(8))
    names = [n for n in VARIANTS if not only or n in only]
    runs: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for _ in range(reps):
        for name in names:  # interleaved, so a noisy neighbour hurts every variant alike
            params, drop = VARIANTS[name]
            runs[name].append(_variant(path, params, prompt, decode, drop))
    table = {n: {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]} for n, rows in runs.items()}
    old, new = table[names[0]], table[names[-1]]
    held = {n: row["kv_mib"] + row["compute_mib"] + row["logits_mib"] for n, row in table.items()}
    return report(
        "llama_context_held_mib",
        held[names[-1]],
        held[names[0]],
        "new <= old held, prompt and decode tok/s >= 0.9 x old",
        held[names[-1]] <= held[names[0]]
        and new["prompt_tps"] >= 0.9 * old["prompt_tps"]
        and new["decode_tps"] >= 0.9 * old["decode_tps"],
        reps=reps,
        variants=table,
    )
