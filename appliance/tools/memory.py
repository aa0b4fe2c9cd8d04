"""The model's memory tools. Nothing depends on the model calling them: facts are also extracted on their own."""

from __future__ import annotations

import asyncio

from appliance.errors import ToolError
from appliance.memory.store import MemoryStore
from appliance.tools.registry import ToolRegistry, current_turn


def register(registry: ToolRegistry, store: MemoryStore) -> None:
    """Register remember and recall."""

    async def remember(fact: str) -> str:
        """Store a durable fact about the user, their home or their plans.

        Examples: remember that my locker code is 4512; note that the dentist is on Tuesday;
            don't forget that Anna's birthday is in June; keep in mind that I parked on level 3

        Args:
            fact: one short sentence, e.g. "Anna's birthday is 14 March"
        """
        turn = current_turn()
        if turn is not None and turn.trust.untrusted:  # a page must not plant what later turns recall as true
            raise turn.trust.refuse_lasting(f"remember {fact!r}")
        memory = await asyncio.to_thread(store.add, fact, source="model")
        return f"remembered (memory {memory.id})"

    async def recall(query: str) -> list[str]:
        """Find remembered facts by meaning or keyword.

        Examples: what did I tell you about the car; do you remember where the spare key is;
            what's my wifi password; when is my brother's birthday; which doctor do I see

        Args:
            query: what to look for, e.g. "where is the shed key"
        """
        turn = current_turn()
        if turn is not None and not turn.person:  # whoever may write there would read the owner's memories
            raise ToolError(
                "refused to recall: this message came where senders are not people the Pi knows (an MQTT topic,"
                " a webhook bridge); memories are recalled only for a person, in a chat where they are"
                " allowlisted or paired"
            )
        if turn is not None and turn.trust.untrusted:  # what a page asked for could be carried to a host it names
            raise ToolError(
                f"refused to recall: {turn.trust.reason()}, and after reading outside content memories stay in"
                " (the page could have asked for them); the person can ask again in a new message"
            )
        hits = await asyncio.to_thread(store.search, query, 5)
        return [hit.memory.text for hit in hits]

    registry.register(remember)
    registry.register(recall, read_only=True)
