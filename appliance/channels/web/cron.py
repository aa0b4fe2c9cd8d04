"""Scheduled jobs over HTTP: list, create, pause, resume, cancel, run now, and a job's run history.

The CLI uses these when the daemon runs; the status page's Scheduled card uses them too. Every answer
comes from the daemon's one ``Scheduler`` (a job made here is in the database and scheduled at once).
Refusals are raised and the error middleware answers them with their class's status: no such job 404,
a config or cron.yaml job cancelled 409 (pause it instead), a bad schedule or body 400.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aiohttp import web

from appliance.channels.web.auth import principal
from appliance.channels.web.http import bad_request, json_error, read_json, running
from appliance.channels.web.state import AUTOMATION
from appliance.config import CronJob
from appliance.errors import Conflict, NotFound, PicoagentError

if TYPE_CHECKING:
    from appliance.schedule.scheduler import Scheduler

# What a job does: exactly one of these (device with value); the scheduler's checks say which is missing.
JOB_TEXTS = ("prompt", "task", "message", "device", "value")
JOB_FIELDS = {"id", "schedule", "deliver", "missed", *JOB_TEXTS}

routes = web.RouteTableDef()  # cron routes, added to the app by app.build_app


def _cron(request: web.Request) -> Scheduler:
    return running(request.app[AUTOMATION].cron, "no scheduler here", "jobs are kept and run by `picoagent serve`")


def _who(request: web.Request) -> str:
    found = principal(request)
    return f"web ({found.kind} {found.name})" if found else "web"


def job_from_body(body: dict[str, Any]) -> CronJob:
    """The job a POST /api/cron body describes, or a 400 naming the field that is wrong."""
    unknown = sorted(set(body) - JOB_FIELDS)
    if unknown:
        raise bad_request(f"unknown field {unknown[0]!r}; a job takes {', '.join(sorted(JOB_FIELDS))}")
    schedule = body.get("schedule")
    if not isinstance(schedule, str) or not schedule.strip():
        raise bad_request('expected "schedule": "daily 07:30", "every 2h", "once 2026-11-24 19:00" or a cron line')
    fields: dict[str, Any] = {"schedule": schedule.strip()}
    for name in ("id", *JOB_TEXTS):
        value = body.get(name, "")
        if name == "value" and isinstance(value, bool):
            value = "on" if value else "off"
        if not isinstance(value, str):
            raise bad_request(f'"{name}" must be a string')
        fields[name] = value.strip()
    if not any(fields[name] for name in ("prompt", "task", "message", "device")):
        raise bad_request('say what the job does: "message", "prompt", "task", or "device" with "value"')
    if "deliver" in body:
        if not isinstance(body["deliver"], bool):
            raise bad_request('"deliver" must be true or false')
        fields["deliver"] = body["deliver"]
    if "missed" in body:
        if body["missed"] not in ("skip", "run_once"):
            raise bad_request('"missed" must be "skip" or "run_once"')
        fields["missed"] = body["missed"]
    return CronJob(**fields)


@routes.get("/api/cron")
async def list_cron(request: web.Request) -> web.Response:
    """The jobs with their next and last runs, paused or not, and where each comes from."""
    cron = request.app[AUTOMATION].cron
    if cron is None:
        return web.json_response({"jobs": []})
    await cron.refresh()  # a job `picoagent chat` just made beside the daemon is listed at once
    return web.json_response({"jobs": cron.list_jobs()})


@routes.post("/api/cron")
async def create_cron(request: web.Request) -> web.Response:
    """Add a job (stored in the database, scheduled now); 201 with its row."""
    job = job_from_body(await read_json(request))
    row = await _cron(request).add_job(job, created_by=_who(request))
    return web.json_response(row, status=201)


@routes.post("/api/cron/{id}/pause")
async def pause_cron(request: web.Request) -> web.Response:
    """Pause a job (any job); it keeps its place and runs again once resumed."""
    return web.json_response(await _cron(request).pause(request.match_info["id"], by=_who(request)))


@routes.post("/api/cron/{id}/resume")
async def resume_cron(request: web.Request) -> web.Response:
    """Resume a paused job."""
    return web.json_response(await _cron(request).resume(request.match_info["id"]))


@routes.post("/api/cron/{id}/cancel")
async def cancel_cron(request: web.Request) -> web.Response:
    """Remove a job made in chat or here (its history stays); config and cron.yaml jobs are refused."""
    return web.json_response(await _cron(request).cancel(request.match_info["id"]))


@routes.get("/api/cron/{id}/logs")
async def cron_logs(request: web.Request) -> web.Response:
    """A job's runs, newest first (``?limit=N``, 1 to 1000, default 20)."""
    try:
        limit = int(request.query.get("limit", "20"))
    except ValueError:
        raise bad_request("limit: expected a whole number from 1 to 1000") from None
    job_id = request.match_info["id"]
    return web.json_response({"id": job_id, "runs": await _cron(request).runs(job_id, limit=limit)})


@routes.post("/api/cron/{id}/run")
async def run_cron(request: web.Request) -> web.Response:
    """Run a job now."""
    cron = request.app[AUTOMATION].cron
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
