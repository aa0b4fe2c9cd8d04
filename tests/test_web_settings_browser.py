"""The Settings page in a real browser against a real `picoagent serve`, at 1280 and 390 px wide: a relay added
on a pin already used (the error beside the pin), then on a free one; a time zone that does not exist; the
assistant's name changed and applied at once. The config file afterwards still loads and keeps every comment.
Screenshots land in test-artifacts/ for people to look at."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.config import CHECKOUT_CONFIG, load_config
from tests.browser_checks import no_horizontal_scroll, uncovered
from tests.fakes.skill_repo import FakeSkillHost
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


@pytest.fixture(scope="module")
def skill_host() -> Iterator[FakeSkillHost]:
    """A repository host (GitHub's API shape) with one skill to install."""
    with FakeSkillHost() as host:
        text = "---\nname: watering\ndescription: How to water the garden.\n---\nWater at dusk.\n"
        host.repo("garden", "skills").commit({"watering/SKILL.md": text})
        yield host


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, skill_host: FakeSkillHost
) -> Iterator[tuple[str, Path, list[str]]]:
    """A real daemon on a copy of the shipped config; its base URL, the config file and its CLI."""
    folder = tmp_path_factory.mktemp("settings")
    text = CHECKOUT_CONFIG.read_text().replace(
        "  skills_api: https://api.github.com", f"  skills_api: {skill_host.url}"
    )
    with serving(folder, text, PASSWORD) as served:
        yield served


@pytest.fixture(scope="module")
def browser() -> Iterator[sync_api.Browser]:
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.mark.parametrize(("viewport", "device", "pin"), [(DESKTOP, "desk_fan", 23), (PHONE, "hall_lamp", 24)])
def test_a_person_changes_settings_and_sees_errors_beside_the_field(
    browser: sync_api.Browser,
    daemon: tuple[str, Path, list[str]],
    viewport: dict[str, int],
    device: str,
    pin: int,
) -> None:
    base, config, cli = daemon
    shipped = comments(CHECKOUT_CONFIG.read_text())
    context = browser.new_context(base_url=base, viewport=viewport)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto("/login?next=/settings")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/settings")
    width = viewport["width"]

    # Devices: a relay on GPIO 17, which the porch light uses: the error is beside the pin, nothing is saved.
    page.get_by_role("button", name="devices", exact=True).click()
    adding = page.locator("details.settings-add", has=page.locator("summary", has_text="Add to devices"))
    adding.locator("summary").click()
    adding.get_by_label("name", exact=True).fill(device)
    adding.get_by_label("driver", exact=True).select_option("bme280")
    expect(adding.get_by_label("address", exact=True)).to_be_visible()  # each driver's own fields only
    expect(adding.get_by_label("pin", exact=True)).to_be_hidden()
    adding.get_by_label("driver", exact=True).select_option("relay")
    expect(adding.get_by_label("address", exact=True)).to_be_hidden()
    expect(adding.get_by_label("state topic", exact=True)).to_be_hidden()
    adding.get_by_label("pin", exact=True).fill("17")
    adding.get_by_label("room", exact=True).fill("study")
    adding.get_by_role("button", name="Save").click()
    error = adding.locator("#f-devices-NAME-pin-error")
    expect(error).to_contain_text("GPIO 17 is already used by porch_light")
    uncovered(page, error)
    page.screenshot(path=str(ARTIFACTS / f"settings-error-{width}.png"), full_page=False)
    assert device not in config.read_text()
    # A free pin: saved (a running daemon builds the device at once: tests/test_reload_devices.py).
    adding.get_by_label("pin", exact=True).fill(str(pin))
    adding.get_by_role("button", name="Save").click()
    expect(page.locator("details.settings-entry summary", has_text=device)).to_be_visible()
    assert f"  {device}:" in config.read_text()

    # General: a time zone that does not exist is refused beside it; the assistant's name applies at once.
    page.get_by_role("button", name="general", exact=True).click()
    zone = page.locator("#f-scheduler-timezone")
    zone.fill("Europe/Atlantis")
    zone.locator("xpath=ancestor::form").get_by_role("button", name="Save").click()
    expect(page.locator("#f-scheduler-timezone-error")).to_contain_text("unknown time zone")
    uncovered(page, page.locator("#f-scheduler-timezone-error"))
    zone.fill("")
    name = page.locator("#f-agent-name")
    name.fill(f"Juniper{width}")
    form = name.locator("xpath=ancestor::form")
    form.get_by_role("button", name="Save").click()
    expect(form.locator(".row-note")).to_contain_text("Saved and applied: agent.name")
    no_horizontal_scroll(page)
    expect(page.locator("#audit")).to_contain_text("agent.name")
    page.screenshot(path=str(ARTIFACTS / f"settings-general-{width}.png"), full_page=False)

    # Access: a token for a script, shown once; updates: a checkout has no release to roll back to.
    page.get_by_role("button", name="access", exact=True).click()
    page.locator("#access-token-name").fill(f"script{width}")
    page.get_by_role("button", name="Make a token").click()
    made = page.locator(".row-note", has_text="copy it now")
    expect(made).to_contain_text(f"script{width} (chat): pat_")
    uncovered(page, made)
    no_horizontal_scroll(page)
    page.screenshot(path=str(ARTIFACTS / f"settings-access-{width}.png"), full_page=False)
    if width == DESKTOP["width"]:  # a skill from a repository, looked at first, then installed
        page.get_by_role("button", name="tools and tasks", exact=True).click()
        page.locator("#skill-source").fill("garden/skills/watering")
        page.get_by_role("button", name="Look at it first").click()
        expect(page.locator(".skill-md")).to_contain_text("Water at dusk.")
        page.get_by_role("button", name="Confirm and install").click()
        expect(page.get_by_text("installed watering: the assistant can load it now")).to_be_visible()
    # Memory: a fact remembered (through the CLI, as the assistant would), then everything about it forgotten.
    subprocess.run([*cli, "memory", "add", f"The garage door code is 47{width}"], check=True, capture_output=True)
    page.get_by_role("button", name="memory", exact=True).click()
    page.get_by_role("button", name="Find", exact=True).click()
    expect(page.get_by_text(f"The garage door code is 47{width}")).to_be_visible()
    page.locator("#memory-about").fill("the garage door code")
    page.get_by_role("button", name="Show what would go").click()
    page.get_by_role("button", name="Forget these 1").click()
    expect(page.get_by_text("1 forgotten")).to_be_visible()
    no_horizontal_scroll(page)
    page.get_by_role("button", name="model and routing", exact=True).click()
    expect(page.get_by_text("smollm2-135m (running)")).to_be_visible()  # the catalog, what fits, Use buttons
    page.get_by_role("button", name="updates", exact=True).click()
    expect(page.get_by_text("runs from a checkout")).to_be_visible()
    context.close()

    loaded = load_config(config, data_dir=config.parent / "x")
    assert loaded.agent.name == f"Juniper{width}" and loaded.devices[device].pin == pin
    assert comments(config.read_text()) == shipped  # every comment the file had, in order
