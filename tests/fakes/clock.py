"""The one hand-moved clock the tests share: time passes only when a test (or the code's sleep) moves it."""

from __future__ import annotations

from datetime import datetime


class ManualClock:
    """Returns ``now``; ``advance``/``sleep`` move it, ``set`` puts it at a datetime, ``step`` moves it per reading.

    Subclasses pick their starting point with ``start`` (what each suite's timestamps are written against).
    """

    start = 1000.0

    def __init__(self, now: float | datetime | None = None, *, step: float = 0.0) -> None:
        self.now = self.start if now is None else now.timestamp() if isinstance(now, datetime) else float(now)
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass."""
        self.now += seconds

    sleep = advance  # drivers under test sleep on the clock they read

    def set(self, when: datetime) -> None:
        """Jump to a wall-clock moment."""
        self.now = when.timestamp()
