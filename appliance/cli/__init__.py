"""The `picoagent` command: the only place that prints for people and chooses exit codes.

Imports are lazy so that `picoagent --help` answers at once: heavy modules (llama.cpp, numpy,
YAML) load only inside the command that needs them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from appliance import __version__
from appliance.channels.web.scopes import DEFAULT_SCOPE
from appliance.channels.web.scopes import SCOPES as TOKEN_SCOPES
from appliance.cli import access as access_cmd
from appliance.cli import models as models_cmd
from appliance.cli.common import load
from appliance.cli.common import print_json as _print_json

if TYPE_CHECKING:
    from appliance.config import Config

Handler = Callable[[argparse.Namespace], int]


def _common() -> argparse.ArgumentParser:
    """--config and --data-dir, accepted before or after the command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help="config file (default: see README)")
    common.add_argument(
        "--data-dir", metavar="PATH", default=argparse.SUPPRESS, help="state folder, overrides data_dir"
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    common = _common()
    parser = argparse.ArgumentParser(
        prog="picoagent",
        description="A private AI assistant that lives on a Raspberry Pi.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"picoagent {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    chat = sub.add_parser("chat", parents=[common], help="chat in the terminal (no network, no daemon)")
    chat.add_argument("-m", "--message", metavar="TEXT", help="answer this one message and exit")
    chat.add_argument("--json", action="store_true", help="print the reply record as JSON")
    chat.add_argument("--session", default="default", help="conversation name (default: default)")
    chat.set_defaults(handler=cmd_chat)

    serve = sub.add_parser("serve", parents=[common], help="run the daemon: web page, chat, API on the LAN")
    serve.add_argument("--host", help="address to listen on (default: web.host, 0.0.0.0)")
    serve.add_argument("--port", type=int, help="TCP port (default: web.port, 8080)")
    serve.set_defaults(handler=cmd_serve)

    status = sub.add_parser("status", parents=[common], help="health of the running appliance")
    status.add_argument("--json", action="store_true", help="print /api/status as JSON")
    status.set_defaults(handler=cmd_status)

    access_cmd.add_parser(sub, common)

    tokens = sub.add_parser("tokens", parents=[common], help="API tokens for programs (Authorization: Bearer)")
    ksub = tokens.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = ksub.add_parser("add", parents=[common], help="make a token; it is shown once")
    add.add_argument("name")
    add.add_argument("--stdin", action="store_true", help="adopt the token read from standard input (pat_...)")
    add.add_argument(
        "--scope",
        choices=TOKEN_SCOPES,
        default=DEFAULT_SCOPE,
        help="what it may do: chat (default; chat and the OpenAI API), read (also status, history, devices),"
        " devices (also switch devices, approve writes), admin (everything)",
    )
    add.set_defaults(handler=cmd_tokens_add)
    ksub.add_parser("list", parents=[common], help="the tokens and their scopes (never their values)").set_defaults(
        handler=cmd_tokens_list
    )
    scope = ksub.add_parser("scope", parents=[common], help="give a token another scope (its value stays)")
    scope.add_argument("name")
    scope.add_argument("scope", choices=TOKEN_SCOPES)
    scope.set_defaults(handler=cmd_tokens_scope)
    revoke = ksub.add_parser("revoke", parents=[common], help="revoke a token")
    revoke.add_argument("name")
    revoke.set_defaults(handler=cmd_tokens_revoke)

    devices = sub.add_parser("devices", parents=[common], help="list, read and set the named devices")
    dsub = devices.add_subparsers(dest="action", metavar="ACTION", required=True)
    dsub.add_parser("list", parents=[common], help="the devices and their readings").set_defaults(
        handler=cmd_devices_list
    )
    dread = dsub.add_parser("read", parents=[common], help="read a device now")
    dread.add_argument("name")
    dread.set_defaults(handler=cmd_devices_read)
    dset = dsub.add_parser("set", parents=[common], help="set a device: on, off or a brightness like 40%%")
    dset.add_argument("name")
    dset.add_argument("value")
    dset.set_defaults(handler=cmd_devices_set)

    hw = sub.add_parser("hw", parents=[common], help="the buses themselves")
    hsub = hw.add_subparsers(dest="action", metavar="ACTION", required=True)
    scan = hsub.add_parser("scan", parents=[common], help="which I2C addresses answer (like i2cdetect)")
    scan.add_argument("--bus", type=int, default=1, help="I2C bus number (default 1)")
    scan.set_defaults(handler=cmd_hw_scan)

    approvals = sub.add_parser("approvals", parents=[common], help="device writes waiting for a person")
    asub = approvals.add_subparsers(dest="action", metavar="ACTION", required=True)
    asub.add_parser("list", parents=[common], help="pending writes").set_defaults(handler=cmd_approvals_list)
    for decision in ("approve", "deny"):
        one = asub.add_parser(decision, parents=[common], help=f"{decision} a pending write")
        one.add_argument("id")
        one.set_defaults(handler=cmd_approvals_decide, decision=decision)

    doctor = sub.add_parser("doctor", parents=[common], help="check config, model, database, memory")
    doctor.set_defaults(handler=cmd_doctor)

    models_cmd.add_parser(sub, common)

    tools = sub.add_parser("tools", parents=[common], help="list and run the model's tools")
    tsub = tools.add_subparsers(dest="action", metavar="ACTION", required=True)
    tsub.add_parser("list", parents=[common], help="the tools and their arguments").set_defaults(handler=cmd_tools_list)
    run = tsub.add_parser("run", parents=[common], help="run a tool as the model would")
    run.add_argument("name")
    run.add_argument("--args", default="{}", metavar="JSON", help="arguments as a JSON object, e.g. '{\"a\": 1}'")
    run.set_defaults(handler=cmd_tools_run)

    skills = sub.add_parser("skills", parents=[common], help="the workspace's skills (workspace/skills/NAME/SKILL.md)")
    ssub = skills.add_subparsers(dest="action", metavar="ACTION", required=True)
    slist = ssub.add_parser("list", parents=[common], help="each skill, what it requires, and the files with problems")
    slist.add_argument("--json", action="store_true", help="print as JSON")
    slist.set_defaults(handler=cmd_skills_list)

    mcp = sub.add_parser("mcp", parents=[common], help="serve the tools to another program as an MCP server (stdio)")
    mcp.set_defaults(handler=cmd_mcp)

    memory = sub.add_parser("memory", parents=[common], help="long-term memory: search, add, forget, prune, export")
    msub2 = memory.add_subparsers(dest="action", metavar="ACTION", required=True)
    msearch = msub2.add_parser("search", parents=[common], help="find memories by meaning and keyword")
    msearch.add_argument("query", nargs="+")
    msearch.add_argument("-k", type=int, default=5, help="how many (default 5)")
    msearch.add_argument("--json", action="store_true", help="print the hits as JSON")
    msearch.set_defaults(handler=cmd_memory_search)
    madd = msub2.add_parser("add", parents=[common], help="remember a fact")
    madd.add_argument("text", nargs="+")
    madd.set_defaults(handler=cmd_memory_add)
    mforget = msub2.add_parser("forget", parents=[common], help="forget one memory")
    mforget.add_argument("id", type=int)
    mforget.set_defaults(handler=cmd_memory_forget)
    mprune = msub2.add_parser("prune", parents=[common], help="forget facts older than some days")
    mprune.add_argument("--older-than", type=float, required=True, metavar="DAYS")
    mprune.set_defaults(handler=cmd_memory_prune)
    msub2.add_parser("export", parents=[common], help="write MEMORY.md and HISTORY.md into the workspace").set_defaults(
        handler=cmd_memory_export
    )

    tg = sub.add_parser("telegram", parents=[common], help="the Telegram bot: pair a user")
    gsub = tg.add_subparsers(dest="action", metavar="ACTION", required=True)
    pair = gsub.add_parser("pair", parents=[common], help="a one-time code: whoever sends it to the bot may talk to it")
    pair.add_argument(
        "--ttl", type=float, default=600, metavar="SECONDS", help="how long the code is valid (default 600)"
    )
    pair.set_defaults(handler=cmd_telegram_pair)

    cron = sub.add_parser("cron", parents=[common], help="scheduled jobs: list them, run one now")
    csub = cron.add_subparsers(dest="action", metavar="ACTION", required=True)
    clist = csub.add_parser("list", parents=[common], help="the jobs with their next and last runs")
    clist.add_argument("--json", action="store_true", help="print the jobs as JSON")
    clist.set_defaults(handler=cmd_cron_list)
    crun = csub.add_parser("run", parents=[common], help="run a job now (in the daemon when it runs)")
    crun.add_argument("id")
    crun.set_defaults(handler=cmd_cron_run)

    tasks = sub.add_parser("tasks", parents=[common], help="persistent tasks: a goal worked on step by step")
    tasub = tasks.add_subparsers(dest="action", metavar="ACTION", required=True)
    tadd = tasub.add_parser("add", parents=[common], help="queue a task (the daemon starts it within seconds)")
    tadd.add_argument("goal", nargs="+", help="what to do, e.g. water the plants when the soil is dry, then tell me")
    tadd.set_defaults(handler=cmd_tasks_add)
    tlist = tasub.add_parser("list", parents=[common], help="the tasks and their states")
    tlist.add_argument("--state", choices=["pending", "running", "done", "error", "paused"], help="only these")
    tlist.add_argument("--json", action="store_true", help="print the tasks as JSON")
    tlist.set_defaults(handler=cmd_tasks_list)
    tasub.add_parser("run", parents=[common], help="work the pending tasks here (when no daemon runs)").set_defaults(
        handler=cmd_tasks_run
    )
    for move, text in (("pause", "pause a task after its current step"), ("resume", "put a paused task back")):
        one = tasub.add_parser(move, parents=[common], help=text)
        one.add_argument("id", type=int)
        one.set_defaults(handler=cmd_tasks_move, move=move)
    tlogs = tasub.add_parser("logs", parents=[common], help="a task's steps")
    tlogs.add_argument("id", type=int)
    tlogs.add_argument("--json", action="store_true", help="print the task and its steps as JSON")
    tlogs.set_defaults(handler=cmd_tasks_logs)

    prov = sub.add_parser("providers", parents=[common], help="the cloud models configured, and the routing mode")
    prov.add_argument("--check", action="store_true", help="ask each provider for one token (costs a request)")
    prov.add_argument("--json", action="store_true", help="print as JSON")
    prov.set_defaults(handler=cmd_providers)
    usage = sub.add_parser("usage", parents=[common], help="tokens and cloud cost by day and provider")
    usage.add_argument("--days", type=int, default=30, help="how many days back (default 30)")
    usage.add_argument("--json", action="store_true", help="print as JSON")
    usage.set_defaults(handler=cmd_usage)
    routing = sub.add_parser("routing", parents=[common], help="where messages were answered, and why")
    rsub = routing.add_subparsers(dest="routing_command", required=True, metavar="COMMAND")
    rstats = rsub.add_parser("stats", parents=[common], help="how often and why messages went to the cloud")
    rstats.add_argument("--days", type=int, default=30, help="how many days back (default 30)")
    rstats.add_argument("--json", action="store_true", help="print as JSON")
    rstats.set_defaults(handler=cmd_routing_stats)
    update = sub.add_parser("update", help="over-the-air updates of this device (as root)")
    from appliance.update_cli import add_arguments as update_arguments

    update_arguments(update)
    update.set_defaults(handler=cmd_update)
    selftest = sub.add_parser("selftest", parents=[common], help="check this installation can run (OTA runs it)")
    selftest.set_defaults(handler=cmd_selftest)
    return parser


# --- chat ----------------------------------------------------------------------------------------


def cmd_chat(args: argparse.Namespace) -> int:
    """Terminal chat, or one answer with -m."""
    import asyncio

    from appliance.channels.terminal import TerminalChat
    from appliance.runtime import Runtime

    config = load(args)
    runtime = Runtime.open(config)
    try:
        chat = TerminalChat(runtime, session=args.session)
        if args.message is None:
            if args.json:
                print("error: --json goes with -m TEXT", file=sys.stderr)
                return 2
            return chat.interactive()
        record = asyncio.run(chat.ask_once(args.message, stream=not args.json))
        if args.json:
            _print_json(record.as_dict())
        else:
            print()
            if sys.stderr.isatty():
                print(chat.footer(record), file=sys.stderr)
        return 0
    finally:
        runtime.close()


# --- the daemon ----------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the daemon until SIGTERM."""
    import asyncio

    from appliance.daemon import Daemon

    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # log lines reach journald at once
    config = load(args, log_stream=sys.stdout)  # a daemon logs to stdout, where journald reads it
    if config.log_level == "warning":
        import logging

        logging.getLogger().setLevel(logging.INFO)  # a daemon's state changes belong in its log
    daemon = Daemon(config, host=args.host, port=args.port, data_dir_override=getattr(args, "data_dir", None))
    return asyncio.run(daemon.run())


def _daemon_get(config: Config, path: str, body: dict[str, Any] | None = None, *, timeout: float = 30) -> Any:
    """GET (or POST ``body`` to) a path of the running daemon as the local CLI; None when nothing answers."""
    import urllib.error
    import urllib.request

    from appliance.daemon import DaemonInfo
    from appliance.errors import PicoagentError
    from appliance.runtime import data_dir

    root = data_dir(config)
    try:
        info = json.loads(DaemonInfo.path(root).read_text())
        token = DaemonInfo.token_path(root).read_text().strip()
    except FileNotFoundError:
        return None
    except PermissionError:
        raise PicoagentError(
            f"cannot read {DaemonInfo.token_path(root)}", fix="run as the picoagent user or with sudo"
        ) from None
    host = "127.0.0.1" if info["host"] in ("0.0.0.0", "::", "") else info["host"]
    scheme = info.get("scheme", "http")
    context = _daemon_tls(root) if scheme == "https" else None
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{scheme}://{host}:{info['port']}{path}", data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read())
        except ValueError:
            error = {}
        if isinstance(error, dict) and "error" in error:
            raise PicoagentError(str(error["error"]), fix=error.get("fix")) from None
        raise PicoagentError(f"the daemon answered {exc.code} for {path}") from None
    except (urllib.error.URLError, OSError):
        return None


def _daemon_tls(root: Any) -> Any:
    """An SSL context trusting exactly the daemon's own certificate (in its data dir), host names checked."""
    from appliance.channels.web.certificate import folder, read_certificate
    from appliance.errors import PicoagentError

    try:
        certificate = read_certificate(root)
    except PermissionError:
        raise PicoagentError(f"cannot read {folder(root)}", fix="run as the picoagent user or with sudo") from None
    if certificate is None:
        raise PicoagentError(
            f"the daemon serves HTTPS, but its certificate is not in {folder(root)}",
            fix="restart it (`systemctl restart picoagent`): it makes a new one",
        )
    return certificate.client_context()


def cmd_status(args: argparse.Namespace) -> int:
    """Health of the running daemon, or say it is not running."""
    config = load(args)
    status = _daemon_get(config, "/api/status")
    if status is None:
        print("picoagent is not running (start it with `picoagent serve` or `systemctl start picoagent`)")
        return 3
    if args.json:
        _print_json(status)
        return 0
    health, model = status["health"], status["model"]
    temp = health.get("cpu_temperature_c")
    print(f"picoagent {status['version']} · up {status['uptime_s'] / 3600:.1f} h")
    print(
        f"model: {model['name']} ({'loaded' if model['loaded'] else 'not loaded'})"
        + (f", {model['recent_tps']:.1f} tok/s" if model.get("recent_tps") else "")
        + f", queue {model['queue_depth']}"
    )
    print(
        f"pi: {f'{temp} °C' if temp is not None else 'temperature not available'}, load {health['load'][0]}, "
        f"{health['memory_available_mb']} MB free of {health['memory_total_mb']}, disk {health['disk_free_gb']} GB free"
    )
    web = status.get("web") or {}
    if web.get("url"):
        print(f"web: {web['url']}" + (" (HTTPS; plain http:// is redirected)" if web.get("tls") else ""))
    if web.get("certificate"):
        from appliance.channels.web.certificate import curl_command

        certificate = web["certificate"]
        print(f"  certificate public key SHA-256: {certificate['fingerprint_sha256']}")
        print(f"  {curl_command(certificate['pin'], web['url'] + '/healthz')}")
    for reply in status["recent"][:5]:
        print(f"  {reply['route']:>6}  {reply['total_s']:.2f} s  {reply['session']}  {reply['reason']}")
    return 0


def _auth(config: Config) -> Any:
    from appliance.channels.web.auth import Auth
    from appliance.memory.db import Database
    from appliance.runtime import data_dir

    return Auth(Database(data_dir(config) / "picoagent.db"))


def cmd_tokens_add(args: argparse.Namespace) -> int:
    """Make an API token and show it once."""
    if args.stdin:
        _auth(load(args)).add_token(args.name, sys.stdin.readline().strip(), scope=args.scope)
        print(f"token {args.name!r} added (scope {args.scope})")
        return 0
    token = _auth(load(args)).add_token(args.name, scope=args.scope)
    print(token)
    print(
        f"(token {args.name!r}, scope {args.scope}: shown this once; send it as `Authorization: Bearer ...`)",
        file=sys.stderr,
    )
    return 0


def cmd_tokens_list(args: argparse.Namespace) -> int:
    """The API tokens, never their values."""
    import datetime as dt

    def when(ts: float | None) -> str:
        return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "never"

    for info in _auth(load(args)).list_tokens():
        print(f"{info.name:24} {info.scope:8} created {when(info.created_at)}  last used {when(info.last_used_at)}")
    return 0


def cmd_tokens_scope(args: argparse.Namespace) -> int:
    """Give an API token another scope."""
    from appliance.errors import UsageError

    if not _auth(load(args)).set_token_scope(args.name, args.scope):
        raise UsageError(f"no token named {args.name!r}", fix="picoagent tokens list shows them")
    print(f"token {args.name!r} now has scope {args.scope}")
    return 0


def cmd_tokens_revoke(args: argparse.Namespace) -> int:
    """Revoke an API token."""
    from appliance.errors import UsageError

    if not _auth(load(args)).revoke_token(args.name):
        raise UsageError(f"no token named {args.name!r}", fix="picoagent tokens list shows them")
    print(f"token {args.name!r} revoked")
    return 0


# --- devices -------------------------------------------------------------------------------------


class _Direct:
    """The devices opened by this process (when no daemon owns them); closed on exit."""

    def __init__(self, config: Config) -> None:
        from appliance.memory.db import Database
        from appliance.runtime import data_dir, device_registry

        self.db = Database(data_dir(config) / "picoagent.db")
        try:
            self.devices, self.raw = device_registry(config, self.db)
        except Exception:
            self.db.close()
            raise

    def __enter__(self) -> Any:
        from appliance.errors import UnknownDeviceError

        if self.devices is None:
            self.close()
            raise UnknownDeviceError("no devices are configured", fix="declare them under devices: in the config")
        return self.devices

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.devices is not None:
            self.devices.close()
        self.db.close()


def _show_readings(name: str, readings: list[dict[str, Any]]) -> str:
    from appliance.hardware.drivers.base import Reading

    return f"{name}: " + ", ".join(str(Reading(r["quantity"], r["value"], r["unit"])) for r in readings)


def cmd_devices_list(args: argparse.Namespace) -> int:
    """The devices, through the daemon when it runs."""
    config = load(args)
    listed = _daemon_get(config, "/api/devices")
    if listed is None:
        import asyncio

        from appliance.channels.web.devices import device_states

        with _Direct(config) as devices:
            listed = {"devices": asyncio.run(device_states(devices, {}))}
    if not listed["devices"]:
        print("no devices configured (declare them under devices: in the config)")
    for device in listed["devices"]:
        where = f" · {device['room']}" if device.get("room") else ""
        state = device.get("error") or _show_readings(device["name"], device.get("readings", []))
        approval = " · approval required" if device["approval"] == "required" else ""
        print(f"{device['name']:16} {device['driver']:8} {device['kind']:7}{where}{approval}\n    {state}")
    return 0


def cmd_devices_read(args: argparse.Namespace) -> int:
    """Read one device."""
    config = load(args)
    answer = _daemon_get(config, f"/api/devices/{args.name}")
    if answer is None:
        with _Direct(config) as devices:
            answer = {"readings": [r.as_dict() for r in devices.read_sync(args.name)]}
    print(_show_readings(args.name, answer["readings"]))
    return 0


def cmd_devices_set(args: argparse.Namespace) -> int:
    """Set one device."""
    config = load(args)
    answer = _daemon_get(config, f"/api/devices/{args.name}", {"value": args.value})
    if answer is None:
        with _Direct(config) as devices:
            answer = devices.set_sync(args.name, args.value, requested_by="cli").as_dict()
    pending = answer.get("pending_approval")
    if pending:
        print(
            f"{args.name} needs approval: pending action {pending['id']} (picoagent approvals approve {pending['id']})"
        )
        return 0
    print(_show_readings(args.name, answer["state"]))
    return 0


def cmd_hw_scan(args: argparse.Namespace) -> int:
    """Probe every I2C address of a bus, like i2cdetect (the owner's tool; the model's is allowlisted)."""
    from appliance.hardware.backends import make_backend
    from appliance.hardware.policy import SCAN_FIRST, SCAN_LAST

    config = load(args)
    backend = make_backend(config.hardware)
    try:
        backend.prepare(config.devices)
        bus = backend.i2c(args.bus)
        with bus.lock:
            found = [a for a in range(SCAN_FIRST, SCAN_LAST + 1) if bus.probe(a)]
    finally:
        backend.close()
    known = {d.address: n for n, d in config.devices.items() if d.address is not None and d.bus == args.bus}
    print(f"I2C bus {args.bus} ({backend.name}): " + (f"{len(found)} device(s)" if found else "nothing answers"))
    for address in found:
        print(f"  {address:#04x}  {known.get(address, '(not in the config)')}")
    return 0


def cmd_approvals_list(args: argparse.Namespace) -> int:
    """Writes waiting for a person."""
    from appliance.hardware.approvals import PendingAction

    config = load(args)
    answer = _daemon_get(config, "/api/approvals")
    if answer is None:
        with _Direct(config) as devices:
            answer = {"pending": [p.as_dict() for p in devices.approvals.pending()]}
    if not answer["pending"]:
        print("nothing is waiting for approval")
    for item in answer["pending"]:
        print(PendingAction(**item).describe())
    return 0


def cmd_approvals_decide(args: argparse.Namespace) -> int:
    """Approve (and run) or deny a pending write."""
    import getpass

    config = load(args)
    answer = _daemon_get(config, f"/api/approvals/{args.id}/{args.decision}", {})
    if answer is None:
        with _Direct(config) as devices:
            result = devices.decide_sync(args.id, args.decision == "approve", f"cli:{getpass.getuser()}")
            answer = result.as_dict()
    if args.decision == "deny":
        print(f"{args.id} denied")
    else:
        print(f"{args.id} approved: " + _show_readings(answer["device"], answer["state"]))
    return 0


# --- tools ---------------------------------------------------------------------------------------


def cmd_tools_list(args: argparse.Namespace) -> int:
    """The tools the model may call (the MCP servers' too: they are started to ask them)."""
    import asyncio

    config = load(args)
    registry, _lazy, db = _cli_tools(config)
    asyncio.run(_with_mcp(config, registry, asyncio.sleep(0)))  # the MCP servers' tools join the list
    for tool in registry:
        params = ", ".join(
            f"{name}: {spec.get('type', 'value')}" + ("" if name in tool.parameters["required"] else "?")
            for name, spec in tool.parameters["properties"].items()
        )
        print(f"{tool.name}({params})\n    {tool.description}")
    db.close()
    return 0


def cmd_tools_run(args: argparse.Namespace) -> int:
    """Run one tool with JSON arguments and print its result."""
    import asyncio

    from appliance.errors import UsageError

    config = load(args)
    try:
        arguments = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args is not valid JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(arguments, dict):
        raise UsageError('--args must be a JSON object, e.g. \'{"expression": "2+2"}\'')
    registry, lazy, db = _cli_tools(config)

    async def run() -> Any:
        registry.get(args.name)  # unknown tool: an error with the known names
        return await registry.execute(args.name, arguments, timeout_s=config.agent.tool_timeout_s)

    try:
        # Not one of ours: it may be an MCP server's (they are started to know).
        result = asyncio.run(run() if args.name in registry.tools else _with_mcp(config, registry, run()))
    finally:
        lazy.close()
        db.close()
    _print_json(result.as_dict())
    return 0 if result.ok else 1


async def _with_mcp(config: Config, registry: Any, work: Any) -> Any:
    """Start the MCP servers into ``registry``, await ``work``, stop them (all on one event loop)."""
    from appliance.runtime import data_dir, mcp_clients

    clients = mcp_clients(config, registry, data_dir(config) / "workspace")
    if clients is None:
        return await work
    await clients.start()
    try:
        return await work
    finally:
        await clients.stop()
        for server, problem in clients.problems.items():
            print(f"note: the tools of MCP server {server} are missing: {problem}", file=sys.stderr)


def _cli_tools(config: Config) -> tuple[Any, Any, Any]:
    """The tool registry as the `tools` command sees it (devices open only if a device tool runs)."""
    from appliance.memory.db import Database
    from appliance.runtime import cli_tool_registry, data_dir

    db = Database(data_dir(config) / "picoagent.db")
    registry, lazy = cli_tool_registry(config, db)
    return registry, lazy, db


def cmd_skills_list(args: argparse.Namespace) -> int:
    """The skills in the workspace and the SKILL.md files that could not be used."""
    from appliance.agent.context import Workspace
    from appliance.runtime import data_dir

    config = load(args)
    catalog = Workspace(data_dir(config) / "workspace").skills
    if args.json:
        skills = [
            {"name": s.name, "description": s.description, "requires": list(s.requires), "path": str(s.path)}
            for s in catalog.skills.values()
        ]
        _print_json({"skills": skills, "problems": list(catalog.problems)})
        return 0
    if not catalog.skills:
        print(f"no skills in {catalog.root} (a skill is a folder there with a SKILL.md)")
    for skill in catalog.skills.values():
        print(f"{skill.name}\n    {skill.description}")
        if skill.requires:
            print(f"    requires: {', '.join(skill.requires)}")
    if catalog.problems:
        print("problems:")
        for problem in catalog.problems:
            print(f"    {problem}")
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the tools over stdio as an MCP server until the input ends."""
    import asyncio

    from appliance.mcp.server import serve_stdio

    # stdout carries protocol messages only: anything else printed (a plugin, a library) goes to stderr.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    config = load(args)
    registry, lazy, db = _cli_tools(config)  # MCP servers' own tools are not passed on (no loops)
    try:
        asyncio.run(serve_stdio(registry, sys.stdin.buffer, protocol_out, timeout_s=config.agent.tool_timeout_s))
    finally:
        lazy.close()
        db.close()
    return 0


# --- doctor --------------------------------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check everything a turn needs; each failure comes with its fix."""
    from appliance.doctor import run_checks

    failures = 0
    for check in run_checks(getattr(args, "config", None), getattr(args, "data_dir", None)):
        mark = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[check.status]
        print(f"[{mark}] {check.name}: {check.detail}")
        if check.fix and check.status != "ok":
            print(f"       fix: {check.fix}")
        failures += check.status == "fail"
    print("all checks passed" if not failures else f"{failures} check(s) failed")
    return 1 if failures else 0


# --- memory --------------------------------------------------------------------------------------


class _Memory:
    """The memory store opened by this process (WAL lets it work beside the daemon)."""

    def __init__(self, config: Config, *, vectors: bool = True) -> None:
        from appliance.memory.db import Database
        from appliance.memory.store import MemoryStore
        from appliance.runtime import data_dir, local_model, memory_store

        self.db = Database(data_dir(config) / "picoagent.db")
        self.model = local_model(config) if vectors else None
        try:
            if self.model is not None:
                # One-shot: reading every vector into memory first would cost more than the search.
                self.store = memory_store(config, self.db, self.model, vector_cache=False)
            else:
                self.store = MemoryStore(self.db, None, model_name="none", dimensions=0)
        except Exception:
            self.close()
            raise

    def __enter__(self) -> Any:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        embedder = getattr(getattr(self, "store", None), "embedder", None)
        if embedder is not None:
            embedder.close()
        if self.model is not None:
            self.model.close()
        self.db.close()


def cmd_memory_search(args: argparse.Namespace) -> int:
    """Memories by meaning and keyword."""
    with _Memory(load(args)) as store:
        hits = store.search(" ".join(args.query), args.k)
    if args.json:
        _print_json(
            [
                {"id": h.memory.id, "text": h.memory.text, "score": h.score, "matched_by": sorted(h.matched_by)}
                for h in hits
            ]
        )
        return 0
    if not hits:
        print("nothing remembered matches")
    for hit in hits:
        how = "+".join(sorted(hit.matched_by))
        print(f"{hit.memory.id:>5}  {hit.memory.text}  ({how})")
    if getattr(hits, "note", ""):
        print(f"note: {hits.note}", file=sys.stderr)
    return 0


def cmd_memory_add(args: argparse.Namespace) -> int:
    """Remember a fact."""
    with _Memory(load(args)) as store:
        memory = store.add(" ".join(args.text), source="cli")
    print(f"remembered as {memory.id}: {memory.text}")
    return 0


def cmd_memory_forget(args: argparse.Namespace) -> int:
    """Forget one memory."""
    from appliance.errors import UsageError

    with _Memory(load(args), vectors=False) as store:
        if not store.forget(args.id):
            raise UsageError(f"no memory {args.id}", fix="picoagent memory search QUERY shows ids")
    print(f"memory {args.id} forgotten")
    return 0


def cmd_memory_prune(args: argparse.Namespace) -> int:
    """Forget facts older than some days."""
    with _Memory(load(args), vectors=False) as store:
        count = store.prune(args.older_than)
    print(f"{count} memor{'y' if count == 1 else 'ies'} older than {args.older_than:g} days forgotten")
    return 0


def cmd_memory_export(args: argparse.Namespace) -> int:
    """MEMORY.md and HISTORY.md in the workspace."""
    from appliance.runtime import data_dir

    config = load(args)
    with _Memory(config, vectors=False) as store:
        facts, history = store.export_markdown(data_dir(config) / "workspace")
    print(f"wrote {facts} and {history}")
    return 0


# --- telegram ------------------------------------------------------------------------------------


def cmd_telegram_pair(args: argparse.Namespace) -> int:
    """Print a one-time pairing code for the Telegram bot."""
    from appliance.channels.telegram import create_pairing_code
    from appliance.memory.db import Database
    from appliance.runtime import data_dir

    config = load(args)
    db = Database(data_dir(config) / "picoagent.db")
    try:
        code = create_pairing_code(db, ttl_s=args.ttl)
    finally:
        db.close()
    print(f"send this code to the bot within {args.ttl / 60:g} minutes: {code}")
    print("it works once; whoever sends it can talk to the assistant")
    if not config.telegram.enabled:
        print("note: telegram.enabled is false; the bot must be running for the code to work")
    return 0


# --- cron ----------------------------------------------------------------------------------------


def cmd_cron_list(args: argparse.Namespace) -> int:
    """The scheduled jobs, from the daemon when it runs."""
    config = load(args)
    answer = _daemon_get(config, "/api/cron")
    if answer is None:
        from appliance.config import load_jobs
        from appliance.memory.db import Database
        from appliance.runtime import data_dir
        from appliance.schedule.jobs import make_job_runner
        from appliance.schedule.scheduler import Scheduler

        root = data_dir(config)
        db = Database(root / "picoagent.db")
        try:
            jobs = load_jobs(config.scheduler.jobs, root / "workspace", config.devices)
            runner = make_job_runner(None, None, None)
            scheduler = Scheduler(jobs, tz=config.scheduler.timezone, run_job=runner, notify=None, db=db)
            answer = {"jobs": scheduler.list_jobs()}
        finally:
            db.close()
    if args.json:
        _print_json(answer["jobs"])
        return 0
    if not answer["jobs"]:
        print("no cron jobs (add them under scheduler.jobs in the config or in workspace/cron.yaml)")
    for job in answer["jobs"]:
        last = "never run"
        if job["last_run"] is not None:
            lines = (job["last_result"] or "").splitlines()
            outcome = "ok" if job["last_ok"] else "FAILED"
            last = f"last {job['last_run']} {outcome}" + (f": {lines[0][:70]}" if lines else "")
        print(
            f"{job['id']:16} {job['schedule']:18} next {job['next_run'] or 'at start'}\n    {job['does']}\n    {last}"
        )
    return 0


def cmd_cron_run(args: argparse.Namespace) -> int:
    """Run one job now: in the daemon when it runs (it owns the model and the devices), else here."""
    import asyncio

    from appliance.errors import PicoagentError
    from appliance.schedule.jobs import JOB_TIMEOUT_S

    config = load(args)
    if _daemon_get(config, "/api/status") is not None:
        # Never also run it here: a slow answer does not mean it did not run.
        answer = _daemon_get(config, f"/api/cron/{args.id}/run", {}, timeout=JOB_TIMEOUT_S + 30)
        if answer is None:
            raise PicoagentError(
                "the daemon did not answer", fix="the job may still be running: see `picoagent cron list`"
            )
        print(answer["result"])
        return 0
    from appliance.config import load_jobs
    from appliance.runtime import Runtime
    from appliance.schedule.jobs import make_job_runner
    from appliance.schedule.scheduler import Scheduler
    from appliance.tasks import TaskStore

    runtime = Runtime.open(config)
    try:

        async def queue_task(goal: str) -> str:
            task = await runtime.db.call(TaskStore(runtime.db).add, goal)
            return f"task {task.id} queued: {task.goal} (`picoagent tasks run` works it here)"

        jobs = load_jobs(config.scheduler.jobs, runtime.workspace.root, config.devices)
        runner = make_job_runner(runtime.agent, runtime.devices, queue_task)
        scheduler = Scheduler(jobs, tz=config.scheduler.timezone, run_job=runner, notify=None, db=runtime.db)
        print(asyncio.run(scheduler.run_now(args.id)))
    finally:
        runtime.close()
    return 0


# --- routing: providers, usage, statistics -------------------------------------------------------


def cmd_providers(args: argparse.Namespace) -> int:
    """The configured cloud providers (never their keys), the routing mode, and optionally a live check."""
    config = load(args)
    routing = config.routing
    rows: list[dict[str, Any]] = []
    for name, provider in config.providers.items():
        rows.append(
            {
                "name": name,
                "type": provider.type,
                "api_base": provider.api_base,
                "model": provider.model,
                "api_key": "set" if provider.api_key else "not set",
                "price_in_per_mtok": provider.price_in_per_mtok,
                "price_out_per_mtok": provider.price_out_per_mtok,
                "escalates_to": name == routing.cloud_provider and routing.mode != "local_only",
            }
        )
    if args.check:
        import asyncio

        for row, (name, provider) in zip(rows, config.providers.items(), strict=True):
            row["check"] = asyncio.run(_check_provider(name, provider))
    summary = {
        "mode": routing.mode,
        "cloud_provider": routing.cloud_provider,
        "min_confidence": routing.min_confidence,
        "local_only_channels": routing.local_only_channels,
        "daily_budget_usd": routing.daily_budget_usd,
        "monthly_budget_usd": routing.monthly_budget_usd,
        "providers": rows,
    }
    if args.json:
        _print_json(summary)
        return 0
    if routing.mode == "local_only":
        print("routing: local_only (nothing leaves the Pi; set routing.mode: edge_first to escalate)")
    else:
        print(
            f"routing: {routing.mode} to {routing.cloud_provider} below confidence {routing.min_confidence:g};"
            f" budget ${routing.daily_budget_usd:g}/day, ${routing.monthly_budget_usd:g}/month"
        )
    if not rows:
        print("no providers: add one under providers: in the config (see README, Cloud escalation)")
    for row in rows:
        mark = "  <- escalates here" if row["escalates_to"] else ""
        print(
            f"{row['name']:12} {row['type']:9} {row['model']:28} {row['api_base']}  key {row['api_key']}"
            f"  ${row['price_in_per_mtok']:g}/${row['price_out_per_mtok']:g} per Mtok{mark}"
        )
        if "check" in row:
            print(f"{'':12} check: {row['check']}")
    return 0


async def _check_provider(name: str, provider: Any) -> str:
    from appliance.errors import PicoagentError
    from appliance.llm.base import ChatMessage, GenerationRequest
    from appliance.llm.cloud import make_provider

    client = make_provider(name, provider)
    try:
        reply = await client.generate(GenerationRequest([ChatMessage("user", "Say OK.")], max_tokens=1))
        return f"ok ({reply.total_s:.2f} s)"
    except PicoagentError as exc:
        return f"failed: {exc.message}"
    finally:
        await client.close()


def cmd_usage(args: argparse.Namespace) -> int:
    """Tokens and cost by day, provider and model."""
    from appliance.memory.db import Database
    from appliance.runtime import data_dir

    config = load(args)
    db = Database(data_dir(config) / "picoagent.db")
    try:
        rows, (today, month) = db.usage(max(1, args.days)), db.spent_usd()
    finally:
        db.close()
    budget = {
        "spent_today_usd": round(today, 6),
        "spent_month_usd": round(month, 6),
        "daily_budget_usd": config.routing.daily_budget_usd,
        "monthly_budget_usd": config.routing.monthly_budget_usd,
    }
    if args.json:
        _print_json({"usage": rows, "budget": budget})
        return 0
    if not rows:
        print(f"no use in the last {args.days} days")
    else:
        print(
            f"{'day':10} {'provider':10} {'model':26} {'route':14} {'turns':>6} {'prompt':>9} {'reply':>8} {'cost':>9}"
        )
    for r in rows:
        print(
            f"{r['day']:10} {r['provider']:10} {r['model'][:26]:26} {r['route']:14} {r['turns']:6d}"
            f" {r['prompt_tokens']:9d} {r['completion_tokens']:8d} {'$' + format(r['cost_usd'], '.4f'):>9}"
        )
    print(
        f"cloud spent: ${today:.4f} today of ${config.routing.daily_budget_usd:g},"
        f" ${month:.4f} this month of ${config.routing.monthly_budget_usd:g}"
    )
    return 0


def cmd_routing_stats(args: argparse.Namespace) -> int:
    """How often messages were answered where, and why they went to the cloud or did not."""
    from appliance.memory.db import Database
    from appliance.runtime import data_dir

    config = load(args)
    db = Database(data_dir(config) / "picoagent.db")
    try:
        rows = db.routes(max(1, args.days))
    finally:
        db.close()
    total = sum(r["turns"] for r in rows)
    by_route: dict[str, int] = {}
    for r in rows:
        by_route[r["route"]] = by_route.get(r["route"], 0) + r["turns"]
    wanted = [r for r in rows if r["route"] == "cloud" or r["blocked"]]
    if args.json:
        _print_json({"days": args.days, "turns": total, "by_route": by_route, "decisions": rows})
        return 0
    if not total:
        print(f"no turns in the last {args.days} days")
        return 0
    print(f"{total} turns in the last {args.days} days (routing.mode {config.routing.mode})")
    for route, n in sorted(by_route.items(), key=lambda item: -item[1]):
        print(f"  {route:15} {n:6d}  {100 * n / total:5.1f}%")
    if wanted:
        print("the cloud was wanted because (and, when it was not used, why not):")
        for r in wanted:
            outcome = "sent to the cloud" if r["route"] == "cloud" else f"kept on the Pi: {r['blocked']}"
            print(f"  {r['why']:15} {r['turns']:6d}  {outcome}")
    return 0


# --- tasks ---------------------------------------------------------------------------------------


class _TaskTable:
    """The tasks in this process's own connection (safe beside the daemon's: WAL, one transaction per change)."""

    def __init__(self, config: Config) -> None:
        from appliance.memory.db import Database
        from appliance.runtime import data_dir
        from appliance.tasks import TaskStore

        self.db = Database(data_dir(config) / "picoagent.db")
        self.store = TaskStore(self.db)

    def __enter__(self) -> Any:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.db.close()


def cmd_tasks_add(args: argparse.Namespace) -> int:
    """Queue a task."""
    with _TaskTable(load(args)) as store:
        task = store.add(" ".join(args.goal))
    print(f"task {task.id} queued: {task.goal}")
    print("(the daemon starts it; without a daemon, `picoagent tasks run` works it here)", file=sys.stderr)
    return 0


def cmd_tasks_list(args: argparse.Namespace) -> int:
    """The tasks and their states."""
    with _TaskTable(load(args)) as store:
        tasks = store.list(args.state)
    if args.json:
        _print_json([t.as_dict() for t in tasks])
        return 0
    if not tasks:
        print("no tasks" + (f" {args.state}" if args.state else ""))
    for task in tasks:
        print(task.describe())
    return 0


def cmd_tasks_move(args: argparse.Namespace) -> int:
    """Pause or resume a task."""
    with _TaskTable(load(args)) as store:
        task = store.pause(args.id) if args.move == "pause" else store.resume(args.id)
    if args.move == "pause":
        print(f"task {task.id} paused (a running task stops after its current step)")
    else:
        print(f"task {task.id} resumed: it goes on at step {task.steps_done + 1}")
    return 0


def cmd_tasks_logs(args: argparse.Namespace) -> int:
    """A task and its steps."""
    with _TaskTable(load(args)) as store:
        task = store.get(args.id)
        steps = store.logs(args.id)
    if args.json:
        _print_json({"task": task.as_dict(), "steps": [s.as_dict() for s in steps]})
        return 0
    print(task.describe())
    for step in steps:
        print(step.describe())
    if not steps:
        print("  (no steps yet)")
    return 0


def cmd_tasks_run(args: argparse.Namespace) -> int:
    """Work the pending tasks in the foreground, one at a time, until none is left."""
    import asyncio

    from appliance.errors import UsageError
    from appliance.runtime import Runtime
    from appliance.tasks import Task, TaskRunner, TaskStore, make_agent_step

    config = load(args)
    if _daemon_get(config, "/api/status") is not None:
        # Two runners would each recover() the other's running task and run it twice.
        raise UsageError("the daemon is running and works the tasks itself", fix="`picoagent tasks list` shows them")
    runtime = Runtime.open(config)
    try:
        store = TaskStore(runtime.db)
        store.recover()
        runner = TaskRunner(store, make_agent_step(runtime.agent), None)

        async def work() -> list[Task]:
            ended = []
            while (task := await runner.run_once()) is not None:
                print(task.describe(), flush=True)
                ended.append(task)
            return ended

        if not asyncio.run(work()):
            print("no pending tasks")
        return 0
    finally:
        runtime.close()


# --- entry point ---------------------------------------------------------------------------------


def cmd_update(args: argparse.Namespace) -> int:
    """`picoagent update check|apply|rollback|boot` (see appliance/update.py)."""
    from appliance.update_cli import run

    return run(args)


def cmd_selftest(args: argparse.Namespace) -> int:
    """Import every module, load the config, open sqlite-vec and the model file's header."""
    from appliance.selftest import run_selftest

    return run_selftest(getattr(args, "config", None))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; expected failures print a message and a fix, never a traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    from appliance.errors import exit_for_people

    return exit_for_people(lambda: handler(args))
