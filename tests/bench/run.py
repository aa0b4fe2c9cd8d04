"""`make bench`: each figure a ratio against a baseline measured in the same run.

Prints one JSON object per benchmark: bench, value, baseline, ratio, goal, ok (plus details).
Runs are interleaved (baseline, candidate, baseline, ...) and the median is kept, so a noisy
neighbour hurts both sides alike. Never timed in `make test` (timings on shared machines are noise), but
every benchmark runs there once at its smallest size (tests/test_bench_smoke.py), so none can rot.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from appliance.llm import models
from tests.bench import (
    daemon,
    e2e,
    escalation,
    everyday,
    facts,
    footprint,
    hardware,
    intent,
    memory,
    mqtt,
    prompt_state,
    recall,
    routing,
    runner,
    sandbox,
    schedule_words,
    settings,
    spine,
    understanding,
    workspace,
)

# Benchmarks that have a smoke test of their own (tests/test_bench_*.py); test_bench_smoke.py runs the rest.
SMOKED_ELSEWHERE = frozenset(
    {
        "serve_start_tls",
        "api_chat",
        "api_chat_tls",
        "ws_concurrency",
        "ws_concurrency_tls",
        "intent_semantic",
        "local_prompt",
        "embedding_quant",
        "recall_by_meaning",
        "recall_embed_query",
        "escalation_auc",
        "workspace_quota",
        "e2e",
        "everyday",
        *(f"everyday_{name}" for name in everyday.BLIND_SETS),  # every blind set (tests/test_bench_everyday.py)
    }
)


def benches(path: Path, size: str = "full") -> dict[str, Callable[[], object]]:
    """Every benchmark by name, at ``size``: full (make bench), quick (fewer repetitions) or smoke (the
    smallest that still runs every step once: make test checks they finish and print their JSON lines)."""
    quick, smoke = size in ("quick", "smoke"), size == "smoke"
    reps = 1 if smoke else 3 if quick else 5
    cores = os.cpu_count() or 1
    return {
        "help": lambda: spine.bench_help(reps * 2),
        "one_shot": lambda: spine.bench_one_shot(path, reps),
        "decode": lambda: spine.bench_decode(path, cores, 8 if smoke else 128, reps),
        "ttft": lambda: spine.bench_ttft_turn2(path, reps, 6 if smoke else 40),
        "facts_note_cache": lambda: facts.bench_facts_note(path, reps),
        "contention": lambda: spine.bench_contention(path, 8 if smoke else 96, reps),
        "serve_start": lambda: daemon.bench_serve_start(reps),
        "serve_start_tls": lambda: daemon.bench_serve_start(reps, tls=True),
        "idle_rss": daemon.bench_idle_rss,
        "serve_model_pss": lambda: footprint.bench_serve_model_pss(1 if smoke else 20),
        "context_cuts": lambda: footprint.bench_context_cuts(
            path, reps, 2 if smoke else 48, footprint.SMOKE_VARIANTS if smoke else ()
        ),
        "api_chat": lambda: daemon.bench_api_chat_overhead(100 if quick else 300),
        "api_chat_tls": lambda: daemon.bench_api_chat_overhead(100 if quick else 300, tls=True),
        "ws_concurrency": lambda: daemon.bench_ws_concurrency(50, 5),
        "ws_concurrency_tls": lambda: daemon.bench_ws_concurrency(50, 5, tls=True),
        "intent": lambda: intent.bench_intent(2 if smoke else 200),
        "schedule_words": lambda: schedule_words.bench_schedule_words(2 if smoke else 200),
        "intent_semantic": lambda: understanding.bench_semantic(),
        "local_prompt": lambda: understanding.bench_local_prompt(path, reps=2 if quick else 3),
        "embedding_quant": lambda: understanding.bench_embedding_quant(1 if quick else 3),
        "device_read": lambda: hardware.bench_device_read(5 if smoke else 300),
        "memory_search": lambda: memory.bench_memory(n=2_000, queries=5) if smoke else memory.bench_memory(),
        "memory_recall": lambda: (
            memory.bench_recall_overhead(n=200, queries=5) if smoke else memory.bench_recall_overhead()
        ),
        "recall_by_meaning": lambda: recall.bench_recall("test"),
        "recall_embed_query": lambda: recall.bench_embed_query(2 if quick else 4),
        "routing_decision": lambda: routing.bench_decision_overhead(5 if smoke else 300 if quick else 1000),
        "early_abort": lambda: routing.bench_early_abort(path, 1 if smoke else 6, 1 if quick else 2),
        "escalation_auc": lambda: escalation.bench_escalation(2 if quick else 5),
        "shell_sandbox": lambda: sandbox.bench_shell_overhead(2 if smoke else 20 if quick else 60),
        "workspace_quota": lambda: workspace.bench_quota(10_000, reps),
        "e2e": lambda: e2e.bench_e2e(30 if quick else 60),
        "mqtt_discovery": lambda: mqtt.bench_discovery(1 if smoke else 3 if quick else 5),
        "ttft_after_restart": lambda: prompt_state.bench_ttft_after_restart(reps, 4 if smoke else 0),
        "runner_cost": lambda: runner.bench_runner_cost(1 if smoke else 5, 2 if smoke else 8),
        "ttft_after_side_job": lambda: prompt_state.bench_ttft_after_side_job(path, reps, 4 if smoke else 0),
        "settings_save": lambda: settings.bench_settings_save(2 if smoke else 20),
        "status_first_paint": lambda: settings.bench_status_first_paint(1 if smoke else 9),
        "everyday": lambda: everyday.bench_all(size),
        **{f"everyday_{name}": partial(everyday.bench_blind, name, size) for name in everyday.BLIND_SETS},
    }


def _called(bench: Callable[[], object]) -> set[str]:
    """The names a bench's entry calls: its function's, or those its lambda names."""
    func = bench.func if isinstance(bench, partial) else bench
    code = getattr(func, "__code__", None)
    return {getattr(func, "__name__", ""), *(code.co_names if code is not None else ())}


def bench_of_row(row: str, table: dict[str, Callable[[], object]]) -> list[str]:
    """The bench keys whose run prints ``row``: the functions that name it as a literal (one parse of
    tests/bench/*.py, some milliseconds), else the longest key the row's name starts with (a built name)."""
    defining: set[str] = set()
    for source in Path(__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any(
                isinstance(c, ast.Constant) and c.value == row for c in ast.walk(node)
            ):
                defining.add(node.name)
    keys = [key for key, bench in table.items() if defining & _called(bench)]
    if keys:
        return keys
    prefixes = [key for key in table if row.startswith(f"{key}_")]
    return [max(prefixes, key=len)] if prefixes else []


def unknown_only(only: str, table: dict[str, Callable[[], object]]) -> str:
    """Why ``--only`` would run nothing, with the keys it takes ("" when it names a bench)."""
    if any(only in key for key in table):
        return ""
    keys = bench_of_row(only, table)
    hint = f"; {only} is a row of the bench {keys[0]}: use --only {keys[0]}" if keys else ""
    return f"error: no bench is named or contains {only!r}{hint}\n  the benches: {', '.join(table)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", help="run the benchmarks whose key contains this (a key, not a row's name)")
    args = parser.parse_args()
    problem = unknown_only(args.only, benches(Path("unused"))) if args.only else ""
    if problem:  # before the model is looked for: a typo is told at once
        print(problem, file=sys.stderr)
        return 2
    path = models.packaged_path(models.get_entry(models.default_model_name()))
    if path is None:
        print("the packaged model is not installed: run make install", file=sys.stderr)
        return 1
    for name, bench in benches(path, "quick" if args.quick else "full").items():
        if args.only and args.only not in name:
            continue
        bench()
    return 0


if __name__ == "__main__":
    sys.exit(main())
