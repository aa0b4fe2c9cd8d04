"""Backends: where pins and buses come from. Real (gpiozero + lgpio, smbus2, spidev) or simulated.

The simulated backend uses gpiozero's MockFactory for pins and puts a simulated chip with the real
register map at each configured sensor's address, so the whole appliance runs off-Pi exactly as it
would on one, down to the bytes on the bus.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from appliance.config import DeviceConfig, HardwareConfig
from appliance.config.devices import simulated_part
from appliance.errors import ConfigError
from appliance.hardware.buses import HardwareError, I2CBus, SMBusI2C, SPIBus, SpidevSPI
from appliance.hardware.drivers import DRIVERS
from appliance.hardware.sim import make_chip
from appliance.hardware.sim.buses import SimulatedI2CBus, SimulatedSPIBus

log = logging.getLogger(__name__)

PI_MODEL = Path("/proc/device-tree/model")


def on_a_pi(model_file: Path = PI_MODEL) -> bool:
    """Whether this machine is a Raspberry Pi (from the device tree)."""
    try:
        return "Raspberry Pi" in model_file.read_text(errors="replace")
    except OSError:
        return False


class Backend:
    """Pins and buses for the device registry."""

    name = "abstract"

    def __init__(self, links: dict[str, Any] | None = None) -> None:
        """``links``: the services devices live in, by interface ("homeassistant": the Home Assistant client),
        from whoever opens the devices (the daemon, or a command with no daemon: runtime.remote_links)."""
        self._pin_factory: Any = None
        self._i2c: dict[int, I2CBus] = {}
        self._spi: dict[tuple[int, int], SPIBus] = {}
        self.links: dict[str, Any] = dict(links or {})

    def i2c(self, number: int) -> I2CBus:
        """The I2C bus with this number (opened once)."""
        if number not in self._i2c:
            self._i2c[number] = self._open_i2c(number)
        return self._i2c[number]

    def spi(self, bus: int, device: int) -> SPIBus:
        """The SPI device bus.device (opened once)."""
        if (bus, device) not in self._spi:
            self._spi[(bus, device)] = self._open_spi(bus, device)
        return self._spi[(bus, device)]

    def link(self, name: str) -> Any:
        """The connection to the service ``name`` (e.g. homeassistant), or a ConfigError saying how to enable it."""
        link = self.links.get(name)
        if link is None:
            raise ConfigError(
                f"{name}: is not enabled, so its devices cannot be reached",
                fix=f"set {name}.enabled: true (with its url and token) in the config, or remove its devices",
            )
        return link

    def _open_i2c(self, number: int) -> I2CBus:
        raise NotImplementedError

    def _open_spi(self, bus: int, device: int) -> SPIBus:
        raise NotImplementedError

    def prepare(self, devices: dict[str, DeviceConfig]) -> None:
        """Get ready for these devices (the simulation puts chips on its buses)."""

    def kept_state(self, device: str) -> bool | float | None:
        """The value a switch or dimmer was last set to by any process (the simulation's); None: not kept."""
        return None

    def keep_state(self, device: str, value: bool | float) -> None:
        """Remember a switch or dimmer's new value for the next process (the simulation's); real pins hold it."""

    @property
    def pin_factory(self) -> Any:
        """gpiozero's pin factory, made on first use: gpiozero costs 1.5 MiB of an idle daemon's memory, and
        a daemon without GPIO devices never needs it."""
        if self._pin_factory is None:
            self._pin_factory = self._make_pin_factory()
        return self._pin_factory

    def _make_pin_factory(self) -> Any:
        return None

    def close(self) -> None:
        """Release the pin factory (if it was made)."""
        if self._pin_factory is not None:
            self._pin_factory.close()


class SimulatedBackend(Backend):
    """gpiozero's mock pins and simulated chips with real register maps.

    A mock pin lives as long as its process, yet `picoagent devices set fan on` and the `devices read fan`
    after it are two processes when no daemon runs. With ``state_file`` (the data dir's, see
    runtime.device_registry) the simulated switches and dimmers keep their values there: each write is
    saved (a small JSON file, written whole), and the next process (a command, or `serve`) starts its
    pins at them, as a relay on a Pi keeps its state while nothing touches it.
    """

    name = "simulated"

    def __init__(
        self, state_file: Path | None = None, links: dict[str, Any] | None = None, parts: Sequence[str] = ()
    ) -> None:
        super().__init__(links)
        self.chips: dict[str, Any] = {}  # device name -> its simulated chip (tests change the environment)
        self.state_file = state_file
        self.parts = [simulated_part(text) for text in parts]  # wired, not configured (hardware.simulated_parts)

    def _kept(self) -> dict[str, bool | float]:
        if self.state_file is None:
            return {}
        try:
            kept = json.loads(self.state_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:  # a damaged file: the pins start off, as they would on a Pi
            log.warning("simulated device states: cannot read %s (%s); starting them off", self.state_file, exc)
            return {}
        return {k: v for k, v in kept.items() if isinstance(v, (bool, int, float))} if isinstance(kept, dict) else {}

    def kept_state(self, device: str) -> bool | float | None:
        """The value this simulated switch or dimmer was last set to, by whichever process set it."""
        return self._kept().get(device)

    def keep_state(self, device: str, value: bool | float) -> None:
        """Save its new value (read again first: another process may have set another device meanwhile)."""
        if self.state_file is None:
            return
        from appliance.fileio import write_atomic

        kept = self._kept()
        kept[device] = value
        write_atomic(self.state_file, json.dumps(kept, indent=1, sort_keys=True) + "\n")

    def _make_pin_factory(self) -> Any:
        from gpiozero.pins.mock import MockFactory, MockPWMPin

        return MockFactory(pin_class=MockPWMPin)  # PWM-capable, so LEDs dim as on a Pi

    def _open_i2c(self, number: int) -> I2CBus:
        bus = SimulatedI2CBus(number)
        for driver, on_bus, address in self.parts:  # what the scan finds before anyone declares it
            if on_bus == number:
                bus.attach(address, make_chip(DRIVERS[driver].simulated))
        return bus

    def _open_spi(self, bus: int, device: int) -> SPIBus:
        return SimulatedSPIBus(bus, device)

    def prepare(self, devices: dict[str, DeviceConfig]) -> None:
        """At every configured bus device, the simulated chip its driver's spec names (one chip per address)."""
        for name, device in devices.items():
            spec = DRIVERS[device.driver]
            if spec.interface == "i2c":
                assert device.bus is not None and device.address is not None
                bus = self.i2c(device.bus)
                assert isinstance(bus, SimulatedI2CBus)
                if device.address not in bus.chips:
                    bus.attach(device.address, make_chip(spec.simulated))
                self.chips[name] = bus.chips[device.address]
            elif spec.interface == "spi":
                assert device.bus is not None and device.device is not None
                spi = self.spi(device.bus, device.device)
                assert isinstance(spi, SimulatedSPIBus)
                if spi.chip is None:
                    spi.chip = make_chip(spec.simulated)
                self.chips[name] = spi.chip


class RealBackend(Backend):
    """The Pi's own pins and buses."""

    name = "real"

    def __init__(self, links: dict[str, Any] | None = None) -> None:
        super().__init__(links)
        self._pin_factory = self._make_pin_factory()  # now: a missing lgpio is an error at start, not later

    def _make_pin_factory(self) -> Any:
        try:
            from appliance.hardware.gpiochip import pin_factory

            return pin_factory()  # on the header's gpiochip: the RP1's on a Pi 5
        except Exception as exc:  # lgpio missing, or no /dev/gpiochip access: say which, with the fix
            raise HardwareError(
                f"cannot open the GPIO pins through lgpio: {exc}",
                fix="install lgpio (pip install 'picoagent[pi]'), add the user to the gpio group, "
                "or set hardware.backend: simulated",
            ) from None

    def _open_i2c(self, number: int) -> I2CBus:
        return SMBusI2C(number)

    def _open_spi(self, bus: int, device: int) -> SPIBus:
        return SpidevSPI(bus, device)


def make_backend(
    config: HardwareConfig, state_file: Path | None = None, links: dict[str, Any] | None = None
) -> Backend:
    """The backend the config asks for (auto: real on a Pi, simulated elsewhere); ``state_file``: where the
    simulation keeps its switches' values between processes (see SimulatedBackend); ``links``: see Backend."""
    choice = config.backend
    if choice == "auto":
        choice = "real" if on_a_pi() else "simulated"
    log.info("hardware backend: %s", choice)
    return RealBackend(links) if choice == "real" else SimulatedBackend(state_file, links, config.simulated_parts)
