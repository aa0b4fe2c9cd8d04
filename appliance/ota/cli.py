"""`picoagent update` and `python3 -m appliance.ota`: check, apply, rollback, boot (the steps: ota/updater.py).

:func:`main` is also what the boot-time updater runs (ota/boot_updater.py MAIN), so it and what it
imports stay inside ``appliance/ota/`` and the bottom modules the zip carries.
"""

from __future__ import annotations

import argparse
import json
import signal
from collections.abc import Sequence
from pathlib import Path

from appliance.errors import exit_for_people
from appliance.ota import updater as steps
from appliance.ota.health import DEFAULT_HEALTH_URL
from appliance.ota.updater import DEFAULT_RESTART, DEFAULT_STOP, UpdateError, Updater

PROG = "python3 -m appliance.ota"


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser | None = None) -> None:
    """The `update` sub-commands, shared by `picoagent update` and `python3 -m appliance.ota`. ``common``: the
    options every `picoagent` command takes after its name too (--config, --data-dir: an update reads neither)."""
    sub = parser.add_subparsers(dest="update_action", metavar="ACTION", required=True)
    root = argparse.ArgumentParser(add_help=False, parents=[common] if common is not None else [])
    root.add_argument("--root", type=Path, default=Path("/"), help="the device's root directory (tests: a temp dir)")
    live = argparse.ArgumentParser(add_help=False)
    live.add_argument("--health-url", default=DEFAULT_HEALTH_URL, help="what must answer 200 with the new version")
    live.add_argument("--health-timeout", type=float, default=180.0, help="seconds to wait for health")
    live.add_argument(
        "--restart-command", help="the command that restarts the service (default: systemctl restart picoagent)"
    )
    live.add_argument(
        "--stop-command",
        help="what stops the service when the self-test needs its memory (default: systemctl stop picoagent)",
    )
    check = sub.add_parser("check", parents=[root], help="the running version, the releases and the last result")
    check.add_argument("--json", action="store_true")
    check.add_argument("--verify", action="store_true", help="also check the running release's files")
    check.add_argument("bundle", nargs="?", type=Path, help="also check whether this bundle may be installed")
    apply = sub.add_parser("apply", parents=[root, live], help="verify, install and switch to a bundle")
    apply.add_argument("bundle", type=Path)
    apply.add_argument("--force", action="store_true", help="allow a downgrade or re-install")
    apply.add_argument("--arch", help=argparse.SUPPRESS)
    sub.add_parser("rollback", parents=[root, live], help="go back to the previous release")
    sub.add_parser("boot", parents=[root], help="at boot: roll back an update that never confirmed its health")


def run(args: argparse.Namespace) -> int:
    """Run one `update` action; expected failures raise (UpdateError, BundleError) for the caller's edge."""
    restart = args.restart_command.split() if getattr(args, "restart_command", None) else DEFAULT_RESTART
    stop = args.stop_command.split() if getattr(args, "stop_command", None) else DEFAULT_STOP
    # `make ota` runs this over SSH: a dropped connection (SIGHUP) must not stop it between two steps.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    updater = Updater(
        args.root,
        arch=getattr(args, "arch", None),
        restart=restart,
        stop=stop,
        health_url=getattr(args, "health_url", DEFAULT_HEALTH_URL),
        health_timeout_s=getattr(args, "health_timeout", 180.0),
    )
    try:
        if args.update_action == "apply":
            updater.apply(args.bundle, force=args.force)
        elif args.update_action == "rollback":
            print(f"now running {updater.rollback()}")
        elif args.update_action == "boot":
            note = updater.boot()
            print(note or "nothing to do")
        else:
            return _check(updater, args)
    except PermissionError as exc:
        raise UpdateError(f"{exc.filename or exc}: permission denied", fix="run it as root (sudo)") from exc
    return 0


def _check(updater: Updater, args: argparse.Namespace) -> int:
    status = updater.status()
    if args.verify:
        status["modified_files"] = updater.verify_current()
    if args.bundle:
        manifest = updater.check_bundle(args.bundle)
        status["bundle"] = {"version": manifest.version, "arch": manifest.arch, "installable": True}
    if args.json:
        print(json.dumps(status, indent=1))
        return 0
    print(f"running   {status['version'] or '(no release layout here)'}")
    print(f"previous  {status['previous'] or '-'}")
    print(f"releases  {', '.join(status['releases']) or '-'}")
    last = status.get("last")
    if last:
        print(f"last      {last['result']}: {last['version']} at {last['at']} {last.get('detail') or ''}".rstrip())
    if status.get("pending"):
        print(f"pending   {status['pending']['version']} (not confirmed; the next boot or update rolls it back)")
    if args.verify:
        print(f"files     {_verified(updater, status['modified_files'])}")
    if args.bundle:
        print(f"bundle    {status['bundle']['version']} ({status['bundle']['arch']}) can be installed")
    # 1 also when nothing could be verified: a script must not read that as "all files match"
    return 1 if args.verify and status["modified_files"] != [] else 0


def _verified(updater: Updater, bad: list[str] | None) -> str:
    """What --verify found, in words."""
    current = updater.layout.current
    if bad is None and not (current.is_symlink() or current.exists()):
        return f"no release is installed here: nothing to verify (a checkout? no {current})"
    if bad is None:
        return f"{current} is no complete release: nothing to verify (`update boot` repairs it)"
    return "all match the signed manifest" if not bad else "CHANGED: " + ", ".join(bad)


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """``python3 -m appliance.ota`` and the boot-time updater (``python3 -I updater.pyz``)."""
    parser = argparse.ArgumentParser(prog=prog, description=(steps.__doc__ or "").split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    return exit_for_people(lambda: run(args))
