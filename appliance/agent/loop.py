"""One agent turn: prompt, local model, tool rounds, reply record, history written.

The model may answer in text or call a tool. It starts unconstrained so plain answers stream at full
speed; the moment its reply opens with ``<tool_call>`` the free generation is stopped and the call is
generated again under a grammar built from the tools' JSON schemas, so it always parses and always
names a real tool with well-typed arguments. A tool's failure is a result the model reads; the turn
goes on for at most ``agent.max_rounds`` model calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from appliance.agent import context
from appliance.agent.context import TOOL_CALL_END, TOOL_CALL_START, Workspace
from appliance.agent.intent import Intent, IntentMatcher
from appliance.agent.intents_run import run_intent
from appliance.agent.record import ReplyRecord
from appliance.config import Config
from appliance.hardware.devices import DeviceRegistry
from appliance.llm.base import ChatMessage, ChatModel, Generation, GenerationRequest
from appliance.memory.db import Database
from appliance.memory.keeper import MemoryKeeper
from appliance.tools.registry import ToolRegistry, ToolResult

log = logging.getLogger(__name__)

ToolChoice = Literal["auto", "required", "none"]
EventSink = Callable[[str, dict[str, Any]], None]


@dataclass
class _TurnStats:
    started: float
    first_text_at: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    model_s: float = 0.0
    rounds: int = 0
    partial: str = ""  # the reply text streamed so far
    last_prompt_tokens: int = 0
    client: str = ""
    emit: EventSink | None = None


class Agent:
    """Runs turns against one model, one database and one tool registry."""

    def __init__(
        self,
        config: Config,
        model: ChatModel,
        db: Database,
        tools: ToolRegistry,
        workspace: Workspace,
        devices: DeviceRegistry | None = None,
        memory: MemoryKeeper | None = None,
    ) -> None:
        self.config = config
        self.model = model
        self.db = db
        self.tools = tools
        self.workspace = workspace
        self.devices = devices
        self.memory = memory
        self.intents = IntentMatcher(devices.infos()) if devices is not None and devices.devices else None
        self._asked: dict[str, Intent] = {}  # the fast path's open question, per chat
        self.listeners: list[Callable[[ReplyRecord], None]] = []  # told of every finished turn

    async def turn(
        self,
        text: str,
        *,
        channel: str = "terminal",
        chat_id: str = "default",
        tool_choice: ToolChoice = "auto",
        on_event: EventSink | None = None,
        client: str | None = None,
    ) -> ReplyRecord:
        """Answer one message; the user's message is stored before the model runs.

        ``client`` names who asked, for fair sharing of the model (default: the chat).
        """
        cfg = self.config.agent
        stats = _TurnStats(started=time.perf_counter(), client=client or f"{channel}:{chat_id}")
        emit = on_event or (lambda kind, data: None)
        stats.emit = emit
        conversation = await self.db.call(self.db.conversation, channel, chat_id)
        intent = self._intent(text, f"{channel}:{chat_id}")
        if intent is not None and self.devices is not None:
            await self.db.call(self.db.add_message, conversation, "user", text)
            record = await run_intent(intent, self.devices, requested_by=stats.client, started=stats.started)
            return await self._finish(record, conversation, f"{channel}:{chat_id}", emit)
        summary: str | None = None
        recalled: list[str] = []
        if self.memory is not None:
            stored, summary = await self.db.call(self.memory.history, conversation, cfg.history_messages)
            recalled = await self.memory.recall(text)
        else:
            stored = await self.db.call(self.db.recent_messages, conversation, cfg.history_messages)
        await self.db.call(self.db.add_message, conversation, "user", text)

        use_tools = tool_choice != "none" and len(self.tools) > 0
        system = context.system_prompt(self.workspace, self.tools if use_tools else None)
        # The system prompt stays first and unchanged (a warm KV-cache prefix); memory follows it.
        extra = [ChatMessage("system", f"Summary of the earlier conversation: {summary}")] if summary else []
        remembered = self.memory.recall_message(recalled) if self.memory is not None else None
        messages = [
            ChatMessage("system", system),
            *extra,
            *([remembered] if remembered else []),
            *context.history_messages(stored),
            ChatMessage("user", text),
        ]
        actions: list[ToolResult] = []
        try:
            final = await self._rounds(messages, tool_choice if use_tools else "none", actions, stats, emit)
        except asyncio.CancelledError:
            # Stopped by its caller (Ctrl-C, a closed connection): keep what was said, marked as stopped.
            partial = stats.partial.strip() + " [stopped]"
            meta = {"actions": [a.as_dict() for a in actions], "cancelled": True}
            await asyncio.shield(
                self.db.call(self.db.add_message, conversation, "assistant", partial.strip(), route="local", meta=meta)
            )
            raise
        reply = final.text.strip() if final else ""

        total = time.perf_counter() - stats.started
        record = ReplyRecord(
            text=reply,
            route="local",
            reason="edge-first: the local model answered (no cloud provider is configured)",
            actions=[a.as_dict() for a in actions],
            timings={
                "ttft_s": round((stats.first_text_at or time.perf_counter()) - stats.started, 4),
                "decode_tps": round(final.decode_tps, 2) if final else 0.0,
                "total_s": round(total, 4),
                "model_s": round(stats.model_s, 4),
                "prompt_tokens": stats.prompt_tokens,
                "completion_tokens": stats.completion_tokens,
                "cached_tokens": stats.cached_tokens,
                "rounds": stats.rounds,
            },
            model=self.model.name,
            session=f"{channel}:{chat_id}",
            finish_reason=final.finish_reason if final else "max_rounds",
            confidence=final.confidence() if final else {},
        )
        if not reply:
            record.text = "(no answer)" if final else "(stopped: too many tool rounds without an answer)"
        if self.memory is not None:
            self.memory.after_turn(conversation, int(stats.last_prompt_tokens))
        return await self._finish(record, conversation, record.session, emit)

    async def _finish(self, record: ReplyRecord, conversation: int, session: str, emit: EventSink) -> ReplyRecord:
        """Store the reply, tell the listeners and the caller."""
        record.session = session
        if record.route == "intent":
            emit("text", {"delta": record.text})
        await self.db.call(
            self.db.add_message,
            conversation,
            "assistant",
            record.text,
            route=record.route,
            meta={"actions": record.actions, "timings": record.timings, "reason": record.reason, "model": record.model},
        )
        t = record.timings
        await self.db.call(
            self.db.add_usage,
            record.route,
            record.model,
            int(t.get("prompt_tokens", 0)),
            int(t.get("completion_tokens", 0)),
        )
        for listener in self.listeners:
            listener(record)
        emit("done", record.as_dict())
        return record

    def _intent(self, text: str, session: str) -> Intent | None:
        """The fast-path intent of a message: an answer to our last question, or a command of its own."""
        if self.intents is None:
            return None
        asked = self._asked.pop(session, None)
        intent = self.intents.answer(asked, text) if asked is not None else None
        intent = intent or self.intents.match(text)
        if intent is not None and intent.action == "ask":
            self._asked[session] = intent  # "which light: porch or kitchen?" -> "porch" next
        return intent

    async def _rounds(
        self,
        messages: list[ChatMessage],
        tool_choice: ToolChoice,
        actions: list[ToolResult],
        stats: _TurnStats,
        emit: EventSink,
    ) -> Generation | None:
        """Model calls until one answers in text (None when every round was a tool call)."""
        rounds = self.config.agent.max_rounds
        for round_number in range(rounds):
            may_call = tool_choice != "none" and round_number < rounds - 1  # the last round must answer
            if not (may_call and tool_choice == "required" and round_number == 0):
                generation, wants_tool = await self._free_round(messages, may_call, stats, emit)
                if not wants_tool:
                    return generation
            call = await self._tool_call(messages, stats, emit)
            emit("tool_call", {"tool": call["name"], "arguments": call["arguments"]})
            result = await self.tools.execute(
                call["name"], call["arguments"], timeout_s=self.config.agent.tool_timeout_s
            )
            actions.append(result)
            emit("tool_result", result.as_dict())
            messages += [
                context.tool_call_message(call["name"], call["arguments"]),
                context.tool_result_message(result),
            ]
        return None

    async def _run(self, request: GenerationRequest, stats: _TurnStats) -> Generation:
        request.client = stats.client
        emit = stats.emit
        if emit is not None:
            request.on_queue = lambda position: emit("queued", {"position": position})
        generation = await self.model.generate(request)
        stats.rounds += 1
        stats.prompt_tokens += generation.prompt_tokens
        stats.last_prompt_tokens = generation.prompt_tokens
        stats.completion_tokens += generation.completion_tokens
        stats.cached_tokens += generation.cached_tokens
        stats.model_s += generation.total_s
        return generation

    async def _free_round(
        self,
        messages: list[ChatMessage],
        may_call: bool,
        stats: _TurnStats,
        emit: EventSink,
    ) -> tuple[Generation, bool]:
        """Generate freely; returns (generation, True) when the reply turned out to be a tool call."""
        request = self._request(messages)
        pending = ""  # text held back while it could still be the start of a tool call
        decided = not may_call
        is_call = False

        def on_token(piece: str) -> None:
            nonlocal pending, decided, is_call
            if not decided:
                pending += piece
                head = pending.lstrip()
                if head.startswith(TOOL_CALL_START):
                    is_call = decided = True
                    request.cancel.set()  # the call is generated again under its grammar
                    return
                if TOOL_CALL_START.startswith(head):
                    return
                decided, piece = True, pending
            if not stats.first_text_at and piece.strip():
                stats.first_text_at = time.perf_counter()
            stats.partial += piece
            emit("text", {"delta": piece})

        request.on_token = on_token
        generation = await self._run(request, stats)
        if is_call:
            return generation, True
        if not decided and pending:
            emit("text", {"delta": pending})  # a short reply that only looked like the start of a call
        return generation, False

    async def _tool_call(self, messages: list[ChatMessage], stats: _TurnStats, emit: EventSink) -> dict[str, Any]:
        """Generate a tool call under the tools' grammar; it always parses."""
        emit("thinking", {"stage": "tool_call"})
        request = self._request(messages)
        request.prefix = TOOL_CALL_START
        request.json_schema = context.tool_call_schema(list(self.tools))
        request.stop = [TOOL_CALL_END]
        request.temperature = 0.0  # a call is not the place for variety
        generation = await self._run(request, stats)
        try:
            call = json.loads(generation.text)
        except json.JSONDecodeError:
            # Only a cut generation (length, timeout) can leave the grammar's JSON unfinished.
            call = {"name": "(unfinished)", "arguments": {}}
            log.warning("tool call did not finish (%s): %r", generation.finish_reason, generation.text[:200])
        return {"name": call.get("name", ""), "arguments": call.get("arguments", {})}

    def _request(self, messages: list[ChatMessage]) -> GenerationRequest:
        cfg = self.config.agent
        return GenerationRequest(
            messages=list(messages),
            max_tokens=cfg.max_reply_tokens,
            temperature=cfg.temperature,
            repeat_penalty=cfg.repeat_penalty,
            seed=self.config.llm.seed,
        )

    async def reset(self, channel: str = "terminal", chat_id: str = "default") -> None:
        """Forget the conversation of a chat (it stays in the database, closed)."""
        await self.db.call(self.db.reset, channel, chat_id)
