"""`picoagent tasks`, run as a subprocess: what a person reads when adding, listing, cancelling, following."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from appliance.memory.db import Database
from appliance.tasks import TaskStore
from tests.helpers import COMMAND, assert_clean_error, config_file, free_port, picoagent, wait_for

PLANNER = {'  model: ""': "  model: planner.gguf"}  # a model the catalog does not know: the owner's, trusted to plan


def tasks(tmp_path: Path, *args: str, model: dict[str, str] = PLANNER) -> subprocess.CompletedProcess[str]:
    config = config_file(tmp_path / "conf", model)
    return picoagent("--config", config, "--data-dir", tmp_path / "data", "tasks", *args, cwd=tmp_path)


def test_on_the_packaged_model_a_task_is_refused_saying_which_model_it_needs(tmp_path: Path) -> None:
    refused = tasks(tmp_path, "add", "compare", "the", "electricity", "tariffs", model={})
    assert_clean_error(refused, 2)
    assert refused.stderr.startswith(
        "error: tasks need a model that can plan and use tools, and smollm2-135m, the model on this Pi, cannot; "
        "the cloud may not work it either: no cloud provider is configured"
    ), refused.stderr
    assert "picoagent models pull qwen2.5-1.5b" in refused.stderr and "llm.model: qwen2.5-1.5b" in refused.stderr
    cloud = tasks(tmp_path, "add", "ask", "the", "cloud", "--route", "cloud", model={})
    assert_clean_error(cloud, 2)
    assert "a task cannot run on the cloud here: no cloud provider is configured" in cloud.stderr
    assert "--route auto" not in cloud.stderr  # walk 9: it was offered, and refused next on this model
    assert tasks(tmp_path, "list", model={}).stdout.strip() == "no tasks"


def test_add_list_status_cancel_and_logs(tmp_path: Path) -> None:
    added = tasks(tmp_path, "add", "research", "tomatoes", "--budget-tokens", "5000", "--max-steps", "4")
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines() == [
        "task 1 queued: research tomatoes",
        "  at most 4 steps, 5,000 tokens, route auto",
    ]
    refused = tasks(tmp_path, "add", "ask", "the", "cloud", "--route", "cloud")
    assert_clean_error(refused, 2)
    assert "a task cannot run on the cloud here: no cloud provider is configured" in refused.stderr
    assert "routing.cloud_provider" in refused.stderr and "or use --route auto" in refused.stderr  # the fixes
    bad = tasks(tmp_path, "add", "x", "--budget-tokens", "0")
    assert_clean_error(bad, 2)
    assert "a token budget must be at least 1, not 0" in bad.stderr
    listed = tasks(tmp_path, "list")
    assert listed.stdout.splitlines() == ["   1  pending    0 step(s)  0/5,000 tokens  research tomatoes"]
    status = tasks(tmp_path, "status")
    assert status.stdout.strip() == "pending 1  running 0  done 0  error 0  paused 0  cancelled 0"
    cancelled = tasks(tmp_path, "cancel", "1")
    assert cancelled.stdout.strip() == "task 1 cancelled (a running task stops after its current step)"
    again = tasks(tmp_path, "cancel", "1")
    assert_clean_error(again, 2)
    assert "task 1 is already cancelled" in again.stderr
    logs = tasks(tmp_path, "logs", "1", "--follow")  # an ended task: its log, then back at once
    assert logs.returncode == 0
    assert logs.stdout.splitlines() == ["   1  cancelled  0 step(s)  0/5,000 tokens  research tomatoes"]
    missing = tasks(tmp_path, "logs", "7")
    assert_clean_error(missing, 2)
    assert "no task 7" in missing.stderr


class Follower:
    """`tasks logs ID --follow` in the background, its lines gathered as they come."""

    def __init__(self, tmp_path: Path, task_id: int) -> None:
        config = config_file(tmp_path / "conf")
        env = {k: v for k, v in os.environ.items() if k != "PICOAGENT_CONFIG"}
        data = str(tmp_path / "data")
        self.process = subprocess.Popen(
            [*COMMAND, "--config", str(config), "--data-dir", data, "tasks", "logs", str(task_id), "--follow"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))


def test_logs_follow_prints_new_steps_until_the_task_ends_and_ctrl_c_ends_it_cleanly(tmp_path: Path) -> None:
    db = Database(tmp_path / "data" / "picoagent.db")
    store = TaskStore(db)
    task = store.add("water the plants")
    store.claim(task.id)
    follower = Follower(tmp_path, task.id)
    followers = [follower]
    try:
        wait_for(lambda: follower.lines, 30, "the task's first line")
        store.record_step(task.id, "thought", "the soil is dry", tokens=120)
        wait_for(lambda: "  1. [thought] the soil is dry" in follower.lines, 30, "the new step")
        store.record_step(task.id, "result", "watered", result="the plants are watered", tokens=80)
        assert follower.process.wait(30) == 0
        follower.reader.join(10)
        assert follower.lines == [
            "   1  running    0 step(s)  0 tokens  water the plants",
            "  1. [thought] the soil is dry",
            "  2. [result] watered",
            "   1  done       2 step(s)  200 tokens  water the plants: the plants are watered",
        ]
        second = store.add("wait for the rain")
        store.claim(second.id)
        interrupted = Follower(tmp_path, second.id)
        followers.append(interrupted)
        wait_for(lambda: interrupted.lines, 30, "the second task's first line")
        interrupted.process.send_signal(signal.SIGINT)
        assert interrupted.process.wait(30) == 0
        assert interrupted.process.stderr is not None and "Traceback" not in interrupted.process.stderr.read()
        assert store.get(second.id).state == "running"  # following never touches the task
    finally:
        for f in followers:
            if f.process.poll() is None:
                f.process.kill()
        db.close()


def test_a_long_result_of_several_lines_is_one_line_in_the_list(tmp_path: Path) -> None:
    """`tasks list` is a line per task, whatever the model wrote; `tasks list --json` keeps all of it."""
    assert tasks(tmp_path, "add", "list", "vegetables").returncode == 0
    db = Database(tmp_path / "data" / "picoagent.db")
    try:
        store = TaskStore(db)
        store.claim_next()
        store.finish(1, "Partial result: stopped.\nLast step (4): carrots,\n\nleeks " + "and more " * 40)
    finally:
        db.close()
    listed = tasks(tmp_path, "list").stdout.splitlines()
    assert len(listed) == 1 and listed[0].startswith("   1  done       0 step(s)")
    assert "stopped. Last step (4): carrots, leeks and more" in listed[0] and listed[0].endswith(
        "… (all of it: tasks logs 1)"
    )
    assert "and more " * 40 in " ".join(tasks(tmp_path, "list", "--json").stdout.split()) + " "


def test_tasks_run_closes_the_cloud_session_it_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tasks run` of an auto task on a cloud that cannot be reached: no "Unclosed client session" after it."""
    from appliance.cli import main as cli_main
    from appliance.llm.scripted import ScriptedModel
    from appliance.runtime import Runtime

    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: every attempt fails at once
    provider = f"providers:\n  dead:\n    type: openai\n    api_base: {dead}\n    model: m\n    api_key: sk-x\n"
    routing = {
        "providers: {}": provider,
        "  mode: local_only": "  mode: edge_first",
        '  cloud_provider: ""': "  cloud_provider: dead",
    }
    config = config_file(tmp_path / "conf", routing)
    opened: list[Runtime] = []
    open_runtime = Runtime.open

    def open_with_the_packaged_models_name(config: Any, **kw: Any) -> Runtime:
        runtime = open_runtime(config, model=ScriptedModel("smollm2-135m"), **kw)
        opened.append(runtime)
        return runtime

    monkeypatch.setattr(Runtime, "open", open_with_the_packaged_models_name)
    common = ["--config", str(config), "--data-dir", str(tmp_path / "data"), "tasks"]
    assert cli_main([*common, "add", "What is 2+2?", "--max-steps", "2", "--route", "auto"]) == 0
    assert cli_main([*common, "run"]) == 0
    assert opened and opened[-1].cloud is not None
    session = opened[-1].cloud.provider._session  # what the event loop's end would leave open
    assert session is None or session.closed


def test_a_task_job_run_by_hand_says_where_the_tasks_outcome_will_be(tmp_path: Path) -> None:
    """A README walk: `cron logs` read "task 3 queued" for a task that had since failed. The job only queues the
    task, so its result names where the task's own outcome is read, before the goal: `cron logs` cuts the line."""
    config = config_file(
        tmp_path / "conf",
        {"  jobs: []": '  jobs:\n    - {id: tidy, schedule: "daily 03:00", task: "tidy the notes"}'},
    )
    ran = picoagent("--config", config, "--data-dir", tmp_path / "data", "cron", "run", "tidy", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == (
        "task 1 queued (`picoagent tasks run` works it here; see `picoagent tasks logs 1`): tidy the notes"
    ), ran.stdout
    logs = picoagent("--config", config, "--data-dir", tmp_path / "data", "cron", "logs", "tidy", cwd=tmp_path)
    assert "see `picoagent tasks logs 1`)" in logs.stdout, logs.stdout  # not cut off with the line
