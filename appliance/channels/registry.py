"""Which chat channels exist, how the daemon builds the enabled ones, and what status pages say of each.

A channel is named here once, by its :class:`~appliance.channels.base.ChatChannel` subclass (Telegram
too: there is no other kind of channel); its module is imported only when the channel is enabled, so
neither the daemon without it nor ``picoagent chat`` loads its platform library.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from appliance.config import CHANNEL_ORDER, Config

if TYPE_CHECKING:
    from appliance.channels.base import ChatChannel
    from appliance.outbox import Outbox
    from appliance.runtime import Runtime
    from appliance.schedule.scheduler import Scheduler
    from appliance.tasks import TaskStore

log = logging.getLogger(__name__)

# name -> "module:Class"; the class takes (its config section, runtime, outbox).
CHANNELS: dict[str, str] = {
    "telegram": "appliance.channels.telegram.channel:TelegramChannel",
    "discord": "appliance.channels.discord.channel:DiscordChannel",
    "slack": "appliance.channels.slack.channel:SlackChannel",
    "email": "appliance.channels.email.channel:EmailChannel",
    "whatsapp": "appliance.channels.whatsapp.channel:WhatsAppChannel",
    "webhook": "appliance.channels.webhook:WebhookChannel",
}


def section(config: Config, name: str) -> Any:
    """A channel's config section (the webhook bridges are ``webhooks``)."""
    return config.webhooks if name == "webhook" else getattr(config, name)


def is_enabled(config: Config, name: str) -> bool:
    """Whether the config turns a channel on (a webhook bridge: any bridge is configured)."""
    if name == "webhook":
        return bool(config.webhooks)
    return bool(getattr(section(config, name), "enabled", False))


def enabled_names(config: Config) -> list[str]:
    """The enabled channels, in the default order for proactive messages."""
    return [name for name in CHANNEL_ORDER if name in CHANNELS and is_enabled(config, name)]


def build(name: str, config: Config, runtime: Runtime, outbox: Outbox) -> ChatChannel:
    """Import and make one channel (its platform library is imported now, not before)."""
    module_name, _, class_name = CHANNELS[name].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    channel: ChatChannel = cls(section(config, name), runtime, outbox)
    return channel


class ChannelSet:
    """The running channels, by name (a reload starts and stops some: appliance/reload_channels.py)."""

    def __init__(self, config: Config, channels: dict[str, ChatChannel] | None = None) -> None:
        self.config = config
        self.channels: dict[str, ChatChannel] = channels if channels is not None else {}
        self.switching = asyncio.Lock()  # a reload's start or stop of a channel, one at a time (reload_channels.py)

    def __iter__(self) -> Iterator[ChatChannel]:
        return iter(self.channels.values())

    def get(self, name: str) -> ChatChannel | None:
        """A running channel, or None."""
        return self.channels.get(name)

    def attach_automation(self, cron: Scheduler, tasks: TaskStore, wake: Callable[[], None]) -> None:
        """Give every channel's /tasks and /schedule the daemon's scheduler and task store."""
        for channel in self.channels.values():
            channel.commands.automation.attach(cron, tasks, wake)

    def states(self) -> list[dict[str, Any]]:
        """Every known channel and its state, enabled ones first (for /api/status)."""
        rows = []
        for name in CHANNEL_ORDER:
            if name not in CHANNELS:
                continue
            channel = self.channels.get(name)
            if channel is None:
                rows.append({"name": name, "enabled": False, "up": False, "detail": off_detail(name)})
            else:
                rows.append(state_of(channel))
        return sorted(rows, key=lambda row: not row["enabled"])


def off_detail(name: str) -> str:
    """Why a channel is off, as the config says it."""
    return "no bridge under webhooks:" if name == "webhook" else f"{name}.enabled is false"


def state_of(channel: ChatChannel) -> dict[str, Any]:
    """A running channel's state as status pages show it: up with what that means, or why it is not."""
    if channel.up:
        detail = str(getattr(channel, "detail", "") or "connected")
        return {"name": channel.name, "enabled": True, "up": True, "detail": detail}
    return {"name": channel.name, "enabled": True, "up": False, "detail": channel.problem or "connecting"}
