"""The README's skill and MCP examples, taken from its fenced blocks and run as a person runs them.

"Plugins, skills and MCP" shows SKILL.md files and a `tools.mcp` config: here each SKILL.md is written
where the README says (``<data_dir>/workspace/skills/<name>/SKILL.md``) and the skill the example
starts from is loaded with everything it requires; the MCP block is appended to a copy of the shipped
config and its server's tool is called through `picoagent tools run`. Change an example so it no longer
works, and this fails.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import yaml

from tests.helpers import config_file, picoagent

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Plugins, skills and MCP"


def section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index(SECTION)
    end = readme.index("\n## ", start + len(SECTION))
    return readme[start:end]


def fenced(kind: str) -> list[str]:
    """The section's fenced blocks of one kind (```markdown, ```yaml), dedented as a person copies them."""
    blocks = re.findall(rf"^( *)```{kind}\n(.*?)^\1```", section(), re.MULTILINE | re.DOTALL)
    return [textwrap.dedent("\n".join(ln.removeprefix(pad) for ln in body.splitlines())) for pad, body in blocks]


def test_the_readme_s_skills_load_with_what_they_require(tmp_path: Path) -> None:
    config, data = config_file(tmp_path / "etc"), tmp_path / "data"
    skills = fenced("markdown")
    assert skills, "the README shows no SKILL.md"
    names = []
    for text in skills:
        front = yaml.safe_load(text.split("---")[1])
        names.append(front["name"])
        folder = data / "workspace" / "skills" / front["name"]
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(text, encoding="utf-8")
    listed = picoagent("--config", config, "--data-dir", data, "skills", "list", cwd=tmp_path)
    assert listed.returncode == 0 and "problems:" not in listed.stdout, listed.stdout + listed.stderr
    for name in names:
        assert re.search(rf"^{re.escape(name)}$", listed.stdout, re.MULTILINE), listed.stdout
    first = names[0]  # the example the README explains: loaded with every skill it requires
    loaded = picoagent(
        "--config", config, "--data-dir", data, "tools", "run", "load_skill", "--args", json.dumps({"name": first}),
        cwd=tmp_path,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    result = json.loads(loaded.stdout)
    assert result["ok"] is True, result
    for text in skills:
        body = text.split("---", 2)[2].strip()
        assert body in result["result"], (body, result["result"])


def test_the_readme_s_mcp_server_runs_on_a_fresh_checkout(tmp_path: Path) -> None:
    """The block as written, in a config beside the checkout's: `command` paths starting ./ or ../ are
    relative to the config's folder, so `../examples/...` finds the example the checkout ships."""
    (block,) = [b for b in fenced("yaml") if "mcp:" in b]
    folder = tmp_path / "config"
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # the checkout's layout: config/ beside examples/
    # As the README says: the block's mcp: in place of the shipped `mcp: {}` under tools:
    mcp = block[block.index("  mcp:") :].rstrip("\n")
    config = config_file(folder, {"\n  mcp: {}\n": f"\n{mcp}\n"})
    servers = yaml.safe_load(block)["tools"]["mcp"]
    (name,) = servers
    listed = picoagent("--config", config, "--data-dir", tmp_path / "data", "tools", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    tools = re.findall(rf"^(mcp_{name}_\w+)", listed.stdout, re.MULTILINE)
    assert tools, listed.stdout + listed.stderr
    ran = picoagent(
        "--config", config, "--data-dir", tmp_path / "data", "tools", "run", f"mcp_{name}_now", "--args", "{}",
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    result = json.loads(ran.stdout)
    zone = servers[name].get("env", {}).get("TZ", "UTC")
    assert result["ok"] is True and zone in result["result"], result
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", result["result"]), result


def test_the_readme_s_plugin_logs_each_answered_message(tmp_path: Path) -> None:
    """The plugin as written, saved where the README says (``<data_dir>/plugins/my_plugin.py``: a walk found
    `pip install -e` refuses a single file), named in `tools.plugins`: a message answered by `picoagent chat -m`
    leaves its line in turns.log."""
    (block,) = fenced("python")
    folder = tmp_path / "data" / "plugins"
    folder.mkdir(parents=True)
    (folder / "my_plugin.py").write_text(block, encoding="utf-8")
    config = config_file(tmp_path / "etc", {"  plugins: []": "  plugins: [my_plugin]"})
    said = picoagent("--config", config, "--data-dir", tmp_path / "data", "chat", "-m", "thanks, bye", cwd=tmp_path)
    assert said.returncode == 0, said.stdout + said.stderr
    assert (folder / "turns.log").read_text(encoding="utf-8").splitlines() == ["intent: You're welcome. Bye for now."]
