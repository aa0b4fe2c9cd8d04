"""The WhatsApp channel: the WhatsApp Business Cloud API, a webhook in and the Graph API out.

Meta posts every message to the daemon's ``POST /whatsapp/webhook`` (``channels/web/hooks.py`` checks
the ``X-Hub-Signature-256`` signature, answers 200 at once and hands the events here); replies and
proactive messages go out through ``POST {api_base_url}/{phone_number_id}/messages`` (:mod:`.graph`).
A chat is a phone number (``wa_id``): the person who writes is the chat, as in a private chat.

- Meta re-sends a post it got no 200 for: each message's id (``wamid...``) goes through the base's
  once-only record, so a re-sent text is answered once and a re-sent button press decides nothing twice.
  ``statuses`` callbacks (sent, delivered, read) are dropped; a ``failed`` one marks its outbox row.
- Buttons: approvals and answers with at most 3 choices are WhatsApp reply buttons (titles of at most
  20 characters); more, or longer, are shown as reply codes (``• Approve: reply /approve 3f2a``).
  WhatsApp cannot edit a message: a reply is sent once, complete, and a tap's outcome is a new message.
- Graph errors: 190 (the access token) turns the channel off with the reason until the token is fixed;
  rate limits (130429, 131056, HTTP 429) pause sending; 131047 means the person last wrote more than 24
  hours ago, and WhatsApp delivers nothing but an approved template then: the message is marked failed,
  saying so, instead of being retried for nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

from appliance.channels.base import ChannelDown, ChatChannel, Incoming, Verdict, as_text
from appliance.channels.commands import Said
from appliance.channels.text import split_text
from appliance.channels.whatsapp.graph import (
    TEXT_LIMIT,
    GraphClient,
    GraphError,
    GraphUnreachable,
    buttons_message,
    fits_buttons,
    text_message,
)
from appliance.channels.whatsapp.payload import ButtonPress, Event, Failed, Text
from appliance.outbox import OutMessage
from appliance.ratelimit import RateLimiter

log = logging.getLogger(__name__)

ONLY_TEXT = "I can only read text messages here; please write your request."
WINDOW_CLOSED = (
    "WhatsApp did not deliver it: the person last wrote more than 24 hours ago, and outside that window"
    " WhatsApp only delivers approved template messages (write to the assistant once to open the window again)"
)
TOKEN_PAUSE_S = 300.0  # with the token refused nothing can go out; the messages wait, unchanged


class WhatsAppChannel(ChatChannel):
    """A WhatsApp business number: people write to it, the assistant answers through the Graph API."""

    name: ClassVar[str] = "whatsapp"
    buttons: ClassVar[bool] = True  # reply buttons where they fit (see say); reply codes otherwise

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.graph: GraphClient | None = None
        self._posts: set[asyncio.Task[None]] = set()  # webhook posts being handled
        self._window_logs = RateLimiter(1, 300.0)

    # --- lifecycle ----------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Check the token and the number with the Graph API (a refusal turns the channel off, with why)."""
        cfg = self.config
        self.graph = GraphClient(cfg.api_base_url, cfg.phone_number_id, cfg.access_token)
        try:
            number = await self.graph.phone_number()
        except GraphUnreachable as exc:
            raise ChannelDown(f"cannot reach the Graph API at {cfg.api_base_url}: {exc}") from None
        except GraphError as exc:
            if exc.kind == "token":
                raise ChannelDown(
                    f"WhatsApp refused whatsapp.access_token ({exc}); put a valid token (a system user's"
                    " permanent token) in the secrets file",
                    permanent=True,
                ) from None
            if exc.kind in ("retry", "rate"):
                raise ChannelDown(f"the Graph API failed: {exc}") from None
            raise ChannelDown(
                f"whatsapp.phone_number_id {cfg.phone_number_id!r} cannot be used with this token ({exc})",
                permanent=True,
            ) from None
        shown = number.get("display_phone_number") or cfg.phone_number_id
        verified = number.get("verified_name")
        self.detail = f"as {shown}" + (f" ({verified})" if verified else "")

    async def disconnect(self) -> None:
        """Let the posts being handled finish (briefly), then close the HTTP session."""
        if self._posts:
            _done, pending = await asyncio.wait(set(self._posts), timeout=5.0)
            for task in pending:
                task.cancel()
        if self.graph is not None:
            await self.graph.close()

    @property
    def posts_in_flight(self) -> int:
        """Webhook posts whose events are being handled now."""
        return len(self._posts)

    @property
    def accepting(self) -> bool:
        """Whether webhook posts are taken now (not while stopping: Meta re-sends them later)."""
        return not self._stopping

    # --- what Meta posts ----------------------------------------------------------------------------

    def receive(self, events: list[Event]) -> None:
        """Handle one webhook post's events in the background, in order (the post is answered 200 at once)."""
        task = asyncio.ensure_future(self._handle_events(events))
        self._posts.add(task)
        task.add_done_callback(self._posts.discard)

    async def _handle_events(self, events: list[Event]) -> None:
        for event in events:
            try:
                await self._handle_event(event)
            except Exception:  # one bad event must not cost the others
                log.exception("whatsapp: handling a webhook event failed")

    async def _handle_event(self, event: Event) -> None:
        if isinstance(event, Failed):
            await self._failed(event)
            return
        incoming = Incoming(
            chat_id=event.wa_id,
            user_id=event.wa_id,
            user_name=event.name or event.wa_id,
            text=event.text if isinstance(event, Text) else "",
            private=True,
            remote_id=event.message_id,
        )
        if isinstance(event, Text):
            await self.handle(incoming)
        elif isinstance(event, ButtonPress):
            await self._pressed(incoming, event.data)
        elif not await self.doorkeeper.is_allowed(event.wa_id):
            self.doorkeeper.turned_away(event.wa_id, incoming.user_name)
        elif await self.first_time(event.message_id):  # an image, a voice note: said once per message
            await self.say_or_keep(incoming, Said(ONLY_TEXT))

    async def _pressed(self, incoming: Incoming, data: str) -> None:
        """A reply button: the base decides it once; what a platform shows on the tapped message is a new one."""
        tapped = await self.tap(incoming, data)
        if tapped is None or data.startswith("say:"):
            return  # a repeat of a press already handled, or an answer the turn replies to
        decided = tapped.edit is not None and data.startswith("apr:") and not tapped.alert
        await self.say_or_keep(incoming, tapped.edit if decided and tapped.edit else Said(tapped.notice))

    async def _failed(self, event: Failed) -> None:
        """WhatsApp could not deliver a message it had accepted: its outbox row says why."""
        reason = WINDOW_CLOSED if event.code == 131047 else f"WhatsApp did not deliver it: {event.reason}"
        changed = await self.db.call(self.outbox.mark_undelivered, self.name, event.message_id, reason)
        if self._window_logs.hit(str(event.code)) == 0:
            log.warning("whatsapp: a message to %s was not delivered: %s", event.recipient or "?", reason)
        if not changed:
            log.debug("whatsapp: failed status for %s, not one of the outbox's messages", event.message_id)

    # --- sending ------------------------------------------------------------------------------------

    async def say(self, incoming: Incoming, said: Said) -> None:
        """Send a message with reply buttons when they fit, else as text with reply codes; raise if not sent."""
        await self._send_said(incoming.chat_id, said)

    async def _send_said(self, to: str, said: Said) -> str:
        buttons = [(b.data, b.label) for row in said.buttons for b in row]
        if buttons and fits_buttons(said.text, buttons):
            return await self._send(buttons_message(to, said.text, buttons))
        text = as_text(said).text if buttons else said.text
        sent = ""
        for piece in split_text(text, TEXT_LIMIT):
            sent = await self._send(text_message(to, piece))
        return sent

    async def _send(self, body: dict[str, Any]) -> str:
        """One Graph send; a refused token turns the channel off, a rate limit pauses the outbox."""
        if self.graph is None:
            raise GraphUnreachable("the WhatsApp channel is not connected")
        try:
            return await self.graph.send(body)
        except GraphError as exc:
            if exc.kind == "token":
                self._token_refused(exc)
            elif exc.kind == "rate":
                self.delivery.pause(exc.pause_s)
            raise

    def _token_refused(self, exc: GraphError) -> None:
        reason = f"WhatsApp refused whatsapp.access_token ({exc}); put a valid token in the secrets file and reload"
        if self.problem != reason:
            log.error("whatsapp: %s", reason)
        self.went_down(reason)
        self.delivery.pause(TOKEN_PAUSE_S)

    def pieces(self, message: OutMessage) -> list[str]:
        """A stored message in pieces within WhatsApp's 4,096 characters."""
        return split_text(message.text, TEXT_LIMIT)

    async def send_piece(self, message: OutMessage, piece: str) -> str:
        """One text message to the number the message names."""
        return await self._send(text_message(message.chat_id, piece))

    def verdict(self, exc: Exception) -> Verdict | None:
        """A refused token holds the message (untouched) until it is fixed; a rate limit pauses; a closed
        24-hour window or a refusal gives up; anything transient is retried."""
        if isinstance(exc, GraphUnreachable):
            return Verdict("retry", f"cannot reach the Graph API: {exc}")
        if not isinstance(exc, GraphError):
            return None
        if exc.kind == "token":
            return Verdict("paused", str(exc))
        if exc.kind == "rate":
            return Verdict("paused", str(exc), exc.pause_s)
        if exc.kind == "retry":
            return Verdict("retry", str(exc))
        return Verdict("failed", WINDOW_CLOSED if exc.kind == "window" else str(exc))
