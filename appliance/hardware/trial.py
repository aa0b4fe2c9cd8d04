"""Trying a device before it is in the config: read a sensor once, or pulse a switch on and then off once.

The definition was checked by the config's own checks first (:func:`appliance.config.trial.check_definition`:
no pin or address of a configured device, addresses in range). The driver is built for this one trial on
the backend the configured devices use, under the lock of its bus, and closed at once; it never joins the
device registry, so nothing else (the model, the intent matcher, a schedule) can reach it.

A write keeps the rules of every device write. A definition with ``approval: required`` is not pulsed: an
approval is bound to a configured device by name and runs in whichever process decides it (the CLI with
no daemon, too), where a trial device does not exist, so the refusal says to add the device and switch it
through an approval. Pulses are rate-limited per place (``gpio 17``), as writes are per device, so trials
in a loop cannot flap a relay; ``allow`` is kept (a switch allowed only ``read`` is read, not pulsed).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from appliance.config import DeviceConfig
from appliance.errors import PicoagentError, PolicyError, RateLimited
from appliance.hardware.backends import Backend
from appliance.hardware.buses import HardwareError
from appliance.hardware.devices import make_driver
from appliance.hardware.drivers import DRIVERS
from appliance.hardware.drivers.base import Reading
from appliance.ratelimit import RateLimiter

log = logging.getLogger(__name__)

PULSE_S = 0.5  # how long a pulse stays on: long enough to hear a relay click or see a lamp light
PULSES_PER_MINUTE = 6  # per place; a relay's own writes_per_minute defaults to 30


def pulse_limiter() -> RateLimiter:
    """The limiter trials share (the daemon keeps one; each command with no daemon makes its own)."""
    return RateLimiter(PULSES_PER_MINUTE, 60.0)


@dataclass(frozen=True)
class TrialResult:
    """What one trial did and read."""

    driver: str
    kind: str
    where: str
    action: Literal["read", "pulse"]
    readings: list[Reading]  # read: the reading; pulse: the state read back while on
    after: list[Reading] = field(default_factory=list)  # pulse: the state read back once off again

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "driver": self.driver,
            "kind": self.kind,
            "where": self.where,
            "action": self.action,
            "readings": [r.as_dict() for r in self.readings],
            "after": [r.as_dict() for r in self.after],
        }


def try_device(
    device: DeviceConfig,
    backend: Backend,
    limiter: RateLimiter,
    *,
    hold_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> TrialResult:
    """Read ``device`` once, or pulse it on then off once, on for ``hold_s`` (PULSE_S) (blocking: off the loop)."""
    spec = DRIVERS[device.driver].for_device(device)
    where = spec.where(device)
    pulse = bool(spec.sets) and (not device.allow or "set" in device.allow)
    if pulse and device.approval == "required":
        raise PolicyError(
            f"{where}: the definition says approval: required, so it is not switched without a person's approval;"
            " nothing was switched",
            fix="add it under devices: in the config and switch it with `picoagent devices set NAME on`, which"
            " waits for an approval, or try it with approval: none",
        )
    if not pulse and device.allow and "read" not in device.allow:
        raise PolicyError(f"{where}: the definition allows neither read nor set, so there is nothing to try")
    if pulse and (wait := limiter.hit(where)):
        raise RateLimited(f"{where} was pulsed {PULSES_PER_MINUTE} times in the last minute; try again in {wait:.0f} s")
    try:
        driver, lock = make_driver(device, backend)
    except PicoagentError:
        raise
    except Exception as exc:  # gpiozero's pin errors (in use by another program, no such pin): say where
        raise HardwareError(f"cannot open {where}: {exc}") from None
    try:
        with lock:
            if not pulse:
                return TrialResult(device.driver, spec.kind, where, "read", list(driver.read()))
            try:
                driver.set(True)
                on = list(driver.read())
                sleep(PULSE_S if hold_s is None else hold_s)
            finally:
                driver.set(False)  # off again whatever happened while it was on
            log.info("trial: %s (%s) pulsed on and off", where, device.driver)
            return TrialResult(device.driver, spec.kind, where, "pulse", on, list(driver.read()))
    finally:
        driver.close()
