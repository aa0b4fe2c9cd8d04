"""The pieces the OpenAPI document is written with (openapi.py, and openapi_automation.py's paths).

One place for how an answer, a body, a header or a list of strings is declared, so that both halves of
the document say them alike.
"""

from __future__ import annotations

from typing import Any

ERROR = {"$ref": "#/components/schemas/Error"}


def json_answer(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    """A JSON answer with this schema."""
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def json_body(schema: dict[str, Any], *, required: bool = True) -> dict[str, Any]:
    """A JSON request body."""
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def header(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """A required request header (a string unless ``schema`` says more)."""
    return {
        "name": name,
        "in": "header",
        "required": True,
        "description": description,
        "schema": schema or {"type": "string"},
    }


def strings(description: str) -> dict[str, Any]:
    """A list of strings."""
    return {"type": "array", "items": {"type": "string"}, "description": description}


UNAUTHORIZED = json_answer(ERROR, "authentication required")
BAD_REQUEST = json_answer(ERROR, "the request is malformed; the error says how")
