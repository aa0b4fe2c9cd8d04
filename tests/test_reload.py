"""SIGHUP on a running `picoagent serve`: what a reload applies, what it names as waiting for a restart.

Each test runs the real daemon as a process on a copy of the checkout's config, edits the file as a person
would, sends SIGHUP and looks where a person looks: the log, `picoagent status` (text and --json),
/api/status and what a device write does.
"""

from __future__ import annotations

import json
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import free_port, wait_for, wait_healthy
from tests.test_daemon import Serve, cli


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    daemon = Serve(tmp_path, free_port())
    wait_healthy(daemon.port)
    yield daemon
    daemon.stop()


def reload(serve: Serve, edit: Any) -> None:
    """Edit the config file (``edit``: old text -> new text), SIGHUP, and wait for the reload's log line."""
    before = serve.text().count("SIGHUP: config reloaded")
    serve.config.write_text(edit(serve.config.read_text()))
    serve.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: serve.text().count("SIGHUP: config reloaded") > before, what="the reload")


def api(serve: Serve, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    token = (serve.data / "cli.token").read_text().strip()
    request = urllib.request.Request(
        f"http://127.0.0.1:{serve.port}{path}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def test_an_approval_added_to_a_device_applies_at_the_reload(serve: Serve) -> None:
    """The issue's case: `approval: required` added to a relay, SIGHUP, and its next write waits for a person."""
    reload(serve, lambda text: text.replace("    room: porch\n", "    room: porch\n    approval: required\n", 1))
    answer = api(serve, "/api/devices/porch_light", {"value": "on"})
    assert answer["done"] is False and answer["pending_approval"] is not None, answer
    assert (
        "porch_light: state: off" in cli("devices", "read", "porch_light", data=serve.data, config=serve.config).stdout
    )
    said = cli("devices", "set", "porch_light", "on", data=serve.data, config=serve.config).stdout
    assert "porch_light needs approval: pending action" in said, said
    # Tightened further: set is no longer allowed on the fan at all.
    reload(
        serve, lambda text: text.replace("    writes_per_minute: 6\n", "    writes_per_minute: 6\n    allow: [read]\n")
    )
    refused = cli("devices", "set", "fan", "on", data=serve.data, config=serve.config)
    assert "fan cannot be set" in refused.stdout + refused.stderr, refused
    assert "restart needed" not in serve.text()  # everything above applied


def test_what_waits_for_a_restart_is_named_in_the_log_status_and_api(serve: Serve) -> None:
    reload(
        serve,
        lambda text: (
            text.replace("  session_days: 7\n", "  session_days: 9\n")
            .replace("  backend: simulated\n", "  backend: auto\n")
            .replace("    pin: 27\n", "    pin: 5\n    approval: required\n")
        ),
    )
    log = serve.text()
    assert "SIGHUP: web.session_days: restart needed" in log
    assert "SIGHUP: hardware.backend: restart needed" in log
    status = api(serve, "/api/status")
    assert status["config"]["restart_needed"] == ["hardware.backend", "web.session_days"]
    # What could apply did: the fan rewired (tests/test_reload_devices.py) and its approval.
    assert "SIGHUP: device fan rewired: gpio 5" in log
    answer = api(serve, "/api/devices/fan", {"value": "on"})
    assert answer["pending_approval"] is not None, answer
    shown = cli("status", data=serve.data, config=serve.config).stdout
    assert "config: hardware.backend, web.session_days: restart needed" in shown, shown
    as_json = json.loads(cli("status", "--json", data=serve.data, config=serve.config).stdout)
    assert as_json["config"]["restart_needed"] == ["hardware.backend", "web.session_days"]
    # Put back as it was: nothing waits any more.
    reload(
        serve,
        lambda text: text.replace("  session_days: 9\n", "  session_days: 7\n").replace(
            "  backend: auto\n", "  backend: simulated\n"
        ),
    )
    assert api(serve, "/api/status")["config"]["restart_needed"] == []


def test_a_port_given_on_the_command_line_is_not_said_to_wait_for_a_restart(serve: Serve) -> None:
    """`serve --port N` wins over web.port: a restart with the same command would not apply the file's port
    either, so the reload says which wins (a README walk read "web.port: restart needed" here)."""
    reload(serve, lambda text: text.replace("  port: 8080\n", "  port: 8181\n"))
    log = serve.text()
    said = f"SIGHUP: web.port: the daemon was started with --port {serve.port}, which wins over the config"
    assert said in log, log
    assert "restart needed" not in log
    assert api(serve, "/api/status")["config"]["restart_needed"] == []


def test_a_refused_reload_is_shown_in_status_until_a_good_one(serve: Serve) -> None:
    good = serve.config.read_text()
    serve.config.write_text(good.replace("max_rounds: 4", "max_rounds: five"))
    serve.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "the new config is refused" in serve.text(), what="the refusal in the log")
    # (`picoagent status` itself reads the broken file and says what is wrong with it; the page and the API:)
    refused = api(serve, "/api/status")["config"]["refused"]
    assert refused.startswith('agent.max_rounds: expected an integer, got "five"'), refused
    reload(serve, lambda text: good)
    assert api(serve, "/api/status")["config"]["refused"] == ""
    assert "config:" not in cli("status", data=serve.data, config=serve.config).stdout


def test_info_lines_go_on_after_a_reload(serve: Serve) -> None:
    """The daemon logs its state changes at INFO (log_level: warning is raised to INFO for serve): a reload keeps it."""
    reload(serve, lambda text: text.replace("max_rounds: 4", "max_rounds: 3"))
    cli("devices", "set", "fan", "on", data=serve.data, config=serve.config)
    after = serve.text().split("SIGHUP: config reloaded", 1)[1]
    assert "INFO appliance.hardware.devices: fan set to True" in after, after


def test_tools_memory_tasks_jobs_and_a_removed_device_apply_in_the_running_daemon(tmp_path: Path) -> None:
    """The daemon in this process, so what each part now holds can be looked at after its SIGHUP handler ran."""
    import asyncio

    from appliance.config import load_config
    from appliance.daemon import Daemon
    from tests.helpers import config_file, started

    path = config_file(tmp_path, {"preload: true": "preload: false"})
    data = tmp_path / "data"
    config = load_config(path, data_dir=data)
    job = '\n    - {id: porch_check, schedule: "daily 03:00", device: porch_light, value: "on"}'
    edits = {
        "  jobs: []": "  jobs:" + job,
        "  shell:\n    # Offer the shell tool at all.\n    enabled: true": "  shell:\n    enabled: false",
        "  require_approval: []": "  require_approval: [web_fetch]",
        "  recall_k: 5": "  recall_k: 2",
        "  approval_timeout_s: 300": "  approval_timeout_s: 60",
        "  doorbell:\n    driver: button\n    pin: 22\n    room: hallway\n": "",
    }

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0, data_dir_override=str(data))
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        runtime = daemon.runtime
        assert "shell" in runtime.tools.tools and "doorbell" in runtime.devices.devices  # type: ignore[union-attr]
        text = path.read_text()
        for old, new in edits.items():
            assert old in text, old
            text = text.replace(old, new)
        path.write_text(text)
        daemon.reload()
        assert daemon.reloaded.restart_needed == []
        assert "shell" not in runtime.tools.tools and "read_file" in runtime.tools.tools
        assert runtime.approvals is not None and runtime.approvals.needs("web_fetch")
        assert runtime.agent.memory is not None and runtime.agent.memory.config.recall_k == 2
        assert runtime.approvals.store.timeout_s == 60
        assert "doorbell" not in runtime.devices.devices  # type: ignore[union-attr]
        assert daemon.cron is not None and [j["id"] for j in daemon.cron.list_jobs()] == ["porch_check"]
        understanding = runtime.agent.understanding  # rebuilt: it holds the routing and agent settings it reads
        assert understanding is not None and understanding.routing is runtime.config.routing
        assert runtime.agent.intents is not None and "doorbell" not in [d.name for d in runtime.agent.intents.devices]
        daemon.stopping.set()
        assert await served == 0

    asyncio.run(main())


