"""`picoagent providers | usage | routing stats`, run as subprocesses against a prepared data folder."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from appliance.cli import main as cli_main
from appliance.config import Config
from appliance.llm.base import Generation, GenerationRequest
from appliance.llm.scripted import ScriptedModel
from appliance.memory.db import Database
from tests.agents import Routed
from tests.fakes.cloud_api import FakeCloud
from tests.helpers import config_file, picoagent

KEY = "sk-test-secret-key-123"


@pytest.fixture
def fake_cloud() -> Iterator[FakeCloud]:
    """A fake OpenAI API served from a thread, so a subprocess can reach it."""
    fake = FakeCloud("openai", api_key=KEY)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(fake.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield fake
    asyncio.run_coroutine_threadsafe(fake.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def routed_config(folder: Path, api_base: str) -> Path:
    (folder).mkdir(parents=True, exist_ok=True)
    (folder / "secrets.env").write_text(f"FAKE_KEY={KEY}\n")
    provider = (
        "providers:\n  fake:\n    type: openai\n"
        f"    api_base: {api_base}\n    model: fake-model\n    api_key: ${{FAKE_KEY}}\n"
        "    price_in_per_mtok: 0.15\n    price_out_per_mtok: 0.6\n"
    )
    return config_file(
        folder,
        replace={
            "providers: {}\n": provider,
            "  mode: local_only\n": "  mode: edge_first\n",
            '  cloud_provider: ""\n': "  cloud_provider: fake\n",
        },
    )


def test_providers_lists_what_is_configured_and_never_the_key(tmp_path: Path, fake_cloud: FakeCloud) -> None:
    config = routed_config(tmp_path / "etc", fake_cloud.api_base)
    out = picoagent("providers", "--check", "--config", config, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "edge_first to fake" in out.stdout and "key set" in out.stdout and "<- escalates here" in out.stdout
    # edge_first's first signal is named beside the token rule (it said "below confidence 0.3" only)
    signals = "edge_first to fake: a message scoring 0.65 or more on the difficulty score, a local answer below"
    assert signals in out.stdout
    assert "check: ok" in out.stdout
    assert KEY not in out.stdout + out.stderr
    assert len(fake_cloud.requests) == 1 and fake_cloud.requests[0].body["max_tokens"] == 1
    data = json.loads(picoagent("providers", "--json", "--config", config, cwd=tmp_path).stdout)
    assert data["mode"] == "edge_first" and data["providers"][0]["api_key"] == "set"
    assert data["providers"][0]["escalates_to"] is True


def test_providers_check_says_why_a_provider_fails(tmp_path: Path, fake_cloud: FakeCloud) -> None:
    fake_cloud.fail_next("500", 10)
    config = routed_config(tmp_path / "etc", fake_cloud.api_base)
    out = picoagent("providers", "--check", "--config", config, "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert out.returncode == 1, out.stderr  # a script (or `&&`) sees the check failed
    assert "check: failed: fake:" in out.stdout and "Internal server error" in out.stdout
    assert "Traceback" not in out.stderr
    fake_cloud.fail_next("500", 10)
    out = picoagent("providers", "--check", "--json", "--config", config, cwd=tmp_path)
    assert out.returncode == 1 and json.loads(out.stdout)["providers"][0]["check"].startswith("failed: fake:")


def test_providers_on_the_default_config_says_nothing_leaves_the_pi(tmp_path: Path) -> None:
    out = picoagent("providers", "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "local_only" in out.stdout and "no providers" in out.stdout


def test_usage_and_routing_stats_sum_the_ledger(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = Database(data / "picoagent.db")
    db.add_usage("local", "smollm2-135m", 300, 20)
    db.add_usage("cloud", "smollm2-135m", 300, 9)
    db.add_usage("cloud", "fake-model", 280, 40, provider="fake", cost_usd=0.0012)
    db.add_usage("cloud", "fake-model", 120, 10, provider="fake", cost_usd=0.0004)
    for route, why, blocked in [
        ("local", "confident", ""),
        ("local", "confident", ""),
        ("cloud", "low_confidence", ""),
        ("cloud", "collapsed", ""),
        ("local_fallback", "low_confidence", "budget"),
    ]:
        db.add_route(route, why, blocked)
    db.close()

    usage = picoagent("usage", "--data-dir", data, cwd=tmp_path)
    assert usage.returncode == 0, usage.stderr
    fake_row = next(line for line in usage.stdout.splitlines() if " fake " in line)
    assert "fake-model" in fake_row and "2" in fake_row.split() and "$0.0016" in fake_row
    assert "cloud spent: $0.0016 today" in usage.stdout
    rows = json.loads(picoagent("usage", "--json", "--data-dir", data, cwd=tmp_path).stdout)
    assert rows["budget"]["spent_today_usd"] == pytest.approx(0.0016)
    assert {r["provider"] for r in rows["usage"]} == {"local", "fake"}

    stats = picoagent("routing", "stats", "--data-dir", data, cwd=tmp_path)
    assert stats.returncode == 0, stats.stderr
    assert "5 turns" in stats.stdout
    assert any(line.split()[:3] == ["local", "2", "40.0%"] for line in stats.stdout.splitlines())
    assert "kept on the Pi: budget" in stats.stdout and "collapsed" in stats.stdout
    summary = json.loads(picoagent("routing", "stats", "--json", "--data-dir", data, cwd=tmp_path).stdout)
    assert summary["by_route"] == {"local": 2, "cloud": 2, "local_fallback": 1}


def test_usage_on_a_fresh_appliance(tmp_path: Path) -> None:
    out = picoagent("usage", "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert out.returncode == 0 and "no use in the last 30 days" in out.stdout
    stats = picoagent("routing", "stats", "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert stats.returncode == 0 and "no turns" in stats.stdout


def test_doctor_checks_the_route_to_the_cloud(tmp_path: Path) -> None:
    config = routed_config(tmp_path / "etc", "https://api.example.com/v1")
    (tmp_path / "etc" / "secrets.env").write_text("FAKE_KEY=\n")  # the key is missing
    out = picoagent("doctor", "--config", config, "--data-dir", tmp_path / "data", cwd=tmp_path)
    line = next(line for line in out.stdout.splitlines() if "routing" in line)
    assert "api_key is empty" in line and "warn" in line.lower(), out.stdout
    default = picoagent("doctor", "--data-dir", tmp_path / "data2", cwd=tmp_path)
    assert any("routing" in line and "local_only" in line for line in default.stdout.splitlines())


class UnsureModel(ScriptedModel):
    """The scripted model, unsure of every word: edge_first escalates its answers."""

    async def generate(self, request: GenerationRequest) -> Generation:
        answer = await super().generate(request)
        return replace(answer, token_logprobs=[-5.0] * len(answer.token_logprobs))


def test_usage_counts_each_turn_once_under_the_model_that_answered_as_routing_stats_does(
    config: Config, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A turn the cloud failed (answered on the Pi) and one the Pi tried first are one turn each, in both."""

    async def turns() -> list[str]:
        async with FakeCloud("openai") as fake:
            routed = Routed(config, cast(Any, UnsureModel()), fake)
            fake.enqueue("Paris.")
            asked = [(await routed.ask("/cloud What is the capital of France?"))[0].route]  # the cloud alone
            fake.fail_next("500", 4)  # every attempt of one request
            asked.append((await routed.ask("/cloud What is the capital of Peru?"))[0].route)  # tried, failed
            fake.enqueue("Lima.")
            asked.append((await routed.ask("Which city is the capital of Peru?"))[0].route)  # the Pi, then the cloud
            await routed.close()
            return asked

    assert asyncio.run(turns()) == ["cloud", "local_fallback", "cloud"]
    path = tmp_path / "cli.yaml"
    path.write_text(f"data_dir: {config.data_dir}\n")
    assert cli_main(["--config", str(path), "routing", "stats", "--json"]) == 0
    by_route = json.loads(capsys.readouterr().out)["by_route"]
    assert by_route == {"cloud": 2, "local_fallback": 1}
    assert cli_main(["--config", str(path), "usage", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["usage"]
    counted: dict[str, int] = {}
    for row in rows:
        counted[row["route"]] = counted.get(row["route"], 0) + row["turns"]
    assert counted == by_route, rows  # each turn once, in the row of the model that answered it
    tried = next(r for r in rows if r["provider"] == "fake" and r["route"] == "local_fallback")
    assert tried["turns"] == 0  # the failed attempt is there (its tokens and cost, none here), not as a turn
    assert cli_main(["--config", str(path), "usage"]) == 0
    assert "turns: answered by that model" in capsys.readouterr().out
