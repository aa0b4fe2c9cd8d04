"""The workspace quota's price: a write_file that measures a workspace of many files, against one in an empty one.

Both sides are the appliance's own WorkspaceFiles with its quota on; only the workspace differs, so
the ratio is what walking the files costs. The walk's figure per entry is what the module docstring
of appliance/tools/quota.py quotes; `du -s` must agree with the walk.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from appliance.tools import quota
from appliance.tools.workspace import WorkspaceFiles
from tests.bench.common import report

PER_FOLDER = 100


def fill(root: Path, files: int) -> None:
    """``files`` small files, PER_FOLDER to a folder, two levels deep."""
    for i in range(files):
        folder = root / f"d{i // (PER_FOLDER * PER_FOLDER)}" / f"d{i // PER_FOLDER}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_text(f"note {i}\n")


def bench_quota(files: int, reps: int = 5) -> dict[str, Any]:
    """Median write_file time with ``files`` files in the workspace against an empty one (interleaved)."""
    with tempfile.TemporaryDirectory() as folder:
        full, empty = Path(folder) / "full", Path(folder) / "empty"
        full.mkdir()
        empty.mkdir()
        fill(full, files)
        tools = {name: WorkspaceFiles(root, 1 << 40) for name, root in (("full", full), ("empty", empty))}
        took: dict[str, list[float]] = {"full": [], "empty": []}
        walks: list[float] = []
        for i in range(reps):
            for name, files_tool in tools.items():
                started = time.perf_counter()
                files_tool.write_file(f"w{i}.txt", "a line\n")
                took[name].append(time.perf_counter() - started)
            started = time.perf_counter()
            used = quota.usage(full)
            walks.append(time.perf_counter() - started)
        du = subprocess.run(["du", "-sB1", str(full)], capture_output=True, text=True, check=True)
        value, baseline = statistics.median(took["full"]), statistics.median(took["empty"])
        walk = statistics.median(walks)
        # A model round takes seconds: a write that walks 10,000 files must stay well under 100 ms.
        return report(
            "workspace_quota_write_ms",
            value * 1000,
            baseline * 1000,
            f"write_file with {files} files in the workspace < 100 ms median",
            value < 0.1,
            files=files,
            walk_ms=round(walk * 1000, 2),
            walk_us_per_entry=round(walk * 1e6 / (files + files // PER_FOLDER + 1), 2),
            matches_du=int(du.stdout.split()[0]) == used,
        )
