"""Automatic memory: recall into each turn, facts extracted in the background, long chats compacted.

Nothing here depends on the model deciding to call a "remember" tool. After a conversation grows by
``memory.extract_after_messages`` (or goes quiet), the local model is asked, under a JSON schema, for
the durable facts in the new messages, and they are stored. Each turn recalls the memories closest
to the message (by meaning and by keyword) within a token budget, as a separate message after the
system prompt, so the system prompt stays a stable prefix for the KV cache. When history passes
``memory.compact_at`` of the context window, the older turns become a summary (kept and recalled)
and only the last ``memory.keep_recent`` messages stay verbatim.

A message marked ``outside`` in its meta (a reply written after reading a web page, a task's prompt that
quotes such a step: see :mod:`appliance.tools.trust`) is never read for facts or into a summary: what a
page told the model must not come back in every later turn as something the owner said.

Facts come from the person's own messages only, and each fact the model lists must be in their words (more
than half its words and every name and number: :func:`supported`): the packaged 135M model, shown its own
invented reply, stored "It's a city that has been shaped by brave knights" as a fact about its owner.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import time
from typing import Any

from appliance.config import MemoryConfig
from appliance.errors import PicoagentError
from appliance.llm.base import ChatMessage, ChatModel, GenerationRequest
from appliance.memory.db import Database, StoredMessage

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4  # a budget, not a count: close enough for English, and cheap
STOP_S = 5.0  # a cancelled extraction ends at the model's next token, or when the runner stops
FACTS_SCHEMA = {
    "type": "object",
    "properties": {
        "facts": {"type": "array", "items": {"type": "string", "maxLength": 160}, "maxItems": 5},
    },
    "required": ["facts"],
    "additionalProperties": False,
}
SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string", "maxLength": 600}},
    "required": ["summary"],
    "additionalProperties": False,
}


class MemoryKeeper:
    """Recall, extraction and compaction around the agent's turns."""

    def __init__(
        self,
        config: MemoryConfig,
        store: Any,
        db: Database,
        model: ChatModel,
        *,
        context_tokens: int,
        clock: Any = time.time,
    ) -> None:
        self.config = config
        self.store = store  # a MemoryStore: add(), search()
        self.db = db
        self.model = model  # the local model (through the fair queue): memory never leaves the Pi
        self.context_tokens = context_tokens
        self.clock = clock
        self._busy: set[int] = set()  # conversations being extracted or compacted now
        self.background: set[asyncio.Task[Any]] = set()

    def use_settings(self, config: MemoryConfig) -> None:
        """Recall and extraction settings from a reloaded config (SIGHUP); the next turn reads them."""
        self.config = config

    # --- progress bookkeeping ------------------------------------------------------------------

    def _progress(self, conversation_id: int) -> tuple[int, int]:
        row = self.db.row(
            "SELECT extracted_through, summarised_through FROM memory_progress WHERE conversation_id = ?",
            (conversation_id,),
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def _set_progress(
        self, conversation_id: int, *, extracted: int | None = None, summarised: int | None = None
    ) -> None:
        old_extracted, old_summarised = self._progress(conversation_id)
        self.db.write(
            "INSERT INTO memory_progress (conversation_id, extracted_through, summarised_through) VALUES (?, ?, ?)"
            " ON CONFLICT (conversation_id) DO UPDATE SET extracted_through = excluded.extracted_through,"
            " summarised_through = excluded.summarised_through",
            (conversation_id, extracted if extracted is not None else old_extracted, summarised or old_summarised),
        )

    def pass_over(self, conversation_id: int) -> None:
        """Mark every message of a conversation as looked at: no fact is extracted from them (blocking).

        For a channel whose senders are not people the Pi knows (an MQTT topic, a webhook bridge): what
        they write is not a fact about the owner, and a planted one would be recalled in every chat.
        """
        last = self.db.value("SELECT coalesce(max(id), 0) FROM messages WHERE conversation_id = ?", (conversation_id,))
        self._set_progress(conversation_id, extracted=int(last))

    def _messages_after(self, conversation_id: int, after_id: int, limit: int = 200) -> list[StoredMessage]:
        rows = self.db.rows(
            "SELECT id, role, content, created_at, route, meta FROM messages"
            " WHERE conversation_id = ? AND id > ? ORDER BY id LIMIT ?",
            (conversation_id, after_id, limit),
        )
        return [StoredMessage(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]) if r[5] else {}) for r in rows]

    # --- recall --------------------------------------------------------------------------------

    async def recall(self, text: str) -> list[str]:
        """Memories relevant to a message, best first, within the token budget."""
        try:
            # Not db.call: searching embeds the query, which must not hold up the database thread.
            search = functools.partial(
                self.store.search, text, self.config.recall_k, decay_half_life_days=self.config.decay_half_life_days
            )
            hits = await asyncio.to_thread(search)
        except PicoagentError as exc:
            log.warning("recall failed: %s", exc.message)
            return []
        # Only what is near by meaning (or found by a rare word): the nearest memory is not always near, and the
        # small model reads whatever it is shown back ("perfect" got "The key to the garden shed is under the
        # flowerpot", a README walk). The same bar as `memory search`.
        budget = self.config.recall_tokens * CHARS_PER_TOKEN
        chosen: list[str] = []
        for hit in hits.relevant():
            line = hit.memory.text
            if len(line) > budget:
                break
            budget -= len(line)
            chosen.append(line)
        return chosen

    @staticmethod
    def recall_message(memories: list[str]) -> ChatMessage | None:
        """The recalled memories as one message for the prompt (None when there are none)."""
        if not memories:
            return None
        return ChatMessage("system", "Things you remember:\n" + "\n".join(f"- {m}" for m in memories))

    # --- history with compaction ----------------------------------------------------------------

    def history(self, conversation_id: int, limit: int) -> tuple[list[StoredMessage], str | None]:
        """Recent messages after the last summary, and that summary's text (None when there is none)."""
        _, summarised = self._progress(conversation_id)
        recent = self.db.recent_messages(conversation_id, limit)
        kept = [m for m in recent if m.id > summarised]
        summary = None
        if summarised:
            row = self.db.row(
                "SELECT text FROM memories WHERE kind = 'summary' AND conversation_id = ? ORDER BY id DESC LIMIT 1",
                (conversation_id,),
            )
            summary = row[0] if row else None
        return kept, summary

    def needs_compaction(self, prompt_tokens: int) -> bool:
        """Whether a prompt this long should make older turns into a summary."""
        return prompt_tokens > self.config.compact_at * self.context_tokens

    # --- background work -----------------------------------------------------------------------

    def after_turn(self, conversation_id: int, prompt_tokens: int) -> None:
        """Start extraction or compaction in the background when due (the reply is not held up)."""
        if conversation_id in self._busy:
            return
        task = asyncio.ensure_future(self._after_turn(conversation_id, prompt_tokens))
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def stop(self) -> None:
        """Cancel the background extractions and compactions and wait for them to end (the daemon's stop, before
        the model and the database they use close). What they had not stored yet is looked at again next time:
        progress is only written after the facts are."""
        running = list(self.background)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running, timeout=STOP_S)

    async def _after_turn(self, conversation_id: int, prompt_tokens: int) -> None:
        self._busy.add(conversation_id)
        try:
            if self.needs_compaction(prompt_tokens):
                await self.compact(conversation_id)
            extracted, _ = await self.db.call(self._progress, conversation_id)
            new = await self.db.call(self._messages_after, conversation_id, extracted)
            every = self.config.extract_after_messages
            if every and len(new) >= every:
                await self.extract(conversation_id)
        except PicoagentError as exc:
            log.warning("memory upkeep of conversation %d failed: %s", conversation_id, exc.message)
        finally:
            self._busy.discard(conversation_id)

    def _quiet_conversations(self) -> list[int]:
        """Conversations with messages not yet looked at, whose last message is older than quiet_minutes."""
        horizon = self.clock() - self.config.quiet_minutes * 60
        rows = self.db.rows(
            "SELECT m.conversation_id FROM messages m LEFT JOIN memory_progress p"
            " ON p.conversation_id = m.conversation_id"
            " GROUP BY m.conversation_id HAVING max(m.id) > coalesce(max(p.extracted_through), 0)"
            " AND max(m.created_at) < ?",
            (horizon,),
        )
        return [int(r[0]) for r in rows]

    async def sweep(self) -> list[int]:
        """Extract facts from every conversation that went quiet with messages not yet looked at."""
        if not self.config.extract_after_messages:
            return []
        done = []
        for conversation_id in await self.db.call(self._quiet_conversations):
            if conversation_id in self._busy:
                continue
            self._busy.add(conversation_id)
            try:
                await self.extract(conversation_id)
                done.append(conversation_id)
            except PicoagentError as exc:
                log.warning("memory: conversation %d: %s", conversation_id, exc.message)
            finally:
                self._busy.discard(conversation_id)
        return done

    async def run_sweeps(self, every_s: float = 60.0) -> None:
        """Sweep for quiet conversations forever."""
        while True:
            await asyncio.sleep(every_s)
            await self.sweep()

    async def extract(self, conversation_id: int) -> list[str]:
        """Ask the local model for durable facts in the messages not yet looked at; store them."""
        extracted, _ = await self.db.call(self._progress, conversation_id)
        new = await self.db.call(self._messages_after, conversation_id, extracted)
        if not new:
            return []
        said = [m for m in new if m.role == "user" and not m.meta.get("outside")]  # the person's words, not a reply
        if not said:
            await self.db.call(lambda: self._set_progress(conversation_id, extracted=new[-1].id))
            return []
        transcript = "\n".join(f"{m.role}: {m.content[:500]}" for m in said)
        answer = await self._ask_json(
            "List the durable facts about the user, their home, people and plans in this conversation "
            "(names, dates, places, preferences, where things are). Skip greetings and questions. "
            'Answer as JSON: {"facts": ["...", ...]}; an empty list when there are none.',
            transcript,
            FACTS_SCHEMA,
            max_tokens=200,
        )
        if answer is None or not isinstance(answer.get("facts"), list):
            return []  # a cut generation; the next round looks at these messages again
        listed = [str(f).strip() for f in answer["facts"] if str(f).strip()]
        facts = [f for f in listed if supported(f, transcript)]
        if len(facts) < len(listed):
            log.info(
                "conversation %d: %d fact(s) not in the person's words, not kept",
                conversation_id,
                len(listed) - len(facts),
            )
        source = f"conversation {conversation_id}"
        for fact in facts:
            await asyncio.to_thread(
                functools.partial(self.store.add, fact, kind="fact", source=source, conversation_id=conversation_id)
            )
        await self.db.call(lambda: self._set_progress(conversation_id, extracted=new[-1].id))
        log.info("conversation %d: %d fact(s) remembered", conversation_id, len(facts))
        return facts

    async def _ask_json(
        self, instruction: str, text: str, schema: dict[str, Any], *, max_tokens: int
    ) -> dict[str, Any] | None:
        """The local model's answer under a JSON schema, greedy; None when it was cut before the JSON closed."""
        request = GenerationRequest(
            messages=[ChatMessage("system", instruction), ChatMessage("user", text)],
            max_tokens=max_tokens,
            temperature=0.0,
            json_schema=schema,
            client="memory",
        )
        generation = await self.model.generate(request)
        try:
            answer = json.loads(generation.text)
        except json.JSONDecodeError:
            return None
        return answer if isinstance(answer, dict) else None

    async def compact(self, conversation_id: int) -> str | None:
        """Summarise all but the last ``keep_recent`` messages into a summary memory."""
        _, summarised = await self.db.call(self._progress, conversation_id)
        messages = await self.db.call(self._messages_after, conversation_id, summarised, 1000)
        older = messages[: -self.config.keep_recent] if self.config.keep_recent else messages
        if len(older) < 2:
            return None
        said = [m for m in older if not m.meta.get("outside")]
        if not said:  # they leave the prompt, as summarised ones do, and leave nothing behind
            await self.db.call(lambda: self._set_progress(conversation_id, summarised=older[-1].id))
            return None
        _, previous = await self.db.call(self.history, conversation_id, 0)
        transcript = "\n".join(f"{m.role}: {m.content[:400]}" for m in said)
        if previous:
            transcript = f"(earlier summary) {previous}\n{transcript}"
        answer = await self._ask_json(
            "Summarise this conversation in a few sentences: what was asked, decided and learned. "
            'JSON: {"summary": "..."}',
            transcript[-6000:],
            SUMMARY_SCHEMA,
            max_tokens=220,
        )
        summary = str(answer.get("summary") or "").strip() if answer is not None else ""
        if not summary:
            return None
        await self.db.call(
            lambda: self.store.add(
                summary, kind="summary", source=f"conversation {conversation_id}", conversation_id=conversation_id
            )
        )
        await self.db.call(lambda: self._set_progress(conversation_id, summarised=older[-1].id))
        log.info("conversation %d: %d message(s) summarised", conversation_id, len(older))
        return summary


