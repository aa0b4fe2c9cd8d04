"""Slack's text both ways, and messages as Block Kit: no Slack library needed.

Out: a text is escaped for mrkdwn (``&``, ``<``, ``>``: so that a model's ``<!channel>`` pings nobody and
``a < b`` stays text), cut into pieces of at most 3,000 characters (a section block's limit, and under
the 4,000 Slack advises per message) at a paragraph, else a line, else a space, and shown as one
section; buttons follow in actions blocks (25 at most each), the button's data in its ``value`` and an
``action_id`` of ``pico:<n>`` (unique in the message, and what the app listens to).
In: Slack writes mentions as ``<@U123>``, links as ``<https://…|label>`` and escapes ``& < >``; the
assistant reads plain text, without its own mention.
"""

from __future__ import annotations

import re
from typing import Any

from appliance.channels.commands import Button, Said
from appliance.channels.text import split_text

MESSAGE_LIMIT = 3_000  # characters of one message we send (a section block's text limit)
ACTIONS_PER_BLOCK = 25  # buttons in one actions block
LABEL_LIMIT = 75  # characters of a button's label
VALUE_LIMIT = 2_000  # characters of a button's value
ACTION_PREFIX = "pico:"  # every button's action_id starts with it

_LINK = re.compile(r"<([^<>|]+)(?:\|([^<>]*))?>")
_ENTITY = re.compile(r"&(amp|lt|gt);")
_PARTIAL_ENTITY = re.compile(r"&(?:a|am|amp|l|lt|g|gt)?$")  # an entity a hard cut split


def escape(text: str) -> str:
    """Text as mrkdwn shows it literally (Slack's three escapes; nothing else is special)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """The inverse of :func:`escape` (what is left of a text to send, stored back as plain text)."""
    return _ENTITY.sub(lambda m: {"amp": "&", "lt": "<", "gt": ">"}[m.group(1)], text)


def from_slack(text: str, bot_user_id: str = "") -> str:
    """What a person wrote, as plain text: the app's own mention removed, other mentions and links readable."""

    def plain(match: re.Match[str]) -> str:
        target, label = match.group(1), match.group(2)
        if target.startswith("@"):  # a user: <@U123> or <@U123|name>
            return "" if target[1:] == bot_user_id else f"@{label or target[1:]}"
        if target.startswith("#"):  # a channel: <#C123|general>
            return f"#{label or target[1:]}"
        if target.startswith("!"):  # <!here>, <!channel>, <!subteam^S1|@team>
            return f"@{label.lstrip('@') if label else target[1:].split('^')[0]}"
        if label and label not in target:
            return f"{label} ({target})"
        return target.removeprefix("mailto:")

    text = unescape(_LINK.sub(plain, text))
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """An escaped text cut into pieces of at most ``limit`` characters (the shared cut: a paragraph, a line,
    a space, else hard), never inside an ``&amp;``."""
    pieces = split_text(text, limit - 4)  # room for an entity's start moved to the next piece
    for i in range(len(pieces) - 1):
        cut = _PARTIAL_ENTITY.search(pieces[i])
        if cut is not None:
            pieces[i], pieces[i + 1] = pieces[i][: cut.start()], pieces[i][cut.start() :] + pieces[i + 1]
    return pieces


def section(text: str) -> dict[str, Any]:
    """A section block showing an (escaped) mrkdwn text."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def button_blocks(rows: list[list[Button]]) -> list[dict[str, Any]]:
    """Buttons as actions blocks: all rows in order, 25 to a block (Slack wraps them on narrow screens)."""
    elements: list[dict[str, Any]] = []
    for button in (b for row in rows for b in row):
        if len(button.data) > VALUE_LIMIT:
            continue
        element: dict[str, Any] = {
            "type": "button",
            "action_id": f"{ACTION_PREFIX}{len(elements)}",
            "text": {"type": "plain_text", "text": _label(button.label), "emoji": True},
            "value": button.data,
        }
        if button.data.startswith("apr:approve:"):
            element["style"] = "primary"
        elif button.data.startswith("apr:deny:"):
            element["style"] = "danger"
        elements.append(element)
    return [
        {"type": "actions", "block_id": f"pico-buttons-{i // ACTIONS_PER_BLOCK}", "elements": elements[i : i + 25]}
        for i in range(0, len(elements), ACTIONS_PER_BLOCK)
    ]


def choice_buttons(choices: list[str]) -> list[list[Button]]:
    """One button per answer a reply offers ("say:<answer>": a tap says it)."""
    return [[Button(c, f"say:{c}") for c in choices]] if choices else []


def messages(said: Said) -> list[tuple[str, list[dict[str, Any]]]]:
    """A text with buttons as the messages that show it: (mrkdwn text, blocks); the buttons go under the last."""
    pieces = split_message(escape(said.text)) or [" "]
    shown = [(piece, [section(piece)]) for piece in pieces]
    if said.buttons:
        last, blocks = shown[-1]
        shown[-1] = (last, blocks + button_blocks(said.buttons))
    return shown


def _label(label: str) -> str:
    label = label.strip() or "?"
    return label if len(label) <= LABEL_LIMIT else label[: LABEL_LIMIT - 1] + "…"
