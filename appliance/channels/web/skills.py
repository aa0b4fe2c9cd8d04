"""Skills over HTTP, for the Settings page and `picoagent skills` while the daemon runs.

``GET /api/skills`` lists each skill: name, description, source and commit (installed from a repository),
uses and last use (read scope). ``POST /api/skills/install`` with ``{"source": "OWNER/REPO/PATH", "ref": ...}``
answers a preview (SKILL.md, its front matter, files, the commit, a diff for an update) and writes nothing;
the same route with ``{"source": ..., "commit": <the previewed sha>, "confirm": true}`` installs exactly that
commit and the running daemon reads its skills again at once. ``DELETE /api/skills/{name}`` removes an
installed one. The writes are admin only (scopes.py's default). The fetch and the files run on a thread;
the counters through the database's own thread. The install code (tarfile, urllib) is imported on the first
request: the idle daemon never needs it.

Routed by app.SETTINGS_ROUTES, which imports this module at its first request (the idle daemon never does).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from appliance.agent.skill_uses import SkillUses
from appliance.agent.skills import SKILLS_DIR, SkillCatalog
from appliance.channels.web.http import bad_request, json_error, read_json
from appliance.channels.web.state import RUNTIME


async def _reload(request: web.Request) -> SkillCatalog:
    """The running daemon's skills read again (on a thread), then swapped in on the loop as SIGHUP does."""
    runtime = request.app[RUNTIME]
    catalog = await asyncio.to_thread(SkillCatalog.load, runtime.workspace.root / SKILLS_DIR)
    return runtime.reload_skills(catalog)


async def list_skills(request: web.Request) -> web.Response:
    """Every skill with its source, commit, uses and last use, and the SKILL.md files with problems."""
    from appliance.agent import skill_install

    runtime = request.app[RUNTIME]
    uses = await runtime.db.call(SkillUses(runtime.db).all)
    return web.json_response(await asyncio.to_thread(skill_install.listing, runtime.workspace.root, uses))


def _text(body: dict[str, object], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise bad_request(f"{key}: expected text")
    return value


async def install_skill(request: web.Request) -> web.Response:
    """A preview of {"source", "ref"}; with {"source", "commit", "confirm": true}, that commit installed."""
    from appliance.agent import skill_install

    runtime = request.app[RUNTIME]
    body = await read_json(request)
    source, ref, commit = _text(body, "source"), _text(body, "ref"), _text(body, "commit")
    if not source:
        return json_error(400, 'expected {"source": "OWNER/REPO/PATH"}, and "ref" or "commit" with "confirm"')
    api, workspace = runtime.config.tools.skills_api, runtime.workspace.root
    if body.get("confirm") is not True:
        preview = await asyncio.to_thread(skill_install.preview, workspace, api, source, ref or commit)
        return web.json_response({"installed": False, **preview.as_dict()})
    if not commit:
        return json_error(400, 'confirm needs "commit": the sha the preview named', fix="ask for a preview first")
    name, provenance = await asyncio.to_thread(skill_install.install, workspace, api, source, commit, ref)
    catalog = await _reload(request)
    return web.json_response(
        {"installed": True, "name": name, **provenance.as_dict(), "problems": list(catalog.problems)}
    )


async def remove_skill(request: web.Request) -> web.Response:
    """Remove a skill installed from a repository (its counter goes with it)."""
    from appliance.agent import skill_install

    runtime = request.app[RUNTIME]
    name = request.match_info["name"]
    provenance = await asyncio.to_thread(skill_install.remove, runtime.workspace.root, name)
    await runtime.db.call(SkillUses(runtime.db).forget, name)
    await _reload(request)
    return web.json_response({"removed": name, "source": provenance.source, "commit": provenance.commit})
