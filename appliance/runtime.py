"""Builds the services a command needs from the config: database, model, tools, workspace, agent.

The daemon (``serve``) and the one-process commands (``chat``, ``tools run``) share this, so that a
turn is the same wherever it is served.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from appliance.agent.context import Workspace
from appliance.agent.loop import Agent
from appliance.config import Config
from appliance.llm.base import ServedModel
from appliance.llm.local import LocalModel
from appliance.llm.scheduler import FairScheduler
from appliance.memory.db import Database
from appliance.tools import builtin
from appliance.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


def data_dir(config: Config) -> Path:
    """The state folder this config names (created when missing)."""
    path = config.resolve_path(config.data_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def models_dir(config: Config) -> Path:
    """Where pulled models live."""
    return data_dir(config) / "models"


def model_spec(config: Config) -> str:
    """Which model to run: llm.model, else the one chosen with `models use`, else the default."""
    from appliance.llm import models

    spec = config.llm.model
    if spec and ("/" in spec or spec.endswith(".gguf")):
        return str(config.resolve_path(spec))  # a path: relative to the config file's folder
    return spec or models.selected_model(models_dir(config)) or models.default_model_name()


def model_path(config: Config) -> Path:
    """The model file to run (ModelNotFoundError with the fix when it is not there)."""
    from appliance.llm import models

    spec = model_spec(config)
    return models.resolve_model(spec, models_dir(config))


def local_model(config: Config) -> LocalModel:
    """The local model worker for this config (loaded on first use)."""
    llm = config.llm
    path = model_path(config)
    return LocalModel(
        path,
        context_tokens=llm.context_tokens,
        threads=llm.threads,
        batch_threads=llm.batch_threads,
        batch_size=llm.batch_size,
        seed=llm.seed,
        timeout_s=llm.timeout_s,
        memory_margin_mb=llm.memory_margin_mb,
        extra_stop=llm.stop,
        name=model_spec(config),
    )


def tool_registry(config: Config) -> ToolRegistry:
    """The tools the model may call."""
    return builtin.default_registry()


@dataclass
class Runtime:
    """Everything one turn needs, owned together and closed together."""

    config: Config
    db: Database
    model: ServedModel
    scheduler: FairScheduler  # the model, shared fairly between clients
    tools: ToolRegistry
    workspace: Workspace
    agent: Agent
    owns_model: bool = True

    @classmethod
    def open(cls, config: Config, *, model: ServedModel | None = None) -> Runtime:
        """Open the database and workspace and prepare (not yet load) the model.

        ``model``: share an existing worker instead (tests share one loaded model); it is not closed.
        """
        root = data_dir(config)
        workspace = Workspace(root / "workspace")
        for created in workspace.ensure(config.agent.name):
            log.info("created %s", created)
        owns_model = model is None
        model = model or local_model(config)
        scheduler = FairScheduler(model)
        db = Database(root / "picoagent.db")
        tools = tool_registry(config)
        agent = Agent(config, scheduler, db, tools, workspace)
        return cls(config, db, model, scheduler, tools, workspace, agent, owns_model)

    def close(self) -> None:
        """Stop the model worker (when this runtime made it) and close the database."""
        if self.owns_model:
            self.model.close()
        self.db.close()
