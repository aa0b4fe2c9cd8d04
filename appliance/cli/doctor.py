"""`picoagent doctor`: checks what a turn needs, each failure with the fix.

Part of the command line (``cli/system.py`` prints what this yields): it reads the channels' state as
`picoagent channels list` does (``cli/channels.py``), so it sits in ``cli/``, above everything it checks.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from appliance.errors import ConfigError, PicoagentError

if TYPE_CHECKING:
    from appliance.config import Config

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    name: str
    status: Status
    detail: str
    fix: str | None = None


def _mb(n: int) -> str:
    """Bytes as `models list` and the README say them (decimal: 98.4 MB), not MiB labelled MB."""
    from appliance.llm.download import format_size

    return format_size(n)


def run_checks(config_file: str | None = None, data_dir: str | None = None) -> Iterator[Check]:
    """Run every check in order; later checks are skipped when what they need failed."""
    from appliance.config import load_config

    try:
        config = load_config(config_file, data_dir=data_dir)
    except PicoagentError as exc:
        yield Check("config", "fail", exc.message, exc.fix or "fix the key named above")
        return
    yield Check("config", "ok", f"{config.source} is valid")
    yield from _check_secrets(config)

    from appliance.config import data_dir as data_dir_of  # the parameter data_dir is the --data-dir given

    try:
        root = data_dir_of(config)
        probe = root / ".doctor-probe"
        probe.write_text("ok")
        probe.unlink()
        yield Check("data dir", "ok", f"{root} is writable")
    except OSError as exc:
        yield Check("data dir", "fail", f"{config.data_dir}: {exc.strerror}", "fix data_dir or its permissions")
        return
    free_disk = shutil.disk_usage(root).free
    yield Check(
        "disk",
        "ok" if free_disk > 512 * 2**20 else "warn",
        f"{_mb(free_disk)} free in {root}",
        "free some space: history and models need room to grow",
    )

    yield from _check_sqlite(root)
    yield from _check_board(config)
    yield from _check_model(config)
    yield from _check_embeddings(config)
    yield from _check_routing(config)
    yield from _check_skills(root)
    yield from _check_plugins(config)
    yield from _check_mcp(config, root)
    yield from _check_sandbox(config)
    yield from _check_web_search(config)
    from appliance.cli.daemon_client import daemon_get

    status = daemon_get(config, "/api/status")  # the running daemon's, read once for the checks that tell it
    yield from _check_channels(config, status)
    yield from _check_mqtt(config, status)
    yield from _check_homeassistant(config)


def _check_plugins(config: Config) -> Iterator[Check]:
    """Each of tools.plugins imports and registers, as the start will ask (a plugin that does not stops it)."""
    if not config.tools.plugins:
        return
    from appliance.config import data_dir as config_data_dir
    from appliance.plugins import Hooks, load_plugins

    try:
        load_plugins(Hooks(), list(config.tools.plugins), config_data_dir(config) / "plugins")
    except ConfigError as exc:
        yield Check("plugins", "fail", exc.message, exc.fix or "fix or remove it in tools.plugins")
        return
    yield Check("plugins", "ok", ", ".join(config.tools.plugins) + " import and register")


def _check_secrets(config: Config) -> Iterator[Check]:
    """The secrets file: where it is, and that not every user of the machine can read it."""
    from appliance.config import exposed_secrets

    path = config.secrets_path
    if path is None or not path.exists():
        yield Check("secrets", "ok", f"no secrets file ({path}): ${{NAME}} references read the environment")
        return
    problem = exposed_secrets(path)
    if problem is not None:
        yield Check("secrets", "warn", problem, f"chmod 600 {path}")
        return
    yield Check("secrets", "ok", f"{path} (mode {path.stat().st_mode & 0o777:04o})")


def _check_homeassistant(config: Config) -> Iterator[Check]:
    """Home Assistant's API answers with the token (``GET /api/``), and every configured entity exists."""
    if not config.homeassistant.enabled:
        yield Check("home assistant", "ok", "off (homeassistant.enabled: false)")
        return
    from appliance.hardware.remote.hass import HomeAssistantClient

    client = HomeAssistantClient(config.homeassistant)
    try:
        answer = client.check_api()
    except PicoagentError as exc:  # unreachable, or the token refused: each with its fix
        yield Check("home assistant", "fail", exc.message, exc.fix)
        return
    yield Check("home assistant", "ok", f"{client.url}: {answer or 'answers'}")
    for name, device in config.devices.items():
        if device.driver != "homeassistant":
            continue
        try:
            state = client.fetch_state(device.entity)
        except PicoagentError as exc:
            yield Check(f"device {name}", "fail", exc.message, exc.fix)
            continue
        if state["state"] in ("unavailable", "unknown"):
            yield Check(
                f"device {name}",
                "warn",
                f"{device.entity} is {state['state']} in Home Assistant",
                "see the device in Home Assistant: it is offline or has not reported yet",
            )
        else:
            yield Check(f"device {name}", "ok", f"{device.entity} is {state['state']}")


