"""The OpenAPI paths of the settings routes (channels/web/settings.py)."""

from __future__ import annotations

from typing import Any

from appliance.channels.web.openapi_parts import BAD_REQUEST, ERROR, UNAUTHORIZED, json_body, strings
from appliance.channels.web.openapi_parts import json_answer as _json


def settings_paths() -> dict[str, Any]:
    """GET and POST /api/settings, GET /api/settings/audit."""
    field_error = {
        "allOf": [ERROR],
        "properties": {"key": {"type": "string", "description": "the setting the error is about, e.g. web.port"}},
    }
    saved = {
        "type": "object",
        "required": ["version", "changed", "applied", "restart_needed", "refused"],
        "properties": {
            "version": {"type": "string", "description": "the file's new version, for the next save"},
            "changed": strings("the keys whose values changed (a secret's by name only)"),
            "applied": strings("changed keys the running daemon uses now"),
            "restart_needed": strings("changed keys that wait for a restart"),
            "refused": {"type": "string", "description": "why the running daemon did not take the file; empty: it did"},
            "took_ms": {"type": "number"},
        },
    }
    return {
        "/api/settings": {
            "get": {
                "summary": "the config file's version and the Settings page's forms, made from the config schema "
                "(each field's words, type, range, choices and value; a secret only as set or not)",
                "responses": {"200": _json({"type": "object"}), "401": UNAUTHORIZED},
            },
            "post": {
                "summary": "check, write and apply a change of settings; a secret goes to the secrets file",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "required": ["version", "set"],
                        "properties": {
                            "version": {"type": "string", "description": "the version the change was made from"},
                            "set": {
                                "type": "object",
                                "description": 'dotted keys and their new values ({"web.port": 8081}); null sets a '
                                "key back to its default or removes a named entry (devices.fan)",
                            },
                            "password": {
                                "type": "string",
                                "description": "the web password: a browser session needs it to change a secret",
                            },
                        },
                    }
                ),
                "responses": {
                    "200": _json(saved),
                    "400": _json(field_error, "the config's checks refuse the change; key names the setting"),
                    "403": _json(ERROR, "out of scope, or a secret changed without the password"),
                    "409": _json(ERROR, "the file changed since that version: changed names the keys; nothing saved"),
                    "401": UNAUTHORIZED,
                },
            },
        },
        "/api/settings/audit": {
            "get": {
                "summary": "the newest settings changes: who, when, which keys (never a secret's value)",
                "responses": {"200": _json({"type": "object"}), "400": BAD_REQUEST, "401": UNAUTHORIZED},
            }
        },
    }
