"""The first run through a real aiohttp server on a copy of the shipped config: the one-time password leads to
/setup, the owner's own password replaces it (and this browser keeps a session), a cloud key is checked by one
real request to the fake provider before it is saved, the model catalog; `picoagent passwd --initial`."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.state import Settings, WebState
from appliance.config import load_config
from appliance.config.load import read_secrets
from appliance.llm.scripted import ScriptedModel
from appliance.runtime import Runtime
from tests.fakes.cloud_api import FakeCloud
from tests.test_web_settings import copy_of_shipped

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    opened = Runtime.open(copy_of_shipped(tmp_path), model=ScriptedModel())
    yield opened
    opened.close()


async def sign_in(client: TestClient[Any, Any], password: str) -> Any:
    """The login form as a browser posts it; the final answer after redirects."""
    page = await client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', await page.text())
    assert csrf
    return await client.post("/login", data={"password": password, "csrf": csrf.group(1), "next": "/"})


def first_run_site(runtime: Runtime) -> tuple[WebState, str]:
    auth = Auth(runtime.db)
    first = auth.set_initial_password()
    return WebState(runtime, auth, settings=Settings()), first


def test_the_one_time_password_leads_to_the_setup_and_the_owners_own_replaces_it(runtime: Runtime) -> None:
    state, first = first_run_site(runtime)

    async def main() -> None:
        async with TestClient(TestServer(build_app(state))) as client:
            login = await client.get("/login")
            assert "First start: sign in with the one-time password" in await login.text()
            landed = await sign_in(client, first)
            assert landed.status == 200 and landed.url.path == "/setup"
            assert (await client.get("/", allow_redirects=False)).headers["Location"] == "/setup"
            csrf = (await (await client.get("/api/session")).json())["csrf"]
            short = await client.post("/api/setup/password", json={"password": "short"}, headers={"X-CSRF-Token": csrf})
            assert short.status == 400 and (await short.json())["key"] == "password"
            done = await client.post(
                "/api/setup/password", json={"password": "my own password"}, headers={"X-CSRF-Token": csrf}
            )
            said = await done.json()
            assert done.status == 200 and said["password"] == "set"
            # Every other session ended with the old password; this browser's new one works, with its new token.
            assert (await client.get("/api/session")).status == 200
            assert (await (await client.get("/api/session")).json())["csrf"] == said["csrf"]
            assert (await client.get("/", allow_redirects=False)).status == 200  # the status page, no more setup
            setup = await (await client.get("/api/setup")).json()
            assert setup["first_run"] is False
            assert state.auth.check_password("my own password") and not state.auth.check_password(first)
            assert not state.auth.initial_password_path.exists()

    asyncio.run(main())


def test_a_cloud_key_is_checked_by_one_real_request_before_it_is_saved(runtime: Runtime) -> None:
    state, _ = first_run_site(runtime)
    token = state.auth.add_token("owner", scope="admin")
    owner = {"Authorization": f"Bearer {token}"}
    path = runtime.config.source
    assert path is not None

    async def main() -> None:
        cloud = FakeCloud("openai")
        await cloud.start()
        try:
            async with TestClient(TestServer(build_app(state))) as client:
                version = (await (await client.get("/api/setup", headers=owner)).json())["version"]
                body = {"version": version, "type": "openai", "api_base": cloud.api_base, "model": cloud.model}
                before = path.read_text()
                refused = await client.post("/api/setup/cloud", json=body | {"api_key": "sk-wrong"}, headers=owner)
                said = await refused.json()
                assert refused.status == 400 and said["key"] == "providers.openai.api_key", said
                assert "HTTP 401" in said["error"] and "sk-wrong" not in said["error"]
                gone = await client.post(
                    "/api/setup/cloud",
                    json=body | {"api_key": cloud.api_key, "api_base": "http://127.0.0.1:9/v1"},
                    headers=owner,
                )
                assert gone.status == 400 and (await gone.json())["key"] == "providers.openai.api_base"
                assert path.read_text() == before  # nothing saved by a failed check
                saved = await client.post("/api/setup/cloud", json=body | {"api_key": cloud.api_key}, headers=owner)
                assert saved.status == 200, await saved.text()
                assert len(cloud.requests) == 2  # the refused key's one request, then the good one's
        finally:
            await cloud.close()

    asyncio.run(main())
    config = load_config(path, data_dir=runtime.config.data_dir)
    assert config.routing.mode == "edge_first" and config.routing.cloud_provider == "openai"
    assert config.providers["openai"].api_key == "sk-test-secret-key-123"
    assert "sk-test-secret-key-123" not in path.read_text()
    assert read_secrets(path.parent / "secrets.env") == {"PROVIDERS_OPENAI_API_KEY": "sk-test-secret-key-123"}


def test_the_model_catalog_says_what_fits_this_board(runtime: Runtime) -> None:
    state, _ = first_run_site(runtime)
    token = state.auth.add_token("owner", scope="admin")

    async def main() -> None:
        async with TestClient(TestServer(build_app(state))) as client:
            doc = await (await client.get("/api/models", headers={"Authorization": f"Bearer {token}"})).json()
            chat = {m["name"]: m for m in doc["models"] if m["kind"] == "chat"}
            assert chat["smollm2-135m"]["fits"] is True and chat["smollm2-135m"]["installed"] is True
            assert chat["smollm2-135m"]["pi5_tps"] > 0
            assert doc["board"]["mem_bytes"] > 0 and doc["auto"] in chat
            assert doc["measured_tps"] is None and chat["smollm2-135m"]["here_tps"] is None  # nothing answered yet
            state.monitor.decode_tps.append((0.0, 40.0))  # the running model decoded at 40 tokens/s
            doc = await (await client.get("/api/models", headers={"Authorization": f"Bearer {token}"})).json()
            chat = {m["name"]: m for m in doc["models"] if m["kind"] == "chat"}
            assert chat["smollm2-135m"]["here_tps"] == 40.0
            bigger = chat["qwen2.5-1.5b"]  # a file about ten times the size: about a tenth of the speed here
            assert bigger["here_tps"] == round(40.0 * chat["smollm2-135m"]["size_bytes"] / bigger["size_bytes"], 1)

    asyncio.run(main())


def test_passwd_initial_makes_a_setup_code_the_one_time_password(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "appliance", "--data-dir", str(tmp_path / "data")]
    said = subprocess.run(
        [*cli, "passwd", "--initial"], input="only-mine-42\n", text=True, capture_output=True, cwd=ROOT, check=True
    )
    assert said.stdout.strip() == "setup code set: sign in with it, and the web page's setup follows"
    shown = subprocess.run([*cli, "passwd", "--show-initial"], text=True, capture_output=True, cwd=ROOT, check=True)
    assert "only-mine-42" in shown.stdout
    short = subprocess.run([*cli, "passwd", "--initial"], input="short\n", text=True, capture_output=True, cwd=ROOT)
    assert short.returncode == 2 and "at least 8 characters" in short.stderr
