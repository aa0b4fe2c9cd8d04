"""The e-mail channel, by concern; this package's ``__init__`` imports nothing, so neither aioimaplib nor
aiosmtplib is loaded unless the channel is enabled (the registry imports :mod:`.channel` then).

- :mod:`~appliance.channels.email.message`: reading a mail (sender, new text, thread, attachments,
  machine-sent or not) and writing answers and new mails (plain text + HTML); standard library only.
- :mod:`~appliance.channels.email.imap`: one IMAP connection: unread mail, flags, IDLE or polling.
- :mod:`~appliance.channels.email.server`: where and how to log in to a mail server (IMAP's and SMTP's).
- :mod:`~appliance.channels.email.smtp`: submitting a mail; what a refusal means.
- :mod:`~appliance.channels.email.channel`: the channel itself: who, once, answers in the thread, delivery.
"""
