"""`picoagent serve` as a process: systemd notify, signals, config reload, status, clear start errors."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import pty
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.config import CHECKOUT_CONFIG, Config
from tests.helpers import (
    eventually,
    free_port,
    modules_loaded_by_serve,
    runner_generations,
    started,
    wait_for,
    wait_healthy,
)

ROOT = Path(__file__).resolve().parent.parent


def write_config(path: Path, extra: str = "") -> Path:
    text = CHECKOUT_CONFIG.read_text().replace("preload: true", "preload: false")
    path.write_text(text + extra)
    return path


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PICOAGENT_CONFIG", "NOTIFY_SOCKET", "WATCHDOG_USEC")}
    return {**base, **extra}


class Serve:
    """A `picoagent serve` subprocess with its own config and data dir."""

    def __init__(self, tmp: Path, port: int, *, tls: bool = False, data: Path | None = None, **environ: str) -> None:
        self.config = write_config(tmp / "picoagent.yaml")
        if tls:
            self.config.write_text(self.config.read_text().replace("tls: off", "tls: auto"))
        self.data = data or tmp / "data"
        self.port = port
        self.log = tmp / "serve.log"
        cmd = [sys.executable, "-m", "appliance", "--config", str(self.config), "--data-dir", str(self.data)]
        self.proc = subprocess.Popen(
            [*cmd, "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env(**environ),
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )

    def text(self) -> str:
        return self.log.read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    daemon = Serve(tmp_path, free_port())
    wait_healthy(daemon.port)
    yield daemon
    daemon.stop()


def cli(*args: str, data: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "appliance", "--config", str(config), "--data-dir", str(data), *args],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sighup_with_a_broken_config_keeps_serving(serve: Serve) -> None:
    good = serve.config.read_text()
    serve.config.write_text(good.replace("max_rounds: 4", "max_rounds: five"))
    serve.proc.send_signal(signal.SIGHUP)
    refused = 'refused, keeping the running one: agent.max_rounds: expected an integer, got "five"'
    wait_for(lambda: refused in serve.text(), what="the broken config's refusal in the log")
    wait_healthy(serve.port, timeout=2)
    # status reads the same file: it says what is wrong and that the daemon keeps its config, in JSON too
    said = cli("status", data=serve.data, config=serve.config)
    assert said.returncode == 2 and 'agent.max_rounds: expected an integer, got "five"' in said.stderr, said
    assert "fix: correct that value in the config file; if picoagent is running, it keeps" in said.stderr
    as_json = cli("status", "--json", data=serve.data, config=serve.config)
    answer = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and answer["running"] is None, answer
    assert answer["error"].startswith("the config is refused: agent.max_rounds") and "reload" in answer["fix"]
    serve.config.write_text(good.replace("max_rounds: 4", "max_rounds: 3"))
    serve.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "config reloaded" in serve.text(), what="the reload")
    wait_healthy(serve.port, timeout=2)
    assert serve.stop() == 0
    assert "Traceback" not in serve.text()


def test_status_reads_the_running_daemon_and_says_when_it_is_not(serve: Serve) -> None:
    shown = cli("status", data=serve.data, config=serve.config)
    assert shown.returncode == 0, shown.stderr
    assert "model: smollm2-135m (not loaded)" in shown.stdout
    # The model is not loaded (preload: false here): no prefix state yet, no local turn in the last hour.
    assert "prompt cache: no local turns in the last hour · prefix none · 0.0 MB in 0 state(s)" in shown.stdout
    as_json = json.loads(cli("status", "--json", data=serve.data, config=serve.config).stdout)
    assert as_json["model"]["name"] == "smollm2-135m" and as_json["version"]
    assert serve.stop() == 0
    assert not (serve.data / "daemon.json").exists() and not (serve.data / "cli.token").exists()
    gone = cli("status", data=serve.data, config=serve.config)
    assert gone.returncode == 3 and "not running" in gone.stdout


def test_sigterm_exits_zero_and_a_second_daemon_on_the_port_fails_clearly(serve: Serve, tmp_path: Path) -> None:
    second = tmp_path / "second"
    second.mkdir()
    other = Serve(second, serve.port)
    assert other.proc.wait(timeout=30) == 1
    assert f"error: cannot listen on 127.0.0.1:{serve.port}" in other.text()
    assert "Traceback" not in other.text()
    assert serve.stop() == 0
    assert "stopped" in serve.text()


def test_a_second_daemon_on_the_same_data_dir_refuses_and_touches_nothing(serve: Serve, tmp_path: Path) -> None:
    """`make run`, then `picoagent serve --port 9000` on the same data dir: one daemon per data dir."""
    info, token = (serve.data / "daemon.json").read_text(), (serve.data / "cli.token").read_text()
    second = tmp_path / "second"
    second.mkdir()
    other = Serve(second, free_port(), data=serve.data)
    try:
        assert other.proc.wait(timeout=30) == 2, other.text()
    finally:
        other.stop()
    said = other.text()
    assert said.startswith("error: picoagent is already running on this data dir"), said
    assert f"pid {serve.proc.pid}" in said and f"http://127.0.0.1:{serve.port}" in said
    assert "fix:" in said and "--data-dir" in said and "Traceback" not in said
    # The first daemon's files, token and CLI stay as they were.
    assert (serve.data / "daemon.json").read_text() == info and (serve.data / "cli.token").read_text() == token
    assert "fan: state:" in cli("devices", "read", "fan", data=serve.data, config=serve.config).stdout
    assert cli("status", data=serve.data, config=serve.config).returncode == 0
    assert serve.stop() == 0


def test_a_killed_daemon_does_not_block_the_next_one(tmp_path: Path) -> None:
    """The lock is the kernel's: it goes with the process, even at SIGKILL, and daemon.json left behind is stale."""
    first = Serve(tmp_path, free_port())
    wait_healthy(first.port)
    first.proc.kill()
    first.proc.wait(timeout=10)
    assert (first.data / "daemon.json").exists()
    (tmp_path / "again").mkdir()
    again = Serve(tmp_path / "again", free_port(), data=first.data)
    try:
        wait_healthy(again.port)
        assert cli("status", data=first.data, config=again.config).returncode == 0
    finally:
        assert again.stop() == 0


