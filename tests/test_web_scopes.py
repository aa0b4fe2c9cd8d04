"""Every write route of the web API against every token scope: a refusal changes nothing, an allowance acts.

The routes come from the app's own router (and must be the ones /api/openapi.json describes), so a route
added later is tried too, and fails here until this test knows how to call it. What each scope may do is
written here, apart from scopes.py, so that loosening that table fails a test: ``chat`` may talk,
``read`` may write nothing at all (talking drives the assistant's tools, so it is a write too), ``devices``
may talk, switch devices and decide approvals, ``admin`` may do everything. Each cell is one real request with a
real token through the real middleware and handler, against a real database, scheduler and task store.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from appliance.agent.skill_install import SOURCE_FILE, Provenance
from appliance.channels.web import memory as memory_routes
from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth, _is_public
from appliance.channels.web.openapi import openapi_document
from appliance.channels.web.state import WebState
from appliance.config import CronJob, DeviceConfig, load_config
from appliance.config.load import CHECKOUT_CONFIG
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.fakes.cloud_api import FakeCloud
from tests.fakes.skill_repo import FakeSkillHost
from tests.fakes.telegram_api import FakeTelegram
from tests.helpers import automation_on

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SCOPES = ("chat", "read", "devices", "admin")
Route = tuple[str, str]  # (method, route as aiohttp names it)

# What each scope may write, stated here rather than read from scopes.py.
TALK: frozenset[Route] = frozenset({("POST", "/api/chat"), ("POST", "/api/reset"), ("POST", "/v1/chat/completions")})
SWITCH: frozenset[Route] = frozenset({("POST", "/api/devices/{name}"), ("POST", "/api/approvals/{id}/{decision}")})


def may(scope: str, route: Route) -> bool:
    """Whether a token of ``scope`` may use the write route ``route``."""
    if route in TALK:
        return scope != "read"  # a read-only token writes nothing, not even through the assistant
    if route in SWITCH:
        return scope in ("devices", "admin")
    return scope == "admin"  # every other write, and any route scopes.py does not name


def write_routes(app: web.Application) -> set[Route]:
    """Every POST/PUT/PATCH/DELETE the router serves under /api and /v1 that needs a credential."""
    found = set()
    for resource in app.router.resources():
        for route in resource:
            path = resource.canonical
            # A signed platform webhook (a bridge's /api/webhook/NAME) is public by design: no token.
            public = _is_public(path.replace("{name}", "bridge"))
            if route.method in WRITES and path.startswith(("/api/", "/v1/")) and not public:
                found.add((route.method, path))
    return found


@dataclass
class Site:
    """The app and what its writes act on."""

    app: web.Application
    runtime: Runtime
    state: WebState
    tokens: dict[str, str]
    model: ScriptedModel
    ran: list[str] = field(default_factory=list)  # the cron jobs run
    serial: Iterator[int] = field(default_factory=itertools.count)

    def snapshot(self) -> dict[str, Any]:
        """Every row of every table (API tokens aside: using one notes when), the jobs run, the model's calls."""
        conn = sqlite3.connect(f"file:{self.runtime.db.path}?mode=ro", uri=True)
        try:
            # A virtual table (the vector index) needs its module; its rows are in its shadow tables anyway.
            query = "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
            tables = [r[0] for r in conn.execute(query)]
            rows = {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables if t != "api_tokens"}
        finally:
            conn.close()
        assert self.state.automation.cron is not None
        return {
            "tables": rows,
            "jobs": self.state.automation.cron.list_jobs(),
            "ran": list(self.ran),
            "model_calls": len(self.model.history),
        }


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    # A copy of the config file: an allowed POST /api/settings writes it.
    shutil.copy(CHECKOUT_CONFIG, tmp_path / "picoagent.yaml")
    config = load_config(tmp_path / "picoagent.yaml", data_dir=tmp_path / "data")

    config.devices["gate"] = DeviceConfig(driver="relay", pin=5, approval="required")
    model = ScriptedModel()
    runtime = Runtime.open(config, model=model)
    auth = Auth(runtime.db)
    tokens = {scope: auth.add_token(f"{scope}-token", scope=scope) for scope in SCOPES}
    ran: list[str] = []

    async def run_job(job: CronJob) -> str:
        ran.append(job.id)
        return f"ran {job.id}"

    state = WebState(runtime, auth, automation=automation_on(runtime.db, run_job))
    made = Site(build_app(state), runtime, state, tokens, model, ran)
    yield made
    runtime.close()


