"""`picoagent memory forget --about X`: everything about X shown (by meaning and words), asked, then exactly that
forgotten, with its vectors and keywords; by this process on its own, and through the running daemon when there
is one (its audit says so). The real store and the real embedding model; a person's answer typed at a terminal."""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.channels.web.auth import Auth
from appliance.channels.web.state import WebState
from appliance.cli import main
from appliance.config import load_config
from appliance.hardware.events import settings_changes
from appliance.llm.scripted import ScriptedModel
from appliance.memory.db import Database
from appliance.runtime import Runtime
from tests.helpers import config_file

FACTS = ["My sister Anna lives in Lisbon", "The garage door code is 4711", "Anna's birthday is on the ninth of May"]
ANNA = [FACTS[0], FACTS[2]]


class Terminal(io.StringIO):
    """What a person types at a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def cli(tmp_path: Path) -> list[str]:
    """The options of a `picoagent` run: a copy of the shipped config, a data dir."""
    return ["--config", str(config_file(tmp_path / "etc")), "--data-dir", str(tmp_path / "data")]


def run(args: list[str], monkeypatch: pytest.MonkeyPatch, typed: str | None = None) -> int:
    """`picoagent ARGS` in this process; ``typed`` at a terminal, or (None) an input that is not one."""
    monkeypatch.setattr("sys.stdin", Terminal(typed) if typed is not None else io.StringIO(""))
    return main(args)


def remembered(tmp_path: Path) -> dict[str, int]:
    """Each memory's text and id, read from the database file."""
    db = Database(tmp_path / "data" / "picoagent.db")
    try:
        return {text: int(i) for i, text in db.rows("SELECT id, text FROM memories")}
    finally:
        db.close()


def traces(tmp_path: Path) -> tuple[int, int, int, int]:
    """Rows in memories, memory_vec, memory_bits and the FTS index."""
    db = Database(tmp_path / "data" / "picoagent.db")
    try:
        tables = ("memories", "memory_vec", "memory_bits", "memories_fts")
        return tuple(int(db.value(f"SELECT count(*) FROM {table}")) for table in tables)  # type: ignore[return-value]
    finally:
        db.close()


def test_forget_about_shows_asks_and_forgets_exactly_that(
    cli: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    for fact in FACTS:
        assert run(["memory", "add", fact, *cli], monkeypatch) == 0
    ids = remembered(tmp_path)
    capsys.readouterr()

    assert run(["memory", "forget", "--about", "Anna", *cli], monkeypatch, typed="n\n") == 1
    out = capsys.readouterr().out
    assert out.startswith("2 memories about 'Anna':") and all(f"{ids[t]:>5}  {t}" in out for t in ANNA)
    assert FACTS[1] not in out and "nothing forgotten" in out and traces(tmp_path) == (3, 3, 3, 3)

    assert run(["memory", "forget", "--about", "Anna", *cli], monkeypatch) == 2  # no terminal, no --yes
    err = capsys.readouterr().err
    assert "nothing was forgotten: there is no terminal" in err and "--about Anna --yes" in err
    assert traces(tmp_path) == (3, 3, 3, 3)

    assert run(["memory", "forget", "--about", "Anna", *cli], monkeypatch, typed="y\n") == 0
    assert "2 memories about 'Anna' forgotten" in capsys.readouterr().out
    assert remembered(tmp_path) == {FACTS[1]: ids[FACTS[1]]} and traces(tmp_path) == (1, 1, 1, 1)
    assert run(["memory", "search", "where does my sister live", "--all", *cli], monkeypatch) == 0
    assert "Anna" not in capsys.readouterr().out  # by meaning too: only the garage code is left to find

    assert run(["memory", "forget", "--about", "a good pizza recipe", "--yes", *cli], monkeypatch) == 0
    assert "nothing remembered is about 'a good pizza recipe'" in capsys.readouterr().out
    assert traces(tmp_path) == (1, 1, 1, 1)
    for wrong in (["memory", "forget"], ["memory", "forget", "1", "--about", "Anna"]):
        assert run([*wrong, *cli], monkeypatch) == 2
        assert "give a memory's id or --about TEXT" in capsys.readouterr().err
    assert run(["memory", "forget", str(ids[FACTS[1]]), *cli], monkeypatch) == 0  # one by id, as before
    assert traces(tmp_path) == (0, 0, 0, 0)


@pytest.fixture
def daemon(tmp_path: Path, cli: list[str]) -> Iterator[Runtime]:
    """The daemon's web site on 127.0.0.1, on a thread of its own, with daemon.json and cli.token written as
    `serve` writes them: the CLI finds it and asks it."""
    from appliance.channels.web.server import WebServer

    runtime = Runtime.open(load_config(Path(cli[1]), data_dir=tmp_path / "data"), model=ScriptedModel())
    server = WebServer(runtime.config, WebState(runtime, Auth(runtime.db)), tmp_path / "data", "127.0.0.1", 0)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(20)
    yield runtime
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(20)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    runtime.close()


def test_while_the_daemon_runs_forget_about_goes_through_it(
    daemon: Runtime, cli: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    assert daemon.memory is not None
    for fact in FACTS:
        daemon.memory.add(fact, source="telegram")
    assert run(["memory", "forget", "--about", "Anna", *cli], monkeypatch, typed="n\n") == 1
    assert "(similarity 0." in capsys.readouterr().out and traces(tmp_path) == (3, 3, 3, 3)
    assert run(["memory", "forget", "--about", "Anna", "--yes", *cli], monkeypatch) == 0
    assert "2 memories about 'Anna' forgotten" in capsys.readouterr().out
    assert [m.text for m in daemon.memory.newest()] == [FACTS[1]] and traces(tmp_path) == (1, 1, 1, 1)
    audit = [change.message for change in settings_changes(daemon.db)]
    assert any("forgot 2 about 'Anna'" in said for said in audit), audit  # the daemon did it
