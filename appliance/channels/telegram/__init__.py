"""The Telegram channel, by concern; this package's ``__init__`` imports nothing, so naming it (the registry,
``channels pair telegram``) does not load python-telegram-bot. Pairing is the shared one
(:mod:`appliance.channels.pairing`), as is everything else a chat channel does (:mod:`appliance.channels.base`).

- :mod:`~appliance.channels.telegram.text`: Telegram's limits: splitting long text, button data, chat ids.
- :mod:`~appliance.channels.telegram.stream`: a reply streamed into one message by edits.
- :mod:`~appliance.channels.telegram.channel`: the bot itself: updates in, messages, edits and buttons out.
"""
