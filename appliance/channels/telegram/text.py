"""Text and buttons within Telegram's limits: 4096 UTF-16 code units a message, 64 bytes of button data.

A long reply is cut (:func:`appliance.channels.text.split_text`) into messages Telegram accepts.
"""

from __future__ import annotations

import re

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from appliance.channels.commands import Button
from appliance.channels.text import split_text

MESSAGE_LIMIT = 4096  # Telegram's limit for one message, in UTF-16 code units
CALLBACK_DATA_LIMIT = 64  # bytes of a button's callback data


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Cut a text into messages Telegram accepts: at a paragraph, else a line, else a space, else hard."""
    return split_text(text, limit)


def keyboard(rows: list[list[Button]]) -> InlineKeyboardMarkup | None:
    """Buttons as an inline keyboard (None for none: the message then has no keyboard)."""
    if not rows:
        return None
    return InlineKeyboardMarkup([[InlineKeyboardButton(b.label, callback_data=b.data) for b in row] for row in rows])


def choice_keyboard(choices: list[str]) -> InlineKeyboardMarkup | None:
    """One button per answer a reply offers (callback data "say:<answer>", within Telegram's 64 bytes)."""
    usable = [c for c in choices if len(f"say:{c}".encode()) <= CALLBACK_DATA_LIMIT]
    return keyboard([[Button(c, f"say:{c}") for c in usable]]) if usable else None


def chat_ref(chat_id: str) -> int | str:
    """An outbox chat id as the Bot API takes it (numeric ids as numbers, @channel names as they are)."""
    return int(chat_id) if re.fullmatch(r"-?\d+", chat_id) else chat_id
