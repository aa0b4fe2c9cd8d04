"""Routing: the decision's own cost per message, and the time the early abort saves on escalating prompts."""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from appliance.agent import local_turn as agent_loop  # where the early abort reads collapsed()
from appliance.agent.context import Workspace
from appliance.agent.escalation import CloudRoute
from appliance.agent.loop import Agent
from appliance.agent.router import LocalOutcome, after_local, before_local
from appliance.config import CHECKOUT_CONFIG, Config, ProviderConfig, load_config
from appliance.llm.cloud import OpenAIProvider
from appliance.llm.local import LocalModel
from appliance.memory.db import Database
from appliance.tools import builtin
from tests.bench.common import percentile, report
from tests.fakes.cloud_api import FakeCloud

RESULTS = Path(__file__).resolve().parents[1] / "eval" / "results.json"


def _routed_config(tmp: str, api_base: str) -> Config:
    config = load_config(CHECKOUT_CONFIG, data_dir=tmp, environ={})
    config.providers["cloud"] = ProviderConfig(
        type="openai", api_base=api_base, model="m", api_key="k", price_in_per_mtok=3.0, price_out_per_mtok=15.0
    )
    config.routing.mode = "edge_first"
    config.routing.cloud_provider = "cloud"
    return config


def bench_decision_overhead(n: int) -> None:
    """p50 of one message's routing decision with a provider configured (the database read for the private
    flag and the budget, /proc for the network, both policy calls), against one bare database round trip."""

    async def main(tmp: str) -> tuple[list[float], list[float], float]:
        config = _routed_config(tmp, "https://api.example.com/v1")  # a remote host: the network check runs
        db = Database(Path(tmp) / "picoagent.db")
        for day in range(40):  # a ledger with history, as after a month of use
            db.write(
                "INSERT INTO usage (day, route, provider, model, turns, prompt_tokens, completion_tokens, cost_usd)"
                " VALUES (date('now', ?), 'cloud', 'cloud', 'm', 5, 900, 300, 0.01)",
                (f"-{day} days",),
            )
        provider = OpenAIProvider("cloud", api_base="https://api.example.com/v1", api_key="k", model="m")
        route = CloudRoute(config, db, provider)
        outcome = LocalOutcome(mean_prob=0.42)
        ours: list[float] = []
        floor: list[float] = []
        clock = time.perf_counter_ns
        for i in range(n + 20):
            started = clock()
            ctx = await route.context("telegram", str(i % 7), None)
            before_local(ctx)
            after_local(ctx, outcome, config.routing.min_confidence)
            middle = clock()
            await db.call(db.ping)
            ended = clock()
            if i >= 20:  # the first calls warm the database thread and the statement cache
                ours.append((middle - started) / 1e6)
                floor.append((ended - middle) / 1e6)
        # The per-token check during the local answer (router.collapsed), for 256 tokens.
        logprobs = [-0.4] * 256
        started = clock()
        for k in range(1, 257):
            agent_loop.collapsed(logprobs[:k], 0.55)
        per_answer_ms = (clock() - started) / 1e6
        await route.close()
        db.close()
        return ours, floor, per_answer_ms

    with tempfile.TemporaryDirectory() as tmp:
        ours, floor, per_answer_ms = asyncio.run(main(tmp))
    p50 = statistics.median(ours)
    report(
        "routing_decision_p50_ms",
        p50,
        statistics.median(floor),
        "value <= 1 ms",
        p50 <= 1.0,
        p99_ms=round(percentile(ours, 0.99), 4),
        collapse_checks_per_256_token_answer_ms=round(per_answer_ms, 3),
        messages=n,
    )


def _escalating_prompts(limit: int) -> tuple[list[str], float]:
    """Prompts whose local answer collapsed at the chosen threshold in the committed calibration run."""
    data = json.loads(RESULTS.read_text(encoding="utf-8"))
    threshold = float(data["chosen"]["threshold"])
    key = f"{threshold:.2f}"
    prompts = [r["prompt"] for r in data["results"] if r["collapse_at"].get(key) is not None]
    return prompts[:limit], threshold


def bench_early_abort(path: Path, n_prompts: int, reps: int) -> None:
    """Local time spent before escalating, with the early abort against finishing the local answer first.

    Both sides run the same prompts through a real agent turn on the packaged model, escalating to a fake
    cloud on 127.0.0.1 that answers at once; only the local part (``model_s``) is compared. The baseline
    turns the per-token check off, so the unsure answer runs to its end and is judged there.
    """
    prompts, threshold = _escalating_prompts(n_prompts)
    model = LocalModel(path, seed=42)
    real_collapsed = agent_loop.collapsed

    async def main(tmp: str) -> tuple[list[float], list[float], list[int], list[int]]:
        async with FakeCloud("openai", api_key="k") as fake:
            config = _routed_config(tmp, fake.api_base)
            config.routing.min_confidence = threshold
            workspace = Workspace(Path(tmp) / "workspace")
            workspace.ensure("Pico")
            db = Database(Path(tmp) / "picoagent.db")
            route = CloudRoute(config, db)
            agent = Agent(config, model, db, builtin.default_registry(), workspace, cloud=route)
            aborted: list[float] = []
            finished: list[float] = []
            aborted_tokens: list[int] = []
            finished_tokens: list[int] = []
            turn = 0
            for _ in range(reps):
                for prompt in prompts:
                    for early in (True, False):  # interleaved, so noise hurts both alike
                        agent_loop.collapsed = real_collapsed if early else (lambda *a, **k: False)  # type: ignore[assignment]
                        fake.enqueue("ok")
                        turn += 1
                        record = await agent.turn(prompt, chat_id=f"b{turn}")
                        (aborted if early else finished).append(record.timings.model_s)
                        tokens = int(record.timings.completion_tokens) - 1  # minus the fake's one word
                        (aborted_tokens if early else finished_tokens).append(tokens)
            agent_loop.collapsed = real_collapsed
            await route.close()
            db.close()
            return aborted, finished, aborted_tokens, finished_tokens

    try:
        with tempfile.TemporaryDirectory() as tmp:
            aborted, finished, a_tokens, f_tokens = asyncio.run(main(tmp))
    finally:
        agent_loop.collapsed = real_collapsed
        model.close()
    value, baseline = statistics.median(aborted), statistics.median(finished)
    details: dict[str, Any] = {
        "saved_s_median": round(baseline - value, 3),
        "local_tokens_median": statistics.median(a_tokens),
        "local_tokens_without_abort_median": statistics.median(f_tokens),
        "threshold": threshold,
        "prompts": len(prompts),
        "runs": reps,
    }
    report("early_abort_local_s", value, baseline, "value < baseline", value < baseline, **details)
