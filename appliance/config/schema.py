"""The configuration tree: one dataclass per section, each field with its one-line description.

Each field's ``doc`` metadata is its description (``describe_keys`` lists them all; the tests check
that the shipped YAML documents every one), whether its value is secret, and for a number its range
with the words people are told when it is outside (``low``, ``high``, ``expected``: the checks walk
every field for them, so a new key's range is written once, here). Reading a file into this tree is
:mod:`appliance.config.load`; the checks types alone cannot express, :mod:`appliance.config.checks`.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from appliance.config.channels import (
    DiscordConfig,
    EmailConfig,
    NotifyConfig,
    SlackConfig,
    TelegramConfig,
    WebhookConfig,
    WhatsAppConfig,
)
from appliance.config.devices import DeviceConfig, EventRule, HardwareConfig
from appliance.config.fields import COUNT, SECONDS, THREADS, doc
from appliance.config.homeassistant import HomeAssistantConfig
from appliance.config.mqtt import MqttConfig
from appliance.config.tasks import TasksConfig
from appliance.config.weather import WeatherConfig

SYSTEM_DATA_DIR = Path("/var/lib/picoagent")


@dataclass
class ReflectionConfig:
    """What the assistant learns from its tasks: lessons in workspace/LEARNINGS.md, proposed skills."""

    enabled: bool = doc("after a task ends, one short model turn writes what worked or failed", True)
    max_lessons: int = doc(
        "LEARNINGS.md keeps the newest this many lessons", 50, low=1, high=10_000, expected="a whole number from 1"
    )
    max_bytes: int = doc(
        "LEARNINGS.md stays under this size; the oldest lessons go first",
        8192,
        low=256,
        high=1_048_576,
        expected="at least 256 bytes",
    )
    duplicate_distance: float = doc(
        "a lesson this close by meaning (cosine distance) to a known one is a duplicate; 0: exact text only",
        0.15,
        low=0.0,
        high=1.0,
        expected="a number from 0 to 1",
    )
    propose_after: int = doc(
        "done tasks with the same tool steps before that procedure is proposed as a skill",
        2,
        low=2,
        high=100,
        expected="a whole number from 2",
    )


@dataclass
class AgentConfig:
    """How one turn runs."""

    name: str = doc("the assistant's name, used in the SOUL.md written on first run", "Pico")
    max_rounds: int = doc(
        "most model calls in one turn (each tool round is one)",
        4,
        low=1,
        high=100,
        expected="a whole number from 1 to 100",
    )
    tool_timeout_s: float = doc(
        "seconds a tool may run before it is stopped and reported as failed",
        30.0,
        low=0.001,
        high=86_400,
        expected=SECONDS,
    )
    history_messages: int = doc(
        "recent messages of the conversation put into the prompt",
        12,
        low=0,
        high=10_000,
        expected="a whole number from 0 to 10000",
    )
    max_reply_tokens: int = doc("most tokens in one reply", 256, low=1, high=1_000_000, expected=COUNT)
    temperature: float = doc(
        "sampling temperature; 0 is greedy and repeatable", 0.2, low=0.0, high=2.0, expected="a number from 0 to 2"
    )
    repeat_penalty: float = doc(
        "above 1 discourages repeating recent tokens (small models loop)",
        1.1,
        low=1.0,
        high=2.0,
        expected="a number from 1 to 2",
    )
    devices_by_meaning: bool = doc(
        "understand device requests the rule parser misses, by meaning (needs an embedding model)", True
    )
    grounded_by_meaning: bool = doc(
        "match questions to what the appliance knows (the time, itself, ...) by meaning too, not only by words",
        True,
    )
    local_tools: int = doc(
        "tools the local model is shown per message, the closest by meaning; 0: all",
        4,
        low=0,
        high=1000,
        expected="0 (every tool) or a number of tools",
    )
    reflection: ReflectionConfig = doc("lessons from tasks and proposed skills", default_factory=ReflectionConfig)


@dataclass
class LlmConfig:
    """The local model and the llama.cpp runtime."""

    model: str = doc(
        "chat model: a catalog name or path to a .gguf file; auto: the one chosen with `picoagent models use`, else "
        "the catalog model for this board's RAM and CPU (README: the right model for the board); a catalog model "
        "not installed yet is downloaded by the daemon, which serves the packaged one meanwhile; empty: the model "
        "chosen with `picoagent models use`, else the packaged default",
        "",
    )
    context_tokens: int = doc(
        "context window in tokens (prompt + reply)", 2048, low=256, high=1_048_576, expected="at least 256 tokens"
    )
    threads: int | Literal["auto"] = doc(
        "decode threads; auto: see README (never oversubscribed)", "auto", low=1, high=256, expected=THREADS
    )
    batch_threads: int | Literal["auto"] = doc(
        "prompt-processing threads; auto: physical cores", "auto", low=1, high=256, expected=THREADS
    )
    batch_size: int = doc(
        "tokens evaluated per batch while reading the prompt", 256, low=1, high=65_536, expected=COUNT
    )
    ubatch_size: int | Literal["auto"] = doc(
        "tokens computed at once within a batch (llama.cpp's micro-batch); its compute buffer grows with it; "
        "auto: 64 (see README, Memory)",
        "auto",
        low=1,
        high=65_536,
        expected="auto or a positive whole number",
    )
    kv_type: Literal["auto", "f16", "q8_0"] = doc(
        "KV cache number type: q8_0 halves it (with flash attention), f16 is llama.cpp's default; auto: q8_0",
        "auto",
    )
    stop: list[str] = doc("extra stop sequences besides the model's own end of turn", default_factory=list)
    timeout_s: float = doc(
        "a generation running longer than this is cancelled", 120.0, low=0.001, high=86_400, expected=SECONDS
    )
    memory_margin_mb: int = doc(
        "memory that must stay free after the model loads", 128, low=0, high=1_048_576, expected="0 or more megabytes"
    )
    weight_repack: Literal["auto", "on", "off"] = doc(
        "let llama.cpp repack the weights for this CPU's fastest kernels (its extra buffer types); auto: on, "
        "except on x86 CPUs with AMX, where the repacked kernels crash (README: the model runner)",
        "auto",
    )
    seed: int = doc("sampling seed (replies repeat for the same seed and prompt)", 42)
    preload: bool = doc("load the model when the daemon starts (else on the first message)", True)
    prompt_cache_mb: int = doc(
        "RAM for prompt states kept while side jobs (fact extraction, heartbeat, tasks) use the model; 0: none",
        16,
        low=0,
        high=65_536,
        expected="0 or more megabytes",
    )
    prompt_state: bool = doc(
        "save the system prompt's state in the data dir (prompt-state/) so the first reply after a start is fast",
        True,
    )
    prompt_state_mb: int = doc(
        "disk space for saved prompt states (the least recently used are removed)",
        64,
        low=1,
        high=65_536,
        expected="1 or more megabytes",
    )


@dataclass
class WebConfig:
    """The LAN face: status page, web chat, JSON API, OpenAI-compatible endpoint."""

    host: str = doc("address to listen on; 0.0.0.0 is every interface, 127.0.0.1 this machine only", "0.0.0.0")
    port: int = doc("TCP port", 8080, low=1, high=65_535, expected="a TCP port from 1 to 65535")
    tls: Literal["off", "auto"] = doc(
        "auto: HTTPS with a certificate made for this machine's names and addresses (in the data dir, renewed "
        "before it expires), plain http:// on the same port redirected; off: plain HTTP (development, or behind "
        "a reverse proxy that does HTTPS)",
        "off",
    )
    allowed_hosts: list[str] = doc(
        "more names or addresses the web face answers to (a DNS name, a reverse proxy's name); localhost, the "
        "host name, NAME.local and this machine's addresses always work; any other Host gets 421",
        default_factory=list,
    )
    secure_cookies: bool = doc("mark session cookies Secure even over plain HTTP (a proxy in front does HTTPS)", False)
    session_days: float = doc(
        "how long a web login lasts", 7.0, low=0.001, high=3650, expected="a positive number of days"
    )
    login_attempts_per_minute: int = doc(
        "login attempts allowed per minute from one address (IPv6: from one /64 network)",
        5,
        low=1,
        high=10_000,
        expected=COUNT,
    )
    login_attempts_per_minute_total: int = doc(
        "login attempts allowed per minute from all addresses together (bounds guessing from many addresses)",
        30,
        low=1,
        high=100_000,
        expected=COUNT,
    )


@dataclass
class MemoryConfig:
    """Long-term memory: facts and summaries, recalled by meaning and by keyword."""

    embedding_model: str = doc(
        "embedding model (catalog name or .gguf path) for memory, device requests by meaning, tool choice and "
        "routing; chat: the chat model's own embeddings",
        "minilm",
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
    """A scheduled job: a prompt for the agent, a device action, a task to run, or a message for the owner."""

    id: str = doc("a short name, used by `picoagent cron run ID`")
    schedule: str = doc(
        '"every 30m", "daily 09:00", "hourly :15", "startup", "once 2026-11-24 19:00", "sunset", "sunrise-30m" '
        '(needs weather.latitude and longitude), or a cron expression "0 7 * * 1-5"'
    )
    prompt: str = doc("a message for the agent; its reply is delivered", "")
    device: str = doc("a device to set (with value)", "")
    value: str | bool = doc("the value to set the device to: on, off, 40%", "")
    task: str = doc("a persistent task's goal to start", "")
    message: str = doc('a text sent to the owner as it is, no model: "take the bins out" arrives as a reminder', "")
    deliver: bool = doc("send the result to the owner (the status page feed and notify.owner's channel)", True)
    missed: Literal["skip", "run_once"] = doc(
        "a run missed while the Pi was off: skip it, or run once at start", "skip"
    )

    def __post_init__(self) -> None:
        if isinstance(self.value, bool):
            self.value = "on" if self.value else "off"  # YAML reads a bare on / off as true / false


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
        "escalate when the local answer's mean token probability is below this (tests/eval/REPORT.md)", 0.3
    )
    difficulty: Literal["auto", "off"] = doc(
        "auto: in edge_first, a message whose meaning says it needs a stronger model goes to the cloud before "
        "the local model runs (weights fitted by tests/eval/calibrate.py; off without the embedding model); "
        "off: only the local answer's token signals decide",
        "auto",
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
    memory_mb: int = doc(
        "address space one sandboxed process may use, in MiB", 512, low=16, high=1_048_576, expected="at least 16 MiB"
    )
    cpu_s: int = doc("CPU seconds one sandboxed process may use", 20, low=1, high=86_400, expected=SECONDS)
    max_file_mb: int = doc(
        "largest file a command may write, in MiB", 64, low=1, high=1_048_576, expected="at least 1 MiB"
    )
    max_processes: int = doc("most processes a command may run at once", 64, low=1, high=100_000, expected=COUNT)
    max_output_kb: int = doc(
        "output read from a command before it is stopped, in KiB", 256, low=1, high=1_048_576, expected="at least 1 KiB"
    )


@dataclass
class WebFetchConfig:
    """The web_fetch tool: pages as text, never the Pi's own network."""

    enabled: bool = doc("offer web_fetch", True)
    max_bytes: int = doc(
        "largest response read, in bytes", 2_000_000, low=1024, high=1_073_741_824, expected="at least 1024 bytes"
    )
    timeout_s: float = doc(
        "give up on a fetch after this long (redirects included)", 15.0, low=0.001, high=3600, expected=SECONDS
    )
    max_redirects: int = doc(
        "most redirects followed (each one checked again)", 5, low=0, high=50, expected="a whole number from 0 to 50"
    )
    allow_private: list[str] = doc(
        "addresses or networks web_fetch may still reach though private or the Pi's own, "
        "e.g. 192.168.1.20 or 10.0.0.0/24",
        default_factory=list,
    )
    trusted_hosts: list[str] = doc(
        "hosts web_fetch may still reach once a turn has read outside text (a page, MCP, shell, a file), "
        "besides those named in the message; subdomains count, e.g. en.wikipedia.org",
        default_factory=list,
    )


