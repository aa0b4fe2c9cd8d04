"""Plugins: real modules on sys.path, loaded by name; their hooks see turns and tool results."""

from __future__ import annotations

import asyncio
import logging
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from appliance.config import Config
from appliance.errors import ConfigError
from appliance.llm.local import LocalModel
from appliance.plugins import Hooks, TurnStart, load_plugins
from appliance.runtime import base_registry
from appliance.tools import builtin
from appliance.tools.registry import Redactor, ToolRegistry
from tests.helpers import assert_clean_error, config_file, picoagent

RECORDING = '''
"""Records every hook and marks every tool's answer."""

from appliance.tools.result import ToolResult

seen = []


def register(hooks):
    hooks.register("on_turn_start", lambda event: seen.append(("start", event)))
    hooks.register("on_tool_result", checked)
    hooks.register("on_turn_end", ended)


async def checked(result):
    seen.append(("tool", result.name))
    if result.ok:
        return ToolResult(result.name, result.arguments, True, result.output + " (checked by plugin)")
    return None  # the result stands


async def ended(record):
    seen.append(("end", record))
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], ModuleType]:
    """Write a plugin module into a folder on sys.path; returns a loader giving the imported module."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))

    def write(name: str, source: str) -> ModuleType:
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.delitem(sys.modules, name, raising=False)  # each test imports its own copy
        hooks = Hooks()
        load_plugins(hooks, [name])
        module = sys.modules[name]
        module.hooks = hooks  # type: ignore[attr-defined]
        return module

    return write


def test_a_plugin_sees_tool_results_and_may_rewrite_them(plugin: Callable[[str, str], ModuleType]) -> None:
    module = plugin("recording_plugin", RECORDING)
    registry = ToolRegistry(hooks=module.hooks)
    builtin.register(registry)
    assert len(module.hooks) == 3

    async def scenario() -> None:
        await registry.hooks.turn_start(TurnStart("hi", "terminal", "default"))
        calc = await registry.execute("calculator", {"expression": "6*7"})
        assert calc.ok and calc.output == "42 (checked by plugin)"
        failed = await registry.execute("calculator", {"expression": "1/0"})
        assert not failed.ok and failed.error == "division by zero"  # returned None: unchanged

    asyncio.run(scenario())
    assert [kind for kind, _ in module.seen] == ["start", "tool", "tool"]
    assert module.seen[0][1] == TurnStart("hi", "terminal", "default")


def test_a_failing_hook_is_logged_and_skipped(
    plugin: Callable[[str, str], ModuleType], caplog: pytest.LogCaptureFixture
) -> None:
    module = plugin(
        "broken_plugin",
        """
        calls = []

        def register(hooks):
            hooks.register("on_tool_result", explode)
            hooks.register("on_tool_result", lambda result: calls.append(result.name))
            hooks.register("on_turn_end", explode)

        def explode(value):
            raise RuntimeError("plugin bug")
        """,
    )
    registry = ToolRegistry(hooks=module.hooks)
    builtin.register(registry)
    with caplog.at_level(logging.WARNING, logger="appliance.plugins"):
        result = asyncio.run(registry.execute("calculator", {"expression": "2+2"}))
    assert result.ok and result.output == "4"
    assert module.calls == ["calculator"]  # the hook after the broken one still ran
    assert "plugin hook on_tool_result (explode) failed" in caplog.text and "plugin bug" in caplog.text


def test_a_plugin_cannot_hand_a_secret_to_the_model(plugin: Callable[[str, str], ModuleType]) -> None:
    module = plugin(
        "leaky_plugin",
        """
        from appliance.tools.result import ToolResult

        def register(hooks):
            hooks.register("on_tool_result", leak)

        def leak(result):
            if result.ok:
                return ToolResult(result.name, result.arguments, True, "token=s3cr3t-value " + result.output)
            return ToolResult(result.name, result.arguments, False, "", error="failed with s3cr3t-value")
        """,
    )
    registry = ToolRegistry(hooks=module.hooks, redact=Redactor({"s3cr3t-value"}))
    builtin.register(registry)
    ok = asyncio.run(registry.execute("calculator", {"expression": "1+1"}))
    assert ok.output == "token=[redacted] 2" and "s3cr3t" not in str(ok.as_dict())
    failed = asyncio.run(registry.execute("calculator", {"expression": "1/0"}))
    assert failed.error == "failed with [redacted]"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (None, "tools.plugins[1]: cannot import plugin 'no_such_plugin_here': ModuleNotFoundError"),
        ("x = 1\n", "tools.plugins[1]: plugin 'bad_plugin' has no register(hooks) function"),
        ("raise ImportError('needs smbus3')\n", "tools.plugins[1]: cannot import plugin 'bad_plugin': ImportError"),
        (
            "def register(hooks):\n    hooks.register('on_reply', print)\n",
            "tools.plugins[1]: plugin 'bad_plugin' failed to register: ValueError: no hook named 'on_reply'",
        ),
    ],
)
def test_load_errors_name_the_config_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str | None, message: str
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bad_plugin", raising=False)
    monkeypatch.delitem(sys.modules, "good_plugin", raising=False)
    (tmp_path / "good_plugin.py").write_text("def register(hooks):\n    pass\n")
    name = "no_such_plugin_here" if source is None else "bad_plugin"
    if source is not None:
        (tmp_path / "bad_plugin.py").write_text(source)
    with pytest.raises(ConfigError) as caught:
        load_plugins(Hooks(), ["good_plugin", name])
    assert caught.value.message.startswith(message), caught.value.message


def test_the_config_loads_plugins_into_the_registry(
    config: Config, plugin: Callable[[str, str], ModuleType], tmp_path: Path
) -> None:
    plugin("config_plugin", RECORDING)  # written and importable
    config.tools.plugins = ["config_plugin"]
    registry = base_registry(config)
    assert len(registry.hooks) == 3
    assert asyncio.run(registry.execute("calculator", {"expression": "3*3"})).output == "9 (checked by plugin)"


def test_a_plugin_that_does_not_load_stops_the_command_with_the_key(tmp_path: Path) -> None:
    config = config_file(tmp_path / "conf", {"  plugins: []\n": "  plugins: [picoagent_no_such_plugin]\n"})
    out = picoagent("--config", config, "--data-dir", tmp_path / "data", "tools", "list", cwd=tmp_path)
    assert_clean_error(out, 2)
    assert "tools.plugins[0]: cannot import plugin 'picoagent_no_such_plugin'" in out.stderr


def test_a_turn_runs_the_hooks_with_the_reply_record(
    config: Config, local_model: LocalModel, plugin: Callable[[str, str], ModuleType]
) -> None:
    from tests.agents import make_agent, run

    module = plugin("turn_plugin", RECORDING)
    config.agent.temperature = 0.0
    config.agent.max_reply_tokens = 40
    config.agent.max_rounds = 2
    registry = ToolRegistry(hooks=module.hooks)
    registry.register(builtin.current_time)  # no arguments: whatever the small model writes, the call works
    agent = make_agent(config, local_model, registry)
    asked = "Use the current_time tool."  # asked "what time is it?", the clock answers with no model and no tool
    record, _events = run(agent, asked, tool_choice="required", chat_id="plugins")
    kinds = [kind for kind, _ in module.seen]
    assert kinds[0] == "start" and kinds[-1] == "end" and "tool" in kinds
    assert module.seen[0][1] == TurnStart(asked, "terminal", "plugins")
    assert module.seen[-1][1] is record  # the final reply record, as returned
    action = record.actions[0]
    assert action.tool == "current_time" and action.ok
    assert action.result.endswith(" (checked by plugin)")  # the model read the rewritten result
