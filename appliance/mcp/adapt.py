"""An MCP server's tools as picoagent tools: names, argument schemas, descriptions and results."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

MAX_NAME = 64
MAX_DESCRIPTION = 300  # every tool's description is in the local model's prompt: keep it to a line
MAX_REF_DEPTH = 8
_UNSAFE = re.compile(r"[^a-z0-9_]+")


def _slug(text: str) -> str:
    return _UNSAFE.sub("_", text.lower()).strip("_") or "x"


def tool_name(server: str, tool: str) -> str:
    """``mcp_<server>_<tool>`` in [a-z0-9_], at most 64 characters (a hash keeps cut names apart)."""
    name = f"mcp_{_slug(server)}_{_slug(tool)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def description(tool: dict[str, Any]) -> str:
    """The tool's description as one short line (its first paragraph)."""
    text = tool.get("description") or tool.get("title") or str(tool.get("name", "")).replace("_", " ")
    first = re.split(r"\n\s*\n", str(text).strip(), maxsplit=1)[0]
    line = " ".join(first.split())
    return line if len(line) <= MAX_DESCRIPTION else line[: MAX_DESCRIPTION - 1].rstrip() + "…"


def _pointer(root: dict[str, Any], ref: str) -> Any:
    """What a local ``#/...`` reference points at (None when it points nowhere)."""
    node: Any = root
    for part in ref[2:].split("/") if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


# What the local model's grammar (llama.cpp's JSON-schema converter) understands; anything else (not, if,
# dependentRequired, a pattern with syntax it lacks) would fail every tool call of the turn, so it is dropped:
# the server still checks the arguments, and the model reads its error.
_SCHEMA_MAPS = ("properties",)
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties")
_PLAIN = (
    "type", "required", "enum", "const", "format", "description", "title", "default",
    "minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
)  # fmt: skip


def _clean(node: Any, root: dict[str, Any], depth: int) -> dict[str, Any]:
    """A schema with local $refs inlined and only the keywords the grammar understands ({}: any value)."""
    if not isinstance(node, dict):
        return {}  # true, or something that is not a schema: any value
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _pointer(root, ref) if ref.startswith("#") else None
        if not isinstance(target, dict) or depth >= MAX_REF_DEPTH:
            return {}  # a remote or recursive reference: any value; the server checks it
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _clean({**target, **siblings}, root, depth + 1)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {str(name): _clean(sub, root, depth) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_clean(sub, root, depth) for sub in value]
        elif key in _SCHEMA_ONE and isinstance(value, bool | dict):
            out[key] = value if isinstance(value, bool) else _clean(value, root, depth)
        elif key in _PLAIN:
            out[key] = value
    return out


def parameters(input_schema: Any) -> dict[str, Any]:
    """An MCP inputSchema as the registry's parameters: an object with properties and required.

    References are inlined because the tool-call grammar nests each tool's schema inside a bigger one,
    where ``#/$defs/...`` would point at the wrong root; keywords the grammar cannot express are dropped.
    """
    schema = input_schema if isinstance(input_schema, dict) else {}
    inlined = _clean(schema, schema, 0)
    raw_props = inlined.get("properties")
    props = {str(k): (v if isinstance(v, dict) else {}) for k, v in (raw_props or {}).items()}
    required = [r for r in inlined.get("required") or [] if isinstance(r, str) and r in props]
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def result_text(result: Any) -> str:
    """A tools/call result's content as text: text items joined, other kinds named."""
    if not isinstance(result, dict):
        return ""
    parts: list[str] = []
    for item in result.get("content") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "text":
            parts.append(str(item.get("text", "")))
        elif kind == "resource":
            resource = item.get("resource") or {}
            parts.append(str(resource.get("text") or f"[resource {resource.get('uri', '')}]"))
        elif kind == "resource_link":
            parts.append(f"[link {item.get('uri', '')}: {item.get('name', '')}]")
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {item.get('mimeType', '')}: not shown]")
    if not parts and result.get("structuredContent") is not None:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    return "\n".join(parts)
