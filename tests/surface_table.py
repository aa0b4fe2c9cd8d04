"""The README's table of who may do what (Security model), read for the tests that try each cell.

Each row is an inbound surface, each column something it may or may not make the Pi do; a cell's first
word is ``yes`` or ``no`` (what follows in parentheses explains). The tests try every cell through the
real code and compare what happened with the cell, so the table and the code cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
COLUMNS = ("talk", "commands", "approve", "read memory", "move devices without approval")
HEADER = "| surface | " + " | ".join(COLUMNS) + " |"


def surface_table(text: str | None = None) -> dict[str, dict[str, bool]]:
    """surface -> column -> allowed, as the README's Security model says."""
    text = README.read_text(encoding="utf-8") if text is None else text
    section = text.split("## Security model", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    start = lines.index(HEADER)  # ValueError: the table or its columns changed
    table: dict[str, dict[str, bool]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        surface, *cells = (cell.strip() for cell in line.strip().strip("|").split("|"))
        assert len(cells) == len(COLUMNS), f"the row {surface!r} has {len(cells)} cells, not {len(COLUMNS)}"
        words = [re.match(r"\w+", cell) for cell in cells]
        assert all(w and w.group(0) in ("yes", "no") for w in words), f"{surface!r}: a cell must begin with yes or no"
        table[surface] = {column: w.group(0) == "yes" for column, w in zip(COLUMNS, words, strict=True) if w}
    return table


def cells(rows: list[str]) -> list[tuple[str, str, bool]]:
    """(surface, column, allowed) for each cell of the given rows, in the table's order."""
    table = surface_table()
    return [(row, column, table[row][column]) for row in rows for column in COLUMNS]
