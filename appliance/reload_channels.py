"""A reload's chat channels: one turned on is built and started, one turned off is stopped, one whose settings
changed (a new token, an address, a bridge added to ``webhooks``) is stopped and started again on them; the
others are not touched.

So a person who pastes a Telegram token on the setup page talks to the bot a moment later, with no restart.
Who may talk (``allow_from``) is set on the running channel, not restarted: a safety setting applies before
the next message. A channel is stopped the way the daemon stops it at exit (the answers in flight finish
briefly; what is in its outbox stays there and is delivered by the next one: nothing is lost, nothing sent
twice). The webhook bridges are one channel (``webhook``, its section ``webhooks``): the web routes find it
among the running channels at every request, so a bridge added, changed or removed takes effect at once.

The stop and the start run in the background (a stop waits for answers in flight), one channel change at a
time, in the order the reloads came: each brings the channel to what the running config says *then*, so two
saves in quick succession (on, then off; two tokens) end with what the last one said, never with two bots
polling or a channel running that the config turned off.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from appliance.config.schema import changed_keys

if TYPE_CHECKING:
    from appliance.config import Config
    from appliance.daemon import Daemon

log = logging.getLogger(__name__)

# The channels a reload starts and stops, by channel name, and the config sections they are made from.
LIVE = ("telegram", "discord", "slack", "email", "whatsapp", "webhook")
LIVE_SECTIONS = tuple("webhooks" if name == "webhook" else name for name in LIVE)


def channel_changes(old: Config, new: Config) -> dict[str, list[str]]:
    """For each live channel whose section changed, the keys that did."""
    from appliance.channels.registry import section

    found = {}
    for name, key in zip(LIVE, LIVE_SECTIONS, strict=True):
        keys = changed_keys(section(old, name), section(new, name), f"{key}.")
        if keys:
            found[name] = keys
    return found


def apply_channels(daemon: Daemon, old: Config, new: Config) -> None:
    """``old`` (the running config) takes the new sections of the channels that changed; each of them is then
    brought to it in the background (:func:`settle`). Only ``allow_from`` changed: set on the running channel."""
    from appliance.channels.registry import section

    channels = daemon.channels
    if channels is None:
        return
    for name, keys in channel_changes(old, new).items():
        running = channels.get(name)
        if running is not None and keys == [f"{name}.allow_from"]:
            section(old, name).allow_from = list(section(new, name).allow_from)  # read at every message
            continue
        setattr(old, "webhooks" if name == "webhook" else name, section(new, name))
        daemon.chores.spawn(settle(daemon, name))


async def settle(daemon: Daemon, name: str) -> None:
    """Bring one channel to the running config: stopped when it is off, started when it is on and not running,
    stopped and started again when it runs on other settings (it holds the section it was made from)."""
    from appliance.channels.registry import build, is_enabled, section

    channels = daemon.channels
    assert channels is not None and daemon.outbox is not None
    async with channels.switching:
        running = channels.get(name)
        wanted = is_enabled(daemon.config, name) and not daemon.stopping.is_set()
        if wanted and running is not None and running.config is section(daemon.config, name):
            return  # already on these settings (an earlier change's settle brought it there)
        if running is not None:
            channels.channels.pop(name, None)  # the notifier and the webhook routes stop seeing it at once
            await daemon.services.remove(running)
            log.warning("reload: %s stopped", name)
        if not wanted:
            return
        try:
            channel = build(name, daemon.config, daemon.runtime, daemon.outbox)
        except ImportError as exc:
            log.error("reload: %s: the channel cannot run: %s (reinstall picoagent)", name, exc)
            return
        automation = daemon.state.automation if daemon.state is not None else None
        if automation is not None and automation.cron is not None and automation.tasks is not None:
            wake = automation.task_runner.wake if automation.task_runner is not None else (lambda: None)
            channel.commands.automation.attach(automation.cron, automation.tasks, wake)
        try:
            await daemon.services.add(channel)  # its start never raises for a bad token or no network
        except asyncio.CancelledError:
            await channel.stop()  # the daemon is stopping: not left running behind its back
            raise
        channels.channels[name] = channel
        log.warning("reload: %s started", name)
