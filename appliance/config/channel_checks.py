"""The chat channels' config checks: credentials an enabled channel needs, encryption, notify.owner's names."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from appliance.config.channels import CHANNEL_ORDER
from appliance.config.schema import Config
from appliance.errors import ConfigError

BRIDGE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
LOOPBACK = {"127.0.0.1", "::1", "localhost"}

# channel -> (key, what it is, the secrets-file name people are told to use) for each credential it needs.
NEEDED: dict[str, list[tuple[str, str, str]]] = {
    "discord": [("token", "the bot's token", "DISCORD_BOT_TOKEN")],
    "slack": [
        ("bot_token", "the bot token (xoxb-...)", "SLACK_BOT_TOKEN"),
        ("app_token", "the app-level token (xapp-...)", "SLACK_APP_TOKEN"),
    ],
    "email": [("password", "the mailbox's password", "EMAIL_PASSWORD")],
    "whatsapp": [
        ("access_token", "the Graph API access token", "WHATSAPP_ACCESS_TOKEN"),
        ("app_secret", "the Meta app's secret", "WHATSAPP_APP_SECRET"),
        ("verify_token", "the webhook's verify token", "WHATSAPP_VERIFY_TOKEN"),
    ],
}


def check_channels(config: Config) -> None:
    """Raise a ConfigError naming the key when an enabled channel cannot work as configured."""
    for name, needed in NEEDED.items():
        section = getattr(config, name)
        if not section.enabled:
            continue
        for key, what, secret in needed:
            if not getattr(section, key):
                raise ConfigError(
                    f"{name}.{key}: the channel needs {what}",
                    fix=f"put {secret}=... in the secrets file and {name}.{key}: ${{{secret}}} here",
                )
    _check_email(config)
    if config.whatsapp.enabled and not config.whatsapp.phone_number_id:
        raise ConfigError("whatsapp.phone_number_id: the channel needs the number's id (the app's API setup page)")
    hook_url = config.whatsapp.webhook_url
    if hook_url and (not hook_url.startswith("https://") or not urlsplit(hook_url).hostname):
        raise ConfigError(
            "whatsapp.webhook_url: Meta only posts to https:// URLs",
            fix="give the public HTTPS URL of /whatsapp/webhook (a tunnel such as cloudflared gives one)",
        )
    for bridge, hook in config.webhooks.items():
        if not BRIDGE_NAME.fullmatch(bridge):
            raise ConfigError(
                f"webhooks.{bridge}: a bridge's name is 1 to 64 of A-Z, a-z, 0-9, _ and - (it is in its URL)"
            )
        if len(hook.secret) < 16:
            raise ConfigError(
                f"webhooks.{bridge}.secret: needed, at least 16 characters",
                fix="put a long random value in the secrets file (openssl rand -hex 32) and refer to it here",
            )
        if hook.url and not hook.url.startswith(("https://", "http://")):
            raise ConfigError(f"webhooks.{bridge}.url: expected an http(s) URL")
    seen: set[str] = set()
    for i, name in enumerate(config.notify.owner):
        if name not in CHANNEL_ORDER:
            raise ConfigError(f"notify.owner[{i}]: no channel named {name!r} (channels: {', '.join(CHANNEL_ORDER)})")
        if name in seen:
            raise ConfigError(f"notify.owner[{i}]: {name} is listed twice")
        seen.add(name)


def _check_email(config: Config) -> None:
    email = config.email
    if not email.enabled:
        return
    if not email.imap_host or not email.username:
        raise ConfigError("email: the channel needs imap_host and username (and the password in the secrets file)")
    smtp_host = email.smtp_host or email.imap_host
    for side, host, security in (
        ("imap", email.imap_host, email.imap_security),
        ("smtp", smtp_host, email.smtp_security),
    ):
        if security == "none" and host not in LOOPBACK:
            raise ConfigError(
                f"email.{side}_security: none would send the password in clear text to {host}",
                fix="use tls or starttls (none is for a server on 127.0.0.1 only)",
            )
