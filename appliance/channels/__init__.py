"""Channels people talk through: the terminal, the web page and its API (web/), and Telegram (telegram/);
what every chat channel shares (who may talk, the footer, streamed replies, the command set) is in
core.py and commands.py."""
