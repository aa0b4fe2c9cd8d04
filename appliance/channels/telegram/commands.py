"""The shared command set (:mod:`appliance.channels.commands`) on Telegram: handlers, keyboards, taps.

Each command of :meth:`ChatCommands.handlers` becomes a ``CommandHandler`` that replies with what the
command says, its buttons as an inline keyboard. A tapped button is answered (a notice, or an alert
when it failed) and its message edited as the command set says. Two kinds of button are Telegram's
own: ``say:<answer>`` (an answer a reply offered, "yes", "porch") is said as a message, once; any
other button is no longer valid.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from telegram import CallbackQuery, InlineKeyboardMarkup, Message, Update
from telegram.error import BadRequest, TelegramError
from telegram.ext import BaseHandler, CallbackQueryHandler, CommandHandler, ContextTypes

from appliance.channels.commands import NOT_VALID, ChatCommands, CommandCall, Said, Tap, Tapped
from appliance.channels.core import Route
from appliance.channels.telegram.text import keyboard

log = logging.getLogger(__name__)

Context = ContextTypes.DEFAULT_TYPE
Callback = Callable[[Update, Context], Coroutine[Any, Any, None]]


class Turn(Protocol):
    """Answer a text in a chat (one turn per chat at a time)."""

    async def __call__(
        self, chat_id: int, user_id: int, text: str, *, reply_to: int | None, force: Route | None
    ) -> None: ...


class TelegramCommands:
    """The command set's commands and buttons as python-telegram-bot handlers."""

    def __init__(self, commands: ChatCommands, turn: Turn) -> None:
        self.commands = commands
        self.turn = turn

    def handlers(self) -> list[BaseHandler[Any, Any, Any]]:
        """The handlers, in the order they are tried (an unknown button last)."""
        found: list[BaseHandler[Any, Any, Any]] = [
            CommandHandler(name, self._command(handler)) for name, handler in self.commands.handlers().items()
        ]
        for kind, tapped in self.commands.button_handlers().items():
            found.append(CallbackQueryHandler(self._button(tapped), pattern=f"^{kind}:"))
        found.append(CallbackQueryHandler(self._on_choice_button, pattern=r"^say:"))
        found.append(CallbackQueryHandler(self._on_unknown_button))
        return found

    def _command(self, handler: Callable[[CommandCall], Awaitable[list[Said]]]) -> Callback:
        async def callback(update: Update, context: Context) -> None:
            chat, message, user = update.effective_chat, update.effective_message, update.effective_user
            if chat is None or message is None or user is None:
                return

            async def ask(text: str, route: Route) -> None:
                await self.turn(chat.id, user.id, text, reply_to=None, force=route)

            call = CommandCall(
                str(chat.id), list(context.args or []), ask, user=f"telegram:{user.id}", name=user.full_name
            )
            for said in await handler(call):
                await message.reply_text(said.text, reply_markup=keyboard(said.buttons))

        return callback

    def _button(self, handler: Callable[[Tap], Awaitable[Tapped | None]]) -> Callback:
        async def callback(update: Update, context: Context) -> None:
            query, user = update.callback_query, update.effective_user
            if query is None or user is None:
                return
            tapped = await handler(Tap(query.data or "", f"telegram:{user.id}", user.full_name))
            if tapped is None:
                return
            await query.answer(tapped.notice[:200], show_alert=True if tapped.alert else None)
            if tapped.edit is not None:
                await _edit_quietly(query, tapped.edit.text, keyboard(tapped.edit.buttons))

        return callback

    async def _on_choice_button(self, update: Update, context: Context) -> None:
        """A tapped answer to the reply's question ("yes", "porch") is said as a message, once."""
        query, user, chat = update.callback_query, update.effective_user, update.effective_chat
        if query is None or user is None or chat is None or not isinstance(query.data, str):
            return
        said = query.data.removeprefix("say:")
        await query.answer()
        if isinstance(query.message, Message) and query.message.text:
            await _edit_quietly(query, f"{query.message.text}\n\n→ {said}", None)  # the buttons go away
        await self.turn(chat.id, user.id, said, reply_to=None, force=None)

    async def _on_unknown_button(self, update: Update, context: Context) -> None:
        if update.callback_query is not None:
            await update.callback_query.answer(NOT_VALID)


async def _edit_quietly(query: CallbackQuery, text: str, markup: InlineKeyboardMarkup | None) -> None:
    """Edit the message under a button; an unchanged message or a transient failure is not worth an error."""
    try:
        await query.edit_message_text(text, reply_markup=markup)
    except BadRequest as exc:
        if "not modified" not in exc.message:
            log.warning("telegram: editing a message failed: %s", exc.message)
    except TelegramError as exc:
        log.info("telegram: editing a message failed: %s", exc)
