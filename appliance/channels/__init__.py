"""Channels people talk through: the terminal, the web page and its API (web/), and Telegram."""
