"""The daemon's one lifecycle: services start in order, stop in reverse, and a failed start undoes itself."""

from __future__ import annotations

import asyncio

import pytest

from appliance.errors import PicoagentError
from appliance.lifecycle import Chores, Loop, Services
from tests.helpers import eventually


class Recorded:
    """A service that writes what happens to it into a shared log; ``fail`` makes its start or stop fail."""

    def __init__(self, name: str, log: list[str], fail: str = "") -> None:
        self.name, self.log, self.fail = name, log, fail

    async def start(self) -> None:
        if self.fail == "start":
            raise PicoagentError(f"{self.name} cannot start", fix="none")
        self.log.append(f"start {self.name}")

    async def stop(self) -> None:
        self.log.append(f"stop {self.name}")
        if self.fail == "stop":
            raise RuntimeError(f"{self.name} broke while stopping")


def test_services_start_in_order_and_stop_in_reverse() -> None:
    log: list[str] = []

    async def main() -> None:
        services = Services()
        await services.start([Recorded("db", log), Recorded("web", log), Recorded("telegram", log)])
        await services.stop()

    asyncio.run(main())
    assert log == ["start db", "start web", "start telegram", "stop telegram", "stop web", "stop db"]


def test_a_failed_start_stops_what_started_and_raises_its_error() -> None:
    log: list[str] = []

    async def main() -> None:
        services = Services()
        with pytest.raises(PicoagentError, match="web cannot start"):
            await services.start([Recorded("db", log), Recorded("web", log, "start"), Recorded("telegram", log)])
        assert services.started == []

    asyncio.run(main())
    assert log == ["start db", "stop db"]  # telegram never started, db was closed again


def test_a_service_added_later_that_fails_to_start_stops_nothing_else_and_one_removed_stops_alone() -> None:
    """What a reload does: a channel started beside the running daemon, or stopped while the rest run on."""
    log: list[str] = []

    async def main() -> None:
        services = Services()
        await services.start([Recorded("db", log), Recorded("web", log)])
        with pytest.raises(PicoagentError, match="telegram cannot start"):
            await services.add(Recorded("telegram", log, "start"))
        slack = Recorded("slack", log)
        await services.add(slack)
        await services.remove(slack)
        assert [s.name for s in services.started] == ["db", "web"]
        await services.stop()

    asyncio.run(main())
    assert log == ["start db", "start web", "start slack", "stop slack", "stop web", "stop db"]


def test_a_failing_stop_is_logged_and_the_others_still_stop(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []

    async def main() -> None:
        services = Services()
        await services.start([Recorded("db", log), Recorded("web", log, "stop"), Recorded("cron", log)])
        await services.stop()

    asyncio.run(main())
    assert log[-3:] == ["stop cron", "stop web", "stop db"]
    assert "stopping web failed" in caplog.text and "web broke while stopping" in caplog.text


def test_loops_and_chores_are_cancelled_at_stop() -> None:
    ran: list[str] = []

    async def forever(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            ran.append(f"{name} ended")

    async def quick() -> None:
        ran.append("quick ended")

    async def main() -> None:
        chores = Chores()
        services = Services()
        await services.start([chores, Loop("sampler", lambda: forever("loop"))])
        chores.spawn(forever("chore"))
        chores.spawn(quick())  # a finished chore is forgotten, not cancelled
        await eventually(lambda: "quick ended" in ran and len(chores._running) == 1, what="the quick chore forgotten")
        await services.stop()

    asyncio.run(main())
    assert sorted(ran) == ["chore ended", "loop ended", "quick ended"]  # each once: the quick one not cancelled