def _check_channels(config: Config, status: dict[str, Any] | None) -> Iterator[Check]:
    """Each enabled chat channel's state in the running daemon; where proactive messages go."""
    from appliance.cli.channels import channel_rows

    rows = channel_rows(config, status)
    for row in rows:
        name = f"channel {row['name']}"
        if row.get("restart_needed"):  # the running daemon and the config disagree (cli/channels.as_configured)
            yield Check(name, "warn", row["detail"], RESTART_FIX)
        elif not row["enabled"]:
            yield Check(name, "ok", f"off ({row['detail']})")
        elif row["up"]:
            yield Check(name, "ok", f"up: {row['detail']}")
        elif row["up"] is None:  # enabled, but no daemon runs it
            yield Check(name, "warn", row["detail"], "start the daemon: picoagent serve (or systemctl start picoagent)")
        else:
            yield Check(
                name,
                "fail",
                f"down: {row['detail']}",
                "it reconnects by itself once what the reason names is fixed (the network, the address); a refused "
                f"token waits for the secrets file to be fixed and a restart (the {row['name']} section of the README)",
            )
    from appliance.channels.registry import is_enabled

    enabled = [row["name"] for row in rows if row["enabled"]]
    # the config's word, not the running daemon's: a channel turned on in the file waits for a restart (said above)
    listed = [n for n in config.notify.owner if not is_enabled(config, n)]
    if listed:
        which = "which is" if len(listed) == 1 else "which are"
        yield Check(
            "notifications",
            "warn",
            f"notify.owner lists {', '.join(listed)}, {which} not enabled in the config",
            f"enable {' and '.join(listed)}, or take {'it' if len(listed) == 1 else 'them'} off notify.owner",
        )
    elif not enabled:
        yield Check(
            "notifications",
            "ok",
            "no chat channel: proactive messages show on the status page and in `picoagent status`",
        )
    else:
        yield Check("notifications", "ok", "proactive messages go to " + " -> ".join(config.notify.owner or enabled))


def _check_mqtt(config: Config, status: dict[str, Any] | None) -> Iterator[Check]:
    """Connect to the broker with the config's credentials and TLS, then disconnect (off: one line, no import);
    a running daemon that runs MQTT otherwise than the config says is told, with the restart that applies it."""
    mqtt = config.mqtt
    running = None if status is None else status.get("mqtt") is not None  # None: no daemon runs
    if not mqtt.enabled:
        if running:
            yield Check("mqtt", "warn", "on in the running daemon; the config turns it off", RESTART_FIX)
        else:
            yield Check("mqtt", "ok", "off (mqtt.enabled: false)")
        return
    import asyncio

    from appliance.hardware.remote.mqtt import probe

    where = f"{'mqtts' if mqtt.tls else 'mqtt'}://{mqtt.host}:{mqtt.port}"
    problem = asyncio.run(probe(mqtt))
    if problem is not None:
        yield Check("mqtt", "fail", problem[0], problem[1])
        return
    who = f"as {mqtt.username}" if mqtt.username else "anonymously"
    discovery = f"discovery under {mqtt.discovery_prefix}/" if mqtt.discovery else "discovery off"
    accepts = f"{where} accepts picoagent {who}; topics under {mqtt.base_topic}/, {discovery}"
    if running is False:
        yield Check("mqtt", "warn", f"{accepts}; off in the running daemon (the config turns it on)", RESTART_FIX)
    else:
        yield Check("mqtt", "ok", accepts)