def test_who_may_talk_on_a_chat_channel_applies_at_the_reload_and_other_settings_restart_it(tmp_path: Path) -> None:
    """A person taken off telegram.allow_from is a stranger from the reload on (the running bot, told in place);
    a change to the bot's other settings restarts that one channel on them (reload_channels.py): no restart."""
    import asyncio

    from appliance.config import load_config
    from appliance.daemon import Daemon
    from tests.helpers import config_file, eventually, started

    # A bot that never reaches Telegram (port 9): the channel runs, reporting its problem, and never raises.
    telegram = {
        "telegram:\n  # Run the bot inside the daemon.\n  enabled: false": "telegram:\n  enabled: true",
        '  token: ""\n  # Telegram user ids': '  token: "123456:test-token"\n  # Telegram user ids',
        "  allow_from: []\n  # Chat id": "  allow_from: [111, 222]\n  # Chat id",
        "  api_base_url: https://api.telegram.org/bot": "  api_base_url: http://127.0.0.1:9/bot",
    }
    path = config_file(tmp_path, {"preload: true": "preload: false", **telegram})
    data = tmp_path / "data"
    config = load_config(path, data_dir=data)

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0, data_dir_override=str(data))
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        assert daemon.channels is not None
        channel = daemon.channels.channels["telegram"]
        assert await channel.is_allowed("222")  # user ids as the platform gives them, as text
        path.write_text(path.read_text().replace("  allow_from: [111, 222]\n", "  allow_from: [111]\n"))
        daemon.reload()
        assert daemon.channels.channels["telegram"] is channel  # told in place, not restarted
        assert not await channel.is_allowed("222")
        assert await channel.is_allowed("111")
        path.write_text(path.read_text().replace("  poll_timeout_s: 30\n", "  poll_timeout_s: 20\n"))
        daemon.reload()
        assert daemon.reloaded.restart_needed == []
        await eventually(lambda: daemon.channels.channels.get("telegram") not in (None, channel), what="the restart")
        restarted = daemon.channels.channels["telegram"]
        assert restarted.config.poll_timeout_s == 20 and not await restarted.is_allowed("222")
        daemon.stopping.set()
        assert await served == 0

    asyncio.run(main())


