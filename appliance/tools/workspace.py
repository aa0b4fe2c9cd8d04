"""File tools on the workspace: read_file, write_file, edit_file, list_dir.

Every path is taken relative to the workspace and walked one component at a time: the workspace
folder is opened, then each folder on the path with ``O_NOFOLLOW`` relative to the one before it
(``dir_fd``), and the file itself relative to its folder. A shell command running beside the tools
may swap a folder for a link at any moment; a walk that holds each folder open never follows the
swap (resolving a path and then opening it again would). ``..`` is refused, and so is an absolute
path other than ``/workspace/...`` (how the shell sees the workspace) or the workspace's own.

A link met on the way is read, not followed: its target is walked the same way, from the folder
that holds it, and refused when it leads outside (``..`` out of the workspace, or an absolute path
elsewhere). Writes go to a temporary file in the same folder (opened through its fd), renamed over
the old one; a write that would take the workspace past its quota (``appliance.tools.quota``) is
refused before anything is touched. Only the shell tool runs programs, and it runs them in the sandbox.

A file read is outside text for the turn (:mod:`appliance.tools.trust`: someone else may have put
orders in it), except a file the model wrote whole with write_file earlier in the same turn. Once
outside text is in a turn, the files every later prompt reads (SOUL.md, USER.md, skills/) are not
written: an order planted there would outlast the page that carried it.

Files are made with the process's umask, like any other: under systemd (UMask=0007) that leaves them
readable and writable by the workspace's group, which is how the shell sandbox, a user of its own,
reads and changes what the model wrote here (systemd/picoagent.tmpfiles).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shlex
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from appliance.errors import ToolError
from appliance.fileio import umask
from appliance.tools import quota
from appliance.tools.registry import ToolRegistry, current_turn
from appliance.tools.trust import LASTING, OutsideText

MAX_READ_BYTES = 512 * 1024
MAX_WRITE_CHARS = 1024 * 1024
MAX_ENTRIES = 200
MAX_LINKS = 40  # links followed in one path, as the kernel allows
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
SANDBOX_ROOT = "workspace"  # "/workspace/x" is how the shell sees it


@dataclass(frozen=True)
class Spot:
    """Where a path led: its folder (an open fd), the name in it ("" for the folder itself), as shown."""

    folder: int
    name: str
    shown: str


class WorkspaceFiles:
    """The workspace as the model's file tools see it."""

    def __init__(self, root: Path, max_bytes: int = 0) -> None:
        self.root = root.resolve()
        self.max_bytes = max_bytes  # the quota (tools.workspace_max_mb); 0: none

    def parts(self, path: str) -> list[str]:
        """The components of ``path`` below the workspace, or ToolError when it would lead outside."""
        if "\x00" in path:
            raise ToolError("a path cannot contain a NUL character")
        candidate = PurePosixPath(path.strip() or ".")
        parts = list(candidate.parts)
        if candidate.is_absolute():
            inside = self._below_root(candidate)
            if inside is None:
                raise ToolError(f"{path!r} is outside the workspace: paths are relative to the workspace folder")
            parts = inside
        if ".." in parts:
            raise ToolError(
                f"{path!r} is refused: '..' could lead outside the workspace; write the path from the "
                "workspace folder down, e.g. notes/todo.md"
            )
        return [part for part in parts if part != "."]

    def _below_root(self, absolute: PurePosixPath) -> list[str] | None:
        """The components of an absolute path below the workspace (as the shell or the host names it)."""
        for root in (PurePosixPath("/", SANDBOX_ROOT), PurePosixPath(self.root)):
            if absolute == root or root in absolute.parents:
                return list(absolute.parts[len(root.parts) :])
        return None

    @contextlib.contextmanager
    def locate(self, path: str, *, make_folders: bool = False) -> Iterator[Spot]:
        """Walk ``path`` from the workspace folder, each step relative to the folder before it.

        Yields the folder holding the last component (open while the caller uses it) and that name;
        links are read and their targets walked the same way. ``make_folders`` creates missing folders.
        """
        parts = self.parts(path)
        if make_folders:
            self.root.mkdir(parents=True, exist_ok=True)
        try:
            folders = [os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
        except OSError as exc:
            raise ToolError(f"the workspace folder {self.root} cannot be opened: {_why(exc)}") from None
        try:
            try:
                spot = self._walk(path, parts, folders, make_folders)
            except OSError as exc:
                raise ToolError(f"cannot open {path!r}: {_why(exc)}") from None
            yield spot
        finally:
            for fd in folders:
                os.close(fd)

    def _walk(self, path: str, parts: list[str], folders: list[int], make_folders: bool) -> Spot:
        names: list[str] = []  # the real path so far, below the workspace
        pending = list(parts)
        links = 0
        while pending:
            name = pending.pop(0)
            if name == "..":  # only ever from a link's target
                if len(folders) == 1:
                    raise ToolError(f"{path!r} leads outside the workspace through a link")
                os.close(folders.pop())
                names.pop()
                continue
            try:
                fd = os.open(name, DIR_FLAGS, dir_fd=folders[-1])
            except FileNotFoundError:
                if not pending:
                    return Spot(folders[-1], name, _shown([*names, name]))
                if not make_folders:
                    raise ToolError(f"no folder {_shown([*names, name])!r} in the workspace") from None
                with contextlib.suppress(FileExistsError):  # made meanwhile: walked like any other
                    os.mkdir(name, dir_fd=folders[-1])
                pending.insert(0, name)
                continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                target = _link_target(name, folders[-1])
                if target is None:  # a file (or another non-folder)
                    if not pending:
                        return Spot(folders[-1], name, _shown([*names, name]))
                    raise ToolError(f"{_shown([*names, name])!r} is a file, not a folder") from None
                links += 1
                if links > MAX_LINKS:
                    raise ToolError(f"{path!r} goes through more than {MAX_LINKS} links") from None
                link = PurePosixPath(target)
                if link.is_absolute():
                    inside = self._below_root(link)
                    if inside is None:
                        raise ToolError(
                            f"{path!r} is outside the workspace: {_shown([*names, name])} links to {target}"
                        ) from None
                    while len(folders) > 1:  # walked again from the workspace folder
                        os.close(folders.pop())
                    names.clear()
                    pending = [*inside, *pending]
                else:
                    pending = [*link.parts, *pending]
                continue
            folders.append(fd)
            names.append(name)
        return Spot(folders[-1], "", _shown(names))

    def read_file(self, path: str) -> str:
        """Read a text file from the workspace.

        Examples: show me my notes file; what is in todo.txt

        Args:
            path: the file's path relative to the workspace, e.g. "notes/todo.md"
        """
        data, shown = self._read(path, MAX_READ_BYTES)
        text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        if len(data) > MAX_READ_BYTES:
            text += f"\n[file cut at {MAX_READ_BYTES // 1024} KiB]"
        return OutsideText(text, f"the workspace file {shown}", file=shown)

    def _read(self, path: str, limit: int) -> tuple[bytes, str]:
        """Up to ``limit`` + 1 bytes of a regular text file (one more: it was longer), and its path as shown."""
        with self.locate(path) as spot:
            if not spot.name:
                raise ToolError(f"{path!r} is a folder: use list_dir")
            try:
                # O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: a link swapped in is refused.
                fd = os.open(spot.name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=spot.folder)
                with open(fd, "rb") as handle:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        raise ToolError(f"{path!r} is not a regular file")
                    data = handle.read(limit + 1)
            except FileNotFoundError:
                raise ToolError(f"no file {path!r} in the workspace") from None
            except OSError as exc:
                raise ToolError(f"cannot read {path!r}: {_why(exc)}{_private_hint(exc, path)}") from None
        if b"\x00" in data[:8192]:
            raise ToolError(f"{path!r} is a binary file")
        return data, spot.shown

    def write_file(self, path: str, content: str) -> str:
        """Write a text file in the workspace (replacing it; folders are created).

        Examples: save this list to a file; write a shopping list to groceries.txt

        Args:
            path: the file's path relative to the workspace
            content: the whole new text of the file
        """
        if len(content) > MAX_WRITE_CHARS:
            raise ToolError(f"content too long (at most {MAX_WRITE_CHARS} characters)")
        data = content.encode()
        shown = self._replace(path, data)
        turn = current_turn()
        if turn is not None:
            turn.trust.wrote(shown)  # every word of it is the model's own (edit_file's are not)
        return f"wrote {len(data)} bytes to {shown}"

    def edit_file(self, path: str, old: str, new: str) -> str:
        """Replace one exact piece of text in a workspace file.

        Examples: change milk to oat milk in my shopping list; fix the typo in notes.txt

        Args:
            path: the file's path relative to the workspace
            old: the text to replace; it must occur exactly once
            new: the text to put in its place
        """
        if not old:
            raise ToolError("old must not be empty")
        # The whole file, decoded strictly: what read_file cuts or replaces must never be written back.
        data, _ = self._read(path, MAX_WRITE_CHARS)
        if len(data) > MAX_WRITE_CHARS:
            raise ToolError(
                f"{path!r} is too big for edit_file (over {MAX_WRITE_CHARS // 1024} KiB): edit it with the shell, "
                "e.g. sed -i 's/old/new/' FILE"
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(
                f"{path!r} is not UTF-8 text: edit it with the shell, e.g. sed -i 's/old/new/' FILE"
            ) from None
        count = text.count(old)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times (include more context)"
            raise ToolError(f"the old text {where} in {path!r}")
        shown = self._replace(path, text.replace(old, new, 1).encode())
        return f"edited {shown}"

    def list_dir(self, path: str = ".") -> str:
        """List a workspace folder: one entry a line, folders ending in /, files with their size.

        Examples: which files do I have; list my notes folder

        Args:
            path: the folder relative to the workspace; "." is the workspace itself
        """
        with self.locate(path) as spot:
            if spot.name:
                raise ToolError(f"no folder {path!r} in the workspace")
            with os.scandir(spot.folder) as found:
                entries = sorted(found, key=lambda e: e.name)
            lines = []
            for entry in entries[:MAX_ENTRIES]:
                try:
                    if entry.is_symlink():
                        lines.append(f"{entry.name} -> {os.readlink(entry.name, dir_fd=spot.folder)}")
                    elif entry.is_dir(follow_symlinks=False):
                        lines.append(entry.name + "/")
                    else:
                        lines.append(f"{entry.name}  {entry.stat(follow_symlinks=False).st_size} bytes")
                except OSError:  # removed while listed
                    continue
        if len(entries) > MAX_ENTRIES:
            lines.append(f"[{len(entries) - MAX_ENTRIES} more entries not shown]")
        return "\n".join(lines) or "(empty folder)"

    def _make_room(self, path: str, size: int) -> None:
        """Refuse a write of ``size`` bytes that would take the workspace past its quota."""
        if self.max_bytes <= 0:
            return
        try:
            used = quota.usage(self.root)
        except FileNotFoundError:
            used = 0
        except quota.Unmeasurable as exc:
            raise ToolError(quota.over_note(exc, self.max_bytes).strip("[]") + ". Nothing was written.") from None
        need = quota.blocks(size) - self._blocks_freed(path)
        if need > 0 and used + need > self.max_bytes:
            raise ToolError(
                f"the workspace is full: {quota.mib(used)} used of {quota.mib(self.max_bytes)} "
                f"(tools.workspace_max_mb), and this write needs {quota.mib(need)} more. Nothing was written. "
                f"{quota.WHAT_TO_DO}"
            )

    def _blocks_freed(self, path: str) -> int:
        """What replacing the file at ``path`` gives back (0 when it does not exist or has other links)."""
        try:
            with self.locate(path) as spot:
                if not spot.name:
                    return 0
                info = os.stat(spot.name, dir_fd=spot.folder, follow_symlinks=False)
        except (ToolError, OSError):  # not there yet (a folder on its way missing too): nothing freed
            return 0
        return info.st_blocks * 512 if info.st_nlink == 1 else 0

    @staticmethod
    def _executable(spot: Spot) -> int:
        """The x bits of the file a write replaces (0 for a new one)."""
        try:
            return os.stat(spot.name, dir_fd=spot.folder, follow_symlinks=False).st_mode & 0o111
        except OSError:
            return 0

    def _replace(self, path: str, data: bytes) -> str:
        """Write atomically: a file half-written by a full disk never replaces the old one."""
        _hold_lasting("/".join(self.parts(path)))  # before any folder is made
        self._make_room(path, len(data))
        with self.locate(path, make_folders=True) as spot:
            if not spot.name:
                raise ToolError(f"{path!r} is a folder")
            _hold_lasting(spot.shown)  # again where the walk led: a link may point into skills/
            temporary = f".tmp-{secrets.token_hex(6)}"
            try:
                fd = os.open(
                    temporary,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                    dir_fd=spot.folder,
                )
                try:
                    # What open() would give a new file (the umask's), keeping a replaced file's x bits.
                    os.fchmod(fd, (0o666 | self._executable(spot)) & ~umask())
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(data)
                    os.replace(temporary, spot.name, src_dir_fd=spot.folder, dst_dir_fd=spot.folder)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(temporary, dir_fd=spot.folder)
                    raise
            except OSError as exc:
                raise ToolError(f"cannot write {spot.shown}: {_why(exc)}{_private_hint(exc, spot.shown)}") from None
            return spot.shown


def _hold_lasting(shown: str) -> None:
    """Refuse to write what later prompts read (:data:`LASTING`) once outside content is in the turn."""
    turn = current_turn()
    if turn is not None and turn.trust.untrusted and shown.split("/", 1)[0] in LASTING:
        raise turn.trust.refuse_lasting(f"write {shown}")


def _shown(names: list[str]) -> str:
    """A path as the model should write it (relative to the workspace)."""
    return "/".join(names) or "."


def _link_target(name: str, folder: int) -> str | None:
    """What the link ``name`` in ``folder`` points to; None when it is not a link."""
    try:
        return os.readlink(name, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return None
        raise


def _private_hint(exc: OSError, path: str) -> str:
    """What to do when a shell command made a file or folder private to the sandbox's user."""
    if exc.errno != errno.EACCES:
        return ""
    return f" (if a shell command made it private, share it again in the shell: chmod -R g+rwX {shlex.quote(path)})"


def _why(exc: OSError) -> str:
    """An OSError in words; a link where a file was a moment ago says so."""
    if exc.errno == errno.ELOOP:
        return "it became a link while it was opened (try again)"
    return exc.strerror or str(exc)


def register(registry: ToolRegistry, root: Path, max_mb: int = 0) -> WorkspaceFiles:
    """Register the file tools on this workspace, with its quota in MiB (0: none)."""
    files = WorkspaceFiles(root, max_mb * 1024 * 1024)
    registry.register(files.read_file, name="read_file", cacheable=True)
    registry.register(files.write_file, name="write_file")
    registry.register(files.edit_file, name="edit_file")
    registry.register(files.list_dir, name="list_dir", cacheable=True)
    return files
