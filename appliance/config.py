"""Typed configuration: load YAML, resolve ``${ENV}`` references and the secrets file, validate.

The tree is plain dataclasses; each field's ``doc`` metadata is its one-line description. Validation
walks the tree: unknown keys and wrong types are refused with the key's path
(``agent.max_rounds: expected an integer, got "five"``). A value that came from a secret or an
``${ENV}`` reference is never echoed in an error.

Which file: ``--config``, else ``$PICOAGENT_CONFIG``, else ``/etc/picoagent/picoagent.yaml`` when it
exists, else ``config/picoagent.yaml`` of the checkout.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from appliance.errors import ConfigError

SYSTEM_CONFIG = Path("/etc/picoagent/picoagent.yaml")
CHECKOUT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "picoagent.yaml"
SYSTEM_DATA_DIR = Path("/var/lib/picoagent")

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def doc(text: str, default: Any = dataclasses.MISSING, *, secret: bool = False, **kw: Any) -> Any:
    """A dataclass field with its one-line description (and whether its value is secret)."""
    meta = {"doc": text, "secret": secret}
    if default is dataclasses.MISSING:
        return field(metadata=meta, **kw)
    return field(default=default, metadata=meta, **kw)


@dataclass
class AgentConfig:
    """How one turn runs."""

    name: str = doc("the assistant's name, used in the SOUL.md written on first run", "Pico")
    max_rounds: int = doc("most model calls in one turn (each tool round is one)", 4)
    tool_timeout_s: float = doc("seconds a tool may run before it is stopped and reported as failed", 30.0)
    history_messages: int = doc("recent messages of the conversation put into the prompt", 12)
    max_reply_tokens: int = doc("most tokens in one reply", 256)
    temperature: float = doc("sampling temperature; 0 is greedy and repeatable", 0.2)
    repeat_penalty: float = doc("above 1 discourages repeating recent tokens (small models loop)", 1.1)


@dataclass
class LlmConfig:
    """The local model and the llama.cpp runtime."""

    model: str = doc(
        "catalog name or path to a .gguf file; empty: the model chosen with `picoagent models use`, "
        "else the packaged default",
        "",
    )
    context_tokens: int = doc("context window in tokens (prompt + reply)", 2048)
    threads: int | Literal["auto"] = doc("decode threads; auto: see README (never oversubscribed)", "auto")
    batch_threads: int | Literal["auto"] = doc("prompt-processing threads; auto: physical cores", "auto")
    batch_size: int = doc("tokens evaluated per batch while reading the prompt", 256)
    stop: list[str] = doc("extra stop sequences besides the model's own end of turn", default_factory=list)
    timeout_s: float = doc("a generation running longer than this is cancelled", 120.0)
    memory_margin_mb: int = doc("memory that must stay free after the model loads", 128)
    seed: int = doc("sampling seed (replies repeat for the same seed and prompt)", 42)
    preload: bool = doc("load the model when the daemon starts (else on the first message)", True)


@dataclass
class WebConfig:
    """The LAN face: status page, web chat, JSON API, OpenAI-compatible endpoint."""

    host: str = doc("address to listen on; 0.0.0.0 is every interface, 127.0.0.1 this machine only", "0.0.0.0")
    port: int = doc("TCP port", 8080)
    secure_cookies: bool = doc("mark session cookies Secure (only when served over HTTPS)", False)
    session_days: float = doc("how long a web login lasts", 7.0)
    login_attempts_per_minute: int = doc("failed logins allowed per minute from one address", 5)


DRIVERS = ("relay", "led", "button", "motion", "bme280", "bh1750", "mcp3008")


@dataclass
class DeviceConfig:
    """One named device wired to the Pi."""

    driver: Literal["relay", "led", "button", "motion", "bme280", "bh1750", "mcp3008"] = doc(
        "what the part is: relay, led, button, motion, bme280, bh1750 or mcp3008"
    )
    pin: int | None = doc("GPIO pin (BCM number, 0-27) for relay, led, button, motion", None)
    bus: int | None = doc("I2C bus number (bme280, bh1750) or SPI bus (mcp3008)", None)
    address: int | None = doc("I2C address, 0x03-0x77 (bme280: 0x76 or 0x77; bh1750: 0x23 or 0x5C)", None)
    device: int | None = doc("SPI chip select (mcp3008): 0 or 1", None)
    channel: int | None = doc("ADC channel (mcp3008): 0-7", None)
    room: str = doc("the room it is in; people and the intent fast path use it", "")
    aliases: list[str] = doc("other names people use for it", default_factory=list)
    allow: list[Literal["read", "set"]] = doc(
        "operations allowed; empty: everything the driver can do", default_factory=list
    )
    approval: Literal["required", "none"] = doc("required: every write waits for a person to approve it", "none")
    writes_per_minute: int = doc("most writes per minute (protects relays from flapping)", 30)
    active_high: bool = doc("false when the relay or LED is on at a low pin", True)


@dataclass
class I2CAllow:
    """A raw I2C range the model may touch when hardware.raw_access is on."""

    bus: int = doc("I2C bus number")
    address: int = doc("7-bit address")
    registers: str = doc('register range, e.g. "0x00-0xFF" or "0xD0"', "0x00-0xFF")
    write: bool = doc("whether writes are allowed (reads always are, within the range)", False)


@dataclass
class SPIAllow:
    """A raw SPI device the model may talk to when hardware.raw_access is on."""

    bus: int = doc("SPI bus")
    device: int = doc("chip select")
    max_bytes: int = doc("longest transfer", 32)


@dataclass
class RawAccessConfig:
    """Raw bus tools for the model (i2c_scan, i2c_read, i2c_write, spi_transfer): off unless allowlisted."""

    enabled: bool = doc("offer the raw bus tools at all", False)
    i2c: list[I2CAllow] = doc("I2C bus/address/register ranges allowed", default_factory=list)
    spi: list[SPIAllow] = doc("SPI devices allowed", default_factory=list)


@dataclass
class HardwareConfig:
    """The buses and how devices are reached."""

    backend: Literal["auto", "real", "simulated"] = doc(
        "real GPIO/I2C/SPI, a simulation with real register maps, or auto (real on a Pi)", "auto"
    )
    approval_timeout_s: float = doc("how long a write waiting for approval stays valid", 300.0)
    raw_access: RawAccessConfig = doc("raw bus tools for the model", default_factory=RawAccessConfig)


@dataclass
class EventRule:
    """A condition on a sensor that becomes an event (a notification) when it turns true."""

    when: str = doc('the condition, e.g. "living_room.temperature > 28"')
    message: str = doc("what to say; empty: the condition and the value", "")
    every_s: float = doc("how often the sensor is read", 60.0)
    cooldown_s: float = doc("least time between two events of this rule", 900.0)


@dataclass
class TelegramConfig:
    """The Telegram channel (python-telegram-bot, long polling)."""

    enabled: bool = doc("run the Telegram bot inside the daemon", False)
    token: str = doc("the bot's token from @BotFather; keep it in the secrets file", "", secret=True)
    allow_from: list[int] = doc(
        "Telegram user ids allowed to talk to the bot (pairing adds more)", default_factory=list
    )
    owner_chat: int | None = doc("chat id for proactive messages; empty: the first allowed user", None)
    api_base_url: str = doc("Bot API base URL (a self-hosted Bot API server works)", "https://api.telegram.org/bot")
    edit_interval_s: float = doc("least time between two edits of a streaming reply (Telegram rate-limits)", 1.2)
    poll_timeout_s: int = doc("long-polling timeout for getUpdates", 30)
    webhook_url: str = doc("public HTTPS URL Telegram posts updates to; empty: long polling", "")
    webhook_secret: str = doc(
        "secret Telegram sends with each webhook post; keep it in the secrets file", "", secret=True
    )


@dataclass
class MemoryConfig:
    """Long-term memory: facts and summaries, recalled by meaning and by keyword."""

    embedding_model: str = doc(
        "GGUF embedding model (catalog name or path); empty: the chat model's own embeddings", ""
    )
    recall_k: int = doc("most memories recalled into a turn's prompt", 5)
    recall_tokens: int = doc("token budget for recalled memories in a turn's prompt", 300)
    decay_half_life_days: float = doc("older memories rank lower, halving every N days; 0: no decay", 0.0)
    extract_after_messages: int = doc("extract facts from a conversation every N new messages; 0: off", 8)
    quiet_minutes: float = doc("also extract when a conversation has been quiet this long", 10.0)
    compact_at: float = doc("summarise older turns when history passes this share of the context", 0.75)
    keep_recent: int = doc("messages kept verbatim when older ones are summarised", 6)


@dataclass
class CronJob:
    """A scheduled job: a prompt for the agent, a device action, or a task to run."""

    id: str = doc("a short name, used by `picoagent cron run ID`")
    schedule: str = doc('"every 30m", "daily 09:00", "hourly :15", "startup", or a cron expression "0 7 * * 1-5"')
    prompt: str = doc("a message for the agent; its reply is delivered", "")
    device: str = doc("a device to set (with value)", "")
    value: str | bool = doc("the value to set the device to: on, off, 40%", "")
    task: str = doc("a persistent task's goal to start", "")
    deliver: bool = doc("send the result to the owner (Telegram)", True)
    missed: Literal["skip", "run_once"] = doc(
        "a run missed while the Pi was off: skip it, or run once at start", "skip"
    )


@dataclass
class SchedulerConfig:
    """Cron jobs and the heartbeat."""

    timezone: str = doc('IANA time zone for schedules, e.g. "Europe/Brussels"; empty: the system\'s', "")
    jobs: list[CronJob] = doc("scheduled jobs (more in workspace/cron.yaml)", default_factory=list)
    heartbeat_minutes: int = doc("check workspace/HEARTBEAT.md every N minutes with the local model; 0: off", 30)


@dataclass
class ProviderConfig:
    """A cloud model the appliance may escalate to."""

    type: Literal["openai", "anthropic"] = doc("openai: any OpenAI-compatible API; anthropic: the Messages API")
    api_base: str = doc("the API's base URL, e.g. https://api.openai.com/v1 or https://api.anthropic.com")
    model: str = doc("the model name the API expects")
    api_key: str = doc("the API key: a ${NAME} reference into the secrets file", "", secret=True)
    price_in_per_mtok: float = doc("price in USD per million prompt tokens (for the budget)", 0.0)
    price_out_per_mtok: float = doc("price in USD per million completion tokens", 0.0)
    timeout_s: float = doc("give up on a request after this long", 60.0)


@dataclass
class RoutingConfig:
    """When a message may leave the Pi."""

    mode: Literal["local_only", "edge_first", "cloud_first"] = doc(
        "local_only: never the cloud; edge_first: the cloud when the local answer is not good enough; "
        "cloud_first: the cloud whenever allowed",
        "local_only",
    )
    cloud_provider: str = doc("the name of the provider (under providers:) to escalate to", "")
    min_confidence: float = doc(
        "escalate when the local answer's mean token probability is below this (tests/eval/REPORT.md)", 0.65
    )
    local_only_channels: list[str] = doc(
        "channels whose messages never leave the Pi (terminal, web, ...)", default_factory=list
    )
    cloud_tools: list[str] = doc(
        "tools the local model cannot drive reliably: when it calls one, the cloud answers instead",
        default_factory=list,
    )
    daily_budget_usd: float = doc("most spent on the cloud per day; 0: no cloud", 1.0)
    monthly_budget_usd: float = doc("most spent on the cloud per month; 0: no cloud", 10.0)


@dataclass
class ShellConfig:
    """The shell tool: commands run in a bubblewrap sandbox, never outside one."""

    enabled: bool = doc("offer the shell tool (refused with a reason when bubblewrap cannot run here)", True)
    sandbox_socket: str = doc(
        "Unix socket of the picoagent-sandbox service; auto: its standard socket when it exists, else run "
        "bubblewrap in this process; empty: always in this process",
        "auto",
    )
    memory_mb: int = doc("address space one sandboxed process may use, in MiB", 512)
    cpu_s: int = doc("CPU seconds one sandboxed process may use", 20)
    max_file_mb: int = doc("largest file a command may write, in MiB", 64)
    max_processes: int = doc("most processes a command may run at once", 64)
    max_output_kb: int = doc("output read from a command before it is stopped, in KiB", 256)


@dataclass
class WebFetchConfig:
    """The web_fetch tool: pages as text, never the Pi's own network."""

    enabled: bool = doc("offer web_fetch", True)
    max_bytes: int = doc("largest response read, in bytes", 2_000_000)
    timeout_s: float = doc("give up on a fetch after this long (redirects included)", 15.0)
    max_redirects: int = doc("most redirects followed (each one checked again)", 5)
    allow_private: list[str] = doc(
        "private addresses or networks web_fetch may still reach, e.g. 192.168.1.20 or 10.0.0.0/24",
        default_factory=list,
    )


