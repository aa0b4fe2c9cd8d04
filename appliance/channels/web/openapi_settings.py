"""The OpenAPI paths of the Settings page's routes: settings, setup, access, updates, skills, memory."""

from __future__ import annotations

from typing import Any

from appliance.channels.web.openapi_memory import memory_paths
from appliance.channels.web.openapi_parts import BAD_REQUEST, ERROR, UNAUTHORIZED, json_body, strings
from appliance.channels.web.openapi_parts import json_answer as _json


def settings_paths() -> dict[str, Any]:
    """GET and POST /api/settings, GET /api/settings/audit, and the first run's routes (setup.py)."""
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
        **setup_paths(),
        **access_paths(),
        **skills_paths(),
        **memory_paths(),
        "/api/settings/audit": {
            "get": {
                "summary": "the newest settings changes: who, when, which keys (never a secret's value)",
                "responses": {"200": _json({"type": "object"}), "400": BAD_REQUEST, "401": UNAUTHORIZED},
            }
        },
    }


def setup_paths() -> dict[str, Any]:
    """GET /api/setup, POST /api/setup/password and /api/setup/cloud, GET /api/models."""
    field_error = _json(ERROR, "refused; key names the field")
    return {
        "/api/setup": {
            "get": {
                "summary": "what is set up: first_run (the one-time password still in use), name, time zone, place, "
                "routing, model, Telegram; and the config file's version",
                "responses": {"200": _json({"type": "object"}), "401": UNAUTHORIZED},
            }
        },
        "/api/setup/password": {
            "post": {
                "summary": "the owner's own password: replaces the one-time one, ends every session and gives this "
                "client a new one (its cookie and CSRF token)",
                "requestBody": json_body({"type": "object", "required": ["password"]}),
                "responses": {"200": _json({"type": "object"}), "400": field_error, "401": UNAUTHORIZED},
            }
        },
        "/api/setup/cloud": {
            "post": {
                "summary": "a cloud provider checked with one real request, then saved with routing.mode and "
                "routing.cloud_provider (its key into the secrets file)",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "required": ["version", "type", "api_base", "model", "api_key"],
                        "properties": {
                            "version": {"type": "string"},
                            "name": {"type": "string", "description": "providers.NAME; absent: the type"},
                            "type": {"type": "string", "enum": ["openai", "anthropic"]},
                            "api_base": {"type": "string"},
                            "model": {"type": "string"},
                            "api_key": {"type": "string"},
                            "mode": {"type": "string", "enum": ["edge_first", "cloud_first"]},
                            "password": {"type": "string", "description": "a browser session's web password"},
                        },
                    }
                ),
                "responses": {
                    "200": _json({"type": "object"}),
                    "400": field_error,
                    "409": _json(ERROR, "the file changed since that version"),
                    "401": UNAUTHORIZED,
                },
            }
        },
        "/api/setup/telegram/check": {
            "post": {
                "summary": "who the bot with this token is (Telegram's getMe), before the token is saved",
                "requestBody": json_body({"type": "object", "required": ["token"]}),
                "responses": {"200": _json({"type": "object"}), "400": field_error, "401": UNAUTHORIZED},
            }
        },
        "/api/setup/telegram/pairing": {
            "post": {
                "summary": "a one-time pairing code for the configured bot as a t.me link and its QR code (SVG)",
                "responses": {
                    "200": _json({"type": "object"}),
                    "400": field_error,
                    "409": _json(ERROR, "Telegram is not on yet"),
                    "401": UNAUTHORIZED,
                },
            },
            "get": {
                "summary": "whether anyone has paired with the bot yet, and who",
                "responses": {"200": _json({"type": "object"}), "401": UNAUTHORIZED},
            },
        },
        "/api/models": {
            "get": {
                "summary": "the model catalog: this board, what auto picks, the running and wanted model, each "
                "model's size, RAM, speed on a Pi 5 and whether it fits here",
                "responses": {"200": _json({"type": "object"}), "401": UNAUTHORIZED},
            }
        },
    }


def access_paths() -> dict[str, Any]:
    """The password, API tokens, sessions (access.py) and the rollback button (updates.py)."""
    name = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
    scope = {"type": "string", "enum": ["chat", "read", "devices", "admin"]}

    def write(summary: str, body: dict[str, Any] | None, ok: str = "200", **errors: str) -> dict[str, Any]:
        operation: dict[str, Any] = {
            "summary": summary,
            "responses": {
                ok: _json({"type": "object"}),
                **{status: _json(ERROR, why) for status, why in errors.items()},
                "401": UNAUTHORIZED,
            },
        }
        if body is not None:
            operation["requestBody"] = json_body(body)
        return operation

    return {
        "/api/access": {
            "get": {
                "summary": "the API tokens (never their values) and scopes, what each scope may do, browsers signed in",
                "responses": {"200": _json({"type": "object"}), "401": UNAUTHORIZED},
            }
        },
        "/api/access/password": {
            "post": write(
                "a new web password (the current one needed): every other browser is signed out",
                {"type": "object", "required": ["current", "password"]},
                **{"400": "too short", "403": "not the current password"},
            )
        },
        "/api/access/tokens": {
            "post": write(
                "a new API token, shown once in the answer",
                {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "scope": scope}},
                "201",
                **{"400": "no name, a name in use, or an unknown scope"},
            )
        },
        "/api/access/tokens/{name}": {
            "post": {
                **write(
                    "give a token another scope",
                    {"type": "object", "required": ["scope"], "properties": {"scope": scope}},
                    **{"400": "unknown scope", "404": "no such token"},
                ),
                "parameters": name,
            },
            "delete": {**write("revoke a token", None, **{"404": "no such token"}), "parameters": name},
        },
        "/api/access/sessions/end": {"post": write("sign out every other browser", None)},
        "/api/devices/offered": {
            "get": {
                "summary": "what the links know that could become a device: Home Assistant's entities and what "
                "others announce on the MQTT broker for Home Assistant, of the kinds picoagent drives, each with a "
                "suggested name and definition and whether it is configured (null: that link is not configured)",
                "responses": {"200": _json({"type": "object"}), "401": UNAUTHORIZED},
            }
        },
        "/api/update": {
            "get": {
                "summary": "the running release, the others kept, the last update's result, a rollback asked for",
                "responses": {"200": _json({"type": "object"}), "401": UNAUTHORIZED},
            }
        },
        "/api/update/rollback": {
            "post": write(
                "ask root's rollback service to go back to the previous release (this daemon restarts)",
                None,
                "202",
                **{"409": "not an installed release, or no other release to go back to"},
            )
        },
    }


