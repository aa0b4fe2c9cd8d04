"""`picoagent chat` read as a person reads it: the footer under a reply says what served it, plainly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_reply_no_model_wrote_says_so_in_the_terminal(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PICOAGENT_CONFIG"}  # the checkout's config: example devices
    out = subprocess.run(
        [sys.executable, "-m", "appliance", "chat", "--data-dir", str(tmp_path)],
        input="turn on the porch light\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    footer = next(line for line in lines if line.startswith("["))
    assert footer.startswith("[answered without the model · intent fast path: ") and footer.endswith(" s]")
    assert "porch_light" in footer
    assert "tok/s" not in out.stdout and "first token" not in out.stdout  # no "0.0 tok/s" for a reply no model wrote
