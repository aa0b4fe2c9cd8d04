"""`picoagent passwd`, `tokens` and `telegram pair`: who may use the appliance, and with what.

The web password (and the first one the daemon made, until it is changed) and API tokens with their
scopes. ``telegram pair`` is kept as another name for ``channels pair telegram`` (appliance/cli/channels.py,
where pairing on every channel lives) and prints the same.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.channels.web.scopes import DEFAULT_SCOPE
from appliance.channels.web.scopes import SCOPES as TOKEN_SCOPES
from appliance.cli.common import action, command_group, load, open_db

if TYPE_CHECKING:
    from appliance.config import Config


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `passwd` command and the `tokens` command group."""
    passwd = action(sub, common, "passwd", "set the web page's password", cmd_passwd)
    how = passwd.add_mutually_exclusive_group()
    how.add_argument("--stdin", action="store_true", help="read the new password from standard input")
    how.add_argument(
        "--initial",
        action="store_true",
        help="read a setup code from standard input: it is the one-time password until the owner chooses theirs "
        "in the web page's setup (the image's first boot does this with picoagent-setup.yaml's setup_code)",
    )
    how.add_argument(
        "--show-initial",
        action="store_true",
        help="show the password the first start made (until it is changed), and how to reach the web page",
    )

    ksub = command_group(sub, common, "tokens", "API tokens for programs (Authorization: Bearer)")
    add = action(ksub, common, "add", "make a token; it is shown once", cmd_tokens_add)
    add.add_argument("name")
    add.add_argument("--stdin", action="store_true", help="adopt the token read from standard input (pat_...)")
    add.add_argument(
        "--scope",
        choices=TOKEN_SCOPES,
        default=DEFAULT_SCOPE,
        help="what it may do: chat (default; chat and the OpenAI API), read (also status, history, devices),"
        " devices (also switch devices, approve writes), admin (everything)",
    )
    action(ksub, common, "list", "the tokens and their scopes (never their values)", cmd_tokens_list)
    scope = action(ksub, common, "scope", "give a token another scope (its value stays)", cmd_tokens_scope)
    scope.add_argument("name")
    scope.add_argument("scope", choices=TOKEN_SCOPES)
    action(ksub, common, "revoke", "revoke a token", cmd_tokens_revoke).add_argument("name")


def add_telegram_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The `telegram` command group."""
    gsub = command_group(sub, common, "telegram", "the Telegram bot: pair a user")
    pair = action(
        gsub,
        common,
        "pair",
        "a one-time code: whoever sends it to the bot may talk to it (channels pair)",
        cmd_telegram_pair,
    )
    pair.add_argument(
        "--ttl", type=float, default=600, metavar="SECONDS", help="how long the code is valid (default 600)"
    )


def cmd_passwd(args: argparse.Namespace) -> int:
    """Set the web password, or show the first one."""
    from appliance.channels.web.auth import Auth
    from appliance.config import data_dir

    config = load(args)
    root = data_dir(config)
    if args.show_initial:
        return _show_initial(root, config)
    password = _read_new_password(args.stdin or args.initial)
    db = open_db(config)
    try:
        if args.initial:
            Auth(db).set_initial_password(password)
        else:
            Auth(db).set_password(password)
    finally:
        db.close()
    print("setup code set: sign in with it, and the web page's setup follows" if args.initial else "web password set")
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
    print(f"  open {url} and sign in with it: the setup page asks for your own (or `picoagent passwd`)")
    if certificate is not None:
        print("\n".join(certificate_lines(certificate, url)))
    return 0


def _auth(config: Config) -> Any:
    from appliance.channels.web.auth import Auth

    return Auth(open_db(config))


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


def cmd_telegram_pair(args: argparse.Namespace) -> int:
    """Print a one-time pairing code for the Telegram bot: `channels pair telegram` under its older name."""
    from appliance.cli.channels import cmd_channels_pair

    args.channel = "telegram"
    return cmd_channels_pair(args)