# The README's weather snippet, with a forecast service that is never reached (port 9): nothing leaves the test.
WEATHER = {
    '  place: ""\n': "  place: Ghent\n",
    "  latitude:\n": "  latitude: 51.05\n",
    "  longitude:\n": "  longitude: 3.72\n",
    "  # Fetch forecasts for the place (false: no weather request ever leaves the Pi).\n  enabled: false\n": (
        "  enabled: true\n"
    ),
    "  base_url: https://api.open-meteo.com/v1/forecast\n": "  base_url: http://127.0.0.1:9/v1/forecast\n",
}


def with_weather(text: str) -> str:
    for old, new in WEATHER.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def test_a_place_added_at_a_reload_runs_the_sun_job_made_in_chat_beside_the_daemon(serve: Serve) -> None:
    """Issue 33's newcomer: the README's weather snippet, SIGHUP, then "turn the porch light on at sunset" in a
    `picoagent chat` beside the daemon: the daemon knows the place too, so it takes the job in and runs it."""
    reload(serve, with_weather)
    said = cli("chat", "-m", "turn the porch light on at sunset", data=serve.data, config=serve.config)
    assert "Scheduled: porch light on, every day at sunset" in said.stdout, said
    listed = cli("cron", "list", data=serve.data, config=serve.config)
    assert "sunset" in listed.stdout, listed
    assert "needs to know where I am" not in serve.text()
    assert "restart needed" not in serve.text()
    assert api(serve, "/api/status")["config"]["restart_needed"] == []


