"""The Pi's health topic: which phrasings it takes, and the figures (with units) a person reads back."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from appliance.config import Config
from appliance.grounded.base import Answer, Ask, Facts
from appliance.grounded.health import HEALTH, PiHealth
from appliance.health import Health, parse_throttled

NOW = datetime(2026, 11, 27, 14, 5, tzinfo=UTC)
READING = Health(
    cpu_temperature_c=72.4,
    throttled=parse_throttled("throttled=0x10000"),  # under-voltage once since boot, not now
    load=[0.52, 0.40, 0.30],
    memory_total_mb=3794,
    memory_available_mb=1234,
    disk_total_gb=29.1,
    disk_free_gb=12.3,
    uptime_s=5 * 86400 + 2 * 3600 + 60,
)


def topic(reading: Health = READING, seen: list[Path] | None = None) -> PiHealth:
    """The health topic reading ``reading`` (a Pi 4's four cores), noting the disk path it was asked about."""

    def read(path: Path) -> Health:
        if seen is not None:
            seen.append(path)
        return reading

    return dataclasses.replace(HEALTH, read=read, cores=4)


def facts(config: Config) -> Facts:
    """Facts whose clock reads NOW, the appliance started 3 h 12 min before."""
    return Facts(config=config, now=lambda: NOW, started_at=NOW.timestamp() - (3 * 3600 + 12 * 60))


def answer(text: str, config: Config, reading: Health = READING) -> Answer | None:
    """The answer to ``text`` as the words rule takes it (None: not taken)."""
    health = topic(reading)
    ask = health.match(text)
    return None if ask is None else asyncio.run(health.answer(ask, facts(config)))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("are you running hot?", "My CPU is at 72.4 °C: warm but fine; the Pi throttles at 80 °C."),
        ("what's your CPU temperature", "72.4 °C"),
        ("is the Pi overheating", "72.4 °C"),
        ("how hot is the cpu", "72.4 °C"),
        ("how warm is the pi getting", "72.4 °C"),
        ("How hot is your processor?", "72.4 °C"),
        ("what is the temperature of your chip", "72.4 °C"),
        ("how much memory is free", "1.2 GB of my 3.7 GB memory is free (33%): plenty."),
        ("how much memory do you have free?", "1.2 GB of my 3.7 GB memory is free"),
        ("how much ram do you have left", "1.2 GB of my 3.7 GB memory is free"),
        ("free memory", "1.2 GB of my 3.7 GB memory is free"),
        ("how much memory do you have", "1.2 GB of my 3.7 GB memory is free"),
        ("how much memory is there", "1.2 GB of my 3.7 GB memory is free"),
        ("How much memory do you have in total?", "of my 3.7 GB memory"),
        (
            "how much disk space is left",
            "12.3 GB of 29.1 GB is free on the disk holding my data: 58% full, plenty of room.",
        ),
        ("is the sd card full", "12.3 GB of 29.1 GB is free"),
        ("how much storage do you have left?", "12.3 GB of 29.1 GB is free"),
        ("how full is the disk", "12.3 GB of 29.1 GB is free"),
        (
            "how long have you been running",
            "I have been running for 3 hours 12 minutes; the Pi has been up for 5 days 2 hours",
        ),
        ("what's your uptime", "the Pi has been up for 5 days 2 hours."),
        ("uptime", "the Pi has been up for 5 days 2 hours."),
        ("How long has the Pi been switched on?", "the Pi has been up for 5 days 2 hours."),
        (
            "is the Pi throttled",
            "Not now, but since it booted it has been under-voltage (the power supply",
        ),
        ("any under-voltage?", "under-voltage"),
        (
            "how busy are you",
            "on 4 cores (0.40 over 5 minutes, 0.30 over 15): mostly idle.",
        ),
        ("what's the cpu load", "Load 0.52 over the last minute on 4 cores"),
        (
            "how is the Pi doing",
            "CPU 72.4 °C; memory 1.2 GB of 3.7 GB free; disk 12.3 GB of 29.1 GB free; load 0.52",
        ),
        ("health check", "CPU 72.4 °C;"),
    ],
)
def test_the_pi_reports_its_figures_with_units(text: str, said: str, config: Config) -> None:
    reply = answer(text, config)
    assert reply is not None, f"{text!r} was not taken"
    assert said in reply.text
    assert (reply.kind, reply.basis) == ("health", "the Pi's sensors (/sys, /proc), read now")


