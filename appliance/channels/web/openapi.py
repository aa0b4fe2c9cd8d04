"""The OpenAPI 3.0 document of the JSON API (served at /api/openapi.json; the fuzz tests read it)."""

from __future__ import annotations

from typing import Any

from appliance import __version__
from appliance.channels.web.openapi_automation import automation_paths
from appliance.channels.web.openapi_parts import BAD_REQUEST, ERROR, UNAUTHORIZED, header, strings
from appliance.channels.web.openapi_parts import json_answer as _json
from appliance.channels.web.openapi_parts import json_body as _body
from appliance.channels.web.openapi_settings import settings_paths
from appliance.channels.web.scopes import SCOPE_HELP, needed_scope

DEVICE = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
OUT_OF_SCOPE = _json(ERROR, "the API token's scope does not cover this route; the error names the scope needed")


CHANNEL_DEFAULT = "whose conversation: absent, web for a browser session, api for a token (POST /api/chat's)"
SESSION_DEFAULT = "the session's name; absent, the channel's default session (web or api)"


def _object_get(summary: str) -> dict[str, Any]:
    """A GET that answers a JSON object and needs authentication."""
    return {"get": {"summary": summary, "responses": {"200": _json({"type": "object"}), "401": UNAUTHORIZED}}}


def _queued_post(summary: str, signature: tuple[str, str], payload: str, refusals: dict[str, str]) -> dict[str, Any]:
    """A platform's webhook POST: checked by one header, answered once the update is queued.

    ``signature`` is the header's name and description, ``payload`` what the body is, ``refusals`` the error
    answers by status besides a bad request and a body too large.
    """
    errors = {**refusals, "413": "the body is too large"}
    return {
        "summary": summary,
        "security": [],
        "parameters": [header(*signature)],
        "requestBody": _body({"type": "object", "description": payload}),
        "responses": {
            "200": _json({"type": "object"}, "queued; handled in the background"),
            "400": BAD_REQUEST,
            **{status: _json(ERROR, errors[status]) for status in sorted(errors)},
        },
    }


def _scan_and_try_paths() -> dict[str, Any]:
    """GET /api/devices/scan and POST /api/devices/try (channels/web/devices.py)."""
    scanned = {
        "type": "object",
        "required": ["bus", "backend", "addresses"],
        "properties": {
            "bus": {"type": "integer"},
            "backend": {"type": "string", "enum": ["real", "simulated"]},
            "range": strings("the addresses probed, first and last"),
            "addresses": {
                "type": "array",
                "description": "each address that answered, is owned by a kernel driver (busy), failed (error),"
                " or holds a configured device that did not answer (absent)",
                "items": {
                    "type": "object",
                    "properties": {
                        "address": {"type": "integer"},
                        "hex": {"type": "string"},
                        "state": {"type": "string", "enum": ["found", "busy", "error", "absent"]},
                        "probe": {"type": "string", "enum": ["quick write", "receive byte"]},
                        "drivers": strings("the drivers whose part can answer at this address"),
                        "configured": {"type": "string", "nullable": True},
                        "detail": {"type": "string", "nullable": True},
                    },
                },
            },
            "skipped": strings("addresses the bus adapter cannot probe"),
        },
    }
    definition = {
        "type": "object",
        "required": ["driver"],
        "description": "a device as a devices.NAME entry of the config defines it (driver, pin or bus and address...)",
        "properties": {"driver": {"type": "string"}},
        "additionalProperties": True,
    }
    bus = {"name": "bus", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0}}
    return {
        "/api/devices/scan": {
            "get": {
                "summary": "probe an I2C bus as i2cdetect does (quick write; receive byte at 0x30-0x37 and 0x50-0x5F;"
                " an address a kernel driver owns is left alone) and suggest the drivers that fit each answer",
                "parameters": [bus],
                "responses": {
                    "200": _json(scanned),
                    "400": BAD_REQUEST,
                    "502": _json(ERROR, "the bus cannot be opened"),
                    "401": UNAUTHORIZED,
                },
            }
        },
        "/api/devices/try": {
            "post": {
                "summary": "read a device that is not in the config yet once, or pulse a switch on then off once",
                "requestBody": _body(definition),
                "responses": {
                    "200": _json({"type": "object"}, "what was done and read"),
                    "400": _json(ERROR, "the definition is wrong: the answer's key names the setting"),
                    "403": _json(ERROR, "the definition asks for approval, or allows nothing to try"),
                    "429": _json(ERROR, "pulsed too often"),
                    "502": _json(ERROR, "the device or its bus did not answer"),
                    "401": UNAUTHORIZED,
                },
            }
        },
    }


