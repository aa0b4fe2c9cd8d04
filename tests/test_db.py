"""The SQLite database: WAL, migrations once, conversations, foreign files left alone, one thread."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from appliance.errors import DatabaseError
from appliance.memory import db as db_module
from appliance.memory.db import APPLICATION_ID, MIGRATIONS, Database

ROOT = Path(__file__).resolve().parent.parent


def pragma(path: Path, name: str) -> object:
    """A PRAGMA read through a separate, plain connection."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def siblings(path: Path) -> set[str]:
    return {p.name for p in path.parent.iterdir()}


def test_a_new_file_gets_wal_our_id_and_the_latest_schema(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "picoagent.db"
    db = Database(path)
    db.close()
    assert pragma(path, "journal_mode") == "wal"
    assert pragma(path, "application_id") == APPLICATION_ID
    assert pragma(path, "user_version") == len(MIGRATIONS)
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert {"conversations", "messages"} <= tables


def counting(calls: list[str], migrate: Callable[[sqlite3.Connection], None]) -> Callable[[sqlite3.Connection], None]:
    def wrapped(conn: sqlite3.Connection) -> None:
        calls.append(migrate.__name__)
        migrate(conn)

    wrapped.__name__ = migrate.__name__
    return wrapped


def test_reopening_runs_no_migration_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(db_module, "MIGRATIONS", [counting(calls, m) for m in MIGRATIONS])
    path = tmp_path / "picoagent.db"
    db = Database(path)
    cid = db.conversation("terminal", "me")
    db.add_message(cid, "user", "kept")
    db.close()
    assert calls == [m.__name__ for m in MIGRATIONS]

    db = Database(path)
    assert calls == [m.__name__ for m in MIGRATIONS]  # nothing ran again
    assert [m.content for m in db.recent_messages(db.conversation("terminal", "me"), 5)] == ["kept"]
    db.close()


def test_a_new_migration_runs_once_on_an_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "picoagent.db"
    Database(path).close()
    calls: list[str] = []

    def _m_extra(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE extra (id INTEGER PRIMARY KEY)")

    migrations = [counting(calls, m) for m in MIGRATIONS] + [counting(calls, _m_extra)]
    monkeypatch.setattr(db_module, "MIGRATIONS", migrations)
    Database(path).close()
    Database(path).close()
    assert calls == ["_m_extra"]
    assert pragma(path, "user_version") == len(MIGRATIONS) + 1


def test_a_failed_migration_leaves_the_old_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "picoagent.db"
    Database(path).close()

    def _m_broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half (id INTEGER)")
        conn.execute("THIS IS NOT SQL")

    monkeypatch.setattr(db_module, "MIGRATIONS", [*MIGRATIONS, _m_broken])
    with pytest.raises(DatabaseError, match=f"migration {len(MIGRATIONS) + 1} failed"):
        Database(path)
    assert pragma(path, "user_version") == len(MIGRATIONS)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half'").fetchone()[0] == 0
    conn.close()


def test_messages_come_back_oldest_first_limited_to_n(tmp_path: Path) -> None:
    db = Database(tmp_path / "picoagent.db")
    cid = db.conversation("terminal", "me")
    assert db.conversation("terminal", "me") == cid
    for i in range(6):
        db.add_message(cid, "user" if i % 2 == 0 else "assistant", f"m{i}", route="local", meta={"i": i})
    last = db.recent_messages(cid, 4)
    assert [m.content for m in last] == ["m2", "m3", "m4", "m5"]
    assert [m.role for m in last] == ["user", "assistant", "user", "assistant"]
    assert last[0].meta == {"i": 2} and last[0].route == "local"
    assert [m.content for m in db.recent_messages(cid, 100)] == [f"m{i}" for i in range(6)]
    assert db.recent_messages(cid, 0) == []
    other = db.conversation("telegram", "me")
    assert other != cid and db.recent_messages(other, 10) == []
    db.close()


def test_reset_starts_a_new_conversation(tmp_path: Path) -> None:
    db = Database(tmp_path / "picoagent.db")
    old = db.conversation("terminal", "me")
    db.add_message(old, "user", "before the reset")
    untouched = db.conversation("terminal", "someone else")
    db.add_message(untouched, "user", "other chat")
    db.reset("terminal", "me")
    new = db.conversation("terminal", "me")
    assert new != old
    assert db.recent_messages(new, 10) == []
    db.add_message(new, "user", "after")
    assert [m.content for m in db.recent_messages(new, 10)] == ["after"]
    assert [m.content for m in db.recent_messages(old, 10)] == ["before the reset"]  # kept, just closed
    assert db.conversation("terminal", "someone else") == untouched
    db.close()


def test_a_bad_role_is_refused(tmp_path: Path) -> None:
    db = Database(tmp_path / "picoagent.db")
    with pytest.raises((sqlite3.IntegrityError, DatabaseError)):
        db.add_message(db.conversation("terminal", "me"), "wizard", "hi")
    db.close()


# --- files that are not ours ---------------------------------------------------------------------


def test_a_foreign_sqlite_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "picoagent.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.execute("INSERT INTO recipes VALUES ('soup')")
    conn.commit()
    conn.close()
    assert pragma(path, "application_id") == 0
    before, names = sha256(path), siblings(path)
    with pytest.raises(DatabaseError) as info:
        Database(path)
    assert "belongs to another program" in str(info.value) and "left untouched" in str(info.value)
    assert info.value.fix
    assert sha256(path) == before
    assert siblings(path) == names  # no -wal or -shm either
    assert pragma(path, "journal_mode") == "delete"


def test_a_file_that_is_not_a_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "picoagent.db"
    path.write_bytes(os.urandom(8192))
    before, names = sha256(path), siblings(path)
    with pytest.raises(DatabaseError) as info:
        Database(path)
    assert "is not a picoagent database" in str(info.value) and "left untouched" in str(info.value)
    assert sha256(path) == before
    assert siblings(path) == names


def test_a_database_from_a_newer_picoagent_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "picoagent.db"
    Database(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    conn.close()
    before = sha256(path)
    with pytest.raises(DatabaseError, match="newer picoagent") as info:
        Database(path)
    assert f"schema {len(MIGRATIONS) + 1}" in str(info.value)
    assert sha256(path) == before
    assert pragma(path, "user_version") == len(MIGRATIONS) + 1


def test_a_folder_that_cannot_be_created_is_a_database_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(DatabaseError, match="cannot open the database"):
        Database(blocker / "picoagent.db")


# --- threads and processes -----------------------------------------------------------------------


def test_call_runs_on_one_dedicated_thread(tmp_path: Path) -> None:
    db = Database(tmp_path / "picoagent.db")

    async def main() -> tuple[int, list[int], int]:
        seen: list[int] = []

        def record(content: str) -> int:
            seen.append(threading.get_ident())
            return db.add_message(db.conversation("terminal", "me"), "user", content)

        first = await db.call(record, "one")
        second = await db.call(record, content="two")
        assert second > first
        rows = await db.call(db.recent_messages, db.conversation("terminal", "me"), 10)
        return threading.get_ident(), seen, len(rows)

    loop_thread, seen, count = asyncio.run(main())
    assert count == 2
    assert len(seen) == 2 and seen[0] == seen[1]
    assert seen[0] != loop_thread and seen[0] != threading.get_ident()
    db.close()


def test_data_written_by_one_process_is_read_by_another(tmp_path: Path) -> None:
    path = tmp_path / "picoagent.db"
    db = Database(path)
    cid = db.conversation("terminal", "me")
    db.add_message(cid, "user", "from the parent")
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from appliance.memory.db import Database\n"
        "db = Database(Path(sys.argv[1]))\n"
        "cid = db.conversation('terminal', 'me')\n"
        "print('|'.join(m.content for m in db.recent_messages(cid, 10)))\n"
        "db.add_message(cid, 'assistant', 'from the child')\n"
        "db.close()\n"
    )
    venv_python = ROOT / ".venv" / "bin" / "python"
    python = str(venv_python if venv_python.exists() else sys.executable)
    out = subprocess.run(
        [python, "-c", code, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.strip() == "from the parent"
    assert [m.content for m in db.recent_messages(cid, 10)] == ["from the parent", "from the child"]
    assert db.integrity() == "ok"
    db.close()


def test_usage_counted_before_routing_existed_survives_the_routing_migration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "picoagent.db"
    index = [m.__name__ for m in MIGRATIONS].index("_m7_routing")
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:index])
    old = Database(path)
    old.write(
        "INSERT INTO usage (day, route, model, turns, prompt_tokens, completion_tokens) VALUES (?, ?, ?, ?, ?, ?)",
        (time.strftime("%Y-%m-%d"), "local", "smollm2-135m", 3, 900, 60),
    )
    old.close()
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS)
    db = Database(path)
    try:
        row = db.usage(1)[0]
        assert row == {
            "day": time.strftime("%Y-%m-%d"),
            "route": "local",
            "provider": "local",
            "model": "smollm2-135m",
            "turns": 3,
            "prompt_tokens": 900,
            "completion_tokens": 60,
            "cost_usd": 0.0,
        }
        db.add_usage("local", "smollm2-135m", 100, 10)  # the same row goes on counting
        assert db.usage(1)[0]["turns"] == 4 and db.spent_usd() == (0.0, 0.0)
    finally:
        db.close()


def test_tokens_made_before_scopes_keep_owner_power_and_new_ones_default_to_chat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "picoagent.db"
    index = [m.__name__ for m in MIGRATIONS].index("_m9_token_scopes")
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:index])
    old = Database(path)
    old.write("INSERT INTO api_tokens (name, token_hash, created_at) VALUES ('home-assistant', 'h1', 1.0)")
    old.close()
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS)
    db = Database(path)
    try:
        # Programs made for a token that could do everything keep working; their owner narrows them.
        assert db.value("SELECT scope FROM api_tokens WHERE name = 'home-assistant'") == "admin"
        db.write("INSERT INTO api_tokens (name, token_hash, created_at) VALUES ('new', 'h2', 2.0)")
        assert db.value("SELECT scope FROM api_tokens WHERE name = 'new'") == "chat"  # never admin by accident
        with pytest.raises(DatabaseError, match="CHECK constraint"):
            db.write("UPDATE api_tokens SET scope = 'root' WHERE name = 'new'")
    finally:
        db.close()


