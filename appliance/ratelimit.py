"""A sliding-window rate limiter (logins per address, writes per device)."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable


class RateLimiter:
    """At most ``limit`` hits per key in any sliding window of ``window_s`` seconds."""

    def __init__(
        self, limit: int, window_s: float, clock: Callable[[], float] = time.monotonic, *, max_keys: int = 10_000
    ) -> None:
        if limit < 1 or window_s <= 0:
            raise ValueError(f"a rate limit needs limit >= 1 and window_s > 0, got {limit} per {window_s}s")
        self.limit = limit
        self.window_s = window_s
        self.clock = clock
        self.max_keys = max_keys
        # Ordered by last hit, oldest first, so stale keys are found (and forgotten) at the front.
        self._hits: OrderedDict[str, deque[float]] = OrderedDict()

    def hit(self, key: str) -> float:
        """Record a hit: 0 when allowed, else the seconds until the next hit would be (refused hits don't count)."""
        now = self.clock()
        self._forget_before(now - self.window_s)
        hits = self._hits.get(key)
        if hits is None:
            hits = self._hits[key] = deque()
        while hits and hits[0] <= now - self.window_s:
            hits.popleft()
        if len(hits) >= self.limit:
            return max(hits[0] + self.window_s - now, 0.001)
        hits.append(now)
        self._hits.move_to_end(key)
        while len(self._hits) > self.max_keys:
            self._hits.popitem(last=False)
        return 0.0

    def _forget_before(self, horizon: float) -> None:
        while self._hits:
            key, hits = next(iter(self._hits.items()))
            if hits and hits[-1] > horizon:
                return
            del self._hits[key]
