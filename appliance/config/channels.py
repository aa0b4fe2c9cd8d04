"""The chat channels' config sections (Telegram, Discord, Slack, e-mail, WhatsApp, webhook bridges) and ``notify``.

Every chat channel has ``enabled``, its credentials (secret: ``${NAME}`` references into the secrets file),
``allow_from`` (who may talk; pairing with a one-time code adds more) and ``owner`` (where proactive
messages go; empty: the first allowed user, else the first paired one). ``notify.owner`` orders the
channels proactive messages try (the first one that is up gets them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from appliance.config.fields import COUNT, SECONDS, doc

# The order proactive messages try the enabled channels in when notify.owner is empty.
CHANNEL_ORDER = ("telegram", "discord", "slack", "whatsapp", "email", "webhook")


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
class DiscordConfig:
    """The Discord channel (discord.py: the gateway, slash commands, buttons)."""

    enabled: bool = doc("run the Discord bot inside the daemon", False)
    token: str = doc("the bot's token from the Discord developer portal; keep it in the secrets file", "", secret=True)
    allow_from: list[str] = doc("Discord user ids allowed to talk to the bot (pairing adds more)", default_factory=list)
    channels: list[str] = doc(
        "server channel ids where the bot answers when mentioned (direct messages always work)", default_factory=list
    )
    owner: str = doc("user id proactive messages go to (a direct message); empty: the first allowed user", "")
    api_base_url: str = doc("Discord's REST API base URL", "https://discord.com/api/v10")
    edit_interval_s: float = doc(
        "least time between two edits of a streaming reply", 1.0, low=0.1, high=60, expected=SECONDS
    )


@dataclass
class SlackConfig:
    """The Slack channel (Bolt for Python in Socket Mode: no public URL needed)."""

    enabled: bool = doc("run the Slack app inside the daemon", False)
    bot_token: str = doc("the bot token (xoxb-...); keep it in the secrets file", "", secret=True)
    app_token: str = doc("the app-level token for Socket Mode (xapp-...); keep it in the secrets file", "", secret=True)
    allow_from: list[str] = doc("Slack user ids allowed to talk to the app (pairing adds more)", default_factory=list)
    channels: list[str] = doc(
        "channel ids where the app answers when mentioned; empty: every channel it was added to", default_factory=list
    )
    owner: str = doc("user id proactive messages go to (a direct message); empty: the first allowed user", "")
    api_base_url: str = doc("Slack's Web API base URL", "https://slack.com/api/")
    edit_interval_s: float = doc(
        "least time between two edits of a streaming reply", 1.0, low=0.1, high=60, expected=SECONDS
    )


@dataclass
class EmailConfig:
    """The e-mail channel: a mailbox read over IMAP, replies sent over SMTP."""

    enabled: bool = doc("read and answer a mailbox inside the daemon", False)
    address: str = doc("the assistant's own address (From: of its mails); empty: the username", "")
    username: str = doc("the mailbox's login (IMAP and SMTP)", "")
    password: str = doc("the mailbox's password or app password; keep it in the secrets file", "", secret=True)
    imap_host: str = doc("the IMAP server", "")
    imap_port: int = doc("the IMAP port (993: TLS)", 993, low=1, high=65_535, expected="a port from 1 to 65535")
    imap_security: Literal["tls", "starttls", "none"] = doc("how IMAP is encrypted (none: only for 127.0.0.1)", "tls")
    smtp_host: str = doc("the SMTP server; empty: the IMAP server", "")
    smtp_port: int = doc(
        "the SMTP port (465: TLS, 587: STARTTLS)", 587, low=1, high=65_535, expected="a port from 1 to 65535"
    )
    smtp_security: Literal["tls", "starttls", "none"] = doc(
        "how SMTP is encrypted (none: only for 127.0.0.1)", "starttls"
    )
    folder: str = doc("the folder new mail arrives in", "INBOX")
    poll_s: float = doc(
        "how often the folder is checked when the server has no IDLE", 60.0, low=5, high=86_400, expected=SECONDS
    )
    allow_from: list[str] = doc("addresses allowed to write to the assistant (pairing adds more)", default_factory=list)
    owner: str = doc("address proactive messages go to; empty: the first allowed address", "")


@dataclass
class WhatsAppConfig:
    """The WhatsApp channel (the WhatsApp Business Cloud API: a webhook in, the Graph API out)."""

    enabled: bool = doc("answer WhatsApp messages inside the daemon", False)
    access_token: str = doc("the Graph API access token; keep it in the secrets file", "", secret=True)
    app_secret: str = doc("the Meta app's secret (checks X-Hub-Signature-256); in the secrets file", "", secret=True)
    verify_token: str = doc("the verify token you typed into the webhook setup; in the secrets file", "", secret=True)
    phone_number_id: str = doc("the WhatsApp number's id (not the number itself)", "")
    allow_from: list[str] = doc(
        "phone numbers allowed to write, international digits only (pairing adds more)", default_factory=list
    )
    owner: str = doc("number proactive messages go to; empty: the first allowed number", "")
    api_base_url: str = doc("the Graph API base URL", "https://graph.facebook.com/v21.0")
    webhook_url: str = doc(
        "the public HTTPS URL Meta posts to (ends in /whatsapp/webhook); its host name is let in", ""
    )


@dataclass
class WebhookConfig:
    """One webhook bridge: ``POST /api/webhook/<name>`` in, its ``url`` out (both signed with ``secret``)."""

    secret: str = doc("the HMAC-SHA256 key both sides sign with; keep it in the secrets file", "", secret=True)
    url: str = doc("where proactive messages are POSTed; empty: this bridge only answers", "")
    owner: bool = doc("proactive messages may go to this bridge's url (notify.owner lists `webhook`)", True)


@dataclass
class NotifyConfig:
    """Proactive messages (events, cron results, heartbeat findings, finished tasks): where they go."""

    owner: list[str] = doc(
        "channels to try, in order (e.g. [telegram, email]); the first one that is up gets the message;"
        " empty: every enabled channel, Telegram first",
        default_factory=list,
    )
    fallback_after_s: float = doc(
        "a message still waiting this long on a channel that is down moves to the next one",
        120.0,
        low=1,
        high=86_400,
        expected=SECONDS,
    )
    feed_keep: int = doc(
        "how many notifications the status page's feed keeps", 500, low=1, high=1_000_000, expected=COUNT
    )
