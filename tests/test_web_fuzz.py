"""Property-based fuzzing of the JSON API, driven by its own OpenAPI document: no 5xx, no auth bypass.

Bodies are drawn from each operation's schema (right types, wrong types, missing and extra fields,
arbitrary JSON, bytes that are not JSON) and sent with every kind of credential: none, a wrong token,
a good token. The real model answers the requests that are valid, kept to a few tokens.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.openapi import openapi_document
from appliance.channels.web.state import WebState
from appliance.config import Config
from appliance.llm.local import LocalModel
from appliance.runtime import Runtime
from tests.fakes.skill_repo import FakeSkillHost

DOC = openapi_document()
SEEN: Counter[tuple[str, int]] = Counter()
OPERATIONS = [
    (path, method.upper(), op)
    for path, item in DOC["paths"].items()
    for method, op in item.items()
    if path.startswith(("/api/", "/v1/"))
]

json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that mostly fit the schema (small, so the model stays quick), sometimes not at all."""
    kind = schema.get("type")
    if "enum" in schema:
        fitting: st.SearchStrategy[Any] = st.sampled_from(schema["enum"])
    elif kind == "string":
        fitting = st.text(min_size=0, max_size=min(int(schema.get("maxLength", 60)), 60))
    elif kind == "integer":
        low = int(schema.get("minimum", -5))
        fitting = st.integers(low - 2, low + 6)
    elif kind == "number":
        fitting = st.floats(-1, 3, allow_nan=False)
    elif kind == "boolean":
        fitting = st.booleans()
    elif kind == "array":
        fitting = st.lists(from_schema(schema.get("items", {})), max_size=3)
    elif kind == "object":
        props = schema.get("properties", {})
        fitting = st.fixed_dictionaries(
            {k: from_schema(v) for k, v in props.items() if k in schema.get("required", [])},
            optional={k: from_schema(v) for k, v in props.items() if k not in schema.get("required", [])},
        )
    else:
        fitting = json_values
    return st.one_of(fitting, fitting, fitting, json_values)


def body_schema(op: dict[str, Any]) -> dict[str, Any] | None:
    content = op.get("requestBody", {}).get("content", {}).get("application/json")
    return content["schema"] if content else None


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, str | bytes | None, dict[str, str], str]:
    path, method, op = draw(st.sampled_from(OPERATIONS))
    path = path.replace("{name}", draw(st.sampled_from(["fan", "living_room", "garage", "x" * 70, "%2e%2e"])))
    path = path.replace("{id}", draw(st.sampled_from(["a-00000000", "nope", "%2e%2e"])))
    path = path.replace("{decision}", draw(st.sampled_from(["approve", "deny", "maybe"])))
    query = ""
    for param in op.get("parameters", []):
        if param["in"] == "query" and draw(st.booleans()):
            value = draw(st.one_of(st.text(max_size=20), st.integers(-3, 600).map(str)))
            query += ("&" if query else "?") + f"{param['name']}={value}"
    schema = body_schema(op)
    body: str | bytes | None = None
    if method == "POST":
        choice = draw(st.sampled_from(["schema", "schema", "schema", "json", "bytes", "nothing"]))
        if choice == "schema" and schema:
            body = json.dumps(draw(from_schema(schema)))
        elif choice == "json":
            body = json.dumps(draw(json_values))
        elif choice == "bytes":
            body = draw(st.binary(max_size=64))
    credential = draw(st.sampled_from(["good", "good", "none", "wrong"]))
    return path + query, method, body, {}, credential


@pytest.fixture(scope="module")
def fuzz_target(tmp_path_factory: pytest.TempPathFactory, local_model: LocalModel) -> Iterator[tuple[Any, str]]:
    """One real server for the whole module, on its own event loop thread."""
    from appliance.config import CHECKOUT_CONFIG, load_config

    config: Config = load_config(CHECKOUT_CONFIG, data_dir=tmp_path_factory.mktemp("fuzz"))
    config.agent.max_reply_tokens = 4
    config.agent.max_rounds = 2
    skill_host = FakeSkillHost().__enter__()  # no repositories: a fuzzed skill source is not found, offline
    config.tools.skills_api = skill_host.url
    runtime = Runtime.open(config, model=local_model)
    auth = Auth(runtime.db)
    auth.set_password("fuzzing password")
    token = auth.add_token("fuzz", scope="admin")  # every operation, past the scope check
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> TestClient[Any, Any]:
        client: TestClient[Any, Any] = TestClient(TestServer(build_app(WebState(runtime, auth))))
        await client.start_server()
        return client

    client = asyncio.run_coroutine_threadsafe(start(), loop).result()
    yield (client, loop), token
    # The fuzzing reached past validation: real answers came back from both chat endpoints.
    assert SEEN[("/api/chat", 200)] > 0 and SEEN[("/v1/chat/completions", 200)] > 0, SEEN
    assert SEEN[("/api/chat", 400)] > 0 and SEEN[("/v1/chat/completions", 400)] > 0, SEEN
    asyncio.run_coroutine_threadsafe(client.close(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    runtime.close()
    skill_host.__exit__()


# derandomize: the same examples on every run, so CI is repeatable; change the code and they change too.
@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=requests())
@example(case=("/api/chat", "POST", '{"message": "Hi", "session": "x"}', {}, "good"))
@example(case=("/v1/chat/completions", "POST", '{"messages": [{"role": "user", "content": "Hi"}]}', {}, "good"))
@example(case=("/api/chat", "POST", '{"message": "Hi"}', {}, "wrong"))
# A bad body to each chat endpoint, always: the drawn cases move with every route the app gains.
@example(case=("/api/chat", "POST", '{"message": 7}', {}, "good"))
@example(case=("/v1/chat/completions", "POST", '{"messages": "Hi"}', {}, "good"))
def test_api_never_fails_with_5xx_nor_lets_anyone_in(
    fuzz_target: tuple[tuple[TestClient[Any, Any], asyncio.AbstractEventLoop], str],
    case: tuple[str, str, str | bytes | None, dict[str, str], str],
) -> None:
    (client, loop), token = fuzz_target
    path, method, body, headers, credential = case
    if credential == "good":
        headers = {"Authorization": f"Bearer {token}"}
    elif credential == "wrong":
        headers = {"Authorization": "Bearer pat_" + "x" * 43}

    async def send() -> tuple[int, str]:
        response = await client.request(
            method, path, data=body, headers={**headers, "Content-Type": "application/json"}, allow_redirects=False
        )
        return response.status, await response.text()

    status, text = asyncio.run_coroutine_threadsafe(send(), loop).result(timeout=60)
    SEEN[(path.split("?")[0], status)] += 1
    assert status < 500, (method, path, body, status, text)
    if credential != "good":
        assert status == 401, (method, path, credential, status, text)
    if status >= 400:
        assert "Traceback" not in text
        json.loads(text)  # errors are JSON
