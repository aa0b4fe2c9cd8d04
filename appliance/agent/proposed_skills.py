"""Skills proposed from tasks: written to ``skills/proposed/NAME/SKILL.md``, used only once a person accepts.

A procedure that worked (two or more done tasks whose action steps called the same tools in the same
order, or a task the reflection called reusable) becomes a proposal in the skill format of
:mod:`appliance.agent.skills`. The skills loader never reads ``skills/proposed/``, so a proposal does
nothing until ``picoagent skills accept NAME`` validates it with that loader's parser and moves it into
the live skills folder (the daemon reads it at its next SIGHUP). ``skills reject NAME`` deletes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from appliance.agent.skills import PROPOSED_DIR, SKILL_FILE, SKILLS_DIR, Skill, SkillFileError, parse_skill
from appliance.errors import Conflict, NotFound, UsageError

MAX_NAME_WORDS = 5
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Proposal:
    """A proposed skill as found in skills/proposed (``skill`` None with ``problem`` when unusable)."""

    name: str
    path: Path
    skill: Skill | None
    problem: str = ""


def skill_name(text: str) -> str:
    """A skill name from a goal or a suggested name: lowercase words joined by - ("water-the-plants")."""
    words = _WORD.findall(text.lower())[:MAX_NAME_WORDS]
    return "-".join(words)[:64].strip("-") or "procedure"


def proposed_root(workspace: Path) -> Path:
    """workspace/skills/proposed."""
    return workspace / SKILLS_DIR / PROPOSED_DIR


def propose(workspace: Path, name: str, description: str, body: str) -> Path | None:
    """Write a proposal (validated as a skill); None when that name is taken, live or proposed already."""
    name = skill_name(name)
    live = workspace / SKILLS_DIR / name
    folder = proposed_root(workspace) / name
    if live.exists() or folder.exists():
        return None
    description = " ".join(description.split())
    text = f"---\nname: {name}\ndescription: {_yaml_text(description)}\n---\n{body.strip()}\n"
    parse_skill(text, name, folder / SKILL_FILE)  # never write a proposal the loader would refuse
    folder.mkdir(parents=True)
    (folder / SKILL_FILE).write_text(text, encoding="utf-8")
    return folder / SKILL_FILE


def _yaml_text(text: str) -> str:
    """A one-line YAML string, quoted (a description may hold ': ' or start with a symbol)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def proposals(workspace: Path) -> list[Proposal]:
    """Every proposal, by name, each parsed as the loader would (a broken one says why)."""
    root = proposed_root(workspace)
    if not root.is_dir():
        return []
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        path = folder / SKILL_FILE
        try:
            skill = parse_skill(path.read_text(encoding="utf-8"), folder.name, path)
        except (OSError, UnicodeDecodeError, SkillFileError) as exc:
            found.append(Proposal(folder.name, path, None, str(exc)))
            continue
        found.append(Proposal(folder.name, path, skill))
    return found


def _proposal(workspace: Path, name: str) -> Path:
    folder = proposed_root(workspace) / name
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", name) or not folder.is_dir():
        known = ", ".join(p.name for p in proposals(workspace)) or "none"
        raise NotFound(f"no proposed skill named {name!r}", fix=f"proposed skills: {known} (picoagent skills proposed)")
    return folder


def accept(workspace: Path, name: str) -> Skill:
    """Move a proposal into the live skills, after the skills loader's own parser accepted it."""
    folder = _proposal(workspace, name)
    live = workspace / SKILLS_DIR / name
    if live.exists():
        raise Conflict(f"a skill named {name} is live already", fix=f"picoagent skills reject {name}, or rename it")
    path = folder / SKILL_FILE
    try:
        skill = parse_skill(path.read_text(encoding="utf-8"), name, live / SKILL_FILE)
    except (OSError, UnicodeDecodeError, SkillFileError) as exc:
        raise UsageError(
            f"the proposed skill {name} cannot be used: {exc}", fix=f"edit {path}, or picoagent skills reject {name}"
        ) from None
    folder.rename(live)
    return skill


def reject(workspace: Path, name: str) -> None:
    """Delete a proposal."""
    import shutil

    shutil.rmtree(_proposal(workspace, name))
