"""`picoagent skills`: the workspace's skills; installed from a public repository after a look, updated, removed.

An install shows the SKILL.md and what it declares before anything is written, and asks; ``--yes`` answers
for you, and without a terminal to ask on (a pipe, a script) nothing is installed unless ``--yes`` was given.
While the daemon runs, the work is its (POST /api/skills/install: preview, then the previewed commit
confirmed; DELETE /api/skills/NAME), so it reads its skills again at once; otherwise this process does it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from appliance.cli.common import action, command_group, confirm, load, open_db, print_json

if TYPE_CHECKING:
    from appliance.config import Config


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    """The `skills` command group."""
    ssub = command_group(sub, common, "skills", "the workspace's skills (workspace/skills/NAME/SKILL.md)")
    slist = action(
        ssub, common, "list", "each skill, its source, commit and uses, and the files with problems", cmd_list
    )
    slist.add_argument("--json", action="store_true", help="print as JSON")
    add = action(ssub, common, "install", "install a skill from a public repository, after showing it", cmd_install)
    add.add_argument("source", metavar="OWNER/REPO[/PATH]", help="the repository and the skill's folder in it")
    add.add_argument("--ref", help="a branch, tag or commit (default: the repository's default branch)")
    add.add_argument("--yes", action="store_true", help="install without asking (after showing it)")
    update = action(ssub, common, "update", "fetch installed skills again; show what changed and ask", cmd_update)
    update.add_argument("name", nargs="?", help="one skill (default: every installed one)")
    update.add_argument("--yes", action="store_true", help="update without asking (after showing the change)")
    action(ssub, common, "remove", "remove a skill installed from a repository", cmd_remove).add_argument("name")
    action(ssub, common, "proposed", "skills proposed from tasks, waiting for a person", cmd_proposed)
    action(ssub, common, "accept", "make a proposed skill live (validated first)", cmd_accept).add_argument("name")
    action(ssub, common, "reject", "delete a proposed skill", cmd_reject).add_argument("name")


def _workspace(config: Config) -> Path:
    from appliance.config import data_dir

    return data_dir(config) / "workspace"


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if at else "never"


def cmd_list(args: argparse.Namespace) -> int:
    """The skills in the workspace, where each came from and how often it was used, and the broken files."""
    from appliance.agent.skill_install import listing, skills_root
    from appliance.agent.skill_uses import SkillUses

    config = load(args)
    db = open_db(config)
    try:
        found = listing(_workspace(config), SkillUses(db).all())
    finally:
        db.close()
    if args.json:
        print_json(found)
        return 0
    if not found["skills"]:
        print(f"no skills in {skills_root(_workspace(config))} (a skill is a folder there with a SKILL.md)")
    for skill in found["skills"]:
        print(f"{skill['name']}\n    {skill['description']}")
        if skill["requires"]:
            print(f"    requires: {', '.join(skill['requires'])}")
        if skill["source"]:
            edited = " (SKILL.md edited since)" if skill["changed_locally"] else ""
            print(f"    from {skill['source']} at {skill['commit'][:7]}, {_when(skill['installed_at'])}{edited}")
        print(f"    used {skill['uses']} time(s), last {_when(skill['last_used'])}")
    if found["problems"]:
        print("problems:")
        for problem in found["problems"]:
            print(f"    {problem}")
    return 0


def _preview(config: Config, source: str, ref: str | None) -> dict[str, Any]:
    """The preview, from the running daemon or made here; nothing is written."""
    from appliance.agent import skill_install
    from appliance.cli.daemon_client import daemon_get

    answer = daemon_get(config, "/api/skills/install", {"source": source, "ref": ref}, timeout=120)
    if answer is not None:
        return dict(answer)
    return skill_install.preview(_workspace(config), config.tools.skills_api, source, ref).as_dict()


def _install(config: Config, source: str, commit: str, ref: str | None) -> dict[str, Any]:
    """Exactly ``commit`` installed, by the running daemon (which reads its skills again) or here."""
    from appliance.agent import skill_install
    from appliance.cli.daemon_client import daemon_get

    body = {"source": source, "commit": commit, "ref": ref, "confirm": True}
    answer = daemon_get(config, "/api/skills/install", body, timeout=120)
    if answer is not None:
        return dict(answer)
    name, provenance = skill_install.install(_workspace(config), config.tools.skills_api, source, commit, ref)
    print("no daemon is running: it reads the skill when it starts")
    return {"installed": True, "name": name, **provenance.as_dict()}


def _show(preview: dict[str, Any], *, whole: bool) -> None:
    """What a person reads before saying yes: the source, the front matter, the files, SKILL.md (or its diff)."""
    import yaml

    ref = f" ({preview['ref']})" if preview.get("ref") else ""
    print(f"skill {preview['name']} from {preview['source']} at commit {preview['commit']}{ref}")
    print("what it declares (its front matter):")
    for line in yaml.safe_dump(preview["front_matter"], sort_keys=False, allow_unicode=True).splitlines():
        print(f"    {line}")
    if preview["missing"]:
        print(f"it requires skills not installed here: {', '.join(preview['missing'])}")
    files = preview["files"]
    print(f"files ({len(files)}): " + ", ".join(f"{path} ({size} bytes)" for path, size in files.items()))
    if whole or not preview.get("replaces"):
        print(f"----- SKILL.md -----\n{preview['skill_md'].rstrip()}\n----- end of SKILL.md -----")
    elif preview["diff"]:
        print(f"----- what changed in SKILL.md -----\n{preview['diff'].rstrip()}\n-----")
    else:
        print("SKILL.md is the same; other files changed")


def _confirm(question: str, yes: bool, pinned: str) -> bool:
    """Whether the person said yes (``--yes`` says it); without a terminal to ask on, a refusal."""
    return confirm(
        question,
        yes,
        refused="nothing was installed: there is no terminal to ask whether the above may be installed",
        fix=f"read it, then run {pinned} --yes",
    )


def cmd_install(args: argparse.Namespace) -> int:
    """Show a skill from a repository, ask, and install exactly the commit shown."""
    config = load(args)
    preview = _preview(config, args.source, args.ref)
    _show(preview, whole=True)
    pinned = f"picoagent skills install {preview['source']} --ref {preview['commit']}"
    if not _confirm("install it?", args.yes, pinned):
        print("not installed")
        return 1
    done = _install(config, preview["source"], preview["commit"], args.ref)
    print(f"installed {done['name']} from {done['source']} at {done['commit'][:7]}")
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    """Each installed skill's ref resolved again; a new commit shown (SKILL.md's diff) and installed if wanted."""
    from appliance.agent import skill_install
    from appliance.errors import NotFound

    config = load(args)
    found = skill_install.installed(_workspace(config))
    if args.name is not None and args.name not in found:
        known = ", ".join(found) or "none"
        raise NotFound(f"no installed skill named {args.name!r}", fix=f"installed from a repository: {known}")
    if not found:
        print("no skill was installed from a repository (picoagent skills install OWNER/REPO/PATH)")
    declined = 0
    for name, provenance in found.items():
        if args.name is not None and name != args.name:
            continue
        preview = _preview(config, provenance.source, provenance.ref)
        if preview["commit"] == provenance.commit:
            print(f"{name}: up to date at {provenance.commit[:7]}")
            continue
        print(f"{name}: {provenance.commit[:7]} -> {preview['commit'][:7]}")
        _show(preview, whole=False)
        pinned = f"picoagent skills install {provenance.source} --ref {preview['commit']}"
        if not _confirm(f"update {name}?", args.yes, pinned):
            print(f"{name} not updated")
            declined += 1
            continue
        done = _install(config, provenance.source, preview["commit"], provenance.ref)
        print(f"updated {name} to {done['commit'][:7]}")
    return 1 if declined else 0


def cmd_remove(args: argparse.Namespace) -> int:
    """Delete a skill installed from a repository, and its counter."""
    from appliance.agent import skill_install
    from appliance.agent.skill_uses import SkillUses
    from appliance.cli.daemon_client import daemon_get

    config = load(args)
    answer = daemon_get(config, f"/api/skills/{quote(args.name, safe='')}", method="DELETE")
    if answer is None:
        provenance = skill_install.remove(_workspace(config), args.name)
        db = open_db(config)
        try:
            SkillUses(db).forget(args.name)
        finally:
            db.close()
        answer = {"source": provenance.source}
    print(f"removed {args.name} (installed from {answer['source']})")
    return 0


def cmd_proposed(args: argparse.Namespace) -> int:
    """The skills proposed from tasks (workspace/skills/proposed), with their descriptions."""
    from appliance.agent import proposed_skills

    found = proposed_skills.proposals(_workspace(load(args)))
    if not found:
        print("no proposed skills (a procedure that worked in two or more tasks is proposed here)")
    for proposal in found:
        if proposal.skill is None:
            print(f"{proposal.name}\n    cannot be accepted: {proposal.problem}")
        else:
            print(f"{proposal.name}\n    {proposal.skill.description}\n    {proposal.path}")
    return 0


def cmd_accept(args: argparse.Namespace) -> int:
    """Move a proposed skill into the live skills after validating it."""
    from appliance.agent import proposed_skills

    skill = proposed_skills.accept(_workspace(load(args)), args.name)
    print(f"{skill.name} is a skill now: {skill.path}")
    print("the running daemon reads it at its next reload (systemctl reload picoagent, or SIGHUP)")
    return 0


def cmd_reject(args: argparse.Namespace) -> int:
    """Delete a proposed skill."""
    from appliance.agent import proposed_skills

    proposed_skills.reject(_workspace(load(args)), args.name)
    print(f"proposed skill {args.name} deleted")
    return 0
