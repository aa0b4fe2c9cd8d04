"""The right model for the board: the auto-choice table, and the daemon's background pull and switch.

The daemon runs in this process (appliance.daemon.Daemon) with the real packaged model; the mirror is a
real aiohttp server on 127.0.0.1 (tests/fakes/model_mirror.py) serving the packaged SmolLM2 file under a
test catalog entry for the name the board's choice picks: one monkeypatch of the catalog, one of the
board, the download through ``PICOAGENT_MODEL_MIRROR`` like a person's mirror.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from appliance.cli import main as cli_main
from appliance.config import Config
from appliance.llm import board, models
from appliance.llm.download import MIRROR_ENV, sha256_file
from appliance.model_fetch import ModelFetch, status_line
from tests.fakes.model_mirror import serving
from tests.helpers import eventually, started

GiB, MiB = board.GiB, board.MiB
PI3 = board.Board("Raspberry Pi 3 Model B Plus Rev 1.3", int(0.9 * GiB), 4)  # MemTotal of a 1 GB Pi 3
WANTED = board.choose_for(PI3)  # qwen2.5-0.5b, replaced in the catalog by the test entry
TEST_FILE = "test-wanted.Q4_1.gguf"


# --- the choice table -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mem", "cores", "name", "model"),
    [
        (int(7.6 * GiB), 4, "Raspberry Pi 5 Model B Rev 1.0", "qwen2.5-1.5b"),  # 8 GB Pi 5
        # Pi 5 by RAM, as its MemTotal reads (the firmware keeps a little): 16, 4 and 2 GB (D0 stepping)
        (16_381_440 * 1024, 4, "Raspberry Pi 5 Model B Rev 1.1", "qwen2.5-1.5b"),
        (4_045_632 * 1024, 4, "Raspberry Pi 5 Model B Rev 1.0", "qwen2.5-1.5b"),
        (2_000_912 * 1024, 4, "Raspberry Pi 5 Model B Rev 1.1", "qwen2.5-0.5b"),
        (int(3.7 * GiB), 4, "Raspberry Pi 4 Model B Rev 1.4", "qwen2.5-1.5b"),  # 4 GB Pi 4
        (3 * GiB, 4, "", "qwen2.5-1.5b"),  # the row's edge, an unknown board
        (3 * GiB - 1, 4, "Raspberry Pi 5 Model B Rev 1.0", "qwen2.5-0.5b"),
        (int(1.8 * GiB), 4, "Raspberry Pi 4 Model B Rev 1.4", "qwen2.5-0.5b"),  # 2 GB Pi 4
        (int(0.9 * GiB), 4, "Raspberry Pi 3 Model B Plus Rev 1.3", "qwen2.5-0.5b"),  # 1 GB Pi 3
        (768 * MiB, 1, "", "qwen2.5-0.5b"),
        (768 * MiB - 1, 4, "", "smollm2-135m"),
        (427 * MiB, 4, "Raspberry Pi Zero 2 W Rev 1.0", "smollm2-135m"),  # 512 MB
        (0, 1, "", "smollm2-135m"),  # MemTotal unknown: the packaged model
        (16 * GiB, 2, "AMD EPYC", "qwen2.5-0.5b"),  # plenty of RAM, 2 cores: too slow for 1.5B
        (4 * GiB, 4, "Raspberry Pi 3 Model B", "qwen2.5-0.5b"),  # a slow CPU stops at 0.5B
    ],
)
def test_the_choice_table(mem: int, cores: int, name: str, model: str) -> None:
    assert board.choose_model(mem, cores, name) == model


def test_every_model_the_table_picks_is_a_chat_model_that_fits_the_smallest_board_of_its_row() -> None:
    catalog = models.load_catalog()
    for tier in board.AUTO_TABLE[:-1]:
        entry = catalog[tier.model]
        assert entry.kind == "chat" and entry.chat, tier
        assert board.fits(entry.ram_mb, tier.min_mem_bytes), tier
    assert board.AUTO_TABLE[-1].model == models.default_model_name()  # the last row needs no download
    assert board.fits(catalog[models.default_model_name()].ram_mb, 427 * MiB)  # a Pi Zero 2 W's MemTotal
    assert not board.fits(catalog["qwen2.5-1.5b"].ram_mb, int(0.9 * GiB))


def test_the_board_is_read_from_proc(tmp_path: Path) -> None:
    pi = tmp_path / "pi"
    (pi / "device-tree").mkdir(parents=True)
    (pi / "device-tree" / "model").write_bytes(b"Raspberry Pi 4 Model B Rev 1.4\0")
    (pi / "meminfo").write_text("MemTotal:        3884376 kB\nMemFree:  100 kB\n")
    (pi / "cpuinfo").write_text("processor\t: 0\nModel\t\t: ignored when the device tree names it\n")
    here = board.read_board(pi)
    assert (here.name, here.mem_bytes) == ("Raspberry Pi 4 Model B Rev 1.4", 3884376 * 1024)
    x86 = tmp_path / "x86"
    x86.mkdir()
    (x86 / "cpuinfo").write_text("processor\t: 0\nmodel\t\t: 17\nmodel name\t: AMD EPYC 7B13\n")
    assert board.read_board(x86).name == "AMD EPYC 7B13"  # "model" is a number on x86, not the name
    assert board.read_board(x86).mem_bytes == 0  # no meminfo: unknown, and auto picks the packaged model
    arm = tmp_path / "arm"
    arm.mkdir()
    (arm / "cpuinfo").write_text("processor\t: 0\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 3 Model B Rev 1.2\n")
    assert board.read_board(arm).name == "Raspberry Pi 3 Model B Rev 1.2"


def test_the_status_line_says_each_state() -> None:
    pull = {"name": "qwen2.5-1.5b", "state": "downloading", "done_bytes": 250_000_000, "total_bytes": 10**9}
    assert status_line(pull) == "pulling qwen2.5-1.5b: 250.0 MB of 1.0 GB (25%)"
    assert status_line(None) is None
    failed = status_line({**pull, "state": "failed", "message": "the connection closed early"})
    assert failed == "pulling qwen2.5-1.5b failed (the connection closed early)"
    offline = status_line({**pull, "state": "no_network", "message": "host:443 is not reachable"})
    assert offline is not None and offline.startswith("no network: keeping the packaged model")


# --- the daemon ------------------------------------------------------------------------------------------


@pytest.fixture
def packaged(model_path: Path) -> Path:
    return model_path


@pytest.fixture
def on_a_1gb_pi3(monkeypatch: pytest.MonkeyPatch, packaged: Path) -> Iterator[None]:
    """This board is a 1 GB Pi 3, and the catalog's entry for its choice is the packaged file renamed."""
    real = models.load_catalog()
    entry = replace(
        real[WANTED],
        file=TEST_FILE,
        size_bytes=packaged.stat().st_size,
        sha256=sha256_file(packaged).hexdigest(),
        url="https://example.invalid/not-used-the-mirror-is",
    )
    monkeypatch.setattr(models, "load_catalog", lambda: {**real, WANTED: entry})
    monkeypatch.setattr(board, "read_board", lambda proc=None: PI3)
    yield


