"""The OpenAPI paths of what the assistant remembers (memory.py): browse, search, edit, forget, forget about,
export; the conversations."""

from __future__ import annotations

from typing import Any

from appliance.channels.web.openapi_parts import BAD_REQUEST, ERROR, UNAUTHORIZED, json_answer, json_body

_nullable_int = {"type": "integer", "nullable": True}
MEMORY = {
    "type": "object",
    "required": ["id", "text", "kind", "source", "created_at"],
    "properties": {
        "id": {"type": "integer"},
        "text": {"type": "string"},
        "kind": {"type": "string", "enum": ["fact", "summary"]},
        "source": {"type": "string", "description": "where it came from: a channel, cli, or 'conversation N'"},
        "conversation_id": {**_nullable_int, "description": "the conversation it was taken from, while kept"},
        "channel": {
            "type": "string",
            "nullable": True,
            "description": "that conversation's channel (telegram, web, ...)",
        },
        "chat_id": {"type": "string", "nullable": True, "description": "and its chat"},
        "created_at": {"type": "number", "description": "Unix time it was first remembered (an edit keeps it)"},
        "importance": {"type": "number"},
    },
}
HIT = {
    "allOf": [MEMORY],
    "properties": {
        "score": {"type": "number", "description": "the fused rank score (higher first)"},
        "matched_by": {"type": "array", "items": {"type": "string", "enum": ["vector", "keyword"]}},
        "similarity": {"type": "number", "nullable": True, "description": "cosine similarity to the query by meaning"},
    },
}
FORGET = {
    "type": "object",
    "required": ["about"],
    "properties": {
        "about": {"type": "string", "description": "the subject: everything about it is found by meaning and words"},
        "confirm": {"type": "boolean", "description": "true: delete the ids; absent: only preview"},
        "ids": {"type": "array", "items": {"type": "integer"}, "description": "with confirm: the preview's ids"},
        "token": {"type": "string", "description": "with confirm: the preview's token (it names exactly those ids)"},
    },
}
FORGOTTEN = {
    "type": "object",
    "required": ["about", "deleted"],
    "properties": {
        "about": {"type": "string"},
        "deleted": {"type": "integer", "description": "how many were deleted (0 for a preview)"},
        "would_forget": {"type": "array", "items": HIT, "description": "the preview: what confirm would delete"},
        "token": {"type": "string", "description": "the preview's token, good for 10 minutes in this daemon"},
    },
}


def memory_paths() -> dict[str, Any]:
    """What it remembers (memory.py): browse, search, edit, forget, forget about, export; the conversations."""
    ident = [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}]
    missing = json_answer(ERROR, "no such memory or conversation")
    off = json_answer(ERROR, "memory is off on this appliance")
    query = [
        {"name": "q", "in": "query", "schema": {"type": "string"}, "description": "search by meaning and keyword"},
        {"name": "kind", "in": "query", "schema": {"type": "string", "enum": ["fact", "summary"]}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 500}},
        {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
    ]
    page = {
        "type": "object",
        "properties": {
            "total": {"type": "integer", "description": "a browse: how many there are (of that kind)"},
            "query": {"type": "string"},
            "mode": {"type": "string", "enum": ["hybrid", "keyword"], "description": "a search: how it ran"},
            "note": {"type": "string", "description": "a search by keyword only: why"},
            "memories": {"type": "array", "items": HIT},
        },
    }
    return {
        "/api/memory": {
            "get": {
                "summary": "the memories newest first, or the best matches for q (each with where it came from)",
                "parameters": query,
                "responses": {"200": json_answer(page), "400": BAD_REQUEST, "401": UNAUTHORIZED, "409": off},
            }
        },
        "/api/memory/export": {
            "get": {
                "summary": "MEMORY.md (format=md, the facts, as `picoagent memory export` writes it) or every "
                "memory as JSON (format=json)",
                "parameters": [{"name": "format", "in": "query", "schema": {"type": "string", "enum": ["md", "json"]}}],
                "responses": {
                    "200": {
                        "description": "MEMORY.md, or {memories: [...]}",
                        "content": {
                            "text/markdown": {"schema": {"type": "string"}},
                            "application/json": {"schema": {"type": "object"}},
                        },
                    },
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                },
            }
        },
        "/api/memory/forget": {
            "post": {
                "summary": '{"about": X}: what "everything about X" is (by meaning and words) and a token, '
                'nothing deleted; with its "ids", "token" and "confirm": true, exactly those deleted (vectors and '
                "keywords too)",
                "requestBody": json_body(FORGET),
                "responses": {
                    "200": json_answer(FORGOTTEN),
                    "400": BAD_REQUEST,
                    "401": UNAUTHORIZED,
                    "409": json_answer(ERROR, "the ids or token are not of a recent preview: nothing deleted"),
                },
            }
        },
        "/api/memory/{id}": {
            "patch": {
                "summary": "change a memory's text in place: its keywords and vectors made again (a text already "
                "remembered merges the two: the answer is that one)",
                "parameters": ident,
                "requestBody": json_body(
                    {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
                ),
                "responses": {"200": json_answer(MEMORY), "400": BAD_REQUEST, "404": missing, "401": UNAUTHORIZED},
            },
            "delete": {
                "summary": "forget one memory, its vectors and keywords with it",
                "parameters": ident,
                "responses": {"200": json_answer({"type": "object"}), "404": missing, "401": UNAUTHORIZED},
            },
        },
        "/api/conversations": {
            "get": {
                "summary": "the newest conversations: channel, chat, dates, number of messages",
                "responses": {"200": json_answer({"type": "object"}), "401": UNAUTHORIZED},
            }
        },
        "/api/conversations/{id}": {
            "delete": {
                "summary": "delete a conversation and its messages (its memories stay)",
                "parameters": ident,
                "responses": {"200": json_answer({"type": "object"}), "404": missing, "401": UNAUTHORIZED},
            }
        },
    }
