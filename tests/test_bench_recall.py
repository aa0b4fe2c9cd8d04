"""tests/bench/recall.py at its smallest: both real embedders on two topics of the tune half.

No timing is asserted (a shared machine makes it noise): only that the rows come out whole, that
MiniLM finds more facts first than the chat model's embeddings, and that the store's RRF weights
still put a fact first when a rare name or number is all the question shares with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.bench.recall import (
    RARE_WORD,
    Embedders,
    bench_embed_query,
    bench_recall,
    fact_store,
    load_set,
    model_paths,
    open_embedders,
)

pytestmark = pytest.mark.model

# 10 facts and 6 tune questions, on which MiniLM and SmolLM2 clearly differ (6 of 6 first vs 2 of 6).
SLICE = ("appliances", "bills")
FIELDS = {"bench", "value", "baseline", "ratio", "goal", "ok"}


@pytest.fixture(scope="module")
def embedders() -> Iterator[Embedders]:
    """MiniLM and the chat model's embeddings (on one thread), loaded once for this module."""
    if None in model_paths():
        pytest.fail("MiniLM or the packaged chat model is not installed: run `make install`")
    with open_embedders(chat_threads=1) as both:  # all cores of a busy machine: seconds a question
        yield both


def _printed(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_recall_rows_are_whole_and_minilm_beats_the_chat_model(
    embedders: Embedders, capsys: pytest.CaptureFixture[str]
) -> None:
    part = load_set().only(SLICE)
    rows = bench_recall("tune", part, embedders)

    assert [row["bench"] for row in rows] == ["recall_top1", "recall_mrr"]
    assert [row["bench"] for row in _printed(capsys.readouterr().out)] == ["recall_top1", "recall_mrr"]
    for row in rows:
        assert row.keys() >= FIELDS
        assert 0 <= row["value"] <= 1 and 0 <= row["baseline"] <= 1 and isinstance(row["ok"], bool)
        assert (row["split"], row["questions"], row["facts"]) == ("tune", len(part.half("tune")), len(part.facts))
        assert "vector" in str(row["rrf_weights"])
    top1 = rows[0]
    assert top1["rare_word_questions"] == sum(q.fact in part.facts for q in RARE_WORD)
    assert top1["value"] > top1["baseline"]


def test_embed_query_row_is_whole(embedders: Embedders, capsys: pytest.CaptureFixture[str]) -> None:
    part = load_set().only(SLICE)
    row = bench_embed_query(1, part, embedders)

    assert [r["bench"] for r in _printed(capsys.readouterr().out)] == ["embed_query_p50_ms"]
    assert row.keys() >= FIELDS
    assert row["value"] > 0 and row["baseline"] > 0 and row["p90_ms"] >= row["value"]
    assert row["calls"] == len(part.questions)


def test_a_rare_shared_name_or_number_still_comes_first(embedders: Embedders) -> None:
    with fact_store(embedders.minilm, load_set()) as facts:
        assert facts.ranks(RARE_WORD) == [1] * len(RARE_WORD)
        # Not vacuous: by meaning alone some of them (a bare number, ParentPay) are not first.
        with facts.weights(1.0, 0.0):
            assert facts.ranks(RARE_WORD).count(1) < len(RARE_WORD)
