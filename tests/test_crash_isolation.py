"""A native crash in a test (llama.cpp's, say) fails that test and the run goes on: `make test` runs pytest
with one worker process (``-n 1`` in pyproject.toml), which xdist replaces when it dies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

CRASHING = """
import os, signal

def test_a_native_crash():
    os.kill(os.getpid(), signal.SIGSEGV)  # as a segfault in native code ends a process

def test_the_next_test_still_runs():
    assert 1 + 1 == 2
"""


def test_a_segfault_is_one_failed_test_and_the_run_goes_on(tmp_path: Path) -> None:
    suite = tmp_path / "test_crashing.py"
    suite.write_text(CRASHING)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(ROOT / "pyproject.toml"),
            str(suite),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 failed, 1 passed" in out.stdout, out.stdout
    assert "worker 'gw0' crashed while running" in out.stdout and "test_a_native_crash" in out.stdout, out.stdout
