"""The understanding benches run once at their smallest size (no timing goals here: `make bench` has them)."""

from __future__ import annotations

from pathlib import Path

from tests.bench import understanding


def test_the_semantic_decision_bench_runs(capsys: object) -> None:
    row = understanding.bench_semantic(rows=5)
    assert row["bench"] == "intent_semantic_decision_p50_ms" and row["messages"] == 5
    assert row["value"] > 0 and row["baseline"] > 0 and row["embedding_p50_ms"] > 0


def test_the_local_prompt_bench_runs(model_path: Path) -> None:
    rows = understanding.bench_local_prompt(model_path, messages=2, reps=1)
    names = [row["bench"] for row in rows]
    assert names == ["local_prompt_tokens", "first_turn_ttft_ranked_vs_all", "second_turn_ttft_ranked_vs_all"]
    tokens = rows[0]
    # Behaviour, not timing: ranking shows the local model fewer tools, so its prompt is shorter.
    assert tokens["value"] < tokens["baseline"] and tokens["tools_offered_median"] < tokens["tools_all"]


def test_the_embedding_quantisation_bench_runs() -> None:
    row = understanding.bench_embedding_quant(reps=1)
    assert row["bench"] == "embedding_quant_query_ms" and row["q8_0_mb"] < row["f16_mb"]
    assert row["value"] > 0 and row["baseline"] > 0
