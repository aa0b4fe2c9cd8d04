"""The README's hardware commands on the simulated backend with no daemon: each `picoagent` command is its own
process, and a switch set by one is still set when the next one reads it (and when `serve` starts).

Real CLI subprocesses on a copy of the checkout's config (simulated backend), one data dir.
"""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request
from pathlib import Path

from tests.helpers import COMMAND, ROOT, config_file, free_port, picoagent, wait_healthy

LAMP = "devices:\n  desk_lamp:\n    driver: led\n    pin: 6\n"


def run(tmp: Path, *args: str) -> str:
    """One `picoagent` command on this test's config and data dir; what it printed."""
    out = picoagent("--config", tmp / "picoagent.yaml", "--data-dir", tmp / "data", *args, cwd=tmp)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_switch_set_by_one_command_is_read_by_the_next(tmp_path: Path) -> None:
    config_file(tmp_path, {"devices:\n": LAMP})
    assert "fan: state: on" in run(tmp_path, "devices", "set", "fan", "on")
    assert run(tmp_path, "devices", "read", "fan") == "fan: state: on\n"
    run(tmp_path, "devices", "set", "desk_lamp", "40%")
    assert run(tmp_path, "devices", "read", "desk_lamp") == "desk_lamp: state: on, brightness: 40 %\n"
    listed = run(tmp_path, "devices", "list")
    assert "fan: state: on" in listed and "porch_light: state: off" in listed
    run(tmp_path, "devices", "set", "fan", "off")
    assert run(tmp_path, "devices", "read", "fan") == "fan: state: off\n"


def test_the_daemon_starts_with_the_simulated_switches_as_they_were_left_and_leaves_its_own(tmp_path: Path) -> None:
    config = config_file(tmp_path, {"preload: true": "preload: false"})
    data = tmp_path / "data"
    run(tmp_path, "devices", "set", "porch_light", "on")
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(
        [
            *COMMAND,
            "--config",
            str(config),
            "--data-dir",
            str(data),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_healthy(port)
        token = (data / "cli.token").read_text().strip()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/devices/porch_light", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            readings = json.loads(response.read())["readings"]
        assert readings == [{"quantity": "state", "value": True, "unit": ""}]
        assert "porch_light: state: off" in run(tmp_path, "devices", "set", "porch_light", "off")  # the daemon's write
    finally:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0
    assert run(tmp_path, "devices", "read", "porch_light") == "porch_light: state: off\n"
