"""What a person reads from the shell and the status page (issue 33, point 8): each label as it is shown.

The commands run as subprocesses on a copy of the shipped config (as a person types them); the daemon's
pieces run on a real aiohttp server with a scripted chat model where no model is needed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import WebState
from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.helpers import automation_on, config_file, picoagent, serve_log_line

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def shell(tmp_path: Path) -> tuple[Path, Path]:
    """A config copy and a data dir, as `--config` and `--data-dir` take them."""
    return config_file(tmp_path / "etc"), tmp_path / "data"


def run(shell: tuple[Path, Path], *args: str) -> Any:
    config, data = shell
    return picoagent(*args, "--config", config, "--data-dir", data, cwd=config.parent, timeout=120)


@pytest.fixture
def runtime(config: Config) -> Iterator[Runtime]:
    opened = Runtime.open(config, model=ScriptedModel())
    yield opened
    opened.close()


# --- cron jobs made from the shell -------------------------------------------------------------------


def test_a_job_added_with_cron_add_says_so_in_cron_list(shell: tuple[Path, Path]) -> None:
    added = run(shell, "cron", "add", "daily 19:00", "--message", "take the bins out", "--id", "bins")
    assert added.returncode == 0, added.stderr
    listed = run(shell, "cron", "list").stdout
    job = listed[listed.index("bins") :]
    assert "(made with `picoagent cron add`)" in job, listed
    assert "made in chat" not in job and "cli" not in job.replace("picoagent cron add", "")


def test_a_job_the_cli_adds_through_the_daemon_is_not_made_in_chat_by_web(runtime: Runtime) -> None:
    """With a daemon, `cron add` posts as the local-cli token: that is the shell, not a chat on the web."""
    from appliance.channels.web.server import CLI_TOKEN_NAME
    from appliance.cli.automation import _job_lines

    rows: list[dict[str, Any]] = []

    async def main() -> None:
        auth = Auth(runtime.db)
        cli = {"Authorization": f"Bearer {auth.add_token(CLI_TOKEN_NAME, scope='admin')}"}
        api = {"Authorization": f"Bearer {auth.add_token('grafana', scope='admin')}"}

        async def run_job(job: Any) -> str:
            return "ran"

        state = WebState(runtime, auth, automation=automation_on(runtime.db, run_job))
        async with TestClient(TestServer(build_app(state))) as client:
            for headers, job_id in ((cli, "from_shell"), (api, "from_api")):
                body = {"schedule": "daily 19:00", "message": "bins", "id": job_id}
                assert (await client.post("/api/cron", json=body, headers=headers)).status == 201
            rows.extend((await (await client.get("/api/cron", headers=api)).json())["jobs"])

    asyncio.run(main())
    made = {row["id"]: row for row in rows}
    shell_lines, api_lines = _job_lines(made["from_shell"]), _job_lines(made["from_api"])
    assert "(made with `picoagent cron add`)" in shell_lines and "local-cli" not in shell_lines, shell_lines
    assert "(made over the API, token grafana)" in api_lines, api_lines
    assert made["from_shell"]["made"] == "made with `picoagent cron add`"  # the status page shows the same words


# --- picoagent status --json with no daemon ---------------------------------------------------------------


def test_status_json_without_a_daemon_is_json_and_exits_3(shell: tuple[Path, Path]) -> None:
    out = run(shell, "status", "--json")
    assert out.returncode == 3, out.stderr
    answer = json.loads(out.stdout)
    assert answer["running"] is False and "picoagent serve" in answer["fix"]
    plain = run(shell, "status")
    assert plain.returncode == 3 and plain.stdout.startswith("picoagent is not running")


# --- the daemon's "serving on" line ------------------------------------------------------------------------


def test_serving_on_is_an_info_line_that_the_daemon_log_shows(caplog: pytest.LogCaptureFixture) -> None:
    """Not a warning (nothing is wrong); `serve` raises the default `warning` to INFO, so a person sees it."""
    from appliance.channels.web.server import WebServer

    server = WebServer.__new__(WebServer)
    server.scheme, server.host, server.port, server.certificate = "http", "127.0.0.1", 8080, None
    with caplog.at_level(logging.DEBUG):
        server._announce(None, Path("/nonexistent"))
    (line,) = [r for r in caplog.records if "serving on" in r.getMessage()]
    assert line.levelname == "INFO" and line.getMessage().startswith("serving on http://127.0.0.1:8080")


def test_make_run_s_daemon_shows_where_it_serves(tmp_path: Path) -> None:
    """`serve` as `make run` starts it (the shipped config: log_level warning): the line is there, as INFO."""
    config = config_file(tmp_path / "etc", {"  preload: true": "  preload: false"})
    line = serve_log_line(config, tmp_path, "serving on")
    assert re.match(r"INFO appliance.channels.web.server: serving on http://127.0.0.1:\d+ ", line), line


# --- tasks, devices -------------------------------------------------------------------------------------------


def test_a_one_step_task_is_at_most_1_step(tmp_path: Path) -> None:
    shell = config_file(tmp_path / "etc", {'  model: ""': "  model: planner.gguf"}), tmp_path / "data"  # can plan
    out = run(shell, "tasks", "add", "Check the soil", "--max-steps", "1")
    assert out.returncode == 0, out.stderr
    assert "  at most 1 step, " in out.stdout, out.stdout
    two = run(shell, "tasks", "add", "Check the soil", "--max-steps", "2")
    assert "  at most 2 steps, " in two.stdout, two.stdout


def test_a_switch_turned_on_in_chat_is_done_in_plain_words(runtime: Runtime) -> None:
    record = asyncio.run(runtime.agent.turn("turn the fan on", channel="api", chat_id="labels"))
    assert record.route == "intent" and record.text == "Done: the fan is on.", record.text
    record = asyncio.run(runtime.agent.turn("turn the fan off", channel="api", chat_id="labels"))
    assert record.text == "Done: the fan is off."


# --- memory search ------------------------------------------------------------------------------------------


def test_memory_search_shows_a_score_and_leaves_out_what_is_not_related(shell: tuple[Path, Path]) -> None:
    for fact in (
        "The key to the garden shed is under the flowerpot by the door.",
        "The wifi password is on the fridge.",
    ):
        assert run(shell, "memory", "add", fact).returncode == 0
    near = run(shell, "memory", "search", "where", "is", "the", "shed", "key")
    assert near.returncode == 0, near.stderr
    lines = near.stdout.splitlines()
    assert "garden shed" in lines[0] and "wifi" not in near.stdout, near.stdout
    assert re.search(r"\(similarity 0\.\d\d", lines[0]), lines[0]
    unrelated = run(shell, "memory", "search", "a", "good", "pizza", "recipe")
    assert unrelated.stdout.startswith("nothing remembered matches"), unrelated.stdout
    assert "similarity below 0.20" in unrelated.stdout, unrelated.stdout  # and says what the cut is
    from appliance.memory.records import MIN_SIMILARITY

    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8").split())
    assert f"Hits below similarity **{MIN_SIMILARITY:.2f}** are left out" in readme  # the README names the bar
    everything = run(shell, "memory", "search", "a", "good", "pizza", "recipe", "--all")
    assert "garden shed" in everything.stdout and "similarity 0." in everything.stdout


# --- approvals ----------------------------------------------------------------------------------------------


def test_approvals_list_shows_when_each_expires(shell: tuple[Path, Path]) -> None:
    from appliance.config import load_config
    from appliance.memory.db import Database
    from appliance.runtime import approval_store

    config, data = shell
    loaded = load_config(config, data_dir=data)
    data.mkdir(parents=True, exist_ok=True)
    db = Database(data / "picoagent.db")
    try:
        pending = approval_store(loaded, db).request("fan", True, "telegram:42")
    finally:
        db.close()
    minutes = round(loaded.hardware.approval_timeout_s / 60)
    out = run(shell, "approvals", "list")
    assert out.returncode == 0, out.stderr
    (line,) = [line for line in out.stdout.splitlines() if pending.id in line]
    # at the appliance's time, its zone named, as the notifications show it (walk 9: the machine's UTC beside CET)
    from datetime import datetime

    from appliance.schedule.parse import resolve_zone

    at = datetime.fromtimestamp(pending.expires_at, resolve_zone(loaded.scheduler.timezone))
    assert re.search(rf"expires in {minutes} min \(at {at:%H:%M %Z}\)", line) or re.search(
        rf"expires in {minutes - 1} min \(at {at:%H:%M %Z}\)", line
    ), line


# --- the status page's recent replies ------------------------------------------------------------------------


def test_recent_replies_survive_a_restart(runtime: Runtime) -> None:
    async def main() -> list[dict[str, Any]]:
        await runtime.agent.turn("turn the fan on", channel="api", chat_id="before")
        auth = Auth(runtime.db)
        headers = {"Authorization": f"Bearer {auth.add_token('page', scope='read')}"}
        restarted = WebState(runtime, auth)  # a new daemon: nothing seen in this process yet
        async with TestClient(TestServer(build_app(restarted))) as client:
            status = await (await client.get("/api/status", headers=headers)).json()
        return list(status["recent"])

    recent = asyncio.run(main())
    assert recent, "the status page's Recent replies is empty after a restart"
    newest = recent[0]
    assert newest["route"] == "intent" and newest["session"] == "api:before" and "fan" in newest["reason"]
    assert newest["total_s"] is not None and newest["at"] > 0
