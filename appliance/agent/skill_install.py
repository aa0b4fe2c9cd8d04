"""Skills installed from a public repository: a preview first, then exactly the previewed commit.

:func:`preview` resolves the ref, reads the skill folder out of that commit's archive
(:mod:`skill_source`), checks its SKILL.md with the skills loader's own :func:`parse_skill` and answers
what a person must see before saying yes: the SKILL.md text, its front matter (requires, tools, anything
else it declares), the files, and for an update the diff of SKILL.md. Nothing is written.
:func:`install` takes the commit the person saw (never the ref again, which may have moved), reads and
checks it the same way, writes it into a hidden folder beside the skills, has the loader read it there
(:func:`read_skill`: no link out, size, front matter, name), and only then renames it into place (a
replaced version is renamed aside first and deleted after), so the daemon never sees half a skill.

Provenance is a small file in the skill's own folder, ``.source.json`` (source, ref, commit, installed
time, SKILL.md's sha256), rather than a table: the folder is the unit people copy, back up or delete by
hand, and the file goes with it, so no row can outlive its folder or miss a copied one; the CLI reads it
without the database; and the sha256 shows a SKILL.md edited since it was installed. A name already taken
is refused unless the skill there came from the same source (then it is an update).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import secrets
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from appliance.agent import skill_source
from appliance.agent.skill_source import SHA, SkillFiles, Source
from appliance.agent.skill_uses import SkillUse
from appliance.agent.skills import (
    _NAME,
    MAX_SKILL_BYTES,
    SKILL_FILE,
    SKILLS_DIR,
    Skill,
    SkillCatalog,
    SkillFileError,
    front_matter,
    parse_skill,
    read_skill,
)
from appliance.errors import Conflict, NotFound, PicoagentError, PolicyError, UsageError

SOURCE_FILE = ".source.json"  # in the skill's folder: where it came from (hidden: the loader skips it)
STAGING_PREFIX = ".installing-"  # a hidden folder beside the skills while one is written


@dataclass(frozen=True)
class Provenance:
    """Where an installed skill came from."""

    source: str
    ref: str | None
    commit: str
    installed_at: float
    sha256: str  # of SKILL.md as installed

    @classmethod
    def read(cls, folder: Path) -> Provenance | None:
        """The provenance in a skill's folder; None for a skill written here (or a file that is not ours)."""
        try:
            data = json.loads((folder / SOURCE_FILE).read_text(encoding="utf-8"))
            return cls(
                str(data["source"]), data.get("ref"), str(data["commit"]), float(data["installed_at"]), data["sha256"]
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def changed_locally(self, folder: Path) -> bool:
        """Whether SKILL.md was edited since it was installed."""
        try:
            return _sha256((folder / SKILL_FILE).read_bytes()) != self.sha256
        except OSError:
            return True

    def as_dict(self) -> dict[str, Any]:
        """As JSON (the file's content, and the API's)."""
        return asdict(self)


@dataclass(frozen=True)
class Preview:
    """What a person sees before an install: nothing has been written."""

    skill: Skill
    source: Source
    ref: str | None
    commit: str
    text: str  # SKILL.md as it would be installed
    meta: dict[str, Any]  # its front matter
    files: dict[str, int]  # path in the folder -> bytes
    missing: tuple[str, ...]  # required skills not installed here
    installed: Provenance | None  # the version there now (same source), for an update
    diff: str  # SKILL.md now -> this one ("" when the same or new)

    def as_dict(self) -> dict[str, Any]:
        """The API's preview answer."""
        return {
            "name": self.skill.name,
            "description": self.skill.description,
            "source": str(self.source),
            "ref": self.ref,
            "commit": self.commit,
            "skill_md": self.text,
            "front_matter": json.loads(json.dumps(self.meta, default=str)),
            "requires": list(self.skill.requires),
            "missing": list(self.missing),
            "files": self.files,
            "replaces": self.installed.as_dict() if self.installed else None,
            "diff": self.diff,
        }


def skills_root(workspace: Path) -> Path:
    """workspace/skills."""
    return workspace / SKILLS_DIR


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _checked(files: SkillFiles, source: Source, commit: str) -> tuple[Skill, str]:
    """The skill and its SKILL.md text, checked with the loader's parser; a refusal says why."""
    data = files.files.get(SKILL_FILE)
    where = f"{source} at {commit[:7]}"
    if data is None:
        raise NotFound(f"no {SKILL_FILE} in {where}", fix="name the folder that holds the skill's SKILL.md")
    try:
        if len(data) > MAX_SKILL_BYTES:
            raise SkillFileError(f"larger than {MAX_SKILL_BYTES // 1024} KiB")
        text = data.decode("utf-8")
        return parse_skill(text, source.folder, Path(SKILLS_DIR, source.folder, SKILL_FILE)), text
    except (SkillFileError, UnicodeDecodeError) as exc:
        raise PolicyError(
            f"the {SKILL_FILE} of {where} cannot be used: {exc}; nothing was installed",
            fix="ask its author to fix it, or choose another skill",
        ) from None


def _taken_by(root: Path, name: str, source: Source) -> Provenance | None:
    """The provenance of a skill of that name from the same source; a Conflict when another holds the name."""
    folder = root / name
    if not (folder.exists() or folder.is_symlink()):
        return None
    there = Provenance.read(folder)
    if there is None or there.source != str(source):
        came = f"installed from {there.source}" if there else "written here, not installed from a repository"
        raise Conflict(
            f"a skill named {name} is installed already ({came})",
            fix=f"remove it first (picoagent skills remove {name}), or choose another skill",
        )
    return there


def _fetch(workspace: Path, api: str, source: Source, commit: str) -> tuple[SkillFiles, Skill, str, Provenance | None]:
    files = skill_source.extract(skill_source.download(api, source, commit), source, commit)
    skill, text = _checked(files, source, commit)
    return files, skill, text, _taken_by(skills_root(workspace), skill.name, source)


def preview(workspace: Path, api: str, source_text: str, ref: str | None = None) -> Preview:
    """Everything about the skill at ``ref`` (default: the default branch) a person should read; writes nothing."""
    source = Source.parse(source_text)
    commit = skill_source.resolve(api, source, ref)
    files, skill, text, installed = _fetch(workspace, api, source, commit)
    root = skills_root(workspace)
    diff = ""
    if installed is not None:
        try:
            now = (root / skill.name / SKILL_FILE).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            now = ""
        lines = difflib.unified_diff(
            now.splitlines(keepends=True),
            text.splitlines(keepends=True),
            f"{SKILL_FILE} ({installed.commit[:7]}, installed)",
            f"{SKILL_FILE} ({commit[:7]})",
        )
        diff = "".join(lines)
    present = set(SkillCatalog.load(root).skills) if root.is_dir() else set()
    missing = tuple(r for r in skill.requires if r not in present)
    sizes = {path: len(data) for path, data in sorted(files.files.items())}
    meta, _ = front_matter(text)
    return Preview(skill, source, ref, commit, text, meta, sizes, missing, installed, diff)


def install(
    workspace: Path, api: str, source_text: str, commit: str, ref: str | None = None, clock: Any = time.time
) -> tuple[str, Provenance]:
    """Install exactly ``commit`` (the one the person saw in the preview), replacing the same source's version;
    the skill's name and where it came from."""
    source = Source.parse(source_text)
    if not SHA.fullmatch(commit):
        raise UsageError(f"{commit!r} is not a commit", fix="install the commit a preview named (40 hex digits)")
    files, skill, text, _ = _fetch(workspace, api, source, commit)
    root = skills_root(workspace)
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f"{STAGING_PREFIX}{skill.name}-{secrets.token_hex(4)}"
    try:
        folder = staging / skill.name
        _write(folder, files)
        try:
            read_skill(folder, staging.resolve())  # the loader's own reading: no link out, size, front matter
        except SkillFileError as exc:
            raise PolicyError(f"{source} at {commit[:7]}: {exc}; nothing was installed") from None
        provenance = Provenance(str(source), ref, commit, clock(), _sha256(text.encode("utf-8")))
        (folder / SOURCE_FILE).write_text(json.dumps(provenance.as_dict(), indent=2) + "\n", encoding="utf-8")
        _taken_by(root, skill.name, source)  # again: another install may have taken the name meanwhile
        live, aside = root / skill.name, staging / f"{skill.name}.replaced"
        if live.exists():
            live.rename(aside)
        try:
            folder.rename(live)
        except OSError:
            if aside.exists():
                aside.rename(live)  # the version that was there stays
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return skill.name, provenance


def _write(folder: Path, files: SkillFiles) -> None:
    """The files into a new folder (their paths were checked in skill_source: no .., nothing absolute)."""
    try:
        for path, data in files.files.items():
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o755 if path in files.executable else 0o644)
    except OSError as exc:
        raise PicoagentError(
            f"cannot write the skill into {folder.parent.parent}: {exc.strerror or exc}; nothing was installed",
            fix="check the disk's free space and the workspace's owner",
        ) from None


