"""The daemon's web face through a real aiohttp server and client, with the real model."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from appliance import __version__
from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.openapi import openapi_document
from appliance.channels.web.state import STATE, WebState
from appliance.config import Config
from appliance.llm.base import ChatMessage, GenerationRequest
from appliance.llm.local import LocalModel
from appliance.runtime import Runtime

PASSWORD = "correct horse battery"
PUBLIC = {"/healthz", "/metrics", "/login"}


@pytest.fixture
def app(config: Config, local_model: LocalModel) -> Iterator[web.Application]:
    config.agent.temperature = 0.0
    runtime = Runtime.open(config, model=local_model)
    auth = Auth(runtime.db)
    auth.set_password(PASSWORD)
    application = build_app(WebState(runtime, auth))
    yield application
    runtime.close()


Scenario = Callable[[TestClient[Any, Any], str], Awaitable[None]]


def run(app: web.Application, scenario: Scenario) -> None:
    """Serve the app on a real socket and run the scenario with a client and an API token."""

    async def main() -> None:
        token = app[STATE].auth.add_token("tests", scope="admin")
        async with TestClient(TestServer(app)) as client:
            await scenario(client, token)

    asyncio.run(main())


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def login(client: TestClient[Any, Any]) -> str:
    """Log in through the form like a browser; returns the session's CSRF token."""
    page = await client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', await page.text())
    assert csrf, "the login form carries a CSRF field"
    response = await client.post("/login", data={"password": PASSWORD, "csrf": csrf.group(1), "next": "/"})
    assert response.status == 200 and response.url.path == "/"
    session = await (await client.get("/api/session")).json()
    return str(session["csrf"])


def test_every_non_public_route_needs_auth(app: web.Application) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        checked = 0
        for resource in app.router.resources():
            path = resource.canonical.replace("{name}", "fan")
            if path in PUBLIC or path.startswith("/static"):
                continue
            # Public, each guarded by its platform's signature or secret (test_telegram.py, test_channel_whatsapp.py,
            # test_channel_webhook.py).
            if path in ("/telegram/webhook", "/whatsapp/webhook") or path.startswith("/api/webhook/"):
                continue
            for route in resource:
                if route.method == "HEAD":
                    continue
                response = await client.request(route.method, path, allow_redirects=False)
                if path.startswith(("/api/", "/v1/")) or path == "/ws":
                    assert response.status == 401, (route.method, path)
                    assert (await response.json())["error"] == "authentication required"
                else:
                    assert response.status == 302, (route.method, path)
                    assert response.headers["Location"].startswith("/login")
                checked += 1
        assert checked >= 12
        for path in PUBLIC:
            assert (await client.get(path, allow_redirects=False)).status == 200, path
        # The OTA updater tells the new release from the old one by the version /healthz reports.
        assert await (await client.get("/healthz")).json() == {"status": "ok", "version": __version__}

    run(app, scenario)


def test_api_chat_returns_the_reply_record(app: web.Application) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        response = await client.post(
            "/api/chat",
            json={"message": "/local What is the capital of France? Answer in one word."},
            headers=bearer(token),
        )
        assert response.status == 200
        record = await response.json()
        assert "Paris" in record["text"] and record["route"] == "local" and record["session"] == "api:api"
        metrics = await (await client.get("/metrics")).text()
        assert 'picoagent_turns_total{route="local"} 1' in metrics
        assert "picoagent_model_latency_seconds_bucket" in metrics and "picoagent_queue_depth" in metrics
        assert f'picoagent_route_decisions_total{{route="local",why="{record["why"]}",blocked=' in metrics
        status = await (await client.get("/api/status", headers=bearer(token))).json()
        assert status["recent"][0]["route"] == "local" and status["model"]["loaded"] is True
        assert status["update"] is None  # a checkout, not a release under /opt/picoagent/releases
        routing = status["routing"]
        assert routing["mode"] == "local_only" and routing["today"][0]["route"] == "local"
        assert routing["today"][0]["turns"] == 1 and routing["spent_today_usd"] == 0
        timings, cache = record["timings"], status["model"]["prompt_cache"]
        assert cache["prompt_tokens_1h"] == timings["prompt_tokens"] > 0
        assert cache["cached_tokens_1h"] == timings["cached_tokens"]
        assert cache["hit_rate_1h"] == round(timings["cached_tokens"] / timings["prompt_tokens"], 4)
        assert cache["prefix"] in ("loaded", "built", "building", "off", "none")
        assert isinstance(cache["ram_mb"], float) and isinstance(cache["entries"], int)

    run(app, scenario)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ("{}", "non-empty string"),
        ('{"message": "   "}', "non-empty string"),
        ('{"message": 5}', "non-empty string"),
        (json.dumps({"message": "x" * 9000}), "too long"),
        ('{"message": "hi", "session": "../../etc"}', "session"),
        ('{"message": "hi", "route": "moon"}', '"route" must be'),
    ],
)
def test_bad_chat_requests_get_clear_400s(app: web.Application, body: str, error: str) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        response = await client.post("/api/chat", data=body, headers=bearer(token))
        assert response.status == 400
        assert error in (await response.json())["error"]

    run(app, scenario)


