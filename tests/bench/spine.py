"""The spine's figures: the model worker against bare llama-cpp-python, the KV cache, contention, the CLI."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from appliance.llm.base import ChatMessage, GenerationRequest
from appliance.llm.local import LocalModel
from appliance.llm.runner_models import RunnerModel
from tests.bench.common import PICOAGENT, median_of, report, wall

STORY = [
    ChatMessage("system", "You are a helpful assistant."),
    ChatMessage("user", "Write a long story about a dragon who learns to bake bread."),
]


# --- decode speed through the worker vs raw llama-cpp-python ----------------------------------------


def raw_decode_tps(llm: Any, prompt: list[int], n_tokens: int) -> float:
    """Tokens/s of a bare llama-cpp-python generate loop (no per-token work at all)."""
    llm.reset()
    first = last = 0.0
    count = 0
    for _token in llm.generate(prompt, temp=0.0, top_k=1, repeat_penalty=1.1):
        last = time.perf_counter()
        if not first:
            first = last
        count += 1
        if count >= n_tokens:
            break
    return (count - 1) / (last - first)


def worker_decode_tps(model: RunnerModel, n_tokens: int) -> float:
    """Tokens/s through the appliance's model: the runner process (pipe, queue, probabilities, stop matching,
    a token event back to this process each step, streaming)."""
    pieces: list[str] = []
    g = model.generate_sync(
        GenerationRequest(STORY, max_tokens=n_tokens, temperature=0.0, repeat_penalty=1.1, on_token=pieces.append)
    )
    if g.completion_tokens < n_tokens:
        raise RuntimeError(f"the story ended after {g.completion_tokens} tokens; raise nothing, pick a longer prompt")
    return g.decode_tps


def bench_decode(path: Path, threads: int, n_tokens: int, reps: int) -> None:
    """Decode speed through the model runner, as the daemon runs it, vs a bare llama-cpp-python loop here
    with the same model parameters (the same weight repacking: llm.weight_repack auto for this CPU)."""
    from llama_cpp import Llama

    from appliance.llm import cpu
    from appliance.llm.local import apply_repack
    from appliance.llm.runner_client import ModelRunner

    runner = ModelRunner(state_dir=None)
    model = RunnerModel(runner, path, threads=threads, batch_threads=threads, prompt_cache_mb=0)
    model.generate_sync(GenerationRequest(STORY, max_tokens=2, temperature=0.0))  # load
    apply_repack(cpu.choose_repack("auto").repack)  # the runner's setting, in this process too
    raw = Llama(
        model_path=str(path), n_ctx=2048, n_batch=256, n_threads=threads, n_threads_batch=threads, verbose=False
    )
    prompt = list(raw.tokenize(render_story(raw).encode(), add_bos=False, special=True))
    raws, ours = [], []
    for _ in range(reps):  # one at a time: the runner idles while the bare loop runs, and the other way round
        raws.append(raw_decode_tps(raw, prompt, n_tokens))
        ours.append(worker_decode_tps(model, n_tokens))
    value, baseline = statistics.median(ours), statistics.median(raws)
    report(
        "decode_tps_worker_vs_raw",
        value,
        baseline,
        "ratio >= 0.97",
        value / baseline >= 0.97,
        threads=threads,
        tokens=n_tokens,
        runs=reps,
    )
    raw.close()
    model.close()


def render_story(llm: Any) -> str:
    """The story prompt as the chat template in the model file renders it (as LocalModel.render does)."""
    from llama_cpp import llama_chat_format

    eos = llm._model.token_get_text(llm.token_eos())
    bos = llm._model.token_get_text(llm.token_bos())
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=llm.metadata["tokenizer.chat_template"], eos_token=eos, bos_token=bos
    )
    return str(formatter(messages=[m.as_dict() for m in STORY]).prompt)


# --- turn 2 time to first token with a ~1,000-token system prompt -----------------------------------


def bench_ttft_turn2(path: Path, reps: int, rooms: int = 40) -> None:
    """Turn 2's first token against turn 1's, on a system prompt with notes about ``rooms`` rooms (a few at
    the smoke size: the steps are the same, the prompt shorter)."""
    import asyncio

    from appliance.agent.context import Workspace
    from appliance.agent.loop import Agent
    from appliance.config import CHECKOUT_CONFIG, load_config
    from appliance.memory.db import Database
    from appliance.tools import builtin

    colours, sides = ["red", "green", "blue", "white"], ["north", "south", "east", "west"]
    notes = "\n".join(
        f"- Room {i}: the {colours[i % 4]} lamp is on a timer from {6 + i % 5}:00 to {18 + i % 4}:30; "
        f"the window faces {sides[(i // 4) % 4]}."
        for i in range(rooms)
    )
    firsts, seconds, sizes = [], [], []
    model = LocalModel(path)
    for rep in range(reps):
        with tempfile.TemporaryDirectory() as tmp:
            config = load_config(CHECKOUT_CONFIG, data_dir=tmp)
            config.agent.max_reply_tokens = 16
            workspace = Workspace(Path(tmp) / "workspace")
            workspace.ensure("Pico")
            (workspace.root / "USER.md").write_text("My name is Ada. Notes about my house:\n" + notes)
            db = Database(Path(tmp) / "picoagent.db")
            agent = Agent(config, model, db, builtin.default_registry(), workspace)
            if model.loaded:
                model._llm.reset()  # turn 1 starts cold, as after a restart
            one = asyncio.run(agent.turn("Hello! Who are you?", chat_id=f"r{rep}"))
            two = asyncio.run(agent.turn("Which room has the red lamp?", chat_id=f"r{rep}"))
            db.close()
        firsts.append(one.timings.ttft_s)
        seconds.append(two.timings.ttft_s)
        sizes.append(one.timings.prompt_tokens)
    model.close()
    value, baseline = statistics.median(seconds), statistics.median(firsts)
    report(
        "ttft_turn2_vs_turn1",
        value,
        baseline,
        "ratio <= 0.15",
        value / baseline <= 0.15,
        system_prompt_tokens=statistics.median(sizes),
        runs=reps,
    )


# --- decode speed while another process keeps one core busy -----------------------------------------


def bench_contention(path: Path, n_tokens: int, reps: int) -> None:
    model = LocalModel(path)  # default thread policy: this is what is being measured
    model.generate_sync(GenerationRequest(STORY, max_tokens=2, temperature=0.0))
    idle, busy, used, idle_used = [], [], [], []
    for _ in range(reps):
        idle.append(worker_decode_tps(model, n_tokens))
        idle_used.append(model.threads_used)
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(0.5)
            busy.append(worker_decode_tps(model, n_tokens))
            used.append(model.threads_used)
        finally:
            hog.kill()
            hog.wait()
        time.sleep(0.3)
    model.close()
    value, baseline = statistics.median(busy), statistics.median(idle)
    report(
        "decode_tps_contended_vs_idle",
        value,
        baseline,
        "ratio >= 0.45",
        value / baseline >= 0.45,
        cores=os.cpu_count(),
        threads_when_idle=idle_used,
        threads_when_contended=used,
        runs=reps,
    )


# --- command-line start-up --------------------------------------------------------------------------


def bench_help(reps: int) -> None:
    wall([*PICOAGENT, "--help"])  # warm the page cache
    value = median_of(lambda: wall([*PICOAGENT, "--help"]), reps)
    baseline = median_of(lambda: wall([sys.executable, "-c", "pass"]), reps)
    report("help_wall_s", value, baseline, "value <= 0.15 s", value <= 0.15, baseline_is="python -c pass", runs=reps)


RAW_ONE_SHOT = """
import json, sys
from llama_cpp import Llama
from appliance.llm.local import decide_repack
decide_repack()  # as the appliance loads models on this CPU (no repacking where it crashes: AMX)
path, prompt_file, n, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
prompt = json.load(open(prompt_file))
llm = Llama(model_path=path, n_ctx=2048, n_batch=256, n_threads=threads, n_threads_batch=threads, verbose=False)
out = []
for token in llm.generate(prompt, temp=0.0, top_k=1):
    out.append(token)
    if len(out) >= n:
        break
