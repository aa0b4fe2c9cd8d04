"""Approvals for any tool: a call of a tool in tools.require_approval waits for a person.

Everything is real: the agent loop with a scripted model that calls the shell, the bubblewrap shell,
the approvals table, the Telegram channel against the fake Bot API, the web API over a real socket.
What runs is checked by what the shell left in the workspace: a line appended per run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.agent.context import TOOL_CALL_START
from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import STATE, WebState
from appliance.config import Config, McpServerConfig, data_dir
from appliance.config.checks import BUILTIN_TOOLS, check_require_approval
from appliance.errors import ConfigError
from appliance.hardware.approvals import ApprovalError
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime, tool_registry
from appliance.tools.approvals import ToolRun
from tests.fakes.clock import ManualClock
from tests.helpers import needs_bwrap
from tests.telegram_harness import OWNER, Harness, buttons, run

COMMAND = "echo ran >> ran.txt"


def shell_call(command: str = COMMAND) -> str:
    return json.dumps({"name": "shell", "arguments": {"command": command}})


def runs(config: Config) -> int:
    """How many times the command ran (a line each)."""
    path = data_dir(config) / "workspace" / "ran.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture
def gated(config: Config) -> Iterator[Runtime]:
    config.tools.require_approval = ["shell"]
    config.memory.extract_after_messages = 0  # no background model calls between the scripted ones
    rt = Runtime.open(config, model=ScriptedModel())
    yield rt
    rt.close()


async def ask_for_shell(rt: Runtime, chat: str = "t") -> str:
    """The model calls the shell in a turn; returns the approval id it was told."""
    assert isinstance(rt.model, ScriptedModel)
    rt.model.enqueue(TOOL_CALL_START, shell_call(), "It waits for your approval.")
    # /local: the person asks the Pi itself (this looks hard, and would be declined for the cloud's want)
    record = await rt.agent.turn("append a line to ran.txt", channel="test", chat_id=chat, force="local")
    assert [(a.tool, a.ok) for a in record.actions] == [("shell", True)]
    told = record.actions[0].result or ""
    assert "waiting for a person's approval" in told
    action_id = told.split("(id ")[1].split(")")[0]
    return action_id


# --- config ---------------------------------------------------------------------------------------------


def test_require_approval_names_known_tools_or_a_configured_mcp_server() -> None:
    check_require_approval(["shell", "write_file"], {})
    check_require_approval(["mcp_files_delete", "mcp_files_*"], {"files": McpServerConfig(command=["x"])})
    with pytest.raises(ConfigError) as unknown:
        check_require_approval(["shel"], {})
    assert "tools.require_approval[0]" in unknown.value.message and "'shel'" in unknown.value.message
    assert unknown.value.fix is not None and "shell" in unknown.value.fix and "mcp_<server>_*" in unknown.value.fix
    with pytest.raises(ConfigError) as no_server:
        check_require_approval(["shell", "mcp_notes_add"], {"files": McpServerConfig(command=["x"])})
    assert "tools.require_approval[1]" in no_server.value.message and "files" in no_server.value.message


def test_the_known_names_are_every_tool_picoagent_registers(config: Config) -> None:
    """BUILTIN_TOOLS (what the config check accepts) against a registry with every tool on."""
    from appliance.agent.context import Workspace
    from appliance.config import WeatherConfig
    from appliance.memory.db import Database
    from appliance.memory.store import MemoryStore
    from appliance.runtime import device_registry, forecast_source

    config.hardware.raw_access.enabled = True
    config.weather = WeatherConfig(latitude=51.05, longitude=3.72, enabled=True, base_url="http://127.0.0.1:9/")
    workspace = Workspace(data_dir(config) / "workspace")
    workspace.ensure(config.agent.name)
    (workspace.root / "skills" / "demo").mkdir(parents=True)
    (workspace.root / "skills" / "demo" / "SKILL.md").write_text("---\nname: demo\ndescription: d\n---\nDo it.\n")
    workspace.reload_skills()
    db = Database(data_dir(config) / "picoagent.db")
    devices, raw = device_registry(config, db)
    try:
        memory = MemoryStore(db, None, model_name="none", dimensions=0)
        registry = tool_registry(config, devices, raw, memory, workspace, forecast_source(config))
        assert set(registry.tools) == set(BUILTIN_TOOLS)
    finally:
        assert devices is not None
        devices.close()
        db.close()


# --- the call waits; a person's decision runs it once -------------------------------------------------------


@needs_bwrap
def test_a_shell_call_waits_then_runs_once_when_approved(gated: Runtime) -> None:
    told: list[tuple[str, str]] = []
    assert gated.approvals is not None
    gated.approvals.notify = lambda text, kind: told.append((text, kind))

    async def main() -> None:
        action_id = await ask_for_shell(gated)
        assert runs(gated.config) == 0  # nothing ran
        assert gated.approvals is not None
        pending = gated.approvals.pending()
        assert [(p.id, p.tool, p.arguments, p.origin) for p in pending] == [
            (action_id, "shell", {"command": COMMAND}, "test:t")
        ]
        ran = await gated.approvals.decide(action_id, True, "test:owner")
        assert isinstance(ran, ToolRun) and ran.result.ok and runs(gated.config) == 1
        with pytest.raises(ApprovalError, match="already approved"):
            await gated.approvals.decide(action_id, True, "test:owner")
        assert runs(gated.config) == 1  # a double approve ran it once
        row = gated.approvals.store.get(action_id)
        assert row.status == "approved" and row.decided_by == "test:owner" and row.result is not None

    asyncio.run(main())
    assert len(told) == 1 and told[0][1] == "approval" and "shell ran" in told[0][0]
    conversation = gated.db.conversation("test", "t")
    said = [r[0] for r in gated.db.rows("SELECT content FROM messages WHERE conversation_id = ?", (conversation,))]
    assert any("Approved by test:owner" in text and "shell ran" in text for text in said)


@needs_bwrap
def test_two_approvals_at_the_same_moment_run_the_call_once(gated: Runtime) -> None:
    async def main() -> list[Any]:
        action_id = await ask_for_shell(gated)
        assert gated.approvals is not None
        decide = gated.approvals.decide
        return await asyncio.gather(decide(action_id, True, "a"), decide(action_id, True, "b"), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert sorted(type(o).__name__ for o in outcomes) == ["ApprovalError", "ToolRun"]
    assert runs(gated.config) == 1


def test_a_denied_or_expired_call_never_runs(config: Config) -> None:
    config.tools.require_approval = ["shell"]
    config.memory.extract_after_messages = 0
    rt = Runtime.open(config, model=ScriptedModel())
    clock = ManualClock(2_000_000_000.0)
    assert rt.approvals is not None
    rt.approvals.store.clock = clock
    try:

        async def main() -> None:
            assert rt.approvals is not None
            denied = await ask_for_shell(rt)
            result = await rt.approvals.decide(denied, False, "test:owner")
            assert not isinstance(result, ToolRun) and result.status == "denied"
            expiring = await ask_for_shell(rt)
            clock.advance(rt.config.hardware.approval_timeout_s + 1)
            with pytest.raises(ApprovalError, match="expired"):
                await rt.approvals.decide(expiring, True, "test:owner")
            assert rt.approvals.store.get(expiring).status == "expired"
            assert rt.approvals.pending() == []

        asyncio.run(main())
        assert runs(config) == 0
    finally:
        rt.close()


def test_a_tool_not_listed_runs_at_once_and_the_model_has_no_way_to_approve(gated: Runtime) -> None:
    assert isinstance(gated.model, ScriptedModel)
    gated.model.enqueue(TOOL_CALL_START, json.dumps({"name": "calculator", "arguments": {"expression": "2+3"}}), "5")
    record = asyncio.run(gated.agent.turn("Use the calculator for 2+3.", channel="test", chat_id="t"))
    assert record.actions[0].ok and record.actions[0].result == "5"
    assert not any("approv" in name or "decide" in name for name in gated.tools.tools)


# --- the chat channels and the web list -------------------------------------------------------------------------


@needs_bwrap
def test_telegram_approve_lists_the_call_and_its_button_runs_it_once(config: Config) -> None:
    config.tools.require_approval = ["shell"]
    config.memory.extract_after_messages = 0

    async def scenario(h: Harness) -> None:
        action_id = await ask_for_shell(h.runtime)
        h.fake.push_message(OWNER, OWNER, "/approve")
        [card] = await h.reply_to(OWNER)
        assert f"run shell {json.dumps({'command': COMMAND})}" in card["text"] and action_id in card["text"]
        assert buttons(card) == {f"apr:approve:{action_id}": "Approve", f"apr:deny:{action_id}": "Deny"}
        h.fake.push_callback(OWNER, OWNER, card["message_id"], f"apr:approve:{action_id}")
        await h.settle()
        assert runs(config) == 1
        assert card["text"].startswith("Approved by") and "shell ran" in card["text"] and "reply_markup" not in card
        again = h.fake.push_callback(OWNER, OWNER, card["message_id"], f"apr:approve:{action_id}")
        await h.fake.wait_for(lambda: h.fake.callback_answers[again] is not None)
        assert "already approved" in h.fake.callback_answers[again]["text"]  # type: ignore[index]
        denied = await ask_for_shell(h.runtime)
        before = len(h.fake.bot_messages(OWNER))
        h.fake.push_message(OWNER, OWNER, f"/deny {denied}")
        answer = (await h.reply_to(OWNER, before + 1))[-1]["text"]
        assert answer.startswith("Denied by") and denied in answer
        assert runs(config) == 1

    run(config, scenario)


@needs_bwrap
def test_the_web_lists_the_call_and_approving_it_runs_it(gated: Runtime) -> None:
    auth = Auth(gated.db)
    app = build_app(WebState(gated, auth))

    async def main() -> None:
        action_id = await ask_for_shell(gated)
        token = app[STATE].auth.add_token("tests", scope="devices")
        headers = {"Authorization": f"Bearer {token}"}
        async with TestClient(TestServer(app)) as client:
            listed = await (await client.get("/api/approvals", headers=headers)).json()
            assert [(p["id"], p["tool"], p["arguments"]) for p in listed["pending"]] == [
                (action_id, "shell", {"command": COMMAND})
            ]
            response = await client.post(f"/api/approvals/{action_id}/approve", headers=headers)
            assert response.status == 200
            body = await response.json()
            assert body["tool"] == "shell" and body["ok"] is True and body["done"] is True
            again = await client.post(f"/api/approvals/{action_id}/approve", headers=headers)
            assert again.status == 409

    asyncio.run(main())
    assert runs(gated.config) == 1


def test_the_cli_without_a_daemon_lists_and_denies_but_does_not_run_a_call(
    gated: Runtime, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import yaml

    from appliance.cli import main as cli_main

    action_id = asyncio.run(ask_for_shell(gated))
    path = tmp_path / "cli.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "data_dir": str(data_dir(gated.config)),
                "tools": {"require_approval": ["shell"]},
            }
        )
    )
    assert cli_main(["--config", str(path), "approvals", "list"]) == 0
    assert f"{action_id}: run shell" in capsys.readouterr().out
    assert cli_main(["--config", str(path), "approvals", "approve", action_id]) == 2
    assert "run in the daemon" in capsys.readouterr().err
    assert gated.approvals is not None and gated.approvals.store.get(action_id).status == "pending"
    assert cli_main(["--config", str(path), "approvals", "deny", action_id]) == 0
    assert gated.approvals.store.get(action_id).status == "denied"
    assert runs(gated.config) == 0


def test_the_approvals_help_says_it_covers_tool_calls_as_well_as_device_writes(tmp_path: Path) -> None:
    """`picoagent approvals --help` and the command list, read as a person reads them."""
    from tests.helpers import picoagent

    own = picoagent("approvals", "--help", cwd=tmp_path)
    assert own.returncode == 0, own.stderr
    words = " ".join(own.stdout.split())  # argparse wraps the description
    assert "Device writes and tool calls waiting for a person's approval" in words
    assert "tools.require_approval" in words and "approval: required" in words
    for line in ("list", "approve", "deny"):
        described = next(s for s in own.stdout.splitlines() if s.strip().startswith(f"{line} "))
        assert "tool call" in described, described  # not "a pending write" alone
    listed = picoagent("--help", cwd=tmp_path).stdout
    assert "approvals      device writes and tool calls waiting for a person" in listed
