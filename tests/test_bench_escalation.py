"""tests/bench/escalation.py at its smallest (one shuffle of the folds), on the committed calibration.

No model runs and no timing is asserted: only that the row comes out whole, that it agrees with what the
calibration wrote into the shipped weights, and that the score it measures beats the baseline on the
same prompts. A results.json written before the embeddings were stored is refused with the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.escalation import RESULTS, SHIPPED, bench_escalation

FIELDS = {"bench", "value", "baseline", "ratio", "goal", "ok"}


def test_the_row_is_whole_and_matches_the_shipped_figures(capsys: pytest.CaptureFixture[str]) -> None:
    row = bench_escalation(1)

    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [r["bench"] for r in printed] == ["escalation_auc"]
    assert row.keys() >= FIELDS and row["signal"] == "embedding_logistic" and row["repeats"] == 1
    shipped = json.loads(SHIPPED.read_text(encoding="utf-8"))
    assert row["baseline"] == pytest.approx(shipped["auc"]["fixed_signals"]["mean_prob"], abs=1e-4)
    # One shuffle of the folds lies within the calibration's range over shuffles, not exactly on its mean.
    assert row["value"] == pytest.approx(shipped["auc"]["cross_validated"]["embedding_logistic"], abs=0.02)
    assert (row["prompts"], row["cloud"]) == (shipped["trained_on"]["prompts"], shipped["trained_on"]["cloud"])
    assert row["value"] > row["baseline"]


def test_results_without_embeddings_are_refused_with_the_fix(tmp_path: Path) -> None:
    saved = json.loads(RESULTS.read_text(encoding="utf-8"))
    for row in saved["results"]:
        row.pop("embedding", None)
    old = tmp_path / "results.json"
    old.write_text(json.dumps(saved), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"re-run tests/eval/calibrate\.py"):
        bench_escalation(1, old)
