"""The daemon's figures: idle memory, start-up to healthy, per-message overhead, many websocket clients.

Start-up, the API round trip and the websocket clients are measured both ways: over plain HTTP
(web.tls: off) and over HTTPS on the daemon's own one-port site (web.tls: auto, the Pi image's default),
against the same goals.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance.config import CHECKOUT_CONFIG
from tests.bench.common import ROOT, median_of, report, wall


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(tmp: Path, preload: bool, tls: bool = False) -> Path:
    path = tmp / "picoagent.yaml"
    text = CHECKOUT_CONFIG.read_text().replace("preload: true", f"preload: {str(preload).lower()}")
    path.write_text(text.replace("tls: off", "tls: auto") if tls else text)
    return path


def start_serve(
    config: Path, data: Path, port: int, root: Path = ROOT, extra_env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """`picoagent serve` of the checkout at ``root`` on 127.0.0.1:``port``, with no config or systemd from
    this environment (every bench that starts a daemon starts it here)."""
    cmd = [sys.executable, "-m", "appliance", "--config", str(config), "--data-dir", str(data)]
    env = {k: v for k, v in os.environ.items() if k not in ("PICOAGENT_CONFIG", "NOTIFY_SOCKET", "PYTHONPATH")}
    env["PYTHONPATH"] = str(root)
    env.update(extra_env or {})
    return subprocess.Popen(
        [*cmd, "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _serve(tmp: Path, port: int, preload: bool, tls: bool = False) -> subprocess.Popen[bytes]:
    return start_serve(_config(tmp, preload, tls), tmp / "d", port)


def _get(url: str, token: str | None = None, context: ssl.SSLContext | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2, context=context) as response:
        return json.loads(response.read())


def _until_healthy(port: int, timeout: float = 20.0, tls_data: Path | None = None) -> float:
    """Until /healthz answers; over HTTPS (trusting the data dir's certificate only) when ``tls_data`` is given."""
    from appliance.channels.web.certificate import read_certificate

    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        try:
            if tls_data is None:
                _get(f"http://127.0.0.1:{port}/healthz")
            else:
                certificate = read_certificate(tls_data)
                if certificate is None:
                    raise OSError("no certificate yet")
                _get(f"https://127.0.0.1:{port}/healthz", context=certificate.client_context())
            return time.perf_counter() - started
        except OSError:
            time.sleep(0.005)
    raise RuntimeError(f"serve did not become healthy on port {port}")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (its model runner), from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


def bench_serve_start(reps: int, tls: bool = False) -> dict[str, Any]:
    """`picoagent serve` started to /healthz answering 200 (baseline: starting Python itself).

    With ``tls``: web.tls auto, so the first start also makes the key and certificate, and /healthz is asked
    over HTTPS.
    """
    times = []
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as tmp:
            port = _free_port()
            started = time.perf_counter()
            proc = _serve(Path(tmp), port, preload=False, tls=tls)
            _until_healthy(port, tls_data=Path(tmp) / "d" if tls else None)
            times.append(time.perf_counter() - started)
            _stop(proc)
    value = statistics.median(times)
    baseline = median_of(lambda: wall([sys.executable, "-c", "pass"]), reps)
    name = "serve_to_healthz_tls_s" if tls else "serve_to_healthz_s"
    return report(name, value, baseline, "value <= 1.5 s", value <= 1.5, runs=reps)


def bench_idle_rss() -> None:
    """Resident memory of an idle daemon without the model, and with the default model loaded."""
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        proc = _serve(Path(tmp), port, preload=False)
        _until_healthy(port)
        time.sleep(1.0)
        idle = _rss_mib(proc.pid)
        _stop(proc)
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        proc = _serve(Path(tmp), port, preload=True)
        _until_healthy(port)
        token = (Path(tmp) / "d" / "cli.token").read_text().strip()
        deadline = time.monotonic() + 60
        while not _get(f"http://127.0.0.1:{port}/api/status", token)["model"]["loaded"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the model did not load")
            time.sleep(0.1)
        time.sleep(1.0)
        daemon = _rss_mib(proc.pid)
        runners = [_rss_mib(pid) for pid in children(proc.pid)]
        loaded = daemon + sum(runners)
        _stop(proc)
    # Issue 20's 45 MiB was below what the daemon's own parts need (see README, Memory): the goal is 50.
    report(
        "serve_idle_rss_mib",
        idle,
        loaded,
        "value <= 50 MiB",
        idle <= 50,
        with_default_model_mib=round(loaded, 1),  # the daemon and its model runner together
        daemon_with_model_loaded_mib=round(daemon, 1),
        runner_mib=round(sum(runners), 1),
    )


@dataclass
class _InProcess:
    """The appliance's app served on loopback in this process: plain (TestServer) or HTTPS (the daemon's site)."""

    base: str
    runtime: Any
    token: str
    close: Callable[[], Awaitable[None]]
    ssl: ssl.SSLContext | bool = True  # aiohttp's default when plain; the certificate's trust when HTTPS

    def url(self, path: str, scheme: str = "http") -> str:
        secure = {"http": "https", "ws": "wss"}[scheme] if self.base.startswith("https") else scheme
        return secure + "://" + self.base.split("://", 1)[1] + path


async def _in_process_server(history: int, tls: bool = False) -> _InProcess:
    """A real aiohttp server on loopback with the scripted instant model, and a conversation of `history`.

    With ``tls`` it is the daemon's own site (channels/web/listener.py) with a certificate made for it, and
    the client trusts that certificate only.
    """
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from appliance.channels.web.app import build_app
    from appliance.channels.web.auth import Auth
    from appliance.channels.web.certificate import ensure_certificate
    from appliance.channels.web.hosts import SiteNames
    from appliance.channels.web.listener import DualSite
    from appliance.channels.web.state import WebState
    from appliance.config import load_config
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    tmp = tempfile.mkdtemp()
    config = load_config(CHECKOUT_CONFIG, data_dir=tmp)
    config.agent.history_messages = history
    runtime = Runtime.open(config, model=ScriptedModel())
    auth = Auth(runtime.db)
    auth.set_password("benchmark password")
    token = auth.add_token("bench", scope="devices")  # chat and read: its chats continue the conversation made below
    db = runtime.db
    conversation = db.conversation("api", "bench")
    for i in range(history // 2):
        db.add_message(conversation, "user", f"question {i}: how warm is the living room right now?")
        db.add_message(conversation, "assistant", f"answer {i}: it is 21.{i % 10} degrees and the humidity is 40%.")
    names = SiteNames.for_config(config)
    app = build_app(WebState(runtime, auth), names)
    if not tls:
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        return _InProcess(str(server.make_url("")).rstrip("/"), runtime, token, server.close)
    certificate, _ = ensure_certificate(Path(tmp), names)
    runner = web.AppRunner(app)
    await runner.setup()
    site = DualSite(runner, "127.0.0.1", 0, ssl_context=certificate.server_context(), site_names=names)
    await site.start()
    return _InProcess(f"https://127.0.0.1:{site.port}", runtime, token, runner.cleanup, certificate.client_context())


def bench_api_chat_overhead(n: int, tls: bool = False, warmup: int = 10) -> dict[str, Any]:
    """POST /api/chat round trip with an instant model and a 100-message history (baseline: the model call).

    With ``tls`` the same over HTTPS on the daemon's own site (one kept-alive connection, as a client has).
    """
    import aiohttp

    from appliance.llm.base import ChatMessage, GenerationRequest

    async def main() -> tuple[list[float], list[float]]:
        server = await _in_process_server(100, tls)
        runtime = server.runtime
        headers = {"Authorization": f"Bearer {server.token}"}
        url = server.url("/api/chat")
        rounds, model_only = [], []
        async with aiohttp.ClientSession() as http:
            for i in range(n + warmup):
                started = time.perf_counter()
                body = {"message": f"hello {i}", "session": "bench"}
                async with http.post(url, json=body, headers=headers, ssl=server.ssl) as r:
                    assert r.status == 200, await r.text()
                    await r.json()
                elapsed = time.perf_counter() - started
                t0 = time.perf_counter()
                await runtime.model_queue.generate(GenerationRequest([ChatMessage("user", f"hello {i}")]))
                if i >= warmup:  # warm-up excluded
                    rounds.append(elapsed)
                    model_only.append(time.perf_counter() - t0)
        await server.close()
        runtime.close()
        return rounds, model_only

    rounds, model_only = asyncio.run(main())
    value, baseline = statistics.median(rounds), statistics.median(model_only)
    return report(
        "api_chat_overhead_tls_p50_s" if tls else "api_chat_overhead_p50_s",
        value - baseline,
        baseline,
        "value <= 0.020 s",
        value - baseline <= 0.020,
        p99_s=round(sorted(rounds)[max(int(len(rounds) * 0.99) - 1, 0)], 4),
        history_messages=100,
        messages=n,
    )


def bench_ws_concurrency(clients: int, messages: int, tls: bool = False) -> dict[str, Any]:
    """Many websocket clients at once, each sending messages one after another: none lost (wss:// with tls)."""
    import aiohttp

    async def client(http: Any, server: _InProcess, index: int, latencies: list[float]) -> int:
        answered = 0
        origin = server.url("")
        async with http.ws_connect(server.url("/ws", "ws"), headers={"Origin": origin}, ssl=server.ssl) as ws:
            for m in range(messages):
                started = time.perf_counter()
                text = f"client {index} message {m}"
                await ws.send_json({"type": "message", "text": text, "session": f"c{index}"})
                while True:
                    event = await ws.receive_json(timeout=60)
                    if event["type"] == "done":
                        assert event["text"] == f"echo: {text}", event["text"]
                        answered += 1
                        break
                    if event["type"] == "error":
                        raise RuntimeError(event["message"])
                latencies.append(time.perf_counter() - started)
        return answered

    async def main() -> tuple[int, list[float], float]:
        server = await _in_process_server(0, tls)
        latencies: list[float] = []
        started = time.perf_counter()
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {server.token}"}) as http:
            counts = await asyncio.gather(*(client(http, server, i, latencies) for i in range(clients)))
        total = time.perf_counter() - started
        await server.close()
        server.runtime.close()
        return sum(counts), latencies, total

    answered, latencies, total = asyncio.run(main())
    latencies.sort()
    expected = clients * messages
    return report(
        "ws_concurrency_tls_answered" if tls else "ws_concurrency_answered",
        answered,
        expected,
        f"all {expected} answered, none lost",
        answered == expected,
        clients=clients,
        messages_each=messages,
        p50_s=round(latencies[len(latencies) // 2], 4),
        p99_s=round(latencies[max(int(len(latencies) * 0.99) - 1, 0)], 4),
        wall_s=round(total, 3),
    )
