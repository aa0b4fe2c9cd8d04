"""The web face: LAN status page, web chat and JSON API over aiohttp."""
