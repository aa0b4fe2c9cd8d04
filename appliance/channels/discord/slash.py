"""The command set as Discord slash commands, and button presses, both arriving as interactions.

Each command of :data:`~appliance.channels.commands.COMMANDS` is an application command (registered
with ``PUT /applications/{id}/commands`` by discord.py's :class:`~discord.app_commands.CommandTree`);
those that take words (``/cloud TEXT``, ``/approve ID``, ``/private on|off``) have one string option.
An interaction must be acknowledged within 3 s: a command answers with its first message when it is
ready in time, else it defers ("thinking…") and edits that message when done; more messages follow as
follow-ups. ``/cloud TEXT`` and ``/local TEXT`` acknowledge with the question and answer it as a reply
of its own, streamed like any other.

A press (a component interaction) goes to :meth:`~appliance.channels.base.ChatChannel.tap`, which lets
only allowed people in and runs a press Discord delivers twice (the same interaction id) once; the
pressed message is then edited in place (the devices menu, an approval card saying who decided).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from appliance.channels.base import Incoming
from appliance.channels.commands import COMMANDS, Said
from appliance.channels.discord.stream import REQUEST_ERRORS
from appliance.channels.discord.text import components, split_message

if TYPE_CHECKING:
    from appliance.channels.discord.channel import DiscordChannel

log = logging.getLogger(__name__)

ACK_WITHIN_S = 2.0  # Discord wants an answer within 3 s; slower commands defer first
# The commands that take words: option name, what it is (Discord shows both while typing).
OPTIONS = {
    "approve": ("id", "the waiting device write to approve; empty: list what waits"),
    "local": ("text", "answer this on the Pi (empty: the next message)"),
    "cloud": ("text", "answer this with the cloud model (empty: the next message)"),
    "private": ("mode", "on: this chat never leaves the Pi; off: as configured"),
    "tasks": ("action", "pause, resume or cancel and a task id (cancel 7); empty: list the tasks"),
    "schedule": ("action", "pause, resume or cancel and a job id (pause bins); empty: list the jobs"),
}
ASKING = ("local", "cloud")  # with words, these run a turn: its answer is a message of its own
ELSEWHERE = "I answer here only in direct messages and in the channels listed in discord.channels."


def command_tree(client: discord.Client, run: Callable[[discord.Interaction, str, str], Awaitable[None]]) -> Any:
    """The slash commands on ``client``: each calls ``run(interaction, name, words)``."""
    tree: app_commands.CommandTree[discord.Client] = app_commands.CommandTree(client)
    for name, about in COMMANDS:
        option = OPTIONS.get(name)
        callback = _with_words(name, run) if option else _bare(name, run)
        if option:
            callback = app_commands.describe(words=option[1])(app_commands.rename(words=option[0])(callback))
        if name == "private":
            on_off = [app_commands.Choice(name=v, value=v) for v in ("on", "off")]
            callback = app_commands.choices(words=on_off)(callback)
        tree.add_command(app_commands.Command(name=name, description=about, callback=callback))
    return tree


def _bare(name: str, run: Callable[[discord.Interaction, str, str], Awaitable[None]]) -> Any:
    async def command(interaction: discord.Interaction) -> None:
        await run(interaction, name, "")

    return command


def _with_words(name: str, run: Callable[[discord.Interaction, str, str], Awaitable[None]]) -> Any:
    async def command(interaction: discord.Interaction, words: str | None = None) -> None:
        await run(interaction, name, words or "")

    return command


def _messages(said: list[Said]) -> list[tuple[str, discord.ui.View | None]]:
    """What to say as Discord messages: each text in pieces, its buttons under the last piece."""
    found: list[tuple[str, discord.ui.View | None]] = []
    for one in said:
        pieces = split_message(one.text) or ["…"]
        found += [(piece, None) for piece in pieces[:-1]]
        found.append((pieces[-1], components(one.buttons) if one.buttons else None))
    return found


def _view(view: discord.ui.View | None) -> dict[str, Any]:
    return {"view": view} if view is not None else {}


class Interactions:
    """Slash commands and button presses of one Discord channel."""

    def __init__(self, channel: DiscordChannel) -> None:
        self.channel = channel

    def incoming(self, interaction: discord.Interaction, text: str = "") -> Incoming:
        """Who and where, as the shared pipeline takes it (a DM's chat is the person)."""
        user, channel_id = interaction.user, interaction.channel_id
        private = interaction.guild_id is None
        return Incoming(
            chat_id=str(user.id) if private else str(channel_id),
            user_id=str(user.id),
            user_name=user.display_name,
            text=text,
            private=private,
            remote_id=f"interaction:{interaction.id}",
            meta={"channel_id": str(channel_id)},
        )

    async def command(self, interaction: discord.Interaction, name: str, words: str) -> None:
        """A slash command: allowed people, once, in a DM or a listed channel; answered within Discord's 3 s."""
        channel = self.channel
        incoming = self.incoming(interaction, f"/{name} {words}".strip())
        if not await channel.doorkeeper.is_allowed(incoming.user_id):
            channel.doorkeeper.turned_away(incoming.user_id, incoming.user_name)
            return  # a stranger gets nothing, not even an answer to the interaction
        if not await channel.first_time(incoming.remote_id):
            return
        if not incoming.private and not channel.listens_in(interaction.channel):
            await self._respond(interaction, ELSEWHERE, ephemeral=True)
            return
        if name in ASKING and words:
            await self._respond(interaction, f"/{name}: {words}")
            await self._say_all(incoming, await channel.command(incoming, name, words.split()))
            return
        task = asyncio.ensure_future(channel.command(incoming, name, words.split()))
        done, _ = await asyncio.wait({task}, timeout=ACK_WITHIN_S)
        if not done:
            await self._defer(interaction)
        said = _messages(await task)
        try:
            first, view = said[0] if said else ("Done.", None)
            if done:
                await interaction.response.send_message(first, **_view(view))
            else:
                await interaction.edit_original_response(content=first, view=view)
            for text, view in said[1:]:
                await interaction.followup.send(text, **_view(view))
        except REQUEST_ERRORS as exc:
            log.warning("discord: answering /%s failed (%s); it goes to the channel instead", name, exc)
            await self._say_all(incoming, await task)

    async def press(self, interaction: discord.Interaction) -> None:
        """A button press: the shared tap (allowed people, once), the pressed message edited in place."""
        raw: Any = interaction.data or {}
        data = raw.get("custom_id")
        if not isinstance(data, str):
            return
        tapped = await self.channel.tap(self.incoming(interaction), data)
        if tapped is None:
            return  # Discord delivered this press again: it was answered the first time
        message = interaction.message
        try:
            if data.startswith("say:") and message is not None:  # the answer is said; its buttons go away
                shown = f"{message.content}\n\n{tapped.notice}"[-2000:]
                await interaction.response.edit_message(content=shown, view=components([]))
            elif tapped.edit is not None:
                edit = tapped.edit
                content = split_message(edit.text)[0] if edit.text.strip() else "…"
                await interaction.response.edit_message(content=content, view=components(edit.buttons))
            else:
                await interaction.response.send_message(tapped.notice[:2000], ephemeral=True)
        except REQUEST_ERRORS as exc:
            log.info("discord: answering a button press failed: %s", exc)

    async def _say_all(self, incoming: Incoming, said: list[Said]) -> None:
        for one in said:
            await self.channel.say_or_keep(incoming, one)

    async def _respond(self, interaction: discord.Interaction, text: str, *, ephemeral: bool = False) -> None:
        try:
            await interaction.response.send_message(text, ephemeral=ephemeral)
        except REQUEST_ERRORS as exc:
            log.info("discord: answering an interaction failed: %s", exc)

    async def _defer(self, interaction: discord.Interaction) -> None:
        try:
            await interaction.response.defer(thinking=True)
        except REQUEST_ERRORS as exc:
            log.info("discord: deferring an interaction failed: %s", exc)