def skills_paths() -> dict[str, Any]:
    """GET /api/skills, POST /api/skills/install (a preview, or with confirm the previewed commit installed),
    DELETE /api/skills/{name}."""
    text = {"type": "string"}
    maybe = {"type": "string", "nullable": True}
    skill = {
        "type": "object",
        "required": ["name", "description", "source", "commit", "uses", "last_used"],
        "properties": {
            "name": text,
            "description": text,
            "requires": strings("the skills it requires"),
            "source": {**maybe, "description": "OWNER/REPO/PATH it was installed from; null: written here"},
            "ref": {**maybe, "description": "the branch or tag asked for at install; null: the default branch"},
            "commit": {**maybe, "description": "the installed commit's sha"},
            "installed_at": {"type": "number", "nullable": True},
            "changed_locally": {"type": "boolean", "description": "SKILL.md was edited since it was installed"},
            "uses": {"type": "integer", "description": "how often load_skill served it"},
            "last_used": {"type": "number", "nullable": True, "description": "when last (Unix time)"},
        },
    }
    preview = {
        "type": "object",
        "required": ["installed", "name", "source", "commit", "skill_md", "front_matter"],
        "properties": {
            "installed": {"type": "boolean", "description": "false: a preview, nothing was written; true: installed"},
            "name": text,
            "description": text,
            "source": text,
            "ref": maybe,
            "commit": {"type": "string", "description": "the sha to confirm: exactly this commit is installed"},
            "skill_md": {"type": "string", "description": "SKILL.md as it would be installed"},
            "front_matter": {"type": "object", "description": "what it declares: requires, tools, ..."},
            "requires": strings("the skills it requires"),
            "missing": strings("required skills not installed here"),
            "files": {"type": "object", "additionalProperties": {"type": "integer"}, "description": "path: bytes"},
            "installed_at": {"type": "number", "description": "after an install: when"},
            "replaces": {"type": "object", "nullable": True, "description": "the version there now (same source)"},
            "diff": {"type": "string", "description": "an update: SKILL.md installed -> this one (unified diff)"},
            "problems": strings("after an install: the SKILL.md files the daemon could not use"),
        },
    }
    refused = _json(
        ERROR, "refused: an unsafe archive, a SKILL.md that cannot be used, or out of scope; nothing written"
    )
    return {
        "/api/skills": {
            "get": {
                "summary": "every skill: its source and commit when installed from a repository, its uses and last "
                "use; and the SKILL.md files with problems",
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "skills": {"type": "array", "items": skill},
                                "problems": strings("SKILL.md files that cannot be used, and why"),
                            },
                        }
                    ),
                    "401": UNAUTHORIZED,
                },
            }
        },
        "/api/skills/install": {
            "post": {
                "summary": "a skill from a public repository: without confirm, a preview (nothing written); with "
                "confirm and the previewed commit, exactly that commit installed and the skills read again",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "required": ["source"],
                        "properties": {
                            "source": {"type": "string", "description": "OWNER/REPO/PATH, e.g. owner/skills/pdf"},
                            "ref": {"type": "string", "description": "a branch, tag or commit; absent: the default"},
                            "commit": {"type": "string", "description": "the sha a preview named (with confirm)"},
                            "confirm": {"type": "boolean", "description": "true: install commit"},
                        },
                    }
                ),
                "responses": {
                    "200": _json(preview),
                    "400": BAD_REQUEST,
                    "403": refused,
                    "404": _json(ERROR, "no such repository, ref, folder or SKILL.md"),
                    "409": _json(ERROR, "another skill holds that name"),
                    "503": _json(ERROR, "the repository's API cannot be reached or refused"),
                    "401": UNAUTHORIZED,
                },
            }
        },
        "/api/skills/{name}": {
            "delete": {
                "summary": "remove a skill installed from a repository (one written here is left)",
                "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {
                    "200": _json({"type": "object"}),
                    "404": _json(ERROR, "no installed skill of that name"),
                    "409": _json(ERROR, "the skill was written here, not installed"),
                    "401": UNAUTHORIZED,
                },
            }
        },
    }