@dataclass
class McpServerConfig:
    """An MCP server the assistant uses, started over stdio."""

    command: list[str] = doc("the program and its arguments, e.g. [npx, -y, @modelcontextprotocol/server-time]")
    env: dict[str, str] = doc(
        "extra environment for it (${NAME} references into the secrets file)", default_factory=dict, secret=True
    )
    enabled: bool = doc("start it", True)
    timeout_s: float = doc("give up on a call or on starting it after this long", 30.0)


@dataclass
class ToolsConfig:
    """What the model's tools may do, and how much of it in one turn."""

    per_turn: int = doc("most tool calls in one turn; further calls are refused with a note", 8)
    max_output_chars: int = doc("a tool's output is cut here (with a note saying so)", 4000)
    cache_s: float = doc("a read-only tool's result is reused for this long with the same arguments; 0: off", 30.0)
    shell: ShellConfig = doc("the sandboxed shell", default_factory=ShellConfig)
    web_fetch: WebFetchConfig = doc("fetching web pages", default_factory=WebFetchConfig)
    mcp: dict[str, McpServerConfig] = doc("MCP servers whose tools the model may use, by name", default_factory=dict)
    plugins: list[str] = doc("Python modules loaded as plugins (each has register(hooks))", default_factory=list)


@dataclass
class Config:
    """The whole configuration tree."""

    data_dir: str = doc(
        "where state lives (database, workspace, models); relative to this file's folder",
        str(SYSTEM_DATA_DIR),
    )
    secrets_file: str = doc("KEY=value file for ${NAME} references; relative to this file's folder", "secrets.env")
    log_level: Literal["debug", "info", "warning", "error"] = doc("log verbosity", "warning")
    agent: AgentConfig = doc("how one turn runs", default_factory=AgentConfig)
    llm: LlmConfig = doc("the local model", default_factory=LlmConfig)
    web: WebConfig = doc("the LAN face", default_factory=WebConfig)
    hardware: HardwareConfig = doc("buses and backends", default_factory=HardwareConfig)
    devices: dict[str, DeviceConfig] = doc("named devices wired to the Pi", default_factory=dict)
    events: list[EventRule] = doc("sensor conditions that become events", default_factory=list)
    telegram: TelegramConfig = doc("the Telegram channel", default_factory=TelegramConfig)
    memory: MemoryConfig = doc("long-term memory", default_factory=MemoryConfig)
    providers: dict[str, ProviderConfig] = doc("cloud models, by name", default_factory=dict)
    routing: RoutingConfig = doc("when a message may leave the Pi", default_factory=RoutingConfig)
    scheduler: SchedulerConfig = doc("cron jobs and the heartbeat", default_factory=SchedulerConfig)
    tools: ToolsConfig = doc("the model's tools: sandbox, web, MCP servers, plugins", default_factory=ToolsConfig)

    # Not config keys: where this config came from (set by load_config).
    source: Path | None = field(default=None, metadata={"internal": True})
    # The secrets file's values, redacted from every tool output.
    secret_values: frozenset[str] = field(default=frozenset(), metadata={"internal": True})

    @property
    def base_dir(self) -> Path:
        """The folder relative paths in this config are resolved against."""
        return self.source.parent if self.source else Path.cwd()

    def resolve_path(self, value: str) -> Path:
        """A path from this config, made absolute against the config file's folder."""
        path = Path(os.path.expanduser(value))
        return path if path.is_absolute() else (self.base_dir / path).resolve()