def test_systemd_notify_ready_watchdog_and_stopping(tmp_path: Path) -> None:
    address = str(tmp_path / "notify.sock")
    sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sink.bind(address)
    sink.settimeout(15)
    daemon = Serve(tmp_path, free_port(), NOTIFY_SOCKET=address, WATCHDOG_USEC="200000")
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and seen.count("WATCHDOG=1") < 2:
            seen += sink.recv(4096).decode().split("\n")
        assert "READY=1" in seen
        assert any(line.startswith("STATUS=serving on 127.0.0.1") for line in seen)
        assert seen.count("WATCHDOG=1") >= 2  # pinged every WATCHDOG_USEC / 2
        assert daemon.stop() == 0
        rest: list[str] = []
        sink.settimeout(2)
        try:
            while "STOPPING=1" not in rest:
                rest += sink.recv(4096).decode().split("\n")
        except TimeoutError:
            pass
        assert "STOPPING=1" in rest
    finally:
        daemon.stop()
        sink.close()


def passwd(data: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`picoagent passwd ARGS` on a data dir (the checkout's config)."""
    return subprocess.run(
        [sys.executable, "-m", "appliance", "--data-dir", str(data), "passwd", *args],
        input=stdin,
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_first_password_goes_to_a_private_file_and_show_initial_reads_it_until_it_is_changed(
    tmp_path: Path,
) -> None:
    daemon = Serve(tmp_path, free_port())
    try:
        wait_healthy(daemon.port)
    finally:
        assert daemon.stop() == 0
    kept = daemon.data / "initial-password"
    assert kept.stat().st_mode & 0o777 == 0o600
    password = kept.read_text().strip()
    assert len(password) >= 16
    # Not a terminal (systemd's journal, a log file): the log says where the password is, never what it is.
    assert password not in daemon.text()
    assert "picoagent passwd --show-initial" in daemon.text()
    shown = passwd(daemon.data, "--show-initial")
    assert shown.returncode == 0 and shown.stdout.splitlines()[0] == password, shown.stderr
    # A second start keeps the password and says nothing more about it.
    again = Serve(tmp_path, free_port())
    try:
        wait_healthy(again.port)
    finally:
        assert again.stop() == 0
    assert kept.read_text().strip() == password and "--show-initial" not in again.text()

    changed = passwd(daemon.data, "--stdin", stdin="a much better password\n")
    assert changed.returncode == 0 and "web password set" in changed.stdout
    assert not kept.exists()
    gone = passwd(daemon.data, "--show-initial")
    assert gone.returncode == 2 and "was changed" in gone.stderr and "picoagent passwd" in gone.stderr
    short = passwd(daemon.data, "--stdin", stdin="short\n")
    assert short.returncode == 2 and "error:" in short.stderr and "Traceback" not in short.stderr


def test_the_first_password_is_in_no_log_record_at_any_level(config: Config, caplog: pytest.LogCaptureFixture) -> None:
    from appliance.daemon import Daemon

    caplog.set_level(logging.DEBUG)
    config.llm.preload = False

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        daemon.stopping.set()
        assert await served == 0

    asyncio.run(main())
    password = (config.resolve_path(config.data_dir) / "initial-password").read_text().strip()
    assert caplog.records
    leaked = [r for r in caplog.records if password in r.getMessage() or password in repr(r.args)]
    assert not leaked, [r.getMessage() for r in leaked]


def test_a_memory_extraction_in_flight_at_sigterm_ends_before_the_model_and_logs_no_error(
    config: Config, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopping with the memory keeper's background extraction waiting on the model runner: the extraction is
    cancelled and awaited before the runtime closes the runner and the database, and no ERROR is logged
    (it was asyncio's "Future exception was never retrieved ... ModelCrashed: the model runner was stopped")."""
    from appliance.daemon import Daemon

    monkeypatch.setenv("PICOAGENT_RUNNER_FAULT", "slow")  # 0.2 s a token: the extraction is still generating
    caplog.set_level(logging.DEBUG)
    config.llm.preload = False
    left: list[object] = []
    generations = runner_generations(monkeypatch)

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0)
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        runtime = daemon.runtime
        keeper = runtime.agent.memory
        assert keeper is not None
        conversation = runtime.db.conversation("web", "sigterm")
        for i in range(config.memory.extract_after_messages):
            runtime.db.add_message(conversation, "user", f"My cat Miso sleeps on the boiler, note {i}.")
        keeper.after_turn(conversation, 0)
        await eventually(lambda: runtime.model_queue.busy, timeout=30, what="the extraction's generation")
        # The request is in the runner: its tokens are coming back.
        await eventually(lambda: any(p.logprobs for p in generations), timeout=60, what="the runner generating")
        daemon.stopping.set()
        assert await served == 0
        left.extend(task for task in keeper.background if not task.done())

    asyncio.run(main())
    gc.collect()  # an unretrieved future says so when it is collected
    assert left == []  # not left for asyncio.run to cancel after the runner and the database are gone
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    assert not [r for r in caplog.records if "memory upkeep" in r.getMessage()]  # cancelled, not failed


def test_on_a_terminal_the_first_password_is_printed_once(tmp_path: Path) -> None:
    """`make run` in a terminal: the person who started it sees the password there, once."""
    config = write_config(tmp_path / "picoagent.yaml")

    def start_on_a_terminal() -> str:
        port = free_port()
        leader, follower = pty.openpty()
        argv = [sys.executable, "-m", "appliance", "--config", str(config), "--data-dir", str(tmp_path / "data")]
        proc = subprocess.Popen(
            [*argv, "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env(), stdin=follower, stdout=follower, stderr=follower,
        )  # fmt: skip
        os.close(follower)
        seen = b""
        try:
            wait_healthy(port, timeout=30)
            proc.send_signal(signal.SIGTERM)
            while True:  # read until the daemon exits and the terminal closes
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # EIO: every writer is gone
                    break
                if not chunk:
                    break
                seen += chunk
        finally:
            proc.wait(timeout=30)
            os.close(leader)
        return seen.decode(errors="replace")

    first = start_on_a_terminal()
    password = (tmp_path / "data" / "initial-password").read_text().strip()
    assert first.count(password) == 1, first
    second = start_on_a_terminal()
    assert password not in second and "stopped" in second


def test_tokens_are_shown_once_listed_without_values_and_revocable(tmp_path: Path) -> None:
    config = write_config(tmp_path / "picoagent.yaml")
    data = tmp_path / "data"
    added = cli("tokens", "add", "grafana", data=data, config=config)
    assert added.returncode == 0 and added.stdout.startswith("pat_")
    token = added.stdout.strip()
    listed = cli("tokens", "list", data=data, config=config)
    assert "grafana" in listed.stdout and token not in listed.stdout
    assert cli("tokens", "revoke", "grafana", data=data, config=config).returncode == 0
    again = cli("tokens", "revoke", "grafana", data=data, config=config)
    assert again.returncode == 2 and "no token named" in again.stderr


def test_a_token_made_elsewhere_is_adopted_from_stdin(tmp_path: Path) -> None:
    """The image's first boot adopts the api_token written into picoagent-setup.yaml."""
    from appliance.channels.web.auth import Auth
    from appliance.memory.db import Database

    config = write_config(tmp_path / "picoagent.yaml")
    data = tmp_path / "data"
    token = "pat_" + "x" * 32

    def add(value: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "appliance", "--config", str(config), "--data-dir", str(data)]
        return subprocess.run(
            [*argv, "tokens", "add", "setup", "--stdin"],
            input=value + "\n", cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    short = add("pat_short")
    assert short.returncode == 2 and "at least 20 more characters" in short.stderr
    added = add(token)
    assert added.returncode == 0 and token not in added.stdout + added.stderr
    db = Database(data / "picoagent.db")
    try:
        assert Auth(db).check_token(token) is not None
    finally:
        db.close()


@pytest.fixture
def slow_serve(tmp_path: Path) -> Iterator[Serve]:
    """A daemon whose model takes 0.2 s a token: its story outlasts a client on any CPU (the CI's finished in 2.5 s)."""
    daemon = Serve(tmp_path, free_port(), PICOAGENT_RUNNER_FAULT="slow")
    wait_healthy(daemon.port)
    yield daemon
    daemon.stop()


def test_a_dropped_request_stops_its_turn_in_the_daemon(slow_serve: Serve) -> None:
    """The daemon's runner cancels handlers whose client went away, so the model is not kept busy."""
    serve = slow_serve
    token = (serve.data / "cli.token").read_text().strip()
    request = urllib.request.Request(
        f"http://127.0.0.1:{serve.port}/api/chat",
        data=json.dumps({"message": "Write a very long story about a dragon.", "session": "drop"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with pytest.raises(TimeoutError):
        urllib.request.urlopen(request, timeout=2.5)  # the model loads (~0.5 s), then starts its slow story
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        history = urllib.request.Request(
            f"http://127.0.0.1:{serve.port}/api/history?channel=api&session=drop",
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(history, timeout=2) as response:
            messages = json.loads(response.read())["messages"]
        if len(messages) == 2:
            break
        time.sleep(0.1)
    assert messages[-1]["content"].endswith("[stopped]")


def test_device_commands_go_through_the_running_daemon(serve: Serve) -> None:
    """The daemon owns the pins: a `devices set` from the CLI is the daemon's write, seen by the next read."""
    assert "state: on" in cli("devices", "set", "fan", "on", data=serve.data, config=serve.config).stdout
    assert "fan: state: on" in cli("devices", "read", "fan", data=serve.data, config=serve.config).stdout
    listed = cli("devices", "list", data=serve.data, config=serve.config)
    assert "fan" in listed.stdout and "state: on" in listed.stdout
    # A write that needs approval, asked over the API, then approved from the CLI.
    token = (serve.data / "cli.token").read_text().strip()
    request = urllib.request.Request(
        f"http://127.0.0.1:{serve.port}/api/devices/porch_light",
        data=json.dumps({"value": "on"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200  # porch_light needs no approval in the default config
    assert (
        "porch_light: state: on" in cli("devices", "read", "porch_light", data=serve.data, config=serve.config).stdout
    )
    assert "nothing is waiting" in cli("approvals", "list", data=serve.data, config=serve.config).stdout


def test_chat_goes_through_the_running_daemon_which_owns_the_pins_and_the_model(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`chat -m` beside a running daemon is the daemon's turn: its devices switch, its history keeps the chat's
    session, and the chat process opens no runtime of its own (no second model, no second pin driver)."""
    from appliance.cli import main
    from appliance.runtime import Runtime

    def no_runtime(*args: object, **kwargs: object) -> Runtime:
        raise AssertionError("the chat opened a runtime of its own beside the daemon")

    monkeypatch.setattr(Runtime, "open", no_runtime)
    where = ["--config", str(serve.config), "--data-dir", str(serve.data)]
    assert main([*where, "chat", "-m", "turn on the fan", "--session", "kitchen"]) == 0
    said = capsys.readouterr().out
    assert "fan" in said and "on" in said, said
    assert "fan: state: on" in cli("devices", "read", "fan", data=serve.data, config=serve.config).stdout
    assert main([*where, "chat", "-m", "turn off the fan", "--json", "--session", "kitchen"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert list(record) == [
        "text", "route", "reason", "actions", "timings", "model", "session",
        "finish_reason", "confidence", "why", "blocked", "choices",
    ]  # fmt: skip
    assert record["route"] == "intent" and record["actions"][0]["arguments"] == {"name": "fan", "value": "off"}
    assert "fan: state: off" in cli("devices", "read", "fan", data=serve.data, config=serve.config).stdout
    token = (serve.data / "cli.token").read_text().strip()
    history = urllib.request.Request(
        f"http://127.0.0.1:{serve.port}/api/history?channel=terminal&session=kitchen",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(history, timeout=5) as response:
        messages = json.loads(response.read())["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["turn on the fan", "turn off the fan"]


def test_the_interactive_chat_through_the_daemon_reads_lines_commands_and_leaves_on_eof(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`picoagent chat` (no -m) beside the daemon: the loop the in-process chat has, each turn the daemon's."""
    import builtins

    from appliance.cli import main

    lines = iter(["turn on the fan", "/help", "/private on", "/bogus", "/reset", ""])

    def read(prompt: str) -> str:
        assert prompt == "you> "
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr(builtins, "input", read)
    where = ["--config", str(serve.config), "--data-dir", str(serve.data)]
    assert main([*where, "chat", "--session", "hall"]) == 0
    said = capsys.readouterr().out
    assert said.startswith("picoagent · through the running daemon · local model ")
    assert "Commands:\n  /help" in said and "(this chat stays on the Pi)" in said and "(conversation reset)" in said
    assert "unknown command /bogus; /help lists them" in said
    assert "fan: state: on" in cli("devices", "read", "fan", data=serve.data, config=serve.config).stdout


def test_a_chat_given_another_config_than_the_daemons_is_told_which_applies(
    serve: Serve, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A walk: `--config config/try.yaml` (the cloud on) beside `make run`'s daemon on the same data dir was
    answered "the cloud is switched off here": the daemon's config applied, and nothing said so."""
    import shutil

    from appliance.cli import main

    other = serve.config.parent / "try.yaml"
    shutil.copy(serve.config, other)
    assert main(["--config", str(other), "--data-dir", str(serve.data), "chat", "-m", "what time is it?"]) == 0
    said = capsys.readouterr()
    assert f"note: the daemon serving this data dir runs on {serve.config.resolve()}" in said.err
    assert f"its config applies, not {other.resolve()}" in said.err and said.out.startswith("It's ")
    assert main(["--config", str(serve.config), "--data-dir", str(serve.data), "chat", "-m", "hi there"]) == 0
    assert "note:" not in capsys.readouterr().err  # the same config: nothing to say


def test_tokens_get_a_scope_that_is_listed_and_can_be_changed(tmp_path: Path) -> None:
    config = write_config(tmp_path / "picoagent.yaml")
    data = tmp_path / "data"
    assert cli("tokens", "add", "openai-client", data=data, config=config).returncode == 0
    added = cli("tokens", "add", "home-assistant", "--scope", "devices", data=data, config=config)
    assert added.returncode == 0 and "scope devices" in added.stderr
    listed = cli("tokens", "list", data=data, config=config).stdout.splitlines()
    assert listed[0].split()[:2] == ["openai-client", "chat"]  # the default: chatting only
    assert listed[1].split()[:2] == ["home-assistant", "devices"]
    assert cli("tokens", "scope", "openai-client", "read", data=data, config=config).returncode == 0
    assert cli("tokens", "list", data=data, config=config).stdout.split()[:2] == ["openai-client", "read"]
    wrong = cli("tokens", "add", "x", "--scope", "root", data=data, config=config)
    assert wrong.returncode == 2 and "invalid choice: 'root'" in wrong.stderr
    missing = cli("tokens", "scope", "nobody", "chat", data=data, config=config)
    assert missing.returncode == 2 and "no token named 'nobody'" in missing.stderr


def test_with_tls_auto_status_shows_the_https_url_and_fingerprint_the_curl_command_works_and_http_redirects(
    tmp_path: Path,
) -> None:
    from appliance.channels.web.certificate import read_certificate

    daemon = Serve(tmp_path, free_port(), tls=True)
    try:
        wait_healthy(daemon.port, timeout=30, tls_data=daemon.data)
        certificate = read_certificate(daemon.data)
        assert certificate is not None and "127.0.0.1" in certificate.addresses
        shown = cli("status", data=daemon.data, config=daemon.config)
        assert shown.returncode == 0, shown.stderr
        assert "(HTTPS; plain http:// is redirected)" in shown.stdout and "web: https://" in shown.stdout
        assert f"public key SHA-256: {certificate.fingerprint}" in shown.stdout
        command = next(line.strip() for line in shown.stdout.splitlines() if line.strip().startswith("curl "))
        # The printed command, as printed, against this daemon (its URL names the .local host: ask 127.0.0.1).
        argv = [*command.split()[:-1], f"https://127.0.0.1:{daemon.port}/healthz"]
        if shutil.which("curl"):
            pinned = subprocess.run(["curl", "-sS", *argv[1:]], capture_output=True, text=True, timeout=30)
            assert pinned.returncode == 0 and '"status": "ok"' in pinned.stdout, pinned.stderr
            plain = subprocess.run(
                ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}",
                 f"http://127.0.0.1:{daemon.port}/healthz"],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
            assert plain.stdout == f"308 https://127.0.0.1:{daemon.port}/healthz", plain.stderr
        as_json = json.loads(cli("status", "--json", data=daemon.data, config=daemon.config).stdout)
        assert as_json["web"]["tls"] is True and as_json["web"]["certificate"]["pin"] == certificate.pin
        first = passwd(daemon.data, "--config", str(daemon.config), "--show-initial")
        assert first.returncode == 0 and certificate.fingerprint in first.stdout, first.stderr
        devices = cli("devices", "set", "fan", "on", data=daemon.data, config=daemon.config)
        assert "state: on" in devices.stdout, devices.stderr  # the CLI talks to the daemon over HTTPS
    finally:
        assert daemon.stop() == 0
    log = daemon.text()
    assert f"serving on https://127.0.0.1:{daemon.port}" in log and certificate.fingerprint in log
    assert "Traceback" not in log


def test_a_plain_http_daemon_never_loads_the_certificate_code(tmp_path: Path) -> None:
    """cryptography's x509 costs ~8 MiB of resident memory: with web.tls: off it stays unloaded, renewal included."""
    config = write_config(tmp_path / "picoagent.yaml")
    assert modules_loaded_by_serve(config, tmp_path / "data", ("cryptography", "appliance.channels.web.cert")) == []


def test_sighup_says_weight_repacking_applies_at_the_next_restart(serve: Serve) -> None:
    """The model runner was started with the running setting: a reload says so rather than start another."""
    good = serve.config.read_text()
    assert "  weight_repack: auto\n" in good
    serve.config.write_text(good.replace("  weight_repack: auto\n", "  weight_repack: off\n"))
    serve.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "config reloaded" in serve.text(), what="the reload")
    assert "SIGHUP: llm.weight_repack: restart needed" in serve.text()
    assert "llm settings changed" not in serve.text()  # no second model (nor runner) for it
    assert serve.stop() == 0
