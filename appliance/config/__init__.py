"""Typed configuration: load YAML, resolve ``${ENV}`` references and the secrets file, validate.

One tree of dataclasses (:mod:`~appliance.config.schema`), read from a file
(:mod:`~appliance.config.load`, which also reads ``workspace/cron.yaml``) and checked beyond types
(:mod:`~appliance.config.checks`). Import from here: every name other modules use is re-exported.
The file's location is overridden through ``appliance.config.load.SYSTEM_CONFIG``, where
:func:`config_path` reads it.
"""

from __future__ import annotations

from appliance.config.channels import (
    CHANNEL_ORDER,
    DiscordConfig,
    EmailConfig,
    NotifyConfig,
    SlackConfig,
    TelegramConfig,
    WebhookConfig,
    WhatsAppConfig,
)
from appliance.config.checks import WHEN
from appliance.config.devices import DeviceConfig, EventRule, HardwareConfig, I2CAllow, RawAccessConfig, SPIAllow
from appliance.config.fields import doc
from appliance.config.homeassistant import HomeAssistantConfig
from appliance.config.load import (
    CHECKOUT_CONFIG,
    SYSTEM_CONFIG,
    config_path,
    data_dir,
    exposed_secrets,
    load_config,
    load_jobs,
    read_secrets,
)
from appliance.config.mqtt import MqttConfig
from appliance.config.schema import (
    SYSTEM_DATA_DIR,
    AgentConfig,
    Config,
    CronJob,
    LlmConfig,
    McpServerConfig,
    MemoryConfig,
    ProviderConfig,
    RoutingConfig,
    SchedulerConfig,
    ShellConfig,
    ToolsConfig,
    WebConfig,
    WebFetchConfig,
    WebSearchConfig,
    describe_keys,
)
from appliance.config.tasks import TasksConfig
from appliance.config.weather import WeatherConfig

__all__ = [
    "CHANNEL_ORDER",
    "CHECKOUT_CONFIG",
    "SYSTEM_CONFIG",
    "SYSTEM_DATA_DIR",
    "WHEN",
    "AgentConfig",
    "Config",
    "CronJob",
    "DeviceConfig",
    "DiscordConfig",
    "EmailConfig",
    "EventRule",
    "HardwareConfig",
    "HomeAssistantConfig",
    "I2CAllow",
    "LlmConfig",
    "McpServerConfig",
    "MemoryConfig",
    "MqttConfig",
    "NotifyConfig",
    "ProviderConfig",
    "RawAccessConfig",
    "RoutingConfig",
    "SPIAllow",
    "SchedulerConfig",
    "ShellConfig",
    "SlackConfig",
    "TasksConfig",
    "TelegramConfig",
    "ToolsConfig",
    "WeatherConfig",
    "WebConfig",
    "WebFetchConfig",
    "WebSearchConfig",
    "WebhookConfig",
    "WhatsAppConfig",
    "config_path",
    "data_dir",
    "describe_keys",
    "doc",
    "exposed_secrets",
    "load_config",
    "load_jobs",
    "read_secrets",
]
