"""Every benchmark runs once at its smallest size and prints its JSON lines: `make bench` cannot rot.

No timing goal is checked here (shared machines are noise); what is checked is that each benchmark
still runs to its end against today's code and reports a whole row. The benchmarks with a smoke test
of their own (tests/test_bench_*.py) are listed in run.SMOKED_ELSEWHERE.
"""

from __future__ import annotations

import json
import sys
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


def only(name: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """`tests/bench/run.py --only NAME`'s exit code (what it prints is in capsys)."""
    monkeypatch.setattr(sys, "argv", ["tests/bench/run.py", "--only", name])
    return run.main()


def test_only_with_a_name_that_is_no_bench_exits_2_naming_it_and_the_benches(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert only("no_such_bench", monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no bench is named or contains 'no_such_bench'"), err
    assert "routing_decision, " in err and "everyday_sixteenth" in err  # the keys --only takes


def test_only_with_a_rows_name_says_which_bench_prints_that_row(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert only("routing_decision_p50_ms", monkeypatch) == 2
    assert "routing_decision_p50_ms is a row of the bench routing_decision: use --only routing_decision" in (
        capsys.readouterr().err
    )
    assert only("memory_hybrid_search_p50_ms", monkeypatch) == 2  # a row not named after its bench
    assert "use --only memory_search" in capsys.readouterr().err
    assert only("everyday_fresh_grounded_p50_ms", monkeypatch) == 2  # a row whose name is built
    assert "use --only everyday_fresh" in capsys.readouterr().err
