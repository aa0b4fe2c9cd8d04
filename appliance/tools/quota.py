"""The workspace's quota (tools.workspace_max_mb): how much of the SD card the model's files may take.

The per-file limit (tools.shell.max_file_mb) alone lets command after command fill the card, and then
SQLite can no longer write the database. So the workspace's total size is checked:

- before each write of the file tools: a write that would pass the quota is refused, the old file kept;
- when a shell command starts: over the quota it runs with RLIMIT_FSIZE 0, so it can read and delete
  (``rm`` is how the person or the model makes room) but every write fails;
- while a command runs: one that takes the workspace past the quota is stopped at the next look,
  so it passes the quota by at most what it writes in about a second;
- when a command ends: its result says the workspace is over the quota, and what to do.

What the command wrote is not deleted: it may be what the person wanted, and a command can also
overwrite files that were there before, so no guess at "its" files is safe; nothing more can be
written until files are removed, which bounds the workspace all the same.

The size is what ``du -s`` counts: the blocks files, folders and links take on the disk (a sparse
file counts what it really uses, a file with several hard links once). The walk opens each folder
relative to its parent with O_NOFOLLOW (as the file tools do), so a link swapped in by a running
command never takes it outside the workspace. Cost: one lstat per entry, measured by
tests/bench/workspace.py at about 3 µs an entry on the development machine (10,000 files: 30 ms a
write; a Pi 4 is a few times slower), nothing next to a model round. While a command runs the walk
is repeated at most every second, and never takes more than a tenth of one core. A workspace that
cannot be walked whole (folders nested deeper than MAX_DEPTH, or one that cannot be read) counts as
over the quota, with the reason: fail closed, or a folder made unreadable would hide what it holds.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from pathlib import Path

MAX_DEPTH = 128  # folders nested deeper are not walked (one open folder per level): the quota counts as passed
LOOK_EVERY_S = 1.0
WALK_SHARE = 0.1  # the walk's share of one core while a command runs, at most
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MIB = 1024 * 1024


class Unmeasurable(Exception):
    """Part of the workspace cannot be walked (nested too deep, or not readable): the quota counts as passed."""


def usage(root: Path, *, stop_above: int | None = None) -> int:
    """Bytes the workspace takes on the disk (blocks, as ``du -s``); links are not followed.

    ``stop_above``: stop walking once the total passes it (the answer is then only "more than that").
    Raises Unmeasurable when folders are nested deeper than MAX_DEPTH or one cannot be read.
    """
    seen: set[tuple[int, int]] = set()  # hard-linked files, counted once
    totals = [0]
    stack: list[tuple[int, list[str], str]] = []  # an open folder, its subfolders still to walk, its path
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        stack.append((top, [], "."))
        totals[0] = os.fstat(top).st_blocks * 512
        stack[-1][1].extend(_scan(top, ".", seen, totals))
        while stack:
            if stop_above is not None and totals[0] > stop_above:
                break
            folder, subfolders, where = stack[-1]
            if not subfolders:
                os.close(stack.pop()[0])
                continue
            name = subfolders.pop()
            path = name if where == "." else f"{where}/{name}"
            if len(stack) >= MAX_DEPTH:
                raise Unmeasurable(f"folders are nested deeper than {MAX_DEPTH} levels (in {where})")
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=folder)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                    continue  # removed or swapped for a link since it was listed: nothing to walk
                raise _unreadable(path, exc) from None
            stack.append((fd, [], path))
            stack[-1][1].extend(_scan(fd, path, seen, totals))
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return totals[0]


def _scan(folder: int, where: str, seen: set[tuple[int, int]], totals: list[int]) -> list[str]:
    """Add the blocks of a folder's entries to ``totals[0]``; return its subfolders' names."""
    subfolders = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                if info.st_nlink > 1 and not is_dir:
                    if (info.st_dev, info.st_ino) in seen:
                        continue
                    seen.add((info.st_dev, info.st_ino))
                totals[0] += info.st_blocks * 512
                if is_dir:
                    subfolders.append(entry.name)
    except OSError as exc:
        raise _unreadable(where, exc) from None
    return subfolders


def _unreadable(path: str, exc: OSError) -> Unmeasurable:
    return Unmeasurable(
        f"the folder {path} cannot be read ({exc.strerror or exc}): make it readable (chmod u+rwx) or remove it"
    )


def mib(size: int) -> str:
    """A size for people: 12 KiB, 1.2 MiB, 1024 MiB."""
    if size < _MIB:
        return f"{-(-size // 1024)} KiB"
    value = size / _MIB
    text = f"{value:.1f}".removesuffix(".0") if value < 10 else f"{value:.0f}"
    return f"{text} MiB"


def blocks(size: int) -> int:
    """What ``size`` bytes of a new file take on the disk (whole 4 KiB blocks)."""
    return -(-size // 4096) * 4096


WHAT_TO_DO = (
    "Delete files you no longer need (with the shell: rm FILE, or rm -r FOLDER; du -sh * shows the biggest), "
    "or raise tools.workspace_max_mb in the config"
)


def over_note(used: int | Unmeasurable, max_bytes: int) -> str:
    """What a command's result says when the workspace is over its quota ("" when it is not)."""
    if isinstance(used, Unmeasurable):
        return (
            f"[the workspace cannot be measured: {used}. Until it can, it counts as over its quota of "
            f"{mib(max_bytes)} (tools.workspace_max_mb) and nothing more can be written]"
        )
    if used <= max_bytes:
        return ""
    return (
        f"[the workspace is over its quota: {mib(used)} used of {mib(max_bytes)} (tools.workspace_max_mb). "
        f"Commands can read and delete but not write, and the file tools cannot write, until it is under. "
        f"{WHAT_TO_DO}]"
    )


class Watch:
    """One command's view of the quota: what it may write, and whether it passed the quota while running."""

    def __init__(self, root: Path, max_bytes: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.clock = clock
        self.full_at_start = False
        self._next_look = 0.0
        if max_bytes > 0:
            start = self._measure()
            self.full_at_start = isinstance(start, Unmeasurable) or start >= max_bytes
            self._next_look = clock() + LOOK_EVERY_S

    def file_limit(self, max_file_bytes: int) -> int:
        """RLIMIT_FSIZE for the command: 0 (no writes, deletes still work) when it starts over the quota."""
        return 0 if self.full_at_start else max_file_bytes

    def passed(self) -> bool:
        """Whether the running command has taken the workspace past the quota (looks at most every second)."""
        if self.max_bytes <= 0 or self.full_at_start or self.clock() < self._next_look:
            return False
        started = self.clock()
        used = self._measure(stop_above=self.max_bytes)
        cost = self.clock() - started
        self._next_look = self.clock() + max(LOOK_EVERY_S, cost / WALK_SHARE)
        return isinstance(used, Unmeasurable) or used > self.max_bytes

    def note(self) -> str:
        """After the command: what its result says about the quota ("" when the workspace is under it)."""
        if self.max_bytes <= 0:
            return ""
        return over_note(self._measure(), self.max_bytes)

    def _measure(self, stop_above: int | None = None) -> int | Unmeasurable:
        try:
            return usage(self.root, stop_above=stop_above)
        except Unmeasurable as exc:
            return exc
        except OSError as exc:  # the workspace folder itself: the command then fails on its own
            return Unmeasurable(f"the workspace folder cannot be read ({exc.strerror or exc})")
