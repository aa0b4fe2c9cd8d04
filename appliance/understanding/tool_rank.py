"""Only the tools that matter in the local prompt: tools ranked by meaning against the message.

A small local model reads every tool's description in its system prompt on every cold turn, and
picks worse the more it is offered. So the local model sees the ``keep`` tools closest to the
message (and to the last thing the person said: "and tomorrow?" after a question about the date),
none that is not close at all (small talk gets no tools), plus every tool it already used in this
conversation; its tool-call grammar offers exactly those. Within a conversation the list only grows,
in a fixed order (see :meth:`ToolRanker.choose`), so the KV cache keeps the prompt of the turn before.
The cloud model still gets every tool.

Each tool is described by its name, its description and the ``Examples:`` line of its docstring
(what people say when they need it), embedded once per tool. A message's vector is the one the
semantic device stage already made (the embedder keeps it), so ranking costs a matrix product.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from appliance.tools.registry import Tool

if TYPE_CHECKING:
    from appliance.llm.embeddings import QueryEmbedder

log = logging.getLogger(__name__)

PREVIOUS_WEIGHT = 0.35  # how much the last thing the person said counts against the message itself
# Below this similarity a tool is not offered at all: "hello" or "tell me a joke" get no tools, so the
# local model cannot call one by mistake and reads a shorter prompt. MiniLM scores a tool's own
# examples' paraphrases 0.45-0.9 and unrelated chat 0.1-0.3 (tests/test_tool_rank.py).
RELEVANT = 0.35


def tool_texts(tool: Tool) -> list[str]:
    """What a tool is embedded as: its description, and each example phrasing."""
    name = tool.name.replace("_", " ")
    return [f"{name}: {tool.description}", *tool.examples]


class ToolRanker:
    """Ranks tools by how close a message comes to what they are for."""

    def __init__(
        self,
        embedder: QueryEmbedder,
        keep: int,
        texts: Callable[[Sequence[str]], Awaitable[list[list[float]]]] | None = None,
    ) -> None:
        self.embedder = embedder
        self.keep = keep
        self._texts = texts or embedder.aembed_queries  # the tools' vectors (kept across runs by the caller)
        self._vectors: dict[tuple[str, str, tuple[str, ...]], Any] = {}  # per tool: a matrix of its texts
        self._pending: asyncio.Future[None] | None = None  # the tools being embedded now

    async def _tool_vectors(self, tools: Sequence[Tool]) -> list[Any]:
        import numpy as np

        while True:
            missing = [t for t in tools if (t.name, t.description, t.examples) not in self._vectors]
            if not missing:
                return [self._vectors[(t.name, t.description, t.examples)] for t in tools]
            # Fifty messages arriving at start must not each embed every tool: one embeds, the others wait.
            loop = asyncio.get_running_loop()
            pending = self._pending
            if pending is not None and not pending.done() and pending.get_loop() is loop:
                await asyncio.shield(pending)
                continue
            self._pending = done = loop.create_future()
            try:
                texts = [tool_texts(t) for t in missing]
                flat = await self._texts([x for group in texts for x in group])
                at = 0
                for tool, group in zip(missing, texts, strict=True):
                    key = (tool.name, tool.description, tool.examples)
                    self._vectors[key] = np.asarray(flat[at : at + len(group)], dtype=np.float32)
                    at += len(group)
            finally:
                done.set_result(None)

    async def scores(self, tools: Sequence[Tool], text: str, previous: str | None = None) -> list[float]:
        """Each tool's closeness to the message (and, less, to the previous one), in the tools' order."""
        import numpy as np

        matrices = await self._tool_vectors(tools)
        query = np.asarray(await self.embedder.aembed_query(text), dtype=np.float32)
        if previous:
            before = np.asarray(await self.embedder.aembed_query(previous), dtype=np.float32)
            query = query + PREVIOUS_WEIGHT * before
            query /= float(np.linalg.norm(query)) or 1.0
        return [float((m @ query).max()) for m in matrices]

    async def choose(
        self,
        tools: Sequence[Tool],
        text: str,
        previous: str | None = None,
        used: Iterable[str] = (),
        offered_before: Sequence[str] = (),
    ) -> list[Tool]:
        """The tools to offer the local model.

        Within a conversation the list only grows: the tools offered before keep their places, and new
        ones are appended. The tool list ends the system prompt, so a turn whose tools were already
        offered finds its whole prompt but the new message in the KV cache, and one that needs a new
        tool re-reads only from the list on. Past ``2 × keep`` tools the list starts afresh.
        """
        if self.keep <= 0:
            return list(tools)
        scores = await self.scores(tools, text, previous)
        ranked = [i for i in sorted(range(len(tools)), key=lambda i: -scores[i]) if scores[i] >= RELEVANT]
        wanted = {tools[i].name for i in ranked[: self.keep]} | set(used)
        by_name = {t.name: t for t in tools}
        before = [name for name in offered_before if name in by_name]
        if len(set(before) | wanted) > 2 * self.keep:
            before = []
        picked = [by_name[name] for name in before]
        picked += [t for t in tools if t.name in wanted and t.name not in before]
        log.debug("tools for %r: %s", text[:60], ", ".join(t.name for t in picked))
        return picked
