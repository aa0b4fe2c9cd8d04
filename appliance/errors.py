"""One exception hierarchy for expected failures, translated at the edges (CLI, HTTP, tool results).

Every error carries a message for people and, where there is one, the fix. Errors also subclass the
matching builtin so that generic handlers (``except FileNotFoundError``) keep working.

Each class also says how an edge answers it: ``exit_code`` for the command line, ``http_status`` for the
web API (``channels/web/http.py``). A failure that needs another status is another class (``NotFound``,
``Conflict``, ``RateLimited``, ``Unavailable``), raised where the failure is known, so no edge ever
reads a message to choose a status. The status classes come first among a subclass's bases, so that
their status wins over the other base's (``class UnknownApprovalError(NotFound, ApprovalError)``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable


class PicoagentError(Exception):
    """An expected failure: say what went wrong and, in ``fix``, what to do about it."""

    exit_code = 1
    http_status = 500

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message

    def for_people(self) -> str:
        """The message and its fix, as printed by the CLI."""
        return f"{self.message}\n  fix: {self.fix}" if self.fix else self.message


class NotFound(PicoagentError, LookupError):
    """The thing asked for (a device, an approval) does not exist."""

    http_status = 404


class Conflict(PicoagentError):
    """The request clashes with the thing's state now (an approval already decided or expired)."""

    http_status = 409


class Unavailable(PicoagentError):
    """The appliance cannot serve this now (not enough memory); trying later may work."""

    http_status = 503


class AlreadyRunning(Conflict):
    """Another daemon serves this data dir; nothing was touched."""

    exit_code = 2  # like a config error: the command was refused before it began


class ConfigError(PicoagentError, ValueError):
    """The configuration (file, key, value or secret reference) is wrong."""

    exit_code = 2
    http_status = 400


class UsageError(PicoagentError, ValueError):
    """A command was called with arguments it cannot take."""

    exit_code = 2
    http_status = 400


class ModelError(PicoagentError, RuntimeError):
    """The local model cannot be loaded or run."""


class ContextOverflow(ModelError):
    """The prompt does not fit the model's context window."""


class ModelNotFoundError(ModelError, FileNotFoundError):
    """The model file is not where the configuration says."""


class ModelFormatError(ModelError):
    """The model file is not a GGUF file llama.cpp can load."""


class ModelCrashed(Unavailable, ModelError):
    """The model runner (the child process that runs llama.cpp) died while it worked; it is restarted."""


class LocalModelOff(Unavailable, ModelError):
    """The local model is off after repeated crashes of its runner (see ``picoagent doctor``)."""


class ModelTooLargeError(Unavailable, ModelError, MemoryError):
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


class UnknownDeviceError(NotFound):
    """No device has that name."""

    def __str__(self) -> str:
        return self.message


class PolicyError(PicoagentError, PermissionError):
    """Refused by policy (not allowed, rate-limited, outside the allowlist); nothing was touched."""

    http_status = 403


class RateLimited(PolicyError):
    """Refused because it was asked too often (a device's writes_per_minute); nothing was touched."""

    http_status = 429


class Cancelled(PicoagentError):
    """A generation or turn was cancelled by its caller."""


def known(names: Iterable[str], none: str = "none") -> str:
    """The names a not-found error offers in its fix, sorted and joined; ``none`` when there are none."""
    return ", ".join(sorted(names)) or none


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
