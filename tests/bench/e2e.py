"""End to end through a real daemon: `POST /api/chat` in cloud_first mode against a fake provider on loopback.

A `picoagent serve` subprocess runs the checkout's config (simulated devices and all) with
``routing.mode: cloud_first`` and an OpenAI-compatible provider that is :class:`tests.fakes.cloud_api.FakeCloud`,
served on this process's event loop: it answers at once and records the monotonic time each request
arrived, on the same clock the client reads when it sends. So "client send -> provider receives" is
what the daemon adds before a message leaves the Pi. Per message it also measures the round trip and
the daemon's CPU time (its threads' run time from /proc/<pid>/task/*/schedstat, in nanoseconds; the
coarser utime + stime of /proc/<pid>/stat is kept as a cross-check); around the run, the daemon's
memory (VmRSS, and PSS from smaps_rollup) and which model files it has mapped (/proc/<pid>/maps).
``llm.preload`` is off: preloading only moves the first message's start-up work (the embedding model
and its device and tool vectors, ~1 s) to the daemon's start, and loads the chat model a cloud_first
daemon does not use (+~150 MiB resident).

Baselines, taken in the same run and interleaved with the daemon's messages: the same client posting
the message straight to the fake provider (one loopback aiohttp hop: what any forwarder costs at
least), its round trip, and the CPU this process spends on that bare round trip (client and server
sides of aiohttp together); for memory, the daemon's own idle RSS.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from appliance.config import CHECKOUT_CONFIG
from tests.bench.common import ROOT, report
from tests.bench.daemon import children
from tests.fakes.cloud_api import FakeCloud

_KEY_ENV = "PICOAGENT_BENCH_CLOUD_KEY"

# What people ask an assistant at home, none of it answered by the device fast path: the device-ish
# ones (advice, conditions, negations, the past tense of a plan) pass the rule parser and the semantic
# stage on to the model, so every message reaches the provider.
MESSAGES = [
    "What's a quick dinner I can make with eggs, spinach and some leftover rice?",
    "Can you explain how a heat pump works in simple terms?",
    "Write a short birthday message for my sister Anna, she turns 30.",
    "What is the difference between a virus and a bacterium?",
    "How many cups of flour do I need for a small loaf of bread?",
    "Why is the fan making a clicking noise when it starts, and how do I fix it?",
    "Suggest three names for a grey kitten.",
    "What should I pack for a weekend hiking trip in autumn?",
    "Translate 'where is the train station' into German and French.",
    "What humidity is healthy for a bedroom in winter?",
    "Summarise the plot of Hamlet in three sentences.",
    "How do I remove a red wine stain from a carpet?",
    "Give me a 20 minute bodyweight workout.",
    "What's the capital of Australia, and why isn't it Sydney?",
    "If the soil in the garden is dry tomorrow morning, should I water before or after work?",
    "Explain what a mortgage offset account is.",
    "How long should I boil an egg for a runny yolk?",
    "Write a haiku about the first frost.",
    "What are good houseplants for a dark hallway?",
    "How do I politely decline a wedding invitation?",
    "What temperature should a fridge be set to?",
    "Compare electric and gas hobs for a small kitchen.",
    "Which is better for a Raspberry Pi project, Python or C?",
    "How far is the Moon from the Earth?",
    "Don't switch anything on, just tell me: does a porch light on a timer deter burglars?",
    "Recommend a board game for four adults who like strategy.",
    "What's a good way to learn to touch type?",
    "Help me plan a three-day trip to Lisbon.",
    "How much water should a tomato plant get in summer?",
    "What does 'idempotent' mean in programming?",
    "What oven setting is best for roasting vegetables?",
    "Why do onions make you cry?",
    "What are the symptoms of a vitamin D deficiency?",
    "Draft a short note to my neighbour about their dog barking at night.",
    "How should I store fresh basil?",
    "Is it cheaper to leave the heating on low all day or heat the house when needed?",
    "Tell me a fun fact about octopuses.",
    "What's the best way to descale a kettle?",
    "How do noise-cancelling headphones work?",
    "Give me a simple recipe for banana bread.",
    "What is the rule of thirds in photography?",
    "How do I make a small flat feel less cluttered?",
    "When is the best time of year to plant garlic?",
    "What's the difference between weather and climate?",
    "Suggest a podcast about history.",
    "How do I reset a tripped circuit breaker safely?",
    "What are three tips for sleeping better?",
    "Explain compound interest with an example.",
    "What's a good stretching routine after running?",
    "How do I clean a cast iron pan?",
    "Write a limerick about a forgetful robot.",
    "What does a smart thermostat actually save?",
    "How do I say thank you in Japanese?",
    "Why is the sky blue?",
    "What should I check before buying a used bicycle?",
    "Plan a vegetarian menu for a dinner party of six.",
    "How long do AA batteries usually last in a wall clock?",
    "What is the boiling point of water at high altitude?",
    "Give me a packing list for a beach holiday with kids.",
    "How do I keep cut flowers fresh longer?",
]


@dataclass
class E2EResult:
    """What one run measured (times in seconds, memory in MiB)."""

    to_provider: list[float] = field(default_factory=list)  # client send -> provider receives, per message
    round_trip: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # the daemon's CPU seconds per message
    cpu_ticks_total: float = 0.0  # the daemon's utime + stime over all messages (a cross-check of ``cpu``)
    bare_to_provider: list[float] = field(default_factory=list)  # baseline: client -> fake directly
    bare_round_trip: list[float] = field(default_factory=list)
    bare_cpu: list[float] = field(default_factory=list)  # this process's CPU per bare round trip
    routes: dict[str, int] = field(default_factory=dict)
    not_cloud: list[str] = field(default_factory=list)  # messages answered without the provider (should be none)
    provider_requests: int = 0  # requests the daemon made to the fake provider
    rss_idle: float = 0.0
    rss_after: float = 0.0
    pss_idle: float = 0.0
    pss_after: float = 0.0
    mapped_idle: list[str] = field(default_factory=list)  # .gguf files the daemon had mapped, idle
    mapped_after: list[str] = field(default_factory=list)  # ... and after the messages
    chat_model: str = ""  # the chat model's file name
    embedding_model: str = ""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(tmp: Path, api_base: str, *, preload: bool = False, understanding: bool = True) -> Path:
    """The checkout's config with cloud_first routing to an OpenAI-compatible provider at ``api_base``.

    ``understanding=False`` turns off the embedding model's other uses (device requests by meaning, tool
    ranking, grounded answers by meaning), so memory recall is the only thing left that could load a model.
    """
    raw = yaml.safe_load(CHECKOUT_CONFIG.read_text())
    raw["llm"]["preload"] = preload
    if not understanding:
        raw["agent"].update(devices_by_meaning=False, grounded_by_meaning=False, local_tools=0)
    raw["secrets_file"] = str(tmp / "secrets.env")  # absent: the key comes from the environment
    raw["providers"] = {
        "fake": {
            "type": "openai",
            "api_base": api_base,
            "model": "fake-model",
            "api_key": "${" + _KEY_ENV + "}",
            "price_in_per_mtok": 0.15,
            "price_out_per_mtok": 0.6,
        }
    }
    raw["routing"].update(mode="cloud_first", cloud_provider="fake")
    path = tmp / "picoagent.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _env(api_key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PICOAGENT_CONFIG", "NOTIFY_SOCKET")}
    env[_KEY_ENV] = api_key
    return env


def _cli(config: Path, data: Path) -> list[str]:
    return [sys.executable, "-m", "appliance", "--config", str(config), "--data-dir", str(data)]


def add_token(config: Path, data: Path, api_key: str) -> str:
    """An API token made the way a person makes one (`picoagent tokens add`), printed once."""
    out = subprocess.run(
        [*_cli(config, data), "tokens", "add", "bench"],
        cwd=ROOT,
        env=_env(api_key),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return next(line.strip() for line in out.splitlines() if line.strip().startswith("pat_"))


def cpu_ticks_s(pid: int) -> float:
    """utime + stime of a process (all its threads, exited ones too), in seconds; in clock ticks (10 ms)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """CPU time of a process's live threads to the nanosecond (schedstat), for deltas finer than a tick."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def _kib(path: str, key: str) -> float:
    for line in Path(path).read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_mib(pid: int) -> float:
    """Resident memory (VmRSS) of the daemon and its model runner, when one runs."""
    return sum(_kib(f"/proc/{p}/status", "VmRSS") for p in (pid, *children(pid)))


def pss_mib(pid: int) -> float:
    """Proportional set size (shared pages divided among their users) of the daemon and its model runner."""
    return sum(_kib(f"/proc/{p}/smaps_rollup", "Pss") for p in (pid, *children(pid)))


def mapped_models(pid: int) -> list[str]:
    """The .gguf files a process or its model runner has mapped (llama.cpp maps a model's weights to load it)."""
    names = set()
    for p in (pid, *children(pid)):
        for line in Path(f"/proc/{p}/maps").read_text().splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].endswith(".gguf"):
                names.add(Path(fields[5]).name)
    return sorted(names)


