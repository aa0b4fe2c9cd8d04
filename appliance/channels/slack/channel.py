"""The Slack channel: Bolt for Python (AsyncApp) over Socket Mode, inside the daemon's lifecycle.

Socket Mode means no public URL: the app-level token (``xapp-``) opens a websocket to Slack
(``apps.connections.open``), Slack pushes events, slash commands and button presses through it, and the
app acknowledges each envelope; everything the app says goes through the Web API with the bot token
(``xoxb-``). Connecting checks both tokens first (``auth.test``, ``apps.connections.open``): a token
Slack refuses leaves the channel off with "Slack refused slack.bot_token (invalid_auth)" as its problem;
no network is retried in the background. Once connected, slack_sdk's client reconnects by itself (a
``disconnect`` message, a dropped socket); the channel counts as up while its websocket is open.

What people can do:

- **Direct messages** to the app: every message is for the assistant; a thread in the DM is a
  session of its own.
- **Mentions** (``@pico what is…``) in a channel the app was added to (only those in ``slack.channels``
  when it lists any): the answer goes into the message's thread, and the thread is the session
  (``<channel>:<thread ts>``). A later message in that thread is answered without a new mention.
- **The slash command** (one, e.g. ``/pico``, since a Slack app registers each command by hand):
  ``/pico status``, ``/pico devices``, ``/pico approve``... the first word is the command; a command
  registered under a command's own name (``/status``) works too. Answers are shown only to whoever
  typed it (Slack's ephemeral response); typed ``/status`` in a DM works as in every channel.
- **Buttons** (Block Kit) for devices, approvals and offered answers; a tap runs once even when Slack
  re-delivers the envelope (the press is recorded by its ``action_ts``).

Replies stream into one message (:mod:`.stream`), edited at most once per ``slack.edit_interval_s``.
Proactive messages and replies that could not be shown come from the outbox: a user id as the target
opens the DM first (``conversations.open``); a 429 pauses delivery for its Retry-After.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, ClassVar

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from slack_sdk.webhook.async_client import AsyncWebhookClient

from appliance.channels.base import ChannelDown, ChatChannel, Incoming, Verdict
from appliance.channels.commands import Said
from appliance.channels.core import StreamedReply
from appliance.channels.pairing import PAIRING_CODE
from appliance.channels.slack.stream import NETWORK_ERRORS, SlackReply, error_of, retry_after_s
from appliance.channels.slack.text import ACTION_PREFIX, from_slack, messages, unescape
from appliance.config import SlackConfig
from appliance.outbox import Outbox, OutMessage
from appliance.runtime import Runtime

log = logging.getLogger(__name__)
sdk_log = logging.getLogger("appliance.channels.slack.sdk")  # Bolt's and slack_sdk's own lines

CONNECT_TIMEOUT_S = 20.0  # from the websocket's URL to Slack's hello
CALL_TIMEOUT_S = 15  # one Web API call
NAMES_KEPT = 500  # display names remembered
# Slack's answers that mean the token itself is refused: retrying cannot help.
REFUSED = {
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
    "missing_scope",
    "no_permission",
    "team_access_not_granted",
}
# Slack's answers that mean this message can never be delivered as it is.
UNDELIVERABLE = {
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "user_not_found",
    "user_disabled",
    "cannot_dm_bot",
    "messages_tab_disabled",
    "msg_too_long",
    "no_text",
    "invalid_blocks",
    "invalid_blocks_format",
    "restricted_action",
    "restricted_action_read_only_channel",
    "restricted_action_thread_only_channel",
    "invalid_arguments",
}
DIRECT = re.compile(r"[UW][A-Z0-9]+")  # a user id: proactive messages to it go to the DM with the app


def slash_command(command: str, text: str, known: set[str]) -> tuple[str, list[str]]:
    """(command name, words) of a slash command: ``/status`` itself, or ``/pico status`` (bare: help)."""
    name = command.lstrip("/").lower()
    words = text.split()
    if name in known:
        return name, words
    if not words:
        return "help", []
    return words[0].lstrip("/").lower(), words[1:]


class SlackChannel(ChatChannel):
    """The Slack app: who may talk, DMs, mentions in threads, the slash command, buttons, delivery."""

    name: ClassVar[str] = "slack"
    buttons: ClassVar[bool] = True
    ping_interval_s: ClassVar[float] = 10.0  # Socket Mode pings; a dead socket is noticed within a few

    def __init__(
        self, config: SlackConfig, runtime: Runtime, outbox: Outbox, *, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(config, runtime, outbox, clock=clock)
        self.config: SlackConfig = config
        self.web: AsyncWebClient | None = None  # the Web API with the bot token
        self.handler: AsyncSocketModeHandler | None = None
        self.bot_user_id = ""
        self._socket: Any = None  # the websocket Slack last said hello on
        self._hello = asyncio.Event()
        self._names: dict[str, str] = {}  # user id -> display name
        self._dms: dict[str, str] = {}  # user id -> the DM channel with the app
        self.handling = 0  # Bolt listeners running now (what the app received and is still working on)

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        self.handling += 1
        try:
            yield
        finally:
            self.handling -= 1

    @property
    def up(self) -> bool:
        """Connected, and the websocket Slack greeted is still open (slack_sdk reconnects when it is not)."""
        return super().up and self._socket is not None and not self._socket.closed

    # --- lifecycle -----------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Check both tokens, open the Socket Mode websocket and wait for Slack's hello."""
        cfg = self.config
        self.web = web = AsyncWebClient(
            token=cfg.bot_token, base_url=cfg.api_base_url, timeout=CALL_TIMEOUT_S, logger=sdk_log, retry_handlers=[]
        )
        identity = await self._checked("bot_token", web.auth_test)
        self.bot_user_id = str(identity["user_id"])
        opened = await self._checked("app_token", lambda: web.apps_connections_open(app_token=cfg.app_token))
        authorized = AuthorizeResult.from_auth_test_response(bot_token=cfg.bot_token, auth_test_response=identity)

        async def authorize() -> AuthorizeResult:  # the identity checked above: no auth.test per event
            return authorized

        app = AsyncApp(
            name="picoagent",
            logger=sdk_log,
            # Bolt's own client only opens websockets (with the app token); replies use self.web.
            client=AsyncWebClient(base_url=cfg.api_base_url, timeout=CALL_TIMEOUT_S, logger=sdk_log),
            authorize=authorize,
            request_verification_enabled=False,  # Socket Mode: nothing is signed, the websocket is Slack
            ssl_check_enabled=False,
            url_verification_enabled=False,
        )
        app.event("message")(self._on_message)
        app.event("app_mention")(self._on_mention)
        app.command(re.compile(r"^/"))(self._on_command)
        app.action(re.compile("^" + re.escape(ACTION_PREFIX)))(self._on_action)
        self._hello.clear()
        self.handler = handler = AsyncSocketModeHandler(
            app, cfg.app_token, logger=sdk_log, ping_interval=self.ping_interval_s
        )
        handler.client.message_listeners.append(self._on_socket_message)
        handler.client.wss_uri = str(opened["url"])  # checked above; reconnects ask for a new one
        try:
            await asyncio.wait_for(self._open(handler), CONNECT_TIMEOUT_S)
        except TimeoutError:
            raise ChannelDown(f"Slack's Socket Mode did not say hello within {CONNECT_TIMEOUT_S:g} s") from None
        self.detail = f"as @{identity.get('user', 'app')} in {identity.get('team', 'Slack')}"

    async def _open(self, handler: AsyncSocketModeHandler) -> None:
        await handler.connect_async()
        await self._hello.wait()

    async def disconnect(self) -> None:
        """Close the websocket (and the socket client's HTTP session)."""
        handler, self.handler = self.handler, None
        self._socket = None
        if handler is not None:
            await handler.close_async()

    async def _checked(self, key: str, call: Callable[[], Awaitable[AsyncSlackResponse]]) -> AsyncSlackResponse:
        """A Web API call made while connecting: a refusal is permanent, anything else is retried later."""
        try:
            return await call()
        except SlackApiError as exc:
            error = error_of(exc)
            if error in REFUSED:
                raise ChannelDown(f"Slack refused slack.{key} ({error})", permanent=True) from None
            raise ChannelDown(f"Slack answered {error} when checking slack.{key}") from None
        except (SlackClientError, *NETWORK_ERRORS) as exc:
            reason = str(exc) or type(exc).__name__
            raise ChannelDown(f"cannot reach Slack at {self.config.api_base_url}: {reason}") from None

    async def _on_socket_message(self, client: Any, message: dict[str, Any], raw: str | None) -> None:
        """slack_sdk's listener for every websocket message: a hello means (re)connected."""
        if message.get("type") != "hello":
            return
        again = self._socket is not None
        self._socket = client.current_session
        self._hello.set()
        if again and not self._stopping:
            log.info("slack: reconnected to Socket Mode")
            self.came_up(self.detail)  # delivers what waited meanwhile

    # --- what people send ---------------------------------------------------------------------------

    # Bolt calls these with what their parameters name; each counts as being handled while it runs.

    async def _on_message(self, event: dict[str, Any]) -> None:
        with self._busy():
            await self._message(event)

    async def _on_mention(self, event: dict[str, Any]) -> None:
        with self._busy():
            await self._mention(event)

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> None:
        with self._busy():
            await self._command(ack, command)

    async def _on_action(self, ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        with self._busy():
            await self._action(ack, body, action)

    def _listens_in(self, channel: str) -> bool:
        """Whether mentions in this channel are answered (slack.channels, or every channel when empty)."""
        return not self.config.channels or channel in self.config.channels

    async def _message(self, event: dict[str, Any]) -> None:
        """A message event: every DM; in channels only a reply in a thread the app is part of."""
        if event.get("subtype") not in (None, "file_share", "thread_broadcast") or event.get("bot_id"):
            return  # edits, joins, other bots' messages (the app's own are dropped by Bolt)
        channel, thread_ts = str(event.get("channel", "")), event.get("thread_ts")
        if not event.get("user") or not channel:
            return
        if event.get("channel_type") == "im":
            await self._incoming(event, private=True, thread_ts=thread_ts)
            return
        mentioned = f"<@{self.bot_user_id}" in str(event.get("text", ""))
        if mentioned or not thread_ts or not self._listens_in(channel):
            return  # a mention comes as app_mention too; the channel's other talk is not for the app
        if await self.db.call(_has_session, self.db, self.name, f"{channel}:{thread_ts}"):
            await self._incoming(event, private=False, thread_ts=str(thread_ts))

    async def _mention(self, event: dict[str, Any]) -> None:
        """An @mention in a channel: answered in the message's thread, which becomes the session."""
        channel = str(event.get("channel", ""))
        if event.get("bot_id") or not event.get("user") or not channel or not self._listens_in(channel):
            return
        if channel.startswith("D"):
            return  # a mention in a DM: the DM's own message event answers it, without a thread
        await self._incoming(event, private=False, thread_ts=str(event.get("thread_ts") or event["ts"]))

    async def _incoming(self, event: dict[str, Any], *, private: bool, thread_ts: Any) -> None:
        channel, user = str(event["channel"]), str(event["user"])
        text = from_slack(str(event.get("text", "")), self.bot_user_id)
        incoming = Incoming(
            chat_id=channel,
            user_id=user,
            user_name=await self._name_of(user, text),
            text=text,
            private=private,
            remote_id=f"{channel}:{event['ts']}",  # a DM mention comes as two events: answered once
            session=f"{channel}:{thread_ts}" if thread_ts else "",
            meta={"thread_ts": str(thread_ts)} if thread_ts else {},
        )
        await self.handle(incoming)

    async def _name_of(self, user_id: str, text: str) -> str:
        """A person's display name (users.info, remembered); a stranger's is not looked up: they cost nothing."""
        if user_id in self._names:
            return self._names[user_id]
        if self.web is None or not (PAIRING_CODE.fullmatch(text.strip()) or await self.doorkeeper.is_allowed(user_id)):
            return user_id
        try:
            user = (await self.web.users_info(user=user_id))["user"]
        except (SlackClientError, *NETWORK_ERRORS):  # users:read missing, or the network: the id will do
            return user_id
        profile = user.get("profile") or {}
        name = str(profile.get("display_name") or user.get("real_name") or user.get("name") or user_id)
        if len(self._names) >= NAMES_KEPT:
            self._names.clear()
        self._names[user_id] = name
        return name

    async def _command(self, ack: Any, command: dict[str, Any]) -> None:
        """The slash command: acknowledged at once, answered only to whoever typed it (its response_url)."""
        await ack()
        name, words = slash_command(
            str(command["command"]), str(command.get("text", "")), set(self.commands.handlers())
        )
        user = str(command["user_id"])
        trigger = str(command.get("trigger_id", ""))
        incoming = Incoming(
            chat_id=str(command["channel_id"]),
            user_id=user,
            user_name=str(command.get("user_name") or user),
            text=" ".join([f"/{name}", *words]),
            private=command.get("channel_name") == "directmessage",
            remote_id=f"command:{trigger}" if trigger else "",
            meta={"response_url": str(command["response_url"]), "user": user},
        )
        if self._stopping or not await self.admit(incoming) or not await self.first_time(incoming.remote_id):
            return
        for said in await self.command(incoming, name, words):
            await self.say_or_keep(incoming, said)
        await self._handled(incoming)

    async def _action(self, ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        """A button press: once (by its action_ts), the tapped message edited, a notice only its presser sees."""
        await ack()
        container, who = body.get("container") or {}, body.get("user") or {}
        channel = str(container.get("channel_id") or (body.get("channel") or {}).get("id") or "")
        message_ts = str(container.get("message_ts") or "")
        thread_ts = (body.get("message") or {}).get("thread_ts")
        ephemeral = bool(container.get("is_ephemeral"))
        response_url = str(body.get("response_url") or "")
        meta: dict[str, Any] = {"thread_ts": str(thread_ts)} if thread_ts else {}
        user = str(who.get("id", ""))
        if ephemeral and response_url:
            meta.update(response_url=response_url, user=user)  # what the tap says goes where the tapped message was
        incoming = Incoming(
            chat_id=channel,
            user_id=user,
            user_name=str(who.get("name") or who.get("username") or user),
            text="",
            private=channel.startswith("D"),
            remote_id=f"tap:{channel}:{message_ts}:{action.get('action_ts', '')}",
            session=f"{channel}:{thread_ts}" if thread_ts else "",
            meta=meta,
        )
        data = str(action.get("value", ""))
        tapped = await self.tap(incoming, data)
        if tapped is None:
            return
        try:
            if tapped.edit is not None:
                text, blocks = messages(tapped.edit)[0]
                if ephemeral:
                    await self._respond(response_url, text, blocks, replace_original=True)
                elif self.web is not None:
                    await self.web.chat_update(channel=channel, ts=message_ts, text=text, blocks=blocks)
            elif (tapped.alert or not data.startswith("say:")) and response_url:
                text, blocks = messages(Said(tapped.notice))[0]
                await self._respond(response_url, text, blocks)
        except (SlackClientError, *NETWORK_ERRORS) as exc:
            log.warning("slack: showing what a tap did failed: %s", exc)

    # --- what the app says -----------------------------------------------------------------------------

    async def say(self, incoming: Incoming, said: Said) -> None:
        """Post a text with buttons in the conversation (its thread), or to whoever typed a slash command."""
        url = incoming.meta.get("response_url")
        for text, blocks in messages(said):
            if url:
                await self._respond(str(url), text, blocks)
            else:
                await self._post(incoming.chat_id, text, blocks, incoming.meta.get("thread_ts"))

    def streamed_reply(self, incoming: Incoming) -> StreamedReply | None:
        """Edits of one message in the conversation; a slash command's answer is shown once, ephemerally."""
        if self.web is None or incoming.meta.get("response_url"):
            return None
        thread_ts = incoming.meta.get("thread_ts")
        return SlackReply(
            self.web, incoming.chat_id, str(thread_ts) if thread_ts else None, self.config.edit_interval_s
        )

    async def _post(self, chat_id: str, text: str, blocks: list[dict[str, Any]], thread_ts: Any = None) -> str:
        if self.web is None:
            raise ConnectionError("the Slack channel is not connected")
        channel = await self._conversation_of(chat_id)
        sent = await self.web.chat_postMessage(
            channel=channel, text=text, blocks=blocks, thread_ts=str(thread_ts) if thread_ts else None
        )
        return str(sent["ts"])

    async def _respond(
        self, url: str, text: str, blocks: list[dict[str, Any]], *, replace_original: bool = False
    ) -> None:
        """Answer through a response_url: seen only by the person who typed or tapped."""
        client = AsyncWebhookClient(url, timeout=CALL_TIMEOUT_S, logger=sdk_log, retry_handlers=[])
        response = await client.send(
            text=text, blocks=blocks, response_type="ephemeral", replace_original=replace_original or None
        )
        if response.status_code != 200:
            raise ConnectionError(f"Slack answered {response.status_code} {response.body!r} to a response_url")

    async def _conversation_of(self, chat_id: str) -> str:
        """Where to post: a user id becomes the DM with the app (conversations.open, remembered)."""
        if not DIRECT.fullmatch(chat_id) or self.web is None:
            return chat_id
        if chat_id not in self._dms:
            opened = await self.web.conversations_open(users=chat_id)
            self._dms[chat_id] = str(opened["channel"]["id"])
        return self._dms[chat_id]

    def pieces(self, message: OutMessage) -> list[tuple[str, list[dict[str, Any]]]]:
        """A stored message as Slack messages: (mrkdwn text, blocks), each within a section's limit."""
        return messages(Said(message.text)) if message.text.strip() else []

    def unsent_text(self, pieces: Sequence[Any], first_unsent: int) -> str:
        """The rest as plain text again (it is escaped when sent)."""
        return unescape("\n\n".join(text for text, _ in pieces[first_unsent:]))

    async def send_piece(self, message: OutMessage, piece: tuple[str, list[dict[str, Any]]]) -> str:
        """Post a piece in the conversation (its thread); what was meant for one person only (a slash
        command's answer) goes to their DM, never the channel."""
        private = message.meta.get("response_url") and message.meta.get("user")
        target = str(message.meta["user"]) if private else message.chat_id
        text, blocks = piece
        return await self._post(target, text, blocks, message.meta.get("thread_ts"))

    def verdict(self, exc: Exception) -> Verdict | None:
        """A 429 pauses delivery for its Retry-After; a conversation that cannot be reached gives up."""
        if isinstance(exc, SlackApiError):
            error, wait_s = error_of(exc), retry_after_s(exc)
            if wait_s is not None:
                return Verdict("paused", f"Slack asked to wait {wait_s:g} s", wait_s)
            return Verdict("failed" if error in UNDELIVERABLE else "retry", error)
        if isinstance(exc, (SlackClientError, ConnectionError, *NETWORK_ERRORS)):
            return Verdict("retry", str(exc) or type(exc).__name__)
        return None


def _has_session(db: Any, channel: str, session: str) -> bool:
    """Whether the app has talked in this session (a Slack thread) before: a conversation exists for it."""
    return db.value("SELECT 1 FROM conversations WHERE channel = ? AND chat_id = ? LIMIT 1", (channel, session)) == 1
