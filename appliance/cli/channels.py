"""`picoagent channels list|pair` and `picoagent notifications`: the chat channels, and what they carried."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Literal

from appliance.cli.common import action, command_group, load, open_db, print_json
from appliance.cli.daemon_client import daemon_get
from appliance.errors import UsageError

if TYPE_CHECKING:
    from appliance.config import Config


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `channels` group and the `notifications` command."""
    gsub = command_group(sub, common, "channels", "the chat channels: their state; pair a user")
    listing = action(gsub, common, "list", "each channel: enabled, and its state in the daemon", cmd_channels_list)
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    pair = action(
        gsub,
        common,
        "pair",
        "a one-time code: whoever sends it to the assistant there may talk to it",
        cmd_channels_pair,
    )
    pair.add_argument("channel", help="telegram, discord, slack, email or whatsapp")
    pair.add_argument(
        "--ttl", type=float, default=600, metavar="SECONDS", help="how long the code is valid (default 600)"
    )
    feed = action(sub, common, "notifications", "the latest proactive messages and where they went", cmd_notifications)
    feed.add_argument("-n", type=int, default=10, metavar="N", help="how many (default 10, at most 50)")


RESTART = "reload picoagent to apply (systemctl reload picoagent, or save it in Settings)"


def channel_rows(config: Config, status: dict[str, Any] | Literal["ask"] | None = "ask") -> list[dict[str, Any]]:
    """Every channel with its state: the daemon's when it runs (told against the config, :func:`as_configured`),
    else what the config says. ``status``: the daemon's /api/status when the caller has it (None: no daemon)."""
    from appliance.channels.registry import CHANNELS, is_enabled, off_detail
    from appliance.config import CHANNEL_ORDER

    running = daemon_get(config, "/api/status") if isinstance(status, str) else status
    if running is not None and running.get("channels"):
        return as_configured(list(running["channels"]), config)
    rows = []
    for name in CHANNEL_ORDER:
        if name not in CHANNELS:
            continue
        enabled = is_enabled(config, name)
        detail = "enabled; the daemon is not running" if enabled else off_detail(name)
        rows.append({"name": name, "enabled": enabled, "up": None, "detail": detail})  # None: nobody runs it
    return sorted(rows, key=lambda row: not row["enabled"])


def as_configured(rows: list[dict[str, Any]], config: Config) -> list[dict[str, Any]]:
    """The running daemon's channel rows, each told against ``config`` (the file now): a channel the daemon runs
    off that the config turns on, or runs that the config turns off, says both and that a reload applies it
    (``restart_needed``: true, the API's name for "not applied yet"); its reason for being off is then no longer
    the config's, so it is not repeated. A reload starts or stops it (appliance/reload_channels.py)."""
    from appliance.channels.registry import is_enabled

    told = []
    for row in rows:
        wanted = is_enabled(config, row["name"])
        if row["enabled"] == wanted:
            told.append(row)
        elif wanted:
            detail = f"off in the running daemon; the config turns it on: {RESTART}"
            told.append({**row, "detail": detail, "restart_needed": True})
        else:
            detail = f"on in the running daemon ({row['detail']}); the config turns it off: {RESTART}"
            told.append({**row, "detail": detail, "restart_needed": True})
    return told


def state_word(row: dict[str, Any]) -> str:
    """up, down, on (enabled, no daemon running it) or off, as people read a channel's state."""
    if not row["enabled"]:
        return "off"
    if row["up"] is None:
        return "on"
    return "up" if row["up"] else "down"


def cmd_channels_list(args: argparse.Namespace) -> int:
    """Each channel, enabled or not, and its state."""
    config = load(args)
    rows = channel_rows(config)
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        print(f"{row['name']:<9} {state_word(row):<5} {row['detail']}")
    print(f"proactive messages: {proactive_words(rows, config)}")
    return 0


def proactive_words(rows: list[dict[str, Any]], config: Config) -> str:
    """Where proactive messages go now, and what a restart changes when the file turns on a channel not running."""
    enabled = [r["name"] for r in rows if r["enabled"]]
    # notify.owner's order, of the channels that run: "telegram -> webhook" read as if Telegram carried them while it
    # was off (README walk 7)
    running = [n for n in config.notify.owner if n in enabled] if config.notify.owner else enabled
    off = [n for n in config.notify.owner if n not in enabled]
    waiting = [r["name"] for r in rows if r.get("restart_needed") and not r["enabled"]]  # on in the file only
    notes = [f"{', '.join(off)} in notify.owner {'is' if len(off) == 1 else 'are'} off"] if off else []
    notes += [f"the config turns on {', '.join(waiting)}: {RESTART}"] if waiting else []
    said = f" ({'; '.join(notes)})" if notes else ""
    if running:
        return " -> ".join(running) + said
    return (
        f"the status page only (no channel runs; {'; '.join(notes)})"
        if notes
        else ("the status page only (no channel is enabled)")
    )


def cmd_channels_pair(args: argparse.Namespace) -> int:
    """Print a one-time pairing code for a channel."""
    from appliance.channels.registry import CHANNELS, is_enabled

    config = load(args)
    name = args.channel.lower()
    if name not in CHANNELS or name == "webhook":
        known = ", ".join(n for n in CHANNELS if n != "webhook")
        raise UsageError(f"no chat channel named {name!r}", fix=f"pair on one of: {known}")
    db = open_db(config)
    try:
        from appliance.channels.pairing import create_code

        code = create_code(db, name, ttl_s=args.ttl)
    finally:
        db.close()
    how_sent = "as the whole body of an e-mail to its address" if name == "email" else "in a private chat"
    print(f"send this code to the assistant on {name}, {how_sent}, within {args.ttl / 60:g} minutes: {code}")
    print("it works once; whoever sends it can talk to the assistant")
    if not is_enabled(config, name):
        print(f"note: {name}.enabled is false; the channel must be running for the code to work")
    return 0


def feed_lines(notifications: list[dict[str, Any]], config: Config) -> list[str]:
    """Notifications as `picoagent status` and `notifications` print them: at the appliance's time (scheduler.timezone,
    as `cron logs` shows a run), its zone named (a README walk read the machine's UTC beside cron's Brussels time)."""
    from datetime import datetime

    from appliance.schedule.parse import resolve_zone

    zone = resolve_zone(config.scheduler.timezone)
    lines = []
    for item in notifications:
        when = datetime.fromtimestamp(item["at"], zone).strftime("%Y-%m-%d %H:%M %Z")
        where = f"{item['channel']}: {item['delivery']}" if item["channel"] else item["delivery"]
        if item.get("error"):
            where += f" ({item['error']})"
        lines.append(f"  {when}  {item['text']}  [{where}]")
    return lines


def cmd_notifications(args: argparse.Namespace) -> int:
    """The latest proactive messages and where each went."""
    from appliance.notify import recent

    config = load(args)
    db = open_db(config)
    try:
        items = recent(db, limit=max(1, args.n))
    finally:
        db.close()
    if not items:
        print("no notifications yet")
        return 0
    print("\n".join(feed_lines(items, config)))
    return 0
