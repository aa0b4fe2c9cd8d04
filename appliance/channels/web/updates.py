"""Updates from the Settings page: the running release, the last over-the-air result, and the rollback button.

The daemon cannot switch releases itself (``/opt/picoagent/current`` is root's and read-only to it): a rollback
is a request file in the state directory, which systemd's ``picoagent-rollback.path`` turns into
``picoagent-rollback.service`` (root: the updater's own rollback, which restarts this daemon and waits for its
health). Outside a release layout (a checkout, `make run`) there is nothing to roll back to, and the answer says
so. Admin only (scopes.py's default).

Routed by app.SETTINGS_ROUTES, which imports this module at its first request (the idle daemon never does).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from appliance.channels.web.auth import principal
from appliance.channels.web.state import RUNTIME
from appliance.config import data_dir
from appliance.errors import Conflict
from appliance.fileio import write_atomic

REQUEST = "rollback.requested"  # systemd/picoagent-rollback.path watches /var/lib/picoagent/rollback.requested


def _status() -> dict[str, Any] | None:
    from appliance.ota.updater import running_status

    return running_status()


async def update_status(request: web.Request) -> web.Response:
    """The running version, the releases there are, the last result, and whether a rollback is asked for."""
    status = await asyncio.to_thread(_status)
    asked = (data_dir(request.app[RUNTIME].config) / REQUEST).exists()
    return web.json_response({"update": status, "rollback_requested": asked})


async def ask_rollback(request: web.Request) -> web.Response:
    """Ask root's rollback service to go back to the previous release (this daemon restarts); 202."""
    from appliance.hardware.events import record_settings_change

    status = await asyncio.to_thread(_status)
    if status is None:
        raise Conflict(
            "this appliance does not run from an installed release, so there is none to roll back to",
            fix="on the Pi image (or after make install-service) the previous release is kept for this",
        )
    others = [v for v in status.get("releases", []) if v != status.get("version")]
    if not others:
        raise Conflict("there is no other release to roll back to", fix="an update keeps the one it replaced")
    target = status.get("previous") if status.get("previous") in others else others[-1]
    runtime = request.app[RUNTIME]
    path = data_dir(runtime.config) / REQUEST
    who = principal(request)
    await asyncio.to_thread(write_atomic, path, f"{target}\n", mode=0o640)
    await runtime.db.call(
        record_settings_change, runtime.db, [f"update.rollback (to {target})"], f"{who.kind}:{who.name}" if who else ""
    )
    return web.json_response({"rolling_back_to": target, "from": status.get("version")}, status=202)
