"""What every chat channel's test harness shares: the clock, the runtime around the channel, GPIO, delivery.

Each channel's suite (test_channel_*.py; Telegram's in tests/telegram_harness.py, for its two suites) keeps
only its platform's part of the harness (the fake server, how a person writes there, how to wait for an
answer); the contract suite
(tests/test_channel_contract.py) sees every channel through these harnesses.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from appliance.config import Config
from appliance.llm.scripted import ScriptedModel
from appliance.outbox import Outbox
from appliance.runtime import Runtime
from tests.fakes.clock import ManualClock


class Clock(ManualClock):
    """The channel suites' clock: the outbox's backoff and the doorkeeper's limits move only with it."""

    start = 1_800_000_000.0


@dataclass(kw_only=True)
class ChannelHarness:
    """A started channel on the real runtime (simulated hardware, a scripted model) and its outbox."""

    runtime: Runtime
    channel: Any
    outbox: Outbox
    model: ScriptedModel
    clock: Clock

    def pin(self, number: int) -> bool:
        """A GPIO pin of the simulated Pi."""
        assert self.runtime.devices is not None
        return bool(self.runtime.devices.backend.pin_factory.pin(number).state)

    async def drain(self, seconds: int = 120) -> None:
        """A delivery pass every (test) second until nothing of the channel's is pending."""
        for _ in range(seconds):
            await self.channel.delivery.deliver_due()
            if self.outbox.pending_count(self.channel.name) == 0:
                return
            self.clock.advance(1)
        rows = self.runtime.db.rows("SELECT text, status, last_error FROM outbox ORDER BY id")
        raise AssertionError(f"the outbox did not empty: {rows}")


H = TypeVar("H", bound=ChannelHarness)
Make = Callable[[Runtime, Outbox, Clock, ScriptedModel], H]


@contextlib.asynccontextmanager
async def opened(config: Config, model: ScriptedModel | None, make: Make[H], *, start: bool = True) -> AsyncIterator[H]:
    """The runtime, an outbox on the suite's clock, the harness ``make`` builds (started unless told not to),
    stopped and closed at the end."""
    model = model or ScriptedModel()
    clock = Clock()
    runtime = Runtime.open(config, model=model)
    try:
        harness = make(runtime, Outbox(runtime.db, clock=clock), clock, model)
        if start:
            await harness.channel.start()
        try:
            yield harness
        finally:
            await harness.channel.stop()
    finally:
        runtime.close()


def run(harness: contextlib.AbstractAsyncContextManager[H], scenario: Callable[[H], Awaitable[Any]]) -> None:
    """Run one scenario on a harness, in its own event loop."""

    async def main() -> None:
        async with harness as h:
            await scenario(h)

    asyncio.run(main())