# --- locating and reading -------------------------------------------------------------------


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Which config file a command uses (see the module docstring)."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("PICOAGENT_CONFIG")
    if env:
        return Path(env)
    if SYSTEM_CONFIG.exists():
        return SYSTEM_CONFIG
    return CHECKOUT_CONFIG


def read_secrets(path: Path) -> dict[str, str]:
    """Parse a ``KEY=value`` secrets file (comments, blank lines, ``export`` and quotes allowed)."""
    secrets: dict[str, str] = {}
    if not path.exists():
        return secrets
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            # Never echo the line: it may hold a secret.
            raise ConfigError(
                f"{path}:{number}: expected KEY=value",
                fix="each line of the secrets file is NAME=value (names: letters, digits, _)",
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        secrets[key] = value
    return secrets


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    environ: typing.Mapping[str, str] | None = None,
) -> Config:
    """Load, resolve and validate the config; ``data_dir`` overrides the file's ``data_dir``."""
    import yaml  # lazy: keeps `picoagent --help` fast

    source = config_path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"config file {source} does not exist",
            fix="pass --config PATH, set PICOAGENT_CONFIG, or copy config/picoagent.yaml there",
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {source}: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{source}{where}: {problem}", fix="check the indentation and quoting") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of keys at the top level")

    env = dict(os.environ if environ is None else environ)
    secrets_value = raw.get("secrets_file", Config.secrets_file)
    secrets_path = Path(os.path.expanduser(str(secrets_value)))
    if not secrets_path.is_absolute():
        secrets_path = source.parent / secrets_path
    secrets = read_secrets(secrets_path)
    lookup = {**secrets, **env}

    referenced: set[str] = set()
    config = _build(Config, raw, "", lookup, referenced)
    config.source = source.resolve()
    config.secret_values = frozenset(secrets.values())
    if data_dir is not None:
        config.data_dir = str(Path(data_dir).resolve())
    _check(config, referenced)
    return config


