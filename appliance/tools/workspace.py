"""File tools on the workspace: read_file, write_file, edit_file, list_dir.

Every path is taken relative to the workspace, resolved (symlinks followed) and refused when the
result is not inside the workspace: ``../x``, ``/etc/passwd`` and a link pointing out all end the same
way. Only the shell tool runs programs, and it runs them in the sandbox.

Files are made with the process's umask, like any other: under systemd (UMask=0007) that leaves them
readable and writable by the workspace's group, which is how the shell sandbox, a user of its own,
reads and changes what the model wrote here (systemd/picoagent.tmpfiles).
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
import tempfile
from pathlib import Path

from appliance.errors import ToolError
from appliance.fileio import umask
from appliance.tools.registry import ToolRegistry

MAX_READ_BYTES = 512 * 1024
MAX_WRITE_CHARS = 1024 * 1024
MAX_ENTRIES = 200


class WorkspaceFiles:
    """The workspace as the model's file tools see it."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def resolve(self, path: str) -> Path:
        """The real path of ``path`` inside the workspace, or ToolError when it leads outside."""
        if "\x00" in path:
            raise ToolError("a path cannot contain a NUL character")
        relative = path.strip() or "."
        candidate = Path(relative)
        if candidate.is_absolute() and candidate.parts[1:2] == ("workspace",):
            candidate = Path(*candidate.parts[2:])  # "/workspace/x" is how the shell sees it
        real = (self.root / candidate).resolve()  # another absolute path stays itself, and is refused
        if real != self.root and self.root not in real.parents:
            raise ToolError(f"{path!r} is outside the workspace: paths are relative to the workspace folder")
        return real

    def shown(self, real: Path) -> str:
        """A path as the model should write it (relative to the workspace)."""
        return str(real.relative_to(self.root)) if real != self.root else "."

    def read_file(self, path: str) -> str:
        """Read a text file from the workspace.

        Examples: show me my notes file; what is in todo.txt

        Args:
            path: the file's path relative to the workspace, e.g. "notes/todo.md"
        """
        real = self.resolve(path)
        if real.is_dir():
            raise ToolError(f"{path!r} is a folder: use list_dir")
        try:
            # O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: a link swapped in is refused.
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
            with open(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise ToolError(f"{path!r} is not a regular file")
                data = handle.read(MAX_READ_BYTES + 1)
        except FileNotFoundError:
            raise ToolError(f"no file {path!r} in the workspace") from None
        except OSError as exc:
            raise ToolError(f"cannot read {path!r}: {exc.strerror}{_private_hint(exc, path)}") from None
        if b"\x00" in data[:8192]:
            raise ToolError(f"{path!r} is a binary file")
        text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        if len(data) > MAX_READ_BYTES:
            text += f"\n[file cut at {MAX_READ_BYTES // 1024} KiB]"
        return text

    def write_file(self, path: str, content: str) -> str:
        """Write a text file in the workspace (replacing it; folders are created).

        Examples: save this list to a file; write a shopping list to groceries.txt

        Args:
            path: the file's path relative to the workspace
            content: the whole new text of the file
        """
        if len(content) > MAX_WRITE_CHARS:
            raise ToolError(f"content too long (at most {MAX_WRITE_CHARS} characters)")
        real = self.resolve(path)
        if real == self.root or real.is_dir():
            raise ToolError(f"{path!r} is a folder")
        self._replace(real, content)
        return f"wrote {len(content.encode())} bytes to {self.shown(real)}"

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
        text = self.read_file(path)
        count = text.count(old)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times (include more context)"
            raise ToolError(f"the old text {where} in {path!r}")
        real = self.resolve(path)
        self._replace(real, text.replace(old, new, 1))
        return f"edited {self.shown(real)}"

    def list_dir(self, path: str = ".") -> str:
        """List a workspace folder: one entry a line, folders ending in /, files with their size.

        Examples: which files do I have; list my notes folder

        Args:
            path: the folder relative to the workspace; "." is the workspace itself
        """
        real = self.resolve(path)
        if not real.is_dir():
            raise ToolError(f"no folder {path!r} in the workspace")
        entries = sorted(os.scandir(real), key=lambda e: e.name)
        lines = []
        for entry in entries[:MAX_ENTRIES]:
            if entry.is_symlink():
                lines.append(f"{entry.name} -> {os.readlink(entry.path)}")
            elif entry.is_dir():
                lines.append(entry.name + "/")
            else:
                lines.append(f"{entry.name}  {entry.stat().st_size} bytes")
        if len(entries) > MAX_ENTRIES:
            lines.append(f"[{len(entries) - MAX_ENTRIES} more entries not shown]")
        return "\n".join(lines) or "(empty folder)"

    def _replace(self, real: Path, content: str) -> None:
        """Write atomically: a file half-written by a full disk never replaces the old one."""
        try:
            real.parent.mkdir(parents=True, exist_ok=True)
            self.resolve(self.shown(real.parent))  # a folder made through a link must still be inside
            fd, temporary = tempfile.mkstemp(dir=real.parent, prefix=".tmp-")
            try:
                # mkstemp makes 0600: give the new file what open() would, and keep a replaced file's x bits.
                executable = real.stat().st_mode & 0o111 if real.exists() else 0
                os.fchmod(fd, (0o666 | executable) & ~umask())
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(content)
                os.replace(temporary, real)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as exc:
            shown = self.shown(real)
            raise ToolError(f"cannot write {shown}: {exc.strerror}{_private_hint(exc, shown)}") from None


def _private_hint(exc: OSError, path: str) -> str:
    """What to do when a shell command made a file or folder private to the sandbox's user."""
    if exc.errno != errno.EACCES:
        return ""
    return f" (if a shell command made it private, share it again in the shell: chmod -R g+rwX {shlex.quote(path)})"


def register(registry: ToolRegistry, root: Path) -> WorkspaceFiles:
    """Register the file tools on this workspace."""
    files = WorkspaceFiles(root)
    registry.register(files.read_file, name="read_file", cacheable=True)
    registry.register(files.write_file, name="write_file")
    registry.register(files.edit_file, name="edit_file")
    registry.register(files.list_dir, name="list_dir", cacheable=True)
    return files