# What applies a section the running daemon started without (or with): the same words as a channel's.
RESTART_FIX = "systemctl restart picoagent (or restart `picoagent serve`)"


def _check_skills(root: Path) -> Iterator[Check]:
    """The workspace's skills: how many, and the SKILL.md files that cannot be used (no line when none)."""
    from appliance.agent.skills import SKILLS_DIR, SkillCatalog

    catalog = SkillCatalog.load(root / "workspace" / SKILLS_DIR)
    if catalog.problems:
        yield Check(
            "skills",
            "warn",
            f"{len(catalog)} skill(s); " + "; ".join(catalog.problems),
            "fix the SKILL.md files named (front matter: name, description, requires), then SIGHUP the daemon",
        )
    elif len(catalog):
        yield Check("skills", "ok", f"{len(catalog)} skill(s): {', '.join(catalog.skills)}")


def _check_mcp(config: Config, root: Path) -> Iterator[Check]:
    """Start each enabled MCP server, list its tools, stop it (no line when none is configured)."""
    import asyncio

    from appliance.mcp.client import McpError, McpServer
    from appliance.runtime import mcp_clients
    from appliance.tools.registry import ToolRegistry

    clients = mcp_clients(config, ToolRegistry(), root / "workspace")
    if clients is None:
        return

    async def probe(server: McpServer) -> Check:
        try:
            await server.start()
        except McpError as exc:
            fix = exc.fix or f"run tools.mcp.{server.name}.command by hand to see why, or set enabled: false"
            return Check(f"mcp {server.name}", "fail", exc.message, fix)
        finally:
            await server.stop()
        info = server.server_info
        about = f"{info.get('name', '?')} {info.get('version', '')}".strip()
        return Check(f"mcp {server.name}", "ok", f"{about}: {len(server.tools)} tool(s), MCP {server.protocol_version}")

    async def probe_all() -> list[Check]:
        return list(await asyncio.gather(*(probe(server) for server in clients.servers.values())))

    yield from asyncio.run(probe_all())


def _check_sandbox(config: Config) -> Iterator[Check]:
    """Whether the shell tool can run commands: bubblewrap here, or the picoagent-sandbox service."""
    from appliance.tools import sandbox, shell

    cfg = config.tools.shell
    if not cfg.enabled:
        yield Check("sandbox", "ok", "the shell tool is off (tools.shell.enabled: false)")
        return
    problem = shell.unavailable(cfg)
    if problem is not None:
        yield Check("sandbox", "fail", f"the shell tool is disabled: {problem.reason}", problem.fix)
        return
    path = shell.service_socket(cfg)
    if path:
        yield Check("sandbox", "ok", f"commands run in bubblewrap through the picoagent-sandbox service ({path})")
        return
    yield Check("sandbox", "ok", f"commands run in bubblewrap ({sandbox.bwrap_path()})")


def _check_web_search(config: Config) -> Iterator[Check]:
    """Which engine web_search asks (the config check already refused one that lacks what it needs)."""
    search = config.tools.web_search
    if search.backend == "off":
        yield Check("web search", "ok", "off (tools.web_search.backend: off)")
        return
    from appliance.tools.web_search import ENGINES

    where = f"at {search.url} (reached wherever it is: your choice)" if search.url else "at its public address"
    yield Check("web search", "ok", f"{ENGINES[search.backend]} {where}")


