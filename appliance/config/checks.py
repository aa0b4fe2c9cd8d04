"""The checks types alone cannot express: ranges, what each device driver needs, no shared pins, schedules.

They run on the built tree, after :func:`appliance.config.load.load_config` has converted every
value, and name the key that is wrong. A value that came from a secret reference is never shown.

A number's range is metadata on its field (``doc(..., low=, high=, expected=)`` in
:mod:`~appliance.config.schema`), checked by one walk over the tree; what metadata cannot say (one
key against another, host names, devices, schedules) is one check function per section. Cron jobs
are checked here for the config's ``scheduler.jobs`` and for ``workspace/cron.yaml`` alike
(:func:`check_job`), so the same mistake reads the same in either file.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from appliance.config.channel_checks import check_channels
from appliance.config.devices import simulated_part
from appliance.config.homeassistant import check_homeassistant
from appliance.config.mqtt import check_mqtt, check_mqtt_devices
from appliance.config.schema import Config, CronJob
from appliance.config.shown import _describe
from appliance.config.weather import PLACE_FIX, check_weather
from appliance.errors import ConfigError, UsageError, known
from appliance.hardware.drivers import DRIVERS

# A DNS name: labels of letters, digits and hyphens, not starting or ending with a hyphen.
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
NAME_RE = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
ALLOWED_HOSTS_EXAMPLE = "a host name or an IP address without scheme or port, e.g. pi.home.arpa or 192.168.1.20"


def host_entry(entry: str) -> str | None:
    """A host list's entry (``web.allowed_hosts``, ``tools.web_fetch.trusted_hosts``) as it is compared:
    lower case, no final dot; None when it is no bare host name or IP address (a scheme, port or path)."""
    value = entry.strip().lower().rstrip(".")
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    return value if NAME_RE.fullmatch(value) and len(value) <= 253 else None


Refuse = Callable[[str, str, Any], ConfigError]


def _check(config: Config, referenced: set[str]) -> None:
    """Ranges, then what types and ranges alone cannot express (values from references are never shown)."""

    def refuse(path: str, expected: str, value: Any) -> ConfigError:
        shown = "a value from a secret reference" if path in referenced else _describe(value)
        return ConfigError(f"{path}: expected {expected}, got {shown}")

    for path, value, meta in _ranged(config, ""):
        low, high = meta["low"], meta["high"]
        if (low is not None and value < low) or (high is not None and value > high):
            raise refuse(path, meta["expected"], value)
    _check_web(config, refuse)
    _check_tools(config, refuse)
    _check_devices(config, refuse)  # and events, schedules, telegram, routing, providers, memory, hardware
    check_channels(config)
    check_mqtt(config.mqtt)
    check_weather(config.weather)


def _ranged(node: Any, prefix: str) -> Iterator[tuple[str, float, Mapping[str, Any]]]:
    """Every number in the tree whose field has a range: (its path, its value, the field's metadata)."""
    for f in dataclasses.fields(node):
        value, path = getattr(node, f.name), prefix + f.name
        if "expected" in f.metadata and isinstance(value, int | float) and not isinstance(value, bool):
            yield path, value, f.metadata
        yield from _ranged_in(value, path)


def _ranged_in(value: Any, path: str) -> Iterator[tuple[str, float, Mapping[str, Any]]]:
    """The ranged numbers inside a section, a list or a mapping of sections (paths as the loader writes them)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield from _ranged(value, path + ".")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _ranged_in(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _ranged_in(item, f"{path}.{key}")


def _check_web(config: Config, refuse: Refuse) -> None:
    """The total login limit bounds the per-address one; allowed hosts are bare names or addresses."""
    if config.web.login_attempts_per_minute_total < config.web.login_attempts_per_minute:
        raise refuse(
            "web.login_attempts_per_minute_total",
            f"at least web.login_attempts_per_minute ({config.web.login_attempts_per_minute}): it counts every"
            " address's attempts together",
            config.web.login_attempts_per_minute_total,
        )
    for i, entry in enumerate(config.web.allowed_hosts):
        if host_entry(entry) is None:
            raise refuse(f"web.allowed_hosts[{i}]", ALLOWED_HOSTS_EXAMPLE, entry)


# Every tool picoagent itself may register (a test checks this against a registry with everything on).
# A tool added to appliance/tools is added here, so that tools.require_approval may name it.
BUILTIN_TOOLS = (
    "calculator",
    "current_time",
    "system_health",
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "shell",
    "web_fetch",
    "remember",
    "recall",
    "load_skill",
    "devices_list",
    "device_read",
    "device_set",
    "i2c_scan",
    "i2c_read",
    "i2c_write",
    "spi_transfer",
    "web_search",
    "weather",
)
# Tools only the daemon registers (they need its notifier, scheduler or task runner).
DAEMON_TOOLS = ("message", "spawn", "schedule_create", "schedule_list", "schedule_cancel", "task_create", "task_status")
_MCP_SLUG = re.compile(r"[^a-z0-9_]+")  # as appliance.mcp.adapt names a server's tools: mcp_<server>_<tool>


def check_require_approval(names: Sequence[str], mcp_servers: Collection[str]) -> None:
    """tools.require_approval names built-in tools, or an MCP server's tools (which appear only once it runs).

    The rule for MCP: ``mcp_<server>_<tool>`` or ``mcp_<server>_*`` for a server under tools.mcp.
    """
    prefixes = {f"mcp_{_MCP_SLUG.sub('_', s.lower()).strip('_') or 'x'}_": s for s in mcp_servers}
    for i, name in enumerate(names):
        where = f"tools.require_approval[{i}]"
        if name in BUILTIN_TOOLS or name in DAEMON_TOOLS:
            continue
        if name.startswith("mcp_"):
            if any(name.startswith(p) and len(name) > len(p) for p in prefixes):
                continue
            servers = known(mcp_servers, "none is configured")
            raise ConfigError(
                f"{where}: {name!r} names no MCP server under tools.mcp ({servers})",
                fix="an MCP server's tools are mcp_<server>_<tool>, or mcp_<server>_* for all of them",
            )
        raise ConfigError(
            f"{where}: no tool named {name!r}",
            fix=f"known tools: {', '.join(BUILTIN_TOOLS + DAEMON_TOOLS)};"
            " an MCP server's: mcp_<server>_<tool> or mcp_<server>_*",
        )


def _check_tools(config: Config, refuse: Refuse) -> None:
    """web_fetch's private exceptions are addresses or networks, its trusted hosts bare names; tools needing
    approval exist."""
    check_require_approval(config.tools.require_approval, config.tools.mcp)
    for i, entry in enumerate(config.tools.web_fetch.allow_private):
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            where = f"tools.web_fetch.allow_private[{i}]"
            raise refuse(where, "an IP address or network, e.g. 192.168.1.20 or 10.0.0.0/24", entry) from None
    for i, entry in enumerate(config.tools.web_fetch.trusted_hosts):
        if host_entry(entry) is None:
            where = f"tools.web_fetch.trusted_hosts[{i}]"
            raise refuse(where, "a host name with no scheme or path, e.g. en.wikipedia.org", entry)
    _check_web_search(config, refuse)
    if not _base_url(config.tools.skills_api):
        raise refuse(
            "tools.skills_api", "an http:// or https:// base URL, e.g. https://api.github.com", config.tools.skills_api
        )


def _base_url(url: str) -> bool:
    """Whether ``url`` is an http(s) base URL: a host, no user name, no query."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not parts.username and not parts.query


def _check_web_search(config: Config, refuse: Refuse) -> None:
    """web_search's engine has what it needs: SearXNG an address, Brave a key; an address is http(s)."""
    search = config.tools.web_search
    if search.backend == "searxng" and not search.url:
        raise ConfigError(
            "tools.web_search.url: the searxng backend needs your instance's address",
            fix="e.g. url: http://192.168.1.30:8888 (its JSON API must be on: search.formats: [html, json])",
        )
    if search.backend == "brave" and not search.api_key:
        raise ConfigError(
            "tools.web_search.api_key: the brave backend needs an API key",
            fix="put BRAVE_API_KEY=... in the secrets file and write api_key: ${BRAVE_API_KEY}",
        )
    if search.url and not _base_url(search.url):
        raise refuse(
            "tools.web_search.url", "an http:// or https:// base URL, e.g. http://192.168.1.30:8888", search.url
        )


_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
# Names /api/devices/NAME cannot mean a device by: the scan of a bus, the trial of a new device, what is offered.
RESERVED_DEVICE_NAMES = frozenset({"scan", "try", "offered"})
WHEN = re.compile(r"\s*([a-z][a-z0-9_]*)\.([a-z_]+)\s*(<=|>=|==|!=|<|>)\s*(-?\d+(?:\.\d+)?)\s*")


def _check_devices(config: Config, refuse: Callable[[str, str, Any], ConfigError]) -> None:
    """Each device has what its driver needs, in range; no two devices share a pin or an address."""
    pins: dict[int, str] = {}
    addresses: dict[tuple[int, int], str] = {}
    spi: dict[tuple[int, int, int], str] = {}
    for i, part in enumerate(config.hardware.simulated_parts):
        try:
            simulated_part(part)
        except ValueError as exc:
            raise refuse(f"hardware.simulated_parts[{i}]", str(exc), part) from None
    for name, device in config.devices.items():
        where = f"devices.{name}"
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{where}: device names are lower-case letters, digits and _ (at most 40)")
        if name in RESERVED_DEVICE_NAMES:
            raise ConfigError(
                f"{where}: {name} is taken by the web API (/api/devices/{name}), so the device could not be reached",
                fix="give the device another name",
            )
        spec = DRIVERS[device.driver]  # what the driver needs and can do: the driver table
        for need in spec.needs:
            if getattr(device, need) in (None, ""):
                article = "an" if need[0] in "aeiou" else "a"
                raise ConfigError(f"{where}.{need}: a {device.driver} device needs {article} {need}")
        if not spec.on_the_pi:
            continue  # it lives in a service: checked with its section (check_homeassistant, check_mqtt_devices) below
        if device.pin is not None:
            if not 0 <= device.pin <= 27:
                raise refuse(f"{where}.pin", "a GPIO number from 0 to 27 (BCM numbering)", device.pin)
            if device.pin in pins:
                raise ConfigError(f"{where}.pin: GPIO {device.pin} is already used by {pins[device.pin]}")
            pins[device.pin] = name
        if device.address is not None:
            if not 0x03 <= device.address <= 0x77:
                raise refuse(f"{where}.address", "a 7-bit I2C address from 0x03 to 0x77", hex(device.address))
            key = (device.bus or 0, device.address)
            if key in addresses:
                raise ConfigError(
                    f"{where}.address: I2C bus {key[0]} address {key[1]:#04x} is already used by {addresses[key]}"
                )
            addresses[key] = name
        if device.channel is not None:
            if not 0 <= device.channel <= 7:
                raise refuse(f"{where}.channel", "an ADC channel from 0 to 7", device.channel)
            slot = (device.bus or 0, device.device or 0, device.channel)
            if slot in spi:
                raise ConfigError(f"{where}.channel: SPI {slot[0]}.{slot[1]} channel {slot[2]} is used by {spi[slot]}")
            spi[slot] = name
        if device.device is not None and device.device not in (0, 1):
            raise refuse(f"{where}.device", "an SPI chip select, 0 or 1", device.device)
        if "set" in device.allow and not spec.sets:
            raise ConfigError(f"{where}.allow: a {device.driver} cannot be set, only read")
    check_homeassistant(config.homeassistant, config.devices)
    check_mqtt_devices(config.mqtt, config.devices)
    for name, device in config.devices.items():
        spec = DRIVERS[device.driver]
        if not spec.on_the_pi and "set" in device.allow and not spec.for_device(device).sets:
            what = device.entity or f"an mqtt {device.kind}"
            raise ConfigError(f"devices.{name}.allow: {what} cannot be set, only read")
        if not 1 <= device.writes_per_minute <= 600:
            raise refuse(f"devices.{name}.writes_per_minute", "a whole number from 1 to 600", device.writes_per_minute)
    for i, rule in enumerate(config.events):
        match = WHEN.fullmatch(rule.when)
        if not match:
            raise ConfigError(
                f'events[{i}].when: expected DEVICE.QUANTITY OP NUMBER, e.g. "living_room.temperature > 28"'
            )
        if match.group(1) not in config.devices:
            raise ConfigError(f"events[{i}].when: no device named {match.group(1)!r}")
        if rule.every_s < 1 or rule.cooldown_s < 0:
            raise ConfigError(f"events[{i}]: every_s must be at least 1 and cooldown_s 0 or more")
    _check_schedule(config)
    if config.telegram.webhook_url and not config.telegram.webhook_url.startswith("https://"):
        raise ConfigError("telegram.webhook_url: Telegram only posts to https:// URLs")
    if config.telegram.webhook_url and not re.fullmatch(r"[A-Za-z0-9_-]{16,256}", config.telegram.webhook_secret):
        raise ConfigError(
            "telegram.webhook_secret: needed with a webhook: 16 to 256 of A-Z, a-z, 0-9, _ and -",
            fix="put TELEGRAM_WEBHOOK_SECRET=... (letters, digits, _ or -) in the secrets file and refer to it",
        )
    routing = config.routing
    if routing.mode != "local_only" and routing.cloud_provider not in config.providers:
        providers = ", ".join(config.providers) or "none is configured"  # in the config's order
        raise ConfigError(
            f"routing.cloud_provider: {routing.cloud_provider!r} is not under providers: ({providers})",
            fix="name a provider from providers:, or set routing.mode: local_only",
        )
    if not 0.0 <= routing.min_confidence <= 1.0:
        raise ConfigError(f"routing.min_confidence: expected a probability from 0 to 1, got {routing.min_confidence}")
    for name, provider in config.providers.items():
        if not provider.api_base.startswith(("https://", "http://")):
            raise ConfigError(f"providers.{name}.api_base: expected an http(s) URL")
    if not 0.3 <= config.memory.compact_at <= 0.95:
        raise ConfigError(f"memory.compact_at: expected a share from 0.3 to 0.95, got {config.memory.compact_at}")
    if config.telegram.enabled and not config.telegram.token:
        raise ConfigError(
            "telegram.token: the bot needs its token",
            fix="put TELEGRAM_BOT_TOKEN=... in the secrets file and telegram.token: ${TELEGRAM_BOT_TOKEN} here",
        )
    if config.hardware.approval_timeout_s <= 0:
        raise ConfigError("hardware.approval_timeout_s: must be greater than 0")
    if config.tasks.max_steps > config.tasks.max_steps_limit:
        raise ConfigError(
            f"tasks.max_steps: {config.tasks.max_steps} is over tasks.max_steps_limit"
            f" ({config.tasks.max_steps_limit}), the most any task may take",
            fix="lower tasks.max_steps or raise tasks.max_steps_limit",
        )


def _check_schedule(config: Config) -> None:
    """Each job valid with an id of its own, a place for sun schedules, the time zone known, the heartbeat's
    period in range."""
    check_config_jobs(config.scheduler.jobs, config.devices, {})
    if not config.weather.located:
        for i, job in enumerate(config.scheduler.jobs):
            if job.schedule.strip().lower().startswith(("sunset", "sunrise")):
                raise ConfigError(
                    f"scheduler.jobs[{i}]: the schedule {job.schedule!r} needs to know where the Pi is", fix=PLACE_FIX
                )
    if config.scheduler.timezone:
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(config.scheduler.timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"scheduler.timezone: unknown time zone {config.scheduler.timezone!r}") from None
    if not 0 <= config.scheduler.heartbeat_minutes <= 1440:
        raise ConfigError("scheduler.heartbeat_minutes: expected 0 (off) to 1440")


# --- cron jobs: the config's scheduler.jobs and workspace/cron.yaml, checked by the same code ----
# An error names the job (``where``: "scheduler.jobs[0]", ".../cron.yaml, entry 1 (water)") or one of
# its keys (``keys`` + the key: "scheduler.jobs[0].id", ".../cron.yaml, entry 1 (water): id"), so from
# the key on, the same mistake reads the same in either file.


def check_job(job: CronJob, where: str, keys: str, devices: Collection[str] | None = None) -> None:
    """A job's id, what it does and its schedule are valid (a ConfigError naming the job or the key)."""
    if not _NAME.fullmatch(job.id):  # the one rule for names: device names follow it too
        raise ConfigError(f"{keys}id: lower-case letters, digits and _ (at most 40)")
    if len([k for k in ("prompt", "device", "task", "message") if getattr(job, k)]) != 1:
        raise ConfigError(f"{where}: a job has exactly one of prompt, device (with value), task or message")
    if job.device and not job.value:
        raise ConfigError(f"{where}: device {job.device} needs a value: on, off or a brightness like 40%")
    if job.device and devices is not None and job.device not in devices:
        raise ConfigError(f"{where}: no device named {job.device!r}", fix="known devices: " + ", ".join(devices))
    from appliance.schedule.parse import parse_schedule  # here: only a config with jobs pays its ~7 ms of imports

    try:
        parse_schedule(job.schedule)
    except UsageError as exc:
        raise ConfigError(f"{where}: {exc.message}", fix=exc.fix) from None


def claim_job_id(job_id: str, keys: str, used_in: str, ids: dict[str, str]) -> None:
    """Refuse an id ``ids`` (id -> where it is used) already holds; else record it as used in ``used_in``."""
    if job_id in ids:
        raise ConfigError(f"{keys}id: {job_id!r} is already used in {ids[job_id]}", fix="rename one of them")
    ids[job_id] = used_in


def check_config_jobs(jobs: Sequence[CronJob], devices: Collection[str] | None, ids: dict[str, str]) -> None:
    """The config's scheduler.jobs, each checked and its id claimed in ``ids``."""
    for i, job in enumerate(jobs):
        where = f"scheduler.jobs[{i}]"
        check_job(job, where, f"{where}.", devices)
        claim_job_id(job.id, f"{where}.", f"the config ({where})", ids)