def test_the_forecast_the_sun_and_a_sun_job_follow_a_place_given_at_the_reload(tmp_path: Path) -> None:
    """The daemon in this process, so what each part holds after SIGHUP can be looked at: the weather tool and the
    grounded answers are for Ghent, and a sun job a `picoagent chat` stored before the daemon was told runs."""
    import asyncio

    from appliance.config import CronJob, load_config
    from appliance.daemon import Daemon
    from appliance.memory.db import Database
    from appliance.schedule.store import JobStore
    from tests.helpers import config_file, started

    path = config_file(tmp_path, {"preload: true": "preload: false"})
    data = tmp_path / "data"
    config = load_config(path, data_dir=data)

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0, data_dir_override=str(data))
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        runtime, cron = daemon.runtime, daemon.cron
        assert cron is not None and runtime.weather is None and "weather" not in runtime.tools.tools
        path.write_text(with_weather(path.read_text()))
        # The chat process read the new file and stored the job (its own connection) before the reload.
        other = Database(data / "picoagent.db")
        job = CronJob(id="porch_light_sunset", schedule="sunset", device="porch_light", value="on")
        await other.call(JobStore(other).add, job, "chat")
        other.close()
        await cron.refresh()
        assert "porch_light_sunset" not in [j["id"] for j in cron.list_jobs()]  # no place yet: refused, logged
        daemon.reload()
        assert daemon.reloaded.restart_needed == []
        assert runtime.weather is not None and runtime.weather.place == "Ghent"
        assert runtime.agent.grounding.weather is runtime.weather
        said = await runtime.tools.execute("weather", {"when": "tomorrow"})
        assert "no forecast for Ghent: the forecast service cannot be reached" in (said.error or ""), said
        grounding = runtime.agent.grounding
        facts = grounding.facts("test", None, person=True, cloud_allowed=False)
        for question in ("when is sunset?", "is it going to rain tomorrow?"):
            answer = await grounding.reply(question, facts, 0.0, meaning=False)
            assert answer is not None and "Ghent" in answer.text, (question, answer)
        await cron.refresh()
        jobs = {j["id"]: j for j in cron.list_jobs()}
        assert jobs["porch_light_sunset"]["next_run"], jobs
        # A broken workspace/cron.yaml keeps the running jobs, bound to the running place: the place waits, named
        # (as every section that cannot apply: its keys changed since the start).
        (runtime.workspace.root / "cron.yaml").write_text("- {id: broken}\n")
        path.write_text(path.read_text().replace("  latitude: 51.05\n", "  latitude: 59.91\n"))
        daemon.reload()
        assert daemon.reloaded.restart_needed == ["weather.latitude", "weather.longitude"]
        assert cron.place == (51.05, 3.72)
        daemon.stopping.set()
        assert await served == 0

    asyncio.run(main())


def test_an_llm_setting_changed_on_the_same_model_says_it_loaded_again(serve: Serve) -> None:
    """A README walk: after an llm setting changed, the log read "smollm2-135m now serves instead of
    smollm2-135m". The same model, loaded again with the new settings, says so."""
    reload(serve, lambda text: text.replace("  seed: 42\n", "  seed: 43\n", 1))
    wait_for(lambda: "(SIGHUP: the llm settings changed)" in serve.text(), what="the model line")
    line = [x for x in serve.text().splitlines() if "model: " in x and "SIGHUP: the llm settings changed" in x]
    assert line and "loaded again" in line[-1] and "instead of" not in line[-1], line


def test_a_setting_saved_from_the_page_applies_without_a_restart(serve: Serve) -> None:
    """POST /api/settings writes the file and applies it through the same reload: the approval added to the
    porch light holds for its next write at once, and a key that needs a restart is named as such."""
    version = api(serve, "/api/settings")["version"]
    change = {"devices.porch_light.approval": "required", "web.session_days": 9}
    said = api(serve, "/api/settings", {"version": version, "set": change})
    assert said["applied"] == ["devices.porch_light.approval"] and said["restart_needed"] == ["web.session_days"]
    assert said["refused"] == ""
    answer = api(serve, "/api/devices/porch_light", {"value": "on"})
    assert answer["done"] is False and answer["pending_approval"] is not None, answer
    assert "approval: required" in serve.config.read_text() and "session_days: 9" in serve.config.read_text()
    assert "SIGHUP: web.session_days: restart needed" in serve.text()
    status = api(serve, "/api/status")
    assert "web.session_days" in status["config"]["restart_needed"]
    kinds = [e for e in api(serve, "/api/events")["events"] if e["kind"] == "config"]
    assert kinds[0]["message"] == "settings changed by token:local-cli: web.session_days, devices.porch_light.approval"


def test_the_reload_knows_the_channel_sections_reload_channels_applies() -> None:
    """reload.py names them without importing reload_channels (the idle daemon never loads it): the same."""
    from appliance.reload import LIVE_CHANNELS
    from appliance.reload_channels import LIVE_SECTIONS

    assert LIVE_CHANNELS == LIVE_SECTIONS
