"""The Telegram channel, by concern; this package's ``__init__`` imports nothing, so importing
:mod:`~appliance.channels.telegram.pairing` (the CLI's ``telegram pair``) does not load python-telegram-bot.

- :mod:`~appliance.channels.telegram.pairing`: pairing codes, paired users, the owner's chat (no PTB).
- :mod:`~appliance.channels.telegram.text`: Telegram's limits: splitting long text, button data, chat ids.
- :mod:`~appliance.channels.telegram.stream`: a reply streamed into one message by edits.
- :mod:`~appliance.channels.telegram.commands`: the shared command set and buttons, on Telegram.
- :mod:`~appliance.channels.telegram.channel`: the bot itself: start/stop, who may talk, turns, delivery.
"""