def test_telegram_pairing_made_before_the_shared_tables_moves_there_with_nothing_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: Telegram's own pairing tables move into the shared ones: its paired users (in pairing order),
    who used which code, and a code printed by the older picoagent, not used yet, which still pairs."""
    from appliance.channels import pairing

    path = tmp_path / "picoagent.db"
    index = [m.__name__ for m in MIGRATIONS].index("_m16_telegram_pairing_shared")
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:index])
    old = Database(path)

    def old_hash(code: str) -> str:  # as appliance/channels/telegram/pairing.py hashed a code
        return hashlib.sha256(f"picoagent-telegram-pairing:{code}".encode()).hexdigest()

    old.write("INSERT INTO telegram_users (user_id, name, paired_at) VALUES (333, 'Second', 20.0)")
    old.write("INSERT INTO telegram_users (user_id, name, paired_at) VALUES (222, 'First', 10.0)")
    used = "INSERT INTO telegram_pairing (code_hash, created_at, expires_at, used_by, used_at) VALUES (?, ?, ?, ?, ?)"
    old.write(used, (old_hash("111111"), 5.0, 605.0, 222, 10.0))
    unused = "INSERT INTO telegram_pairing (code_hash, created_at, expires_at) VALUES (?, ?, ?)"
    old.write(unused, (old_hash("424242"), 1000.0, 1600.0))
    old.close()
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS)
    db = Database(path)
    try:
        tables = {r[0] for r in db.rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert not tables & {"telegram_users", "telegram_pairing"}
        assert pairing.paired_users(db, "telegram") == ["222", "333"]  # first paired first, as before
        assert pairing.is_paired("telegram", db, 222) and not pairing.is_paired("discord", db, 222)
        assert db.rows("SELECT user_id, name, paired_at FROM channel_users ORDER BY paired_at") == [
            ("222", "First", 10.0),
            ("333", "Second", 20.0),
        ]
        assert db.rows("SELECT channel, used_by, used_at FROM channel_pairing ORDER BY created_at") == [
            ("telegram", "222", 10.0),
            ("telegram", None, None),
        ]
        # The code the older picoagent printed pairs once, on Telegram only; the used one stays used.
        assert not pairing.redeem("discord", db, "424242", 444, "Else", clock=lambda: 1100.0)
        assert not pairing.redeem("telegram", db, "111111", 444, "Else", clock=lambda: 100.0)
        assert pairing.redeem("telegram", db, "424242", 444, "Third", clock=lambda: 1100.0)
        assert not pairing.redeem("telegram", db, "424242", 555, "Fourth", clock=lambda: 1100.0)
        assert pairing.paired_users(db, "telegram") == ["222", "333", "444"]
    finally:
        db.close()