def _check_routing(config: Config) -> Iterator[Check]:
    """Where messages may go: the mode, and for a cloud provider its key and a route to the internet."""
    routing = config.routing
    if routing.mode == "local_only":
        yield Check("routing", "ok", "local_only: no message leaves the Pi")
        return
    from urllib.parse import urlsplit

    from appliance.agent.escalation import has_default_route, is_local_host

    provider = config.providers[routing.cloud_provider]  # the config check made sure it exists
    host = urlsplit(provider.api_base).hostname or ""
    if not provider.api_key and not is_local_host(host):
        yield Check(
            "routing",
            "warn",
            f"{routing.mode} to {routing.cloud_provider}, but providers.{routing.cloud_provider}.api_key is empty",
            "put the key in the secrets file and reference it: api_key: ${NAME}",
        )
    elif not is_local_host(host) and not has_default_route():
        yield Check(
            "routing",
            "warn",
            f"{routing.mode} to {routing.cloud_provider}, but there is no route to the internet: answers stay local",
            "check the network (ip route); `picoagent providers --check` tries the provider",
        )
    else:
        # Asked, briefly: a key that is set and a route that exists do not make a provider that answers.
        import asyncio

        from appliance.llm.cloud import ask_once

        name = routing.cloud_provider
        try:
            seconds = asyncio.run(ask_once(name, provider))
        except PicoagentError as exc:
            yield Check(
                "routing",
                "warn",
                f"{routing.mode} to {name}, but {name} did not answer ({exc.message}): answers stay on the Pi",
                f"check providers.{name}.api_base and its key; `picoagent providers --check` asks it again",
            )
            return
        yield Check(
            "routing", "ok", f"{routing.mode} to {name} ({provider.model} at {host}): it answered in {seconds:.2f} s"
        )


def _check_sqlite(root: Path) -> Iterator[Check]:
    from appliance.memory.db import Database, can_load_extensions

    if not can_load_extensions():
        yield Check(
            "sqlite extensions",
            "fail",
            "this Python's sqlite3 cannot load extensions, so sqlite-vec (memory search) cannot work",
            "run picoagent from a venv built on Debian's /usr/bin/python3 (make install does this)",
        )
    else:
        try:
            import sqlite_vec

            conn = sqlite3.connect(":memory:")
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            version = conn.execute("select vec_version()").fetchone()[0]
            conn.close()
            yield Check("sqlite-vec", "ok", f"sqlite {sqlite3.sqlite_version}, sqlite-vec {version}")
        except (ImportError, sqlite3.Error, AttributeError) as exc:
            yield Check("sqlite-vec", "fail", f"sqlite-vec does not load: {exc}", "re-run make install")
    try:
        db = Database(root / "picoagent.db")
        status = db.integrity()
        db.close()
        if status == "ok":
            yield Check("database", "ok", f"{root / 'picoagent.db'} passes its integrity check")
        else:
            yield Check("database", "fail", f"integrity check: {status}", "restore a backup or move the file away")
    except PicoagentError as exc:
        yield Check("database", "fail", exc.message, exc.fix)


def _check_embeddings(config: Config) -> Iterator[Check]:
    """Which embedding model memory and the understanding layer use, and whether it is there."""
    from appliance.llm import gguf
    from appliance.llm.choice import models_dir
    from appliance.llm.embeddings import choose_embedding

    try:
        choice = choose_embedding(config, models_dir(config))
    except PicoagentError as exc:
        yield Check("embeddings", "fail", exc.message, exc.fix)
        return
    if choice.path is None:
        detail = "the chat model's own (memory.embedding_model: chat): no device requests by meaning, no tool ranking"
        if choice.note:
            yield Check("embeddings", "warn", choice.note, "run make install, or picoagent models pull minilm")
        else:
            yield Check("embeddings", "ok", detail)
        return
    try:
        meta = gguf.read_metadata(choice.path, {"general.architecture", "{arch}.embedding_length"})
    except PicoagentError as exc:
        yield Check("embeddings", "fail", f"memory.embedding_model: {exc.message}", exc.fix)
        return
    arch = meta.get("general.architecture", "?")
    dims = meta.get(f"{arch}.embedding_length", "?")
    yield Check(
        "embeddings",
        "ok",
        f"{choice.name}: {choice.path} ({_mb(choice.path.stat().st_size)}, {arch}, {dims} dimensions) for memory, "
        "device requests by meaning and the local model's tools",
    )


