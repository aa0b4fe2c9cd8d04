"""The database across a switch: a copy before a release may upgrade it, put back when switching away.

A new release may upgrade the database (``PRAGMA user_version``; memory/migrations.py), and an older
release refuses a newer schema. So before switching, a consistent copy of ``picoagent.db`` is taken
(SQLite's backup API, while the old release still runs; the newest copy is kept), and switching back
from a release that upgraded it puts the copy back, keeping the upgraded file aside with what was
written since. Without the copy a rollback would leave the old release unable to open its database.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from appliance.errors import PicoagentError
from appliance.fileio import fsync_dir


class DatabaseCopyError(PicoagentError, RuntimeError):
    """The copy before an update could not be taken; nothing was switched."""


def copy_before(db: Path, version: str) -> str | None:
    """A consistent copy of ``db`` before ``version`` may upgrade it (None: there is none yet)."""
    if not db.exists():
        return None
    copy = copy_path(db, version)
    part = copy.with_name(copy.name + ".part")
    try:
        part.unlink(missing_ok=True)
        part.touch(mode=0o600)  # people's conversations: never readable by others, not even for a moment
        with contextlib.closing(sqlite3.connect(db)) as source, contextlib.closing(sqlite3.connect(part)) as to:
            source.backup(to)
        os.replace(part, copy)
    except (sqlite3.Error, OSError) as exc:
        part.unlink(missing_ok=True)
        raise DatabaseCopyError(
            f"cannot copy {db} before the update: {exc}",
            fix="free space on the SD card (the copy takes as much as the database) and try again",
        ) from None
    for old in db.parent.glob(f"{db.name}.before-*"):
        if old != copy:
            old.unlink(missing_ok=True)  # the newest copy is the one a rollback needs
    return str(copy)


def copy_path(db: Path, version: str) -> Path:
    """Where the copy taken before ``version`` is."""
    return db.with_name(f"{db.name}.before-{version}")


def restore(db: Path, leaving: str, copy: str | None, say: Callable[[str], None]) -> None:
    """Switching back from ``leaving``: when it upgraded ``db``, put the copy from before it back."""
    if not copy or not Path(copy).exists() or not db.exists() or schema(db) <= schema(Path(copy)):
        return  # not upgraded: the release switched back to opens it, every message kept
    aside = db.with_name(f"{db.name}.from-{leaving}")
    owner = db.stat()  # the daemon's user must be able to write the file put back
    for suffix in ("", "-wal", "-shm"):
        if db.with_name(db.name + suffix).exists():
            os.replace(db.with_name(db.name + suffix), aside.with_name(aside.name + suffix))
    part = db.with_name(db.name + ".part")
    shutil.copyfile(copy, part)
    with contextlib.suppress(PermissionError):  # not root (tests): the file is ours already
        os.chown(part, owner.st_uid, owner.st_gid)
    part.chmod(owner.st_mode & 0o777)
    os.replace(part, db)
    fsync_dir(db.parent)
    say(f"{leaving} had upgraded the database: the copy from before it is back ({aside} keeps the rest)")


def schema(db: Path) -> int:
    """A database's schema version (``PRAGMA user_version``)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
