"""A crash of llama.cpp never takes the appliance down: the daemon with its model runner, end to end.

- `picoagent serve` as a person runs it (no systemd): the runner killed with SIGSEGV in the middle of a
  reply; /healthz answers, the reply in flight gets a clear answer, the next chat is answered, and
  `picoagent status` says what happened.
- A daemon whose local model crashes on every reply (``PICOAGENT_RUNNER_FAULT=segv``): 20 messages over
  the web API and the websocket and a scheduled job are all answered by the cloud, each once; the
  runner falls back and then stops restarting; the status page and the owner are told.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from appliance.config import Config, ProviderConfig
from tests.fakes.cloud_api import FakeCloud
from tests.helpers import COMMAND, config_file, free_port, picoagent, started, wait_healthy

KEY = "sk-test-runner"


def api(port: int, path: str, token: str, body: dict[str, Any] | None = None, timeout: float = 120) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, str, subprocess.Popen[str]]]:
    """`picoagent serve` on the checkout's config (local only, simulated devices), with an admin token."""
    config = config_file(tmp_path)
    data = tmp_path / "data"
    added = picoagent("tokens", "add", "t", "--scope", "admin", "--config", config, "--data-dir", data, cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PICOAGENT_CONFIG"}
    process = subprocess.Popen(
        [*COMMAND, "serve", "--config", str(config), "--data-dir", str(data), "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(port, 30)
        yield port, token, process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_kill_segv_of_the_runner_mid_reply_leaves_a_working_appliance(
    served: tuple[int, str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    port, token, process = served

    def runner_pid() -> int | None:
        return api(port, "/api/status", token)[1]["model"]["runner"]["pid"]

    deadline = time.monotonic() + 60
    while runner_pid() is None or not api(port, "/api/status", token)[1]["model"]["loaded"]:
        assert time.monotonic() < deadline, "the model was not preloaded"
        time.sleep(0.1)
    pid = runner_pid()
    assert pid is not None and pid != process.pid
    assert Path(f"/proc/{pid}/maps").read_text().count(".gguf") > 0  # the process that maps the model file
    assert ".gguf" not in Path(f"/proc/{process.pid}/maps").read_text()  # and the daemon maps none

    async def ask_and_kill() -> list[dict[str, Any]]:
        """A story over the websocket; SIGSEGV to the runner once its text streams; the events until the end."""
        base = f"http://127.0.0.1:{port}"
        async with (
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http,
            http.ws_connect(f"{base}/ws", headers={"Origin": base}) as ws,
        ):
            story = "Write a long story about a dragon who learns to bake bread."
            await ws.send_json({"type": "message", "text": story, "session": "story"})
            events = [await ws.receive_json()]
            while events[-1]["type"] != "text":
                events.append(await ws.receive_json())
            os.kill(pid, signal.SIGSEGV)  # in the middle of the reply
            while events[-1]["type"] not in ("done", "error"):
                events.append(await asyncio.wait_for(ws.receive_json(), 60))
            return events

    events = asyncio.run(ask_and_kill())
    wait_healthy(port, 60)  # healthy again after the crash (the limit only ends a hung run)
    assert events[-1]["type"] == "error" and "the local model crashed (signal SIGSEGV)" in events[-1]["message"], events
    status, reply = api(port, "/api/chat", token, {"message": "What is the capital of France? Answer in one word."})
    assert status == 200 and reply["route"] in ("local", "intent"), reply
    assert process.poll() is None  # the daemon never went away
    runner = api(port, "/api/status", token)[1]["model"]["runner"]
    assert runner["pid"] not in (None, pid) and runner["crashes"] == 1 and runner["mode"] == "normal"
    assert "local model crashed 1×" in runner["message"] and "running again" in runner["message"]
    config = tmp_path / "picoagent.yaml"
    out = picoagent("status", "--config", config, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert "model runner: pid" in out.stdout and "local model crashed 1× (last" in out.stdout, out.stdout
    history = api(port, "/api/history?channel=web&session=story", token)[1]["messages"]
    assert [m["role"] for m in history].count("user") == 1  # the message is kept, once


def test_a_model_that_crashes_on_every_reply_still_gets_every_message_answered(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    from appliance.config.schema import CronJob
    from appliance.daemon import Daemon

    monkeypatch.setenv("PICOAGENT_RUNNER_FAULT", "segv")  # the runner SIGSEGVs after the first token of every reply
    config.routing.mode = "edge_first"
    config.routing.difficulty = "off"  # every message tries the local model first

    async def main() -> None:
        async with FakeCloud("openai", api_key=KEY) as fake:
            config.providers = {
                "fake": ProviderConfig(type="openai", api_base=f"{fake.url}/v1", model="m", api_key=KEY)
            }
            config.routing.cloud_provider = "fake"
            daemon = Daemon(config, host="127.0.0.1", port=0)
            serving = asyncio.ensure_future(daemon.run())
            await started(daemon, serving)
            try:
                assert daemon.web is not None and daemon.state is not None and daemon.cron is not None
                token = daemon.state.auth.add_token("t", scope="admin")
                base = f"http://127.0.0.1:{daemon.web.port}"
                headers = {"Authorization": f"Bearer {token}"}
                replies: list[dict[str, Any]] = []
                async with aiohttp.ClientSession(headers=headers) as http:
                    for n in range(15):
                        body = {"message": f"question number {n}: what should I cook tonight?", "session": f"s{n}"}
                        async with http.post(f"{base}/api/chat", json=body) as response:
                            assert response.status == 200, await response.text()
                            replies.append(await response.json())
                    async with http.ws_connect(f"{base}/ws", headers={"Origin": base}) as ws:
                        for n in range(15, 20):
                            await ws.send_json(
                                {"type": "message", "text": f"question number {n}: hello", "session": "w"}
                            )
                            while (event := await ws.receive_json())["type"] not in ("done", "error"):
                                pass
                            assert event["type"] == "done", event
                            replies.append(event)
                    job = CronJob(
                        id="plants", schedule="every 30m", prompt="Suggest a dinner for tonight, says the plants job."
                    )
                    await daemon.cron.add_job(job, created_by="test")
                    await daemon.cron.run_now("plants")
                    status = await (await http.get(f"{base}/api/status")).json()
                asked = [r.body["messages"][-1]["content"] for r in fake.requests if r.path.endswith("/completions")]
                for n in range(20):  # each message reached the cloud once, and each was answered once
                    assert sum(f"question number {n}:" in text for text in asked) == 1, n
                assert [r["route"] for r in replies] == ["cloud"] * 20
                assert sum("the plants job" in text for text in asked) == 1
                runner = status["model"]["runner"]
                # 2 crashes: safe settings; 2 more: the chat model off (the 4th restart brings back embeddings only),
                # and no crash or restart after that, although 16 more messages came in.
                assert runner["mode"] == "no_chat" and runner["crashes"] == 4 and runner["restarts"] == 4
                assert runner["pid"] is not None and runner["threads"] == 1
                assert "chat model off" in runner["message"]
                told = [row[0] for row in daemon.runtime.db.rows("SELECT text FROM notifications WHERE kind = 'alert'")]
                assert told[-1].endswith("the local chat model is now off (answers come from the cloud where allowed).")
                assert len(told) == 4
            finally:
                daemon.stopping.set()
                assert await serving == 0

    asyncio.run(main())


def test_doctor_says_what_the_runner_went_through_and_what_the_cpu_gets(tmp_path: Path) -> None:
    from appliance.llm.runner_client import ModelRunner

    config, data = config_file(tmp_path), tmp_path / "data"
    ok = picoagent("doctor", "--config", config, "--data-dir", data, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "[ok  ] weight repacking: " in ok.stdout and "(llm.weight_repack: auto)" in ok.stdout
    assert "CPU features: " in ok.stdout
    line = next(x for x in ok.stdout.splitlines() if x.startswith("[ok  ] model runner: "))
    assert " runs here: " in line and "; weights in CPU_" in line and "; llama.cpp uses " in line, line
    # What a daemon whose model kept crashing left in runner.json (as runner_client writes it).
    runner = ModelRunner(state_dir=data)
    runner.crashes = [{"at": time.time(), "how": "signal SIGSEGV", "during": "generation", "mode": "safe"}] * 4
    runner.mode = "no_chat"
    runner._save_state()
    bad = picoagent("doctor", "--config", config, "--data-dir", data, cwd=tmp_path)
    assert bad.returncode != 0
    assert "[FAIL] model runner: local model crashed 4× (last " in bad.stdout, bad.stdout
    assert "chat model off, embeddings only" in bad.stdout and "llm.weight_repack: off" in bad.stdout