def _check_board(config: Config) -> Iterator[Check]:
    """The board, what `llm.model: auto` runs on it, and on a Pi with real hardware its pins and buses."""
    from appliance.hardware.gpiochip import board_report
    from appliance.llm import board

    here = board.read_board()
    yield Check("board", "ok", f"{here.describe()}; llm.model: auto runs {board.choose_for(here)} here")
    if config.hardware.backend != "simulated":
        for name, fine, detail, fix in board_report():
            yield Check(name, "ok" if fine else "warn", detail, None if fine else fix)


def _check_model(config: object) -> Iterator[Check]:
    from appliance.config import Config
    from appliance.llm import choice, threads
    from appliance.llm.local import available_memory_bytes

    assert isinstance(config, Config)
    try:
        path = choice.model_path(config, fallback=True)  # as `serve` runs it
        need = choice.model_memory_bytes(config, path)
        running, wanted = choice.model_spec(config, fallback=True), choice.wanted_model(config)
    except PicoagentError as exc:
        yield Check("model", "fail", exc.message, exc.fix)
        return
    yield Check("model", "ok", f"{running}: {path} ({_mb(path.stat().st_size)}, GGUF)")
    if wanted != running:
        yield Check(
            "model",
            "warn",
            f"{wanted} is wanted (llm.model: {config.llm.model}) but not installed: `picoagent serve` downloads it "
            f"in the background and serves with {running} meanwhile",
            f"picoagent models pull {wanted} (to have it now)",
        )
    free = available_memory_bytes()
    if free is None:
        yield Check("memory", "warn", "cannot read /proc/meminfo")
    else:
        margin = config.llm.memory_margin_mb * 2**20
        fits = need + margin <= free
        yield Check(
            "memory",
            "ok" if fits else "fail",
            f"the model needs about {_mb(need)} with a {config.llm.context_tokens}-token context; {_mb(free)} free",
            "pick a smaller model (picoagent models list), lower llm.context_tokens, or stop other programs",
        )
    try:
        import llama_cpp

        decode, _batch = threads.ThreadPolicy().choose()
        yield Check(
            "llama.cpp",
            "ok",
            f"llama-cpp-python {llama_cpp.__version__}; {threads.physical_cores()} physical cores, "
            f"{decode} free for decoding now (of {len(os.sched_getaffinity(0))} CPUs)",
        )
    except ImportError as exc:
        yield Check("llama.cpp", "fail", f"llama-cpp-python is not installed: {exc}", "re-run make install")
        return
    yield from _check_runner(config, path)


def _check_runner(config: Config, path: Path) -> Iterator[Check]:
    """Weight repacking for this CPU, the runner's crashes (runner.json), and a few tokens in a model runner."""
    from appliance.config import data_dir
    from appliance.llm.proof import prove
    from appliance.llm.runner_client import FIX, ModelRunner

    runner = ModelRunner(weight_repack=config.llm.weight_repack, state_dir=data_dir(config))
    choice = runner.choice
    yield Check(
        "weight repacking",
        "ok",
        f"{'on' if runner.repack else 'off'} (llm.weight_repack: {choice.setting}): {choice.reason}; "
        f"CPU features: {', '.join(choice.features) or 'none listed'}",
    )
    if runner.crashes:
        mode = runner.saved_mode
        from appliance.schedule.parse import resolve_zone

        zone = resolve_zone(config.scheduler.timezone)  # the appliance's time, as the notifications show
        yield Check("model runner", "warn" if mode == "normal" else "fail", runner.summary(mode, zone), FIX)
    proof = prove(path, config.llm.weight_repack, memory_margin_mb=config.llm.memory_margin_mb)
    if not proof.ok:
        yield Check("model runner", "fail", proof.line, proof.fix)
        return
    where = ", ".join(proof.buffer_types) or "?"
    uses = ", ".join(proof.llama_features) or "?"
    yield Check("model runner", "ok", f"{proof.line}; weights in {where}; llama.cpp uses {uses}")
