"""The sandbox's price: a shell-tool command in bubblewrap against the same command in a bare /bin/sh."""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from appliance.tools import sandbox
from tests.bench.common import report


def bench_shell_overhead(n: int) -> None:
    """Median wall time of `ls` through sandbox.run against `sh -c ls` (interleaved, same workspace)."""
    problem = sandbox.check()
    if problem is not None:
        print(f"sandbox: skipped ({problem.reason})")
        return
    limits = sandbox.Limits(timeout_s=10, workspace_max_bytes=1024 << 20)  # as the appliance runs it: quota on
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        (workspace / "a.txt").write_text("a")
        bare: list[float] = []
        boxed: list[float] = []
        for _ in range(n):
            started = time.perf_counter()
            subprocess.run(["/bin/sh", "-c", "ls"], cwd=workspace, capture_output=True, check=True)
            bare.append(time.perf_counter() - started)
            started = time.perf_counter()
            outcome = sandbox.run("ls", workspace, limits)
            boxed.append(time.perf_counter() - started)
            assert outcome.exit_code == 0 and "a.txt" in outcome.output
    bare.sort()
    boxed.sort()
    value, baseline = boxed[n // 2], bare[n // 2]
    # A model round takes seconds; the sandbox must stay a small part of a tool call (well under 100 ms).
    report(
        "shell_sandbox_ms",
        value * 1000,
        baseline * 1000,
        "sandboxed command < 100 ms median",
        value < 0.1,
        p90_ms=round(boxed[int(n * 0.9)] * 1000, 2),
    )
