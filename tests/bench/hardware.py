"""A device read through the model's tool layer on the simulated backend, against the bare driver read."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from appliance.config import CHECKOUT_CONFIG, load_config
from appliance.hardware.approvals import ApprovalStore
from appliance.hardware.backends import SimulatedBackend
from appliance.hardware.devices import DeviceRegistry
from appliance.memory.db import Database
from appliance.runtime import tool_registry
from tests.bench.common import report


def bench_device_read(n: int) -> None:
    """`device_read living_room` (BME280 over the simulated I2C bus) through ToolRegistry.execute."""
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(CHECKOUT_CONFIG, data_dir=tmp)
        db = Database(Path(tmp) / "bench.db")
        devices = DeviceRegistry(config, SimulatedBackend(), ApprovalStore(db))
        tools = tool_registry(config, devices)
        driver = devices.get("living_room").driver

        async def through_tools() -> list[float]:
            times = []
            for _ in range(n):
                started = time.perf_counter()
                result = await tools.execute("device_read", {"name": "living_room"})
                times.append(time.perf_counter() - started)
                assert result.ok, result.error
            return times

        bare = []
        for _ in range(n):
            started = time.perf_counter()
            driver.read()
            bare.append(time.perf_counter() - started)
        tooled = asyncio.run(through_tools())
        devices.close()
        db.close()
    value, baseline = statistics.median(tooled) * 1000, statistics.median(bare) * 1000
    report(
        "device_read_tool_p50_ms",
        value,
        baseline,
        "reported (the tool layer adds a thread hop, checks and formatting)",
        True,
        p99_ms=round(sorted(tooled)[int(n * 0.99) - 1] * 1000, 3),
        reads=n,
    )
