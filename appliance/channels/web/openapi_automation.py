"""The OpenAPI paths of scheduled jobs and tasks (/api/cron, /api/tasks), merged into openapi.py's document.

Kept apart so the main document stays readable; the shapes follow cron.py and tasks.py, whose checks
answer a body that does not fit with a 400 saying which field is wrong.
"""

from __future__ import annotations

from typing import Any

from appliance.channels.web.openapi_parts import BAD_REQUEST, ERROR, UNAUTHORIZED, strings
from appliance.channels.web.openapi_parts import json_answer as _json

ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
TASK_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}

JOB = {
    "type": "object",
    "description": "a scheduled job: what it does, when it runs next, how its last run went",
    "properties": {
        "id": {"type": "string"},
        "schedule": {"type": "string"},
        "does": {"type": "string", "description": "what it does, for people"},
        "next_run": {"type": "string", "nullable": True, "description": "ISO time in the scheduler's zone"},
        "last_run": {"type": "string", "nullable": True},
        "last_result": {"type": "string", "nullable": True},
        "last_ok": {"type": "boolean", "nullable": True},
        "deliver": {"type": "boolean"},
        "missed": {"type": "string", "enum": ["skip", "run_once"]},
        "paused": {"type": "boolean"},
        "source": {"type": "string", "enum": ["config", "file", "chat"]},
        "once": {"type": "boolean"},
        "created_by": {"type": "string"},
        "made": {"type": "string", "description": "where it comes from, in words (cron list and the page show it)"},
    },
}
NEW_JOB = {
    "type": "object",
    "required": ["schedule"],
    "description": 'exactly one of "message", "prompt", "task", or "device" with "value"',
    "properties": {
        "schedule": {
            "type": "string",
            "minLength": 1,
            "description": '"daily 07:30", "every 2h", "once 2026-11-24 19:00", "30 7 * * 1-5"',
        },
        "id": {"type": "string", "description": "a short name; made from what it does when left out"},
        "message": {"type": "string", "description": "a text delivered to the owner as it is, no model"},
        "prompt": {"type": "string", "description": "a message for the assistant; its reply is delivered"},
        "task": {"type": "string", "description": "a persistent task's goal to start"},
        "device": {"type": "string"},
        "value": {"type": "string", "description": "on, off, 40%"},
        "deliver": {"type": "boolean"},
        "missed": {"type": "string", "enum": ["skip", "run_once"]},
    },
}
TASK_STATE = {"type": "string", "enum": ["pending", "running", "paused", "done", "error", "cancelled"]}
TASK = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "goal": {"type": "string"},
        "state": TASK_STATE,
        "steps_done": {"type": "integer"},
        "max_steps": {"type": "integer"},
        "tokens_used": {"type": "integer"},
        "budget_tokens": {"type": "integer", "nullable": True},
        "route": {"type": "string"},
        "result": {"type": "string", "nullable": True},
        "error": {"type": "string", "nullable": True},
        "outside": strings("outside text its steps read (a web page...): its turns are untrusted for good"),
    },
}
NEW_TASK = {
    "type": "object",
    "required": ["goal"],
    "properties": {
        "goal": {"type": "string", "minLength": 1, "maxLength": 4000},
        "budget_tokens": {"type": "integer", "minimum": 1, "description": "stop cleanly after this many tokens"},
        "max_steps": {"type": "integer", "minimum": 1, "description": "at most tasks.max_steps_limit (400 past it)"},
        "route": {"type": "string", "enum": ["auto", "local", "cloud"]},
    },
}


def _job_action(summary: str, *, refused: str = "") -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": _json(JOB, "the job's row after it"),
        "404": _json(ERROR, "unknown job"),
        "401": UNAUTHORIZED,
    }
    if refused:
        responses["409"] = _json(ERROR, refused)
    return {"post": {"summary": summary, "parameters": [ID], "responses": responses}}


def _task_action(summary: str) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "parameters": [TASK_ID],
            "responses": {
                "200": _json(TASK, "the task after it"),
                "400": BAD_REQUEST,
                "404": _json(ERROR, "unknown task"),
                "409": _json(ERROR, "the task is not in a state that allows it; the error says which it is in"),
                "401": UNAUTHORIZED,
            },
        }
    }


def automation_paths() -> dict[str, Any]:
    """The /api/cron and /api/tasks paths."""
    return {
        "/api/cron": {
            "get": {
                "summary": "scheduled jobs with their next and last runs, paused or not, and where each comes from",
                "responses": {
                    "200": _json({"type": "object", "properties": {"jobs": {"type": "array", "items": JOB}}}),
                    "401": UNAUTHORIZED,
                },
            },
            "post": {
                "summary": "add a job (kept in the database, scheduled at once)",
                "requestBody": {"required": True, "content": {"application/json": {"schema": NEW_JOB}}},
                "responses": {
                    "201": _json(JOB, "the new job's row"),
                    "400": BAD_REQUEST,
                    "404": _json(ERROR, "no scheduler: the daemon is not running one"),
                    "409": _json(ERROR, "a job with that id exists"),
                    "401": UNAUTHORIZED,
                },
            },
        },
        "/api/cron/{id}/pause": _job_action("pause a job (any job) until resumed"),
        "/api/cron/{id}/resume": _job_action("resume a paused job"),
        "/api/cron/{id}/cancel": _job_action(
            "remove a job made in chat or over this API (its history stays)",
            refused="the job comes from the config or workspace/cron.yaml: pause it or remove it there",
        ),
        "/api/cron/{id}/run": {
            "post": {
                "summary": "run a scheduled job now",
                "parameters": [ID],
                "responses": {
                    "200": _json({"type": "object"}),
                    "404": _json(ERROR, "unknown job"),
                    "409": _json(ERROR, "the job is running now"),
                    "502": _json(ERROR, "the job failed"),
                    "401": UNAUTHORIZED,
                },
            }
        },
        "/api/cron/{id}/logs": {
            "get": {
                "summary": "a job's runs, newest first",
                "parameters": [
                    ID,
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}},
                ],
                "responses": {
                    "200": _json({"type": "object"}),
                    "400": BAD_REQUEST,
                    "404": _json(ERROR, "unknown job"),
                    "401": UNAUTHORIZED,
                },
            }
        },
        "/api/tasks": {
            "get": {
                "summary": "the newest tasks first, and how many there are in each state",
                "parameters": [
                    {"name": "state", "in": "query", "schema": TASK_STATE},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}},
                ],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "tasks": {"type": "array", "items": TASK},
                                "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                            },
                        }
                    ),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                },
            },
            "post": {
                "summary": "queue a task for the runner",
                "requestBody": {"required": True, "content": {"application/json": {"schema": NEW_TASK}}},
                "responses": {
                    "201": _json(TASK, "the queued task"),
                    "400": BAD_REQUEST,
                    "404": _json(ERROR, "no task runner: the daemon is not running one"),
                    "401": UNAUTHORIZED,
                },
            },
        },
        "/api/tasks/{id}/pause": _task_action("pause a pending or running task"),
        "/api/tasks/{id}/resume": _task_action("put a paused task back in the queue"),
        "/api/tasks/{id}/cancel": _task_action("cancel a task and its unfinished children"),
        "/api/tasks/{id}/logs": {
            "get": {
                "summary": "a task and its steps in order",
                "parameters": [TASK_ID],
                "responses": {
                    "200": _json({"type": "object"}),
                    "400": BAD_REQUEST,
                    "404": _json(ERROR, "unknown task"),
                    "401": UNAUTHORIZED,
                },
            }
        },
    }