@dataclass
class Call:
    """One request on a route, made ready: where, what body, and whether its effect happened afterwards."""

    path: str
    body: dict[str, Any]
    acted: Callable[[Any], Awaitable[bool]]  # (the answer's JSON) -> whether the write took effect


async def _state_of(site: Site, device: str) -> bool:
    assert site.runtime.devices is not None
    return any(r.quantity == "state" and bool(r.value) for r in await site.runtime.devices.read(device))


async def _job(site: Site, *, paused: bool = False) -> str:
    assert site.state.automation.cron is not None
    job_id = f"job{next(site.serial)}"
    await site.state.automation.cron.add_job(
        CronJob(id=job_id, schedule="daily 19:00", message="bins"), created_by="test"
    )
    if paused:
        await site.state.automation.cron.pause(job_id)
    return job_id


def _job_row(site: Site, job_id: str) -> dict[str, Any] | None:
    assert site.state.automation.cron is not None
    return next((j for j in site.state.automation.cron.list_jobs() if j["id"] == job_id), None)


async def _task(site: Site, *, paused: bool = False) -> int:
    store = site.state.automation.tasks
    assert store is not None
    task = await site.runtime.db.call(store.add, f"task {next(site.serial)}")
    if paused:
        await site.runtime.db.call(store.pause, task.id)
    return task.id


async def _task_state(site: Site, task_id: int) -> str:
    assert site.state.automation.tasks is not None
    return (await site.runtime.db.call(site.state.automation.tasks.get, task_id)).state