@dataclass
class WebSearchConfig:
    """The web_search tool: which search engine answers, and how much of it."""

    backend: Literal["duckduckgo", "searxng", "brave", "off"] = doc(
        "duckduckgo: its HTML page, no key; searxng: your instance (needs url); brave: the Brave Search API "
        "(needs api_key); off: no web_search tool",
        "duckduckgo",
    )
    url: str = doc(
        "the engine's base URL, e.g. http://192.168.1.30:8888 for SearXNG; empty: the backend's public "
        "address. The host and port given here are reached even on the LAN (your choice); nothing else is",
        "",
    )
    api_key: str = doc("the Brave Search API key: a ${NAME} reference into the secrets file", "", secret=True)
    max_results: int = doc(
        "results a search gives when the model asks for no number", 5, low=1, high=10, expected="1 to 10"
    )
    timeout_s: float = doc("give up on a search after this long", 10.0, low=0.001, high=600, expected=SECONDS)


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

    per_turn: int = doc(
        "most tool calls in one turn; further calls are refused with a note",
        8,
        low=1,
        high=1000,
        expected="a whole number from 1 to 1000",
    )
    max_output_chars: int = doc(
        "a tool's output is cut here (with a note saying so)",
        4000,
        low=100,
        high=10_000_000,
        expected="at least 100 characters",
    )
    cache_s: float = doc(
        "a read-only tool's result is reused for this long with the same arguments; 0: off",
        30.0,
        low=0,
        high=86_400,
        expected="0 or more seconds",
    )
    workspace_max_mb: int = doc(
        "most the workspace may take on the disk, in MiB; writes past it are refused until files are deleted",
        1024,
        low=1,
        high=1_048_576,
        expected="at least 1 MiB (what the workspace may take on the SD card)",
    )
    shell: ShellConfig = doc("the sandboxed shell", default_factory=ShellConfig)
    web_fetch: WebFetchConfig = doc("fetching web pages", default_factory=WebFetchConfig)
    web_search: WebSearchConfig = doc("searching the web", default_factory=WebSearchConfig)
    message_per_hour: int = doc(
        "most messages the message tool sends the owner in an hour (tasks, cron prompts); 0: no message tool",
        6,
        low=0,
        high=3600,
        expected="0 or a whole number up to 3600",
    )
    skills_api: str = doc(
        "where `picoagent skills install` fetches skills from: an API of GitHub's shape (repos, commits, tarball)",
        "https://api.github.com",
    )
    mcp: dict[str, McpServerConfig] = doc("MCP servers whose tools the model may use, by name", default_factory=dict)
    plugins: list[str] = doc("Python modules loaded as plugins (each has register(hooks))", default_factory=list)
    require_approval: list[str] = doc(
        "tools whose calls wait for a person's approval, as device writes do (mcp_SERVER_* for a server's tools)",
        default_factory=list,
    )


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
    devices: dict[str, DeviceConfig] = doc(
        "named devices: wired to the Pi, or Home Assistant's (driver: homeassistant)", default_factory=dict
    )
    events: list[EventRule] = doc("sensor conditions that become events", default_factory=list)
    mqtt: MqttConfig = doc("the MQTT broker and Home Assistant discovery", default_factory=MqttConfig)
    telegram: TelegramConfig = doc("the Telegram channel", default_factory=TelegramConfig)
    discord: DiscordConfig = doc("the Discord channel", default_factory=DiscordConfig)
    slack: SlackConfig = doc("the Slack channel", default_factory=SlackConfig)
    email: EmailConfig = doc("the e-mail channel", default_factory=EmailConfig)
    whatsapp: WhatsAppConfig = doc("the WhatsApp channel", default_factory=WhatsAppConfig)
    webhooks: dict[str, WebhookConfig] = doc("webhook bridges, by name", default_factory=dict)
    notify: NotifyConfig = doc("where proactive messages go", default_factory=NotifyConfig)
    memory: MemoryConfig = doc("long-term memory", default_factory=MemoryConfig)
    providers: dict[str, ProviderConfig] = doc("cloud models, by name", default_factory=dict)
    routing: RoutingConfig = doc("when a message may leave the Pi", default_factory=RoutingConfig)
    scheduler: SchedulerConfig = doc("cron jobs and the heartbeat", default_factory=SchedulerConfig)
    tasks: TasksConfig = doc("persistent tasks: budgets, notes, subtasks", default_factory=TasksConfig)
    tools: ToolsConfig = doc("the model's tools: sandbox, web, MCP servers, plugins", default_factory=ToolsConfig)
    homeassistant: HomeAssistantConfig = doc(
        "Home Assistant's API, for its devices", default_factory=HomeAssistantConfig
    )
    weather: WeatherConfig = doc("the place for the forecast and the sun", default_factory=WeatherConfig)

    # Not config keys: where this config came from (set by load_config).
    source: Path | None = field(default=None, metadata={"internal": True})
    # The secrets file's values, redacted from every tool output.
    secret_values: frozenset[str] = field(default=frozenset(), metadata={"internal": True})
    # The secrets file the references were read from (its mode is checked: see config.load.exposed_secrets).
    secrets_path: Path | None = field(default=None, metadata={"internal": True})

    @property
    def base_dir(self) -> Path:
        """The folder relative paths in this config are resolved against."""
        return self.source.parent if self.source else Path.cwd()

    def resolve_path(self, value: str) -> Path:
        """A path from this config, made absolute against the config file's folder."""
        path = Path(os.path.expanduser(value))
        return path if path.is_absolute() else (self.base_dir / path).resolve()


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


def changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two config trees (a dict's entries by name; a list whole)."""
    if dataclasses.is_dataclass(old) and dataclasses.is_dataclass(new) and type(old) is type(new):
        keys: list[str] = []
        for f in dataclasses.fields(old):
            if not f.metadata.get("internal"):
                keys += changed_keys(getattr(old, f.name), getattr(new, f.name), f"{prefix}{f.name}.")
        return keys
    if isinstance(old, dict) and isinstance(new, dict):
        keys = []
        for name in sorted(set(old) | set(new)):
            if name not in old or name not in new:
                keys.append(f"{prefix}{name}")
            else:
                keys += changed_keys(old[name], new[name], f"{prefix}{name}.")
        return keys
    return [] if old == new else [prefix.rstrip(".")]