def remove(workspace: Path, name: str) -> Provenance:
    """Delete an installed skill's folder (one written here by hand is left: delete it yourself)."""
    folder = skills_root(workspace) / name
    if not _NAME.fullmatch(name) or not folder.is_dir() or folder.is_symlink():
        known = ", ".join(installed(workspace)) or "none"
        raise NotFound(f"no installed skill named {name!r}", fix=f"installed from a repository: {known}")
    provenance = Provenance.read(folder)
    if provenance is None:
        raise Conflict(
            f"the skill {name} was written here, not installed from a repository; it was left",
            fix=f"delete {folder} yourself if you mean to",
        )
    shutil.rmtree(folder)
    return provenance


def installed(workspace: Path) -> dict[str, Provenance]:
    """Every skill installed from a repository, by name."""
    root = skills_root(workspace)
    if not root.is_dir():
        return {}
    found = {}
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and not folder.is_symlink() and not folder.name.startswith("."):
            provenance = Provenance.read(folder)
            if provenance is not None:
                found[folder.name] = provenance
    return found


def listing(workspace: Path, uses: dict[str, SkillUse]) -> dict[str, Any]:
    """Every usable skill with its source, commit and uses, and the SKILL.md files with problems (the API's and
    `skills list --json`'s answer)."""
    root = skills_root(workspace)
    catalog = SkillCatalog.load(root)
    found = installed(workspace)
    skills = []
    for skill in catalog.skills.values():
        provenance, used = found.get(skill.name), uses.get(skill.name)
        skills.append(
            {
                "name": skill.name,
                "description": skill.description,
                "requires": list(skill.requires),
                "path": str(skill.path),
                "source": provenance.source if provenance else None,
                "ref": provenance.ref if provenance else None,
                "commit": provenance.commit if provenance else None,
                "installed_at": provenance.installed_at if provenance else None,
                "changed_locally": provenance.changed_locally(root / skill.name) if provenance else False,
                "uses": used.uses if used else 0,
                "last_used": used.last_used if used else None,
            }
        )
    return {"skills": skills, "problems": list(catalog.problems)}
