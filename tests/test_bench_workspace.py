"""tests/bench/workspace.py at its smallest (no timing goal here: `make bench` has it).

What it checks is behaviour: the row comes out whole, and the quota's walk counts what `du -s` counts.
"""

from __future__ import annotations

from tests.bench.workspace import bench_quota


def test_the_workspace_quota_bench_runs_and_agrees_with_du() -> None:
    row = bench_quota(50, reps=1)
    assert row["bench"] == "workspace_quota_write_ms" and row["files"] == 50
    assert row["value"] > 0 and row["baseline"] > 0 and row["walk_us_per_entry"] > 0
    assert row["matches_du"] is True
