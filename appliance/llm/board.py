"""Which catalog model suits this board: ``llm.model: auto`` and the fits mark of `picoagent models list`.

The choice is a table by the board's RAM (MemTotal: what the kernel manages, a little under the size
printed on the board, since the firmware keeps some) and its CPU. The first row whose conditions the
board meets wins:

=========================  ==========  ===============  ==================================================
MemTotal at least          cores       model            typical boards
=========================  ==========  ===============  ==================================================
3 GiB                      4 or more   qwen2.5-1.5b     Pi 4 with 4 or 8 GB, Pi 5 with 4/8/16 GB (~3.7 GiB at 4 GB)
768 MiB                    any         qwen2.5-0.5b     Pi 3 (1 GB), Pi 4 / Pi 5 with 1 or 2 GB
less                       any         smollm2-135m     Pi Zero 2 W, Pi 3 A+ (512 MB): the packaged model
=========================  ==========  ===============  ==================================================

A slow CPU stops at the 0.5B row whatever its RAM: a board named Pi 2, Pi 3 or Pi Zero (Cortex-A53 or
older: a 1.5B model decodes at ~2 tokens/s there), and anything with fewer than 4 cores.

A model *fits* a board when the catalog's RAM estimate for it (weights, a 2048-token f16 KV cache and
the runtime's buffers) plus :data:`SYSTEM_RESERVE_BYTES` for Debian and picoagent itself is at most
MemTotal. Every model the table picks fits the smallest board of its row (tests/test_model_fetch.py).

Reading the board is cheap (three small /proc files) and has no imports beyond the standard library.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MiB = 1024 * 1024
GiB = 1024 * MiB
SYSTEM_RESERVE_BYTES = 160 * MiB  # Debian with journald, sshd, avahi (~100 MiB) and the idle daemon (~50 MiB)

AUTO = (
    "auto"  # llm.model's value (and picoagent-setup.yaml's model:) that asks for this table's choice (llm.choice.AUTO)
)


@dataclass(frozen=True)
class Tier:
    """One row of the auto-choice table."""

    min_mem_bytes: int
    min_cores: int
    model: str
    fast_cpu_only: bool  # a slow board (SLOW_BOARDS) never gets this row
    boards: str  # who the row is for, as the README's table says it


AUTO_TABLE: tuple[Tier, ...] = (
    Tier(3 * GiB, 4, "qwen2.5-1.5b", True, "Pi 4 / Pi 5 with 4 GB or more"),
    Tier(768 * MiB, 1, "qwen2.5-0.5b", False, "Pi 3, Pi 4 / Pi 5 with 1 or 2 GB"),
    Tier(0, 1, "smollm2-135m", False, "Pi Zero 2 W, 512 MB boards (the packaged model)"),
)
SLOW_BOARDS = ("raspberry pi 2", "raspberry pi 3", "raspberry pi zero")


@dataclass(frozen=True)
class Board:
    """What the auto choice looks at: the board's name, its RAM and its CPU cores."""

    name: str  # "Raspberry Pi 4 Model B Rev 1.4"; a CPU model elsewhere; "" when unknown
    mem_bytes: int  # MemTotal
    cores: int

    def describe(self) -> str:
        """One line for people: "Raspberry Pi 4 Model B Rev 1.4, 3.7 GiB RAM, 4 cores"."""
        name = self.name or "this machine"
        return f"{name}, {self.mem_bytes / GiB:.1f} GiB RAM, {self.cores} cores"


def choose_model(mem_bytes: int, cores: int, board: str) -> str:
    """The catalog model ``llm.model: auto`` runs on a board with this MemTotal, core count and name."""
    slow = board.strip().lower().startswith(SLOW_BOARDS)
    for tier in AUTO_TABLE:
        if mem_bytes >= tier.min_mem_bytes and cores >= tier.min_cores and not (slow and tier.fast_cpu_only):
            return tier.model
    return AUTO_TABLE[-1].model


def fits(ram_mb: int, mem_bytes: int) -> bool:
    """Whether a model needing ``ram_mb`` MB (the catalog's estimate) runs on a board with this MemTotal."""
    return ram_mb * MiB + SYSTEM_RESERVE_BYTES <= mem_bytes


def _mem_total(proc: Path) -> int:
    try:
        with (proc / "meminfo").open(encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _board_name(proc: Path) -> str:
    try:  # the Pi's firmware names the board here ("Raspberry Pi 5 Model B Rev 1.0\0")
        return (proc / "device-tree" / "model").read_bytes().rstrip(b"\0").decode("utf-8", "replace").strip()
    except OSError:
        pass
    try:
        text = (proc / "cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        found.setdefault(key.strip(), value.strip())
    return found.get("Model", "") or found.get("model name", "")  # a Pi's kernel says Model; x86, model name


def read_board(proc: Path = Path("/proc")) -> Board:
    """This board, from /proc (MemTotal 0 and no name where /proc lacks them)."""
    return Board(_board_name(proc), _mem_total(proc), os.cpu_count() or 1)


def choose_for(board: Board) -> str:
    """:func:`choose_model` for a board read with :func:`read_board`."""
    return choose_model(board.mem_bytes, board.cores, board.name)
