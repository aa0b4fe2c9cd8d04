"""One agent turn: prompt, local model, tool rounds, reply record, history written.

The local model's rounds (free text, tool calls under a grammar, the tools run) are
:mod:`appliance.agent.local_turn`; this module owns the turn around them. Every local reply passes the
reply guard (:mod:`appliance.agent.reply_guard`): a loop, a recited prompt, tool calls as text or a
sign-off is stopped, cut and never shown; a reply the guard leaves nothing of is one honest sentence.

Routing (:mod:`appliance.agent.router` decides, :mod:`appliance.agent.escalation` gathers and runs the
cloud): the local model answers first unless the user asked for the cloud (``/cloud ...``), the mode
is cloud_first, or the message looks hard by its meaning (:mod:`appliance.understanding.difficulty`). While
the local answer streams, its token probabilities are watched and the attempt is stopped as soon as
its confidence collapses; a finished local answer that is unsure (or that the guard cut because the
model lost its way), a local failure, a prompt too long
for the local context, or a call of a tool listed in ``routing.cloud_tools`` escalates when the cloud
is allowed. A ``reroute`` event tells channels to replace the text streamed so far. When
the cloud fails, the local answer stands (route ``local_fallback``), and the record says why.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from appliance.agent import context
from appliance.agent.context import Workspace
from appliance.agent.decline import (
    DECLINED,
    UNATTENDED,
    DeclineDesk,
    guesses,
    guessing_model,
    makes,
    would_guess,
)
from appliance.agent.escalation import CloudRoute, CloudUse, Forced
from appliance.agent.intents_run import run_intent
from appliance.agent.local_turn import LocalAttempt, ToolChoice, honest
from appliance.agent.record import ReplyRecord, Timings
from appliance.agent.router import (
    Decision,
    RoutingContext,
    after_local,
    asked_with,
    before_local,
    declines,
    local_route,
    split_forced,
)
from appliance.agent.schedule_desk import ScheduleDesk
from appliance.agent.turn_stats import EventSink, TurnStats
from appliance.config import Config
from appliance.errors import UsageError
from appliance.grounded.turn import Grounding, local_zone
from appliance.hardware.devices import DeviceRegistry
from appliance.llm.base import ChatMessage, ChatModel, CloudGeneration, Generation
from appliance.llm.cloud_errors import CloudError
from appliance.memory.db import Database
from appliance.memory.keeper import MemoryKeeper
from appliance.plugins import TurnStart
from appliance.tools.registry import ToolRegistry
from appliance.tools.result import ToolResult
from appliance.understanding.asked_back import AskedBack
from appliance.understanding.intent import Intent, IntentMatcher
from appliance.understanding.meaning import TextVectors, Understanding
from appliance.understanding.semantic import answer_confirmation

if TYPE_CHECKING:
    from appliance.llm.embeddings import QueryEmbedder
    from appliance.tasks.store import TaskStore
    from appliance.tools.scheduling import CronDesk

log = logging.getLogger(__name__)


def _outside(sources: Sequence[str]) -> dict[str, Any] | None:
    """A stored message's mark that outside text shaped it (what was read), or None."""
    return {"outside": list(sources)} if sources else None


