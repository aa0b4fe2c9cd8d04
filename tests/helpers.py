"""What several suites share: running the `picoagent` command, config files, a free port, waiting for a
daemon's /healthz or any other condition, the bubblewrap marker and a unit file's settings. Suites import
these from here, never from one another (agents the tests drive are in tests/agents.py, fakes of the
boundaries in tests/fakes/)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from appliance.config import CHECKOUT_CONFIG
from appliance.tools import sandbox

if TYPE_CHECKING:
    from appliance.channels.web.state import Automation
    from appliance.hardware.drivers.base import Reading
    from appliance.llm.runner_client import Pending

ROOT = Path(__file__).resolve().parent.parent
VENV_COMMAND = ROOT / ".venv" / "bin" / "picoagent"
COMMAND = [str(VENV_COMMAND)] if VENV_COMMAND.exists() else [sys.executable, "-m", "appliance"]


def picoagent(
    *args: str | Path, cwd: Path, timeout: float = 60, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the command with no config from the environment; cwd is a tmp folder; ``stdin`` is typed into it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PICOAGENT_CONFIG", "PICOAGENT_MODEL_MIRROR")}
    return subprocess.run(
        [*COMMAND, *map(str, args)],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def config_file(folder: Path, replace: dict[str, str] | None = None, extra: str = "") -> Path:
    """A copy of the shipped config in `folder`, with whole lines replaced and text appended."""
    folder.mkdir(parents=True, exist_ok=True)
    text = CHECKOUT_CONFIG.read_text(encoding="utf-8")
    for old, new in (replace or {}).items():
        assert old in text, f"the shipped config no longer has the line {old!r}"
        text = text.replace(old, new)
    path = folder / "picoagent.yaml"
    path.write_text(text + extra, encoding="utf-8")
    return path


def assert_clean_error(out: subprocess.CompletedProcess[str], code: int) -> None:
    assert out.returncode == code, out.stderr
    assert out.stderr.startswith("error: "), out.stderr
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout


def by_quantity(readings: Iterable[Reading]) -> dict[str, float | bool]:
    """A device's or driver's readings as {quantity: value}."""
    return {reading.quantity: reading.value for reading in readings}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(condition: Callable[[], object], timeout: float = 10.0, what: str = "the condition") -> None:
    """Until ``condition()`` is true; an AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.02)


async def eventually(condition: Callable[[], object], timeout: float = 10.0, what: str = "the condition") -> None:
    """:func:`wait_for` inside an event loop: the loop runs while it waits."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        await asyncio.sleep(0.01)


async def started(daemon: Any, served: asyncio.Future[Any], timeout: float = 20.0) -> None:
    """Until ``daemon`` (an appliance.daemon.Daemon whose run() is ``served``) is ready; its error if it ended."""
    ready = asyncio.ensure_future(daemon.ready.wait())
    await asyncio.wait([ready, served], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if served.done():
        served.result()  # the daemon's own error, when it failed to start
    assert daemon.ready.is_set(), f"the daemon was not ready within {timeout} s"


def runner_generations(monkeypatch: pytest.MonkeyPatch) -> list[Pending]:
    """Every generation sent to a model runner from now on, as it is sent (its ``logprobs`` grow per token)."""
    from appliance.llm.runner_client import ModelRunner

    sent: list[Pending] = []
    send = ModelRunner.request

    def recorded(runner: ModelRunner, what: str, message: tuple[Any, ...], pending: Pending | None = None) -> Any:
        if pending is not None and what == "generation":
            sent.append(pending)
        return send(runner, what, message, pending)

    monkeypatch.setattr(ModelRunner, "request", recorded)
    return sent


def wait_healthy(port: int, timeout: float = 15.0, *, tls_data: Path | None = None) -> None:
    """Until /healthz answers 200; over HTTPS trusting only the certificate in ``tls_data`` when given."""
    from appliance.channels.web.certificate import read_certificate

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        certificate = read_certificate(tls_data) if tls_data is not None else None
        try:
            if tls_data is not None and certificate is None:
                raise OSError("no certificate yet")
            url = f"{'https' if certificate else 'http'}://127.0.0.1:{port}/healthz"
            context = certificate.client_context() if certificate else None
            with urllib.request.urlopen(url, timeout=1, context=context) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing healthy on port {port}")


# Suites whose tests need bubblewrap skip them, saying why, where it cannot run at all. Only there: a
# sandbox whose own command line fails (sandbox.check) fails its tests, it does not skip them.
_MACHINE = sandbox.machine_problem()
needs_bwrap = pytest.mark.skipif(_MACHINE is not None, reason=f"bubblewrap cannot run on this machine: {_MACHINE}")


def serve_log_line(config: Path, folder: Path, text: str) -> str:
    """Start `serve` with ``config`` (data in ``folder``/data), wait for a log line holding ``text``, stop it
    (SIGTERM, exit 0) and return that one line."""
    port, log = free_port(), folder / "serve.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PICOAGENT_CONFIG", "NOTIFY_SOCKET", "WATCHDOG_USEC")}
    command = [sys.executable, "-m", "appliance", "--config", str(config), "--data-dir", str(folder / "data")]
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*command, "serve", "--host", "127.0.0.1", "--port", str(port)], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    try:
        wait_healthy(port)
        wait_for(lambda: text in log.read_text(), what=f"a log line with {text!r}")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    (line,) = [line for line in log.read_text().splitlines() if text in line]
    return line


def write(folder: Path, text: str, *, secrets: str | None = None, name: str = "picoagent.yaml") -> Path:
    """A config file (and optionally its secrets.env) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    if secrets is not None:
        (folder / "secrets.env").write_text(secrets, encoding="utf-8")
    return path


