"""Whether a release is healthy after a switch: /healthz answers ok with its version, and systemd agrees.

The updater waits for this after every switch (an update, a rollback by hand, a switch back); a release
that is not healthy in time is switched away from (ota/updater.py).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

DEFAULT_HEALTH_URL = "http://127.0.0.1:8080/healthz"
UNIT = "picoagent.service"


@dataclass(frozen=True)
class HealthCheck:
    """Where /healthz answers, how long to wait, the device's own certificate, and whether systemd runs it."""

    url: str = DEFAULT_HEALTH_URL
    timeout_s: float = 180.0
    certificate: Path | None = None  # the web face's own certificate, when it serves HTTPS
    systemd: bool = False

    def wait(self, version: str) -> tuple[bool, str]:
        """Wait for /healthz to answer 200 from ``version`` (and, under systemd, the unit to be READY)."""
        deadline = time.monotonic() + self.timeout_s
        why = "no answer from /healthz"
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url, timeout=5, context=self._tls()) as resp:
                    body = json.loads(resp.read() or b"{}")
                running = body.get("version")
                if body.get("status") != "ok":
                    why = f"/healthz says {body.get('status')!r}"
                elif running != version:
                    why = f"/healthz answers from version {running}, not {version}"
                elif self.systemd and not unit_ready():
                    why = f"{UNIT} is not active (no READY from systemd)"
                else:
                    return True, "healthy"
            except (OSError, ValueError, urllib.error.URLError) as exc:
                why = f"no answer from /healthz ({exc})"
            time.sleep(0.5)
        return False, f"{why} within {self.timeout_s:.0f} s"

    def _tls(self) -> ssl.SSLContext | None:
        """Over HTTPS (http:// is then redirected), trust the device's own certificate and nothing else."""
        certificate = self.certificate
        return ssl.create_default_context(cafile=str(certificate)) if certificate and certificate.exists() else None


def unit_ready() -> bool:
    """systemd reports picoagent.service active and running (it sent READY)."""
    out = subprocess.run(
        ["systemctl", "show", UNIT, "--property=ActiveState,SubState"], capture_output=True, text=True, check=False
    ).stdout
    return "ActiveState=active" in out and "SubState=running" in out
