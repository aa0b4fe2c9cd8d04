"""The cloud side of a turn: may the cloud be used now, the cloud's own tool loop, and what it cost.

:mod:`appliance.agent.router` decides; this module gathers what it decides on (the mode, the channel,
whether the chat is private, the network, the provider's circuit, the budget left from the usage
ledger) and runs the cloud model when the decision says so. The agent loop owns the turn.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from appliance.agent.router import RoutingContext
from appliance.config import Config, ProviderConfig
from appliance.llm.base import ChatMessage, CloudGeneration, GenerationRequest
from appliance.memory.db import Database
from appliance.tools.registry import ToolRegistry, ToolTurn
from appliance.tools.result import ToolResult

if TYPE_CHECKING:
    from appliance.llm.cloud import CloudProvider

log = logging.getLogger(__name__)

EventSink = Callable[[str, dict[str, Any]], None]
Forced = Literal["local", "cloud"] | None


def is_local_host(host: str) -> bool:
    """Whether a host is this machine or the LAN (reachable without a default route)."""
    if host in ("localhost", "") or host.endswith((".local", ".lan", ".home.arpa")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def has_default_route(proc_net: Path = Path("/proc/net")) -> bool:
    """Whether the kernel has a default route (IPv4 or IPv6): without one, no cloud API is reachable.

    Reads /proc (tens of microseconds), so it is asked on every message; where /proc says nothing
    (not Linux), the answer is True and the provider's circuit breaker is the judge.
    """
    try:
        with open(proc_net / "route", encoding="ascii") as f:
            next(f, None)
            for line in f:
                fields = line.split()
                if len(fields) > 3 and fields[1] == "00000000" and int(fields[3], 16) & 1:  # RTF_UP
                    return True
        with open(proc_net / "ipv6_route", encoding="ascii") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 9 and fields[0] == "0" * 32 and fields[1] == "00" and fields[9] != "lo":
                    return True
    except OSError:
        return True
    return False


@dataclass
class CloudUse:
    """What the cloud part of one turn used."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    actions: list[ToolResult] = field(default_factory=list)


class CloudRoute:
    """The configured escalation target and everything that decides whether it may be used."""

    def __init__(
        self,
        config: Config,
        db: Database,
        provider: CloudProvider | None = None,
        *,
        route_exists: Callable[[], bool] = has_default_route,
    ) -> None:
        self.config = config
        self.routing = config.routing
        self.db = db
        name = config.routing.cloud_provider
        self.provider_config: ProviderConfig | None = config.providers.get(name) if name else None
        if provider is None and self.provider_config is not None and config.routing.mode != "local_only":
            from appliance.llm.cloud import make_provider  # only with a provider: see CloudGeneration

            provider = make_provider(name, self.provider_config)
        self.provider = provider
        self._route_exists = route_exists
        host = urlsplit(self.provider.api_base).hostname or "" if self.provider is not None else ""
        self._needs_route = not is_local_host(host)

    @property
    def name(self) -> str:
        """The provider's name ("" when there is none)."""
        return self.provider.name if self.provider is not None else ""

    def model_name(self) -> str:
        """The cloud model as reply records show it: provider/model."""
        return f"{self.provider.name}/{self.provider.model}" if self.provider is not None else ""

    def network_up(self) -> bool:
        """Whether the provider can be reached at all (a LAN or loopback server needs no default route)."""
        return not self._needs_route or self._route_exists()

    def budget_left_usd(self, spent: tuple[float, float]) -> float:
        """What may still be spent, given (today, this month) so far."""
        return min(self.routing.daily_budget_usd - spent[0], self.routing.monthly_budget_usd - spent[1])

    def budget_off(self) -> str:
        """The budget key set to 0 or below (the cloud is off by budget), or "" when both allow spending."""
        for key in ("daily_budget_usd", "monthly_budget_usd"):
            if getattr(self.routing, key) <= 0:
                return f"routing.{key}"
        return ""

    def context_sync(self, channel: str, chat_id: str, forced: Forced) -> RoutingContext:
        """The routing context of a message (reads the database: call on its thread)."""
        if self.provider is None or self.routing.mode == "local_only":
            # Nothing below can change the answer; skip the database and /proc.
            return RoutingContext(mode=self.routing.mode, provider=self.name or None, forced=forced)
        return RoutingContext(
            mode=self.routing.mode,
            provider=self.provider.name,
            forced=forced,
            channel_local_only=channel in self.routing.local_only_channels,
            conversation_local_only=self.db.is_private(channel, chat_id),
            network_up=self.network_up(),
            circuit_open=self.provider.breaker.is_open,
            budget_left_usd=self.budget_left_usd(self.db.spent_usd()),
            budget_off=self.budget_off(),
        )

    async def context(self, channel: str, chat_id: str, forced: Forced) -> RoutingContext:
        """The routing context of a message."""
        if self.provider is None or self.routing.mode == "local_only":
            return self.context_sync(channel, chat_id, forced)
        return await self.db.call(self.context_sync, channel, chat_id, forced)

    async def answer(
        self,
        messages: list[ChatMessage],
        tools: ToolRegistry | None,
        *,
        emit: EventSink,
        client: str,
        use: CloudUse,
        turn: ToolTurn | None = None,
    ) -> CloudGeneration:
        """The cloud's answer, running the tools it calls (natively) for at most ``agent.max_rounds`` calls.

        ``use`` gathers tokens, cost and actions as they happen, so a failure half-way still counts them.
        Raises CloudError subclasses when the provider cannot answer.
        """
        from appliance.llm.cloud import cost_usd

        assert self.provider is not None and self.provider_config is not None
        cfg = self.config.agent
        schemas = [tool.schema() for tool in tools] if tools is not None else []
        started = time.perf_counter()
        try:
            for round_number in range(cfg.max_rounds):
                last = round_number == cfg.max_rounds - 1
                request = GenerationRequest(
                    messages=list(messages),
                    max_tokens=cfg.max_reply_tokens,
                    temperature=cfg.temperature,
                    on_token=lambda piece: emit("text", {"delta": piece}),
                    client=client,
                )
                generation = await self.provider.generate(request, tools=() if last else schemas)
                use.prompt_tokens += generation.prompt_tokens
                use.completion_tokens += generation.completion_tokens
                use.cost_usd += cost_usd(self.provider_config, generation.prompt_tokens, generation.completion_tokens)
                if not generation.tool_calls or tools is None:
                    return generation
                messages.append(ChatMessage("assistant", generation.text, tool_calls=tuple(generation.tool_calls)))
                for call in generation.tool_calls:
                    emit("tool_call", {"tool": call["name"], "arguments": call["arguments"]})
                    result = await tools.execute(
                        call["name"], call["arguments"], timeout_s=cfg.tool_timeout_s, turn=turn
                    )
                    use.actions.append(result)
                    emit("tool_result", result.as_dict())
                    messages.append(ChatMessage("tool", result.for_model(), tool_call_id=call["id"]))
            return generation  # unreachable: the last round offers no tools
        finally:
            use.seconds += time.perf_counter() - started

    async def close(self) -> None:
        """Close the provider's HTTP session."""
        if self.provider is not None:
            await self.provider.close()
