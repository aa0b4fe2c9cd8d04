"""A small release for OTA tests: real files, a real install step, a real HTTP service with /healthz.

A real picoagent release needs 130 MB of wheels and a minute of pip; the updater does not care what a
release contains, only that its install and self-test commands succeed and that, once switched to and
restarted, /healthz answers with the release's version. This release does exactly that:

    install.sh    writes .venv/installed (what the real one's venv is), fails when FAIL_INSTALL exists
    selftest.sh   checks the install happened, fails when FAIL_SELFTEST exists; with NEEDS_ROOM, exits 3
                  (selftest.SHORT_OF_MEMORY) while the service runs, as picoagent's does on a 512 MB board
    serve.py      answers /healthz with {"status": "ok", "version": <.release.json's version>},
                  or 503 when UNHEALTHY exists in the release; at start it upgrades the device's
                  database to the release's schema (the SCHEMA file, default 9) as picoagent's
                  migrations do, and like picoagent answers 503 when the database is newer than that

`restart.py ROOT PORT` plays systemctl restart: it stops the running serve.py (pid file) and starts the
one under ROOT/opt/picoagent/current, so a switch really changes what answers. `stop.py ROOT` plays systemctl
stop (`stop.py ROOT CHECKOUT`: stop_service), and counts how often it was called in ROOT/run/stops.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

INSTALL = """#!/bin/sh
set -eu
[ ! -e FAIL_INSTALL ] || { echo "install failed on purpose" >&2; exit 3; }
mkdir -p .venv && echo ok > .venv/installed
"""

SELFTEST = """#!/bin/sh
set -eu
[ -f .venv/installed ] || { echo "not installed" >&2; exit 1; }
service=../../../../run/service.pid  # <root>/opt/picoagent/releases/<version>
if [ -e NEEDS_ROOM ] && [ -f "$service" ] && kill -0 "$(cat "$service")" 2>/dev/null; then
    echo "[FAIL] local model runs: model m.gguf needs about 160 MB, but only 150 MB are free"
    echo "self-test FAILED (1): not enough free memory for the models now" >&2
    exit 3
fi
if [ -e FAIL_SELFTEST ]; then
    echo "[FAIL] local model runs: refused on purpose"
    echo "self-test failed on purpose" >&2
    exit 4
fi
"""

SERVE = """import http.server, json, os, sys
from pathlib import Path
HERE = Path(__file__).resolve().parent
DB = HERE.parents[3] / "var/lib/picoagent/picoagent.db"  # <root>/opt/picoagent/releases/<version>
KNOWS = int((HERE / "SCHEMA").read_text()) if (HERE / "SCHEMA").exists() else 9
NEWER = False
if DB.exists():
    import sqlite3
    conn = sqlite3.connect(DB)
    schema = conn.execute("PRAGMA user_version").fetchone()[0]
    NEWER = schema > KNOWS  # written by a newer release: refused
    if schema < KNOWS:
        conn.execute(f"PRAGMA user_version={KNOWS}")
        conn.execute("CREATE TABLE IF NOT EXISTS upgraded (at TEXT)")
    conn.close()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        version = json.loads((HERE / ".release.json").read_text())["version"]
        ok = not (HERE / "UNHEALTHY").exists() and not NEWER
        body = json.dumps({"status": "ok" if ok else "degraded", "version": version}).encode()
        self.send_response(200 if ok else 503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer.allow_reuse_address = True
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""

RESTART = """import os, signal, subprocess, sys, time
from pathlib import Path
root, port = Path(sys.argv[1]), sys.argv[2]
pidfile = root / "run" / "service.pid"
pidfile.parent.mkdir(exist_ok=True)
try:
    os.kill(int(pidfile.read_text()), signal.SIGTERM)
    time.sleep(0.2)
except (OSError, ValueError):
    pass
serve = root / "opt/picoagent/current/serve.py"
if serve.exists():
    proc = subprocess.Popen([sys.executable, str(serve), port], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pidfile.write_text(str(proc.pid))
"""


def make_tree(directory: Path, *markers: str, schema: int = 9) -> Path:
    """A release tree knowing database ``schema``; ``markers`` (UNHEALTHY, FAIL_SELFTEST, FAIL_INSTALL) make
    it misbehave."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text, mode in (
        ("install.sh", INSTALL, 0o755),
        ("selftest.sh", SELFTEST, 0o755),
        ("serve.py", SERVE, 0o644),
    ):
        (directory / name).write_text(text)
        (directory / name).chmod(mode)
    (directory / "app").mkdir(exist_ok=True)
    (directory / "app" / "data.bin").write_bytes(os.urandom(64 << 10))
    for marker in markers:
        (directory / marker).write_text("on purpose\n")
    (directory / "SCHEMA").write_text(f"{schema}\n")
    return directory


STOP = """import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])  # the checkout: stop_service below is the one this file defines
from tests.fakes.ota_release import stop_service
root = Path(sys.argv[1])
(root / "run").mkdir(exist_ok=True)
with open(root / "run" / "stops", "a") as f:
    f.write("stop\\n")
stop_service(root)
"""


def write_restart(directory: Path) -> Path:
    """The restart script (kept outside the device root)."""
    path = directory / "restart.py"
    path.write_text(RESTART)
    return path


def write_stop(directory: Path) -> Path:
    """The stop script (kept outside the device root)."""
    path = directory / "stop.py"
    path.write_text(STOP)
    return path


def stop_service(root: Path) -> None:
    """Stop the release service of ``root`` (test teardown; a reboot)."""
    pidfile = root / "run" / "service.pid"
    try:
        pid = int(pidfile.read_text())
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.02)
    except (OSError, ValueError):
        pass
    pidfile.unlink(missing_ok=True)


def start_service(restart: Path, root: Path, port: int) -> None:
    """What boot does after picoagent-update-boot.service: start the service from ``current``."""
    subprocess.run([sys.executable, str(restart), str(root), str(port)], check=True)
