"""A chat platform in memory: the smallest :class:`~appliance.channels.base.ChatChannel`, for the shared core's tests.

Every real channel's tests run the base through the platform's real library; this one isolates what the
base itself promises (who may talk, once only, typed commands, the outbox, notifications' fallback). It
records what it said and delivered; ``reachable`` set to False makes it fail like a platform that is down,
and a text in ``broken`` makes its delivery raise that exception (a message its platform cannot even build).
"""

from __future__ import annotations

from typing import Any, ClassVar

from appliance.channels.base import ChannelDown, ChatChannel, Incoming
from appliance.channels.commands import Said
from appliance.outbox import Outcome, OutMessage


class MemoryChannel(ChatChannel):
    """A platform without buttons that keeps what it says in lists."""

    name: ClassVar[str] = "memory"
    buttons: ClassVar[bool] = False

    def __init__(self, *args: Any, refuse: str = "", **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.refuse = refuse  # connect raises this (permanently) when set
        self.reachable = True
        self.said: list[tuple[str, str]] = []  # (chat id, text)
        self.delivered: list[tuple[str, str]] = []  # (chat id, text) of outbox messages accepted
        self.broken: dict[str, Exception] = {}  # text -> what delivering it raises (a bug, a message never buildable)

    async def connect(self) -> None:
        if self.refuse:
            raise ChannelDown(self.refuse, permanent=True)
        if not self.reachable:
            raise ChannelDown("cannot reach the memory platform")
        self.detail = "in memory"

    async def disconnect(self) -> None:
        """Nothing to close."""

    async def say(self, incoming: Incoming, said: Said) -> None:
        if not self.reachable:
            raise ConnectionError("the memory platform is down")
        self.said.append((incoming.chat_id, said.text))

    async def deliver(self, message: OutMessage) -> Outcome:
        if message.text in self.broken:
            raise self.broken[message.text]
        if not self.reachable:
            await self.db.call(self.outbox.mark_retry, message, "the memory platform is down")
            return "retry"
        self.delivered.append((message.chat_id, message.text))
        await self.db.call(self.outbox.mark_sent, message.id, str(len(self.delivered)))
        return "sent"


def platform_class(name: str) -> type[MemoryChannel]:
    """A MemoryChannel class of its own, named ``name`` (two channels side by side in one test)."""
    return type(f"MemoryChannel_{name}", (MemoryChannel,), {"name": name})
