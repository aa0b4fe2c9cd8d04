"""Escalation: how well the signal routing uses tells a message for the cloud from one for the Pi.

No model runs: the committed calibration (tests/eval/results.json) holds every prompt's MiniLM vector,
its label and its local answer's token signals. The figure is the cross-validated AUC of the shipped
difficulty score (logistic regression on the message embedding, 10-fold stratified, fitted and judged
by the same code as tests/eval/calibrate.py), against the AUC of the mean token probability that
routing used before it, on the same prompts.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from tests.bench.common import report
from tests.eval import difficulty_fit as fit

RESULTS = Path(__file__).resolve().parents[1] / "eval" / "results.json"
SHIPPED = Path(__file__).resolve().parents[2] / "appliance" / "understanding" / "difficulty.json"
GOAL = 0.80  # issue 15: a cross-validated AUC of at least this


def bench_escalation(repeats: int, results: Path = RESULTS) -> dict[str, object]:
    """``escalation_auc``: the difficulty score's cross-validated AUC (mean over ``repeats`` fold shuffles)."""
    data = fit.dataset(json.loads(results.read_text(encoding="utf-8"))["results"])
    started = time.perf_counter()
    runs = fit.embedding_auc(data, repeats)
    seconds = time.perf_counter() - started
    value = statistics.mean(runs)
    baseline = fit.auc(-data.T[:, fit.TOKEN_SIGNALS.index("mean_prob")], data.y)
    return report(
        "escalation_auc",
        value,
        baseline,
        f"value >= {GOAL}",
        value >= GOAL,
        signal="embedding_logistic",
        baseline_signal="mean_prob",
        auc_range=[round(min(runs), 4), round(max(runs), 4)],
        folds=fit.FOLDS,
        repeats=repeats,
        prompts=len(data.y),
        cloud=int(data.y.sum()),
        fit_s=round(seconds, 3),
        shipped_enabled=bool(json.loads(SHIPPED.read_text(encoding="utf-8")).get("enabled")),
    )
