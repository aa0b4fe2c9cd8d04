"""The shipped systemd unit, checked by systemd's own tools (offline: no systemd as PID 1 is needed)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[1] / "systemd" / "picoagent.service"
MAX_EXPOSURE = 2.0


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.fail("systemd-analyze is missing: `make test` installs Debian's systemd package (apt)")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=60, check=False)


def test_the_unit_exposure_level_is_at_most_2() -> None:
    out = analyze("security", "--offline=yes", str(UNIT))
    match = re.search(r"Overall exposure level for picoagent\.service: (\d+(?:\.\d+)?)", out.stdout)
    assert match, out.stdout + out.stderr
    level = float(match.group(1))
    print(f"systemd-analyze security: exposure level {level} (goal <= {MAX_EXPOSURE})")
    assert level <= MAX_EXPOSURE, out.stdout
    # The same gate the way systemd offers it: --threshold takes tenths and fails above them.
    gate = analyze("security", "--offline=yes", f"--threshold={int(MAX_EXPOSURE * 10)}", str(UNIT))
    assert gate.returncode == 0, gate.stdout


def test_the_unit_keeps_what_the_appliance_needs() -> None:
    text = UNIT.read_text(encoding="utf-8")
    settings = {line.split("=", 1)[0]: line.split("=", 1)[1] for line in text.splitlines() if "=" in line[:40]}
    assert settings["Type"] == "notify" and settings["WatchdogSec"]  # sd_notify READY and WATCHDOG
    assert settings["User"] == "picoagent" and set(settings["SupplementaryGroups"].split()) == {"gpio", "i2c", "spi"}
    assert settings["ProtectSystem"] == "strict" and settings["StateDirectory"] == "picoagent"
    allowed = [line.split("=", 1)[1] for line in text.splitlines() if line.startswith("DeviceAllow=")]
    assert allowed == ["char-gpiochip rw", "char-i2c rw", "char-spi rw"] and settings["DevicePolicy"] == "closed"
    # PrivateDevices would hide the GPIO/I2C/SPI nodes and PrivateUsers would drop the groups.
    assert "PrivateDevices" not in settings and "PrivateUsers" not in settings
    assert settings["Restart"] == "on-failure" and settings["NoNewPrivileges"] == "yes"
