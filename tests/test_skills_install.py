"""Skills installed from a public repository: a fake API of GitHub's shape on 127.0.0.1 (tests/fakes/skill_repo.py)
serves real tarballs built here; the CLI, the install code and the web API fetch, show, refuse and install them."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from appliance.agent import skill_install
from appliance.agent.skill_install import SOURCE_FILE
from appliance.agent.skill_source import MAX_SKILL_FOLDER_BYTES
from appliance.agent.skill_uses import SkillUses
from appliance.channels.web.app import build_app
from appliance.channels.web.auth import Auth
from appliance.channels.web.openapi import openapi_document
from appliance.channels.web.state import WebState
from appliance.cli import main
from appliance.config import Config, load_config
from appliance.errors import Conflict, NotFound, PolicyError
from appliance.llm.scripted import ScriptedModel
from appliance.memory.db import Database
from appliance.runtime import Runtime
from tests.fakes.skill_repo import Entry, FakeRepo, FakeSkillHost
from tests.helpers import config_file, picoagent

SHIPPED_API = "skills_api: https://api.github.com"
PATH = "skills/water-plants"


def skill_md(name: str = "water-plants", body: str = "Read the soil first.\nWater for ten seconds.\n") -> str:
    return (
        f"---\nname: {name}\ndescription: How to water the plants from the soil sensor.\n"
        f"requires: [read-soil]\ntools: [read_device, set_device]\n---\n{body}"
    )


@pytest.fixture
def host() -> Iterator[FakeSkillHost]:
    with FakeSkillHost() as served:
        yield served


@pytest.fixture
def repo(host: FakeSkillHost) -> FakeRepo:
    made = host.repo("garden", "skills")
    made.commit({f"{PATH}/SKILL.md": skill_md(), f"{PATH}/notes.md": "pump on relay 2\n", "README.md": "skills\n"})
    return made


@pytest.fixture
def cli(tmp_path: Path, host: FakeSkillHost) -> list[str]:
    """The options of a `picoagent` run against the fake host: a copy of the shipped config, a data dir."""
    path = config_file(tmp_path / "etc", {SHIPPED_API: f"skills_api: {host.url}"})
    return ["--config", str(path), "--data-dir", str(tmp_path / "data")]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "data" / "workspace"


def every_path(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


class Terminal(io.StringIO):
    """What a person types at a terminal."""

    def isatty(self) -> bool:
        return True


def run(args: list[str], monkeypatch: pytest.MonkeyPatch, typed: str | None = None) -> int:
    """`picoagent ARGS` in this process; ``typed`` at a terminal, or (None) an input that is not one."""
    monkeypatch.setattr("sys.stdin", Terminal(typed) if typed is not None else io.StringIO(""))
    return main(args)


def test_install_shows_the_skill_and_what_it_declares_then_installs_on_yes(
    cli: list[str], repo: FakeRepo, workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    commit = repo.branches["main"]
    assert run(["skills", "install", f"garden/skills/{PATH}", *cli], monkeypatch, typed="y\n") == 0
    out = capsys.readouterr().out
    shown, done = out.split("install it?")
    assert f"skill water-plants from garden/skills/{PATH} at commit {commit}" in shown
    assert "requires:\n    - read-soil" in shown and "tools:\n    - read_device\n    - set_device" in shown
    assert "it requires skills not installed here: read-soil" in shown
    assert "Water for ten seconds." in shown and "notes.md (16 bytes)" in shown
    assert f"installed water-plants from garden/skills/{PATH} at {commit[:7]}" in done
    folder = workspace / "skills" / "water-plants"
    assert (folder / "SKILL.md").read_text() == skill_md()
    assert (folder / "notes.md").read_text() == "pump on relay 2\n"
    assert not (workspace / "skills" / "README.md").exists()  # only the PATH folder
    provenance = json.loads((folder / SOURCE_FILE).read_text())
    assert provenance["source"] == f"garden/skills/{PATH}" and provenance["commit"] == commit
    assert provenance["ref"] is None and provenance["installed_at"] > 0
    assert [p for p in (workspace / "skills").iterdir() if p.name.startswith(".")] == []  # no staging left

    assert run(["skills", "list", *cli], monkeypatch) == 0
    listed = capsys.readouterr().out
    assert f"from garden/skills/{PATH} at {commit[:7]}" in listed and "used 0 time(s), last never" in listed


def test_no_answer_or_no_terminal_installs_nothing(
    cli: list[str], repo: FakeRepo, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    assert run(["skills", "install", f"garden/skills/{PATH}", *cli], monkeypatch, typed="n\n") == 1
    assert "not installed" in capsys.readouterr().out
    assert run(["skills", "install", f"garden/skills/{PATH}", *cli], monkeypatch, typed="\n") == 1  # default: no
    before = every_path(workspace / "skills")

    # A real process whose input is a pipe: it shows the skill, then refuses, naming the commit to pin.
    out = picoagent("skills", "install", f"garden/skills/{PATH}", *cli, cwd=tmp_path, stdin="y\n")
    assert out.returncode == 2, out.stderr
    assert "Water for ten seconds." in out.stdout
    assert "nothing was installed: there is no terminal to ask" in out.stderr
    assert f"--ref {repo.branches['main']} --yes" in out.stderr
    assert every_path(workspace / "skills") == before and not (workspace / "skills" / "water-plants").exists()

    out = picoagent("skills", "install", f"garden/skills/{PATH}", *cli, "--yes", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (workspace / "skills" / "water-plants" / "SKILL.md").read_text() == skill_md()


MALICIOUS = {
    "a path with ..": (Entry(f"{PATH}/../../../../../etc/cron.d/evil", data=b"* * * * * root sh\n"),),
    "an absolute path": (Entry("/etc/cron.d/evil", data=b"* * * * * root sh\n", raw=True),),
    "a link": (Entry(f"{PATH}/notes.md", kind="symlink", target="/etc/shadow"),),
    "a hard link": (Entry(f"{PATH}/notes.md", kind="hardlink", target="etc/shadow"),),
    "a device": (Entry(f"{PATH}/tty", kind="chr"),),
    "too large a folder": (Entry(f"{PATH}/data.bin", data=b"x" * (MAX_SKILL_FOLDER_BYTES + 1)),),
}
REFUSALS = {
    "a path with ..": "holds a path with ..",
    "an absolute path": "holds an absolute path",
    "a link": "holds a link in the skill folder (notes.md -> /etc/shadow)",
    "a hard link": "holds a link in the skill folder",
    "a device": "holds a device or pipe in the skill folder (tty)",
    "too large a folder": "has a skill folder larger than 200 files or 2 MiB",
}


@pytest.mark.parametrize("kind", sorted(MALICIOUS))
def test_a_malicious_archive_is_refused_and_nothing_is_written(
    host: FakeSkillHost, workspace: Path, tmp_path: Path, kind: str
) -> None:
    bad = host.repo("mallory", "skills")
    commit = bad.commit({f"{PATH}/SKILL.md": skill_md()}, MALICIOUS[kind])
    (workspace / "skills").mkdir(parents=True)
    with pytest.raises(PolicyError, match="nothing was installed") as refused:
        skill_install.preview(workspace, host.url, f"mallory/skills/{PATH}")
    assert REFUSALS[kind] in refused.value.message
    with pytest.raises(PolicyError, match="nothing was installed"):  # asked to install that commit anyway
        skill_install.install(workspace, host.url, f"mallory/skills/{PATH}", commit)
    assert every_path(tmp_path) == ["data", "data/workspace", "data/workspace/skills"]


def test_an_archive_past_the_download_or_entry_caps_is_refused_unread(
    host: FakeSkillHost, repo: FakeRepo, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from appliance.agent import skill_source

    source = f"garden/skills/{PATH}"
    monkeypatch.setattr(skill_source, "MAX_ARCHIVE_BYTES", 100)  # the archive is some 400 bytes
    with pytest.raises(PolicyError, match=r"the archive of garden/skills at \w+: larger than 1 MiB; nothing"):
        skill_install.preview(workspace, host.url, source)
    monkeypatch.undo()
    monkeypatch.setattr(skill_source, "MAX_MEMBERS", 3)  # top, skills/, skills/water-plants/, ...: stops at 4
    with pytest.raises(PolicyError, match="holds more than 3 entries"):
        skill_install.preview(workspace, host.url, source)
    monkeypatch.undo()
    monkeypatch.setattr(skill_source, "MAX_UNPACKED_BYTES", 20)  # what the entries declare, read or skipped
    with pytest.raises(PolicyError, match="unpacks to more than 0 MiB"):
        skill_install.preview(workspace, host.url, source)
    assert not workspace.exists()


def test_a_skill_md_that_links_out_or_breaks_the_loaders_rules_is_refused(host: FakeSkillHost, workspace: Path) -> None:
    bad = host.repo("mallory", "skills")
    bad.commit({}, (Entry(f"{PATH}/SKILL.md", kind="symlink", target="../../../../../home/pi/.ssh/id_rsa"),))
    with pytest.raises(PolicyError, match=r"holds a link in the skill folder \(SKILL.md -> "):
        skill_install.preview(workspace, host.url, f"mallory/skills/{PATH}")
    # The loader's own checks (parse_skill): the name must be its folder's, the front matter there, the size.
    bad.commit({f"{PATH}/SKILL.md": skill_md(name="other-name")})
    with pytest.raises(PolicyError, match="name: 'other-name' differs from its folder 'water-plants'"):
        skill_install.preview(workspace, host.url, f"mallory/skills/{PATH}")
    bad.commit({f"{PATH}/SKILL.md": "Just do it.\n"})
    with pytest.raises(PolicyError, match="no front matter"):
        skill_install.preview(workspace, host.url, f"mallory/skills/{PATH}")
    bad.commit({f"{PATH}/SKILL.md": skill_md(body="x" * 70_000)})
    with pytest.raises(PolicyError, match="larger than 64 KiB"):
        skill_install.preview(workspace, host.url, f"mallory/skills/{PATH}")
    assert not workspace.exists()


def test_what_does_not_exist_is_said_plainly(host: FakeSkillHost, repo: FakeRepo, workspace: Path) -> None:
    with pytest.raises(NotFound, match=r"repository nobody/skills: not found at 127\.0\.0\.1"):
        skill_install.preview(workspace, host.url, "nobody/skills/x")
    with pytest.raises(NotFound, match="nope of garden/skills: not found"):
        skill_install.preview(workspace, host.url, f"garden/skills/{PATH}", ref="nope")
    with pytest.raises(NotFound, match=f"no folder skills/fly in garden/skills at {repo.branches['main'][:7]}"):
        skill_install.preview(workspace, host.url, "garden/skills/skills/fly")
    with pytest.raises(NotFound, match=r"no SKILL\.md in garden/skills/skills at"):
        skill_install.preview(workspace, host.url, "garden/skills/skills")  # a folder, but not a skill's


def test_a_name_taken_by_another_skill_is_refused_unless_it_is_the_same_source(
    host: FakeSkillHost, repo: FakeRepo, workspace: Path
) -> None:
    mine = workspace / "skills" / "water-plants"
    mine.mkdir(parents=True)
    (mine / "SKILL.md").write_text(skill_md(body="My own way.\n"))
    with pytest.raises(Conflict, match=r"installed already \(written here, not installed from a repository\)"):
        skill_install.preview(workspace, host.url, f"garden/skills/{PATH}")
    assert (mine / "SKILL.md").read_text() == skill_md(body="My own way.\n")
    (mine / "SKILL.md").unlink()
    mine.rmdir()

    skill_install.install(workspace, host.url, f"garden/skills/{PATH}", repo.branches["main"])
    fork = host.repo("someone", "fork")
    fork.commit({f"{PATH}/SKILL.md": skill_md(body="Flood it.\n")})
    with pytest.raises(Conflict, match=rf"installed already \(installed from garden/skills/{PATH}\)"):
        skill_install.install(workspace, host.url, f"someone/fork/{PATH}", fork.branches["main"])
    again = skill_install.preview(workspace, host.url, f"garden/skills/{PATH}")  # the same source: an update
    assert again.installed is not None and again.diff == ""


def test_update_shows_the_diff_asks_and_installs_the_new_commit(
    cli: list[str], repo: FakeRepo, workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    first = repo.branches["main"]
    assert run(["skills", "install", f"garden/skills/{PATH}", "--yes", *cli], monkeypatch) == 0
    assert run(["skills", "update", *cli], monkeypatch) == 0
    assert f"water-plants: up to date at {first[:7]}" in capsys.readouterr().out

    second = repo.commit({f"{PATH}/SKILL.md": skill_md(body="Read the soil first.\nWater for five seconds.\n")})
    assert run(["skills", "update", "water-plants", *cli], monkeypatch, typed="n\n") == 1
    out = capsys.readouterr().out
    assert f"water-plants: {first[:7]} -> {second[:7]}" in out
    assert "-Water for ten seconds.\n+Water for five seconds." in out and "water-plants not updated" in out
    folder = workspace / "skills" / "water-plants"
    assert json.loads((folder / SOURCE_FILE).read_text())["commit"] == first

    assert run(["skills", "update", "water-plants", *cli], monkeypatch) == 2  # no terminal, no --yes: refused
    assert json.loads((folder / SOURCE_FILE).read_text())["commit"] == first

    assert run(["skills", "update", "water-plants", *cli], monkeypatch, typed="y\n") == 0
    assert f"updated water-plants to {second[:7]}" in capsys.readouterr().out
    assert json.loads((folder / SOURCE_FILE).read_text())["commit"] == second
    assert "Water for five seconds." in (folder / "SKILL.md").read_text()
    assert not (folder / "notes.md").exists()  # the new commit's folder, not a mix of both
    assert run(["skills", "update", "nope", *cli], monkeypatch) == 1


def test_remove_deletes_an_installed_skill_and_leaves_one_written_here(
    cli: list[str], repo: FakeRepo, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    assert run(["skills", "install", f"garden/skills/{PATH}", "--yes", *cli], monkeypatch) == 0
    mine = workspace / "skills" / "read-soil"
    mine.mkdir()
    (mine / "SKILL.md").write_text("---\nname: read-soil\ndescription: Read the soil.\n---\nRead it.\n")
    db = Database(tmp_path / "data" / "picoagent.db")
    SkillUses(db).record(["water-plants", "read-soil"])
    db.close()

    assert run(["skills", "remove", "read-soil", *cli], monkeypatch) == 1
    assert "was written here, not installed from a repository; it was left" in capsys.readouterr().err
    assert run(["skills", "remove", "water-plants", *cli], monkeypatch) == 0
    assert f"removed water-plants (installed from garden/skills/{PATH})" in capsys.readouterr().out
    assert not (workspace / "skills" / "water-plants").exists() and (mine / "SKILL.md").exists()
    db = Database(tmp_path / "data" / "picoagent.db")
    assert set(SkillUses(db).all()) == {"read-soil"}
    db.close()
    assert run(["skills", "remove", "water-plants", *cli], monkeypatch) == 1
    assert "no installed skill named 'water-plants'" in capsys.readouterr().err


def test_each_use_through_the_real_load_skill_tool_is_counted(
    cli: list[str], repo: FakeRepo, workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    assert run(["skills", "install", f"garden/skills/{PATH}", "--yes", *cli], monkeypatch) == 0
    soil = workspace / "skills" / "read-soil"
    soil.mkdir()
    (soil / "SKILL.md").write_text("---\nname: read-soil\ndescription: Read the soil.\n---\nRead sensor soil.\n")
    capsys.readouterr()
    for _ in range(2):  # `picoagent tools run` builds the tools as the CLI does, load_skill among them
        assert run(["tools", "run", "load_skill", "--args", '{"name": "water-plants"}', *cli], monkeypatch) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["ok"] and "Water for ten seconds." in result["result"] and "Read sensor soil." in result["result"]
    assert run(["tools", "run", "load_skill", "--args", '{"name": "fly"}', *cli], monkeypatch) == 1  # not served
    capsys.readouterr()
    assert run(["skills", "list", "--json", *cli], monkeypatch) == 0
    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)["skills"]}
    assert listed["water-plants"]["uses"] == 2 and listed["read-soil"]["uses"] == 2  # required: served with it
    assert listed["water-plants"]["last_used"] > listed["water-plants"]["installed_at"]
    assert listed["water-plants"]["commit"] == repo.branches["main"] and listed["read-soil"]["source"] is None
    assert run(["skills", "list", *cli], monkeypatch) == 0
    assert "used 2 time(s), last 20" in capsys.readouterr().out


@pytest.fixture
def runtime(tmp_path: Path, host: FakeSkillHost) -> Iterator[Runtime]:
    path = config_file(tmp_path / "etc", {SHIPPED_API: f"skills_api: {host.url}"})
    config: Config = load_config(path, data_dir=tmp_path / "data")
    opened = Runtime.open(config, model=ScriptedModel())
    yield opened
    opened.close()


def test_the_api_previews_without_writing_then_installs_exactly_the_commit_confirmed(
    runtime: Runtime, host: FakeSkillHost, repo: FakeRepo
) -> None:
    auth = Auth(runtime.db)
    admin = {"Authorization": f"Bearer {auth.add_token('owner', scope='admin')}"}
    reader = {"Authorization": f"Bearer {auth.add_token('dashboard', scope='read')}"}
    skills = runtime.workspace.root / "skills"
    source = f"garden/skills/{PATH}"

    async def main() -> None:
        async with TestClient(TestServer(build_app(WebState(runtime, auth)))) as client:
            answer = await client.post("/api/skills/install", json={"source": source}, headers=admin)
            preview = await answer.json()
            assert answer.status == 200, preview
            assert preview["installed"] is False and preview["commit"] == repo.branches["main"]
            assert preview["skill_md"] == skill_md() and preview["missing"] == ["read-soil"]
            assert preview["front_matter"]["tools"] == ["read_device", "set_device"]
            assert preview["files"] == {"SKILL.md": len(skill_md()), "notes.md": 16}
            assert every_path(skills) == []  # a preview writes nothing

            # The branch moves on after the person read the preview: the confirmed commit is still the one seen.
            repo.commit({f"{PATH}/SKILL.md": skill_md(body="Flood everything.\n")})
            confirm = {"source": source, "commit": preview["commit"], "confirm": True}
            refused = await client.post("/api/skills/install", json=confirm, headers=reader)
            assert refused.status == 403 and every_path(skills) == []
            missing = await client.post("/api/skills/install", json={"source": source, "confirm": True}, headers=admin)
            assert missing.status == 400 and "the sha the preview named" in (await missing.json())["error"]
            soil = skills / "read-soil"  # the skill it requires, written here
            soil.mkdir(parents=True)
            (soil / "SKILL.md").write_text("---\nname: read-soil\ndescription: Read the soil.\n---\nRead it.\n")
            answer = await client.post("/api/skills/install", json=confirm, headers=admin)
            done = await answer.json()
            assert answer.status == 200, done
            assert done["installed"] is True and done["name"] == "water-plants" and done["commit"] == preview["commit"]
            assert (skills / "water-plants" / "SKILL.md").read_text() == skill_md()
            assert done["problems"] == []

            # The running daemon reads it at once: the catalog, and load_skill, counted.
            assert "water-plants" in runtime.workspace.skills.skills
            result = await runtime.tools.execute("load_skill", {"name": "water-plants"})
            assert result.ok and "Water for ten seconds." in result.output
            listed = await client.get("/api/skills", headers=reader)
            row = {r["name"]: r for r in (await listed.json())["skills"]}["water-plants"]
            assert listed.status == 200
            assert row["source"] == source and row["commit"] == preview["commit"]
            assert row["uses"] == 1 and row["last_used"] is not None and row["changed_locally"] is False

            update = await (await client.post("/api/skills/install", json={"source": source}, headers=admin)).json()
            assert update["replaces"]["commit"] == preview["commit"] and "+Flood everything." in update["diff"]

            assert (await client.delete("/api/skills/water-plants", headers=reader)).status == 403
            answer = await client.delete("/api/skills/water-plants", headers=admin)
            assert answer.status == 200 and (await answer.json())["removed"] == "water-plants"
            assert every_path(skills) == ["read-soil", "read-soil/SKILL.md"]
            assert list(runtime.workspace.skills.skills) == ["read-soil"]  # the daemon's catalog too
            failed = await runtime.tools.execute("load_skill", {"name": "water-plants"})
            assert not failed.ok and "no skill named 'water-plants'" in (failed.error or "")
            gone = await client.delete("/api/skills/water-plants", headers=admin)
            assert gone.status == 404

    asyncio.run(main())


def test_the_api_refuses_a_malicious_archive_with_its_reason(runtime: Runtime, host: FakeSkillHost) -> None:
    auth = Auth(runtime.db)
    admin = {"Authorization": f"Bearer {auth.add_token('owner', scope='admin')}"}
    bad = host.repo("mallory", "skills")
    commit = bad.commit({f"{PATH}/SKILL.md": skill_md()}, MALICIOUS["a link"])

    async def main() -> None:
        async with TestClient(TestServer(build_app(WebState(runtime, auth)))) as client:
            for body in (
                {"source": f"mallory/skills/{PATH}"},
                {"source": f"mallory/skills/{PATH}", "commit": commit, "confirm": True},
            ):
                answer = await client.post("/api/skills/install", json=body, headers=admin)
                error = await answer.json()
                assert answer.status == 403 and REFUSALS["a link"] in error["error"], error
                assert "repository you trust" in error["fix"]
        assert every_path(runtime.workspace.root / "skills") == []

    asyncio.run(main())


def test_the_openapi_document_describes_the_skills_routes() -> None:
    paths = openapi_document()["paths"]
    assert paths["/api/skills"]["get"]["x-scope"] == "read"
    install = paths["/api/skills/install"]["post"]
    assert install["x-scope"] == "admin" and {"source", "ref", "commit", "confirm"} <= set(
        install["requestBody"]["content"]["application/json"]["schema"]["properties"]
    )
    assert paths["/api/skills/{name}"]["delete"]["x-scope"] == "admin"


@pytest.fixture
def daemon_site(runtime: Runtime) -> Iterator[Runtime]:
    """The daemon's web site on 127.0.0.1, on a thread of its own, with daemon.json and cli.token written as
    `serve` writes them: the CLI finds it and asks it."""
    from appliance.channels.web.server import WebServer

    root = runtime.db.path.parent
    server = WebServer(runtime.config, WebState(runtime, Auth(runtime.db)), root, "127.0.0.1", 0)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(20)
    yield runtime
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(20)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def test_while_the_daemon_runs_the_cli_goes_through_it_and_it_reads_its_skills_at_once(
    daemon_site: Runtime, repo: FakeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    cli = ["--config", str(tmp_path / "etc" / "picoagent.yaml"), "--data-dir", str(tmp_path / "data")]
    assert run(["skills", "install", f"garden/skills/{PATH}", *cli], monkeypatch, typed="y\n") == 0
    out = capsys.readouterr().out
    assert "Water for ten seconds." in out and "installed water-plants" in out and "no daemon is running" not in out
    assert "water-plants" in daemon_site.workspace.skills.skills  # the daemon's own catalog: it did the install

    second = repo.commit({f"{PATH}/SKILL.md": skill_md(body="Water for five seconds.\n")})
    assert run(["skills", "update", "--yes", *cli], monkeypatch) == 0
    assert f"updated water-plants to {second[:7]}" in capsys.readouterr().out
    assert "Water for five seconds." in daemon_site.workspace.skills.skills["water-plants"].body

    assert run(["skills", "remove", "water-plants", *cli], monkeypatch) == 0
    assert "removed water-plants" in capsys.readouterr().out
    assert "water-plants" not in daemon_site.workspace.skills.skills
