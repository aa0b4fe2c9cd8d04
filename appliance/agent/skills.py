"""Skills: instructions for particular tasks, kept in the workspace and loaded when a task needs them.

A skill is a folder ``<workspace>/skills/<name>/`` with a ``SKILL.md`` that starts with YAML front matter::

    ---
    name: water-plants
    description: How to water the plants from the soil sensor and the pump relay.
    requires: [read-soil]
    ---
    Read the soil first. ...

Only the catalog (names and descriptions) goes into the system prompt, as a short list that changes only
when the skills are reloaded (SIGHUP), so the prompt's prefix stays warm in the KV cache. The body comes
on demand, through the read-only ``load_skill`` tool, with the bodies of the skills it requires. A
SKILL.md that cannot be read is skipped with a warning and listed in ``problems`` (:func:`read_skill`, which
a skill installed from a repository passes too, :mod:`appliance.agent.skill_install`). Each skill the
tool serves is counted (:mod:`appliance.agent.skill_uses`). The folder
``skills/proposed/`` holds skills proposed from tasks (:mod:`appliance.agent.proposed_skills`): none
is read here until a person accepts it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.errors import ToolError

if TYPE_CHECKING:
    from appliance.agent.skill_uses import SkillUses
    from appliance.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

SKILLS_DIR = "skills"
SKILL_FILE = "SKILL.md"
PROPOSED_DIR = "proposed"  # skills/proposed/NAME/SKILL.md: suggested from tasks, unused until accepted
TOOL_NAME = "load_skill"
MAX_SKILL_BYTES = 64 * 1024
MAX_DESCRIPTION_CHARS = 1024
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class Skill:
    """One skill: what the catalog shows, what it requires, and its instructions."""

    name: str
    description: str
    requires: tuple[str, ...]
    body: str
    path: Path


class SkillFileError(ValueError):
    """A SKILL.md that cannot be used (the message says which part is wrong)."""


def _text_list(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise SkillFileError(f"{key}: expected a list of skill names, got {value!r}")
    return tuple(v.strip() for v in value)


def front_matter(text: str) -> tuple[dict[str, Any], int]:
    """A SKILL.md's front matter as a mapping, and where its body starts; SkillFileError says what is wrong."""
    import yaml

    match = _FRONT_MATTER.match(text)
    if match is None:
        raise SkillFileError("no front matter: the file must start with a '---' line, YAML, and another '---'")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise SkillFileError(f"the front matter is not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(meta, dict):
        raise SkillFileError("the front matter must be a mapping with name and description")
    return meta, match.end()


def parse_skill(text: str, folder: str, path: Path) -> Skill:
    """A skill from its SKILL.md text; SkillFileError says what is wrong."""
    meta, body_at = front_matter(text)
    name = meta.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SkillFileError(f"name: expected lowercase letters, digits, - or _ (at most 64), got {name!r}")
    if name != folder:
        raise SkillFileError(f"name: {name!r} differs from its folder {folder!r}; they must be the same")
    description = meta.get("description")
    if description is not None and not isinstance(description, str):
        raise SkillFileError(f"description: expected text, got {description!r}")
    if not description or not description.strip():
        raise SkillFileError("description: missing; say in one line when this skill is useful")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillFileError(f"description: {len(description)} characters, at most {MAX_DESCRIPTION_CHARS}")
    requires = _text_list(meta.get("requires"), "requires")
    body = text[body_at:].strip()
    if not body:
        raise SkillFileError("no instructions after the front matter")
    return Skill(name, description, tuple(r for r in requires if r != name), body, path)


def read_skill(folder: Path, real_root: Path) -> Skill:
    """The skill in ``folder`` as the loader reads it: its SKILL.md there, not a link out of ``real_root``
    (the resolved skills folder), at most MAX_SKILL_BYTES, then :func:`parse_skill`; SkillFileError says why not."""
    path = folder / SKILL_FILE
    try:
        if not path.is_file():
            raise SkillFileError("missing")
        if not path.resolve().is_relative_to(real_root):  # a link out of the workspace is not read
            raise SkillFileError("is a link to a file outside the skills folder")
        if path.stat().st_size > MAX_SKILL_BYTES:
            raise SkillFileError(f"larger than {MAX_SKILL_BYTES // 1024} KiB")
        return parse_skill(path.read_text(encoding="utf-8"), folder.name, path)
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillFileError(exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) from None


@dataclass(frozen=True)
class SkillCatalog:
    """The skills found in one folder, and the files that could not be used."""

    root: Path
    skills: dict[str, Skill] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    @classmethod
    def load(cls, root: Path) -> SkillCatalog:
        """Read every ``<root>/<name>/SKILL.md``; bad ones are logged, skipped and listed in problems."""
        skills: dict[str, Skill] = {}
        problems: list[str] = []
        if root.is_symlink():  # the shell may not write skills/, but it may have made a link in its place
            problem = f"{SKILLS_DIR}: is a link, not a folder (no skill is read through a link)"
            log.warning("skills skipped: %s", problem)
            return cls(root, problems=(problem,))
        if not root.is_dir():
            return cls(root)
        real_root = root.resolve()
        folders = (p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != PROPOSED_DIR)
        for folder in sorted(folders):
            try:
                skill = read_skill(folder, real_root)
            except SkillFileError as exc:
                problems.append(f"{SKILLS_DIR}/{folder.name}/{SKILL_FILE}: {exc}")
                continue
            skills[skill.name] = skill
        for skill in skills.values():
            missing = [r for r in skill.requires if r not in skills]
            if missing:
                problems.append(f"{SKILLS_DIR}/{skill.name}/{SKILL_FILE}: requires {', '.join(missing)}, not installed")
        for problem in problems:
            log.warning("skill skipped or incomplete: %s", problem)
        return cls(root, skills, tuple(problems))

    def __len__(self) -> int:
        return len(self.skills)

    def prompt(self) -> str:
        """The system prompt's list of skills ("" when there are none); the same text until a reload."""
        if not self.skills:
            return ""
        lines = [f"Skills: instructions for particular tasks. Before doing one, call {TOOL_NAME} with its name."]
        lines += [f"- {skill.name}: {skill.description}" for skill in self.skills.values()]
        return "\n".join(lines)

    def chain(self, name: str) -> list[Skill]:
        """The skill and every skill it requires, transitively, each once (ToolError names a missing one)."""
        if name not in self.skills:
            known = ", ".join(self.skills) or "none"
            raise ToolError(f"no skill named {name!r}; skills: {known}")
        order: list[Skill] = []
        seen: set[str] = set()
        stack: list[tuple[str, str | None]] = [(name, None)]
        while stack:
            current, required_by = stack.pop()
            if current in seen:
                continue  # a cycle, or a skill two others require
            skill = self.skills.get(current)
            if skill is None:
                raise ToolError(
                    f"skill {required_by!r} requires skill {current!r}, which is not installed "
                    f"(expected {SKILLS_DIR}/{current}/{SKILL_FILE} in the workspace)"
                )
            seen.add(current)
            order.append(skill)
            stack.extend((r, current) for r in reversed(skill.requires))
        return order

    def instructions(self, name: str) -> str:
        """The body of a skill followed by the bodies of the skills it requires."""
        chain = self.chain(name)
        parts = [f"# Skill: {chain[0].name}\n\n{chain[0].body}"]
        parts += [f"# Skill: {skill.name} (required by {name})\n\n{skill.body}" for skill in chain[1:]]
        return "\n\n".join(parts)


def sync_tool(registry: ToolRegistry, catalog_of: Any, uses: SkillUses | None = None) -> None:
    """Offer ``load_skill`` when there are skills, and take it away when there are none.

    ``catalog_of``: what holds the current catalog (a Workspace); read at each call, so a reload shows.
    ``uses``: where each skill served is counted (the tool runs on a worker thread, never the event loop).
    """
    from appliance.tools.registry import tool_from_function

    has_tool = TOOL_NAME in registry.tools
    if len(catalog_of.skills) and not has_tool:

        def load_skill(name: str) -> str:
            """Load the instructions of a skill listed under Skills (with the skills it requires).

            Examples: use the skill for this; follow the instructions of a skill

            Args:
                name: the skill's name, as listed
            """
            catalog: SkillCatalog = catalog_of.skills
            text = catalog.instructions(name)
            if uses is not None:
                uses.record([skill.name for skill in catalog.chain(name)])
            return text

        registry.add(tool_from_function(load_skill, read_only=True))
    elif not len(catalog_of.skills) and has_tool:
        registry.remove(TOOL_NAME)
