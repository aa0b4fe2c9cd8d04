"""A fake of Slack's Web API and Socket Mode websocket, close enough to the wire for slack_sdk and Bolt.

:class:`FakeSlack` is what tests use: one aiohttp server on 127.0.0.1 that answers the Web API at
``/api/<method>`` and the response URLs at ``/response/<id>`` (slack_web.py: the workspace, the methods,
tokens, recording, Slack's errors, 429s, Block Kit checks) and Socket Mode at ``/link/`` (slack_socket.py:
hello, envelopes, acks, re-delivery, disconnect). This module adds the server's lifecycle, the Events API
payloads and what tests drive it with; it imports both, and they import nothing from it or from each other.

Like Slack, the fake sends the app a ``message`` event for its own posts and edits (``bot_id`` set; edits as
``message_changed``) when it is subscribed to that kind of channel, so a bot that does not ignore its
own messages talks to itself here too. Slash commands and block actions carry a ``response_url``; an
ephemeral answer is kept in :attr:`FakeSlack.ephemeral`, where its buttons can be pressed too.

Tests push what people do (:meth:`FakeSlack.push_dm`, :meth:`FakeSlack.push_mention`,
:meth:`FakeSlack.push_channel_message`, :meth:`FakeSlack.push_command`, :meth:`FakeSlack.push_action`,
:meth:`FakeSlack.push_ephemeral_action`), send envelopes again (:meth:`FakeSlack.redeliver`), close the
websockets with Slack's ``disconnect`` (:meth:`FakeSlack.disconnect`) or without
(:meth:`FakeSlack.drop_connections`), make calls fail (:meth:`FakeSlack.fail_next`: network, 429, 500 or any
Slack error code) or wait (:meth:`FakeSlack.hold`), and read every request (:attr:`FakeSlack.calls`),
acknowledgement (:attr:`FakeSlack.acks`) and message as it looks now (:meth:`FakeSlack.bot_messages`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

from aiohttp import web

from tests.fakes.slack_socket import Connection, SocketMode
from tests.fakes.slack_web import APP_ID, BOT_ID, BOT_USER_ID, TEAM_ID, ApiCall, SlackWeb

__all__ = ["APP_ID", "BOT_ID", "BOT_USER_ID", "TEAM_ID", "ApiCall", "Connection", "FakeSlack"]


class FakeSlack(SlackWeb):
    """The fake server: start it, point the app's Web API base_url at :attr:`base_url`, push what people do."""

    def __init__(
        self,
        bot_token: str = "xoxb-test-bot",
        app_token: str = "xapp-test-app",
        *,
        bot_name: str = "pico",
        subscriptions: tuple[str, ...] = ("app_mention", "message.im", "message.channels"),
    ) -> None:
        super().__init__(bot_token, app_token, bot_name=bot_name, subscriptions=subscriptions)
        self.socket = SocketMode(self)
        self._runner: web.AppRunner | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self, port: int = 0) -> None:
        """Listen on 127.0.0.1 (a free port, or ``port`` to come back where it was)."""
        app = web.Application()
        app.router.add_post("/api/{method}", self._handle_api)
        app.router.add_get("/api/{method}", self._handle_api)
        app.router.add_get("/link/", self.socket.serve)
        app.router.add_post("/response/{url_id}", self._handle_response_url)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Stop listening; open websockets are closed (the app sees the network go away). State is kept:
        :meth:`start` with the same port brings the same workspace back."""
        for gate in self._holds.values():
            gate.set()
        await self.drop_connections()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSlack:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- what people do (each returns the envelope, or the event's message) -----------------------

    def push_dm(self, user_id: str, text: str, *, thread_ts: str | None = None) -> dict[str, Any]:
        """A user writes to the bot in their direct-message conversation (``message.im``); returns the message."""
        channel = self.im_with(user_id)["id"]
        message = self._user_message(user_id, channel, text, thread_ts)
        if "message.im" in self.subscriptions:
            self._push_event({**message, "channel_type": "im"})
        return message

    def push_mention(self, user_id: str, channel_id: str, text: str, *, thread_ts: str | None = None) -> dict[str, Any]:
        """A user mentions the bot in a channel: an ``app_mention`` and, when subscribed, the ``message`` too."""
        self.add_channel(channel_id)
        if f"<@{BOT_USER_ID}>" not in text:
            text = f"<@{BOT_USER_ID}> {text}"
        message = self._user_message(user_id, channel_id, text, thread_ts)
        if "app_mention" in self.subscriptions and self.conversations[channel_id]["is_member"]:
            mention = {k: v for k, v in message.items() if k not in ("channel_type", "parent_user_id")}
            self._push_event({**mention, "type": "app_mention"})
        if "message.channels" in self.subscriptions and self.conversations[channel_id]["is_member"]:
            self._push_event({**message, "channel_type": "channel"})
        return message

    def push_channel_message(
        self, user_id: str, channel_id: str, text: str, *, thread_ts: str | None = None
    ) -> dict[str, Any]:
        """A user writes in a channel without mentioning the bot (delivered only with ``message.channels``)."""
        self.add_channel(channel_id)
        message = self._user_message(user_id, channel_id, text, thread_ts)
        if "message.channels" in self.subscriptions and self.conversations[channel_id]["is_member"]:
            self._push_event({**message, "channel_type": "channel"})
        return message

    def push_command(self, user_id: str, channel_id: str, text: str = "", *, command: str = "/pico") -> dict[str, Any]:
        """A user runs a slash command in a channel or DM (``slash_commands``, accepts a response payload)."""
        user = self.add_user(user_id)
        conversation = self.conversations.get(channel_id) or self.add_channel(channel_id)
        url_id = self._response_url(channel_id, user_id, None)
        payload = {
            "token": "verification-token",
            "team_id": TEAM_ID,
            "team_domain": "picotest",
            "channel_id": channel_id,
            "channel_name": "directmessage" if conversation["is_im"] else conversation["name"],
            "user_id": user_id,
            "user_name": user["name"],
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": f"http://127.0.0.1:{self.port}/response/{url_id}",
            "trigger_id": f"{next(self._ids)}.{TEAM_ID}.trigger",
        }
        return self.socket.push("slash_commands", payload, accepts_response_payload=True)

    def push_action(self, user_id: str, channel_id: str, message_ts: str, action_id: str) -> dict[str, Any]:
        """A user presses the button ``action_id`` on one of the bot's messages (``block_actions``)."""
        return self._push_press(user_id, channel_id, self.messages[channel_id][message_ts], action_id, False)

    def push_ephemeral_action(self, user_id: str, message_ts: str, action_id: str) -> dict[str, Any]:
        """A user presses a button on an ephemeral message (one only they see, e.g. a slash command's answer)."""
        message = self.ephemeral[message_ts]
        return self._push_press(user_id, message["channel"], message, action_id, True)

    def _push_press(
        self, user_id: str, channel_id: str, message: dict[str, Any], action_id: str, ephemeral: bool
    ) -> dict[str, Any]:
        user = self.add_user(user_id)
        found = [
            (block, element)
            for block in message.get("blocks") or []
            for element in block.get("elements") or []
            if element.get("action_id") == action_id
        ]
        if not found:
            raise AssertionError(f"no button {action_id!r} on message {message['ts']} in {channel_id}")
        block, button = found[0]
        url_id = self._response_url(channel_id, user_id, message["ts"], ephemeral=ephemeral)
        conversation = self.conversations[channel_id]
        action = {
            "action_id": action_id,
            "block_id": block.get("block_id", ""),
            "text": button["text"],
            "type": button["type"],
            "action_ts": self._next_ts(),
        }
        if "value" in button:
            action["value"] = button["value"]
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": {"id": user_id, "username": user["name"], "name": user["name"], "team_id": TEAM_ID},
            "api_app_id": APP_ID,
            "token": "verification-token",
            "container": {
                "type": "message",
                "message_ts": message["ts"],
                "channel_id": channel_id,
                "is_ephemeral": ephemeral,
            },
            "trigger_id": f"{next(self._ids)}.{TEAM_ID}.trigger",
            "team": {"id": TEAM_ID, "domain": "picotest"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel_id, "name": "directmessage" if conversation["is_im"] else conversation["name"]},
            "state": {"values": {}},
            "response_url": f"http://127.0.0.1:{self.port}/response/{url_id}",
            "actions": [action],
        }
        if not ephemeral:  # Slack leaves the message out of presses on ephemeral ones
            payload["message"] = message
        return self.socket.push("interactive", payload, accepts_response_payload=False)

    async def redeliver(self, envelope: dict[str, Any]) -> dict[str, Any]:
        """Send an envelope again as Slack does when its ack did not arrive in time; returns the new copy."""
        return await self.socket.redeliver(envelope)

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Slack's ``disconnect`` message on every open connection (the client is expected to reconnect)."""
        await self.socket.disconnect(reason)

    async def drop_connections(self) -> None:
        """Close every websocket without a ``disconnect`` message (a network blip, or the fake stopping)."""
        await self.socket.drop()

    # --- what tests read ----------------------------------------------------------------------

    @property
    def envelopes(self) -> list[dict[str, Any]]:
        """Every envelope sent, in order (re-deliveries too)."""
        return self.socket.envelopes

    @property
    def acks(self) -> dict[str, dict[str, Any] | None]:
        """Envelope id -> the payload of the app's ack (None when it had none)."""
        return self.socket.acks

    @property
    def connects(self) -> int:
        """Websocket connections accepted so far."""
        return self.socket.connects

    @property
    def connected(self) -> int:
        """Websockets open now."""
        return self.socket.connected

    def bot_messages(self, channel_id: str, *, thread_ts: str | None = None) -> list[dict[str, Any]]:
        """The bot's messages in a conversation as they look now (after edits); in one thread when given."""
        found = [m for m in self.messages.get(channel_id, {}).values() if m.get("bot_id") == BOT_ID]
        if thread_ts is not None:
            found = [m for m in found if m.get("thread_ts") == thread_ts]
        return found

    def sent_texts(self, channel_id: str) -> list[str]:
        """Texts of the bot's messages in a conversation, in order, as they look now."""
        return [m["text"] for m in self.bot_messages(channel_id)]

    def unacked(self) -> list[str]:
        """Ids of the envelopes the app has not acknowledged."""
        return self.socket.unacked()

    async def wait_for(self, predicate: Any, timeout: float = 5.0, what: str = "the condition") -> None:
        """Wait until ``predicate()`` is true (AssertionError after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.05))

    async def acked(self, envelope: dict[str, Any], timeout: float = 5.0) -> dict[str, Any] | None:
        """Wait for the app's ack of an envelope; returns the ack's payload (None when it had none)."""
        envelope_id = envelope["envelope_id"]
        await self.wait_for(lambda: envelope_id in self.acks, timeout, f"the ack of {envelope_id}")
        return self.acks[envelope_id]

    # --- events -------------------------------------------------------------------------------

    def _user_message(self, user_id: str, channel_id: str, text: str, thread_ts: str | None) -> dict[str, Any]:
        self.add_user(user_id)
        ts = self._next_ts()
        message: dict[str, Any] = {
            "type": "message",
            "client_msg_id": str(uuid.uuid4()),
            "text": text,
            "user": user_id,
            "ts": ts,
            "team": TEAM_ID,
            "channel": channel_id,
            "event_ts": ts,
            "blocks": [
                {
                    "type": "rich_text",
                    "block_id": ts[-4:],
                    "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}],
                }
            ],
        }
        if thread_ts is not None:
            parent = self.messages[channel_id].get(thread_ts)
            message["thread_ts"] = thread_ts
            message["parent_user_id"] = (parent or {}).get("user", user_id)
            if parent is not None:
                parent["reply_count"] = parent.get("reply_count", 0) + 1
        self.messages[channel_id][ts] = {k: v for k, v in message.items() if k not in ("channel", "event_ts")}
        return message

    def _push_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """Wrap an event as the Events API does (``event_callback``) and send it in an ``events_api`` envelope."""
        event_id = f"Ev{next(self._ids):08d}"
        payload = {
            "token": "verification-token",
            "team_id": TEAM_ID,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": TEAM_ID,
                    "user_id": BOT_USER_ID,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"1-{event['type']}-{TEAM_ID}-{event.get('channel', '')}",
        }
        return self.socket.push("events_api", payload, accepts_response_payload=False)
