"""Text and buttons within Discord's limits: 2,000 characters a message; 5 rows of 5 buttons, 80-character
labels, 100-character custom ids.

Buttons are sent as message components through a :class:`discord.ui.View` that is stopped before it is
sent: discord.py then keeps no view (and no callback) per message in memory, and every press arrives
as a plain interaction that :mod:`~appliance.channels.discord.slash` answers from the button's data.
"""

from __future__ import annotations

import logging
import re

import discord

from appliance.channels.commands import Button
from appliance.channels.text import split_text

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 2000  # characters of one message's content
ROWS, PER_ROW = 5, 5  # action rows of a message, buttons in a row
LABEL_LIMIT, CUSTOM_ID_LIMIT = 80, 100


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Cut a text into messages Discord accepts: at a paragraph, else a line, else a space, else hard."""
    return split_text(text, limit)


def without_mention(text: str, bot_id: int) -> str:
    """A message's text without the bot's mention (``<@id>``, or ``<@!id>`` from older clients)."""
    return re.sub(rf"<@!?{bot_id}>", "", text).strip()


def _rows(rows: list[list[Button]]) -> list[list[Button]]:
    """Buttons in at most 5 rows of 5: rows kept when they fit, else packed (devices: one per row elsewhere)."""
    usable = [[b for b in row if len(b.data) <= CUSTOM_ID_LIMIT] for row in rows]
    usable = [row for row in usable if row]
    if len(usable) <= ROWS and all(len(row) <= PER_ROW for row in usable):
        return usable
    flat = [b for row in usable for b in row]
    if len(flat) > ROWS * PER_ROW:
        log.warning("discord: %d buttons do not fit a message; the first %d are shown", len(flat), ROWS * PER_ROW)
    flat = flat[: ROWS * PER_ROW]
    return [flat[i : i + PER_ROW] for i in range(0, len(flat), PER_ROW)]


def _style(data: str) -> discord.ButtonStyle:
    if data.startswith("apr:approve:"):
        return discord.ButtonStyle.success
    if data.startswith("apr:deny:"):
        return discord.ButtonStyle.danger
    return discord.ButtonStyle.secondary


def components(rows: list[list[Button]]) -> discord.ui.View:
    """Buttons as message components (an empty view removes a message's buttons when it is edited)."""
    view = discord.ui.View(timeout=None)
    for number, row in enumerate(_rows(rows)):
        for button in row:
            label = button.label if len(button.label) <= LABEL_LIMIT else button.label[: LABEL_LIMIT - 1] + "…"
            view.add_item(discord.ui.Button(label=label, custom_id=button.data, style=_style(button.data), row=number))
    view.stop()  # a layout only: discord.py stores no view for it, presses come as interactions
    return view


def choice_components(choices: list[str]) -> discord.ui.View | None:
    """One button per answer a reply offers ("say:<answer>"); None without answers."""
    return components([[Button(c, f"say:{c}") for c in choices]]) if choices else None
