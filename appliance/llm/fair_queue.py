"""Sharing the one local model fairly: the least recently served client goes next; first-come within one.

The worker runs one generation at a time. Without this, one client sending ten messages would make
everyone else wait behind all ten. Here each client has its own line, and the lines take turns (a
newcomer goes before a client that was just served); a waiting request is told its position whenever
it changes, and a request whose caller goes away (a closed websocket, a dropped HTTP connection)
leaves its line or stops its generation at once.
Everything runs on the event loop, so no locks are needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from appliance.llm.base import ChatMessage, ChatModel, Generation, GenerationRequest

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Ticket:
    request: GenerationRequest
    granted: asyncio.Event = field(default_factory=asyncio.Event)
    position: int = -1


class FairScheduler:
    """A ChatModel that queues requests per client in front of another ChatModel."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self._lines: OrderedDict[str, deque[_Ticket]] = OrderedDict()
        self._running: _Ticket | None = None
        self._served: dict[str, int] = {}  # when each client last got the model (a sequence number)
        self._seq = 0

    def serve(self, model: ChatModel) -> None:
        """Put ``model`` behind the queue (a model switch): the next generation runs on it, the running one ends
        on the model it began on."""
        self.model = model

    @property
    def name(self) -> str:
        """The model's name."""
        return self.model.name

    @property
    def waiting(self) -> int:
        """Requests waiting for the model."""
        return sum(len(line) for line in self._lines.values())

    @property
    def busy(self) -> bool:
        """Whether a generation is running."""
        return self._running is not None

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """How many prompt tokens these messages take."""
        return self.model.count_tokens(messages)

    def _order(self) -> list[_Ticket]:
        """Waiting tickets in the order they will run: the least recently served client goes first."""
        lines = {client: deque(line) for client, line in self._lines.items()}
        served = dict(self._served)
        order: list[_Ticket] = []
        seq = self._seq
        while lines:
            client = min(lines, key=lambda c: served.get(c, -1))
            order.append(lines[client].popleft())
            if not lines[client]:
                del lines[client]
            seq += 1
            served[client] = seq
        return order

    def _announce(self) -> None:
        for position, ticket in enumerate(self._order(), start=1 if self._running else 0):
            if ticket.position != position:
                ticket.position = position
                if ticket.request.on_queue is not None:
                    ticket.request.on_queue(position)

    def _dispatch(self) -> None:
        if self._running is None and self._lines:
            client = min(self._lines, key=lambda c: self._served.get(c, -1))
            line = self._lines[client]
            ticket = line.popleft()
            if not line:
                del self._lines[client]
            self._seq += 1
            self._served[client] = self._seq
            if len(self._served) > 1000:  # forget clients that are not waiting
                self._served = {c: n for c, n in self._served.items() if c in self._lines}
            self._running = ticket
            ticket.granted.set()
        self._announce()

    def _leave(self, ticket: _Ticket) -> None:
        line = self._lines.get(ticket.request.client)
        if line is not None and ticket in line:
            line.remove(ticket)
            if not line:
                del self._lines[ticket.request.client]

    async def generate(self, request: GenerationRequest) -> Generation:
        """Wait for this client's turn, then generate; cancelling leaves the line or stops the run."""
        ticket = _Ticket(request)
        self._lines.setdefault(request.client, deque()).append(ticket)
        self._dispatch()
        try:
            await ticket.granted.wait()
            return await self.model.generate(request)
        finally:
            if self._running is ticket:
                self._running = None
            else:
                self._leave(ticket)
            self._dispatch()
