"""The Discord channel, by concern; this package's ``__init__`` imports nothing, so discord.py is loaded only
when the registry builds the channel (``discord.enabled``).

- :mod:`~appliance.channels.discord.text`: Discord's limits: 2,000 characters a message, buttons as components.
- :mod:`~appliance.channels.discord.stream`: a reply streamed into one message by edits.
- :mod:`~appliance.channels.discord.slash`: the command set as slash commands, and button presses.
- :mod:`~appliance.channels.discord.channel`: the bot itself: the gateway, who may talk, delivery.
"""