def settings_of(path: Path) -> dict[str, list[str]]:
    """A unit file's settings: each key with its values in order."""
    found: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            found.setdefault(key, []).append(value)
    return found


def modules_loaded_by_serve(config: Path, data_dir: Path, prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with ``prefixes`` that a daemon on ``config`` has loaded once it is ready.

    The daemon runs in a fresh interpreter (this one has imported everything already); the modules are listed
    once every background loop has begun (each has run up to its first wait), not after a guessed pause. The
    idle daemon's memory is at its limit, so suites check with this that what a section needs loads only when
    the section is on.
    """
    import json

    script = f"""
import asyncio, inspect, json, sys
from appliance.config import load_config
from appliance.daemon import Daemon
from appliance.lifecycle import Loop

def begun(loop):
    coro = loop.task.get_coro() if isinstance(loop.task, asyncio.Task) else None
    return not inspect.iscoroutine(coro) or inspect.getcoroutinestate(coro) != inspect.CORO_CREATED

async def main():
    config = load_config({str(config)!r}, data_dir={str(data_dir)!r})
    config.llm.preload = False
    daemon = Daemon(config, host="127.0.0.1", port=0)
    served = asyncio.ensure_future(daemon.run())
    await daemon.ready.wait()
    loops = [s for s in daemon.services.started if isinstance(s, Loop)]
    assert loops, "a ready daemon runs background loops"
    while not all(begun(loop) for loop in loops):
        await asyncio.sleep(0)
    print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))
    daemon.stopping.set()
    assert await served == 0

asyncio.run(main())
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PICOAGENT_CONFIG", "NOTIFY_SOCKET", "WATCHDOG_USEC")}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


AUTOMATION_NOW = 1_795_000_000.0  # 2026-11-18: a fixed instant for the scheduler, so next runs are exact


def automation_on(db: Any, run_job: Callable[[Any], Any]) -> Automation:
    """A real Scheduler (one job, "water", on a fixed clock) and a real TaskStore on ``db``, as the daemon gives
    them to /api/cron and /api/tasks (``WebState(..., automation=...)``); ``run_job`` runs a job when asked."""
    from appliance.channels.web.state import Automation
    from appliance.config import CronJob
    from appliance.schedule.scheduler import Scheduler
    from appliance.tasks import TaskStore

    cron = Scheduler(
        [CronJob(id="water", schedule="daily 07:00", prompt="water the plants")],
        tz="UTC",
        run_job=run_job,
        notify=None,
        db=db,
        clock=lambda: AUTOMATION_NOW,
        devices=["fan", "porch_light"],
    )
    return Automation(cron, TaskStore(db))


@contextmanager
def serving(folder: Path, config_text: str, password: str) -> Iterator[tuple[str, Path, list[str]]]:
    """`picoagent serve` (a subprocess, stopped by its PID) on ``config_text`` written into ``folder``, with the web
    password set: its base URL, the config file and the CLI for it. A daemon that exits unclean fails the test."""
    config = folder / "picoagent.yaml"
    config.write_text(config_text)
    env = {k: v for k, v in os.environ.items() if k != "PICOAGENT_CONFIG"}
    cli = [sys.executable, "-m", "appliance", "--config", str(config), "--data-dir", str(folder / "data")]
    subprocess.run([*cli, "passwd", "--stdin"], input=password + "\n", text=True, env=env, check=True, timeout=60)
    port, log_path = free_port(), folder / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*cli, "serve", "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env
        )
    try:
        wait_healthy(port)
        yield f"http://127.0.0.1:{port}", config, cli
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log_path.read_text()