@pytest.fixture
def auto_config(config: Config) -> Config:
    config.llm.model = "auto"
    config.llm.preload = False
    config.agent.temperature = 0.0
    return config


@asynccontextmanager
async def daemon_serving(config: Config) -> AsyncIterator[tuple[Any, aiohttp.ClientSession, str]]:
    """The daemon in this process, an HTTP session and an admin token for it."""
    from appliance.daemon import Daemon

    daemon = Daemon(config, host="127.0.0.1", port=0)
    served = asyncio.ensure_future(daemon.run())
    await started(daemon, served)
    token = daemon.state.auth.add_token("tests", scope="admin")
    base = f"http://127.0.0.1:{daemon.web.port}"
    try:
        async with aiohttp.ClientSession(base, headers={"Authorization": f"Bearer {token}"}) as http:
            yield daemon, http, base
    finally:
        daemon.stopping.set()
        assert await served == 0


async def status(http: aiohttp.ClientSession) -> dict[str, Any]:
    async with http.get("/api/status") as response:
        assert response.status == 200
        model: dict[str, Any] = (await response.json())["model"]
        return model


async def chat_over(ws: aiohttp.ClientWebSocketResponse, text: str) -> dict[str, Any]:
    """One message over an open websocket; the last event (done or error)."""
    await ws.send_json({"type": "message", "text": text, "session": "web"})
    while (event := await ws.receive_json(timeout=60))["type"] not in ("done", "error"):
        pass
    return event


