"""The fast understanding layer of a turn: one small embedding model, put to several uses.

A message is embedded once (~5 ms with MiniLM on one core; the embedder keeps the vector), then:

- device requests the rule parser passed on are decided by meaning (:mod:`appliance.understanding.semantic`);
- the local model is shown only the tools closest to the message (:mod:`appliance.understanding.tool_rank`);
- memory recall searches with the same vector (the store asks the embedder, which has it already);
- the router reads how hard the message looks (:mod:`appliance.understanding.difficulty`).

With only the chat model's own embeddings (``memory.embedding_model: chat``, or the default model not
installed), there is no understanding layer: a chat model takes ~76 ms to embed a message and its
vectors are poor at this, so the turn runs as before (rules, every tool, token signals).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from appliance.config import Config
from appliance.errors import PicoagentError
from appliance.hardware.device_info import DeviceInfo
from appliance.memory.db import Database
from appliance.tools.registry import Tool, ToolRegistry
from appliance.understanding import difficulty
from appliance.understanding.difficulty import Difficulty
from appliance.understanding.intent import Intent
from appliance.understanding.semantic import SemanticDevices
from appliance.understanding.tool_rank import ToolRanker

if TYPE_CHECKING:
    from appliance.llm.embeddings import QueryEmbedder

log = logging.getLogger(__name__)


class TextVectors:
    """Vectors of fixed texts (device profiles, tools' descriptions), kept in the database per model.

    The daemon embeds them once at start, but a one-shot command (`picoagent chat -m`) would pay for all
    of them on every run: ~60 texts, ~0.6 s with MiniLM on one core. Kept in ``embedding_cache`` under
    the model's name, file and size, they load in a millisecond; a text not seen before is embedded
    and kept. Without a database (tests of the parts) they are embedded every time.
    """

    def __init__(self, embedder: QueryEmbedder, db: Database | None) -> None:
        self.embedder = embedder
        self.db = db
        path = embedder.path
        size = path.stat().st_size if path.exists() else 0
        self.model = f"{embedder.name}|{path.name}|{size}|{embedder.query_prefix}"

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """One query vector per text, in order."""
        if self.db is None:
            return await self.embedder.aembed_queries(texts)
        import numpy as np

        known = await self.db.call(self._read, list(texts))
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            fresh = await self.embedder.aembed_queries(missing)
            known.update(zip(missing, fresh, strict=True))
            rows = [
                (self.model, t, np.asarray(v, dtype=np.float32).tobytes()) for t, v in zip(missing, fresh, strict=True)
            ]
            try:
                await self.db.call(self._keep, rows)
            except PicoagentError as exc:  # a full disk costs the next run some time, nothing more
                log.info("embedding cache not written: %s", exc.message)
        return [known[t] for t in texts]

    def _keep(self, rows: list[tuple[str, str, bytes]]) -> None:
        assert self.db is not None
        with self.db.transaction() as conn:
            conn.executemany("INSERT OR REPLACE INTO embedding_cache (model, text, vector) VALUES (?, ?, ?)", rows)

    def _read(self, texts: list[str]) -> dict[str, list[float]]:
        import numpy as np

        found: dict[str, list[float]] = {}
        for start in range(0, len(texts), 500):
            chunk = texts[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            rows = self.db.rows(  # type: ignore[union-attr]
                f"SELECT text, vector FROM embedding_cache WHERE model = ? AND text IN ({marks})", (self.model, *chunk)
            )
            found.update((t, np.frombuffer(v, dtype=np.float32).tolist()) for t, v in rows)
        return found


class Understanding:
    """Device requests by meaning, the local model's tools, and how hard a message looks."""

    def __init__(
        self,
        config: Config,
        embedder: QueryEmbedder,
        tools: ToolRegistry,
        devices: Sequence[DeviceInfo] = (),
        db: Database | None = None,
    ) -> None:
        self.embedder = embedder
        self.tools = tools
        self.routing = config.routing
        texts = TextVectors(embedder, db)
        self.semantic = (
            SemanticDevices(devices, embedder, texts) if devices and config.agent.devices_by_meaning else None
        )
        self.tool_ranker = ToolRanker(embedder, config.agent.local_tools, texts)

    async def prepare(self) -> None:
        """Embed the device profiles and the tools' descriptions now (else the first message does: ~0.3 s)."""
        try:
            if self.semantic is not None:
                await self.semantic.prepare()
            await self.tool_ranker.scores(list(self.tools), "hello")
        except PicoagentError as exc:
            log.warning("the embedding model is not ready: %s", exc.message)

    async def device_intent(self, text: str) -> Intent | None:
        """The semantic stage's intent of a message (None: the model decides); its failure is logged, not raised."""
        if self.semantic is None:
            return None
        try:
            return await self.semantic.decide(text)
        except PicoagentError as exc:
            log.warning("device requests by meaning are off for this message: %s", exc.message)
            return None

    async def difficulty(self, text: str) -> Difficulty | None:
        """How likely the message needs a stronger model, from its meaning (None: signal off or embedding failed)."""
        model = difficulty.for_embedder(self.embedder) if self.routing.difficulty == "auto" else None
        if model is None:
            return None
        try:
            vector = await self.embedder.aembed_query(text)
        except PicoagentError as exc:
            log.warning("the difficulty signal is off for this message: %s", exc.message)
            return None
        return Difficulty(model.p_cloud(vector), model.hard_above)

    async def offered_tools(self, text: str, stored: Sequence[Any]) -> list[Tool]:
        """The tools the local model is shown: the closest by meaning, plus those used in this conversation."""
        tools = list(self.tools)
        used = {a.get("tool") for m in stored for a in (m.meta or {}).get("actions", []) if isinstance(a, dict)}
        previous = next((m.content for m in reversed(stored) if m.role == "user"), None)
        before = next((m.meta.get("offered") for m in reversed(stored) if (m.meta or {}).get("offered")), None)
        try:
            return await self.tool_ranker.choose(
                tools, text, previous, {u for u in used if isinstance(u, str)}, [str(n) for n in before or []]
            )
        except PicoagentError as exc:
            log.warning("tool ranking failed, offering every tool: %s", exc.message)
            return tools
