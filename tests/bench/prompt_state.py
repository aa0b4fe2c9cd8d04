"""Prompt states (appliance/llm/prompt_state.py): the first reply after a restart, a chat turn after a side job.

``ttft_after_restart_vs_cold`` restarts a real ``picoagent serve`` (the packaged model, the checkout's
config: default SOUL.md, USER.md and tools) and reads ``timings.ttft_s`` from the reply record of the
first /api/chat message: with the saved prefix state (a previous start wrote it) against
``llm.prompt_state: false`` (the system prompt read cold). Restarts alternate between the two.

``ttft_after_side_job_vs_warm`` runs in one process with the real model and agent: a chat turn right
after a fact extraction (memory keeper) against a chat turn right after another chat turn, and the same
with ``llm.prompt_cache_mb: 0`` (every side job makes the next chat turn read its prompt cold).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from appliance.config import CHECKOUT_CONFIG
from tests.bench.common import report
from tests.bench.daemon import _free_port, start_serve

MESSAGE = "Write one short sentence about the sea."
TURNS = [
    "What should I cook tonight with rice and beans?",
    "How long do I boil the beans?",
    "Any spice you would add to that?",
    "What goes with it as a drink?",
]


def _serve(data: Path, prompt_state: bool, local_tools: int) -> tuple[subprocess.Popen[bytes], int]:
    config = data.parent / f"picoagent-{prompt_state}.yaml"
    text = CHECKOUT_CONFIG.read_text().replace("prompt_state: true", f"prompt_state: {str(prompt_state).lower()}")
    config.write_text(text.replace("local_tools: 4", f"local_tools: {local_tools}"))
    port = _free_port()
    return start_serve(config, data, port), port


def _call(port: int, path: str, token: str, body: dict[str, Any] | None = None, timeout: float = 5) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def _first_reply(data: Path, prompt_state: bool, session: str, local_tools: int) -> tuple[float, dict[str, Any]]:
    """Start serve, wait until the model (and its prefix) is ready, send one message; its ttft_s and the cache."""
    proc, port = _serve(data, prompt_state, local_tools)
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("serve did not get ready")
            try:
                token = (data / "cli.token").read_text().strip()
                model = _call(port, "/api/status", token)["model"]
                if model["loaded"] and model["prompt_cache"]["prefix"] in ("loaded", "built", "off"):
                    break
            except (OSError, KeyError, ValueError):
                pass
            time.sleep(0.1)
        reply = _call(port, "/api/chat", token, {"message": MESSAGE, "session": session}, timeout=300)
        if reply["route"] != "local":
            raise RuntimeError(f"the local model did not answer: {reply['route']}: {reply['reason']}")
        cache = _call(port, "/api/status", token)["model"]["prompt_cache"]
        timings = reply["timings"]
        return float(timings["ttft_s"]), {**cache, **{k: timings[k] for k in ("cached_tokens", "prompt_tokens")}}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _restarts(reps: int, local_tools: int) -> tuple[list[float], list[float], dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        saved, cold = Path(tmp) / "saved" / "d", Path(tmp) / "cold" / "d"
        for data in (saved, cold):
            data.mkdir(parents=True)
        _first_reply(saved, True, "build", local_tools)  # writes the state file (what the previous start left)
        warm_s, cold_s = [], []
        cache: dict[str, Any] = {}
        for i in range(reps):
            seconds, _ = _first_reply(cold, False, f"r{i}", local_tools)
            cold_s.append(seconds)
            seconds, cache = _first_reply(saved, True, f"r{i}", local_tools)
            warm_s.append(seconds)
    return warm_s, cold_s, cache


def bench_ttft_after_restart(reps: int, local_tools: int = 0) -> dict[str, Any]:
    """First reply after a restart with the saved prefix state ÷ the same without it (goal ≤ 0.2).

    With ``agent.local_tools: 0`` every default tool is in every turn's system prompt, so all of it is the
    saved prefix; with the default ranking (4 tools by meaning, ``ratio_ranked_tools``, full runs only) the
    prefix ends before the tool lines (the smoke test runs only that: a shorter prompt).
    """
    warm_s, cold_s, cache = _restarts(reps, local_tools)
    value, baseline = statistics.median(warm_s), statistics.median(cold_s)
    ratio = value / baseline if baseline else float("nan")
    extra: dict[str, Any] = {}
    if reps > 1 and local_tools == 0:
        ranked_warm, ranked_cold, ranked = _restarts(reps, 4)
        extra = {
            "ratio_ranked_tools": round(statistics.median(ranked_warm) / statistics.median(ranked_cold), 4),
            "ranked_cached_of_prompt": [ranked.get("cached_tokens"), ranked.get("prompt_tokens")],
        }
    return report(
        "ttft_after_restart_vs_cold",
        value,
        baseline,
        "ratio <= 0.2",
        ratio <= 0.2,
        runs=reps,
        how="picoagent serve restarted per run, ttft_s of the first /api/chat reply",
        local_tools=local_tools,
        prefix=cache.get("prefix"),
        cached_of_prompt=[cache.get("cached_tokens"), cache.get("prompt_tokens")],
        warm_s=[round(s, 3) for s in warm_s],
        cold_s=[round(s, 3) for s in cold_s],
        **extra,
    )


async def _side_job_ttfts(
    path: Path, ram_mb: int, rounds: int, local_tools: int
) -> tuple[list[float], list[float], int]:
    """ttft_s of chat turns after a chat turn, and after a fact extraction; and the prefix's tokens."""
    from appliance.config import load_config
    from appliance.llm.local import LocalModel
    from appliance.runtime import Runtime

    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(CHECKOUT_CONFIG, data_dir=tmp)
        config.memory.extract_after_messages = 0  # extractions only where this bench runs them
        config.agent.max_reply_tokens = 24  # the time to the first token is measured, not the reply
        config.agent.local_tools = local_tools  # 0: the whole system prompt is the prefix
        model = LocalModel(path, context_tokens=config.llm.context_tokens, prompt_cache_mb=ram_mb, name="bench")
        runtime = Runtime.open(config, model=model)
        try:
            agent = runtime.agent
            assert agent.memory is not None
            await agent.prepare_understanding()
            await agent.turn("Hi!", chat_id="start")  # the prefix in the KV cache, as after a start
            conversation = await runtime.db.call(runtime.db.conversation, "terminal", "start")
            # One extraction before the measured rounds: the memories a turn recalls into its prompt are then
            # the same on both sides (the first extraction's facts made only the after-job turns longer).
            await runtime.db.call(runtime.db.add_message, conversation, "user", "My cat is called Tom.")
            await agent.memory.extract(conversation)
            after_turn, after_job = [], []
            for i in range(rounds):  # each measured turn opens a chat: the prefix is all it can share
                record = await agent.turn(TURNS[(2 * i) % len(TURNS)], chat_id=f"warm{i}")
                after_turn.append(record.timings.ttft_s)
                await agent.memory.extract(conversation)
                await runtime.db.call(runtime.db.add_message, conversation, "user", f"My cat is called Tom {i}.")
                record = await agent.turn(TURNS[(2 * i + 1) % len(TURNS)], chat_id=f"job{i}")
                after_job.append(record.timings.ttft_s)
            prefix = len(model._prefix_tokens(agent.prefix_messages())) if model.loaded else 0
        finally:
            runtime.close()
            model.close()
    return after_turn, after_job, prefix


