"""The header's GPIO chip is found by its driver's label (the Pi 5's RP1 is not gpiochip0 or 4 on Debian's
kernel), and gpiozero knows the board even where the device tree names no revision.

lgpio drives /dev/gpiochip* through the kernel, which no test machine has for a Pi: the pin factory is
checked with a stand-in ``lgpio`` module that records which chip was opened (the boundary), everything
above it (gpiozero's LGPIOFactory, its board table) real.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

from appliance.hardware import gpiochip
from appliance.hardware.gpiochip import Chip, header_chip, list_chips, revision_for

# What `gpiodetect` lists on each board with Debian's kernel (the Pi 5's SoC controllers come first).
PI5 = [Chip(0, "gpio-brcmstb@107d508500", 32), Chip(1, "gpio-brcmstb@107d517c00", 15), Chip(2, "pinctrl-rp1", 54)]
PI4 = [Chip(0, "pinctrl-bcm2711", 58), Chip(1, "raspberrypi-exp-gpio", 8)]
PI3 = [Chip(0, "pinctrl-bcm2835", 54), Chip(1, "raspberrypi-exp-gpio", 8)]
QEMU_VIRT = [Chip(0, "9030000.pl061", 8)]


@pytest.mark.parametrize(
    ("chips", "expected"),
    [(PI5, 2), (PI4, 0), (PI3, 0), (list(reversed(PI5)), 2), (QEMU_VIRT, None), ([], None)],
    ids=["pi5", "pi4", "pi3", "pi5-any-order", "not-a-pi", "no-chips"],
)
def test_the_header_chip_is_chosen_by_label(chips: list[Chip], expected: int | None) -> None:
    chip = header_chip(chips)
    assert (chip.number if chip else None) == expected


def test_a_chip_describes_itself_as_gpiodetect_would() -> None:
    assert PI5[2].describe() == "gpiochip2 (pinctrl-rp1, 54 lines)"


def test_files_that_are_not_gpio_chips_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "gpiochip0").write_text("not a device")  # the ioctl fails: skipped, not an error
    (tmp_path / "gpiochipX").write_text("")
    assert list_chips(tmp_path) == []


@pytest.mark.parametrize(
    ("model", "soc", "memory_known"),
    [
        ("Raspberry Pi 5 Model B Rev 1.0", "BCM2712", True),
        ("Raspberry Pi 4 Model B Rev 1.4", "BCM2711", True),
        ("Raspberry Pi 400 Rev 1.0", "BCM2711", True),
        ("Raspberry Pi 3 Model B Plus Rev 1.3", "BCM2837", True),
        ("Raspberry Pi Zero 2 W Rev 1.0", "BCM2837", True),
    ],
)
def test_a_board_name_gives_a_revision_gpiozero_knows(model: str, soc: str, memory_known: bool) -> None:
    from gpiozero import pi_info

    code = revision_for(model)
    assert code is not None
    info = pi_info(f"{code:x}")
    assert info.soc == soc
    assert "J8" in info.headers  # the 40-pin header picoagent's devices use
    assert (info.memory is not None) == memory_known


def test_an_unknown_board_gets_no_revision() -> None:
    assert revision_for("QEMU linux,dummy-virt") is None


@pytest.fixture
def fake_lgpio(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """The lgpio C module's surface that LGPIOFactory's constructor and close use."""
    opened: list[int] = []
    module = types.ModuleType("lgpio")
    module.gpiochip_open = lambda chip: opened.append(chip) or 100 + chip  # type: ignore[attr-defined]
    module.gpiochip_close = lambda handle: None  # type: ignore[attr-defined]
    for n, constant in enumerate(("SET_PULL_NONE", "SET_PULL_UP", "SET_PULL_DOWN", "BOTH_EDGES", "RISING_EDGE")):
        setattr(module, constant, n)
    module.FALLING_EDGE = 9  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lgpio", module)
    monkeypatch.delitem(sys.modules, "gpiozero.pins.lgpio", raising=False)
    return types.SimpleNamespace(opened=opened)


def test_the_pin_factory_opens_the_rp1_and_knows_a_pi5_without_a_revision(
    fake_lgpio: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    model.write_bytes(b"Raspberry Pi 5 Model B Rev 1.0\0")
    monkeypatch.setattr(gpiochip, "list_chips", lambda dev: PI5)
    import gpiozero.pins.local as local

    def no_revision() -> str:  # Debian's kernel: no /system/linux,revision, no Revision in /proc/cpuinfo
        from gpiozero.exc import PinUnknownPi

        raise PinUnknownPi("unable to locate Pi revision")

    monkeypatch.setattr(local, "get_pi_revision", no_revision)
    factory = gpiochip.pin_factory(model_file=model)
    try:
        assert fake_lgpio.opened == [2]
        assert factory.board_info.soc == "BCM2712"
        assert factory.board_info.to_gpio("BOARD11") == "GPIO17"  # the header: physical pin 11 is GPIO 17
    finally:
        factory.close()


def test_the_pin_factory_falls_back_to_gpiozero_s_choice_off_a_pi(
    fake_lgpio: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(gpiochip, "list_chips", lambda dev: QEMU_VIRT)
    import gpiozero.pins.local as local

    monkeypatch.setattr(local, "get_pi_revision", lambda: 0xC03114)
    factory = gpiochip.pin_factory(model_file=tmp_path / "absent")
    try:
        assert fake_lgpio.opened == [0]  # gpiozero's own default on a board that is not a Pi 5
    finally:
        factory.close()


def test_doctor_reports_a_pi5_s_pins_and_buses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model"
    model.write_bytes(b"Raspberry Pi 5 Model B Rev 1.0\0")
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "i2c-1").touch()
    monkeypatch.setattr(gpiochip, "list_chips", lambda dev: PI5)
    report = {name: (fine, detail, fix) for name, fine, detail, fix in gpiochip.board_report(model, dev)}
    assert report["gpio"] == (True, "the 40-pin header is gpiochip2 (pinctrl-rp1, 54 lines)", "")
    assert report["i2c"][:2] == (True, f"{dev}/i2c-1 (GPIO 2/3)")
    assert report["spi"][:2] == (False, f"{dev}/spidev0.0 is missing: SPI devices cannot be used")
    # A Pi 5 on a kernel without the RP1 drivers (Debian 13's own 6.12): the fix names the kernel.
    monkeypatch.setattr(gpiochip, "list_chips", lambda dev: PI5[:2])
    fine, detail, fix = gpiochip.board_report(model, dev)[0][1:]
    assert not fine
    assert detail.startswith("no GPIO chip of the header found (gpiochip0 (gpio-brcmstb@107d508500, 32 lines)")
    assert "RP1 drivers" in fix


def test_doctor_says_nothing_of_pins_off_a_pi(tmp_path: Path) -> None:
    assert gpiochip.board_report(tmp_path / "no-model", tmp_path) == []
    (tmp_path / "model").write_bytes(b"linux,dummy-virt\0")
    assert gpiochip.board_report(tmp_path / "model", tmp_path) == []


def test_lgpio_gets_a_writable_directory_for_its_pipes(monkeypatch: pytest.MonkeyPatch) -> None:
    """lgpio makes .lgd-nfy* pipes at import in $LG_WD or the working directory (root's home: refused)."""
    import tempfile

    monkeypatch.delenv("LG_WD", raising=False)
    gpiochip.prepare_lgpio()
    assert os.environ["LG_WD"] == tempfile.gettempdir()
    monkeypatch.setenv("LG_WD", "/srv/gpio")  # one the owner chose is kept
    gpiochip.prepare_lgpio()
    assert os.environ["LG_WD"] == "/srv/gpio"