def _with_suffix(decision: Decision, suffix: str) -> Decision:
    return replace(decision, reason=decision.reason + suffix)


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
        cloud: CloudRoute | None = None,
        understanding: QueryEmbedder | None = None,
        *,
        cron: Callable[[], CronDesk | None] = lambda: None,
        tasks: Callable[[], TaskStore | None] = lambda: None,
        weather: Any = None,
    ) -> None:
        """``understanding``: a small embedding model (see :mod:`appliance.understanding.meaning`); None: rules only.
        ``cron``, ``tasks``: the owner's scheduler and task store, late-bound (built after the agent, whose turns
        they run); ``weather``: the forecast source the grounded answers use."""
        self.config = config
        self.cloud = cloud
        self.local = LocalAttempt(config, model, tools)
        self.db = db
        self.tools = tools
        self.workspace = workspace
        self.devices = devices
        self.memory = memory
        self.intents = IntentMatcher(devices.infos()) if devices is not None and devices.devices else None
        self.understanding = (
            Understanding(config, understanding, tools, devices.infos() if self.intents and devices else (), db)
            if understanding is not None
            else None
        )
        self._asked = AskedBack(db)  # the fast path's open question, per chat, and when (also for the next chat -m)
        self.listeners: list[Callable[[ReplyRecord], None]] = []  # told of every finished turn
        self.desk = ScheduleDesk(devices.infos() if devices is not None else (), db, cron)
        self.grounding = Grounding(
            config,
            db,
            devices=devices if self.intents else None,
            memory=memory,
            embedder=understanding,
            texts=TextVectors(understanding, db) if understanding is not None else None,
            tools=tools,
            workspace=workspace.root,
            model_name=model.name,
            cron_source=cron,
            tasks_source=tasks,
            weather=weather,
        )
        self.declines = DeclineDesk(lambda: self.model.name)
        # The time the model is told, after the system prompt (None: not told; a benchmark's baseline): the
        # grounded answers' zone, so the two never disagree.
        self.clock: Callable[[], datetime] | None = lambda: datetime.now(self.grounding.zone)

    def use_cloud(self, cloud: CloudRoute) -> None:
        """Escalate to ``cloud`` from now (a reload changed the providers or the routing)."""
        self.cloud = cloud

    def reread_config(self) -> None:
        """What a message is read with, made again from the running config (SIGHUP): the devices (names, rooms,
        aliases, what is allowed; added and taken out), agent.devices_by_meaning and local_tools, routing's
        difficulty settings, the time zone. Cheap: the embeddings are made when first needed (and kept in the
        database)."""
        infos = self.devices.infos() if self.devices is not None else []
        self.intents = IntentMatcher(infos) if infos else None
        self.grounding.devices = self.devices if infos else None  # "how warm is it in the study?" from the registry
        if self.understanding is not None:
            embedder = self.understanding.embedder
            self.understanding = Understanding(self.config, embedder, self.tools, infos, self.db)  # embeds lazily
        self.desk.devices = tuple(infos)
        self.grounding.zone = local_zone(self.config.scheduler.timezone)  # "what time is it?" in the new zone

    @property
    def model(self) -> ChatModel:
        """The local chat model (replaceable: a calibration run records through its own)."""
        return self.local.model

    @model.setter
    def model(self, model: ChatModel) -> None:
        self.local.model = model

    async def turn(
        self,
        text: str,
        *,
        channel: str = "terminal",
        chat_id: str = "default",
        tool_choice: ToolChoice = "auto",
        on_event: EventSink | None = None,
        client: str | None = None,
        force: Forced = None,
        forced_by: str = "",
        person: bool = True,
    ) -> ReplyRecord:
        """Answer one message; the user's message is stored before the model runs.

        ``client`` names who asked, for fair sharing of the model (default: the chat). ``force`` is a
        route the user asked for (a message starting with ``/cloud`` or ``/local`` asks for itself);
        ``forced_by`` says why when no person asked for it (reasons then do not say "you asked for").
        ``person``: False for a channel whose senders are not people the Pi knows (an MQTT topic, a
        webhook bridge): its message is outside text (:meth:`ToolRegistry.turn`), and the owner's
        memories are neither recalled into its prompt nor extracted from it.
        """
        cfg = self.config.agent
        asked, text = split_forced(text)
        if asked is not None and not text.strip():
            raise UsageError(f"/{asked} needs the message after it", fix=f"e.g. /{asked} what is a qubit?")
        force = asked or force
        session = f"{channel}:{chat_id}"
        tools = self.tools.turn(text, channel, session, person=person)
        stats = TurnStats(started=time.perf_counter(), client=client or session, tools=tools)
        await self.tools.hooks.turn_start(TurnStart(text, channel, chat_id))
        emit = on_event or (lambda kind, data: None)
        stats.emit = emit
        conversation = await self.db.call(self.db.conversation, channel, chat_id)
        # A tap on a decline's button, schedules ("remind me at 7 ..."), then device commands: no model.
        picked = self.declines.picked(text, session, stats.started)
        lifted = isinstance(picked, str)
        if lifted:
            text, force = str(picked), "cloud"
        record = picked if isinstance(picked, ReplyRecord) else None
        record = record or await self.desk.answer(text, session, stats.client, stats.started, force)
        # What the appliance knows (the time, itself, its schedules, ...) by words, then devices, then by meaning.
        facts = self.grounding.facts(session, conversation, person=person, cloud_allowed=self._cloud_allowed())
        # a yes/no or "which one?" of ours waits: the message is its answer first
        waiting = self._asked.get(session) is not None
        if record is None and force != "cloud" and not waiting:
            record = await self.grounding.reply(text, facts, stats.started, meaning=False)
        intent = self._intent(text, session) if force != "cloud" and record is None else None
        if waiting and intent is None and record is None and force != "cloud":  # no answer to ours: read as ever
            # (walk 9: "what's my name?" while "Turn the porch light on?" waited missed the memory's words)
            record = await self.grounding.reply(text, facts, stats.started, meaning=False)
        if intent is None and record is None and self.understanding is not None and force != "cloud":
            by_meaning = cfg.grounded_by_meaning
            if by_meaning and self._asked.get(session) is None:  # a paraphrase of a question it knows: before devices
                record = await self.grounding.reply(text, facts, stats.started, meaning=True)
            if record is None:
                intent = await self.understanding.device_intent(text)
                if intent is not None and intent.action in ("confirm", "ask"):
                    self._asked.put(session, intent)
            if intent is None and record is None and by_meaning and force is None:  # near one (not /local)
                record = await self.grounding.reply(text, facts, stats.started, meaning=True, near=True)
        if intent is not None and self.devices is not None:
            record = await run_intent(
                intent,
                self.devices,
                requested_by=stats.client,
                started=stats.started,
                db=self.db,
                zone=self.grounding.zone,
            )
        if record is not None:
            await self.db.call(self.db.add_message, conversation, "user", text, meta=_outside(tools.trust.sources))
            record.why = record.why or "intent"
            # a remote device's state in the answer (Home Assistant, MQTT) is outside text too: no fact of it
            read = [*tools.trust.sources, *(a.outside for a in record.actions if a.outside)]
            return await self._finish(record, conversation, session, emit, CloudUse(), person=person, outside=read)
        context_ = await self._routing_context(channel, chat_id, force)
        if force is not None:
            context_ = replace(context_, asked_with=asked_with(force, channel, in_text=asked is not None))
            if asked is None and not lifted:
                context_ = replace(context_, forced_by=forced_by)
        if lifted:  # the person tapped "ask the cloud" on a private chat's decline: this question, once
            context_ = replace(context_, conversation_local_only=False)
        if self.understanding is not None and context_.mode != "cloud_first" and force is None:
            context_ = replace(context_, difficulty=await self.understanding.difficulty(text))
        if context_.mode == "edge_first" and force is None and would_guess(text, self.model.name):
            context_ = replace(context_, guesses=self.model.name)  # the cloud first, where it may answer
        guessed = await guesses(text, context_, self.model.name)
        if (guessed or declines(context_)) and channel not in UNATTENDED:  # the Pi's model would guess: said so
            await self.db.call(self.db.add_message, conversation, "user", text, meta=_outside(tools.trust.sources))
            record = self.declines.decline(text, session, context_, stats.started, guessed=guessed)
            emit("text", {"delta": record.text})  # no model streamed it: a streaming channel shows it now
            return await self._finish(record, conversation, session, emit, CloudUse(), person=person)
        summary: str | None = None
        recalled: list[str] = []
        if self.memory is not None:
            stored, summary = await self.db.call(self.memory.history, conversation, cfg.history_messages)
            recalled = await self.memory.recall(text) if person else []
        else:
            stored = await self.db.call(self.db.recent_messages, conversation, cfg.history_messages)
        # A task's prompt quoting steps that read a page is outside text from the start: marked, it is never
        # drawn into a fact or a summary (MemoryKeeper skips it).
        await self.db.call(self.db.add_message, conversation, "user", text, meta=_outside(tools.trust.sources))

        use_tools = tool_choice != "none" and len(self.tools) > 0
        # The system prompt stays first and unchanged (a warm KV-cache prefix); the time, then memory, follow it.
        extra = [ChatMessage("system", f"Summary of the earlier conversation: {summary}")] if summary else []
        remembered = self.memory.recall_message(recalled) if self.memory is not None else None
        conversation_messages = [
            *([context.facts_note(self.clock(), self.config.weather.place)] if self.clock is not None else []),
            *extra,
            *([remembered] if remembered else []),
            *context.history_messages(stored, copies=guessing_model(self.model.name)),
            ChatMessage("user", text),
        ]
        local_prompt: list[list[ChatMessage]] = []

        async def local_messages() -> list[ChatMessage]:
            """The local model's prompt, made when the local model first runs: a turn the cloud answers
            ranks no tools (an embedding, ~10 ms) and builds no local system prompt."""
            if not local_prompt:
                stats.offered = list(self.tools) if use_tools else []
                if use_tools and self.understanding is not None and tool_choice != "required":
                    stats.offered = await self.understanding.offered_tools(text, stored)
                local_system = context.system_prompt(self.workspace, stats.offered if use_tools else None)
                local_prompt.append([ChatMessage("system", local_system), *conversation_messages])
                from appliance.agent.reply_guard import ReplyGuard  # at the first local answer, not at start

                stats.guard = ReplyGuard(
                    context.instructions(self.workspace, stats.offered if use_tools else None),
                    # a model that guesses states no time, date, device, weather ... (appliance/agent/claims.py)
                    claims=guessing_model(self.model.name) and context_.forced != "local" and not makes(text),
                )
            return local_prompt[0]

        actions: list[ToolResult] = []
        use = CloudUse()
        route = "local"
        # a cloud that fails leaves a question of fact to be declined, not guessed at by a model that guesses
        stats.declines = channel not in UNATTENDED and context_.forced != "local" and would_guess(text, self.model.name)
        try:
            final, decision, route = await self._answer(
                local_messages,
                conversation_messages,
                context_,
                tool_choice if use_tools else "none",
                actions,
                use,
                stats,
            )
            if route == "declined":
                record = self.declines.decline(
                    text, session, context_, stats.started, guessed=True, failed=stats.cloud_error or "it failed"
                )
                record.actions = [a.as_action() for a in actions + use.actions]
                record.timings = replace(record.timings, cloud_s=round(use.seconds, 4), cost_usd=round(use.cost_usd, 6))
                emit("text", {"delta": record.text})
                return await self._finish(record, conversation, session, emit, use, person=person)
            # a local answer the guard left nothing of is the honest sentence (local_turn.honest)
            final = final if route == "cloud" else honest(final, stats)
        except asyncio.CancelledError:
            # Stopped by its caller (Ctrl-C, a closed connection): keep what was said, marked as stopped.
            partial = stats.partial.strip() + " [stopped]"
            meta = {"actions": [a.as_dict() for a in actions + use.actions], "cancelled": True}
            await asyncio.shield(
                self.db.call(self.db.add_message, conversation, "assistant", partial.strip(), route=route, meta=meta)
            )
            raise
        reply = final.text.strip() if final else ""

        total = time.perf_counter() - stats.started
        cloud_answered = isinstance(final, CloudGeneration)
        record = ReplyRecord(
            text=reply,
            route=route,
            reason=decision.reason,
            actions=[a.as_action() for a in actions + use.actions],
            timings=Timings(
                ttft_s=round((stats.first_text_at or time.perf_counter()) - stats.started, 4),
                decode_tps=round(final.decode_tps, 2) if final else 0.0,
                total_s=round(total, 4),
                model_s=round(stats.model_s, 4),
                cloud_s=round(use.seconds, 4),
                prompt_tokens=stats.prompt_tokens + use.prompt_tokens,
                completion_tokens=stats.completion_tokens + use.completion_tokens,
                cached_tokens=stats.cached_tokens,
                rounds=stats.rounds,
                cost_usd=round(use.cost_usd, 6),
            ),
            model=self.cloud.model_name() if cloud_answered and self.cloud is not None else self.model.name,
            session=session,
            finish_reason=final.finish_reason if final else "max_rounds",
            confidence=stats.confidence,
            why=decision.why,
            blocked=decision.blocked,
        )
        if not reply:
            record.text = "(no answer)" if final else "(stopped: too many tool rounds without an answer)"
        held = stats.tools.trust.note() if stats.tools is not None else ""
        if held:  # outside text in the turn held a device write or a fetch back: the person must know
            record.text = f"{record.text}\n\n{held}"
            emit("text", {"delta": f"\n\n{held}"})
        if self.memory is not None and stats.last_prompt_tokens and person:
            self.memory.after_turn(conversation, int(stats.last_prompt_tokens))
        return await self._finish(
            record, conversation, session, emit, use, local_tokens=stats, person=person, outside=tools.trust.sources
        )

    async def prepare_understanding(self) -> None:
        """Ready the understanding layer now rather than on the first message."""
        if self.understanding is not None:
            await self.understanding.prepare()
            if self.config.agent.grounded_by_meaning:
                await self.grounding.desk.prepare()

    def _cloud_allowed(self) -> bool:
        return self.cloud is not None and self.config.routing.mode != "local_only"

    async def route_preview(self, channel: str, chat_id: str, force: Forced = None) -> RoutingContext:
        """What routing would see for a message of this chat now (for /cloud's answer)."""
        return await self._routing_context(channel, chat_id, force)

    async def _routing_context(self, channel: str, chat_id: str, force: Forced) -> RoutingContext:
        if self.cloud is None:
            return RoutingContext(mode="local_only", provider=None, forced=force)
        return await self.cloud.context(channel, chat_id, force)

    async def _answer(
        self,
        messages: Callable[[], Awaitable[list[ChatMessage]]],
        conversation: list[ChatMessage],
        ctx: RoutingContext,
        tool_choice: ToolChoice,
        actions: list[ToolResult],
        use: CloudUse,
        stats: TurnStats,
    ) -> tuple[Generation | None, Decision, str]:
        """The answer, the decision that stands and the route: local first or the cloud, and the fallbacks."""
        decision = before_local(ctx)
        if decision.route == "cloud":
            cloud, decision = await self._try_cloud(conversation, tool_choice, decision, use, stats)
            if cloud is not None:
                return cloud, decision, "cloud"
            if stats.declines:  # the Pi's model would only guess at it: declined (DeclineDesk), not guessed
                return None, decision, "declined"
            return await self._local_or_raise(await messages(), tool_choice, actions, stats), decision, "local_fallback"
        if decision.wanted_cloud:  # /cloud, but the cloud may not be used now
            final = await self._local_or_raise(await messages(), tool_choice, actions, stats)
            return final, _with_suffix(decision, ": answered locally"), local_route(decision)
        allowed = ctx.cloud_blocked() is None and ctx.mode == "edge_first"
        final, outcome = await self.local.answer(await messages(), tool_choice, actions, stats, watch=allowed)
        decision = after_local(ctx, outcome, self.config.routing.min_confidence)
        if decision.route == "local":
            if final is None and stats.error is not None:
                raise stats.error  # no answer, and the cloud may not give one
            return final, decision, local_route(decision)
        stats.emit_("reroute", {"route": "cloud", "reason": decision.reason})
        cloud, decision = await self._try_cloud(conversation, tool_choice, decision, use, stats)
        if cloud is not None:
            return cloud, decision, "cloud"
        if stats.error is not None:  # the local model failed too: its error, with the cloud's in the message
            message = f"{stats.error.message}; the cloud could not answer either ({stats.cloud_error})"
            raise type(stats.error)(message, fix=stats.error.fix) from None
        if stats.declines:  # the Pi's model would only guess at it: declined, not its guess shown
            return None, decision, "declined"
        if final is None or outcome.aborted_early:
            final = await self._local_or_raise(await messages(), tool_choice, actions, stats)  # this time to the end
        return final, decision, "local_fallback"

    async def _local_or_raise(
        self, messages: list[ChatMessage], tool_choice: ToolChoice, actions: list[ToolResult], stats: TurnStats
    ) -> Generation | None:
        """The local answer, unwatched (no early abort, no escalation); its failure is the turn's."""
        final, _ = await self.local.answer(messages, tool_choice, actions, stats, watch=False)
        if final is None and stats.error is not None:
            raise stats.error
        return final

    async def _try_cloud(
        self,
        conversation: list[ChatMessage],
        tool_choice: ToolChoice,
        decision: Decision,
        use: CloudUse,
        stats: TurnStats,
    ) -> tuple[CloudGeneration | None, Decision]:
        """The cloud's answer, or None and the decision rewritten as a fallback when the cloud failed."""
        assert self.cloud is not None
        stats.partial = ""
        tools = self.tools if tool_choice != "none" and len(self.tools) > 0 else None
        messages = [ChatMessage("system", context.system_prompt(self.workspace, None)), *conversation]
        try:
            cloud = await self.cloud.answer(
                messages, tools, emit=stats.emit_, client=stats.client, use=use, turn=stats.tools
            )
        except CloudError as exc:
            log.warning("cloud failed, the Pi answers or declines: %s", exc.message)
            stats.cloud_error = exc.message
            stats.emit_("reroute", {"route": "local", "reason": f"{self.cloud.name} failed"})
            stats.partial = ""
            failed = Decision(
                "local",
                f"{decision.reason}, but {self.cloud.name} failed ({exc.message}): answered locally",
                decision.why,
                True,
                "cloud_failed",
            )
            return None, failed
        return cloud, decision

    async def _finish(
        self,
        record: ReplyRecord,
        conversation: int,
        session: str,
        emit: EventSink,
        use: CloudUse,
        local_tokens: TurnStats | None = None,
        person: bool = True,
        outside: Sequence[str] = (),
    ) -> ReplyRecord:
        """Store the reply and what it used, count the route, tell the listeners and the caller.

        ``outside``: the outside text in the turn's context (a page it read): the reply, shaped by it, is
        marked so, and no fact or summary is drawn from it (it would be recalled in every later chat).
        """
        record.session = session
        if record.route == "intent":
            emit("text", {"delta": record.text})
        await self.db.call(
            self.db.add_message,
            conversation,
            "assistant",
            record.text,
            route=record.route,
            meta={
                "actions": [action.as_dict() for action in record.actions],
                "timings": record.timings.as_dict(),
                "reason": record.reason,
                "model": record.model,
                # the tools the local model was shown: the next turn keeps them in place (a warm KV cache)
                "offered": [t.name for t in local_tokens.offered] if local_tokens is not None else [],
                **(_outside(outside) or {}),
                # a decline (agent/decline.py) is kept out of the model's history, with its question: the small
                # model copied "I can't answer that reliably" into its next answers
                **({"declined": True} if record.reason.endswith(DECLINED) else {}),
            },
        )
        if not person and self.memory is not None:  # not the owner's words: no fact is extracted from them
            await self.db.call(self.memory.pass_over, conversation)
        await self.db.call(self._ledger, record, use, local_tokens)
        await self.tools.hooks.turn_end(record)
        for listener in self.listeners:
            listener(record)
        emit("done", record.as_dict())
        return record

    def _ledger(self, record: ReplyRecord, use: CloudUse, local: TurnStats | None) -> None:
        """Count the turn's tokens and cost by provider, and its routing decision (on the database thread).

        The turn itself is counted once, under the model that answered it (the cloud's row for route
        ``cloud``, the Pi's otherwise); a model that only tried (a cloud that failed, a local answer that
        was escalated) adds its tokens and cost with 0 turns: `usage` then sums to `routing stats`.
        """
        answered_by_cloud = record.route == "cloud"
        if local is None or local.rounds or not answered_by_cloud:
            prompt, completion = (local.prompt_tokens, local.completion_tokens) if local is not None else (0, 0)
            model = self.model.name if local is not None else "-"
            self.db.add_usage(record.route, model, prompt, completion, turns=0 if answered_by_cloud else 1)
        if self.cloud is not None and (use.prompt_tokens or use.completion_tokens or use.seconds):
            model = self.cloud.provider.model if self.cloud.provider is not None else "-"
            self.db.add_usage(
                record.route,
                model,
                use.prompt_tokens,
                use.completion_tokens,
                provider=self.cloud.name,
                cost_usd=use.cost_usd,
                turns=1 if answered_by_cloud else 0,
            )
        self.db.add_route(record.route, record.why, record.blocked)

    def _intent(self, text: str, session: str) -> Intent | None:
        """The fast-path intent of a message: an answer to our last question, or a command of its own."""
        if self.intents is None:
            return None
        asked, at = self._asked.pop(session) or (None, 0.0)
        intent = None
        # A question left unanswered for longer than an approval lasts is no longer asked: a late "yes"
        # must not switch something the person has long forgotten about.
        if asked is not None and time.time() - at <= self.config.hardware.approval_timeout_s:
            # "Turn the fan on?" -> "yes"; "which light: porch or kitchen?" -> "porch"
            intent = answer_confirmation(asked, text) if asked.action == "confirm" else self.intents.answer(asked, text)
        intent = intent or self.intents.match(text)
        if intent is not None and intent.action == "ask":
            self._asked.put(session, intent)
        return intent

    def prefix_messages(self) -> list[ChatMessage]:
        """What every local chat turn's prompt starts with, for the model to keep warm (``LocalModel.warm_prefix``):
        the whole system prompt when every tool is offered every turn, else all of it before the ranked tool
        lines (a turn offered no tools shares the part before the tool protocol)."""
        if self.understanding is None or self.config.agent.local_tools <= 0:
            return [ChatMessage("system", context.system_prompt(self.workspace, self.tools))]
        return [ChatMessage("system", context.stable_system_prompt(self.workspace, len(self.tools) > 0))]

    async def reset(self, channel: str = "terminal", chat_id: str = "default") -> None:
        """Forget the conversation of a chat (it stays in the database, closed)."""
        await self.db.call(self.db.reset, channel, chat_id)
