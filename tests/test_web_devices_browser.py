"""A device found, tried and added in the Settings page, in Chromium at 1280 and 390 px, against a real
`picoagent serve` whose simulated I2C bus has a BME280 at 0x77 that no device names yet
(hardware.simulated_parts): the scan finds it and suggests its driver, "Try it" reads it once, "Add" saves it,
and at once "how warm is it in the study?" is answered by the fast path, `picoagent devices list` shows it, and
the config file still loads with every comment it had. Screenshots land in test-artifacts/."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.config import CHECKOUT_CONFIG, load_config
from tests.browser_checks import no_horizontal_scroll, uncovered
from tests.helpers import serving
from tests.test_web_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, DESKTOP, PHONE

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing: apt-get install chromium"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: `make install`")
expect = sync_api.expect
PASSWORD = "correct horse 1"


def comments(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#")]


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """`picoagent serve` on a copy of the shipped config with a BME280 wired at 1:0x77 but not declared."""
    text = CHECKOUT_CONFIG.read_text().replace("  simulated_parts: []\n", '  simulated_parts: ["bme280 1:0x77"]\n', 1)
    with serving(tmp_path, text, PASSWORD) as served:
        yield served


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_a_bme280_found_by_the_scan_is_added_and_answers_at_once(
    daemon: tuple[str, Path, list[str]], viewport: dict[str, int]
) -> None:
    base, config, cli = daemon
    shipped = comments(config.read_text())
    width = viewport["width"]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_context(base_url=base, viewport=viewport).new_page()
        page.set_default_timeout(15_000)
        page.goto("/login?next=/settings")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/settings")
        page.get_by_role("button", name="devices", exact=True).click()
        page.get_by_role("button", name="Scan", exact=True).click()
        found = page.locator("li.item", has_text="0x77: found")
        expect(found).to_contain_text("could be bme280")
        expect(page.locator("li.item", has_text="0x76: found")).to_contain_text("configured: living_room")
        found.get_by_label("Name for the bme280 at 0x77").fill("study_air")
        found.get_by_label("Room").fill("study")
        found.get_by_role("button", name="Try it").click()
        reading = found.locator(".row-note")
        expect(reading).to_contain_text("temperature")
        uncovered(page, reading)
        page.screenshot(path=str(ARTIFACTS / f"settings-scan-{width}.png"), full_page=False)
        found.get_by_role("button", name="Add").click()
        expect(reading).to_contain_text("added: study_air is in use")
        no_horizontal_scroll(page)
        browser.close()

    token = subprocess.run([*cli, "tokens", "add", f"asker{width}"], capture_output=True, text=True, check=True)
    request = urllib.request.Request(
        base + "/api/chat",
        data=json.dumps({"message": "how warm is it in the study?"}).encode(),
        headers={"Authorization": f"Bearer {token.stdout.split()[0]}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        reply = json.loads(answer.read())
    assert reply["route"] == "intent" and "°C" in reply["text"], reply  # the fast path, not the model
    listed = subprocess.run([*cli, "devices", "list"], capture_output=True, text=True, check=True).stdout
    assert "study_air" in listed and "i2c-1 0x77" in listed, listed
    loaded = load_config(config, data_dir=config.parent / "data")
    assert loaded.devices["study_air"].room == "study"
    assert comments(config.read_text()) == shipped  # every comment it had, in order
