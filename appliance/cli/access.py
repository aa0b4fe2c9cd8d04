"""`picoagent passwd`: the web password, and the first one the daemon made until it is changed."""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from appliance.cli.common import load

if TYPE_CHECKING:
    from appliance.config import Config


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `passwd` command."""
    passwd = sub.add_parser("passwd", parents=[common], help="set the web page's password")
    how = passwd.add_mutually_exclusive_group()
    how.add_argument("--stdin", action="store_true", help="read the new password from standard input")
    how.add_argument(
        "--show-initial",
        action="store_true",
        help="show the password the first start made (until it is changed), and how to reach the web page",
    )
    passwd.set_defaults(handler=cmd_passwd)


def cmd_passwd(args: argparse.Namespace) -> int:
    """Set the web password, or show the first one."""
    from appliance.channels.web.auth import Auth
    from appliance.memory.db import Database
    from appliance.runtime import data_dir

    config = load(args)
    root = data_dir(config)
    if args.show_initial:
        return _show_initial(root, config)
    password = _read_new_password(args.stdin)
    db = Database(root / "picoagent.db")
    try:
        Auth(db).set_password(password)
    finally:
        db.close()
    print("web password set")
    return 0


def _read_new_password(from_stdin: bool) -> str:
    from appliance.errors import UsageError

    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    password = getpass.getpass("new web password: ")
    if getpass.getpass("again: ") != password:
        raise UsageError("the two passwords differ; nothing was changed")
    return password


def _show_initial(root: Path, config: Config) -> int:
    """The first password alone on the first line (for scripts), then where to use it.

    Only the file is read, never the database: root may run this, and must not leave root-owned files there.
    """
    from appliance.channels.web.auth import INITIAL_PASSWORD_FILE
    from appliance.channels.web.certificate import read_certificate
    from appliance.channels.web.site import certificate_lines, site_url
    from appliance.daemon import DaemonInfo
    from appliance.errors import PicoagentError, UsageError

    kept = root / INITIAL_PASSWORD_FILE
    try:
        password = kept.read_text(encoding="utf-8").strip()
    except PermissionError:
        raise PicoagentError(f"cannot read {kept}", fix="run as the picoagent user or with sudo") from None
    except FileNotFoundError:
        if not (root / "picoagent.db").exists():
            raise UsageError(
                f"no web password has been made yet in {root}",
                fix="start the appliance once (`picoagent serve` or `systemctl start picoagent`): it makes one",
            ) from None
        raise UsageError(
            "the first web password was changed (or never made: one was set at setup), so it is not kept",
            fix="set a new one with `picoagent passwd` if you do not know the current one",
        ) from None
    print(password)
    certificate = read_certificate(root) if config.web.tls == "auto" else None
    host, port = config.web.host, config.web.port
    with contextlib.suppress(OSError, ValueError, KeyError):  # the running daemon's port, when it runs
        running = json.loads(DaemonInfo.path(root).read_text())
        host, port = str(running["host"]), int(running["port"])
    url = site_url(host, port, scheme="https" if certificate else "http")
    print(f"  open {url} and sign in with it; `picoagent passwd` changes it (and deletes this copy)")
    if certificate is not None:
        print("\n".join(certificate_lines(certificate, url)))
    return 0
