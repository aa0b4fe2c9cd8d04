"""Scheduled jobs over HTTP: the list, and running one now (the CLI uses these when the daemon runs)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from appliance.channels.web.http import json_error
from appliance.channels.web.state import STATE
from appliance.errors import Conflict, NotFound, PicoagentError


async def list_cron(request: web.Request) -> web.Response:
    """The jobs with their next and last runs."""
    cron = request.app[STATE].cron
    return web.json_response({"jobs": cron.list_jobs() if cron is not None else []})


async def run_cron(request: web.Request) -> web.Response:
    """Run a job now."""
    cron = request.app[STATE].cron
    job_id = request.match_info["id"]
    if cron is None:
        return json_error(404, f"no job {job_id!r}: the scheduler runs inside `picoagent serve`")
    try:
        # Shielded: a client that hangs up must not stop a job half way.
        result = await asyncio.shield(cron.run_now(job_id))
    except (NotFound, Conflict):
        raise  # no such job (404), running now (409): the error middleware answers with their status
    except PicoagentError as exc:  # the job ran and failed
        return json_error(502, exc.message, fix=exc.fix)
    return web.json_response({"id": job_id, "result": result})


def routes() -> list[web.RouteDef]:
    """The cron routes."""
    return [web.get("/api/cron", list_cron), web.post("/api/cron/{id}/run", run_cron)]
