"""Agents the tests drive: one on the real local model with the built-in tools, one turn run with its
events recorded, and an agent that escalates to a fake cloud (several suites share them)."""

from __future__ import annotations

import asyncio
from typing import Any

from appliance.agent.context import Workspace
from appliance.agent.escalation import CloudRoute
from appliance.agent.loop import Agent
from appliance.agent.record import ReplyRecord
from appliance.config import Config, ProviderConfig
from appliance.llm.base import Generation, GenerationRequest
from appliance.llm.embeddings import LocalEmbedder
from appliance.llm.local import LocalModel
from appliance.llm.scripted import ScriptedModel
from appliance.memory.db import Database
from appliance.tools import builtin
from appliance.tools.registry import ToolRegistry
from tests.fakes.cloud_api import FakeCloud

Events = list[tuple[str, dict[str, Any]]]


# A sum for the model's calculator tool: said as an instruction, not asked, so the grounded arithmetic
# (which answers "what is 17 times 23?" itself, by words or by meaning) leaves it to the model.
CALCULATE = "Use the calculator for 17 times 23."


def make_agent(config: Config, model: LocalModel, tools: ToolRegistry | None = None) -> Agent:
    data = config.resolve_path(config.data_dir)
    workspace = Workspace(data / "workspace")
    workspace.ensure(config.agent.name)
    db = Database(data / "picoagent.db")
    return Agent(config, model, db, tools if tools is not None else builtin.default_registry(), workspace)


def run(agent: Agent, text: str, **kw: Any) -> tuple[ReplyRecord, list[tuple[str, dict[str, Any]]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    record = asyncio.run(agent.turn(text, on_event=lambda k, d: events.append((k, d)), **kw))
    return record, events


class Routed:
    """An agent on the real local model that escalates to a fake cloud."""

    def __init__(
        self,
        config: Config,
        model: LocalModel,
        fake: FakeCloud,
        understanding: LocalEmbedder | None = None,
        **provider_options: Any,
    ) -> None:
        config.providers["fake"] = ProviderConfig(
            type=fake.flavour,
            api_base=fake.api_base,
            model=fake.model,
            api_key=fake.api_key,
            price_in_per_mtok=3.0,
            price_out_per_mtok=15.0,
        )
        config.routing.mode = "edge_first"
        config.routing.cloud_provider = "fake"
        config.agent.max_reply_tokens = 24  # lean: the local answer is judged, not read
        config.agent.temperature = 0.0
        data = config.resolve_path(config.data_dir)
        workspace = Workspace(data / "workspace")
        workspace.ensure(config.agent.name)
        self.db = Database(data / "picoagent.db")
        self.fake = fake
        self.cloud = CloudRoute(config, self.db, fake.provider(**provider_options))
        self.agent = Agent(
            config, model, self.db, builtin.default_registry(), workspace, cloud=self.cloud, understanding=understanding
        )

    async def ask(self, text: str, **kwargs: Any) -> tuple[ReplyRecord, Events]:
        events: Events = []
        record = await self.agent.turn(text, on_event=lambda kind, data: events.append((kind, data)), **kwargs)
        return record, events

    async def close(self) -> None:
        await self.cloud.close()
        self.db.close()


class SlowModel(ScriptedModel):
    """The scripted model writing one word every 40 ms, so that a reply visibly streams."""

    async def generate(self, request: GenerationRequest) -> Generation:
        words: list[str] = []
        on_token, request.on_token = request.on_token, words.append
        generation = await super().generate(request)
        for word in words:
            await asyncio.sleep(0.04)
            if on_token is not None:
                on_token(word)
        return generation


class MeteredModel(ScriptedModel):
    """The scripted model reporting fixed token counts for every generation, and keeping each one.

    A turn's tokens are then known ahead (``prompt_tokens + completion_tokens`` a model call), so budgets
    can be tested to the token.
    """

    def __init__(self, prompt_tokens: int = 900, completion_tokens: int = 100) -> None:
        super().__init__()
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.generated: list[Generation] = []

    async def generate(self, request: GenerationRequest) -> Generation:
        generation = await super().generate(request)
        generation.prompt_tokens = self.prompt_tokens
        generation.completion_tokens = self.completion_tokens
        self.generated.append(generation)
        return generation