async def _until_healthy(http: Any, url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    import aiohttp

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"picoagent serve exited with {proc.returncode} before answering")
        try:
            async with http.get(f"{url}/healthz") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.02)
    raise RuntimeError(f"picoagent serve did not answer {url}/healthz within {timeout:g} s")


async def _bare(http: Any, cloud: FakeCloud, text: str, result: E2EResult) -> None:
    """The baseline: the same client posting the message to the fake provider itself, streamed like the daemon."""
    body = {"model": "fake-model", "messages": [{"role": "user", "content": text}], "stream": True}
    headers = {"Authorization": f"Bearer {cloud.api_key}"}
    before = len(cloud.requests)
    cpu0 = time.process_time()
    sent = time.monotonic()
    async with http.post(f"{cloud.api_base}/chat/completions", json=body, headers=headers) as r:
        await r.read()
    result.bare_round_trip.append(time.monotonic() - sent)
    result.bare_cpu.append(time.process_time() - cpu0)
    assert len(cloud.requests) == before + 1
    result.bare_to_provider.append(cloud.requests[-1].at - sent)
    cloud.requests.pop()  # the daemon's requests are what the count is about


async def _drive(tmp: Path, messages: list[str], *, preload: bool, understanding: bool, settle_s: float) -> E2EResult:
    import aiohttp

    result = E2EResult()
    async with FakeCloud("openai") as cloud:
        config = write_config(tmp, cloud.api_base, preload=preload, understanding=understanding)
        data = tmp / "d"
        token = await asyncio.to_thread(add_token, config, data, cloud.api_key)
        port = _free_port()
        log = tmp / "serve.log"
        with log.open("wb") as sink:  # a file, not a pipe: a chatty daemon must never block on its log
            proc = subprocess.Popen(
                [*_cli(config, data), "serve", "--host", "127.0.0.1", "--port", str(port)],
                cwd=ROOT,
                env=_env(cloud.api_key),
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as http:
                await _until_healthy(http, url, proc)
                await asyncio.sleep(settle_s)  # start-up work (imports, the first temperature sample) settles
                result.rss_idle, result.pss_idle = rss_mib(proc.pid), pss_mib(proc.pid)
                result.mapped_idle = mapped_models(proc.pid)
                headers = {"Authorization": f"Bearer {token}"}
                ticks0 = cpu_ticks_s(proc.pid)
                for i, text in enumerate(messages):
                    await _bare(http, cloud, text, result)
                    before = len(cloud.requests)
                    cpu0 = cpu_s(proc.pid)
                    sent = time.monotonic()
                    async with http.post(
                        f"{url}/api/chat", json={"message": text, "session": "bench"}, headers=headers
                    ) as r:
                        if r.status != 200:
                            raise RuntimeError(f"message {i}: {r.status} {await r.text()}")
                        record = await r.json()
                    result.round_trip.append(time.monotonic() - sent)
                    result.cpu.append(cpu_s(proc.pid) - cpu0)
                    result.routes[record["route"]] = result.routes.get(record["route"], 0) + 1
                    if len(cloud.requests) > before:
                        result.to_provider.append(cloud.requests[before].at - sent)
                    else:
                        result.not_cloud.append(f"{record['route']}: {text}")
                result.provider_requests = len(cloud.requests)
                result.cpu_ticks_total = cpu_ticks_s(proc.pid) - ticks0
                result.rss_after, result.pss_after = rss_mib(proc.pid), pss_mib(proc.pid)
                result.mapped_after = mapped_models(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.returncode != 0:
                print(f"picoagent serve exited with {proc.returncode}:", log.read_text()[-2000:], file=sys.stderr)
    result.chat_model, result.embedding_model = model_files(config, data, cloud.api_key)
    return result


def model_files(config: Path, data: Path, api_key: str) -> tuple[str, str]:
    """The file names of the chat model and the embedding model this config runs ("" for none)."""
    from appliance.config import load_config
    from appliance.llm.choice import model_path, models_dir
    from appliance.llm.embeddings import choose_embedding

    loaded = load_config(config, data_dir=data, environ=_env(api_key))
    embedding = choose_embedding(loaded, models_dir(loaded)).path
    return model_path(loaded).name, embedding.name if embedding is not None else ""


def run(n: int, *, preload: bool = False, understanding: bool = True, settle_s: float = 1.0) -> E2EResult:
    """Send ``n`` messages (cycling through MESSAGES) through a fresh daemon and measure them."""
    messages = [MESSAGES[i % len(MESSAGES)] for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        drive = _drive(Path(tmp), messages, preload=preload, understanding=understanding, settle_s=settle_s)
        return asyncio.run(drive)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def bench_e2e(n: int = 60, *, preload: bool = False, settle_s: float = 1.0) -> list[dict[str, Any]]:
    """The e2e figures: time to the provider, round trip, CPU and memory per message; one JSON line each."""
    r = run(n, preload=preload, settle_s=settle_s)
    ms = 1000.0
    models = {
        "chat_model_mapped": bool(r.chat_model) and r.chat_model in r.mapped_after,
        "embedding_model_mapped": bool(r.embedding_model) and r.embedding_model in r.mapped_after,
        "mapped_after": r.mapped_after,
    }
    common = {"messages": n, "routes": r.routes, "provider_requests": r.provider_requests, "preload": preload}
    if r.not_cloud:
        common["not_cloud"] = r.not_cloud
    first_ms = round(r.to_provider[0] * ms, 1) if r.to_provider else None
    to_provider = statistics.median(r.to_provider) * ms if r.to_provider else float("nan")
    rows = [
        report(
            "e2e_to_provider_p50_ms",
            to_provider,
            statistics.median(r.bare_to_provider) * ms,
            "value <= 15 ms",
            to_provider <= 15,
            p90_ms=round(_pct(r.to_provider, 0.9) * ms, 2),
            first_message_ms=first_ms,
            baseline_p90_ms=round(_pct(r.bare_to_provider, 0.9) * ms, 2),
            **common,
        ),
        report(
            "e2e_round_trip_p50_ms",
            statistics.median(r.round_trip) * ms,
            statistics.median(r.bare_round_trip) * ms,
            "reported",
            True,
            p90_ms=round(_pct(r.round_trip, 0.9) * ms, 2),
            **common,
        ),
        report(
            "e2e_cpu_per_message_ms",
            statistics.median(r.cpu) * ms,
            statistics.median(r.bare_cpu) * ms,
            "reported",
            True,
            p90_ms=round(_pct(r.cpu, 0.9) * ms, 2),
            mean_ms=round(statistics.mean(r.cpu) * ms, 2),
            first_message_ms=round(r.cpu[0] * ms, 1),
            total_s=round(sum(r.cpu), 3),
            total_ticks_s=round(r.cpu_ticks_total, 2),
            **common,
        ),
        report(
            "e2e_rss_growth_mib",
            r.rss_after - r.rss_idle,
            r.rss_idle,
            "value <= 150 MiB, no chat model mapped",
            r.rss_after - r.rss_idle <= 150 and not models["chat_model_mapped"],
            rss_idle_mib=round(r.rss_idle, 1),
            rss_after_mib=round(r.rss_after, 1),
            pss_idle_mib=round(r.pss_idle, 1),
            pss_after_mib=round(r.pss_after, 1),
            mapped_idle=r.mapped_idle,
            **models,
            **common,
        ),
    ]
    return rows