# --- validation ------------------------------------------------------------------------------


class _Secret(str):
    """A string that came from a reference: error messages must not show it."""


def _resolve_refs(value: str, path: str, lookup: typing.Mapping[str, str]) -> str:
    names = _REF.findall(value)
    if not names:
        return value
    for name in names:
        if name not in lookup:
            raise ConfigError(
                f"{path}: ${{{name}}} is not set",
                fix=f"set {name} in the environment or in the secrets file",
            )
    return _Secret(_REF.sub(lambda m: lookup[m.group(1)], value))


def _describe(value: Any) -> str:
    if isinstance(value, _Secret):
        return "a value from a secret reference"
    if isinstance(value, str):
        return f'"{value}"' if len(value) <= 40 else f'"{value[:37]}..."'
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _expected(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(f'"{a}"' if isinstance(a, str) else repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_expected(a) for a in get_args(tp) if a is not type(None))
    if origin is list:
        return "a list"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return _TYPE_NAMES.get(tp, getattr(tp, "__name__", str(tp)))


def _convert(
    tp: Any, value: Any, path: str, lookup: typing.Mapping[str, str], secret: bool, referenced: set[str]
) -> Any:
    if isinstance(value, str):
        value = _resolve_refs(value, path, lookup)
        if secret and not isinstance(value, _Secret):
            value = _Secret(value)
        if isinstance(value, _Secret):
            referenced.add(path)
    origin = get_origin(tp)
    wrong = ConfigError(f"{path}: expected {_expected(tp)}, got {_describe(value)}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise wrong
        return _build(typing.cast(type, tp), value, path + ".", lookup, referenced)
    if origin is Literal:
        if value in get_args(tp):
            return str(value) if isinstance(value, _Secret) else value
        raise wrong
    if origin in (Union, types.UnionType):
        for option in get_args(tp):
            if option is type(None) and value is None:
                return None
            try:
                return _convert(option, value, path, lookup, secret, referenced)
            except ConfigError:
                continue
        raise wrong
    if origin is list:
        if not isinstance(value, list):
            raise wrong
        (item,) = get_args(tp)
        return [_convert(item, v, f"{path}[{i}]", lookup, secret, referenced) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise wrong
        _, item = get_args(tp)
        return {str(k): _convert(item, v, f"{path}.{k}", lookup, secret, referenced) for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise wrong
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, _Secret) and re.fullmatch(r"-?\d+", value):
            return int(value)
        raise wrong
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, _Secret):
            try:
                return float(value)
            except ValueError:
                raise wrong from None
        raise wrong
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)  # `model: 1234` reads as a name; no surprise
        raise wrong
    raise TypeError(f"config type {tp!r} is not supported")  # a programming error, not a user one


def _build(cls: type, raw: dict[str, Any], prefix: str, lookup: typing.Mapping[str, str], referenced: set[str]) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    for key in raw:
        if key not in fields:
            close = [name for name in fields if _similar(str(key), name)]
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(
                f"{prefix}{key}: unknown key{hint}",
                fix="known keys here: " + ", ".join(fields),
            )
    missing = [
        name
        for name, f in fields.items()
        if name not in raw and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{prefix}{missing[0]}: required, but missing")
    values = {}
    for name, f in fields.items():
        if name in raw:
            secret = bool(f.metadata.get("secret"))
            values[name] = _convert(hints[name], raw[name], prefix + name, lookup, secret, referenced)
    return cls(**values)


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a.lower(), b.lower()).ratio() >= 0.75


def _check(config: Config, referenced: set[str]) -> None:
    """Range checks that types alone cannot express (values from references are never shown)."""

    def refuse(path: str, expected: str, value: Any) -> ConfigError:
        shown = "a value from a secret reference" if path in referenced else _describe(value)
        return ConfigError(f"{path}: expected {expected}, got {shown}")

    rules: list[tuple[str, float, float, str]] = [
        # path, lowest, highest, what people are told
        ("agent.max_rounds", 1, 100, "a whole number from 1 to 100"),
        ("agent.history_messages", 0, 10_000, "a whole number from 0 to 10000"),
        ("agent.max_reply_tokens", 1, 1_000_000, "a positive whole number"),
        ("agent.tool_timeout_s", 0.001, 86_400, "a positive number of seconds"),
        ("agent.temperature", 0.0, 2.0, "a number from 0 to 2"),
        ("agent.repeat_penalty", 1.0, 2.0, "a number from 1 to 2"),
        ("llm.context_tokens", 256, 1_048_576, "at least 256 tokens"),
        ("llm.batch_size", 1, 65_536, "a positive whole number"),
        ("llm.timeout_s", 0.001, 86_400, "a positive number of seconds"),
        ("llm.memory_margin_mb", 0, 1_048_576, "0 or more megabytes"),
        ("web.port", 1, 65_535, "a TCP port from 1 to 65535"),
        ("web.session_days", 0.001, 3650, "a positive number of days"),
        ("web.login_attempts_per_minute", 1, 10_000, "a positive whole number"),
        ("tools.per_turn", 1, 1000, "a whole number from 1 to 1000"),
        ("tools.max_output_chars", 100, 10_000_000, "at least 100 characters"),
        ("tools.cache_s", 0, 86_400, "0 or more seconds"),
        ("tools.shell.memory_mb", 16, 1_048_576, "at least 16 MiB"),
        ("tools.shell.cpu_s", 1, 86_400, "a positive number of seconds"),
        ("tools.shell.max_file_mb", 1, 1_048_576, "at least 1 MiB"),
        ("tools.shell.max_processes", 1, 100_000, "a positive whole number"),
        ("tools.shell.max_output_kb", 1, 1_048_576, "at least 1 KiB"),
        ("tools.web_fetch.max_bytes", 1024, 1_073_741_824, "at least 1024 bytes"),
        ("tools.web_fetch.timeout_s", 0.001, 3600, "a positive number of seconds"),
        ("tools.web_fetch.max_redirects", 0, 50, "a whole number from 0 to 50"),
    ]
    for path, low, high, expected in rules:
        value: Any = config
        for key in path.split("."):
            value = getattr(value, key)
        if not low <= value <= high:
            raise refuse(path, expected, value)
    for i, entry in enumerate(config.tools.web_fetch.allow_private):
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            where = f"tools.web_fetch.allow_private[{i}]"
            raise refuse(where, "an IP address or network, e.g. 192.168.1.20 or 10.0.0.0/24", entry) from None
    _check_devices(config, refuse)
    for path in ("llm.threads", "llm.batch_threads"):
        threads = getattr(config.llm, path.split(".")[1])
        if threads != "auto" and not 1 <= int(threads) <= 256:
            raise refuse(path, "auto or a number of threads from 1 to 256", threads)


# What each driver needs, and what it can do.
_NEEDS = {
    "relay": ("pin",),
    "led": ("pin",),
    "button": ("pin",),
    "motion": ("pin",),
    "bme280": ("bus", "address"),
    "bh1750": ("bus", "address"),
    "mcp3008": ("bus", "device", "channel"),
}
CAN_SET = {"relay", "led"}
_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
WHEN = re.compile(r"\s*([a-z][a-z0-9_]*)\.([a-z_]+)\s*(<=|>=|==|!=|<|>)\s*(-?\d+(?:\.\d+)?)\s*")


def _check_devices(config: Config, refuse: Callable[[str, str, Any], ConfigError]) -> None:
    """Each device has what its driver needs, in range; no two devices share a pin or an address."""
    pins: dict[int, str] = {}
    addresses: dict[tuple[int, int], str] = {}
    spi: dict[tuple[int, int, int], str] = {}
    for name, device in config.devices.items():
        where = f"devices.{name}"
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{where}: device names are lower-case letters, digits and _ (at most 40)")
        for need in _NEEDS[device.driver]:
            if getattr(device, need) is None:
                raise ConfigError(f"{where}.{need}: a {device.driver} needs a {need}")
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
        if "set" in device.allow and device.driver not in CAN_SET:
            raise ConfigError(f"{where}.allow: a {device.driver} cannot be set, only read")
        if not 1 <= device.writes_per_minute <= 600:
            raise refuse(f"{where}.writes_per_minute", "a whole number from 1 to 600", device.writes_per_minute)
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
        known = ", ".join(config.providers) or "none is configured"
        raise ConfigError(
            f"routing.cloud_provider: {routing.cloud_provider!r} is not under providers: ({known})",
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


def _check_schedule(config: Config) -> None:
    """Job ids unique, each job does one thing, time zone known."""
    seen: set[str] = set()
    for i, job in enumerate(config.scheduler.jobs):
        where = f"scheduler.jobs[{i}]"
        if not _NAME.fullmatch(job.id):
            raise ConfigError(f"{where}.id: lower-case letters, digits and _ (at most 40)")
        if job.id in seen:
            raise ConfigError(f"{where}.id: {job.id!r} is used twice")
        seen.add(job.id)
        from appliance.scheduler import check_job  # lazy: the scheduler imports this module

        check_job(job, where, config.devices)
    if config.scheduler.timezone:
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(config.scheduler.timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"scheduler.timezone: unknown time zone {config.scheduler.timezone!r}") from None
    if not 0 <= config.scheduler.heartbeat_minutes <= 1440:
        raise ConfigError("scheduler.heartbeat_minutes: expected 0 (off) to 1440")


def describe_keys(cls: type = Config, prefix: str = "") -> list[tuple[str, str]]:
    """Every config key with its description (tests check the shipped YAML documents them all)."""
    rows: list[tuple[str, str]] = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        rows.append((prefix + f.name, f.metadata.get("doc", "")))
        if dataclasses.is_dataclass(hints[f.name]):
            rows.extend(describe_keys(hints[f.name], prefix + f.name + "."))
    return rows
