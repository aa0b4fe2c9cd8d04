"""The memory as Markdown in the workspace: MEMORY.md for facts, HISTORY.md for conversation summaries."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from appliance.errors import PicoagentError
from appliance.fileio import write_atomic
from appliance.memory.db import Database
from appliance.memory.records import MEMORY_COLUMNS, Memory


def export_markdown(db: Database, workspace: Path) -> tuple[Path, Path]:
    """Write MEMORY.md (facts, newest first) and HISTORY.md (summaries, oldest first) into a workspace."""
    with db.reading() as conn:
        facts = conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE kind = 'fact' ORDER BY created_at DESC, id DESC"
        ).fetchall()
        summaries = conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE kind = 'summary' ORDER BY created_at, id"
        ).fetchall()
    return write_markdown(workspace, [Memory(*r) for r in facts], [Memory(*r) for r in summaries])


def facts_markdown(facts: Iterable[Memory]) -> str:
    """MEMORY.md's text: the facts in the order given (the web page's export gives the same)."""
    lines = ["# Memory", "", "Facts picoagent remembers, newest first (exported from its database).", ""]
    for fact in facts:
        text = "\n  ".join(fact.text.splitlines())  # continuation lines stay inside the list item
        lines.append(f"- {_date(fact.created_at)} ({fact.source}): {text}")
    return "\n".join(lines).rstrip() + "\n"


def history_markdown(summaries: Iterable[Memory]) -> str:
    """HISTORY.md's text: the conversation summaries in the order given."""
    history = ["# History", "", "Summaries of past conversations, oldest first.", ""]
    for summary in summaries:
        history += [f"## {_date(summary.created_at, with_time=True)} ({summary.source})", "", summary.text, ""]
    return "\n".join(history).rstrip() + "\n"


def write_markdown(workspace: Path, facts: Iterable[Memory], summaries: Iterable[Memory]) -> tuple[Path, Path]:
    """Write MEMORY.md and HISTORY.md into a workspace: the facts and the summaries, each in the order given."""
    memory_md, history_md = Path(workspace) / "MEMORY.md", Path(workspace) / "HISTORY.md"
    _write_atomically(memory_md, facts_markdown(facts))
    _write_atomically(history_md, history_markdown(summaries))
    return memory_md, history_md


def _date(timestamp: float, *, with_time: bool = False) -> str:
    return time.strftime("%Y-%m-%d %H:%M" if with_time else "%Y-%m-%d", time.localtime(timestamp))


def _write_atomically(path: Path, text: str) -> None:
    """Write a workspace file whole or not at all, with an error for people."""
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise PicoagentError(
            f"cannot write {path}: {exc.strerror or exc}", fix="check that the workspace directory is writable"
        ) from None


__all__ = ["export_markdown", "facts_markdown", "history_markdown", "write_markdown"]