# fmt: off
_NOT_CONTENT = frozenset({
    "the", "a", "an", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "from", "by", "is",
    "are", "was", "were", "be", "been", "has", "have", "had", "do", "does", "did", "will", "would", "can",
    "could", "should", "may", "might", "this", "that", "these", "those", "it", "its", "they", "them", "their",
    "there", "here", "user", "users", "person", "owner", "who", "what", "when", "where", "which", "very",
    "also", "just", "about", "into", "than", "then",
})
# fmt: on


def supported(fact: str, said: str) -> bool:
    """Whether a fact is in the person's words and says something (three words or more): more than half its
    content words (by their first five letters, at a word's start) and every number and name in it ("The user's
    sister Ada visits on Sunday" in "My sister Ada visits on Sunday"); a fact in nobody's words ("Ada likes tea",
    said only by the model) is not."""
    lowered = said.lower()

    def found(word: str) -> bool:
        return re.search(rf"\b{re.escape(word.lower()[:5])}", lowered) is not None

    if fact.rstrip().endswith("?"):
        return False  # a question is no fact ("What is the capital of France?" was stored as one)
    tokens = re.findall(r"[A-Za-z0-9]+", fact)
    if len(tokens) < 3:
        return False  # "yes" and "sunset" were stored as facts (a README walk): a fact says something of something
    words = [w for w in tokens if w.lower() not in _NOT_CONTENT and (len(w) > 1 or w.isdigit())]
    # every number and name, the first word too unless it is a plain word capitalised ("Paris is ..." is a name)
    names = [w for w in tokens if w[0].isdigit() or (w[0].isupper() and w.lower() not in _NOT_CONTENT)]
    if not words or not all(found(w) for w in names):
        return False
    return 2 * sum(found(w) for w in words) > len(words)
