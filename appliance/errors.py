"""One exception hierarchy for expected failures, translated at the edges (CLI, HTTP, tool results).

Every error carries a message for people and, where there is one, the fix. Errors also subclass the
matching builtin so that generic handlers (``except FileNotFoundError``) keep working.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


class PicoagentError(Exception):
    """An expected failure: say what went wrong and, in ``fix``, what to do about it."""

    exit_code = 1

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message

    def for_people(self) -> str:
        """The message and its fix, as printed by the CLI."""
        return f"{self.message}\n  fix: {self.fix}" if self.fix else self.message


class ConfigError(PicoagentError, ValueError):
    """The configuration (file, key, value or secret reference) is wrong."""

    exit_code = 2


class UsageError(PicoagentError, ValueError):
    """A command was called with arguments it cannot take."""

    exit_code = 2


class ModelError(PicoagentError, RuntimeError):
    """The local model cannot be loaded or run."""


class ContextOverflow(ModelError):
    """The prompt does not fit the model's context window."""


class ModelNotFoundError(ModelError, FileNotFoundError):
    """The model file is not where the configuration says."""


class ModelFormatError(ModelError):
    """The model file is not a GGUF file llama.cpp can load."""


class ModelTooLargeError(ModelError, MemoryError):
    """The model needs more memory than is free."""


class UnknownModelError(ModelError, KeyError):
    """A model name is not in the catalog."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


class DownloadError(PicoagentError, OSError):
    """A model download failed; nothing was installed."""


class ChecksumError(DownloadError):
    """A downloaded file's sha256 does not match the catalog; it was deleted."""


class DatabaseError(PicoagentError, RuntimeError):
    """The SQLite database cannot be opened or written."""


class ToolError(PicoagentError, RuntimeError):
    """A tool failed; inside a turn this becomes a result the model reads."""


class UnknownToolError(ToolError, KeyError):
    """No tool has that name."""

    def __str__(self) -> str:
        return self.message


class UnknownDeviceError(PicoagentError, LookupError):
    """No device has that name."""

    def __str__(self) -> str:
        return self.message


class PolicyError(PicoagentError, PermissionError):
    """Refused by policy (not allowed, rate-limited, outside the allowlist); nothing was touched."""


class Cancelled(PicoagentError):
    """A generation or turn was cancelled by its caller."""


def exit_for_people(command: Callable[[], int]) -> int:
    """Run a program's command and return its exit status; the one translation at the command-line edge.

    An expected failure prints its message and fix (never a traceback) and exits with its code; Ctrl-C
    exits 130; output piped into a reader that stopped (``| head``) is not an error.
    """
    try:
        return command()
    except PicoagentError as exc:
        print(f"error: {exc.for_people()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
