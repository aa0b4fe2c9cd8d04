"""`picoagent doctor` checks the broker (connect + login, clear fixes, no password shown); status's mqtt line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.cli.system import mqtt_line
from tests.helpers import config_file, free_port, picoagent, wait_healthy
from tests.mqtt_broker import PASSWORD, USER, Broker, running
from tests.test_daemon import Serve

ENABLED = (
    "  # Connect to the broker (off: nothing MQTT is loaded, the daemon runs without a broker).\n  enabled: false\n"
)
PORT = "  port: 1883\n"
USERNAME = '  # User name at the broker; empty: anonymous.\n  username: ""\n'
PASSWORD_LINE = '  password: ""\n  # The MQTT client id'


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with running(tmp_path / "mosquitto", users={USER: PASSWORD}) as b:
        yield b


def _doctor(tmp_path: Path, port: int, secret: str, name: str, data: Path | None = None) -> str:
    folder = tmp_path / name
    config = config_file(
        folder,
        {
            ENABLED: ENABLED.replace("false", "true"),
            PORT: f"  port: {port}\n",
            USERNAME: USERNAME.replace('""', USER),
            PASSWORD_LINE: PASSWORD_LINE.replace('""', "${MQTT_PASSWORD}"),
        },
    )
    (folder / "secrets.env").write_text(f"MQTT_PASSWORD={secret}\n", encoding="utf-8")
    data = data or tmp_path / "data"
    out = picoagent("doctor", "--config", config, "--data-dir", data, cwd=tmp_path, timeout=120)
    assert "Traceback" not in out.stdout + out.stderr
    return out.stdout


def test_doctor_checks_the_broker_login(tmp_path: Path, broker: Broker) -> None:
    good = _doctor(tmp_path, broker.port, PASSWORD, "good")
    assert f"[ok  ] mqtt: mqtt://127.0.0.1:{broker.port} accepts picoagent as pico" in good

    bad = _doctor(tmp_path, broker.port, "not-the-password", "bad")
    assert f"[FAIL] mqtt: the broker at 127.0.0.1:{broker.port} refused the login as 'pico'" in bad
    assert "fix: check mqtt.username and MQTT_PASSWORD in the secrets file" in bad
    assert "not-the-password" not in bad

    nowhere = _doctor(tmp_path, free_port(), PASSWORD, "nowhere")
    assert "[FAIL] mqtt: cannot reach the broker at 127.0.0.1:" in nowhere
    assert "fix: start the broker (systemctl start mosquitto) or fix mqtt.host and mqtt.port" in nowhere


def test_doctor_says_a_running_daemon_without_mqtt_needs_a_restart(tmp_path: Path, broker: Broker) -> None:
    """MQTT turned on in the file while the daemon runs it off: the broker is fine, the daemon is not using it
    (a README walk read "ok" here and waited for messages that never came)."""
    (tmp_path / "daemon").mkdir()
    daemon = Serve(tmp_path / "daemon", free_port())
    try:
        wait_healthy(daemon.port)
        said = _doctor(tmp_path, broker.port, PASSWORD, "on", data=daemon.data)
    finally:
        daemon.stop()
    assert (
        f"[warn] mqtt: mqtt://127.0.0.1:{broker.port} accepts picoagent as pico; topics under picoagent/, "
        "discovery under homeassistant/; off in the running daemon (the config turns it on)"
    ) in said, said
    assert "fix: systemctl restart picoagent (or restart `picoagent serve`)" in said


def test_doctor_says_mqtt_is_off_without_loading_it(tmp_path: Path) -> None:
    config = config_file(tmp_path / "off")
    out = picoagent("doctor", "--config", config, "--data-dir", tmp_path / "data", cwd=tmp_path, timeout=120)
    assert "[ok  ] mqtt: off (mqtt.enabled: false)" in out.stdout
    assert "[ok  ] home assistant: off (homeassistant.enabled: false)" in out.stdout


def test_the_status_line_says_whether_the_link_is_up() -> None:
    up = {"connected": True, "broker": "mqtt://pi:1883", "reconnects": 2, "last_error": None, "dropped": 0}
    assert mqtt_line(up | {"commands": 5}) == "mqtt: mqtt://pi:1883 connected, 2 reconnect(s), 5 command(s)"
    down = up | {"connected": False, "last_error": "cannot reach the broker at pi:1883", "dropped": 3}
    assert mqtt_line(down) == (
        "mqtt: mqtt://pi:1883 not connected (cannot reach the broker at pi:1883), 2 reconnect(s),"
        " 3 message(s) dropped while down"
    )
