"""Plugin hooks: a small registry of callbacks run at fixed points of a turn.

A plugin is a Python module with ``register(hooks: Hooks) -> None``; it adds callbacks by hook name:

- ``on_turn_start(event: TurnStart)``: a message is about to be answered;
- ``on_tool_result(result: ToolResult)``: a tool returned; return a ToolResult to replace it (or None);
- ``on_turn_end(record: ReplyRecord)``: the reply is final.

Callbacks may be plain or ``async`` functions. A failing callback is logged and skipped: a plugin's bug
never ends a turn. Secrets are redacted from tool output after every hook ran, so a plugin cannot
hand one to the model.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.errors import ConfigError
from appliance.tools.result import ToolResult

if TYPE_CHECKING:
    from appliance.agent.record import ReplyRecord

log = logging.getLogger(__name__)

HOOK_NAMES = ("on_turn_start", "on_tool_result", "on_turn_end")


@dataclass(frozen=True)
class TurnStart:
    """A message about to be answered."""

    text: str
    channel: str
    chat_id: str


@dataclass
class Hooks:
    """Callbacks by hook name, run in the order they were registered."""

    callbacks: dict[str, list[Callable[..., Any]]] = field(default_factory=lambda: {n: [] for n in HOOK_NAMES})

    def register(self, hook: str, callback: Callable[..., Any]) -> None:
        """Add a callback to a hook (one of HOOK_NAMES)."""
        if hook not in self.callbacks:
            raise ValueError(f"no hook named {hook!r}; hooks: {', '.join(HOOK_NAMES)}")
        self.callbacks[hook].append(callback)

    def __len__(self) -> int:
        return sum(len(c) for c in self.callbacks.values())

    async def _call(self, hook: str, callback: Callable[..., Any], argument: Any) -> Any:
        try:
            value = callback(argument)
            if inspect.isawaitable(value):
                value = await value
            return value
        except Exception:
            log.warning("plugin hook %s (%s) failed", hook, getattr(callback, "__qualname__", callback), exc_info=True)
            return None

    async def turn_start(self, event: TurnStart) -> None:
        """Run the on_turn_start callbacks."""
        for callback in self.callbacks["on_turn_start"]:
            await self._call("on_turn_start", callback, event)

    async def tool_result(self, result: ToolResult) -> ToolResult:
        """Run the on_tool_result callbacks; each may replace the result."""
        for callback in self.callbacks["on_tool_result"]:
            replaced = await self._call("on_tool_result", callback, result)
            if isinstance(replaced, ToolResult):
                result = replaced
        return result

    async def turn_end(self, record: ReplyRecord) -> None:
        """Run the on_turn_end callbacks."""
        for callback in self.callbacks["on_turn_end"]:
            await self._call("on_turn_end", callback, record)


def load_plugins(hooks: Hooks, modules: list[str], folder: Path | None = None) -> None:
    """Import each plugin module and let it register its callbacks (config errors name the module).

    ``folder`` (``<data_dir>/plugins``): a module file put there is found too. It is the one place a plugin of a
    single file needs no packaging (a README walk found ``pip install -e`` refuses one), and the data dir survives
    an update, where the release's venv is replaced."""
    if folder is not None and folder.is_dir() and str(folder) not in sys.path:
        sys.path.append(str(folder))  # after the venv: a plugin never shadows a module of the appliance's
    for index, name in enumerate(modules):
        where = f"tools.plugins[{index}]"
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # ImportError, or the module's own error at import
            raise ConfigError(
                f"{where}: cannot import plugin {name!r}: {type(exc).__name__}: {exc}",
                fix=f"put {name}.py in {folder or '<data_dir>/plugins'}, install it in the appliance's venv, or remove "
                "it from tools.plugins",
            ) from None
        register = getattr(module, "register", None)
        if not callable(register):
            raise ConfigError(f"{where}: plugin {name!r} has no register(hooks) function")
        try:
            register(hooks)
        except Exception as exc:
            raise ConfigError(f"{where}: plugin {name!r} failed to register: {type(exc).__name__}: {exc}") from None
        log.info("loaded plugin %s", name)
