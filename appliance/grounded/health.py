"""The Pi's own health, read now from /sys and /proc (:func:`appliance.health.read_health`): never guessed.

Asked: "are you running hot", "what's your CPU temperature", "how much memory is free", "how much disk
space is left", "how long have you been running", "is the Pi throttled", "how busy are you", "how is the
Pi doing". Each answer gives the figure with its unit and a plain judgement ("72.4 °C: warm but fine;
the Pi throttles at 80 °C"); a figure this machine does not report (no thermal zone, no vcgencmd) is said
to be missing, not filled in.

The words rule takes a message only when the whole of it is such a question about the Pi ("you", "the
Pi", "the CPU"): "I'm running late", "is the fan running", "it's hot in the living room" (a room or a
device), "how much memory do you have of me" (what it remembers) and "free the memory of ..." are left
to the other topics. A message brought by meaning is looked at again by keywords, with the same vetoes.

Reading takes a few small files and maybe ``vcgencmd`` (up to 2 s on a busy Pi), so it runs off the
event loop.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults
from appliance.health import Health, read_health

BASIS = "the Pi's sensors (/sys, /proc), read now"
THROTTLE_C = 80  # the Pi 4 and 5 firmware slows the CPU from here (soft limit; hard at 85 °C)

_PI = r"(?:you|(?:your|the|the pi's|this pi's) (?:cpu|processor|chip|soc|system)|your|the pi|the raspberry pi|this pi)"
_PREFIX = (
    r"(?:(?:hey|hi|ok|okay|so|and)(?: \w+)? )?(?:please )?"
    r"(?:(?:can|could) you (?:please )?(?:tell|check|show) me |(?:tell|show) me |check |do you know )?"
)
_SUFFIX = r"(?: (?:now|right now|at the moment|currently|please|today|then|again|still))*"
_PHRASES: tuple[tuple[str, str], ...] = (
    (
        "temperature",
        rf"(?:are|is) {_PI} (?:running |getting |too |very )*(?:hot|warm|overheating|too hot)|"
        rf"(?:what(?:'s| is)|how high is) {_PI}(?:'s)? (?:cpu |core |processor |chip |soc )?temp(?:erature)?|"
        rf"how (?:hot|warm) (?:are you|is {_PI}(?:'s (?:cpu|processor|chip))?)(?: getting| running)?|"
        r"(?:cpu|core|processor|soc|pi) temp(?:erature)?|"
        r"(?:what(?:'s| is) )?(?:the )?temp(?:erature)? of (?:the |your )?(?:cpu|pi|processor|chip)",
    ),
    (
        "memory",
        r"how much (?:free |spare |available |unused )?(?:memory|ram)(?: is| do you have| have you got| is there|"
        r" are you using| do you use| does the pi have)?(?: free| left| available| spare| in use| used)?"
        r"(?: in total| altogether)?|"
        rf"(?:what(?:'s| is) )?{_PI}(?:'s)? (?:memory|ram)(?: usage| use)?|"
        r"(?:free|available) (?:memory|ram)|(?:memory|ram) (?:usage|use|free|left)",
    ),
    (
        "disk",
        r"how much (?:free )?(?:disk|storage|sd card|sd|disk space|storage space|space)"
        r"(?: is| do you have| have you got| is there)?(?: left| free| available| remaining| used)?"
        r"(?: on (?:the |your )?(?:disk|sd card|card|pi))?|"
        r"how full (?:is|are) (?:the |your )?(?:disk|sd card|storage|card)|"
        r"is (?:the |your )?(?:disk|sd card|storage|card) (?:getting )?full|(?:free )?(?:disk|storage) space|"
        r"(?:disk|storage) (?:usage|left|free)",
    ),
    (
        "uptime",
        r"how long (?:have you|has (?:the (?:raspberry )?pi|the system|this box|picoagent|the assistant)) been"
        r" (?:running|up|on|awake|going|switched on|turned on)(?: for)?"
        r"(?: since (?:it|you) (?:last )?(?:re)?boot(?:ed)?| since (?:the|its|your) last (?:re)?boot)?|"
        rf"what(?:'s| is) {_PI}(?:'s)? uptime|(?:the )?uptime|when did you (?:last )?(?:start|boot|restart|reboot)|"
        r"since when (?:have you been|are you) (?:running|up|on)|"
        r"how long (?:is it |has it been )?since you (?:started|booted|were started|came on|restarted)",
    ),
    (
        "throttled",
        rf"(?:is|are) {_PI} (?:being )?throttl(?:ed|ing)|"
        r"(?:is there |any )?(?:throttling|under-?voltage)(?: warnings?)?|"
        rf"(?:has|have) {_PI} (?:been )?throttled|is the power supply (?:ok|okay|enough|good enough|strong enough)",
    ),
    (
        "load",
        rf"how busy (?:are you|is {_PI})|what(?:'s| is) {_PI}(?:'s)? (?:cpu )?(?:load|usage|utili[sz]ation)|"
        r"(?:the )?(?:cpu|system) (?:load|usage|utili[sz]ation)|(?:the )?load average|how loaded (?:are you|is the pi)",
    ),
    (
        "all",
        r"how (?:is|are|'s) (?:the pi|the raspberry pi|your health|the system|your system)"
        r"(?: doing| holding up| running)?|"
        r"(?:system|pi|health) (?:status|health|check)|(?:run a |do a )?health check|how healthy (?:are you|is the pi)|"
        r"(?:are you|is the pi) (?:healthy|ok|okay|alright) hardware-wise|is the pi (?:healthy|ok|okay|alright)",
    ),
)
_STRICT = [(what, re.compile(rf"{_PREFIX}(?:{phrase}){_SUFFIX}")) for what, phrase in _PHRASES]
# by meaning: keywords, each needing the Pi (or "you") named, none of the other topics' words
_KEYWORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("throttled", re.compile(r"\bthrottl|\bunder-?voltage\b")),
    ("temperature", re.compile(r"\b(?:overheat\w*|temp(?:erature)?s?|hot|warm)\b")),
    ("memory", re.compile(r"\b(?:ram|memory)\b")),
    ("disk", re.compile(r"\b(?:disk|storage|sd ?card)\b")),
    ("uptime", re.compile(r"\buptime\b|\bhow long\b.*\b(?:running|up)\b")),
    ("load", re.compile(r"\b(?:load|busy|cpu usage|utili[sz]ation)\b")),
)
_ABOUT_THE_PI = re.compile(r"\b(?:you|your|yourself|pi|raspberry|cpu|processor|chip|soc|system|ram|disk|sd)\b")
_OTHER_TOPIC = re.compile(
    r"\b(?:late|fan|light|lamp|heater|room|kitchen|bedroom|living|bathroom|outside|weather|oven|house|home|water|"
    r"sensor|of me|about me|remember|forget|memories|remind|the memory of|free the|clear|wipe|delete|forecast|"
    r"tomorrow|tonight|my (?!pi\b|raspberry\b))\b"
)


@dataclass
class PiHealth(TopicDefaults):
    """The Pi's health topic (see the module docstring); ``read`` and ``cores`` are seams for tests."""

    kind: str = "health"
    overview: str = ""  # near it is "how long is a marathon", "tell me about the Raspberry Pi": not the Pi's figures
    near_exact: bool = True  # its answer reads the words again, strictly: trusted near it too
    read: Callable[[Path], Health] = read_health
    cores: int | None = None  # the CPU's cores; None: this machine's

    def match(self, text: str) -> Ask | None:
        """An Ask when the whole message asks after the Pi's temperature, memory, disk, uptime or load."""
        said = _normalise(text)
        if _OTHER_TOPIC.search(said):
            return None
        for what, pattern in _STRICT:
            if pattern.fullmatch(said):
                return Ask(self.kind, what, text=text)
        return None

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The figures read now, with units and a judgement; None when the message is not about the Pi."""
        what = ask.what or _by_keywords(ask.text)
        if not what or (ask.near and not _THE_PI.search(_normalise(ask.text))):
            return None  # near by meaning, "what temperature should a fridge be": the Pi's only when it names it
        health = await asyncio.to_thread(self.read, _disk_of(facts))
        running = max(0.0, facts.now().timestamp() - facts.started_at)
        cores = self.cores or _cores()
        match what:
            case "temperature":
                text = _temperature(health)
            case "memory":
                text = _memory(health)
            case "disk":
                text = _disk(health)
            case "uptime":
                text = _uptime(health, running)
            case "throttled":
                text = _throttled(health)
            case "load":
                text = _load(health, cores)
            case _:
                text = _all(health, cores)
        return Answer(text, basis=BASIS, kind=self.kind)


HEALTH = PiHealth()


_THE_PI = re.compile(
    r"\b(?:you|your|pi|cpu|processor|box|board|system|chip|machine|sd ?card|disk|ram|memory|uptime|reboot\w*|boot\w*"
    r"|picoagent)\b"
)


def _normalise(text: str) -> str:
    text = text.lower().replace("’", "'")
    text = re.sub(r"[?!.,;:\"]+", " ", text)
    return " ".join(text.split())


def _by_keywords(text: str) -> str:
    said = _normalise(text)
    if _OTHER_TOPIC.search(said) or not _ABOUT_THE_PI.search(said):
        return ""
    for what, pattern in _STRICT:
        if pattern.fullmatch(said):
            return what
    return next((what for what, pattern in _KEYWORDS if pattern.search(said)), "")


def _cores() -> int:
    """The cores this process may run on (a container's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _disk_of(facts: Facts) -> Path:
    """The disk the appliance's data is on: its data dir, or the nearest folder of it that exists."""
    path = Path(facts.config.data_dir) if facts.config is not None else Path("/")
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


# The plain judgement of a figure: the word of the first bar it is below (the last word past every bar).
_Judgement = tuple[tuple[float, str], ...]
_HEAT: _Judgement = (
    (55, "cool"),
    (75, "warm but fine"),
    (THROTTLE_C, "hot, close to where it slows down"),
    (math.inf, "too hot: it is slowing itself down"),
)
_MEMORY_FREE: _Judgement = ((0.1, "low: a bigger model may not fit"), (0.25, "enough"), (math.inf, "plenty"))
_DISK_FREE: _Judgement = ((0.05, "nearly full"), (0.15, "getting full"), (math.inf, "plenty of room"))
_LOAD_PER_CORE: _Judgement = (
    (0.25, "mostly idle"),
    (0.75, "working, with room to spare"),
    (1, "busy"),
    (math.inf, "overloaded: work is waiting"),
)


def _judged(figure: float, judgement: _Judgement) -> str:
    """The word for ``figure``: that of the first bar it is below."""
    return next((word for bar, word in judgement if figure < bar), judgement[-1][1])


def _temperature(health: Health) -> str:
    degrees = health.cpu_temperature_c
    if degrees is None:
        return "I cannot tell: this machine does not report a CPU temperature (there is no thermal zone in /sys)."
    return f"My CPU is at {degrees:.1f} °C: {_judged(degrees, _HEAT)}; the Pi throttles at {THROTTLE_C} °C."


def _size(megabytes: float) -> str:
    return f"{megabytes:.0f} MB" if megabytes < 1024 else f"{megabytes / 1024:.1f} GB"


def _memory(health: Health) -> str:
    total, free = health.memory_total_mb, health.memory_available_mb
    if total <= 0:
        return "I cannot tell: this machine does not report its memory (/proc/meminfo could not be read)."
    share = free / total
    return f"{_size(free)} of my {_size(total)} memory is free ({share:.0%}): {_judged(share, _MEMORY_FREE)}."


def _disk(health: Health) -> str:
    total, free = health.disk_total_gb, health.disk_free_gb
    if total <= 0:
        return "I cannot tell: the disk holding my data reports no size."
    share = free / total
    judgement = _judged(share, _DISK_FREE)
    return f"{free:.1f} GB of {total:.1f} GB is free on the disk holding my data: {1 - share:.0%} full, {judgement}."


def _span(seconds: float) -> str:
    minutes = int(seconds // 60)
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    parts = [(days, "day"), (hours, "hour"), (minutes, "minute")]
    said = [f"{n} {name}{'s' if n != 1 else ''}" for n, name in parts if n][:2]
    return " ".join(said) if said else "less than a minute"


def _uptime(health: Health, running: float) -> str:
    return f"I have been running for {_span(running)}; the Pi has been up for {_span(health.uptime_s)}."


_NOW = {
    "under_voltage": "under-voltage (the power supply is too weak)",
    "throttled": "throttled",
    "arm_frequency_capped": "its CPU speed capped",
    "soft_temperature_limit": "at its soft temperature limit",
}


def _throttled(health: Health) -> str:
    flags = health.throttled
    if flags is None:
        return "I cannot tell: vcgencmd, which reports throttling on a Pi, is not available on this machine."
    now = [said for flag, said in _NOW.items() if flags.get(flag)]
    if now:
        return f"Yes: right now it is {', '.join(now)}."
    before = [said for flag, said in _NOW.items() if flags.get(f"{flag}_occurred")]
    if before:
        return f"Not now, but since it booted it has been {', '.join(before)}."
    return "No: no throttling and no under-voltage since the Pi booted."


def _load(health: Health, cores: int) -> str:
    one, five, fifteen = [*health.load, 0.0, 0.0, 0.0][:3]
    judgement = _judged(one / cores, _LOAD_PER_CORE)
    return (
        f"Load {one:.2f} over the last minute on {cores} cores ({five:.2f} over 5 minutes, {fifteen:.2f} over "
        f"15): {judgement}."
    )


def _all(health: Health, cores: int) -> str:
    degrees = health.cpu_temperature_c
    temperature = "CPU temperature not reported" if degrees is None else f"CPU {degrees:.1f} °C"
    return (
        f"{temperature}; memory {_size(health.memory_available_mb)} of {_size(health.memory_total_mb)} free; "
        f"disk {health.disk_free_gb:.1f} GB of {health.disk_total_gb:.1f} GB free; load {health.load[0]:.2f} on "
        f"{cores} cores; up {_span(health.uptime_s)}."
    )
