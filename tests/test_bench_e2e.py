"""The end-to-end bench runs once at its smallest size (no timing goals here: `make bench` has them).

What it checks is behaviour: every message reaches the provider, and a cloud_first daemon whose memory
holds no vectors never maps the chat model (nor, with the embedding model's other uses turned off, any
model at all) to answer or to recall.
"""

from __future__ import annotations

from tests.bench import e2e


def test_the_e2e_bench_runs_and_cloud_first_maps_no_chat_model() -> None:
    rows = e2e.bench_e2e(3, settle_s=0.2)
    names = [row["bench"] for row in rows]
    assert names == [
        "e2e_to_provider_p50_ms",
        "e2e_round_trip_p50_ms",
        "e2e_cpu_per_message_ms",
        "e2e_rss_growth_mib",
    ]
    for row in rows:
        assert row["messages"] == 3
        assert row["routes"] == {"cloud": 3}, row.get("not_cloud")
        assert row["provider_requests"] == 3  # the fake provider received every message
    memory = rows[-1]
    assert memory["rss_idle_mib"] > 0 and memory["pss_after_mib"] > 0
    assert not memory["chat_model_mapped"], memory["mapped_after"]


def test_recall_with_an_empty_memory_loads_no_model() -> None:
    result = e2e.run(3, understanding=False, settle_s=0.2)
    assert result.routes == {"cloud": 3} and result.provider_requests == 3
    assert len(result.to_provider) == 3 and all(t > 0 for t in result.to_provider)
    assert result.mapped_after == [], "recall loaded a model although memory holds no vectors"
