"""The prompt of a turn: the system prompt from workspace files, recent history, the tool protocol.

The system prompt comes first and changes rarely, so the model's KV cache keeps it warm between
turns. The tool protocol is the one small instruct models are trained on: a call is
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` and its result comes back wrapped in
``<tool_response>``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from appliance.agent.skills import SKILLS_DIR, SkillCatalog
from appliance.llm.base import ChatMessage
from appliance.memory.db import StoredMessage
from appliance.tools.registry import Tool, ToolRegistry
from appliance.tools.result import ToolResult

log = logging.getLogger(__name__)

TOOL_CALL_START = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
WORKSPACE_FILES = ("SOUL.md", "USER.md")

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass
class Workspace:
    """The assistant's folder of editable files (SOUL.md, USER.md, skills/) in the data dir."""

    root: Path
    _skills: SkillCatalog | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def skills(self) -> SkillCatalog:
        """The skills in ``skills/``, read once and kept until :meth:`reload_skills`."""
        if self._skills is None:
            self._skills = SkillCatalog.load(self.root / SKILLS_DIR)
        return self._skills

    def reload_skills(self, catalog: SkillCatalog | None = None) -> SkillCatalog:
        """Read ``skills/`` again (SIGHUP), or take ``catalog`` read from it already; the next turn's prompt
        lists the new set."""
        self._skills = catalog
        return self.skills

    def ensure(self, assistant_name: str) -> list[Path]:
        """Create the workspace, its files and skills/ on first run; return the files created.

        skills/ exists from the start so that the shell sandbox always sees it read-only (a command
        can then neither fill it nor put a link in its place).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / SKILLS_DIR).mkdir(exist_ok=True)
        created = []
        for name in WORKSPACE_FILES:
            path = self.root / name
            if not path.exists():
                template = resources.files("appliance.agent").joinpath("templates", name).read_text("utf-8")
                path.write_text(template.replace("{name}", assistant_name), encoding="utf-8")
                created.append(path)
        return created

    def read(self, name: str) -> str:
        """A workspace file's text without its <!-- comments --> ("" when absent)."""
        try:  # not through a link: a command could have put one where the file was (to a secret, say)
            fd = os.open(self.root / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with open(fd, encoding="utf-8") as file:
                info = os.fstat(fd)
                if info.st_uid not in (os.getuid(), 0):  # the shell sandbox's user made it (on a Pi: not us)
                    log.warning("%s is not read: it belongs to uid %d, not to picoagent or root", name, info.st_uid)
                    return ""
                text = file.read() if stat.S_ISREG(info.st_mode) else ""
        except FileNotFoundError:
            return ""
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("%s is not read: %s", name, exc)
            return ""
        return _COMMENT.sub("", text).strip()


MAX_STRING_ARGUMENT = 200


def _bounded(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with a length limit on every string, so a generated call always ends."""
    out = dict(schema)
    if out.get("type") == "string" and "enum" not in out:
        out.setdefault("maxLength", MAX_STRING_ARGUMENT)
    for key in ("properties",):
        if key in out:
            out[key] = {name: _bounded(sub) for name, sub in out[key].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _bounded(out["items"])
    if "anyOf" in out:
        out["anyOf"] = [_bounded(sub) for sub in out["anyOf"]]
    return out


def tool_call_schema(tools: list[Tool]) -> dict[str, Any]:
    """The JSON schema every tool call must match: one of the tools, with that tool's arguments."""
    options = [
        {
            "type": "object",
            "properties": {"name": {"const": tool.name}, "arguments": _bounded(tool.parameters)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    return options[0] if len(options) == 1 else {"anyOf": options}


TOOLS_HEADER = (
    "You can use tools. To use one, reply with only a tool call and nothing else:",
    f'{TOOL_CALL_START}{{"name": "TOOL_NAME", "arguments": {{...}}}}{TOOL_CALL_END}',
    "The result comes back in <tool_response>. Use a tool only when it is needed.",
    "Tools:",
)


def tools_prompt(tools: list[Tool]) -> str:
    """The system prompt's description of the tools and how to call them."""
    lines = list(TOOLS_HEADER)
    for tool in tools:
        params = ", ".join(
            f"{name}: {spec.get('type', 'value')}" for name, spec in tool.parameters["properties"].items()
        )
        lines.append(f"- {tool.name}({params}): {tool.description}")
    return "\n".join(lines)


def system_prompt(workspace: Workspace, tools: ToolRegistry | Sequence[Tool] | None) -> str:
    """SOUL.md, USER.md, the skills catalog and (when there are tools) the tool protocol, in a fixed order.

    The tools come last: a turn's ranked tools may differ from the last turn's, and what precedes them
    stays a KV-cache prefix either way.
    """
    parts = [workspace.read(name) for name in WORKSPACE_FILES]
    parts.append(workspace.skills.prompt())  # before the tools: the same with or without them
    if tools is not None and len(tools):
        parts.append(tools_prompt(list(tools)))
    return "\n\n".join(p for p in parts if p)


def instructions(workspace: Workspace, tools: Sequence[Tool] | None) -> list[str]:
    """The parts of the system prompt a reply must never recite (the reply guard's): SOUL.md, the skills, the
    tool protocol. USER.md is left out: it is what the owner wrote about themselves, and a reply may quote it."""
    parts = [workspace.read("SOUL.md"), workspace.skills.prompt()]
    if tools:
        parts.append(tools_prompt(list(tools)))
    return [p for p in parts if p]


def stable_system_prompt(workspace: Workspace, with_tools: bool) -> str:
    """The start of :func:`system_prompt` that no turn changes: all of it up to the ranked tool lines."""
    parts = [workspace.read(name) for name in WORKSPACE_FILES]
    parts.append(workspace.skills.prompt())
    if with_tools:
        parts.append("\n".join(TOOLS_HEADER) + "\n")
    return "\n\n".join(p for p in parts if p)


def facts_note(now: datetime, place: str = "") -> ChatMessage:
    """What the model cannot know by itself, said after the system prompt: the date, the time, the zone and
    the place (``weather.place``, when it is named).

    A message of its own rather than part of the system prompt: a prompt whose first tokens change every
    minute would be read cold every turn (injecting the date into the system prompt is a known way to break
    prefix caches); here the system prompt before it stays the KV cache's prefix (tests/bench/facts.py).
    """
    zone = (getattr(now.tzinfo, "key", None) or now.tzname() or "local").removeprefix("Etc/")  # Etc/UTC: UTC
    where = f" Here: {place}." if place else ""
    return ChatMessage("system", f"Now: {now:%A} {now.day} {now:%B %Y}, {now:%H:%M} ({zone} time).{where}")


def history_messages(stored: list[StoredMessage], *, copies: bool = False) -> list[ChatMessage]:
    """Stored messages as prompt messages (tool exchanges are kept as they were shown to the model); a declined
    question and its decline are left out (the small model repeated the decline as its own answer).

    ``copies``: the model copies what it reads (a catalog model with ``answers: false``, the packaged 135M): the
    exchanges answered without it (route ``intent``: "Cancelled fan_0730 ...", "Reminder set: ...") are left out
    too. It answered "ok thanks" with "Cancelled write_file tool ..." and "yes" with "the 7:30 fan is indeed
    cancelled", actions nobody took.

    A user message with no answer after it (the last stored one, or one followed by another) is left out too:
    the message being asked comes next, and the model answers the first question it reads."""
    out: list[ChatMessage] = []
    for i, message in enumerate(stored):
        if message.meta.get("declined") or (copies and message.route == "intent"):
            continue
        following = stored[i + 1] if i + 1 < len(stored) else None
        if message.role == "user" and following is not None and following.meta.get("declined"):
            continue
        if copies and message.role == "user" and following is not None and following.route == "intent":
            continue
        # a question never answered (the turn failed: the model crashed, the daemon was killed): left out, or the
        # next message is answered with it (walk 9: "hello" after a crash got the story asked before it)
        if message.role == "user" and (following is None or following.role == "user"):
            continue
        role = message.role if message.role in ("user", "assistant") else "user"
        out.append(ChatMessage(role, message.content))  # type: ignore[arg-type]
    return out


def tool_call_message(name: str, arguments: dict[str, Any]) -> ChatMessage:
    """The assistant's tool call as it goes back into the prompt."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return ChatMessage("assistant", f"{TOOL_CALL_START}{body}{TOOL_CALL_END}")


def tool_result_message(result: ToolResult) -> ChatMessage:
    """A tool's result as the model reads it (a user message: every chat template accepts that)."""
    body = json.dumps({"name": result.name, "result": result.for_model()}, ensure_ascii=False)
    return ChatMessage("user", f"<tool_response>\n{body}\n</tool_response>")