def state_of(daemon: Any) -> str:
    fetch: ModelFetch = daemon.model_fetch
    return fetch.pull.state if fetch.pull is not None else ""


def test_first_start_with_auto_pulls_from_the_mirror_and_switches_without_dropping_a_websocket(
    auto_config: Config, on_a_1gb_pi3: None, packaged: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    auto_config.llm.preload = True  # as on the Pi: the switched-to model is readied by the daemon's preload

    async def main() -> None:
        async with serving({TEST_FILE: packaged}) as mirror:
            monkeypatch.setenv(MIRROR_ENV, mirror.url)
            mirror.gate.clear()  # the download waits until the websocket is open
            async with daemon_serving(auto_config) as (daemon, http, _base):
                before = await status(http)
                assert before["name"] == "smollm2-135m" and before["wanted"] == WANTED
                assert before["pull"]["state"] in ("waiting_network", "downloading")
                async with http.ws_connect("/ws") as ws:
                    assert (await chat_over(ws, "Say hello."))["type"] == "done"  # the packaged model answers
                    mirror.gate.set()
                    await eventually(lambda: state_of(daemon) == "done", timeout=60, what="the switch")
                    assert daemon.runtime.model.name == WANTED and daemon.runtime.model.loaded
                    assert daemon.runtime.model_queue.model is daemon.runtime.model
                    assert not ws.closed
                    assert (await chat_over(ws, "Say hello again."))["type"] == "done"  # same socket, new model
                after = await status(http)
                assert after["name"] == WANTED and after["wanted"] == WANTED
                assert after["pull"]["state"] == "done"
                assert after["pull"]["done_bytes"] == after["pull"]["total_bytes"] == packaged.stat().st_size
            assert mirror.ranges == [""]  # one request, from the start
        models_dir = auto_config.resolve_path(auto_config.data_dir) / "models"
        assert (models_dir / TEST_FILE).stat().st_size == packaged.stat().st_size
        assert models.selected_model(models_dir) == WANTED  # recorded: the next start loads it directly
        from appliance.llm.choice import model_spec

        assert model_spec(auto_config) == WANTED

    asyncio.run(main())


def test_a_mirror_that_dies_midway_leaves_the_packaged_model_serving_and_a_retry_resumes(
    auto_config: Config, on_a_1gb_pi3: None, packaged: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from appliance import model_fetch

    monkeypatch.setattr(model_fetch, "RETRY_S", (3600.0,))  # the test retries by waking it (SIGHUP does too)
    cut = 40 * 1024 * 1024 + 17

    async def main() -> None:
        async with serving({TEST_FILE: packaged}) as mirror:
            monkeypatch.setenv(MIRROR_ENV, mirror.url)
            mirror.cut_after = cut
            async with daemon_serving(auto_config) as (daemon, http, _base):
                await eventually(lambda: state_of(daemon) == "failed", timeout=60, what="the failed pull")
                model = await status(http)
                assert model["name"] == "smollm2-135m" and model["pull"]["state"] == "failed"
                assert "interrupted" in model["pull"]["message"]
                assert model["pull"]["done_bytes"] == cut
                async with http.post("/api/chat", json={"message": "Say hello."}) as reply:
                    assert reply.status == 200 and (await reply.json())["route"] == "local"
                models_dir = auto_config.resolve_path(auto_config.data_dir) / "models"
                assert (models_dir / ".partial" / f"{TEST_FILE}.part").stat().st_size == cut
                assert not (models_dir / TEST_FILE).exists()

                daemon.model_fetch.wake()
                await eventually(lambda: state_of(daemon) == "done", timeout=60, what="the resumed pull")
                assert daemon.runtime.model.name == WANTED
            assert mirror.ranges == ["", f"bytes={cut}-"]  # the retry asked only for the rest

    asyncio.run(main())


def test_a_bad_checksum_is_failed_with_the_reason_and_nothing_installed(
    tmp_path: Path, on_a_1gb_pi3: None, packaged: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    switched: list[str] = []

    async def switch(name: str) -> None:
        switched.append(name)

    async def main() -> None:
        async with serving({TEST_FILE: packaged}) as mirror:
            monkeypatch.setenv(MIRROR_ENV, mirror.url)
            mirror.corrupt = True
            fetch = ModelFetch(tmp_path, lambda: WANTED, lambda: "smollm2-135m", switch)
            task = asyncio.ensure_future(fetch.run())
            await eventually(lambda: fetch.pull is not None and fetch.pull.state == "failed", timeout=60)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert fetch.pull is not None and "failed verification" in fetch.pull.message
        assert switched == [] and not (tmp_path / TEST_FILE).exists()

    asyncio.run(main())


def test_no_network_keeps_the_packaged_model_and_says_so(
    auto_config: Config,
    on_a_1gb_pi3: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as sock:  # a port nothing listens on: the mirror refuses every connection
        sock.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv(MIRROR_ENV, refused)
    caplog.set_level(logging.INFO)

    async def main() -> None:
        async with daemon_serving(auto_config) as (daemon, http, _base):
            await eventually(lambda: state_of(daemon) == "no_network", timeout=30, what="no network")
            model = await status(http)
            assert model["name"] == "smollm2-135m" and model["wanted"] == WANTED
            assert model["pull"]["state"] == "no_network" and "not reachable" in model["pull"]["message"]
            async with http.post("/api/chat", json={"message": "Say hello."}) as reply:
                assert reply.status == 200
            # `picoagent status` as a person runs it (on a thread: the daemon answers on this loop)
            args = ["status", "--config", str(auto_config.source), "--data-dir", str(data)]
            assert await asyncio.to_thread(cli_main, args) == 0

    data = auto_config.resolve_path(auto_config.data_dir)
    asyncio.run(main())
    assert any("no network" in r.getMessage() and WANTED in r.getMessage() for r in caplog.records)
    printed = capsys.readouterr().out
    assert f"  no network: keeping the packaged model until {WANTED} can be downloaded (127.0.0.1:" in printed


def test_models_list_marks_what_fits_this_board(
    config: Config, on_a_1gb_pi3: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    main = cli_main
    config_path = config.source
    data = str(config.resolve_path(config.data_dir))
    assert main(["models", "list", "--config", str(config_path), "--data-dir", data, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    fits = {row["name"]: row["fits"] for row in listed["models"]}
    assert fits["smollm2-135m"] and fits[WANTED]  # the test entry keeps qwen2.5-0.5b's RAM estimate: 600 MB
    assert not fits["llama3.2-1b"] and not fits["qwen2.5-1.5b"]  # 940 MB + the system's 160 MB > 0.9 GiB
    assert listed["auto"] == WANTED and listed["board"]["cores"] == 4
    assert main(["models", "list", "--config", str(config_path), "--data-dir", data]) == 0
    text = capsys.readouterr().out
    header = text.splitlines()[0]
    assert "FITS" in header
    rows = {line.split()[0 if not line.startswith("*") else 1]: line for line in text.splitlines()[1:7]}
    assert " yes " in rows["smollm2-135m"] and " no " in rows["qwen2.5-1.5b"]
    assert f"llm.model: auto picks {WANTED}" in text and PI3.name in text


def test_doctor_says_the_wanted_model_is_not_installed_yet_and_how_serve_gets_it(
    auto_config: Config, on_a_1gb_pi3: None
) -> None:
    from appliance.cli.doctor import _check_model

    checks = [c for c in _check_model(auto_config) if c.name == "model"]
    assert checks[0].status == "ok" and checks[0].detail.startswith("smollm2-135m: ")
    assert checks[1].status == "warn" and checks[1].detail.startswith(f"{WANTED} is wanted (llm.model: auto)")
    assert checks[1].fix == f"picoagent models pull {WANTED} (to have it now)"


def test_a_verified_file_that_will_not_load_switches_back_to_the_packaged_model(
    auto_config: Config,
    on_a_1gb_pi3: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from appliance import model_fetch

    monkeypatch.setattr(model_fetch, "RETRY_S", (0.01,))  # were it retried by itself, the test would see it
    caplog.set_level(logging.INFO)
    broken = tmp_path / "not-a-model.gguf"
    broken.write_bytes(b"this is not GGUF" * 65536)  # the right sha256 for the catalog, but no model
    catalog = models.load_catalog()
    entry = replace(catalog[WANTED], size_bytes=broken.stat().st_size, sha256=sha256_file(broken).hexdigest())
    monkeypatch.setattr(models, "load_catalog", lambda: {**catalog, WANTED: entry})

    async def main() -> None:
        async with serving({TEST_FILE: broken}) as mirror:
            monkeypatch.setenv(MIRROR_ENV, mirror.url)
            async with daemon_serving(auto_config) as (daemon, http, _base):
                await eventually(lambda: state_of(daemon) == "failed", timeout=60, what="the failed switch")
                model = await status(http)
                assert model["name"] == "smollm2-135m" and model["pull"]["message"].startswith(f"{WANTED} did not load")
                async with http.post("/api/chat", json={"message": "Say hello."}) as reply:
                    assert reply.status == 200 and (await reply.json())["route"] == "local"
                assert state_of(daemon) == "failed" and mirror.ranges == [""]
                switches = [r for r in caplog.records if r.getMessage().startswith(f"model: {WANTED} now serves")]
                assert len(switches) == 1  # not retried every 10 ms: it would fail again; SIGHUP retries
        assert models.selected_model(auto_config.resolve_path(auto_config.data_dir) / "models") is None

    asyncio.run(main())


def test_sighup_to_llm_model_auto_starts_the_background_pull(
    tmp_path: Path, on_a_1gb_pi3: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default config fetches nothing (no module loaded); a SIGHUP that sets auto starts the pull."""
    from appliance.config import load_config
    from appliance.daemon import Daemon
    from tests.helpers import config_file

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        monkeypatch.setenv(MIRROR_ENV, f"http://127.0.0.1:{sock.getsockname()[1]}")  # refused: no network
    path = config_file(tmp_path / "etc", {"preload: true": "preload: false"})
    data = tmp_path / "data"
    config = load_config(path, data_dir=data)

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0, data_dir_override=str(data))
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        try:
            assert daemon.model_fetch is None and daemon.state.sources.model_fetch() is None
            path.write_text(path.read_text().replace('  model: ""', "  model: auto"))
            daemon.reload()
            await eventually(lambda: daemon.model_fetch is not None and state_of(daemon) == "no_network", timeout=30)
            assert daemon.runtime.model.name == "smollm2-135m" and config.llm.model == "auto"
        finally:
            daemon.stopping.set()
            assert await served == 0

    asyncio.run(main())