print(llm.detokenize(out).decode("utf-8", "replace"))
"""


def _appliance_system_prompt(data: Path, message: str) -> str:
    """The local system prompt the appliance builds for a first message (its runtime, not a copy of its code)."""
    import asyncio

    from appliance.agent.context import system_prompt
    from appliance.config import CHECKOUT_CONFIG, load_config
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    runtime = Runtime.open(load_config(CHECKOUT_CONFIG, data_dir=data, environ={}), model=ScriptedModel())
    try:
        understanding = runtime.agent.understanding
        tools = list(runtime.agent.tools)
        if understanding is not None:
            tools = asyncio.run(understanding.offered_tools(message, []))
        return system_prompt(runtime.workspace, tools)
    finally:
        runtime.close()


def _appliance_facts_note(data: Path) -> ChatMessage:
    """The note of the time and place the agent puts after its system prompt (its own function and zone)."""
    from datetime import datetime

    from appliance.agent.context import facts_note
    from appliance.config import CHECKOUT_CONFIG, load_config
    from appliance.grounded.turn import local_zone

    config = load_config(CHECKOUT_CONFIG, data_dir=data, environ={})
    return facts_note(datetime.now(local_zone(config.scheduler.timezone)), config.weather.place)


def bench_one_shot(path: Path, reps: int) -> None:
    """Wall time of `picoagent chat -m` minus a bare script that loads the model and makes the same tokens."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        base = [*PICOAGENT, "--data-dir", str(data), "chat", "--json", "-m", "Say hello in five words."]
        first = json.loads(subprocess.run([*base, "--session", "warm"], capture_output=True, check=True).stdout)
        # The exact prompt the appliance built, for the bare script to evaluate too: the same system prompt
        # function over the tools the appliance offers for this message (ranked by meaning).
        system = _appliance_system_prompt(data, "Say hello in five words.")
        model = LocalModel(path)
        model.generate_sync(GenerationRequest([ChatMessage("user", "x")], max_tokens=1))
        note = _appliance_facts_note(data)  # the time and place after the system prompt, as the agent adds them
        prompt = model._tokenize(
            model.render([ChatMessage("system", system), note, ChatMessage("user", "Say hello in five words.")])
        )
        model.close()
        if len(prompt) != first["timings"]["prompt_tokens"]:
            raise RuntimeError("the bare script's prompt differs from the appliance's")
        prompt_file = Path(tmp) / "prompt.json"
        prompt_file.write_text(json.dumps(prompt))
        n = first["timings"]["completion_tokens"]
        threads = str(os.cpu_count() or 1)
        ours, raws = [], []
        for rep in range(reps):
            raws.append(wall([sys.executable, "-c", RAW_ONE_SHOT, str(path), str(prompt_file), str(n), threads]))
            ours.append(wall([*base, "--session", f"s{rep}"]))
        value, baseline = statistics.median(ours), statistics.median(raws)
        report(
            "chat_m_overhead_s",
            value - baseline,
            baseline,
            "value <= 0.5 s",
            value - baseline <= 0.5,
            picoagent_wall_s=round(value, 3),
            bare_llama_wall_s=round(baseline, 3),
            tokens=n,
            runs=reps,
        )
