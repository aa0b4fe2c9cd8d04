"""Shared by the benchmarks: one JSON line per figure, medians, wall-clock timing of commands."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PICOAGENT = [str(Path(sys.executable).with_name("picoagent"))]


def report(bench: str, value: float, baseline: float, goal: str, ok: bool, **details: Any) -> dict[str, Any]:
    """Print one benchmark's JSON line and return it."""
    ratio = value / baseline if baseline else float("nan")
    row = {
        "bench": bench,
        "value": round(value, 4),
        "baseline": round(baseline, 4),
        "ratio": round(ratio, 4),
        "goal": goal,
        "ok": ok,
        **details,
    }
    print(json.dumps(row), flush=True)
    return row


def median_of(fn: Callable[[], float], n: int) -> float:
    return statistics.median(fn() for _ in range(n))


def wall(cmd: list[str], **kw: Any) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - started


def per_message_ms(decide: Callable[[str], object], phrasings: Sequence[str], reps: int) -> list[float]:
    """Milliseconds of each call of ``decide``, every phrasing ``reps`` times, interleaved."""
    samples: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(reps):
        for text in phrasings:
            started = clock()
            decide(text)
            samples.append((clock() - started) / 1e6)
    return samples


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The sample at ``fraction`` of the sorted samples (0.99: the 99th percentile)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
