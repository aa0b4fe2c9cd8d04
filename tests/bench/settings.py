"""Issue 35's figures: a setting saved from the page and applied by the running daemon, and the status page's
first paint against the same page before the Settings page existed (the code of BEFORE, served in the same run).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from io import BytesIO
from pathlib import Path
from typing import Any

from tests.bench.common import ROOT, report
from tests.bench.daemon import _config, _free_port, _stop, _until_healthy, start_serve

BEFORE = "de8a3b5"  # the last commit before issue 35: its status page is the first paint's baseline
PASSWORD = "bench horse battery"


def _call(port: int, token: str, path: str, body: dict[str, Any] | None = None) -> tuple[float, Any]:
    """Seconds for one request, and its JSON answer."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=10) as response:
        answer = json.loads(response.read())
    return time.perf_counter() - started, answer


def bench_settings_save(reps: int) -> dict[str, Any]:
    """POST /api/settings (the porch light's approval, flipped) to its answer, which comes after the running
    daemon applied it; baseline: GET /api/settings. Goal: saved and applied within 1 s."""
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        proc = start_serve(_config(Path(tmp), preload=False), Path(tmp) / "d", port)
        try:
            _until_healthy(port)
            token = (Path(tmp) / "d" / "cli.token").read_text().strip()
            saves, reads, applied = [], [], True
            for i in range(reps):
                took, doc = _call(port, token, "/api/settings")
                reads.append(took)
                change = {"devices.porch_light.approval": "required" if i % 2 == 0 else "none"}
                took, said = _call(port, token, "/api/settings", {"version": doc["version"], "set": change})
                saves.append(took)
                applied = applied and said["applied"] == ["devices.porch_light.approval"]
        finally:
            _stop(proc)
    value, baseline = statistics.median(saves), statistics.median(reads)
    return report(
        "settings_save_applied_s", value, baseline, "value <= 1 s, applied", value <= 1.0 and applied, runs=reps
    )


def _before_checkout(into: Path) -> Path | None:
    """The code of BEFORE, unpacked from git (None: this clone does not have that commit)."""
    archive = subprocess.run(["git", "archive", BEFORE, "appliance", "config"], cwd=ROOT, capture_output=True)
    if archive.returncode != 0:
        return None
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into)  # our own repository's archive
    return into


def _first_paint(base: str, page: Any) -> float:
    page.goto(base + "/")
    page.wait_for_function("() => performance.getEntriesByName('first-contentful-paint').length > 0")
    return float(page.evaluate("() => performance.getEntriesByName('first-contentful-paint')[0].startTime")) / 1000


def bench_status_first_paint(reps: int) -> dict[str, Any]:
    """The status page's first contentful paint in Chromium, this code against BEFORE's, both served now,
    measured alternately. Goal: ratio <= 1.1."""
    from playwright.sync_api import sync_playwright

    from tests.test_web_browser import CHROMIUM, CHROMIUM_ARGS

    with tempfile.TemporaryDirectory() as tmp:
        if not CHROMIUM.exists():
            raise RuntimeError(f"{CHROMIUM} is missing: apt-get install chromium (make test installs it)")
        # Without BEFORE's commit (a shallow clone) both sides are this code: the row says so and is not ok.
        old = _before_checkout(Path(tmp) / "code-before")
        sites: dict[str, str] = {}
        procs: list[tuple[subprocess.Popen[bytes], int]] = []
        for name, root in (("now", ROOT), ("before", old or ROOT)):
            here = Path(tmp) / name
            here.mkdir()
            # Each its own release's config: a config file of today has keys BEFORE's code does not know.
            config, data, port = here / "picoagent.yaml", here / "d", _free_port()
            shipped = (Path(root) / "config" / "picoagent.yaml").read_text()
            config.write_text(shipped.replace("preload: true", "preload: false"))
            env = {k: v for k, v in os.environ.items() if k not in ("PICOAGENT_CONFIG", "PYTHONPATH")}
            cli = [sys.executable, "-m", "appliance", "--config", str(config), "--data-dir", str(data)]
            subprocess.run(
                [*cli, "passwd", "--stdin"],
                input=PASSWORD + "\n",
                text=True,
                cwd=root,
                env=env | {"PYTHONPATH": str(root)},
                check=True,
                capture_output=True,
            )
            procs.append((start_serve(config, data, port, root=root), port))
            sites[name] = f"http://127.0.0.1:{port}"
        try:
            for _, port in procs:
                _until_healthy(port)
            times: dict[str, list[float]] = {"now": [], "before": []}
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                pages = {}
                for name, base in sites.items():
                    context = browser.new_context(viewport={"width": 1280, "height": 800})
                    page = context.new_page()
                    page.goto(base + "/login")
                    page.get_by_label("Password").fill(PASSWORD)
                    page.get_by_role("button", name="Sign in").click()
                    page.wait_for_url(base + "/")
                    pages[name] = page
                for _ in range(reps):
                    for name in ("before", "now"):
                        times[name].append(_first_paint(sites[name], pages[name]))
                browser.close()
        finally:
            for proc, _ in procs:
                _stop(proc)
    value, baseline = statistics.median(times["now"]), statistics.median(times["before"])
    baseline_of = f"the status page of {BEFORE}" if old is not None else f"none: {BEFORE} is not in this clone"
    ok = old is not None and value <= 1.1 * baseline
    return report("status_first_paint_s", value, baseline, "ratio <= 1.1", ok, runs=reps, baseline_of=baseline_of)
