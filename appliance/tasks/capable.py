"""Whether a task can be worked here: by a model that can plan, on the Pi or in the cloud.

A task is a plan and then steps that call tools. The packaged SmolLM2-135M cannot do that: asked to plan
"What is 2+2?" it wrote "I'm ready to help. What's your task?", every task ended partial and the prompt's
own instructions came back as results. So a task runs only where a model that can plan will work it:

- the local model, when the catalog says it ``plans`` (an instruct model of 1B parameters or more; a model
  given by path, or one the catalog does not know, is the owner's choice and is trusted);
- else the cloud, when it may be used for tasks (a provider, a mode other than ``local_only``, the ``task``
  channel not kept local, a budget): a task on route ``auto`` then works on the cloud;
- else it is refused when it is added (``tasks add``, ``POST /api/tasks``, the model's ``task_create``) and,
  for one already queued or started by a schedule, when its first step would run: it fails saying which
  model it needs, and nothing a model wrote from the task's prompt reaches anyone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from appliance.errors import UsageError

if TYPE_CHECKING:
    from appliance.agent.escalation import Forced
    from appliance.config import Config
    from appliance.runtime import Runtime

PLANNER = "qwen2.5-1.5b"  # the catalog model named as the one to install for tasks


def cloud_refusal(config: Config) -> str:
    """Why a task's turns cannot go to the cloud here ("" when they can)."""
    routing = config.routing
    if not routing.cloud_provider:
        return "no cloud provider is configured (routing.cloud_provider is empty)"
    if routing.cloud_provider not in config.providers:
        return f"routing.cloud_provider names {routing.cloud_provider!r}, which is not under providers:"
    if routing.mode == "local_only":
        return "routing.mode is local_only"
    if "task" in routing.local_only_channels:
        return "the task channel is in routing.local_only_channels"
    if min(routing.daily_budget_usd, routing.monthly_budget_usd) <= 0:
        return "the cloud budget is 0 (routing.daily_budget_usd / monthly_budget_usd)"
    return ""


def task_route(config: Config, route: str, model_name: str) -> Forced:
    """Where a task's turns go: its route's force, and ``cloud`` for an ``auto`` task the local model
    cannot plan when the cloud may work it."""
    from appliance.llm.models import plans

    if route == "cloud":
        return "cloud"
    if route == "local":
        return "local"
    return "cloud" if not plans(model_name) and not cloud_refusal(config) else None


def refusal(config: Config, route: str, model_name: str) -> UsageError | None:
    """Why a task on ``route`` cannot be worked here, with what would let it (None: it can)."""
    from appliance.llm.models import plans

    if route == "cloud":
        why = cloud_refusal(config)
        if why:
            # --route auto is offered only where the Pi's model can work the task (walk 9: it was refused next)
            other = "; or use --route auto (the model on this Pi can plan)" if plans(model_name) else ""
            return UsageError(
                f"a task cannot run on the cloud here: {why}",
                fix="add a provider under providers:, name it in routing.cloud_provider and set routing.mode to "
                f"edge_first or cloud_first (`picoagent providers --check` tries it){other}",
            )
        return None
    if plans(model_name) or (route == "auto" and not cloud_refusal(config)):
        return None
    from appliance.llm import models

    planner = models.load_catalog()[PLANNER]
    from appliance.llm.download import format_size

    cloud = cloud_refusal(config)
    return UsageError(
        f"tasks need a model that can plan and use tools, and {model_name}, the model on this Pi, cannot"
        + (f"; the cloud may not work it either: {cloud}" if route == "auto" else " (the task's route is local)"),
        fix=f"install a bigger model: `picoagent models pull {PLANNER}` ({format_size(planner.size_bytes)}, about "
        f"{planner.ram_mb} MB of RAM; one of the catalog models that plan, which llm.model: auto need not pick "
        f"here) and set llm.model: {PLANNER}; or let tasks use the cloud (a provider under providers:, "
        "routing.cloud_provider, routing.mode: edge_first)",
    )


def can_work(runtime: Runtime) -> None:
    """:func:`check_task` for a task on route ``auto`` with this runtime's config and running model."""
    check_task(runtime.config, "auto", runtime.agent.model.name)


def check_task(config: Config, route: str, model_name: str) -> None:
    """Raise :func:`refusal`'s error, if any: a task is refused when it is added, not after it ran."""
    problem = refusal(config, route, model_name)
    if problem is not None:
        raise problem
