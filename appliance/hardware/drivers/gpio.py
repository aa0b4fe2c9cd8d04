"""GPIO drivers on gpiozero: relay and LED (actuators), button and motion sensor (event sources).

Every device takes the backend's pin factory, so the same driver drives a real pin through lgpio on
a Pi, and gpiozero's MockFactory pins in simulation and tests (no simulated chip: the mock pin is it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from appliance.hardware.drivers.base import Buses, DriverSpec, Reading, Sensor, Wiring


class Relay:
    """A relay (or any on/off output) on one pin; starts off."""

    def __init__(self, pin_factory: Any, pin: int, *, active_high: bool = True) -> None:
        from gpiozero import OutputDevice

        self.device = OutputDevice(pin, active_high=active_high, initial_value=False, pin_factory=pin_factory)

    def set(self, value: bool | float) -> None:
        """On (True) or off (False)."""
        if value:
            self.device.on()
        else:
            self.device.off()

    def read(self) -> list[Reading]:
        """Whether it is on."""
        return [Reading("state", bool(self.device.value), "")]

    def close(self) -> None:
        """Release the pin."""
        self.device.close()


class LED:
    """An LED with PWM brightness (0 to 1); starts off."""

    def __init__(self, pin_factory: Any, pin: int, *, active_high: bool = True) -> None:
        from gpiozero import PWMLED

        self.device = PWMLED(pin, active_high=active_high, initial_value=0, pin_factory=pin_factory)

    def set(self, value: bool | float) -> None:
        """On/off, or a brightness from 0 to 1."""
        self.device.value = 1.0 if value is True else 0.0 if value is False else max(0.0, min(1.0, float(value)))

    def read(self) -> list[Reading]:
        """On or off, and the brightness in percent."""
        level = float(self.device.value)
        return [Reading("state", level > 0, ""), Reading("brightness", round(level * 100, 1), "%")]

    def close(self) -> None:
        """Release the pin."""
        self.device.close()


class _Input:
    """A digital input whose changes become named events."""

    pressed_event = "pressed"
    released_event = "released"

    def __init__(self, device: Any) -> None:
        self.device = device
        self._callbacks: list[Callable[[str], None]] = []
        device.when_activated = lambda: self._fire(self.pressed_event)
        device.when_deactivated = lambda: self._fire(self.released_event)

    def _fire(self, event: str) -> None:
        for callback in list(self._callbacks):
            callback(event)

    def on_event(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(event)`` (from gpiozero's thread) on every change."""
        self._callbacks.append(callback)

    def read(self) -> list[Reading]:
        """Whether it is active now."""
        return [Reading("state", bool(self.device.is_active), "")]

    def close(self) -> None:
        """Release the pin."""
        self.device.close()


class Button(_Input):
    """A push button to ground (internal pull-up), debounced."""

    def __init__(self, pin_factory: Any, pin: int, *, active_high: bool = True) -> None:
        from gpiozero import Button as GpioButton

        # A button to ground with the pull-up is the common wiring; active_high false means a button to 3.3 V.
        super().__init__(GpioButton(pin, pull_up=active_high, bounce_time=0.05, pin_factory=pin_factory))


class Motion(_Input):
    """A PIR motion sensor (active high output)."""

    pressed_event = "motion"
    released_event = "still"

    def __init__(self, pin_factory: Any, pin: int, *, active_high: bool = True) -> None:
        from gpiozero import MotionSensor

        # queue_len 1: a PIR module already debounces and holds its output; react on the first sample.
        super().__init__(
            MotionSensor(pin, queue_len=1, sample_rate=20, pull_up=not active_high, pin_factory=pin_factory)
        )


def _on_a_pin(driver: Callable[..., Sensor]) -> Callable[[Wiring, Buses], Sensor]:
    """How a driver on one pin is built from a device's config."""

    def build(wiring: Wiring, buses: Buses) -> Sensor:
        assert wiring.pin is not None  # the config checks require it (NEEDS)
        return driver(buses.pin_factory, wiring.pin, active_high=wiring.active_high)

    return build


RELAY_SPEC = DriverSpec("relay", "switch", "gpio", ("state",), _on_a_pin(Relay), sets=("state",))
LED_SPEC = DriverSpec("led", "dimmer", "gpio", ("state", "brightness"), _on_a_pin(LED), sets=("state", "brightness"))
BUTTON_SPEC = DriverSpec("button", "input", "gpio", ("state",), _on_a_pin(Button))
MOTION_SPEC = DriverSpec("motion", "input", "gpio", ("state",), _on_a_pin(Motion))