def test_websocket_streams_events_in_order_and_history_reloads(app: web.Application) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        await login(client)
        ws = await client.ws_connect("/ws", headers={"Origin": str(client.make_url("/")).rstrip("/")})
        await ws.send_json(
            {"type": "message", "text": "/local What is the capital of France? Answer in one word.", "session": "t1"}
        )
        kinds, text = [], ""
        async for message in ws:
            event = json.loads(message.data)
            kinds.append(event["type"])
            if event["type"] == "text":
                text += event["delta"]
            if event["type"] in ("done", "error"):
                break
        assert kinds[-1] == "done" and "text" in kinds
        assert kinds.index("text") < kinds.index("done")
        assert "Paris" in text and event["route"] == "local"
        await ws.send_json({"type": "bogus"})
        assert "unknown frame type" in (await ws.receive_json())["message"]
        await ws.close()
        history = await (await client.get("/api/history?session=t1")).json()
        assert [m["role"] for m in history["messages"]] == ["user", "assistant"]
        assert "Paris" in history["messages"][1]["content"]

    run(app, scenario)


def test_closing_the_websocket_cancels_its_turn(app: web.Application) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        state = app[STATE]
        state.runtime.config.agent.max_reply_tokens = 400
        await login(client)
        ws = await client.ws_connect("/ws", headers={"Origin": str(client.make_url("/")).rstrip("/")})
        await ws.send_json({"type": "message", "text": "Write a long story about a dragon.", "session": "t2"})
        while (await ws.receive_json())["type"] != "text":
            pass
        await ws.close()
        for _ in range(100):  # the model is released within a token or two
            if not state.runtime.model_queue.busy and not state.streams.turns:
                break
            await asyncio.sleep(0.02)
        assert not state.runtime.model_queue.busy
        history = await (await client.get("/api/history?session=t2")).json()
        assert history["messages"][-1]["content"].endswith("[stopped]")

    run(app, scenario)


