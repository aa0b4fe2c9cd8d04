"""The first run, as a new Pi owner does it, in Chromium at 1280 and 390 px: from the login page with the one-time
password through the setup: their own password, name, time zone and place, a cloud key the fake provider
refuses (the error beside the key), then only-on-this-Pi, a bigger model pulled from a local mirror with the
progress bar until the daemon switches to it, and Telegram: a refused token, the right one, the pairing link and
its QR code, the owner's Start; then the owner switches the porch light from the Telegram chat. No terminal.
Screenshots land in test-artifacts/ (README: Set up from the browser shows them).

The daemon runs in this process (the catalog's entry for the chosen model is the packaged file under another
name, as in tests/test_model_fetch.py); the browser is driven from a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from appliance.config import Config, load_config
from appliance.llm import board, models
from appliance.llm.download import MIRROR_ENV, sha256_file
from tests.browser_checks import no_horizontal_scroll, uncovered
from tests.fakes.cloud_api import FakeCloud
from tests.fakes.model_mirror import serving
from tests.fakes.telegram_api import FakeTelegram
from tests.helpers import eventually, started
from tests.test_web_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, DESKTOP, PHONE
from tests.test_web_settings import copy_of_shipped

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing: apt-get install chromium"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: `make install`")
expect = sync_api.expect

GiB = 1 << 30
PI4 = board.Board("Raspberry Pi 4 Model B Rev 1.4", 2 * GiB, 4)
BIGGER = "qwen2.5-0.5b"  # its catalog entry points at the packaged file, renamed, served by the mirror
TEST_FILE = "bigger-test.Q4_1.gguf"
OWN_PASSWORD = "my own long password"
TELEGRAM_TOKEN = "123:TEST"
TELEGRAM_API = "https://api.telegram.org/bot"
OWNER = 4242


@pytest.fixture
def a_2gb_pi4(monkeypatch: pytest.MonkeyPatch, model_path: Path) -> Iterator[None]:
    real = models.load_catalog()
    entry = replace(
        real[BIGGER],
        file=TEST_FILE,
        size_bytes=model_path.stat().st_size,
        sha256=sha256_file(model_path).hexdigest(),
        url="https://example.invalid/the-mirror-serves-it",
    )
    monkeypatch.setattr(models, "load_catalog", lambda: {**real, BIGGER: entry})
    monkeypatch.setattr(board, "read_board", lambda proc=None: PI4)
    yield


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}-{page.viewport_size['width']}.png"), full_page=False)


def drive(
    base: str, first_password: str, cloud: FakeCloud, viewport: dict[str, int], owner_sends: Callable[[str], None]
) -> None:
    """What the owner does, in the browser (a worker thread: the daemon's loop is this process's main one);
    ``owner_sends`` is the owner's phone: a message from them to the bot on the fake Telegram."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_context(base_url=base, viewport=viewport).new_page()
        page.set_default_timeout(20_000)
        page.goto("/")
        expect(page.locator(".first-run")).to_contain_text("one-time password")
        shot(page, "setup-0-sign-in")
        page.get_by_label("Password").fill(first_password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/setup")

        # 1. Their own password: two that differ are refused beside the field, then it is set.
        page.locator("#password").fill(OWN_PASSWORD)
        page.locator("#password2").fill("something else")
        page.get_by_role("button", name="Save and continue").first.click()
        expect(page.locator("#step-password .setting-error")).to_contain_text("the two passwords differ")
        page.locator("#password2").fill(OWN_PASSWORD)
        shot(page, "setup-1-password")
        page.locator("#step-password").get_by_role("button", name="Save and continue").click()

        # 2. Name, time zone, place: a zone that does not exist is refused beside it.
        step = page.locator("#step-place")
        expect(step).to_be_visible()
        page.locator("#f-agent-name").fill("Juniper")
        page.locator("#f-scheduler-timezone").fill("Europe/Atlantis")
        page.locator("#f-weather-place").fill("Ghent")
        page.locator("#f-weather-latitude").fill("51.05")
        page.locator("#f-weather-longitude").fill("3.72")
        step.get_by_role("button", name="Save and continue").click()
        error = page.locator("#f-scheduler-timezone-error")
        expect(error).to_contain_text("unknown time zone 'Europe/Atlantis'")
        uncovered(page, error)
        shot(page, "setup-2-place-error")
        page.locator("#f-scheduler-timezone").fill("Europe/Brussels")
        step.get_by_role("button", name="Save and continue").click()

        # 3. Privacy: a key the provider refuses is said beside the key; then only on this Pi.
        step = page.locator("#step-privacy")
        expect(step).to_be_visible()
        page.locator("#mode-cloud").check()
        page.locator("#f-cloud-api_base").fill(cloud.api_base)
        page.locator("#f-cloud-model").fill(cloud.model)
        page.locator("#f-cloud-api_key").fill("sk-not-the-right-one")
        step.get_by_role("button", name="Save and continue").click()
        key_error = page.locator("#f-cloud-api_key-error")
        expect(key_error).to_contain_text("HTTP 401")
        uncovered(page, key_error)
        shot(page, "setup-3-privacy-refused")
        page.locator("#mode-local").check()
        step.get_by_role("button", name="Save and continue").click()

        # 4. The model: the bigger one that fits, pulled with a progress bar, then in use.
        step = page.locator("#step-model")
        expect(step).to_be_visible()
        choice = step.get_by_label(BIGGER, exact=False)
        expect(choice).to_be_visible()
        choice.check()
        shot(page, "setup-4-model")
        step.get_by_role("button", name="Use it and continue").click()
        expect(page.locator("#model-progress")).to_be_visible()
        step = page.locator("#step-telegram")
        expect(step).to_be_visible(timeout=90_000)
        no_horizontal_scroll(page)

        # 5. Telegram: a token the fake Telegram refuses, then the right one; the pairing link and its QR code;
        # the owner's Start (the link's /start CODE) completes the step.
        page.locator("#f-telegram-token").fill("999:WRONG")
        step.get_by_role("button", name="Check and connect").click()
        expect(page.locator("#f-telegram-token-error")).to_contain_text("Telegram refused the token")
        page.locator("#f-telegram-token").fill(TELEGRAM_TOKEN)
        step.get_by_role("button", name="Check and connect").click()
        link = page.locator("#pairing-link")
        expect(link).to_contain_text("https://t.me/pico_test_bot?start=")
        expect(page.locator("#pairing-qr")).to_be_visible()
        uncovered(page, link)
        shot(page, "setup-5-telegram")
        owner_sends(f"/start {link.inner_text().rsplit('=', 1)[1]}")
        expect(page.locator("#step-done")).to_be_visible(timeout=20_000)
        expect(page.locator("#done-text")).to_contain_text("Telegram is connected")
        shot(page, "setup-6-done")
        page.get_by_role("link", name="Go to the status page").click()
        page.wait_for_url(base + "/")  # no longer sent to the setup: the owner has a password
        expect(page.locator("#m-name")).to_contain_text(BIGGER)
        browser.close()


@pytest.mark.usefixtures("a_2gb_pi4")
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_a_new_owner_sets_it_up_from_the_first_page(
    tmp_path: Path, model_path: Path, monkeypatch: pytest.MonkeyPatch, viewport: dict[str, int]
) -> None:
    from appliance.daemon import Daemon

    config: Config = copy_of_shipped(tmp_path, for_a_daemon=True)

    async def main() -> None:
        cloud = FakeCloud("openai")
        await cloud.start()
        async with serving({TEST_FILE: model_path}) as mirror, FakeTelegram(TELEGRAM_TOKEN) as telegram:
            monkeypatch.setenv(MIRROR_ENV, mirror.url)
            assert config.source is not None  # where "Telegram" is, for this test: written as a person would
            config.source.write_text(config.source.read_text().replace(TELEGRAM_API, telegram.base_url, 1))
            daemon = Daemon(load_config(config.source, data_dir=tmp_path / "data"), host="127.0.0.1", port=0)
            served = asyncio.ensure_future(daemon.run())
            loop = asyncio.get_running_loop()

            def owner_sends(text: str) -> None:
                loop.call_soon_threadsafe(telegram.push_message, OWNER, OWNER, text)

            try:
                await started(daemon, served)
                first = (tmp_path / "data" / "initial-password").read_text().strip()
                base = f"http://127.0.0.1:{daemon.web.port}"
                await asyncio.to_thread(drive, base, first, cloud, viewport, owner_sends)
                # The paired owner switches the relay from Telegram: the chat works, with no terminal touched.
                owner_sends("turn on the porch light")
                await eventually(lambda: len(telegram.sent_texts(OWNER)) >= 2, timeout=30, what="the reply")
                readings = await daemon.runtime.devices.read("porch_light")
                assert any(r.quantity == "state" and r.value is True for r in readings), readings
            finally:
                daemon.stopping.set()
                await served
                await cloud.close()

    asyncio.run(main())
    assert config.source is not None
    saved = load_config(config.source, data_dir=tmp_path / "data")
    assert (saved.agent.name, saved.scheduler.timezone, saved.weather.place) == ("Juniper", "Europe/Brussels", "Ghent")
    assert saved.routing.mode == "local_only" and saved.llm.model == BIGGER
    assert not (tmp_path / "data" / "initial-password").exists()
