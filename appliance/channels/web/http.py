"""The web edge: JSON request bodies in, JSON errors out, and the one place an error becomes a status.

Route modules raise: an expected failure (a ``PicoagentError``) carries its HTTP status as a class
attribute (``http_status``, see ``appliance/errors.py``), so ``errors_middleware`` answers
``{"error": message, "fix": fix}`` with that status and never reads the message to choose one.
Unexpected exceptions become a 500 without a traceback. This module imports no route module and no
web state, so every route module (and ``app.py``, which only assembles them) can import it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from appliance.errors import NotFound, PicoagentError
from appliance.metrics import Counter

log = logging.getLogger(__name__)

API_PREFIXES = ("/api/", "/v1/")
MAX_BODY = 1_000_000  # the largest request body read_json (and the app) accepts


def json_error(status: int, message: str, **extra: Any) -> web.Response:
    """A JSON error body: {"error": message, ...}."""
    return web.json_response({"error": message, **extra}, status=status)


Part = TypeVar("Part")


def running(part: Part | None, missing: str, fix: str) -> Part:
    """``part`` (the scheduler, the task store: what runs only in the daemon), or a 404 saying where it runs."""
    if part is None:
        raise NotFound(missing, fix=fix)
    return part


def bad_request(message: str) -> web.HTTPBadRequest:
    """A 400 with a JSON error body, to raise where a response cannot be returned."""
    return web.HTTPBadRequest(text=json.dumps({"error": message}), content_type="application/json")


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request's JSON object body, or a 400 that says what is wrong with it."""
    if request.content_length and request.content_length > MAX_BODY:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=request.content_length)
    try:
        body = await request.json(loads=json.loads)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise bad_request(f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    return body


async def read_optional_json(request: web.Request) -> dict[str, Any]:
    """Like :func:`read_json`, for a route whose body is optional: no body at all is ``{}``."""
    if not request.body_exists or request.content_length == 0:
        return {}
    return await read_json(request)


def errors_middleware(requests: Counter) -> Middleware:
    """The middleware translating errors to JSON, counting every answer in ``requests`` by status class."""

    @web.middleware
    async def translate_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
        except web.HTTPException as exc:
            requests.inc(1, f"{exc.status // 100}xx")
            if exc.status >= 400 and request.path.startswith(API_PREFIXES) and exc.content_type != "application/json":
                # aiohttp's own 404/405/413 are plain text; API clients get JSON like every other error.
                error = json_error(exc.status, exc.reason)
                for header in ("Allow", "Retry-After"):
                    if header in exc.headers:
                        error.headers[header] = exc.headers[header]
                return error
            raise
        except PicoagentError as exc:
            response = json_error(exc.http_status, exc.message, fix=exc.fix)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("unexpected error in %s %s", request.method, request.path)
            response = json_error(500, "internal error; the log has the details")
        requests.inc(1, f"{response.status // 100}xx")
        return response

    return translate_errors
