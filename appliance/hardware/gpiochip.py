"""Which GPIO character device carries the 40-pin header: the Pi 5's RP1 or the Pi 3/4's own controller.

gpiozero's lgpio pin factory opens one ``/dev/gpiochipN``; its default guesses N from the board's revision
(4 on a Pi 5, as Raspberry Pi OS's kernels once numbered it, else 0). Debian's mainline kernel numbers the
chips in the order they are probed: on a Pi 5 the RP1 sits behind PCIe and comes after the SoC's own
controllers, so a guess can open the wrong chip and drive the wrong pins. The chip is therefore chosen by
its label (the kernel driver's name, read with the GPIO_GET_CHIPINFO ioctl: standard library only).
"""

from __future__ import annotations

import fcntl
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

# struct gpiochip_info { char name[32]; char label[32]; __u32 lines; } read with _IOR(0xB4, 0x01, ...).
_INFO = struct.Struct("32s32sI")
GPIO_GET_CHIPINFO_IOCTL = (2 << 30) | (_INFO.size << 16) | (0xB4 << 8) | 0x01
# The drivers whose chip is the header's GPIO 0-27 (BCM numbering), best first: the Pi 5's RP1, the Pi 4's
# BCM2711, the Pi 3's and Zero 2's BCM2835 family.
HEADER_LABELS = ("pinctrl-rp1", "pinctrl-bcm2711", "pinctrl-bcm2835")


@dataclass(frozen=True)
class Chip:
    """One GPIO controller: /dev/gpiochip<number>, its driver's label and how many lines it has."""

    number: int
    label: str
    lines: int

    def describe(self) -> str:
        """ "gpiochip0 (pinctrl-rp1, 54 lines)"."""
        return f"gpiochip{self.number} ({self.label}, {self.lines} lines)"


def list_chips(dev: Path = Path("/dev")) -> list[Chip]:
    """Every GPIO controller this process can open, by number (one it may not open is left out)."""
    chips = []
    for path in dev.glob("gpiochip*"):
        suffix = path.name[len("gpiochip") :]
        if not suffix.isdigit():
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            raw = fcntl.ioctl(fd, GPIO_GET_CHIPINFO_IOCTL, bytes(_INFO.size))
        except OSError:
            continue
        finally:
            os.close(fd)
        _name, label, lines = _INFO.unpack(raw)
        chips.append(Chip(int(suffix), label.split(b"\0", 1)[0].decode("ascii", "replace"), lines))
    return sorted(chips, key=lambda c: c.number)


def header_chip(chips: list[Chip]) -> Chip | None:
    """The chip of the 40-pin header among ``chips``, by label; None when none is a Raspberry Pi's."""
    for label in HEADER_LABELS:
        for chip in chips:
            if chip.label == label:
                return chip
    return None


# gpiozero learns the header's layout from the board's revision code, which it reads from the device tree's
# /system/linux,revision (set by the Pi's firmware) or /proc/cpuinfo's Revision line (Raspberry Pi OS's
# kernels only). Where neither exists, the board's name gives a representative code: every board below has
# the same 40-pin J8 header, which is all picoagent's devices use. Longest names first.
_REVISION_BY_NAME = (
    ("Raspberry Pi 5", 0xD04170),
    ("Raspberry Pi 400", 0xC03130),
    ("Raspberry Pi 4", 0xC03114),
    ("Raspberry Pi 3 Model B Plus", 0xA020D3),
    ("Raspberry Pi 3 Model A Plus", 0x9020E0),
    ("Raspberry Pi 3", 0xA02082),
    ("Raspberry Pi Zero 2", 0x902120),
)


def revision_for(model: str) -> int | None:
    """A revision code for the board named ``model`` (/proc/device-tree/model), when gpiozero finds none."""
    for prefix, code in _REVISION_BY_NAME:
        if model.startswith(prefix):
            return code
    return None


def prepare_lgpio() -> None:
    """Where lgpio keeps its notification pipes (``.lgd-nfy*``, made when it is imported): $LG_WD, else the
    working directory, which need not be writable (`picoagent devices ...` run from /root as the picoagent
    user: "Permission denied" at import). The temporary directory always is (the daemon's is private)."""
    os.environ.setdefault("LG_WD", tempfile.gettempdir())


def pin_factory(dev: Path = Path("/dev"), model_file: Path = Path("/proc/device-tree/model")) -> object:
    """gpiozero's lgpio pin factory on the header's chip (found by label), knowing the board even where the
    device tree has no revision. Raises what lgpio raises (missing module, no permission)."""
    prepare_lgpio()
    from gpiozero.exc import PinUnknownPi
    from gpiozero.pins.lgpio import LGPIOFactory

    class HeaderFactory(LGPIOFactory):  # gpiozero has no type hints: LGPIOFactory is Any to mypy
        def _get_revision(self) -> int:
            try:
                return int(super()._get_revision())
            except PinUnknownPi:
                try:
                    name = model_file.read_bytes().rstrip(b"\0").decode("utf-8", "replace")
                except OSError:
                    raise PinUnknownPi("this board names no revision and no model") from None
                code = revision_for(name)
                if code is None:
                    raise
                return code

    chip = header_chip(list_chips(dev))
    return HeaderFactory(chip=chip.number if chip is not None else None)


def board_report(
    model_file: Path = Path("/proc/device-tree/model"), dev: Path = Path("/dev")
) -> list[tuple[str, bool, str, str]]:
    """What `picoagent doctor` says of a Pi's pins: (name, fine, detail, fix) for the GPIO header's chip, I2C1
    (GPIO 2/3) and SPI0 (GPIO 7-11). Empty off a Pi."""
    try:
        model = model_file.read_bytes().rstrip(b"\0").decode("utf-8", "replace")
    except OSError:
        return []
    if not model.startswith("Raspberry Pi"):
        return []
    chips = list_chips(dev)
    chip = header_chip(chips)
    pi5 = model.startswith("Raspberry Pi 5")
    if chip is not None:
        gpio = ("gpio", True, f"the 40-pin header is {chip.describe()}", "")
    else:
        seen = ", ".join(c.describe() for c in chips) or "no /dev/gpiochip* this user may open"
        gpio = (
            "gpio",
            False,
            f"no GPIO chip of the header found ({seen})",
            "a Pi 5 needs a kernel with the RP1 drivers (Linux 6.17 or later: the picoagent image's)"
            if pi5
            else "add the user to the gpio group (the image's picoagent user is in it)",
        )
    i2c = dev / "i2c-1"
    spi = dev / "spidev0.0"
    return [
        gpio,
        ("i2c", i2c.exists(), f"{i2c} (GPIO 2/3)" if i2c.exists() else f"{i2c} is missing", "modprobe i2c-dev"),
        (
            "spi",
            spi.exists(),
            f"{spi} (GPIO 7-11)" if spi.exists() else f"{spi} is missing: SPI devices cannot be used",
            "the picoagent image turns SPI0 on in the device tree (picoagent-spi-dtb)",
        ),
    ]
