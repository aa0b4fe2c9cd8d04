"""The Discord channel: discord.py's gateway client driven inside the daemon's lifecycle.

:meth:`DiscordChannel.connect` logs in over REST (``GET /users/@me``: a refused token is a permanent
problem, no network a passing one), asks ``GET /gateway/bot`` where the gateway is, registers the slash
commands and starts discord.py's gateway loop, which identifies with the intents for servers, server
messages, direct messages and message content (a privileged intent: enabled in the developer portal,
else Discord closes with 4014 and the channel is off saying so). From then on discord.py keeps the
connection, resuming after a drop; meanwhile the channel reports itself down, so proactive messages
try the next channel.

Direct messages are always read; in a server only messages that mention the bot (or reply to it) in a
channel listed in ``discord.channels``. Who may talk, commands, turns and the outbox are the shared
:class:`~appliance.channels.base.ChatChannel`'s; replies stream by editing one message
(:mod:`.stream`), slash commands and buttons are interactions (:mod:`.slash`). Nothing the bot writes
pings anyone (``AllowedMentions.none()``), whatever the model puts in a reply.

Both base URLs are discord.py's own class attributes, so ``discord.api_base_url`` points the library at
another server (the tests' fake): ``discord.http.Route.BASE`` for REST, and the gateway URL Discord
names is what :class:`~discord.gateway.DiscordWebSocket` connects (and falls back) to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable
from typing import Any

import discord
import discord.http
import yarl
from discord.gateway import DiscordWebSocket

from appliance.channels.base import ChannelDown, ChatChannel, Incoming, Verdict
from appliance.channels.commands import Said
from appliance.channels.core import StreamedReply
from appliance.channels.discord.slash import Interactions, command_tree
from appliance.channels.discord.stream import REQUEST_ERRORS, ReplyStream
from appliance.channels.discord.text import components, split_message, without_mention
from appliance.config import DiscordConfig
from appliance.outbox import Outbox, OutMessage
from appliance.runtime import Runtime

log = logging.getLogger(__name__)

REFUSED = "Discord refused discord.token"
NO_INTENT = "Discord refused the Message Content intent: enable it for the bot in the developer portal"
GATEWAY_TIMEOUT_S = 30.0  # for the gateway's READY after connecting
RATE_LIMIT_WAIT_S = 30.0  # discord.py waits out shorter rate limits itself; a longer one pauses delivery
SNOWFLAKE = re.compile(r"\d{15,21}")


class DiscordChannel(ChatChannel):
    """The bot: the gateway, who may talk, replies, slash commands, buttons, and delivery of the outbox."""

    name = "discord"
    buttons = True

    def __init__(
        self, config: DiscordConfig, runtime: Runtime, outbox: Outbox, *, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(config, runtime, outbox, clock=clock)
        self.config: DiscordConfig = config
        self.client: discord.Client | None = None
        self.interactions = Interactions(self)
        self._gateway: asyncio.Task[None] | None = None
        self._closing = False

    # --- lifecycle --------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Log in, find the gateway, register the slash commands, connect; ChannelDown when Discord cannot be used."""
        self._check_ids()
        if not self.config.token:
            raise ChannelDown("discord.token is empty: put the bot's token in the secrets file", permanent=True)
        await self.disconnect()  # a retry starts from a new client
        self._closing = False
        discord.http.Route.BASE = self.config.api_base_url.rstrip("/")
        client = self.client = self._client()
        try:
            await client.login(self.config.token)
            _, url, _ = await client.http.get_bot_gateway()
        except discord.LoginFailure:
            raise ChannelDown(REFUSED, permanent=True) from None
        except (discord.GatewayNotFound, *REQUEST_ERRORS) as exc:
            raise ChannelDown(f"cannot reach Discord: {_describe(exc)}") from None
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
        try:
            await client.tree.sync()
        except REQUEST_ERRORS as exc:  # messages and buttons work without them
            log.warning("discord: registering the slash commands failed: %s", _describe(exc))
        self._gateway = asyncio.ensure_future(client.connect(reconnect=True))
        await self._identified(client, self._gateway)
        self._gateway.add_done_callback(self._gateway_ended)
        assert client.user is not None
        self.detail = f"as @{client.user.name}"

    async def _identified(self, client: _Client, gateway: asyncio.Task[None]) -> None:
        """Until the gateway's READY; ChannelDown when the gateway loop ends first (or never answers)."""
        ready = asyncio.ensure_future(client.identified.wait())
        await asyncio.wait({ready, gateway}, timeout=GATEWAY_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if client.identified.is_set():
            return
        if not gateway.done():
            raise ChannelDown("Discord's gateway did not answer")
        exc = gateway.exception()
        if exc is None:
            raise ChannelDown("Discord's gateway closed the connection")
        raise _down(exc)

    def _gateway_ended(self, task: asyncio.Task[None]) -> None:
        """discord.py gave up the gateway (it resumes by itself otherwise): off, and retried unless refused."""
        if self._closing or task.cancelled():
            return
        exc = task.exception()
        down = _down(exc) if exc is not None else ChannelDown("Discord's gateway closed the connection")
        self.went_down(down.reason)
        if down.permanent:
            log.error(
                "discord: %s; the channel stays down until its settings are fixed (saved, or the file and a reload)",
                down.reason,
            )
        elif not self._stopping:
            log.warning("discord: %s; reconnecting in the background", down.reason)
            self._connecting = asyncio.ensure_future(self._connect_later())

    async def disconnect(self) -> None:
        """Close the gateway and the HTTP session."""
        self._closing = True
        client, gateway, self.client, self._gateway = self.client, self._gateway, None, None
        if client is not None:
            await client.close()
        if gateway is not None:
            await asyncio.gather(gateway, return_exceptions=True)

    def _client(self) -> _Client:
        # no voice here: discord.py's start-up warnings that PyNaCl and davey (voice libraries) are missing are noise
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        intents = discord.Intents.none()
        intents.guilds = intents.guild_messages = intents.dm_messages = intents.message_content = True
        return _Client(
            self,
            intents=intents,
            max_ratelimit_timeout=RATE_LIMIT_WAIT_S,
            allowed_mentions=discord.AllowedMentions.none(),
            max_messages=None,  # no message cache: a reply needs only ids
            chunk_guilds_at_startup=False,
            member_cache_flags=discord.MemberCacheFlags.none(),
        )

    def _check_ids(self) -> None:
        for key, values in (("allow_from", self.config.allow_from), ("channels", self.config.channels)):
            for i, value in enumerate(values):
                if not SNOWFLAKE.fullmatch(value):
                    raise ChannelDown(
                        f"discord.{key}[{i}]: {value!r} is not a Discord id (digits): with Developer Mode on,"
                        " right-click the user or channel and choose Copy ID",
                        permanent=True,
                    )

    # --- gateway events ---------------------------------------------------------------------------

    def on_gateway(self, event: str) -> None:
        """The gateway identified, resumed or dropped (discord.py reconnects by itself)."""
        if self._closing or self._stopping:
            return
        if event == "disconnect":
            self.went_down("lost the connection to Discord; reconnecting")
        elif self.client is not None and self.client.user is not None:
            self.came_up(f"as @{self.client.user.name}")

    async def on_message(self, message: discord.Message) -> None:
        """A message the bot can see: a DM, or a mention in a listed server channel, goes to the pipeline."""
        client = self.client
        if client is None or client.user is None or message.author.bot:
            return
        incoming = self._incoming(message, client.user.id)
        if incoming is not None:
            await self.handle(incoming)

    def _incoming(self, message: discord.Message, bot_id: int) -> Incoming | None:
        author, channel = message.author, message.channel
        meta: dict[str, Any] = {"channel_id": str(channel.id)}
        if isinstance(channel, discord.DMChannel):
            text, private, chat_id = message.content, True, str(author.id)
        else:
            reference = message.reference.resolved if message.reference is not None else None
            replied = isinstance(reference, discord.Message) and reference.author.id == bot_id
            if not self.listens_in(channel) or not (replied or any(u.id == bot_id for u in message.mentions)):
                return None
            text, private, chat_id = without_mention(message.content, bot_id), False, str(channel.id)
            meta["reply_to"] = str(message.id)
        if not text.strip():
            return None
        return Incoming(chat_id, str(author.id), author.display_name, text, private, f"message:{message.id}", meta=meta)

    def listens_in(self, channel: object) -> bool:
        """Whether a server channel (or a thread in one) is listed in discord.channels."""
        ids = {str(getattr(channel, "id", "")), str(getattr(channel, "parent_id", "") or "")}
        return bool(ids & set(self.config.channels))

    # --- showing messages ---------------------------------------------------------------------------

    def _where(self, meta: dict[str, Any]) -> discord.PartialMessageable:
        assert self.client is not None, "the Discord channel is not connected"
        return self.client.get_partial_messageable(int(meta["channel_id"]))

    def streamed_reply(self, incoming: Incoming) -> StreamedReply | None:
        """The answer sent at its first words and edited as it grows (a reply to the message, in a server)."""
        if self.client is None:
            return None
        reply_to = incoming.meta.get("reply_to")
        return ReplyStream(self._where(incoming.meta), self.config.edit_interval_s, int(reply_to) if reply_to else None)

    async def say(self, incoming: Incoming, said: Said) -> None:
        """A message in the chat ``incoming`` came from, with its buttons under the last piece."""
        pieces = split_message(said.text)
        where = self._where(incoming.meta)
        for i, piece in enumerate(pieces):
            if i == len(pieces) - 1 and said.buttons:
                await where.send(piece, view=components(said.buttons))
            else:
                await where.send(piece)

    # --- delivery of the outbox ---------------------------------------------------------------------

    def pieces(self, message: OutMessage) -> list[str]:
        """A stored message in pieces within Discord's 2,000 characters."""
        return split_message(message.text)

    async def send_piece(self, message: OutMessage, piece: str) -> str:
        """To the channel a reply belongs in, or as a DM to the user the message names."""
        where = await self._target(message)
        sent = await where.send(piece)
        return str(sent.id)

    def verdict(self, exc: Exception) -> Verdict | None:
        """A refusal gives up; a long rate limit pauses delivery; a network error or a 5xx is retried."""
        if isinstance(exc, _Undeliverable):
            return Verdict("failed", str(exc))
        if isinstance(exc, discord.RateLimited):
            return Verdict("paused", f"Discord asked to wait {exc.retry_after:g} s", exc.retry_after)
        if isinstance(exc, (discord.Forbidden, discord.NotFound)):
            return Verdict("failed", exc.text or str(exc))
        if isinstance(exc, discord.HTTPException) and 400 <= exc.status < 500 and exc.status not in (401, 408):
            return Verdict("failed", exc.text or str(exc))  # refused: retrying will not help
        if isinstance(exc, REQUEST_ERRORS):  # network errors, Discord's 5xx after discord.py's own retries
            return Verdict("retry", _describe(exc))
        return None

    async def _target(self, message: OutMessage) -> discord.abc.Messageable:
        """Where a stored message goes: the channel in its meta (a reply), else a DM to the user it names."""
        if self.client is None:
            raise OSError("not connected to Discord")
        if message.meta.get("channel_id"):
            return self._where(message.meta)
        if not SNOWFLAKE.fullmatch(message.chat_id):
            raise _Undeliverable(f"{message.chat_id!r} is not a Discord user id")
        return await self.client.create_dm(discord.Object(int(message.chat_id)))


class _Client(discord.Client):
    """discord.py's client with its events handed to the channel, and the slash commands on it."""

    def __init__(self, channel: DiscordChannel, **options: Any) -> None:
        super().__init__(**options)
        self.channel = channel
        self.identified = asyncio.Event()
        self.tree = command_tree(self, channel.interactions.command)

    async def on_connect(self) -> None:
        self.identified.set()
        self.channel.on_gateway("connect")

    async def on_resumed(self) -> None:
        self.channel.on_gateway("resumed")

    async def on_disconnect(self) -> None:
        self.channel.on_gateway("disconnect")

    async def on_message(self, message: discord.Message) -> None:
        await self.channel.on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        if interaction.type is discord.InteractionType.component:
            await self.channel.interactions.press(interaction)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        log.exception("discord: handling %s failed", event_method)


class _Undeliverable(Exception):
    """A stored message names no one Discord can reach."""


def _down(exc: BaseException) -> ChannelDown:
    """Why the gateway loop ended, for people (a refused token or intent is permanent)."""
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return ChannelDown(NO_INTENT, permanent=True)
    if isinstance(exc, discord.ConnectionClosed) and exc.code == 4004:
        return ChannelDown(REFUSED, permanent=True)
    if isinstance(exc, discord.ConnectionClosed):
        return ChannelDown(f"Discord closed the gateway ({exc.code}: {exc.reason or 'no reason given'})")
    return ChannelDown(f"cannot reach Discord: {_describe(exc)}")


def _describe(exc: BaseException) -> str:
    with contextlib.suppress(Exception):
        if str(exc):
            return str(exc)
    return type(exc).__name__
