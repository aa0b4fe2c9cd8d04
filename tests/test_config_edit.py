"""The settings editor (appliance/config/edit.py) on a copy of the shipped config: what a save writes, keeps,
refuses and survives (two savers at once, a kill -9 at any moment)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from appliance.config import load_config
from appliance.config.edit import PREVIOUS_SUFFIX, ConfigFile, FieldError, VersionConflict, secrets_text
from appliance.config.load import CHECKOUT_CONFIG, read_secrets


@pytest.fixture
def cfg(tmp_path: Path) -> ConfigFile:
    shutil.copy(CHECKOUT_CONFIG, tmp_path / "picoagent.yaml")
    return ConfigFile(tmp_path / "picoagent.yaml", data_dir=str(tmp_path / "data"))


def comments(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#")]


def test_a_save_changes_only_its_lines_and_keeps_every_comment(cfg: ConfigFile) -> None:
    before = cfg.path.read_text()
    version, _ = cfg.read()
    saved = cfg.save(
        version, {"web.port": 8081, "agent.name": "Juniper", "weather.latitude": 51.05, "weather.longitude": 3.72}
    )
    after = cfg.path.read_text()
    assert saved.keys == ["agent.name", "web.port", "weather.latitude", "weather.longitude"]
    assert comments(after) == comments(before)
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert changed == [
        ("  name: Pico", "  name: Juniper"),
        ("  port: 8080", "  port: 8081"),
        ("  latitude:", "  latitude: 51.05"),
        ("  longitude:", "  longitude: 3.72"),
    ]
    config = load_config(cfg.path, data_dir=cfg.data_dir)
    assert (config.web.port, config.agent.name, config.weather.latitude) == (8081, "Juniper", 51.05)
    assert Path(str(cfg.path) + PREVIOUS_SUFFIX).read_text() == before  # the file as it was, kept beside it
    # Set back, the file is what it was, but for "null" where an empty value was (the same to YAML).
    cfg.save(
        saved.version, {"web.port": 8080, "agent.name": "Pico", "weather.latitude": None, "weather.longitude": None}
    )
    assert cfg.path.read_text() == before.replace("  latitude:\n", "  latitude: null\n").replace(
        "  longitude:\n", "  longitude: null\n"
    )


def test_a_secret_goes_to_the_secrets_file_and_only_its_reference_to_the_config(cfg: ConfigFile) -> None:
    version, _ = cfg.read()
    provider = {"type": "openai", "api_base": "https://api.openai.com/v1", "model": "gpt-4o-mini"}
    saved = cfg.save(version, {"providers.openai": provider})
    saved = cfg.save(saved.version, {"telegram.token": "123456:ABC-secret", "providers.openai.api_key": "sk-top"})
    text = cfg.path.read_text()
    assert "123456:ABC-secret" not in text and "sk-top" not in text
    assert 'token: "${TELEGRAM_TOKEN}"' in text
    secrets = cfg.path.parent / "secrets.env"
    assert read_secrets(secrets) == {"TELEGRAM_TOKEN": "123456:ABC-secret", "PROVIDERS_OPENAI_API_KEY": "sk-top"}
    assert secrets.stat().st_mode & 0o777 == 0o600
    assert saved.config.telegram.token == "123456:ABC-secret"
    # Changed again, the same name is used; cleared, the line goes and so does the reference.
    saved = cfg.save(saved.version, {"telegram.token": "999:new"})
    assert read_secrets(secrets)["TELEGRAM_TOKEN"] == "999:new"
    cfg.save(saved.version, {"telegram.token": ""})
    assert "TELEGRAM_TOKEN" not in read_secrets(secrets) and "${TELEGRAM_TOKEN}" not in cfg.path.read_text()


def test_the_secrets_file_keeps_its_other_lines_and_comments() -> None:
    old = "# my keys\nOTHER=1\nexport TELEGRAM_TOKEN=old\n\n"
    assert secrets_text(old, {"TELEGRAM_TOKEN": "new", "NEW_ONE": " spaced "}) == (
        "# my keys\nOTHER=1\nTELEGRAM_TOKEN=new\n\nNEW_ONE=' spaced '\n"
    )


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"scheduler.timezone": "Mars/Olympus"}, "scheduler.timezone", "unknown time zone"),
        ({"web.port": 70000}, "web.port", "expected a TCP port from 1 to 65535"),
        ({"web.prot": 8081}, "web.prot", "no such setting"),
        ({"llm.kv_type": "q4"}, "llm.kv_type", 'expected one of "auto", "f16", "q8_0"'),
        ({"devices.desk_lamp": {"driver": "relay", "pin": 17}}, "devices.desk_lamp.pin", "17"),
        ({"devices.desk_lamp": {"driver": "bme280", "bus": 1, "address": 300}}, "devices.desk_lamp.address", ""),
        ({"telegram.token": "two\nlines"}, "telegram.token", "one line"),
    ],
)
def test_bad_input_names_its_key_and_writes_nothing(cfg: ConfigFile, change: dict, key: str, words: str) -> None:
    before = cfg.path.read_text()
    version, _ = cfg.read()
    with pytest.raises(FieldError) as refused:
        cfg.save(version, change)
    assert refused.value.key == key, refused.value.message
    assert words in refused.value.message
    assert cfg.path.read_text() == before
    assert not (cfg.path.parent / "secrets.env").exists()
    assert not Path(str(cfg.path) + PREVIOUS_SUFFIX).exists()


def test_a_string_yaml_would_read_as_something_else_stays_a_string(cfg: ConfigFile) -> None:
    version, _ = cfg.read()
    for value in ("yes", "off", "123", "null", "a: b", "#hash", " padded"):
        version = cfg.save(version, {"agent.name": value}).version
        assert load_config(cfg.path, data_dir=cfg.data_dir).agent.name == value


def test_a_device_is_added_and_removed_as_a_whole_entry(cfg: ConfigFile) -> None:
    version, _ = cfg.read()
    saved = cfg.save(version, {"devices.desk_lamp": {"driver": "relay", "pin": 23, "room": "study"}})
    assert saved.config.devices["desk_lamp"].pin == 23
    assert "desk_lamp" in cfg.path.read_text()
    saved = cfg.save(saved.version, {"devices.desk_lamp": None})
    assert "desk_lamp" not in saved.config.devices and "desk_lamp" not in cfg.path.read_text()


@pytest.mark.parametrize("device", ["porch_light", "fan", "doorbell"])
def test_removing_a_device_keeps_the_comments_around_it(cfg: ConfigFile, device: str) -> None:
    """ruamel keeps the comment lines after an entry inside it (the doorbell carries the commented-out Home
    Assistant and MQTT examples and the next section's heading): they must outlive the entry."""
    before = cfg.path.read_text()
    cfg.save(cfg.read()[0], {f"devices.{device}": None})
    after = cfg.path.read_text()
    assert comments(after) == comments(before)
    assert f"  {device}:" not in after
    gone = [line for line in before.splitlines() if line not in after.splitlines()]
    assert all(not line.strip().startswith("#") for line in gone), gone


def test_a_save_from_an_older_version_is_refused_with_what_changed(cfg: ConfigFile) -> None:
    version, _ = cfg.read()
    cfg.save(version, {"web.session_days": 9})  # the first browser
    with pytest.raises(VersionConflict) as conflict:
        cfg.save(version, {"agent.name": "Other"})  # the second, from the same page load
    assert conflict.value.changed == ["web.session_days"]
    assert conflict.value.http_status == 409
    config = load_config(cfg.path, data_dir=cfg.data_dir)
    assert (config.web.session_days, config.agent.name) == (9, "Pico")  # nothing of the second was written
    # A hand edit in between counts too.
    now, _ = cfg.read()
    cfg.path.write_text(cfg.path.read_text().replace("  max_rounds: 4\n", "  max_rounds: 5\n"))
    with pytest.raises(VersionConflict) as conflict:
        cfg.save(now, {"agent.name": "Other"})
    assert conflict.value.changed == ["agent.max_rounds"]


def test_two_savers_at_once_never_both_win(cfg: ConfigFile) -> None:
    version, _ = cfg.read()
    results: list[str] = []

    def save(name: str) -> None:
        try:
            cfg.save(version, {"agent.name": name})
            results.append("saved " + name)
        except VersionConflict:
            results.append("refused " + name)

    threads = [threading.Thread(target=save, args=(n,)) for n in ("Ada", "Bea")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.split()[0] for r in results) == ["refused", "saved"]
    winner = next(r.split()[1] for r in results if r.startswith("saved"))
    assert load_config(cfg.path, data_dir=cfg.data_dir).agent.name == winner


SAVER = """
import sys
from pathlib import Path
from appliance.config.edit import ConfigFile
cfg = ConfigFile(Path(sys.argv[1]), data_dir=sys.argv[2])
n = 0
while True:
    version, _ = cfg.read()
    cfg.save(version, {"agent.name": "Odd" if n % 2 else "Even", "telegram.token": f"tok{n}"})
    n += 1
    print(n, flush=True)
"""


def test_a_kill_9_at_any_moment_leaves_the_old_file_or_the_new(cfg: ConfigFile) -> None:
    cfg.save(cfg.read()[0], {"agent.name": "Even"})
    rng = random.Random(35)
    root = Path(__file__).resolve().parent.parent
    for _ in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", SAVER, str(cfg.path), cfg.data_dir or ""],
            cwd=root,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        assert proc.stdout is not None
        proc.stdout.readline()  # it has saved at least once: the kill lands among saves
        time.sleep(rng.uniform(0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        config = load_config(cfg.path, data_dir=cfg.data_dir)  # whole and valid, whatever the moment
        assert config.agent.name in ("Odd", "Even")
        assert config.telegram.token.startswith("tok")


def test_a_secret_inside_a_whole_entry_still_goes_to_the_secrets_file(cfg: ConfigFile) -> None:
    """{"providers.x": {..., "api_key": ...}}: the mapping is taken key by key, so its secret is no exception."""
    from appliance.config.edit import secret_keys

    entry = {
        "type": "openai",
        "api_base": "https://api.openai.com/v1",
        "model": "gpt-4o-mini",
        "api_key": "sk-whole-entry-42",
    }
    assert secret_keys({"providers.x": entry}) == ["providers.x.api_key"]
    saved = cfg.save(cfg.read()[0], {"providers.x": entry})
    text = cfg.path.read_text()
    assert "sk-whole-entry-42" not in text and "api_key: ${PROVIDERS_X_API_KEY}" in text
    assert saved.config.providers["x"].api_key == "sk-whole-entry-42"
    with pytest.raises(FieldError) as refused:
        secret_keys({"providers.x": {"apikey": "typo"}})
    assert refused.value.key == "providers.x.apikey"
