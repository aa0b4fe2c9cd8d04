"""How a cloud call fails: the error classes people and the router see, and the per-provider circuit
breaker that makes a dead endpoint cost nothing after a few failures (see cloud.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from appliance.errors import ModelError

log = logging.getLogger(__name__)


class CloudError(ModelError):
    """A cloud model could not answer."""


class CloudUnavailable(CloudError, ConnectionError):
    """The provider is unreachable, overloaded, timed out, or its circuit breaker is open."""


class CloudRefused(CloudError, PermissionError):
    """The provider refused the request (bad key, no access, bad model or parameters); retrying will not help."""


class CloudMalformed(CloudError, ValueError):
    """The provider answered with a body that does not parse as its API promises."""


class CircuitBreaker:
    """Opens after ``threshold`` consecutive failures; fails fast for ``cooldown_s``, then lets one call try."""

    def __init__(self, threshold: int = 5, cooldown_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.failures = 0
        self.open_until: float | None = None

    @property
    def is_open(self) -> bool:
        """Whether calls are refused right now."""
        return self.open_until is not None and self.clock() < self.open_until

    def check(self, name: str) -> None:
        """Raise CloudUnavailable while open."""
        if self.is_open and self.open_until is not None:
            wait = self.open_until - self.clock()
            raise CloudUnavailable(
                f"{name}: not tried, it failed {self.failures} times in a row (circuit open for {wait:.0f} s more)",
                fix="wait, or check the network and the provider's status page",
            )

    def success(self, name: str) -> None:
        """The provider answered: close the breaker."""
        if self.open_until is not None:
            log.info("%s: circuit closed, the provider answers again", name)
        self.failures = 0
        self.open_until = None

    def failure(self, name: str) -> None:
        """Count a failure; open (again) at the threshold. A failed trial after the cool-down reopens at once."""
        self.failures += 1
        if self.failures >= self.threshold:
            self.open_until = self.clock() + self.cooldown_s
            log.warning("%s: circuit open for %.0f s after %d failures", name, self.cooldown_s, self.failures)
