"""Skills: SKILL.md files in the workspace, a catalog in the prompt, bodies loaded on demand, SIGHUP reload."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

import pytest

from appliance.agent import skills
from appliance.agent.context import Workspace, system_prompt
from appliance.agent.skills import SkillCatalog
from appliance.cli.doctor import _check_skills
from appliance.daemon import Daemon
from appliance.errors import ToolError
from appliance.tools import builtin
from appliance.tools.registry import ToolRegistry
from tests.helpers import config_file, picoagent, started


def write_skill(root: Path, name: str, description: str, body: str, requires: list[str] | None = None) -> Path:
    folder = root / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    front = f"---\nname: {name}\ndescription: {description}\n"
    if requires is not None:
        front += f"requires: {json.dumps(requires)}\n"
    path = folder / "SKILL.md"
    path.write_text(front + "---\n" + body + "\n")
    return path


def test_a_skill_is_parsed_from_its_front_matter_and_body(tmp_path: Path) -> None:
    path = tmp_path / "SKILL.md"
    text = (
        "---\nname: water-plants\ndescription: >\n  Water the plants\n  from the soil sensor.\n"
        "requires: [read-soil]\nlicense: MIT\n---\n\nRead the soil first.\nThen the pump.\n"
    )
    skill = skills.parse_skill(text, "water-plants", path)
    assert skill.name == "water-plants"
    assert skill.description == "Water the plants from the soil sensor."  # one line, whatever the YAML
    assert skill.requires == ("read-soil",)
    assert skill.body == "Read the soil first.\nThen the pump."


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Just instructions, no front matter.\n", "no front matter"),
        ("---\nname: a: b\n---\nbody\n", "the front matter is not valid YAML (line 2)"),
        ("---\n- a list\n---\nbody\n", "the front matter must be a mapping"),
        ("---\ndescription: d\n---\nbody\n", "name: expected lowercase letters"),
        ("---\nname: Bad Name\ndescription: d\n---\nbody\n", "name: expected lowercase letters"),
        ("---\nname: other\ndescription: d\n---\nbody\n", "name: 'other' differs from its folder 'broken'"),
        ("---\nname: broken\n---\nbody\n", "description: missing"),
        ("---\nname: broken\ndescription: d\nrequires: {a: 1}\n---\nbody\n", "requires: expected a list"),
        ("---\nname: broken\ndescription: d\n---\n\n", "no instructions after the front matter"),
        ("---\nname: broken\ndescription: d\n", "no front matter"),
    ],
)
def test_a_bad_skill_file_is_skipped_logged_and_listed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, problem: str
) -> None:
    write_skill(tmp_path, "good", "A good one.", "Do it well.")
    (tmp_path / "skills" / "broken").mkdir()
    (tmp_path / "skills" / "broken" / "SKILL.md").write_text(text)
    with caplog.at_level(logging.WARNING, logger="appliance.agent.skills"):
        catalog = SkillCatalog.load(tmp_path / "skills")
    assert list(catalog.skills) == ["good"]
    assert len(catalog.problems) == 1
    assert catalog.problems[0].startswith(f"skills/broken/SKILL.md: {problem}"), catalog.problems
    assert "skills/broken/SKILL.md" in caplog.text


def test_folders_without_a_skill_file_and_links_out_of_the_folder_are_problems(tmp_path: Path) -> None:
    (tmp_path / "skills" / "empty").mkdir(parents=True)
    (tmp_path / "skills" / "README.md").write_text("not a skill: a file, not a folder")
    outside = write_skill(tmp_path / "elsewhere", "linked", "Outside.", "Secret instructions.")
    (tmp_path / "skills" / "linked").symlink_to(outside.parent)
    catalog = SkillCatalog.load(tmp_path / "skills")
    assert len(catalog) == 0
    assert catalog.problems == (
        "skills/empty/SKILL.md: missing",
        "skills/linked/SKILL.md: is a link to a file outside the skills folder",
    )
    assert SkillCatalog.load(tmp_path / "nowhere").problems == ()  # no skills folder: nothing to say


def test_a_skill_comes_with_the_skills_it_requires_in_order(tmp_path: Path) -> None:
    write_skill(tmp_path, "water", "Water the plants.", "Open the valve.", ["soil", "pump"])
    write_skill(tmp_path, "soil", "Read the soil.", "Read soil.", ["sensors"])
    write_skill(tmp_path, "pump", "Run the pump.", "Start the pump.", ["sensors"])
    write_skill(tmp_path, "sensors", "About the sensors.", "Sensors are on SPI.")
    catalog = SkillCatalog.load(tmp_path / "skills")
    assert [s.name for s in catalog.chain("water")] == ["water", "soil", "sensors", "pump"]  # sensors once
    text = catalog.instructions("water")
    assert text.startswith("# Skill: water\n\nOpen the valve.")
    assert "# Skill: soil (required by water)\n\nRead soil." in text
    assert text.count("Sensors are on SPI.") == 1
    assert catalog.instructions("sensors") == "# Skill: sensors\n\nSensors are on SPI."


def test_a_cycle_of_requirements_loads_each_skill_once(tmp_path: Path) -> None:
    write_skill(tmp_path, "a", "A.", "Body A.", ["b"])
    write_skill(tmp_path, "b", "B.", "Body B.", ["c"])
    write_skill(tmp_path, "c", "C.", "Body C.", ["a", "c"])
    catalog = SkillCatalog.load(tmp_path / "skills")
    assert catalog.problems == ()
    assert [s.name for s in catalog.chain("b")] == ["b", "c", "a"]


def test_a_missing_requirement_is_a_clear_error_naming_it(tmp_path: Path) -> None:
    write_skill(tmp_path, "water", "Water the plants.", "Open the valve.", ["pump"])
    write_skill(tmp_path, "pump", "Run the pump.", "Start it.", ["relay-board"])
    catalog = SkillCatalog.load(tmp_path / "skills")
    assert catalog.problems == ("skills/pump/SKILL.md: requires relay-board, not installed",)
    with pytest.raises(ToolError) as caught:
        catalog.instructions("water")
    assert caught.value.message.startswith("skill 'pump' requires skill 'relay-board', which is not installed")
    with pytest.raises(ToolError, match="no skill named 'nope'; skills: pump, water"):
        catalog.instructions("nope")


def test_the_catalog_is_in_the_prompt_and_load_skill_reads_the_body(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "workspace")
    workspace.ensure("Nimbus")
    write_skill(workspace.root, "water", "Water the plants.", "Open the valve for 10 s.", ["soil"])
    write_skill(workspace.root, "soil", "Read the soil.", "Read mcp3008 channel 0.")
    registry = builtin.default_registry()
    skills.sync_tool(registry, workspace)
    prompt = system_prompt(workspace, registry)
    catalog = "Skills: instructions for particular tasks. Before doing one, call load_skill with its name.\n"
    assert catalog + "- soil: Read the soil.\n- water: Water the plants." in prompt
    assert prompt.index("Skills:") < prompt.index("You can use tools")  # the same prefix with or without tools
    assert "Open the valve" not in prompt  # bodies are loaded on demand
    assert "- load_skill(name: string)" in prompt
    assert system_prompt(workspace, None).startswith(prompt[: prompt.index("You can use tools")].rstrip())

    loaded = asyncio.run(registry.execute("load_skill", {"name": "water"}))
    assert loaded.ok and "Open the valve for 10 s." in loaded.output and "Read mcp3008 channel 0." in loaded.output
    missing = asyncio.run(registry.execute("load_skill", {"name": "fly"}))
    assert not missing.ok and missing.error == "no skill named 'fly'; skills: soil, water"
    assert registry.get("load_skill").read_only


def test_no_skills_no_tool_and_no_catalog(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "workspace")
    registry = ToolRegistry()
    skills.sync_tool(registry, workspace)
    assert "load_skill" not in registry.tools
    assert "Skills:" not in system_prompt(workspace, registry)


def test_the_catalog_stays_the_same_until_a_reload_picks_up_the_new_set(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "workspace")
    write_skill(workspace.root, "water", "Water the plants.", "Open the valve.")
    registry = ToolRegistry()
    skills.sync_tool(registry, workspace)
    before = system_prompt(workspace, registry)
    write_skill(workspace.root, "lights", "Evening lights.", "Porch light on at dusk.")
    assert system_prompt(workspace, registry) == before  # a warm KV-cache prefix: unchanged between turns
    workspace.reload_skills()
    assert "- lights: Evening lights." in system_prompt(workspace, registry)
    assert asyncio.run(registry.execute("load_skill", {"name": "lights"})).ok

    for folder in ("water", "lights"):
        (workspace.root / "skills" / folder / "SKILL.md").unlink()
    workspace.reload_skills()
    skills.sync_tool(registry, workspace)
    assert "load_skill" not in registry.tools


def test_sighup_reloads_the_skills_of_the_running_daemon(tmp_path: Path) -> None:
    """A real daemon in this process (its SIGHUP handler called as the signal would)."""
    from appliance.config import load_config

    data = tmp_path / "data"
    config = load_config(config_file(tmp_path, {"preload: true": "preload: false"}), data_dir=data)
    root_level = logging.getLogger().level

    async def main() -> None:
        daemon = Daemon(config, host="127.0.0.1", port=0, data_dir_override=str(data))
        served = asyncio.ensure_future(daemon.run())
        await started(daemon, served)
        runtime = daemon.runtime
        assert "load_skill" not in runtime.tools.tools
        write_skill(runtime.workspace.root, "lights", "Evening lights.", "Porch light on at dusk.")
        daemon.reload()
        assert "- lights: Evening lights." in system_prompt(runtime.workspace, runtime.tools)
        assert "load_skill" in runtime.tools.tools
        daemon.stopping.set()
        assert await served == 0

    try:
        asyncio.run(main())
    finally:
        logging.getLogger().setLevel(root_level)


def test_doctor_and_skills_list_show_skills_and_problems(tmp_path: Path) -> None:
    data = tmp_path / "data"
    workspace = data / "workspace"
    write_skill(workspace, "water", "Water the plants.", "Open the valve.", ["soil"])
    write_skill(workspace, "soil", "Read the soil.", "Read it.")
    (workspace / "skills" / "broken").mkdir()
    (workspace / "skills" / "broken" / "SKILL.md").write_text("no front matter\n")

    [check] = list(_check_skills(data))
    assert check.status == "warn" and check.detail.startswith("2 skill(s); skills/broken/SKILL.md: no front matter")

    config = config_file(tmp_path / "conf")
    out = picoagent("--config", config, "--data-dir", data, "skills", "list", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "soil",
        "    Read the soil.",
        "    used 0 time(s), last never",
        "water",
        "    Water the plants.",
        "    requires: soil",
        "    used 0 time(s), last never",
        "problems:",
        "    skills/broken/SKILL.md: no front matter: the file must start with a '---' line, YAML, and another '---'",
    ]
    listed = json.loads(
        picoagent("--config", config, "--data-dir", data, "skills", "list", "--json", cwd=tmp_path).stdout
    )
    assert [s["name"] for s in listed["skills"]] == ["soil", "water"] and listed["skills"][1]["requires"] == ["soil"]
    assert len(listed["problems"]) == 1
    assert os.path.basename(listed["skills"][0]["path"]) == "SKILL.md"