@pytest.mark.parametrize(
    "text",
    [
        "I'm running late",
        "is the fan running",
        "it's hot in the living room",
        "is it hot outside",
        "what's the temperature",  # the room's or the weather's, not the CPU's
        "what's the temperature in the kitchen",
        "how much memory do you have of me",
        "free the memory of my old phone number",
        "how much do you remember",
        "how are you doing",
        "are you ok",
        "is my disk full",
        "how hot will it be tomorrow",
        "turn the heater up, it's cold",
    ],
)
def test_what_is_not_about_the_pi_is_left_alone(text: str, config: Config) -> None:
    health = topic()
    assert health.match(text) is None
    by_meaning = Ask("health", text=text, by_meaning=True)
    assert asyncio.run(health.answer(by_meaning, facts(config))) is None


def test_a_message_brought_by_meaning_is_answered_by_its_keywords(config: Config) -> None:
    health = topic()
    ask = Ask("health", text="could you check how warm your processor is getting", by_meaning=True)
    reply = asyncio.run(health.answer(ask, facts(config)))
    assert reply is not None and "72.4 °C" in reply.text


@pytest.mark.parametrize(
    ("degrees", "judgement"),
    [(41.0, "cool"), (72.4, "warm but fine"), (78.2, "hot, close to where it slows down"), (83.0, "too hot")],
)
def test_the_temperature_is_judged_against_the_throttle_point(degrees: float, judgement: str, config: Config) -> None:
    reply = answer("are you running hot", config, dataclasses.replace(READING, cpu_temperature_c=degrees))
    assert reply is not None and f"{degrees:.1f} °C: {judgement}" in reply.text and "80 °C" in reply.text


def test_what_this_machine_does_not_report_is_said_to_be_missing(config: Config) -> None:
    bare = dataclasses.replace(READING, cpu_temperature_c=None, throttled=None)
    hot = answer("are you running hot", config, bare)
    assert hot is not None and "cannot tell" in hot.text and "°C" not in hot.text
    throttled = answer("is the pi throttled", config, bare)
    assert throttled is not None and "cannot tell" in throttled.text and "vcgencmd" in throttled.text
    summary = answer("how is the pi doing", config, bare)
    assert summary is not None and "CPU temperature not reported" in summary.text


def test_throttling_now_and_low_figures_are_said_plainly(config: Config) -> None:
    now = dataclasses.replace(READING, throttled=parse_throttled("throttled=0x50005"))
    reply = answer("is the pi throttled", config, now)
    assert reply is not None and reply.text.startswith("Yes: right now it is under-voltage")
    clean = answer(
        "is the pi throttled", config, dataclasses.replace(READING, throttled=parse_throttled("throttled=0x0"))
    )
    assert clean is not None and clean.text == "No: no throttling and no under-voltage since the Pi booted."
    low = answer("how much memory is free", config, dataclasses.replace(READING, memory_available_mb=300))
    assert low is not None and low.text == "300 MB of my 3.7 GB memory is free (8%): low: a bigger model may not fit."
    full = answer("how much disk space is left", config, dataclasses.replace(READING, disk_free_gb=1.0))
    assert full is not None and "1.0 GB of 29.1 GB" in full.text and "nearly full" in full.text
    busy = answer("how busy are you", config, dataclasses.replace(READING, load=[5.1, 4.0, 3.2]))
    assert busy is not None and "5.10" in busy.text and "overloaded" in busy.text


def test_the_disk_asked_about_is_the_one_holding_the_data(config: Config) -> None:
    seen: list[Path] = []
    health = topic(seen=seen)
    ask = health.match("how much disk space is left")
    assert ask is not None
    asyncio.run(health.answer(ask, facts(config)))
    assert seen and Path(config.data_dir).is_relative_to(seen[0]) and seen[0].exists()


def test_this_machine_is_read_for_real(config: Config) -> None:
    """The real reader on whatever machine runs the tests: figures, or "cannot tell", never a made-up one."""
    memory = asyncio.run(HEALTH.answer(Ask("health", "memory"), facts(config)))
    assert memory is not None and re.search(
        r"^\d+(\.\d)? [GM]B of my \d+(\.\d)? [GM]B memory is free \(\d+%\)", memory.text
    )
    hot = asyncio.run(HEALTH.answer(Ask("health", "temperature"), facts(config)))
    assert hot is not None
    assert ("°C" in hot.text) == Path("/sys/class/thermal/thermal_zone0/temp").exists()


def test_examples_are_questions_the_words_rule_takes() -> None:
    assert len(HEALTH.examples) >= 12
    assert [e for e in HEALTH.examples if HEALTH.match(e) is None] == []
