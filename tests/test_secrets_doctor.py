"""The secrets file and `doctor` (issue 33, point 7): what a person is told, and where to look.

A secrets file others can read draws a warning naming it and the fix, in `doctor` and in the daemon's
log at start; a `${NAME}` that is not set names the secrets file it was looked for in; and `doctor` does
not call routing fine while the provider does not answer (it asks it, briefly: a real fake OpenAI server
on 127.0.0.1, and a port nothing listens on).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from appliance.cli.doctor import Check, run_checks
from tests.fakes.cloud_api import FakeCloud
from tests.helpers import config_file, free_port, picoagent, serve_log_line

ROOT = Path(__file__).resolve().parent.parent


def checks_named(name: str, config: Path, data: Path) -> list[Check]:
    """The doctor's lines for one check, without running the checks after them (the model's take seconds)."""
    found: list[Check] = []
    for check in run_checks(str(config), str(data)):
        if check.name == name:
            found.append(check)
        elif found:
            break
    return found


def test_doctor_warns_of_a_secrets_file_others_can_read_and_says_how_to_fix_it(tmp_path: Path) -> None:
    config = config_file(tmp_path / "etc")
    secrets = config.parent / "secrets.env"
    secrets.write_text("OTHER_KEY=sk-test\n")
    secrets.chmod(0o644)
    (check,) = checks_named("secrets", config, tmp_path / "data")
    assert check.status == "warn"
    assert check.detail == f"{secrets} can be read by every user of this machine (mode 0644); it holds your keys"
    assert check.fix == f"chmod 600 {secrets}"
    secrets.chmod(0o600)
    (check,) = checks_named("secrets", config, tmp_path / "data")
    assert check.status == "ok" and str(secrets) in check.detail and "0600" in check.detail


def test_the_daemon_logs_the_same_warning_at_start(tmp_path: Path) -> None:
    config = config_file(tmp_path / "etc", {"  preload: true": "  preload: false"})
    secrets = config.parent / "secrets.env"
    secrets.write_text("OTHER_KEY=sk-test\n")
    secrets.chmod(0o644)
    line = serve_log_line(config, tmp_path, "chmod 600")
    assert line.startswith("WARNING ") and str(secrets) in line and "mode 0644" in line


def test_a_reference_that_is_not_set_names_the_secrets_file(tmp_path: Path) -> None:
    config = config_file(
        tmp_path / "etc",
        {
            "providers: {}\n": "providers:\n  openai: {type: openai, api_base: https://api.openai.com/v1, model: m,"
            ' api_key: "${PICO_TEST_KEY}"}\n'
        },
    )
    out = picoagent("--config", config, "doctor", cwd=tmp_path)
    shown = out.stdout + out.stderr
    secrets = config.parent / "secrets.env"
    assert "${PICO_TEST_KEY} is not set" in shown, shown
    assert f"PICO_TEST_KEY=... in {secrets}" in shown and "does not exist yet" in shown, shown
    secrets.write_text("OTHER=1\n")
    secrets.chmod(0o600)
    again = picoagent("--config", config, "providers", cwd=tmp_path)
    assert again.returncode == 2 and f"PICO_TEST_KEY=... in {secrets}" in again.stderr, again.stderr
    assert "does not exist yet" not in again.stderr


def _edge_first(tmp_path: Path, api_base: str, key: str) -> Path:
    secrets = tmp_path / "etc" / "secrets.env"
    config = config_file(
        tmp_path / "etc",
        {
            "  mode: local_only": "  mode: edge_first",
            '  cloud_provider: ""': "  cloud_provider: fake",
            "providers: {}\n": f'providers:\n  fake: {{type: openai, api_base: "{api_base}", model: fake-model,'
            ' api_key: "${FAKE_KEY}"}\n',
        },
    )
    secrets.write_text(f"FAKE_KEY={key}\n")
    secrets.chmod(0o600)
    return config


def test_doctor_does_not_call_routing_fine_while_the_provider_does_not_answer(tmp_path: Path) -> None:
    config = _edge_first(tmp_path, f"http://127.0.0.1:{free_port()}/v1", "sk-x")  # nothing listens there
    (check,) = checks_named("routing", config, tmp_path / "data")
    assert check.status == "warn", check
    assert check.detail.startswith("edge_first to fake, but fake did not answer"), check.detail
    assert "answers stay on the Pi" in check.detail and "picoagent providers --check" in (check.fix or "")


def test_doctor_calls_routing_fine_when_the_provider_answers(tmp_path: Path) -> None:
    async def main() -> list[Check]:
        async with FakeCloud("openai") as fake:
            config = _edge_first(tmp_path, fake.api_base, fake.api_key)
            fake.enqueue("OK")
            found = await asyncio.to_thread(checks_named, "routing", config, tmp_path / "data")
            assert len(fake.requests) == 1  # asked once, for one token
            return found

    (check,) = asyncio.run(main())
    assert check.status == "ok" and "answered in" in check.detail, check


@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_a_private_or_group_only_secrets_file_draws_no_warning(tmp_path: Path, mode: int) -> None:
    """0640 root:picoagent is how the Pi image installs it (the daemon's group reads it, nobody else)."""
    config = config_file(tmp_path / "etc")
    secrets = config.parent / "secrets.env"
    secrets.write_text("X=1\n")
    secrets.chmod(mode)
    (check,) = checks_named("secrets", config, tmp_path / "data")
    assert check.status == "ok"


def test_doctor_names_the_notify_owner_channel_the_config_leaves_off_not_one_waiting_for_a_restart(
    tmp_path: Path,
) -> None:
    """A walk: with telegram off and a webhook bridge just added, doctor said "notify.owner lists telegram, webhook,
    which is not enabled" (the webhook was only waiting for a restart): only telegram is off in the config."""
    hook = "\nwebhooks:\n  home_assistant:\n    secret: " + "5e" * 32 + "\n"
    config = config_file(tmp_path / "etc", {"\nwebhooks: {}\n": hook})
    text = config.read_text()
    config.write_text(text.replace("\n  owner: []\n", "\n  owner: [telegram, webhook]\n", 1))
    (check,) = checks_named("notifications", config, tmp_path / "data")
    assert check.status == "warn"
    assert check.detail == "notify.owner lists telegram, which is not enabled in the config"
    assert check.fix == "enable telegram, or take it off notify.owner"
