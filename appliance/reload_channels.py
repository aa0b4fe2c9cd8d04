"""A reload's chat channels: one turned on is built and started, one turned off is stopped, one whose settings
changed (a new token, an address) is stopped and started again on them; the others are not touched.

So a person who pastes a Telegram token on the setup page talks to the bot a moment later, with no restart.
Who may talk (``allow_from``) is set on the running channel without a restart, as before. A channel is stopped
the way the daemon stops it at exit (the answers in flight finish briefly; what is in its outbox stays there
and is delivered by the next one: nothing is lost, nothing sent twice). The webhook bridges (``webhooks``) are
routes of the web site, which reads them on every request.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from appliance.config.schema import changed_keys
from appliance.reload import LIVE_CHANNELS

if TYPE_CHECKING:
    from appliance.channels.base import ChatChannel
    from appliance.config import Config
    from appliance.daemon import Daemon

log = logging.getLogger(__name__)

# The channels a reload starts and stops (the webhook bridges need neither: see the module docstring).
LIVE = LIVE_CHANNELS


def channel_changes(old: Config, new: Config) -> dict[str, list[str]]:
    """For each live channel whose section changed, the keys that did."""
    from appliance.channels.registry import section

    found = {}
    for name in LIVE:
        keys = changed_keys(section(old, name), section(new, name), f"{name}.")
        if keys:
            found[name] = keys
    return found


def apply_channels(daemon: Daemon, old: Config, new: Config) -> None:
    """Start, stop or restart each channel whose section changed (in the background: a stop lets answers in
    flight finish); ``old`` (the running config) takes the new sections."""
    from appliance.channels.registry import is_enabled, section

    channels = daemon.channels
    if channels is None:
        return
    for name, keys in channel_changes(old, new).items():
        running = channels.get(name)
        if running is not None and keys == [f"{name}.allow_from"]:
            section(old, name).allow_from = list(section(new, name).allow_from)  # read at every message
            continue
        setattr(old, name, section(new, name))
        if running is None and not is_enabled(new, name):
            continue
        daemon.chores.spawn(_restart(daemon, name, running, is_enabled(new, name)))


async def _restart(daemon: Daemon, name: str, running: ChatChannel | None, wanted: bool) -> None:
    """Stop ``running`` (if any), then build and start the channel on the running config (if ``wanted``)."""
    from appliance.channels.registry import build

    channels = daemon.channels
    assert channels is not None and daemon.outbox is not None
    if running is not None:
        channels.channels.pop(name, None)  # the notifier and the webhook routes stop seeing it at once
        await daemon.services.remove(running)
        log.warning("SIGHUP: %s stopped", name)
    if not wanted:
        return
    try:
        channel = build(name, daemon.config, daemon.runtime, daemon.outbox)
    except ImportError as exc:
        log.error("SIGHUP: %s: the channel cannot run: %s (reinstall picoagent)", name, exc)
        return
    automation = daemon.state.automation if daemon.state is not None else None
    if automation is not None and automation.cron is not None and automation.tasks is not None:
        wake = automation.task_runner.wake if automation.task_runner is not None else (lambda: None)
        channel.commands.automation.attach(automation.cron, automation.tasks, wake)
    await daemon.services.add(channel)
    channels.channels[name] = channel
    log.warning("SIGHUP: %s started", name)
