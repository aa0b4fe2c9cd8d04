"""The local model's part of a turn: its rounds of free text and grammar-bound tool calls.

The model may answer in text or call a tool. It starts unconstrained so plain answers stream at full
speed; the moment its reply opens with ``<tool_call>`` the free generation is stopped and the call is
generated again under a grammar built from the tools' JSON schemas, so it always parses and always
names a real tool with well-typed arguments. A tool's failure is a result the model reads; the attempt
goes on for at most ``agent.max_rounds`` model calls. Its failures become a
:class:`~appliance.agent.router.LocalOutcome` that routing judges (:mod:`appliance.agent.loop` owns the turn).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import replace
from typing import Any, Literal

from appliance.agent import context
from appliance.agent.context import TOOL_CALL_START
from appliance.agent.router import LocalOutcome, collapsed
from appliance.agent.turn_stats import EventSink, TurnStats
from appliance.config import Config
from appliance.errors import ContextOverflow, ModelError
from appliance.llm.base import ChatMessage, ChatModel, CloudGeneration, Generation, GenerationRequest
from appliance.tools.registry import ToolRegistry
from appliance.tools.result import ToolResult

log = logging.getLogger(__name__)

ToolChoice = Literal["auto", "required", "none"]
_NAMED = re.compile(r'\s*\{\s*"name"\s*:\s*"([^"]+)"')


class ToolNeedsCloud(Exception):
    """The local model called a tool it cannot drive reliably (routing.cloud_tools)."""

    def __init__(self, tool: str) -> None:
        super().__init__(tool)
        self.tool = tool


def honest(final: Generation | None, stats: TurnStats) -> Generation | None:
    """A local answer the guard left nothing of: the honest sentence instead (shown now), never the remains."""
    verdict = stats.guarded
    if final is None or isinstance(final, CloudGeneration) or verdict is None or not verdict.trips:
        return final
    if not verdict.nothing_left:
        return final
    stats.emit_("text", {"delta": verdict.decline})
    return replace(final, text=verdict.decline)


class LocalAttempt:
    """Runs the local model for one turn: free rounds, tool calls under a grammar, the tools themselves."""

    def __init__(self, config: Config, model: ChatModel, tools: ToolRegistry) -> None:
        self.config = config
        self.model = model
        self.tools = tools

    async def answer(
        self,
        messages: list[ChatMessage],
        tool_choice: ToolChoice,
        actions: list[ToolResult],
        stats: TurnStats,
        *,
        watch: bool,
    ) -> tuple[Generation | None, LocalOutcome]:
        """The local model's answer and how it went (its failures become the outcome, not errors)."""
        stats.watch = watch
        stats.partial = ""
        stats.error = None
        stats.guarded = None
        try:
            final = await self.rounds(list(messages), tool_choice, actions, stats, stats.emit_)
        except ToolNeedsCloud as need:
            return None, LocalOutcome(tool_needed=need.tool)
        except ContextOverflow as exc:
            stats.error = exc
            return None, LocalOutcome(prompt_fits=False)
        except ModelError as exc:
            stats.error = exc
            return None, LocalOutcome(failed=exc.message)
        if final is None:
            return None, LocalOutcome()  # every round was a tool call: no answer to judge, but nothing failed
        stats.confidence = final.confidence()
        if final.finish_reason == "timeout":
            return final, LocalOutcome(mean_prob=stats.confidence["mean_prob"], failed="timed out")
        return final, LocalOutcome(
            mean_prob=stats.confidence["mean_prob"],
            aborted_early=final.finish_reason == "aborted",
            guarded=stats.guarded.unsure if stats.guarded is not None else None,
        )

    async def rounds(
        self,
        messages: list[ChatMessage],
        tool_choice: ToolChoice,
        actions: list[ToolResult],
        stats: TurnStats,
        emit: EventSink,
    ) -> Generation | None:
        """Model calls until one answers in text (None when every round was a tool call)."""
        rounds = self.config.agent.max_rounds
        for round_number in range(rounds):
            may_call = tool_choice != "none" and round_number < rounds - 1  # the last round must answer
            if not (may_call and tool_choice == "required" and round_number == 0):
                generation, wants_tool = await self._free_round(messages, may_call, stats, emit, informed=bool(actions))
                if not wants_tool:
                    return generation
            call = await self._tool_call(messages, stats, emit)
            emit("tool_call", {"tool": call["name"], "arguments": call["arguments"]})
            result = await self.tools.execute(
                call["name"], call["arguments"], timeout_s=self.config.agent.tool_timeout_s, turn=stats.tools
            )
            actions.append(result)
            emit("tool_result", result.as_dict())
            messages += [
                context.tool_call_message(call["name"], call["arguments"]),
                context.tool_result_message(result),
            ]
        return None

    async def _run(self, request: GenerationRequest, stats: TurnStats) -> Generation:
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
        stats: TurnStats,
        emit: EventSink,
        *,
        informed: bool = False,
    ) -> tuple[Generation, bool]:
        """Generate freely; returns (generation, True) when the reply turned out to be a tool call. ``informed``:
        a tool's result is in the prompt, so the reply may state what it says (no claims guard)."""
        request = self._request(messages)
        pending = ""  # text held back while it could still be the start of a tool call
        decided = not may_call
        is_call = False

        from appliance.agent.reply_guard import ReplyGuard  # here: an idle daemon need not hold its rules

        guarded = (stats.guard or ReplyGuard()).stream(claims=not informed)  # what shows passed the guard

        def show(piece: str) -> None:
            shown = guarded.feed(piece)
            if guarded.tripped:
                request.cancel.set()  # looping, reciting, signing off: the rest would be dropped anyway
            if shown:
                emit("text", {"delta": shown})

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
            show(piece)

        request.on_token = on_token
        if stats.watch:
            threshold = self.config.routing.min_confidence
            request.should_stop = lambda logprobs: collapsed(logprobs, threshold)
        generation = await self._run(request, stats)
        if is_call:
            return generation, True
        if not decided and pending:
            show(pending)  # a short reply that only looked like the start of a call
        rest, verdict, replace_shown = guarded.finish(generation.text, generation.finish_reason)
        if replace_shown:  # a cut before what was shown (rare): the channels replace it, as on a reroute
            emit("reroute", {"route": "local", "reason": f"the local answer {verdict.trips[0].words}"})
        if rest:
            emit("text", {"delta": rest})
        if verdict.trips:
            trip = verdict.trips[0]
            log.info("reply guard: the local answer %s; cut at %r", trip.words, trip.segment[:80])
        stats.guarded = verdict
        return replace(generation, text=verdict.text), False

    async def _tool_call(self, messages: list[ChatMessage], stats: TurnStats, emit: EventSink) -> dict[str, Any]:
        """Generate a tool call under the tools' grammar; it always parses."""
        emit("thinking", {"stage": "tool_call"})
        request = self._request(messages)
        request.prefix = TOOL_CALL_START
        request.json_schema = context.tool_call_schema(stats.offered or list(self.tools))
        # No stop sequence: the grammar ends the call, and a "</tool_call>" the model writes inside a string
        # argument must not cut the JSON short (SmolLM2 did, once the time note was in its prompt).
        request.temperature = 0.0  # a call is not the place for variety
        generation = await self._run(request, stats)
        named = ""  # the tool it chose: the grammar writes the name first, so even a cut call has it
        try:
            call = json.loads(generation.text)
        except json.JSONDecodeError:
            # Only a cut generation (length, timeout) can leave the grammar's JSON unfinished.
            call = {"name": "(unfinished)", "arguments": {}}
            found = _NAMED.match(generation.text)
            named = found.group(1) if found else ""
            log.warning("tool call did not finish (%s): %r", generation.finish_reason, generation.text[:200])
        name = call.get("name", "")
        if stats.watch and (named or name) in self.config.routing.cloud_tools:
            raise ToolNeedsCloud(named or name)
        return {"name": name, "arguments": call.get("arguments", {})}

    def _request(self, messages: list[ChatMessage]) -> GenerationRequest:
        cfg = self.config.agent
        return GenerationRequest(
            messages=list(messages),
            max_tokens=cfg.max_reply_tokens,
            temperature=cfg.temperature,
            repeat_penalty=cfg.repeat_penalty,
            seed=self.config.llm.seed,
        )
