"""Pi health readings: throttling flags decoded as the firmware documents them."""

from __future__ import annotations

from pathlib import Path

from appliance.health import cpu_temperature, parse_throttled, read_health


def test_throttled_flags_follow_the_firmware_bits() -> None:
    flags = parse_throttled("throttled=0x50005")
    assert flags is not None
    assert flags["under_voltage"] and flags["throttled"]
    assert flags["under_voltage_occurred"] and flags["throttling_occurred"]
    assert not flags["arm_frequency_capped"] and not flags["soft_temperature_limit"]
    assert parse_throttled("throttled=0x0") == dict.fromkeys(flags, False)
    assert parse_throttled("garbage") is None


def test_cpu_temperature_reads_millidegrees(tmp_path: Path) -> None:
    zone = tmp_path / "temp"
    zone.write_text("48312\n")
    assert cpu_temperature(zone) == 48.3
    assert cpu_temperature(tmp_path / "missing") is None


def test_read_health_is_complete() -> None:
    health = read_health()
    assert health.memory_total_mb > 0 and health.disk_total_gb > 0 and len(health.load) == 3
