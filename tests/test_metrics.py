"""The Prometheus text exposition /metrics serves (appliance/metrics.py), read as a scraper reads it."""

from __future__ import annotations

from appliance.metrics import Counter, Gauge, Histogram, Registry


def test_a_gauge_with_nothing_to_read_is_not_listed_at_all() -> None:
    """A machine without a thermal zone lists no CPU temperature (a README walk found its HELP line, no value)."""
    registry = Registry()
    registry.add(Gauge("picoagent_cpu_temperature_celsius", "CPU temperature", lambda: None))
    registry.add(Gauge("picoagent_queue_depth", "Model requests waiting", lambda: 2.0))
    text = registry.render()
    assert "cpu_temperature" not in text
    assert text == (
        "# HELP picoagent_queue_depth Model requests waiting\n"
        "# TYPE picoagent_queue_depth gauge\n"
        "picoagent_queue_depth 2\n"
    )


def test_counters_and_histograms_are_listed_before_their_first_value() -> None:
    """A counter at nothing yet is still declared (scrapers then know it exists); values carry their labels."""
    registry = Registry()
    turns = registry.add(Counter("picoagent_turns_total", "Turns answered, by route", ["route"]))
    latency = registry.add(Histogram("picoagent_model_latency_seconds", "Latency", [0.5, 1], ["stage"]))
    assert "# TYPE picoagent_turns_total counter" in registry.render()
    turns.inc(1, "local")
    latency.observe(0.7, "ttft")
    text = registry.render()
    assert 'picoagent_turns_total{route="local"} 1\n' in text
    assert 'picoagent_model_latency_seconds_bucket{stage="ttft",le="0.5"} 0\n' in text
    assert 'picoagent_model_latency_seconds_bucket{stage="ttft",le="1"} 1\n' in text
    assert 'picoagent_model_latency_seconds_count{stage="ttft"} 1\n' in text
