"""Home Assistant discovery after `picoagent serve` starts: the issue's goal is every development device within 2 s.

A real mosquitto on loopback (tests/mqtt_broker.py) and a client subscribed to ``homeassistant/#`` (what
`mosquitto_sub -t 'homeassistant/#' -v` shows) before the daemon starts; the clock runs from the moment
``serve`` is spawned to the moment the last discovery message of the five development devices (every entity
they appear as) has arrived. The baseline is the same daemon's time to /healthz, measured in the same run:
discovery can come no sooner than the daemon is up, so the ratio says what the MQTT part adds.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from appliance.config import CHECKOUT_CONFIG, MqttConfig, load_config
from appliance.hardware.device_info import DeviceInfo
from appliance.hardware.drivers import DRIVERS
from appliance.mqtt.discovery import Topics, device_entities
from tests.bench.common import report
from tests.bench.daemon import _free_port, _get, _stop, start_serve
from tests.mqtt_broker import Broker, Watcher, have_mosquitto

GOAL_S = 2.0
ENABLED = (
    "  # Connect to the broker (off: nothing MQTT is loaded, the daemon runs without a broker).\n  enabled: false\n"
)


def expected_topics(config_path: Path, mqtt: MqttConfig) -> set[str]:
    """Every discovery topic the configured devices appear as (from the driver table, as the daemon does)."""
    config = load_config(config_path, data_dir=config_path.parent / "unused")
    topics = Topics.of(mqtt)
    found: set[str] = set()
    for name, device in config.devices.items():
        spec = DRIVERS[device.driver]
        can = ("read", "set") if spec.sets else ("read",)
        allowed = tuple(op for op in can if not device.allow or op in device.allow)
        info = DeviceInfo(name, spec.kind, device.room or None, (), spec.quantities, device.driver, allowed)
        found |= {topic for topic, _ in device_entities(topics, info)}
    return found


def _config(tmp: Path, port: int) -> Path:
    text = CHECKOUT_CONFIG.read_text(encoding="utf-8").replace("preload: true", "preload: false")
    assert ENABLED in text and "  port: 1883\n" in text, "the checkout config's mqtt section changed"
    text = text.replace(ENABLED, ENABLED.replace("false", "true")).replace("  port: 1883\n", f"  port: {port}\n")
    path = tmp / "picoagent.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _one_run(tmp: Path, broker: Broker) -> tuple[float, float, int]:
    config = _config(tmp, broker.port)
    wanted = expected_topics(config, MqttConfig(port=broker.port))
    watcher = Watcher(broker, "homeassistant/#")
    port = _free_port()
    started = time.perf_counter()
    proc = start_serve(config, tmp / "d", port)
    healthy = discovered = 0.0
    try:
        deadline = started + 30
        while not (healthy and discovered):
            now = time.perf_counter()
            if now > deadline:
                raise RuntimeError(f"after 30 s: healthy={bool(healthy)}, missing {wanted - watcher.topics()}")
            if not discovered and wanted <= watcher.topics():
                discovered = now - started
            if not healthy:
                try:
                    _get(f"http://127.0.0.1:{port}/healthz")
                    healthy = time.perf_counter() - started
                except OSError:
                    pass
            time.sleep(0.005)
    finally:
        _stop(proc)
        watcher.close()
    return discovered, healthy, len(wanted)


def bench_discovery(reps: int) -> dict[str, object]:
    """Seconds from `picoagent serve` to Home Assistant discovery of all five development devices."""
    if not have_mosquitto():
        raise RuntimeError("mosquitto is not installed: apt-get install mosquitto mosquitto-clients")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(Path(tmp) / "mosquitto")
        broker.start()
        try:
            for i in range(reps):
                if i:
                    broker.restart()  # no persistence: the last run's retained discovery is gone
                folder = Path(tmp) / f"run{i}"
                folder.mkdir()
                runs.append(_one_run(folder, broker))
        finally:
            broker.stop()
    value = statistics.median(r[0] for r in runs)
    baseline = statistics.median(r[1] for r in runs)
    return report(
        "mqtt_discovery_s",
        value,
        baseline,
        f"value <= {GOAL_S:g} s (all five development devices in homeassistant/#; baseline: serve to /healthz)",
        value <= GOAL_S,
        runs=reps,
        entities=runs[0][2],
        worst_s=round(max(r[0] for r in runs), 3),
    )
