"""Channels people talk through: terminal now; web and Telegram later."""