async def prepare(site: Site, route: Route) -> Call:
    """A request on ``route`` that would change something, made on fresh objects of its own."""
    _, path = route
    if route == ("POST", "/api/chat"):
        before = len(site.model.history)

        async def answered(body: Any) -> bool:
            return "text" in body and len(site.model.history) > before

        return Call(path, {"message": "What is on my list?"}, answered)
    if route == ("POST", "/api/reset"):
        session = f"s{next(site.serial)}"

        async def reset(body: Any) -> bool:
            return bool(body == {"reset": session, "channel": "api"})  # a token's default: its API conversation

        return Call(path, {"session": session}, reset)
    if route == ("POST", "/v1/chat/completions"):
        before = len(site.model.history)

        async def completed(body: Any) -> bool:
            return bool(body.get("choices")) and len(site.model.history) > before

        return Call(path, {"messages": [{"role": "user", "content": "Say hello."}]}, completed)
    if route == ("POST", "/api/devices/{name}"):
        wanted = not await _state_of(site, "fan")

        async def switched(body: Any) -> bool:
            return await _state_of(site, "fan") == wanted

        return Call("/api/devices/fan", {"value": wanted}, switched)
    if route == ("POST", "/api/devices/try"):
        assert site.runtime.devices is not None
        factory = site.runtime.devices.backend.pin_factory

        async def pulsed(body: Any) -> bool:  # a relay on a free pin, pulsed on and off: the pin was on once
            return any(6 in info.names for info in factory.pins) and any(s.state for s in factory.pin(6).states)

        return Call(path, {"driver": "relay", "pin": 6}, pulsed)
    if route == ("POST", "/api/approvals/{id}/{decision}"):
        assert site.runtime.devices is not None and site.runtime.approvals is not None
        wanted = not await _state_of(site, "gate")
        pending = (await site.runtime.devices.set("gate", wanted, requested_by="model")).pending
        assert pending is not None
        desk = site.runtime.approvals

        async def approved(body: Any) -> bool:
            decided = await asyncio.to_thread(desk.pending)
            return pending.id not in [p.id for p in decided] and await _state_of(site, "gate") == wanted

        return Call(f"/api/approvals/{pending.id}/approve", {}, approved)
    if route == ("POST", "/api/cron"):
        job_id = f"new{next(site.serial)}"

        async def added(body: Any) -> bool:
            return _job_row(site, job_id) is not None

        return Call(path, {"id": job_id, "schedule": "daily 19:00", "message": "take the bins out"}, added)
    if path.startswith("/api/cron/{id}/"):
        verb = path.rsplit("/", 1)[1]
        job_id = await _job(site, paused=verb == "resume")
        checks: dict[str, Callable[[], bool]] = {
            "pause": lambda: (_job_row(site, job_id) or {}).get("paused") is True,
            "resume": lambda: (_job_row(site, job_id) or {}).get("paused") is False,
            "cancel": lambda: _job_row(site, job_id) is None,
            "run": lambda: job_id in site.ran,
        }
        if verb in checks:
            check = checks[verb]

            async def job_acted(body: Any) -> bool:
                return check()

            return Call(f"/api/cron/{job_id}/{verb}", {}, job_acted)
    if route == ("POST", "/api/tasks"):
        goal = f"goal {next(site.serial)}"

        async def queued(body: Any) -> bool:
            assert site.state.automation.tasks is not None
            return goal in [t.goal for t in await site.runtime.db.call(site.state.automation.tasks.list)]

        return Call(path, {"goal": goal}, queued)
    if path.startswith("/api/tasks/{id}/"):
        verb = path.rsplit("/", 1)[1]
        task_id = await _task(site, paused=verb == "resume")
        after = {"pause": "paused", "resume": "pending", "cancel": "cancelled"}
        if verb in after:

            async def moved(body: Any) -> bool:
                return await _task_state(site, task_id) == after[verb]

            return Call(f"/api/tasks/{task_id}/{verb}", {}, moved)
    if route == ("POST", "/api/settings"):
        file = site.state.settings.file(site.runtime)
        version, _ = await asyncio.to_thread(file.read)
        name = f"Pico{next(site.serial)}"

        async def renamed(body: Any) -> bool:
            return (await asyncio.to_thread(file.read))[1].agent.name == name

        return Call(path, {"version": version, "set": {"agent.name": name}}, renamed)
    if route == ("POST", "/api/setup/password"):
        new = f"owner password {next(site.serial)}"

        async def changed(body: Any) -> bool:
            return await asyncio.to_thread(site.state.auth.check_password, new)

        return Call(path, {"password": new}, changed)
    if route == ("POST", "/api/setup/cloud"):
        fake = FakeCloud("openai")
        await fake.start()
        file = site.state.settings.file(site.runtime)
        version, _ = await asyncio.to_thread(file.read)
        name = f"cloud{next(site.serial)}"
        provider = {"type": "openai", "api_base": fake.api_base, "model": fake.model, "api_key": fake.api_key}

        async def saved(body: Any) -> bool:  # called once, allowed or refused: the fake provider goes with it
            try:
                return name in (await asyncio.to_thread(file.read))[1].providers
            finally:
                await fake.close()

        return Call(path, {"version": version, "name": name, **provider}, saved)
    if path.startswith("/api/access/") or path == "/api/update/rollback":
        return await _prepare_access(site, route)
    if path.startswith(("/api/memory", "/api/conversations")):
        return await _prepare_memory(site, route)
    if path.startswith("/api/setup/telegram/"):
        return await _prepare_telegram(site, route)
    if route == ("POST", "/api/skills/install"):
        host = FakeSkillHost().__enter__()  # stopped by acted(), called once whether allowed or refused
        name = f"skill{next(site.serial)}"
        repo = host.repo("garden", "skills")
        text = f"---\nname: {name}\ndescription: A skill.\n---\nDo it.\n"
        commit = repo.commit({f"{name}/SKILL.md": text})
        site.runtime.config.tools.skills_api = host.url
        folder = site.runtime.workspace.root / "skills" / name

        async def installed(body: Any) -> bool:
            host.__exit__()
            return (folder / "SKILL.md").exists()

        return Call(path, {"source": f"garden/skills/{name}", "commit": commit, "confirm": True}, installed)
    if route == ("DELETE", "/api/skills/{name}"):
        name = f"skill{next(site.serial)}"
        folder = site.runtime.workspace.root / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A skill.\n---\nDo it.\n")
        provenance = Provenance(f"garden/skills/{name}", None, "0" * 40, 0.0, "")
        (folder / SOURCE_FILE).write_text(json.dumps(provenance.as_dict()))

        async def removed(body: Any) -> bool:
            return not folder.exists()

        return Call(f"/api/skills/{name}", {}, removed)
    raise AssertionError(f"a write route this test cannot call yet: {route}; teach prepare() how, and say who may")


