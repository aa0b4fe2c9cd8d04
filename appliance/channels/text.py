"""Long texts cut into the messages a platform accepts (Telegram: 4096, Discord: 2000), no platform library needed.

Limits are counted in UTF-16 code units, as Telegram counts them; for a platform that counts code points
(Discord) that is the safe side, since a character is never fewer units than code points. A text is cut
at a paragraph, else a line, else a space, else hard; the footer (:func:`appliance.channels.core.footer`)
simply ends the last piece.
"""

from __future__ import annotations


def within(text: str, limit: int) -> str:
    """The longest prefix of ``text`` that fits ``limit`` UTF-16 code units."""
    units = 0
    for i, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            return text[:i]
    return text


def split_text(text: str, limit: int) -> list[str]:
    """Cut a text into pieces of at most ``limit`` units: at a paragraph, else a line, else a space, else hard."""
    pieces: list[str] = []
    rest = text.strip()
    while len(within(rest, limit)) < len(rest):
        window = within(rest, limit)
        cut = len(window)
        for separator in ("\n\n", "\n", " "):
            at = window.rfind(separator)
            if at >= len(window) // 4:  # an earlier boundary would leave a stub of a message
                cut = at
                break
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces
