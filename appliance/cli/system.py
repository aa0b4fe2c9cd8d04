"""`picoagent serve`, `status`, `doctor`, `update` and `selftest`: running the appliance and looking after it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from appliance.cli.common import action, load, print_json
from appliance.cli.daemon_client import daemon_get


def add_daemon_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The `serve` and `status` commands."""
    serve = action(sub, common, "serve", "run the daemon: web page, chat, API on the LAN", cmd_serve)
    serve.add_argument("--host", help="address to listen on (default: web.host, 0.0.0.0)")
    serve.add_argument("--port", type=int, help="TCP port (default: web.port, 8080)")

    status = action(sub, common, "status", "health of the running appliance", cmd_status)
    status.add_argument("--json", action="store_true", help="print /api/status as JSON")


def add_doctor_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The `doctor` command."""
    action(sub, common, "doctor", "check config, model, database, memory", cmd_doctor)


def add_upkeep_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The `update` and `selftest` commands."""
    update = sub.add_parser("update", parents=[common], help="over-the-air updates of this device (as root)")
    from appliance.ota.cli import add_arguments as update_arguments

    update_arguments(update, common)
    update.set_defaults(handler=cmd_update)
    action(sub, common, "selftest", "check this installation can run (OTA runs it)", cmd_selftest)


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the daemon until SIGTERM."""
    import asyncio

    from appliance.daemon import Daemon

    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # log lines reach journald at once
    config = load(args, log_stream=sys.stdout)  # a daemon logs to stdout, where journald reads it
    import logging

    from appliance.logs import daemon_level

    logging.getLogger().setLevel(daemon_level(config.log_level))  # a daemon's state changes belong in its log
    daemon = Daemon(config, host=args.host, port=args.port, data_dir_override=getattr(args, "data_dir", None))
    return asyncio.run(daemon.run())


def prompt_cache_line(cache: dict[str, Any]) -> str:
    """The status line of prompt reuse (the status page's model card says the same: status.js)."""
    rate = cache.get("hit_rate_1h")
    reuse = (
        f"{rate:.0%} of {cache['prompt_tokens_1h']} prompt tokens reused in the last hour"
        if rate is not None
        else "no local turns in the last hour"
    )
    return f"prompt cache: {reuse} · prefix {cache['prefix']} · {cache['ram_mb']:.1f} MB in {cache['entries']} state(s)"


def config_line(config: dict[str, Any] | None) -> str:
    """What the last config reload left waiting for a restart, or why it was refused ("" when neither)."""
    if not config:
        return ""
    lines = []
    if config.get("restart_needed"):
        lines.append(f"config: {', '.join(config['restart_needed'])}: restart needed (systemctl restart picoagent)")
    if config.get("refused"):
        lines.append(f"config: the last reload was refused, the running config stays: {config['refused']}")
    return "\n".join(lines)


def runner_line(runner: dict[str, Any]) -> str:
    """The model runner's status line: its process, weight repacking and where llama.cpp put the weights."""
    repack = runner.get("weight_repack") or {}
    pid = f"pid {runner['pid']}" if runner.get("pid") else "not running"
    buffers = ", ".join(runner.get("buffer_types") or []) or "no model loaded yet"
    return (
        f"model runner: {pid} · weight repacking {'on' if repack.get('repack') else 'off'} "
        f"({repack.get('setting', 'auto')}) · threads {runner.get('threads')} · weights in {buffers}"
    )


def cmd_status(args: argparse.Namespace) -> int:
    """Health of the running daemon, or say it is not running (or that the config file is refused)."""
    from appliance.errors import ConfigError

    try:
        config = load(args)
    except ConfigError as exc:  # the daemon, if it runs, keeps the config it had: say so, in JSON too
        kept = "if picoagent is running, it keeps the config it had until the file is fixed and reloaded"
        fix = f"{exc.fix or 'correct that value in the config file'}; {kept} (systemctl reload picoagent)"
        if args.json:
            print_json({"running": None, "error": f"the config is refused: {exc.message}", "fix": fix})
            return ConfigError.exit_code
        raise ConfigError(exc.message, fix=fix) from None
    status = daemon_get(config, "/api/status")
    if status is None:  # exit 3, as systemctl status says "not running"; a script reads the same in JSON
        fix = "start it with `picoagent serve` or `systemctl start picoagent`"
        if args.json:
            print_json({"running": False, "error": "picoagent is not running", "fix": fix})
        else:
            print(f"picoagent is not running ({fix})")
        return 3
    if args.json:
        print_json(status)
        return 0
    health, model = status["health"], status["model"]
    temp = health.get("cpu_temperature_c")
    print(f"picoagent {status['version']} · up {status['uptime_s'] / 3600:.1f} h")
    if line := config_line(status.get("config")):
        print(line)
    print(
        f"model: {model['name']} ({'loaded' if model['loaded'] else 'not loaded'})"
        + (f", {model['recent_tps']:.1f} tok/s" if model.get("recent_tps") else "")
        + f", queue {model['queue_depth']}"
    )
    from appliance.model_fetch import status_line

    if pull_line := status_line(model.get("pull")):
        print(f"  {pull_line}")
    if model.get("prompt_cache"):
        print(prompt_cache_line(model["prompt_cache"]))
    if runner := model.get("runner"):
        print(runner_line(runner))
        if runner.get("message"):
            print(f"  {runner['message']}")
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
    if mqtt := status.get("mqtt"):
        print(mqtt_line(mqtt))
    if hass := status.get("homeassistant"):
        print(homeassistant_line(hass))
    for reply in status["recent"][:5]:
        print(f"  {reply['route']:>6}  {reply['total_s']:.2f} s  {reply['session']}  {reply['reason']}")
    from appliance.cli.channels import as_configured, feed_lines, state_word

    # the daemon's channels, told against the config file now: one the file turns on or off says a restart applies it
    channels = as_configured(status.get("channels", []), config)
    for row in channels:
        if row.get("restart_needed"):  # its detail says both states ("off in the running daemon; the config ...")
            print(f"channel {row['name']}: {row['detail']}")
        elif row["enabled"]:
            print(f"channel {row['name']}: {state_word(row)}, {row['detail']}")
    off = [row["name"] for row in channels if not row["enabled"] and not row.get("restart_needed")]
    if off and len(off) == len(channels):
        print(f"channels: all off ({', '.join(off)}); proactive messages show here and on the status page")
    elif off:
        print(f"channels off: {', '.join(off)}")
    if status.get("notifications"):
        print("notifications:")
        print("\n".join(feed_lines(status["notifications"][:5], config)))
    return 0


def mqtt_line(mqtt: dict[str, Any]) -> str:
    """The MQTT link in one line: connected or why not, reconnects, what was dropped."""
    state = "connected" if mqtt.get("connected") else f"not connected ({mqtt.get('last_error') or 'connecting'})"
    extra = [f"{mqtt['reconnects']} reconnect(s)" if mqtt.get("reconnects") else ""]
    extra.append(f"{mqtt['dropped']} message(s) dropped while down" if mqtt.get("dropped") else "")
    extra.append(f"{mqtt['commands']} command(s)" if mqtt.get("commands") else "")
    shown = ", ".join(e for e in extra if e)
    return f"mqtt: {mqtt.get('broker', '')} {state}" + (f", {shown}" if shown else "")


def homeassistant_line(hass: dict[str, Any]) -> str:
    """Home Assistant's link in one line: its WebSocket connected or why not, and reconnects."""
    state = "connected" if hass.get("connected") else f"not connected ({hass.get('last_error') or 'connecting'})"
    again = f", {hass['reconnects']} reconnect(s)" if hass.get("reconnects") else ""
    return f"home assistant: {hass.get('url', '')} {state}{again}"


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check everything a turn needs; each failure comes with its fix."""
    from appliance.cli.doctor import run_checks

    failures = warnings = 0
    for check in run_checks(getattr(args, "config", None), getattr(args, "data_dir", None)):
        mark = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[check.status]
        print(f"[{mark}] {check.name}: {check.detail}")
        if check.fix and check.status != "ok":
            print(f"       fix: {check.fix}")
        failures += check.status == "fail"
        warnings += check.status == "warn"
    # a warning does not fail the check (exit 0), but "all checks passed" under one read as nothing to see
    warned = f" ({warnings} warning{'s' * (warnings != 1)} above)" if warnings else ""
    print(f"all checks passed{warned}" if not failures else f"{failures} check(s) failed{warned}")
    return 1 if failures else 0


def cmd_update(args: argparse.Namespace) -> int:
    """`picoagent update check|apply|rollback|boot` (see appliance/ota/)."""
    from appliance.ota.cli import run

    return run(args)


def cmd_selftest(args: argparse.Namespace) -> int:
    """Import every module, load the config, open sqlite-vec and the model file's header."""
    from appliance.selftest import run_selftest

    return run_selftest(getattr(args, "config", None))