def test_the_write_routes_are_the_ones_the_openapi_document_describes(site: Site) -> None:
    documented = {
        (method.upper(), path)
        for path, operations in openapi_document()["paths"].items()
        for method, operation in operations.items()
        if method.upper() in WRITES and path.startswith(("/api/", "/v1/")) and operation.get("security") != []
    }
    routed = write_routes(site.app)
    assert routed == documented, (routed - documented, documented - routed)
    assert routed >= TALK | SWITCH and len(routed) >= 15  # the routes this test names are still there


@pytest.mark.parametrize("scope", SCOPES)
def test_each_scope_writes_exactly_what_it_may_and_a_refusal_changes_nothing(site: Site, scope: str) -> None:
    async def main() -> None:
        headers = {"Authorization": f"Bearer {site.tokens[scope]}"}
        tried = {True: 0, False: 0}
        async with TestClient(TestServer(site.app)) as client:
            for route in sorted(write_routes(site.app)):
                call = await prepare(site, route)
                before = site.snapshot()
                answer = await client.request(route[0], call.path, json=call.body, headers=headers)
                body = await answer.json()
                allowed = may(scope, route)
                tried[allowed] += 1
                if allowed:
                    assert 200 <= answer.status < 300, (scope, route, answer.status, body)
                    assert await call.acted(body), (scope, route, "answered but did not act", body)
                    continue
                assert answer.status == 403, (scope, route, answer.status, body)
                assert body["scope"] == scope and body["needed"] != scope, body
                assert f"--scope {body['needed']}" in body["fix"]
                # widening keeps what the token had: read + chat is devices, not chat alone
                wider = "devices" if {scope, body["needed"]} == {"read", "chat"} else body["needed"]
                assert f"tokens scope {scope}-token {wider}`" in body["fix"], body["fix"]
                assert not await call.acted(body), (scope, route, "refused but acted")
                assert site.snapshot() == before, (scope, route, "refused but something changed")
        refused = {"chat": 12, "read": 15, "devices": 10, "admin": 0}[scope]  # of today's 15; a new route adds one
        assert tried[False] >= refused and tried[True] >= 15 - refused, tried

    asyncio.run(main())


