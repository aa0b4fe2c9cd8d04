"""A fake of Discord's REST API (v10) and gateway websocket, close enough for discord.py to run against it.

:class:`FakeDiscord` is what tests use: one aiohttp server on 127.0.0.1 that answers REST under
``/api/v10`` (discord_rest.py: Discord's objects, the endpoints, auth, rate limits and Discord's error
bodies) and the gateway at ``/gateway`` (discord_gateway.py: HELLO, IDENTIFY, READY, RESUME, zlib-stream
and the message-content intent). This module adds the server's lifecycle and what tests drive it with;
it imports both, and they import nothing from it or from each other.

Tests inject users' messages (:meth:`FakeDiscord.push_message`, in a DM or a guild channel, optionally
mentioning the bot), slash commands and button presses (:meth:`FakeDiscord.push_slash`,
:meth:`FakeDiscord.push_button`; :meth:`FakeDiscord.dispatch` sends any payload again), failures for the
next requests of a route (:meth:`FakeDiscord.fail_next`: network, 429, 401, 403, 500), a dropped gateway
connection (:meth:`FakeDiscord.drop_gateway`) and no network at all (:meth:`FakeDiscord.go_offline`).
Every request is recorded (:attr:`FakeDiscord.calls`), and so is every gateway payload the client sent
(:attr:`FakeDiscord.received`).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from tests.fakes.discord_gateway import INTENT_MESSAGE_CONTENT, PRIVILEGED_INTENTS, Gateway, Session
from tests.fakes.discord_rest import DM_CHANNEL, TEXT_CHANNEL, ApiCall, DiscordRest, FailureKind, cut, now_iso

__all__ = ["INTENT_MESSAGE_CONTENT", "PRIVILEGED_INTENTS", "ApiCall", "FailureKind", "FakeDiscord"]


class FakeDiscord(DiscordRest):
    """The fake: start it, point discord.py at :attr:`api_base`, push users' events, read what the bot did."""

    def __init__(
        self,
        token: str = "TEST.BOT.TOKEN",
        *,
        bot_id: int = 900000000000000001,
        username: str = "pico",
        heartbeat_interval_ms: int = 41250,
        allowed_intents: int = PRIVILEGED_INTENTS,  # the privileged intents enabled in the developer portal
        rate_limit: int = 50,  # requests per route and channel per window, as X-RateLimit-Limit says
        rate_window_s: float = 1.0,
    ) -> None:
        super().__init__(token, bot_id=bot_id, username=username, rate_limit=rate_limit, rate_window_s=rate_window_s)
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.allowed_intents = allowed_intents
        self.gateway = Gateway(self)
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self.offline = False  # go_offline(): kept-alive connections are cut at their next request

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1."""
        app = web.Application(middlewares=[self._unless_offline])
        app.router.add_get("/gateway", self.gateway.serve)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await self.go_online()

    async def close(self) -> None:
        """Stop listening; a connected client sees its gateway closed."""
        await self.drop_gateway()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def go_offline(self) -> None:
        """No network: the gateway connection drops and nothing listens on the port until :meth:`go_online`."""
        self.offline = True
        if self._site is not None:
            await self._site.stop()
            self._site = None
        await self.drop_gateway()

    async def go_online(self) -> None:
        """Listen again, on the same port as before (a free one the first time)."""
        assert self._runner is not None, "start() first"
        self.offline = False
        self._site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await self._site.start()
        if not self.port:
            self.port = self._runner.addresses[0][1]

    async def drop_gateway(self) -> None:
        """Cut the gateway connection without a close frame (the client should RESUME)."""
        self.gateway.drop()

    @property
    def connected(self) -> bool:
        """Whether a client is identified (or resumed) on the gateway now."""
        return self.gateway.connected

    @web.middleware
    async def _unless_offline(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        return cut(request) if self.offline else await handler(request)

    # --- what tests inject ---------------------------------------------------------------------

    def add_guild(self, guild_id: int | str, channel_ids: list[int | str], *, name: str = "Home") -> dict[str, Any]:
        """A guild the bot is in, with text channels (dispatched as GUILD_CREATE when a client is connected)."""
        gid = str(guild_id)
        channels = []
        for position, cid in enumerate(channel_ids):
            channel = {
                "id": str(cid),
                "type": TEXT_CHANNEL,
                "guild_id": gid,
                "name": f"channel-{position}",
                "position": position,
                "permission_overwrites": [],
                "nsfw": False,
                "parent_id": None,
                "topic": None,
                "last_message_id": None,
                "rate_limit_per_user": 0,
            }
            self.channels[channel["id"]] = channel
            self.messages.setdefault(channel["id"], {})
            channels.append({k: v for k, v in channel.items() if k != "guild_id"})
        everyone = {"id": gid, "name": "@everyone", "permissions": "1071698660929", "position": 0, "color": 0}
        guild = {
            "id": gid,
            "name": name,
            "icon": None,
            "owner_id": self.new_id(),
            "roles": [{**everyone, "hoist": False, "managed": False, "mentionable": False, "flags": 0}],
            "member_count": 2,
            "large": False,
            "unavailable": False,
            "joined_at": now_iso(),
            "channels": channels,
            "members": [self._member(self.bot_user)],
            "preferred_locale": "en-US",
            **{key: 0 for key in ("verification_level", "default_message_notifications", "explicit_content_filter")},
            **{key: 0 for key in ("mfa_level", "premium_tier", "system_channel_flags", "nsfw_level")},
            **{key: [] for key in ("emojis", "stickers", "features", "threads", "voice_states", "presences")},
            **{key: [] for key in ("stage_instances", "guild_scheduled_events", "soundboard_sounds")},
        }
        self.guilds[gid] = guild
        if self.connected:
            self.dispatch("GUILD_CREATE", guild)
        return guild

    def push_message(
        self,
        user_id: int | str,
        text: str,
        *,
        channel_id: int | str | None = None,
        mention: bool = False,
        reply_to: str | None = None,
    ) -> dict[str, Any]:
        """A user writes: in a DM (no ``channel_id``) or in a guild channel, ``mention`` putting ``<@bot>`` first,
        ``reply_to`` naming a message of that channel it answers.

        Returns the Message as stored (full content); the MESSAGE_CREATE the bot gets has it blanked
        when Discord would blank it (a guild message, no mention, no message-content intent).
        """
        author = self.user(user_id)
        channel = self.dm_channel(user_id) if channel_id is None else self.channels[str(channel_id)]
        content = f"<@{self.bot_user['id']}> {text}" if mention else text
        message = self._message(channel, author, content)
        if mention:
            message["mentions"] = (
                [{**self.bot_user, "member": self._member(None)}] if "guild_id" in channel else [self.bot_user]
            )
        if reply_to is not None:
            message.update(type=19, referenced_message=self.messages[channel["id"]][reply_to])
            message["message_reference"] = {"type": 0, "channel_id": channel["id"], "message_id": reply_to}
        self.messages[channel["id"]][message["id"]] = message
        event = dict(message)
        if "guild_id" in channel:
            event["guild_id"] = channel["guild_id"]
            event["member"] = self._member(None)
        self.dispatch("MESSAGE_CREATE", event)
        return message

    def push_slash(
        self,
        user_id: int | str,
        name: str,
        options: dict[str, str] | None = None,
        *,
        channel_id: int | str | None = None,
    ) -> dict[str, Any]:
        """A user runs ``/name`` (string options) in a DM or a guild channel; returns the INTERACTION_CREATE."""
        registered = itertools.chain(self.commands, *self.guild_commands.values())
        command = next((c for c in registered if c["name"] == name), None)
        data: dict[str, Any] = {
            "id": command["id"] if command else self.new_id(),
            "name": name,
            "type": 1,
            "options": [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()],
        }
        channel = self.dm_channel(user_id) if channel_id is None else self.channels[str(channel_id)]
        if "guild_id" in channel:
            data["guild_id"] = channel["guild_id"]
        return self._interact(user_id, channel, 2, data)

    def push_button(
        self, user_id: int | str, channel_id: int | str, message_id: int | str, custom_id: str
    ) -> dict[str, Any]:
        """A user presses a button under one of the bot's messages; returns the INTERACTION_CREATE."""
        channel = self.channels[str(channel_id)]
        message = self.messages[channel["id"]][str(message_id)]
        data = {"custom_id": custom_id, "component_type": 2}
        return self._interact(user_id, channel, 3, data, message=message)

    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send a DISPATCH (op 0) to the connected client; kept for a RESUME when nobody is connected."""
        self.gateway.dispatch(event, data)

    def _interact(
        self,
        user_id: int | str,
        channel: dict[str, Any],
        kind: int,
        data: dict[str, Any],
        *,
        message: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        user = self.user(user_id)
        interaction: dict[str, Any] = {
            "id": self.new_id(),
            "application_id": self.application_id,
            "type": kind,
            "data": data,
            "channel_id": channel["id"],
            "channel": {k: v for k, v in channel.items() if k != "recipients"} | {"recipients": [user]}
            if channel["type"] == DM_CHANNEL
            else channel,
            "token": secrets.token_urlsafe(48),
            "version": 1,
            "app_permissions": "1071698660929",
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": channel.get("guild_id", "0")},
            "attachment_size_limit": 10485760,
        }
        if "guild_id" in channel:
            interaction.update(guild_id=channel["guild_id"], guild_locale="en-US", context=0)
            interaction["member"] = {**self._member(user), "permissions": "1071698660929"}
        else:
            interaction.update(user=user, context=1)
        if message is not None:
            interaction["message"] = message
        self.interactions[interaction["id"]] = interaction
        self.dispatch("INTERACTION_CREATE", interaction)
        return interaction

    # --- what tests read ----------------------------------------------------------------------

    @property
    def received(self) -> list[dict[str, Any]]:
        """Every gateway payload the client sent, oldest first (tokens included)."""
        return self.gateway.received

    @property
    def sessions(self) -> dict[str, Session]:
        """The gateway sessions by id, each with the dispatches it was sent."""
        return self.gateway.sessions

    @property
    def identified(self) -> asyncio.Event:
        """Set at each READY or RESUMED; tests clear it to wait for the next."""
        return self.gateway.identified

    def gateway_ops(self, op: int) -> list[dict[str, Any]]:
        """The payloads of one opcode the client sent, oldest first."""
        return [p for p in self.received if p.get("op") == op]

    def bot_messages(self, channel_id: int | str) -> list[dict[str, Any]]:
        """The bot's messages in a channel as they look now (after edits), oldest first."""
        found = self.messages.get(str(channel_id), {}).values()
        return [m for m in found if m["author"]["id"] == self.bot_user["id"]]

    def sent_texts(self, channel_id: int | str) -> list[str]:
        """The content of every message the bot created in a channel, as first sent."""
        return [
            c.body["content"]
            for c in self.calls_of("POST /channels/{channel_id}/messages", ok_only=True)
            if c.path["channel_id"] == str(channel_id)
        ]
