"""The daemon benches run once at their smallest size, over plain HTTP and over HTTPS (web.tls: off and auto).

No timing goals here (`make bench` has them): each bench must run to its JSON line, every message answered.
"""

from __future__ import annotations

import pytest

from tests.bench import daemon

FIELDS = {"bench", "value", "baseline", "ratio", "goal", "ok"}


@pytest.mark.parametrize("tls", [False, True], ids=["tls-off", "tls-auto"])
def test_the_api_chat_bench_runs(tls: bool) -> None:
    row = daemon.bench_api_chat_overhead(2, tls=tls, warmup=1)
    assert set(row) >= FIELDS and row["messages"] == 2
    assert row["bench"] == ("api_chat_overhead_tls_p50_s" if tls else "api_chat_overhead_p50_s")


@pytest.mark.parametrize("tls", [False, True], ids=["tls-off", "tls-auto"])
def test_the_websocket_bench_runs_and_loses_nothing(tls: bool) -> None:
    row = daemon.bench_ws_concurrency(2, 1, tls=tls)
    assert row["value"] == row["baseline"] == 2 and row["ok"]


def test_the_serve_start_bench_runs_over_https() -> None:
    row = daemon.bench_serve_start(1, tls=True)
    assert set(row) >= FIELDS and row["bench"] == "serve_to_healthz_tls_s" and row["runs"] == 1