async def _prepare_access(site: Site, route: Route) -> Call:
    """The access tab's writes and the rollback button, each on objects of its own."""
    from appliance.channels.web import updates

    auth, (method, path), n = site.state.auth, route, next(site.serial)

    def acts(check: Callable[[], bool]) -> Callable[[Any], Awaitable[bool]]:
        async def acted(body: Any) -> bool:
            return await asyncio.to_thread(check)

        return acted

    if path == "/api/access/password":
        await asyncio.to_thread(auth.set_password, f"current password {n}")
        return Call(
            path,
            {"current": f"current password {n}", "password": f"new password {n}"},
            acts(lambda: auth.check_password(f"new password {n}")),
        )
    if path == "/api/access/tokens":
        return Call(
            path,
            {"name": f"made{n}", "scope": "read"},
            acts(lambda: f"made{n}" in [t.name for t in auth.list_tokens()]),
        )
    if path == "/api/access/sessions/end":
        await asyncio.to_thread(auth.create_session)
        return Call(path, {}, acts(lambda: auth.live_sessions() == 0))
    if path == "/api/update/rollback":
        flag = site.runtime.config.resolve_path(site.runtime.config.data_dir) / updates.REQUEST
        flag.unlink(missing_ok=True)
        real = updates._status
        updates._status = lambda: {"version": "0.2.0", "previous": "0.1.0", "releases": ["0.1.0", "0.2.0"]}

        async def asked(body: Any) -> bool:
            updates._status = real
            return flag.exists()

        return Call(path, {}, asked)
    victim = f"victim{n}"
    await asyncio.to_thread(auth.add_token, victim, scope="chat")
    if method == "DELETE":
        return Call(
            f"/api/access/tokens/{victim}", {}, acts(lambda: victim not in [t.name for t in auth.list_tokens()])
        )
    return Call(
        f"/api/access/tokens/{victim}",
        {"scope": "read"},
        acts(lambda: {t.name: t.scope for t in auth.list_tokens()}.get(victim) == "read"),
    )


async def _prepare_memory(site: Site, route: Route) -> Call:
    """The memory tab's writes: edit, forget, forget about, delete a conversation, each on its own memory."""
    store, db, (method, path), n = site.runtime.memory, site.runtime.db, route, next(site.serial)
    assert store is not None
    if path == "/api/conversations/{id}":
        conversation = await asyncio.to_thread(db.conversation, "api", f"talk{n}")
        await asyncio.to_thread(db.add_message, conversation, "user", "hello")

        async def deleted(body: Any) -> bool:
            return conversation not in [c["id"] for c in await asyncio.to_thread(db.conversations, 500)]

        return Call(f"/api/conversations/{conversation}", {}, deleted)
    memory = await asyncio.to_thread(store.add, f"the garage code is {n}{n}{n}", source="test")

    async def gone(body: Any) -> bool:
        return await asyncio.to_thread(store.get, memory.id) is None

    if path == "/api/memory/forget":
        about = "the garage code"
        token = memory_routes.preview_token(about, [memory.id], int(time.time()))  # as a preview answers it
        return Call(path, {"about": about, "ids": [memory.id], "token": token, "confirm": True}, gone)
    if method == "PATCH":

        async def edited(body: Any) -> bool:
            now = await asyncio.to_thread(store.get, memory.id)
            return now is not None and now.text == f"the shed code is {n}"

        return Call(f"/api/memory/{memory.id}", {"text": f"the shed code is {n}"}, edited)
    return Call(f"/api/memory/{memory.id}", {}, gone)


async def _prepare_telegram(site: Site, route: Route) -> Call:
    """The setup's Telegram writes against the fake Bot API (stopped by acted(), called once either way)."""
    telegram = FakeTelegram()
    await telegram.start()
    settings = site.runtime.config.telegram
    settings.api_base_url, settings.enabled, settings.token = telegram.base_url, True, telegram.token
    db = site.runtime.db

    def codes() -> int:
        return int(db.value("SELECT count(*) FROM channel_pairing") or 0)

    before = await asyncio.to_thread(codes)

    async def acted(body: Any) -> bool:
        try:
            if route[1].endswith("/check"):
                return bool(body.get("ok"))
            return await asyncio.to_thread(codes) > before
        finally:
            await telegram.close()

    return Call(route[1], {"token": telegram.token}, acted)