def openapi_document() -> dict[str, Any]:
    """The API description."""
    session = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,64}$"}
    channel = {"type": "string", "enum": ["web", "api", "terminal"]}
    reply_record = {
        "type": "object",
        "required": ["text", "route", "reason", "actions", "timings"],
        "properties": {
            "text": {"type": "string"},
            "route": {"type": "string", "enum": ["intent", "local", "cloud", "local_fallback"]},
            "reason": {"type": "string"},
            "actions": {"type": "array", "items": {"type": "object"}},
            "timings": {"type": "object", "additionalProperties": {"type": "number"}},
            "model": {"type": "string"},
            "session": {"type": "string"},
            "finish_reason": {"type": "string"},
            "confidence": {"type": "object"},
            "why": {"type": "string", "description": "the routing decision's code"},
            "blocked": {"type": "string", "description": "why the cloud was not used although it was wanted"},
            "choices": strings("answers to the reply's question a person may tap (yes/no, or which device)"),
        },
    }
    chat_message = {
        "type": "object",
        "required": ["role", "content"],
        "properties": {
            "role": {"type": "string", "enum": ["system", "user", "assistant", "tool"]},
            "content": {"type": "string"},
        },
    }
    document: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "picoagent", "version": __version__, "description": "The appliance's LAN API."},
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a token from `picoagent tokens add NAME --scope SCOPE`; each operation's"
                    " x-scope names what it needs (any: every token; chat and read are apart, devices holds"
                    " both, admin everything) ("
                    + "; ".join(f"{name}: {text}" for name, text in SCOPE_HELP.items())
                    + ")",
                },
                "session": {"type": "apiKey", "in": "cookie", "name": "pa_session"},
            },
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {}, "fix": {"type": "string", "nullable": True}},
                },
                "ReplyRecord": reply_record,
            },
        },
        "security": [{"bearer": []}, {"session": []}],
        "paths": {
            "/healthz": {
                "get": {
                    "summary": "liveness",
                    "security": [],
                    "responses": {"200": _json({"type": "object"}), "503": _json({"type": "object"}, "degraded")},
                }
            },
            "/telegram/webhook": {
                "post": _queued_post(
                    "Telegram posts bot updates here (webhook mode: telegram.webhook_url)",
                    ("X-Telegram-Bot-Api-Secret-Token", "telegram.webhook_secret, as given to Telegram in setWebhook"),
                    "an Update",
                    {
                        "403": "wrong or missing secret token",
                        "404": "no webhook is configured",
                        "503": "the Telegram channel is not running; Telegram retries",
                    },
                )
            },
            "/whatsapp/webhook": {
                "get": {
                    "summary": "Meta's verification handshake for the WhatsApp webhook (whatsapp.verify_token)",
                    "security": [],
                    "parameters": [
                        {"name": "hub.mode", "in": "query", "required": True, "schema": {"type": "string"}},
                        {"name": "hub.verify_token", "in": "query", "required": True, "schema": {"type": "string"}},
                        {"name": "hub.challenge", "in": "query", "required": True, "schema": {"type": "string"}},
                    ],
                    "responses": {
                        "200": {"description": "hub.challenge, as text", "content": {"text/plain": {}}},
                        "403": _json(ERROR, "not a subscription, or the wrong verify token"),
                        "404": _json(ERROR, "the WhatsApp channel is not enabled"),
                    },
                },
                "post": _queued_post(
                    "Meta posts WhatsApp messages and statuses here (whatsapp.enabled)",
                    ("X-Hub-Signature-256", "sha256= and the hex HMAC-SHA256 of the raw body with whatsapp.app_secret"),
                    "a whatsapp_business_account payload",
                    {
                        "401": "missing or wrong signature",
                        "404": "the WhatsApp channel is not enabled",
                        "503": "the channel is stopping; Meta sends it again",
                    },
                ),
            },
            "/api/webhook/{name}": {
                "post": {
                    "summary": "a webhook bridge (webhooks.NAME) asks the assistant; the answer is the reply",
                    "security": [],
                    "parameters": [
                        {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                        header(
                            "X-Picoagent-Timestamp",
                            "when the request was signed, in Unix seconds (at most 5 minutes ago)",
                            {"type": "string", "pattern": "^[0-9]+$"},
                        ),
                        header(
                            "X-Picoagent-Signature",
                            'sha256= and the hex HMAC-SHA256 of timestamp + "." + body with'
                            " webhooks.NAME.secret; each signature is accepted once",
                        ),
                    ],
                    "requestBody": _body(
                        {
                            "type": "object",
                            "required": ["text"],
                            "properties": {
                                "text": {"type": "string", "minLength": 1, "maxLength": 8000},
                                "chat": {
                                    "type": "string",
                                    "pattern": "^[A-Za-z0-9_.:@-]{1,64}$",
                                    "description": "a conversation of this bridge (default: the bridge's one)",
                                },
                                "user": {"type": "string", "description": "who asks, as the history shows it"},
                            },
                        }
                    ),
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["text", "reply", "footer", "route", "reason"],
                                "properties": {
                                    "bridge": {"type": "string"},
                                    "chat": {"type": "string"},
                                    "text": {"type": "string", "description": "the answer as a chat shows it"},
                                    "reply": {"type": "string", "description": "the reply without the footer"},
                                    "footer": {"type": "string"},
                                    "route": {"type": "string", "description": "local, cloud, intent ... or command"},
                                    "reason": {"type": "string"},
                                    "model": {"type": "string"},
                                    "choices": {"type": "array", "items": {"type": "string"}},
                                },
                            }
                        ),
                        "400": BAD_REQUEST,
                        "401": _json(ERROR, "not signed, wrongly signed, or no such bridge"),
                        "403": _json(ERROR, "signed more than 5 minutes ago, or a replay of a request seen before"),
                        "413": _json(ERROR, "the body is too large"),
                        "503": _json(ERROR, "the assistant is stopping"),
                    },
                }
            },
            "/api/status": _object_get(
                "health, model, queue, recent replies, chart series; config: the last reload and the keys waiting "
                "for a restart (restart_needed)"
            ),
            "/api/chat": {
                "post": {
                    "summary": "answer one message; returns the reply record",
                    "requestBody": _body(
                        {
                            "type": "object",
                            "required": ["message"],
                            "properties": {
                                "message": {"type": "string", "minLength": 1, "maxLength": 8000},
                                "session": session,
                                "channel": {
                                    **channel,
                                    "description": "whose conversation: absent, api (terminal: `picoagent chat`'s)",
                                },
                                "route": {
                                    "type": "string",
                                    "enum": ["local", "cloud"],
                                    "description": "ask for a route (the cloud only when routing allows it)",
                                },
                            },
                        }
                    ),
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/ReplyRecord"}),
                        "400": BAD_REQUEST,
                        "401": UNAUTHORIZED,
                    },
                }
            },
            "/api/history": {
                "get": {
                    "summary": "the open conversation of a session, oldest first (a chat-scope token: its own only)",
                    "parameters": [
                        {"name": "session", "in": "query", "schema": session, "description": SESSION_DEFAULT},
                        {"name": "channel", "in": "query", "schema": channel, "description": CHANNEL_DEFAULT},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500}},
                    ],
                    "responses": {"200": _json({"type": "object"}), "400": BAD_REQUEST, "401": UNAUTHORIZED},
                }
            },
            "/api/reset": {
                "post": {
                    "summary": "start a new conversation for a session; no body: the caller's default one",
                    "parameters": [  # as for /api/history; the body's, when both are given
                        {"name": "session", "in": "query", "schema": session, "description": SESSION_DEFAULT},
                        {"name": "channel", "in": "query", "schema": channel, "description": CHANNEL_DEFAULT},
                    ],
                    "requestBody": _body(
                        {
                            "type": "object",
                            "properties": {
                                "session": {**session, "description": SESSION_DEFAULT},
                                "channel": {**channel, "description": CHANNEL_DEFAULT},
                            },
                        },
                        required=False,
                    ),
                    "responses": {"200": _json({"type": "object"}), "400": BAD_REQUEST, "401": UNAUTHORIZED},
                }
            },
            "/api/devices": _object_get("named devices with their readings"),
            "/api/devices/{name}": {
                "get": {
                    "summary": "read a device now",
                    "parameters": [DEVICE],
                    "responses": {
                        "200": _json({"type": "object"}),
                        "404": _json(ERROR, "unknown device"),
                        "502": _json(ERROR, "the device or its bus did not answer"),
                        "401": UNAUTHORIZED,
                    },
                },
                "post": {
                    "summary": "set a device (202 when it waits for a person's approval)",
                    "parameters": [DEVICE],
                    "requestBody": _body(
                        {
                            "type": "object",
                            "required": ["value"],
                            "properties": {"value": {"anyOf": [{"type": "string"}, {"type": "boolean"}]}},
                        }
                    ),
                    "responses": {
                        "200": _json({"type": "object"}),
                        "202": _json({"type": "object"}, "waiting for approval"),
                        "400": BAD_REQUEST,
                        "403": _json(ERROR, "not allowed"),
                        "404": _json(ERROR, "unknown device"),
                        "429": _json(ERROR, "rate-limited"),
                        "401": UNAUTHORIZED,
                    },
                },
            },
            **_scan_and_try_paths(),
            "/api/approvals": _object_get("device writes and tool calls waiting for a person"),
            "/api/approvals/{id}/{decision}": {
                "post": {
                    "summary": "approve (and run) or deny a pending write or tool call",
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                        {
                            "name": "decision",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string", "enum": ["approve", "deny"]},
                        },
                    ],
                    "responses": {
                        "200": _json({"type": "object"}),
                        "404": _json(ERROR, "unknown approval"),
                        "409": _json(ERROR, "expired or already decided"),
                        "401": UNAUTHORIZED,
                    },
                }
            },
            "/api/events": _object_get("the latest events: hardware, device writes, settings changes (kind config)"),
            "/api/notifications": _object_get(
                "proactive messages (events, cron results, heartbeat findings, finished tasks), newest first;"
                " ?after=ID: only newer ones; each says which channel it went to and whether it arrived"
            ),
            "/api/openapi.json": _object_get("this document"),
            "/api/session": _object_get("who is logged in, and the CSRF token for form posts"),
            "/v1/models": _object_get("OpenAI-compatible model list"),
            "/v1/chat/completions": {
                "post": {
                    "summary": "OpenAI-compatible chat completions served by the local model",
                    "requestBody": _body(
                        {
                            "type": "object",
                            "required": ["messages"],
                            "properties": {
                                "model": {"type": "string"},
                                "messages": {"type": "array", "minItems": 1, "items": chat_message},
                                "max_tokens": {"type": "integer", "minimum": 1, "maximum": 4096},
                                "temperature": {"type": "number", "minimum": 0, "maximum": 2},
                                "stream": {"type": "boolean"},
                                "seed": {"type": "integer"},
                            },
                        }
                    ),
                    "responses": {"200": _json({"type": "object"}), "400": BAD_REQUEST, "401": UNAUTHORIZED},
                }
            },
        },
    }
    document["paths"].update(automation_paths())
    document["paths"].update(settings_paths())
    for path, item in document["paths"].items():
        for method, operation in item.items():
            # The same table the middleware enforces, so the document cannot promise what is refused.
            operation["x-scope"] = needed_scope(method.upper(), path)
            if operation["x-scope"] != "any":
                operation["responses"].setdefault("403", OUT_OF_SCOPE)
    return document
