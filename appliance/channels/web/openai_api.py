"""An OpenAI-compatible endpoint served by the local model, so other programs on the LAN can use it.

``POST /v1/chat/completions`` (streamed as server-sent events, or not) and ``GET /v1/models``.
Requests share the model fairly with everyone else through the scheduler; a client that disconnects
stops its generation. No agent, tools or history here: the caller sends the whole conversation.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from aiohttp import web

from appliance.channels.web.auth import principal
from appliance.channels.web.http import read_json
from appliance.channels.web.state import MONITOR, RUNTIME, STREAMS
from appliance.errors import PicoagentError
from appliance.llm.base import ChatMessage, GenerationRequest

ROLES = ("system", "user", "assistant", "tool")
MAX_TOKENS = 4096

routes = web.RouteTableDef()  # the OpenAI-compatible routes, added to the app by app.build_app


class _Invalid(web.HTTPBadRequest):
    """A 400 in OpenAI's error shape."""

    def __init__(self, message: str, param: str | None = None) -> None:
        body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}
        super().__init__(text=json.dumps(body), content_type="application/json")


def _content(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts: only text parts can be served by a text model
        texts = []
        for part in value:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise _Invalid("only text content parts are supported", where)
            texts.append(part["text"])
        return "".join(texts)
    raise _Invalid("content must be a string or a list of text parts", where)


def parse_request(body: dict[str, Any], default_max: int) -> tuple[GenerationRequest, bool]:
    """A GenerationRequest and whether to stream, from an OpenAI chat request (400 when malformed)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _Invalid("messages must be a non-empty list", "messages")
    parsed = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise _Invalid(f"messages[{i}].role must be one of {', '.join(ROLES)}", f"messages[{i}].role")
        parsed.append(ChatMessage(message["role"], _content(message.get("content") or "", f"messages[{i}].content")))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", default_max))
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= MAX_TOKENS:
        raise _Invalid(f"max_tokens must be an integer from 1 to {MAX_TOKENS}", "max_tokens")
    temperature = body.get("temperature", 0.7)
    if not isinstance(temperature, int | float) or isinstance(temperature, bool) or not 0 <= temperature <= 2:
        raise _Invalid("temperature must be a number from 0 to 2", "temperature")
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and s for s in stop):
        raise _Invalid("stop must be a string or a list of up to 4 strings", "stop")
    seed = body.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise _Invalid("seed must be an integer", "seed")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _Invalid("stream must be true or false", "stream")
    request = GenerationRequest(
        messages=parsed, max_tokens=max_tokens, temperature=float(temperature), stop=stop, seed=seed
    )
    return request, stream


def _finish(reason: str) -> str:
    return "length" if reason == "length" else "stop"


@routes.post("/v1/chat/completions")
async def chat_completions(request: web.Request) -> web.StreamResponse:
    """OpenAI's chat completions, answered by the local model."""
    runtime = request.app[RUNTIME]
    body = await read_json(request)
    generation_request, stream = parse_request(body, runtime.config.agent.max_reply_tokens)
    who = principal(request)
    generation_request.client = f"openai:{who.name if who else 'anonymous'}"
    model_name = runtime.model.name
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    created = int(time.time())
    if not stream:
        g = await runtime.model_queue.generate(generation_request)
        return web.json_response(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": g.text},
                        "finish_reason": _finish(g.finish_reason),
                    }
                ],
                "usage": {
                    "prompt_tokens": g.prompt_tokens,
                    "completion_tokens": g.completion_tokens,
                    "total_tokens": g.prompt_tokens + g.completion_tokens,
                },
            }
        )

    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model_name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

    # Pieces arrive on the event loop (the model relays them there); None marks the end.
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    generation_request.on_token = lambda piece: queue.put_nowait(chunk({"content": piece}))
    future = asyncio.ensure_future(runtime.model_queue.generate(generation_request))
    request.app[STREAMS].track(future)
    future.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        await response.write(chunk({"role": "assistant", "content": ""}))
        while (item := await queue.get()) is not None:
            await response.write(item)  # a closed connection raises here, and the finally stops the model
        try:
            g = future.result()
        except PicoagentError as exc:
            error = {"error": {"message": exc.message, "type": "server_error", "param": None, "code": None}}
            await response.write(f"data: {json.dumps(error)}\n\n".encode())
        else:
            await response.write(chunk({}, _finish(g.finish_reason)))
        await response.write(b"data: [DONE]\n\n")
    finally:
        if not future.done():
            future.cancel()
    await response.write_eof()
    return response


@routes.get("/v1/models")
async def list_models(request: web.Request) -> web.Response:
    """The one model this endpoint serves."""
    runtime, started_at = request.app[RUNTIME], request.app[MONITOR].started_at
    return web.json_response(
        {
            "object": "list",
            "data": [
                {
                    "id": runtime.model.name,
                    "object": "model",
                    "created": int(started_at),
                    "owned_by": "local",
                }
            ],
        }
    )