def _sse(body: str) -> list[Any]:
    events = [line.removeprefix("data: ") for line in body.split("\n\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_openai_compatible_completions(app: web.Application) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        request = {
            "model": "anything",
            "messages": [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
            "temperature": 0,
            "max_tokens": 12,
        }
        plain = await (await client.post("/v1/chat/completions", json=request, headers=bearer(token))).json()
        assert plain["object"] == "chat.completion" and plain["model"] == "smollm2-135m"
        answer = plain["choices"][0]["message"]["content"]
        assert "Paris" in answer and plain["usage"]["completion_tokens"] > 0
        response = await client.post("/v1/chat/completions", json={**request, "stream": True}, headers=bearer(token))
        assert response.headers["Content-Type"].startswith("text/event-stream")
        chunks = _sse(await response.text())
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
        assert streamed == answer
        assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
        models = await (await client.get("/v1/models", headers=bearer(token))).json()
        assert models["data"][0]["id"] == "smollm2-135m"
        bad = await client.post("/v1/chat/completions", json={"messages": []}, headers=bearer(token))
        error = (await bad.json())["error"]
        assert bad.status == 400 and error["type"] == "invalid_request_error" and error["param"] == "messages"

    run(app, scenario)


def test_openapi_document_matches_the_routes(app: web.Application) -> None:
    doc = openapi_document()
    routed = {r.canonical for r in app.router.resources()}
    for path in doc["paths"]:
        assert path in routed, path
    for path in routed:
        if path.startswith(("/api/", "/v1/")):
            assert path in doc["paths"], f"{path} is served but not documented"


def test_the_model_is_shared_fairly_between_clients(app: web.Application, local_model: LocalModel) -> None:
    """Client A queues three requests, then B one: B runs second, not fourth, and hears its position."""
    scheduler = app[STATE].runtime.model_queue
    order: list[str] = []
    positions: list[int] = []

    async def ask(client: str, label: str) -> None:
        request = GenerationRequest([ChatMessage("user", "Say hi.")], max_tokens=2, temperature=0.0, client=client)
        if client == "B":
            request.on_queue = positions.append
        await scheduler.generate(request)
        order.append(label)

    async def main() -> None:
        tasks = [asyncio.ensure_future(ask("A", f"A{i}")) for i in range(3)]
        await asyncio.sleep(0)
        tasks.append(asyncio.ensure_future(ask("B", "B0")))
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert order == ["A0", "B0", "A1", "A2"]
    assert positions and positions[-1] == 1  # B was told it is next, behind the running request


def test_a_cancelled_waiter_leaves_the_line(app: web.Application) -> None:
    scheduler = app[STATE].runtime.model_queue

    async def main() -> None:
        long = GenerationRequest([ChatMessage("user", "Write a long story.")], max_tokens=60, client="A")
        first = asyncio.ensure_future(scheduler.generate(long))
        await asyncio.sleep(0)
        waiting = asyncio.ensure_future(
            scheduler.generate(GenerationRequest([ChatMessage("user", "Hi")], max_tokens=2, client="B"))
        )
        await asyncio.sleep(0)
        assert scheduler.waiting == 1
        waiting.cancel()
        await asyncio.sleep(0)
        assert scheduler.waiting == 0
        await first

    asyncio.run(main())


def test_login_is_rate_limited(app: web.Application) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        statuses = []
        for _ in range(7):
            page = await client.get("/login")
            csrf = re.search(r'name="csrf" value="([^"]+)"', await page.text())
            assert csrf
            response = await client.post("/login", data={"password": "wrong", "csrf": csrf.group(1)})
            statuses.append(response.status)
        assert statuses[:5] == [401] * 5 and statuses[-1] == 429

    run(app, scenario)


def test_unauthenticated_api_error_is_json_and_bad_token_refused(app: web.Application) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        response = await client.get("/api/status", headers=bearer("pat_not-a-real-token"))
        assert response.status == 401 and response.headers["Content-Type"].startswith("application/json")
        ok = await client.get("/api/status", headers=bearer(token))
        assert ok.status == 200

    run(app, scenario)


def test_session_posts_need_the_csrf_token(app: web.Application) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        csrf = await login(client)
        refused = await client.post("/api/reset", json={"session": "web"})
        assert refused.status == 403
        accepted = await client.post("/api/reset", json={"session": "web"}, headers={"X-CSRF-Token": csrf})
        assert accepted.status == 200

    run(app, scenario)


def test_websocket_from_another_origin_is_refused(app: web.Application) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        await login(client)
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await client.ws_connect("/ws", headers={"Origin": "http://evil.example"})
        assert err.value.status == 403

    run(app, scenario)


def test_unknown_device_is_a_clear_404(app: web.Application) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        response = await client.post("/api/devices/garage", json={"value": "on"}, headers=bearer(token))
        assert response.status == 404 and "no device named 'garage'" in (await response.json())["error"]
        listed = await (await client.get("/api/devices", headers=bearer(token))).json()
        assert {d["name"] for d in listed["devices"]} >= {"fan", "living_room"}
        switched = await client.post("/api/devices/fan", json={"value": "on"}, headers=bearer(token))
        assert (await switched.json())["state"] == [{"quantity": "state", "value": True, "unit": ""}]
        bad = await client.post("/api/devices/fan", json={"value": "purple"}, headers=bearer(token))
        assert bad.status == 400 and "takes on or off" in (await bad.json())["error"]
        sensor = await client.post("/api/devices/living_room", json={"value": "on"}, headers=bearer(token))
        assert sensor.status == 403

    run(app, scenario)


def test_state_directory_untouched_by_static_traversal(app: web.Application, tmp_path: Path) -> None:
    async def scenario(client: TestClient[Any, Any], token: str) -> None:
        for path in ("/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fapp.py"):
            response = await client.get(path, allow_redirects=False)
            assert response.status in (302, 403, 404), path
            assert "import" not in await response.text()  # never the source

    run(app, scenario)


def test_an_http_client_that_goes_away_stops_its_generation(
    config: Config, local_model: LocalModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dropped /api/chat or SSE request stops the model (aiohttp's TestServer cancels handlers, as the daemon's
    runner is told to; test_daemon checks the daemon itself)."""
    config.agent.max_reply_tokens = 400
    generate = local_model.generate

    async def slowly(request: GenerationRequest) -> Any:
        """Each token a further 50 ms, so no CPU tells the story before the client's 2 s are up."""
        then = request.should_stop

        def should_stop(logprobs: Any) -> bool:
            time.sleep(0.05)
            return bool(then(logprobs)) if then is not None else False

        return await generate(dataclasses.replace(request, should_stop=should_stop))

    monkeypatch.setattr(local_model, "generate", slowly)
    runtime = Runtime.open(config, model=local_model)
    auth = Auth(runtime.db)
    token = auth.add_token("t")
    state = WebState(runtime, auth)

    async def main() -> None:
        server = TestServer(build_app(state))
        await server.start_server()
        headers = bearer(token)
        for path, body in (
            ("/api/chat", {"message": "Write a long story about a dragon."}),
            (
                "/v1/chat/completions",
                {"messages": [{"role": "user", "content": "Write a long story."}], "stream": True},
            ),
        ):
            async with aiohttp.ClientSession() as http:
                with pytest.raises(asyncio.TimeoutError):
                    async with http.post(
                        server.make_url(path), json=body, headers=headers, timeout=aiohttp.ClientTimeout(total=2.0)
                    ) as response:
                        await response.read()
            for _ in range(100):
                if not runtime.model_queue.busy:
                    break
                await asyncio.sleep(0.02)
            assert not runtime.model_queue.busy, path
        db = runtime.db
        stored = db.recent_messages(db.conversation("api", "api@t"), 2)  # a chat token's own conversation
        assert stored[-1].content.endswith("[stopped]")  # cut short, not finished in the background
        await server.close()

    asyncio.run(main())
    runtime.close()


def test_approvals_over_http(config: Config, local_model: LocalModel) -> None:
    from appliance.config import DeviceConfig

    config.devices["gate"] = DeviceConfig(driver="relay", pin=5, approval="required")
    runtime = Runtime.open(config, model=local_model)
    auth = Auth(runtime.db)
    token = auth.add_token("t", scope="devices")  # switching and approving is what that scope is for

    async def main() -> None:
        async with TestClient(TestServer(build_app(WebState(runtime, auth)))) as client:
            asked = await client.post("/api/devices/gate", json={"value": "on"}, headers=bearer(token))
            assert asked.status == 202
            pending = (await asked.json())["pending_approval"]
            assert pending["device"] == "gate" and pending["value"] is True
            listed = await (await client.get("/api/approvals", headers=bearer(token))).json()
            assert [p["id"] for p in listed["pending"]] == [pending["id"]]
            approved = await client.post(f"/api/approvals/{pending['id']}/approve", headers=bearer(token))
            assert approved.status == 200
            assert (await approved.json())["state"] == [{"quantity": "state", "value": True, "unit": ""}]
            again = await client.post(f"/api/approvals/{pending['id']}/deny", headers=bearer(token))
            assert again.status == 409 and "already approved" in (await again.json())["error"]
            unknown = await client.post("/api/approvals/a-nothing/approve", headers=bearer(token))
            assert unknown.status == 404

    asyncio.run(main())
    runtime.close()


def test_a_chat_token_chats_but_cannot_approve_or_read_others_history(config: Config, local_model: LocalModel) -> None:
    """A token made the default way (`picoagent tokens add NAME`) is for chatting: an OpenAI client's token."""
    from appliance.config import DeviceConfig

    config.agent.temperature = 0.0
    config.devices["gate"] = DeviceConfig(driver="relay", pin=5, approval="required")
    runtime = Runtime.open(config, model=local_model)
    auth = Auth(runtime.db)
    token = auth.add_token("openai-client")
    assert runtime.devices is not None
    # The owner's own conversation in the web chat, which the token must not read in any way.
    owner_chat = runtime.db.conversation("web", "web")
    runtime.db.add_message(owner_chat, "user", "The door code is 4711.")

    async def main() -> None:
        pending = (await runtime.devices.set("gate", "on", requested_by="model")).pending  # type: ignore[union-attr]
        assert pending is not None
        async with TestClient(TestServer(build_app(WebState(runtime, auth)))) as client:
            approve = await client.post(f"/api/approvals/{pending.id}/approve", headers=bearer(token))
            assert approve.status == 403
            refusal = await approve.json()
            assert refusal["error"] == (
                "the API token 'openai-client' may chat only;"
                " POST /api/approvals/{id}/{decision} needs the devices scope"
            )
            assert refusal["fix"].startswith("make a token for this with `picoagent tokens add NAME --scope devices`")
            assert runtime.devices.approvals.get(pending.id).status == "pending"  # type: ignore[union-attr]
            # It reads its own conversations only: the owner's web chat of that name is not one of them.
            history = await client.get("/api/history?session=web&channel=web", headers=bearer(token))
            assert history.status == 200 and (await history.json())["messages"] == []
            for method, path in (("GET", "/api/status"), ("GET", "/api/devices"), ("POST", "/api/devices/fan")):
                assert (await client.request(method, path, headers=bearer(token), json={})).status == 403, path

            request = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4}
            completion = await client.post("/v1/chat/completions", json=request, headers=bearer(token))
            assert completion.status == 200
            chat = await client.post("/api/chat", json={"message": "Say hello."}, headers=bearer(token))
            assert chat.status == 200
            ws = await client.ws_connect("/ws", headers=bearer(token))  # the web chat's own session name
            await ws.send_json({"type": "message", "text": "What did I tell you before?", "session": "web"})
            while (event := await ws.receive_json())["type"] not in ("done", "error"):
                pass
            assert event["type"] == "done"
            await ws.close()
        # The token's turn ran in a conversation of its own: the owner's saw nothing of it.
        owner = runtime.db.recent_messages(runtime.db.conversation("web", "web"), 10)
        assert [m.content for m in owner] == ["The door code is 4711."]

    asyncio.run(main())
    runtime.close()


def test_the_scope_table_names_real_routes_and_the_document_shows_it(app: web.Application) -> None:
    from appliance.channels.web.scopes import ROUTE_SCOPES

    routed = {(route.method, resource.canonical) for resource in app.router.resources() for route in resource}
    assert set(ROUTE_SCOPES) <= routed, set(ROUTE_SCOPES) - routed  # no row for a route that went away
    doc = openapi_document()
    assert doc["paths"]["/api/history"]["get"]["x-scope"] == "any"  # a chat token reads its own conversations
    assert doc["paths"]["/api/approvals/{id}/{decision}"]["post"]["x-scope"] == "devices"
    assert doc["paths"]["/api/cron/{id}/run"]["post"]["x-scope"] == "admin"
    assert doc["paths"]["/v1/chat/completions"]["post"]["x-scope"] == "chat"


def test_the_login_limit_for_all_addresses_together_trips(config: Config) -> None:
    """Many addresses, each under its own limit, together reach web.login_attempts_per_minute_total."""
    from appliance.llm.scripted import ScriptedModel

    config.web.login_attempts_per_minute = 2
    config.web.login_attempts_per_minute_total = 4
    runtime = Runtime.open(config, model=ScriptedModel())
    auth = Auth(runtime.db)
    auth.set_password(PASSWORD)

    async def attempt(url: str, source: str) -> tuple[int, str]:
        # A real client address each: all of 127.0.0.0/8 is this machine's.
        connector = aiohttp.TCPConnector(local_addr=(source, 0))
        async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            async with http.get(url) as page:
                csrf = re.search(r'name="csrf" value="([^"]+)"', await page.text())
            assert csrf
            async with http.post(url, data={"password": "wrong password", "csrf": csrf.group(1)}) as response:
                return response.status, await response.text()

    async def main() -> None:
        async with TestServer(build_app(WebState(runtime, auth))) as server:
            url = str(server.make_url("/login"))
            answers = [await attempt(url, f"127.0.0.{10 + i}") for i in range(5)]
            assert [status for status, _ in answers] == [401, 401, 401, 401, 429]
            assert "from all addresses together" in answers[-1][1]
            # Each address stayed under its own limit of 2: the limit that tripped is the total.
            assert (await attempt(url, "127.0.0.10"))[0] == 429

    asyncio.run(main())
    runtime.close()
