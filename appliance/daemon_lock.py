"""One daemon per data dir: an exclusive ``flock`` on ``daemon.lock`` there, held for the daemon's life.

Two daemons on one data dir would share the local CLI's token and ``daemon.json`` (the second revokes and
rewrites them, and deletes them when it stops, so the CLI loses the first), and on a Pi two processes
would drive the same pins. The lock is the kernel's: it goes with the process however it ends (SIGKILL,
a crash, power), so a daemon that died never blocks the next one, and no stale-pid guessing is needed.
The file holds the holder's pid, so the one refused can name it; ``daemon.json`` adds where it serves.
The descriptor is not inherited (PEP 446; the model runner is started with ``close_fds``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

from appliance.errors import AlreadyRunning


class DataDirLock:
    """The lock of one data dir; :meth:`acquire` raises :class:`AlreadyRunning` when a daemon holds it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "daemon.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock and write this process's pid into it, or raise naming the daemon that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise self._refusal(holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Give the lock back (the pid stays in the file: harmless, the lock is what counts)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None

    def _refusal(self, holder: str) -> AlreadyRunning:
        """The error for the second daemon: the first's pid and, from its daemon.json, where it serves."""
        where = ""
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            info = json.loads((self.root / "daemon.json").read_text())
            where = f", serving on {info.get('scheme', 'http')}://{info['host']}:{info['port']}"
            holder = holder or str(info["pid"])
        pid = f"pid {holder}" if holder.isdigit() else "pid unknown"
        return AlreadyRunning(
            f"picoagent is already running on this data dir ({self.root}): {pid}{where}",
            fix="use that one (the CLI commands go through it), stop it first (`systemctl stop picoagent`, "
            "or Ctrl-C where it runs), or give this daemon a data dir of its own with --data-dir",
        )
