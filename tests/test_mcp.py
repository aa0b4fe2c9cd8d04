"""MCP both ways, against the official SDK: our client runs a FastMCP server; the SDK's client drives ours.

The server side is `picoagent mcp` run as a subprocess; the client side starts tests/fakes/mcp_server.py.
The SDK (`mcp`, v1) is a dev dependency in pyproject.toml.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from llama_cpp import LlamaGrammar
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError as SdkError

from appliance.agent.context import tool_call_schema
from appliance.cli.doctor import _check_mcp
from appliance.config import Config, McpServerConfig
from appliance.mcp import adapt, protocol
from appliance.mcp.client import McpClients, McpServer, safe_env
from appliance.mcp.server import McpToolServer
from appliance.tools import builtin
from appliance.tools.registry import Redactor, Tool, ToolRegistry
from tests.helpers import config_file, eventually, free_port, picoagent, wait_for, wait_healthy

ROOT = Path(__file__).resolve().parent.parent
FAKE = ROOT / "tests" / "fakes" / "mcp_server.py"
FAKE_TOOLS = {"add", "crash", "env", "fail", "slow", "where_is"}


def fake_config(**kw: Any) -> McpServerConfig:
    return McpServerConfig(command=[sys.executable, str(FAKE)], **{"timeout_s": 15.0, **kw})


@asynccontextmanager
async def started(server: McpServer, registry: ToolRegistry | None = None) -> AsyncIterator[ToolRegistry]:
    registry = registry if registry is not None else ToolRegistry()
    clients = McpClients({server.name: server}, registry)
    await clients.start()
    assert not clients.problems, clients.problems
    try:
        yield registry
    finally:
        await clients.stop()


# --- the client, against a FastMCP server -----------------------------------------------------------


def test_the_servers_tools_join_the_registry_named_described_and_typed() -> None:
    async def scenario() -> None:
        server = McpServer("fake", fake_config())
        async with started(server) as registry:
            assert {t.name for t in registry} == {f"mcp_fake_{n}" for n in FAKE_TOOLS}  # every page of tools/list
            assert server.protocol_version in protocol.SUPPORTED_VERSIONS
            assert server.server_info["name"] == "fake-tools"
            add = registry.get("mcp_fake_add")
            assert add.description == "Add two integers."  # the first paragraph only
            assert add.parameters["required"] == ["a", "b"]
            assert add.parameters["properties"]["a"]["type"] == "integer"
            where = registry.get("mcp_fake_where_is")  # "Where-Is": a pydantic argument behind a $ref
            assert "$ref" not in json.dumps(where.parameters) and "$defs" not in json.dumps(where.parameters)
            assert where.parameters["properties"]["place"]["properties"]["city"] == {"title": "City", "type": "string"}

    asyncio.run(scenario())


def test_calls_give_text_and_a_tool_error_is_a_failed_result() -> None:
    async def scenario() -> None:
        async with started(McpServer("fake", fake_config())) as registry:
            added = await registry.execute("mcp_fake_add", {"a": 2, "b": 40})
            assert added.ok and added.output == "42"
            where = await registry.execute("mcp_fake_where_is", {"place": {"city": "Ghent", "country": "Belgium"}})
            assert where.ok and where.output == "Ghent is in Belgium"
            failed = await registry.execute("mcp_fake_fail", {"reason": "the pump is dry"})
            assert not failed.ok and "the pump is dry" in (failed.error or "")
            wrong = await registry.execute("mcp_fake_add", {"a": "two", "b": 2})  # refused before it is sent
            assert not wrong.ok and "a must be integer" in (wrong.error or "")

    asyncio.run(scenario())


def test_the_server_gets_a_minimal_environment_and_its_output_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAEMON_SECRET", "hunter2-hunter2")
    assert "DAEMON_SECRET" not in safe_env({})

    async def scenario() -> None:
        server = McpServer("fake", fake_config(env={"PUMP": "on", "TOKEN": "s3cr3t-value"}))
        async with started(server, ToolRegistry(redact=Redactor({"s3cr3t-value"}))) as registry:
            assert (await registry.execute("mcp_fake_env", {"name": "DAEMON_SECRET"})).output == "(unset)"
            assert (await registry.execute("mcp_fake_env", {"name": "PUMP"})).output == "on"
            assert (await registry.execute("mcp_fake_env", {"name": "PATH"})).output != "(unset)"
            assert (await registry.execute("mcp_fake_env", {"name": "TOKEN"})).output == "[redacted]"

    asyncio.run(scenario())


def test_a_crashed_server_fails_the_call_naming_itself_and_restarts_on_the_next() -> None:
    async def scenario() -> None:
        server = McpServer("fake", fake_config(), restart_every_s=60.0)
        async with started(server) as registry:
            crashed = await registry.execute("mcp_fake_crash", {})
            assert not crashed.ok
            assert crashed.error == "mcp server fake exited with code 3: fake-tools: crashing on purpose"
            again = await registry.execute("mcp_fake_add", {"a": 1, "b": 1})  # the first restart is at once
            assert again.ok and again.output == "2"
            await registry.execute("mcp_fake_crash", {})
            refused = await registry.execute("mcp_fake_add", {"a": 1, "b": 1})  # not twice within a minute
            assert not refused.ok and "mcp server fake is down (exited with code 3" in (refused.error or "")
            assert "restarted in" in (refused.error or "")

    asyncio.run(scenario())


def test_a_call_past_the_servers_timeout_fails_and_the_server_goes_on() -> None:
    async def scenario() -> None:
        server = McpServer("fake", fake_config())
        async with started(server) as registry:
            server.config = replace(server.config, timeout_s=0.5)  # after a start that may take longer
            slow = await registry.execute("mcp_fake_slow", {"seconds": 5}, timeout_s=10)
            assert not slow.ok and slow.error == "mcp server fake: tools/call timed out after 0.5 s"
            assert (await registry.execute("mcp_fake_add", {"a": 1, "b": 2})).output == "3"

    asyncio.run(scenario())


def test_servers_that_do_not_start_are_problems_not_errors(tmp_path: Path) -> None:
    hangs = McpServerConfig(command=[sys.executable, "-c", "import time; time.sleep(60)"], timeout_s=0.5)
    missing = McpServerConfig(command=[str(tmp_path / "no-such-server")])
    not_mcp = McpServerConfig(command=[sys.executable, "-c", "print('hello'); import sys; sys.exit(1)"])

    async def scenario() -> tuple[McpClients, list[McpServer]]:
        servers = [McpServer("hangs", hangs), McpServer("missing", missing), McpServer("not_mcp", not_mcp)]
        clients = McpClients({s.name: s for s in servers}, ToolRegistry())
        await clients.start()  # never raises
        await clients.stop()
        return clients, servers

    clients, servers = asyncio.run(scenario())
    assert clients.problems["hangs"] == "mcp server hangs did not start within 0.5 s"
    assert clients.problems["missing"].startswith(f"mcp server missing: cannot run {tmp_path / 'no-such-server'}")
    assert clients.problems["not_mcp"] == "mcp server not_mcp exited with code 1"
    assert len(clients.registry) == 0
    hung = servers[0]._proc
    # The hung one was stopped by a signal, not waited for through its 60 s sleep (which would end it with 0).
    assert hung is not None and hung.returncode is not None and hung.returncode < 0, hung and hung.returncode


def test_doctor_starts_each_server_and_reports_the_broken_one(config: Config, tmp_path: Path) -> None:
    config.tools.mcp = {
        "fake": fake_config(),
        "broken": McpServerConfig(command=[str(tmp_path / "nope")]),
        "off": McpServerConfig(command=[str(tmp_path / "nope")], enabled=False),
    }
    checks = {c.name: c for c in _check_mcp(config, tmp_path)}
    assert set(checks) == {"mcp fake", "mcp broken"}
    assert checks["mcp fake"].status == "ok" and "fake-tools" in checks["mcp fake"].detail
    assert "6 tool(s)" in checks["mcp fake"].detail
    assert checks["mcp broken"].status == "fail" and "cannot run" in checks["mcp broken"].detail
    assert checks["mcp broken"].fix


def test_names_schemas_and_results_are_adapted() -> None:
    assert adapt.tool_name("My Server", "Get-Weather.now") == "mcp_my_server_get_weather_now"
    long = adapt.tool_name("s", "x" * 100)
    assert len(long) == 64 and long != adapt.tool_name("s", "x" * 99)
    recursive = {"type": "object", "properties": {"node": {"$ref": "#/$defs/Node"}}, "$defs": {}}
    recursive["$defs"] = {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}}
    params = adapt.parameters(recursive)
    assert params["properties"]["node"]["type"] == "object" and "$defs" not in params
    assert adapt.parameters(None) == {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    tricky = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "^\\p{L}+$", "not": {"const": "root"}},
            "mode": {"if": {"type": "string"}, "then": {"minLength": 1}},
            "tags": {"type": "array", "items": {"type": "string", "format": "uri"}, "minItems": 1},
        },
        "required": ["id", "ghost"],
        "dependentRequired": {"id": ["mode"]},
    }
    cleaned = adapt.parameters(tricky)
    assert cleaned["properties"]["id"] == {"type": "string"} and cleaned["properties"]["mode"] == {}
    assert cleaned["required"] == ["id"] and "dependentRequired" not in cleaned
    schema = tool_call_schema([Tool("mcp_x_y", "d", cleaned, print), Tool("other", "d", adapt.parameters({}), print)])
    LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)  # the local model's grammar accepts it
    content = [
        {"type": "text", "text": "a"},
        {"type": "image", "data": "...", "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "file:///x", "text": "b"}},
    ]
    assert adapt.result_text({"content": content}) == "a\n[image image/png: not shown]\nb"
    assert adapt.result_text({"content": [], "structuredContent": {"t": 1}}) == '{"t": 1}'


def test_tools_list_and_run_start_the_servers_on_demand(tmp_path: Path) -> None:
    block = (
        "  mcp:\n"
        f"    fake: {{command: [{json.dumps(sys.executable)}, {json.dumps(str(FAKE))}]}}\n"
        f"    broken: {{command: [{json.dumps(str(tmp_path / 'nope'))}]}}\n"
    )
    config = config_file(tmp_path / "conf", {"  mcp: {}\n": block})
    listed = picoagent("--config", config, "--data-dir", tmp_path / "data", "tools", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "mcp_fake_add(a: integer, b: integer)\n    Add two integers.\n" in listed.stdout
    assert "calculator(expression: string)" in listed.stdout
    assert "note: the tools of MCP server broken are missing: mcp server broken: cannot run" in listed.stderr
    where = ("--config", config, "--data-dir", tmp_path / "data")
    ran = picoagent(*where, "tools", "run", "mcp_fake_add", "--args", '{"a": 1, "b": 2}', cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["result"] == "3"


# --- the server (`picoagent mcp`), driven by the SDK's client ---------------------------------------


@pytest.fixture
def mcp_command(tmp_path: Path) -> StdioServerParameters:
    config = config_file(tmp_path / "conf")
    env = {k: v for k, v in os.environ.items() if k != "PICOAGENT_CONFIG"}
    args = ["-m", "appliance", "--config", str(config), "--data-dir", str(tmp_path / "data"), "mcp"]
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))


def test_picoagent_mcp_serves_our_tools_to_the_sdk_client(mcp_command: StdioServerParameters, tmp_path: Path) -> None:
    async def scenario() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with stdio_client(mcp_command, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.serverInfo.name == "picoagent"
                assert init.protocolVersion in protocol.SUPPORTED_VERSIONS
                assert init.capabilities.tools is not None
                await session.send_ping()
                tools = {t.name: t for t in (await session.list_tools()).tools}
                assert {"calculator", "current_time", "device_read", "device_set"} <= set(tools)
                assert tools["calculator"].inputSchema["required"] == ["expression"]
                assert tools["device_read"].annotations is not None and tools["device_read"].annotations.readOnlyHint
                answer = await session.call_tool("calculator", {"expression": "6*7"})
                assert not answer.isError and answer.content[0].text == "42"  # type: ignore[union-attr]
                refused = await session.call_tool("calculator", {"expression": "1/0"})
                assert refused.isError and refused.content[0].text == "division by zero"  # type: ignore[union-attr]
                reading = await session.call_tool("device_read", {"name": "living_room"})  # simulated BME280
                assert not reading.isError and "living_room" in reading.content[0].text  # type: ignore[union-attr]
                with pytest.raises(SdkError) as unknown:
                    await session.call_tool("nope", {})
                assert unknown.value.error.code == protocol.INVALID_PARAMS
                assert "unknown tool: nope" in unknown.value.error.message

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_picoagent_mcp_answers_protocol_errors_and_keeps_stdout_clean(tmp_path: Path) -> None:
    config = config_file(tmp_path / "conf")
    lines = [
        "not json",
        "[1, 2]",
        json.dumps(protocol.request(1, "initialize", {"protocolVersion": "1999-01-01", "capabilities": {}})),
        json.dumps(protocol.notification("notifications/initialized")),
        json.dumps(protocol.request(2, "resources/list")),
        json.dumps(protocol.request(3, "tools/call", {"name": 7})),
        json.dumps(protocol.request(4, "tools/call", {"name": "calculator", "arguments": {"expression": "2**10"}})),
        json.dumps({"jsonrpc": "2.0", "id": None, "method": "ping"}),
    ]
    out = subprocess.run(
        [sys.executable, "-m", "appliance", "--config", str(config), "--data-dir", str(tmp_path / "data"), "mcp"],
        input="\n".join(lines) + "\n",
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PICOAGENT_CONFIG"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    replies = [json.loads(line) for line in out.stdout.splitlines()]  # every line is a protocol message
    errors = {r.get("id"): r["error"]["code"] for r in replies if "error" in r}
    results = {r["id"]: r["result"] for r in replies if "result" in r}
    assert [r["error"]["code"] for r in replies if "error" in r and r["id"] is None] == [
        protocol.PARSE_ERROR,
        protocol.INVALID_REQUEST,
        protocol.INVALID_REQUEST,
    ]
    assert results[1]["protocolVersion"] == protocol.PROTOCOL_VERSION  # an unknown version: ours instead
    assert errors[2] == protocol.METHOD_NOT_FOUND and errors[3] == protocol.INVALID_PARAMS
    assert results[4] == {"content": [{"type": "text", "text": "1024"}], "isError": False}


def test_the_server_cancels_a_call_when_asked_and_answers_pings_meanwhile() -> None:
    async def scenario() -> list[dict[str, Any]]:
        registry = builtin.default_registry()

        async def wait_a_while() -> str:
            """Take a long time."""
            await asyncio.sleep(30)
            return "done"

        registry.register(wait_a_while)
        sent: list[dict[str, Any]] = []
        server = McpToolServer(registry, lambda data: sent.append(json.loads(data)), timeout_s=60)
        server.receive(protocol.encode(protocol.request(1, "tools/call", {"name": "wait_a_while"})))
        server.receive(protocol.encode(protocol.request(2, "ping")))
        await eventually(lambda: sent, what="the ping's answer")
        assert server.running == 1  # the call still runs
        server.receive(protocol.encode(protocol.notification("notifications/cancelled", {"requestId": 1})))
        await eventually(lambda: server.running == 0, what="the cancelled call's end")
        return sent

    assert asyncio.run(scenario()) == [protocol.response(2, {})]  # no answer for the cancelled call


# --- the daemon ------------------------------------------------------------------------------------


@pytest.fixture
def daemon_with_mcp(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, Path]]:
    pidfile = tmp_path / "fake.pid"
    block = (
        "  mcp:\n"
        "    fake:\n"
        f"      command: [{json.dumps(sys.executable)}, {json.dumps(str(FAKE))}]\n"
        f"      env: {{FAKE_MCP_PIDFILE: {json.dumps(str(pidfile))}}}\n"
        "    broken:\n"
        f"      command: [{json.dumps(str(tmp_path / 'nope'))}]\n"
    )
    config = config_file(tmp_path / "conf", {"  mcp: {}\n": block, "  preload: true\n": "  preload: false\n"})
    port = free_port()
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "appliance", "--config", str(config), "--data-dir", str(tmp_path / "data")]
    env = {k: v for k, v in os.environ.items() if k not in ("PICOAGENT_CONFIG", "NOTIFY_SOCKET", "WATCHDOG_USEC")}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*cmd, "serve", "--host", "127.0.0.1", "--port", str(port)], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    try:
        wait_healthy(port)
        yield proc, log, pidfile
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_daemon_starts_the_servers_and_stops_them_at_shutdown(
    daemon_with_mcp: tuple[subprocess.Popen[bytes], Path, Path],
) -> None:
    proc, log, pidfile = daemon_with_mcp
    wait_for(lambda: "mcp server fake: started, 6 tool(s)" in log.read_text(), 15, "the fake server's start")
    text = log.read_text()
    assert "mcp server fake: started, 6 tool(s)" in text, text
    assert "mcp server broken did not start: mcp server broken: cannot run" in text  # and the daemon serves on
    pid = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the server was stopped with the daemon
    assert "Traceback" not in log.read_text()
