"""Logging for every command: stdlib logging to one stream, and never a bot token in a line.

A Bot API URL holds the bot's token (``.../bot<token>/getUpdates``), and two libraries log such URLs:
httpx, which python-telegram-bot talks through, logs every request at INFO ("HTTP Request: POST
<url>"; httpcore adds its own lines at DEBUG), and python-telegram-bot itself logs its base URLs at
DEBUG. So the ``httpx`` and ``httpcore`` loggers are held at WARNING whatever ``log_level`` says (the
daemon logs at INFO, which would put the token in the journal with every poll), and every handler
redacts ``bot<token>`` from whatever it writes, tracebacks included, for the lines that remain.
"""

from __future__ import annotations

import logging
import re
from typing import TextIO

FORMAT = "%(levelname)s %(name)s: %(message)s"
QUIET = ("httpx", "httpcore")  # they log request URLs: held at WARNING
BOT_TOKEN = re.compile(r"bot\d+:[A-Za-z0-9_-]+")  # as in https://api.telegram.org/bot123456:ABC.../getMe
REDACTED = "bot[redacted]"


class RedactBotTokens(logging.Filter):
    """A handler filter: a Bot API token in a record's message or traceback becomes ``bot[redacted]``."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = BOT_TOKEN.sub(REDACTED, message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = BOT_TOKEN.sub(REDACTED, record.exc_text)
        if record.stack_info:
            record.stack_info = BOT_TOKEN.sub(REDACTED, record.stack_info)
        return True


def daemon_level(log_level: str) -> str:
    """The level `serve` logs at for a config ``log_level``: at least INFO, since a daemon's state changes
    (a device switched, a task done) belong in its journal; a reload sets it again with this."""
    return "INFO" if log_level == "warning" else log_level.upper()


def configure(level: str, stream: TextIO) -> None:
    """Log at ``level`` (a config log_level) to ``stream``; URL-logging libraries quiet, tokens redacted."""
    logging.basicConfig(level=level.upper(), stream=stream, format=FORMAT)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactBotTokens) for f in handler.filters):
            handler.addFilter(RedactBotTokens())
