"""Every benchmark runs once at its smallest size and prints its JSON lines: `make bench` cannot rot.

No timing goal is checked here (shared machines are noise); what is checked is that each benchmark
still runs to its end against today's code and reports a whole row. The benchmarks with a smoke test
of their own (tests/test_bench_*.py) are listed in run.SMOKED_ELSEWHERE.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench import run

ROW = {"bench", "value", "baseline", "goal", "ok"}
NAMES = sorted(run.benches(Path("unused")))


def test_the_benchmarks_with_a_smoke_test_elsewhere_still_exist() -> None:
    assert set(NAMES) >= run.SMOKED_ELSEWHERE, run.SMOKED_ELSEWHERE - set(NAMES)  # no stale names


@pytest.mark.parametrize("name", [n for n in NAMES if n not in run.SMOKED_ELSEWHERE])
def test_the_benchmark_runs_at_its_smallest_size(
    name: str, model_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run.benches(model_path, "smoke")[name]()
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert rows, f"{name} printed no JSON line"
    for row in rows:
        assert set(row) >= ROW, f"{name}: {row} lacks {ROW - set(row)}"
        assert isinstance(row["ok"], bool)
