"""The Slack channel, by concern; this package's ``__init__`` imports nothing, so the daemon without Slack
(and ``picoagent chat``) never loads slack_bolt or slack_sdk.

- :mod:`~appliance.channels.slack.text`: Slack's text both ways (mrkdwn escaping, mentions and links in
  what people write), long texts cut under a section block's limit, Block Kit messages with buttons.
- :mod:`~appliance.channels.slack.stream`: a reply streamed into one message with ``chat.update``.
- :mod:`~appliance.channels.slack.channel`: the app itself: Socket Mode, events, the slash command,
  button presses, delivery of the outbox.
"""