def bench_ttft_after_side_job(path: Path, rounds: int, local_tools: int = 0) -> dict[str, Any]:
    """A chat turn right after a fact extraction ÷ one right after a chat turn (goal ≤ 2.0); also without the cache.

    ``local_tools`` 0 (every tool in the prompt) makes the whole system prompt the prefix; the smoke test
    runs with the default ranking (a shorter prompt).
    """
    warm, after_job, prefix = asyncio.run(_side_job_ttfts(path, 16, rounds, local_tools))
    warm_off, after_job_off, _ = asyncio.run(_side_job_ttfts(path, 0, rounds, local_tools))
    value, baseline = statistics.median(after_job), statistics.median(warm)
    ratio = value / baseline if baseline else float("nan")
    off = statistics.median(after_job_off) / statistics.median(warm_off)
    return report(
        "ttft_after_side_job_vs_warm",
        value,
        baseline,
        "ratio <= 2.0",
        ratio <= 2.0,
        rounds=rounds,
        ratio_without_cache=round(off, 4),
        local_tools=local_tools,
        prefix_tokens=prefix,
        after_job_s=[round(s, 3) for s in after_job],
        warm_s=[round(s, 3) for s in warm],
        after_job_without_cache_s=[round(s, 3) for s in after_job_off],
        warm_without_cache_s=[round(s, 3) for s in warm_off],
    )
