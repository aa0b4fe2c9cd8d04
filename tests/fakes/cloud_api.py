"""Fake OpenAI and Anthropic chat APIs on 127.0.0.1 that speak the vendors' real wire formats.

``FakeCloud("openai")`` serves ``POST /v1/chat/completions`` (so ``api_base`` is ``{url}/v1``) and
``FakeCloud("anthropic")`` serves ``POST /v1/messages`` (``api_base`` is ``{url}``). Both check the key
(``Authorization: Bearer`` / ``x-api-key``) and answer 401 with the vendor's error body when it is wrong,
stream server-sent events exactly as the vendors do (OpenAI: ``data: {chunk}`` lines, a usage chunk, then
``data: [DONE]``; Anthropic: ``event: ...`` + ``data: {...}`` from message_start to message_stop), or answer
one JSON body when the request says ``"stream": false``.

Tests enqueue replies (:meth:`FakeCloud.enqueue`: text and/or tool calls; default an echo), inject failures
for the next requests (:meth:`FakeCloud.fail_next`: ``429`` with retry-after, ``500``, ``hang``, ``drop``
(connection closed without an answer), ``malformed`` (an event that is not JSON)), slow the stream down
(:attr:`FakeCloud.chunk_delay_s`), and read :attr:`FakeCloud.requests` to assert what was sent (and, for a
stream, how much of it was written before the client went away).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import web

if TYPE_CHECKING:
    from appliance.llm.cloud import CloudProvider

Flavour = Literal["openai", "anthropic"]
FailureKind = Literal["429", "500", "hang", "drop", "malformed"]
_SECRET_HEADERS = {"authorization", "x-api-key"}


@dataclass
class RecordedRequest:
    """One request the client made (secret headers are recorded as "<redacted>")."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    outcome: str  # "ok", "401", or the injected failure
    at: float = field(default_factory=time.monotonic)
    events_sent: int = 0  # server-sent events written for it
    streamed_to_the_end: bool = False  # every event of the reply was written and the stream closed
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # the server is done streaming it, however that ended


@dataclass
class FakeReply:
    """One reply to give: text, tool calls ``{name, arguments}`` (arguments a dict), or both."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def _pieces(text: str) -> list[str]:
    """The text in token-like pieces: each word with its leading space."""
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)] if text else []


class FakeCloud:
    """A fake chat API that behaves like OpenAI's or Anthropic's and records every request."""

    def __init__(self, flavour: Flavour, *, api_key: str = "sk-test-secret-key-123") -> None:
        self.flavour = flavour
        self.api_key = api_key
        self.model = "fake-model"
        self.requests: list[RecordedRequest] = []
        self.replies: deque[FakeReply] = deque()
        self.chunk_delay_s = 0.0
        self._failures: deque[tuple[FailureKind, float]] = deque()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The server's root URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        """What the provider's api_base is set to."""
        return f"{self.url}/v1" if self.flavour == "openai" else self.url

    def provider(self, name: str = "fake", **kwargs: Any) -> CloudProvider:
        """A provider of this fake's flavour pointed at it, with fast retries."""
        from appliance.llm.cloud import AnthropicProvider, OpenAIProvider

        options: dict[str, Any] = {"api_key": self.api_key, "model": self.model, "backoff_s": 0.01, **kwargs}
        kind = OpenAIProvider if self.flavour == "openai" else AnthropicProvider
        return kind(name, api_base=self.api_base, **options)

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1."""
        app = web.Application()
        path = "/v1/chat/completions" if self.flavour == "openai" else "/v1/messages"
        app.router.add_post(path, self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Stop listening (hanging requests are cut)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeCloud:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- what tests call -------------------------------------------------------------------------

    def enqueue(self, text: str = "", tool_calls: list[dict[str, Any]] | None = None) -> None:
        """Give this reply to the next successful request."""
        self.replies.append(FakeReply(text, list(tool_calls or [])))

    def fail_next(self, kind: FailureKind, n: int = 1, *, retry_after: float = 1) -> None:
        """Make the next ``n`` requests fail this way (``retry_after`` is sent with 429)."""
        self._failures.extend([(kind, retry_after)] * n)

    # --- the server ------------------------------------------------------------------------------

    def _authorised(self, request: web.Request) -> bool:
        if self.flavour == "openai":
            return request.headers.get("Authorization") == f"Bearer {self.api_key}"
        return request.headers.get("x-api-key") == self.api_key

    def _error(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
        if self.flavour == "openai":
            body: dict[str, Any] = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        else:
            body = {"type": "error", "error": {"type": kind, "message": message}}
        return web.json_response(body, status=status, headers=headers)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        headers = {k: ("<redacted>" if k.lower() in _SECRET_HEADERS else v) for k, v in request.headers.items()}
        record = RecordedRequest(request.method, request.path, headers, body, "ok")
        self.requests.append(record)
        if self._failures:
            kind, retry_after = self._failures.popleft()
            record.outcome = kind
            if kind == "429":
                return self._error(429, "rate_limit_error", "Rate limit reached", {"retry-after": f"{retry_after:g}"})
            if kind == "500":
                return self._error(500, "api_error", "Internal server error")
            if kind == "hang":
                await asyncio.sleep(3600)  # cut by the client's timeout or by close()
            if kind == "drop":
                if request.transport is not None:
                    request.transport.abort()
                return web.Response(status=204)
            if kind == "malformed":
                resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
                await resp.prepare(request)
                await resp.write(b'data: {"choices": [{"delta": {"content": "Hel\n\n')
                await resp.write_eof()
                return resp
        if not self._authorised(request):
            record.outcome = "401"
            if self.flavour == "openai":
                shown = self.api_key[:3] + "*" * 8 + self.api_key[-4:]
                return self._error(401, "invalid_request_error", f"Incorrect API key provided: {shown}.")
            return self._error(401, "authentication_error", "invalid x-api-key")
        if self.flavour == "anthropic" and request.headers.get("anthropic-version") != "2023-06-01":
            return self._error(400, "invalid_request_error", "anthropic-version: header is required")
        if not isinstance(body, dict) or not body.get("messages"):
            return self._error(400, "invalid_request_error", "messages: field required")
        problem = self._tool_protocol_error(body["messages"])
        if problem:
            record.outcome = "400"
            return self._error(400, "invalid_request_error", problem)
        reply = self.replies.popleft() if self.replies else FakeReply(f"echo: {body['messages'][-1]['content']}")
        pieces = _pieces(reply.text)
        max_tokens = int(body.get("max_tokens") or 4096)
        truncated = len(pieces) > max_tokens
        pieces = pieces[:max_tokens]
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body["messages"]) + 3
        stream = bool(body.get("stream"))
        if self.flavour == "openai":
            finish = "length" if truncated else ("tool_calls" if reply.tool_calls else "stop")
            if not stream:
                return web.json_response(self._openai_json(reply, pieces, finish, prompt_tokens))
            events = self._openai_events(reply, pieces, finish, prompt_tokens, body)
        else:
            finish = "max_tokens" if truncated else ("tool_use" if reply.tool_calls else "end_turn")
            if not stream:
                return web.json_response(self._anthropic_json(reply, pieces, finish, prompt_tokens))
            events = self._anthropic_events(reply, pieces, finish, prompt_tokens)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        try:
            for event in events:
                await resp.write(event.encode())
                record.events_sent += 1
                if self.chunk_delay_s:
                    await asyncio.sleep(self.chunk_delay_s)
            await resp.write_eof()
            record.streamed_to_the_end = True
        except ConnectionError:
            pass  # the client went away in the middle of the stream: what it read is in events_sent
        finally:
            record.ended.set()
        return resp

    def _tool_protocol_error(self, messages: list[dict[str, Any]]) -> str:
        """What the real APIs refuse about tool messages: a result must answer a call of the turn before."""
        open_ids: set[str] = set()
        for i, message in enumerate(messages):
            role, content = message.get("role"), message.get("content")
            if self.flavour == "openai":
                if role == "tool":
                    if message.get("tool_call_id") not in open_ids:
                        return (
                            f"messages[{i}]: messages with role 'tool' must be a response to a preceding message"
                            " with 'tool_calls'"
                        )
                    continue
                open_ids = {call["id"] for call in message.get("tool_calls") or []} if role == "assistant" else set()
            else:
                if role == "system":
                    return f"messages[{i}]: unexpected role 'system' (use the top-level system parameter)"
                blocks = content if isinstance(content, list) else []
                for block in blocks:
                    if block.get("type") == "tool_result" and block.get("tool_use_id") not in open_ids:
                        return f"messages[{i}]: tool_result block(s) provided without a corresponding tool_use block"
                open_ids = {b["id"] for b in blocks if b.get("type") == "tool_use"} if role == "assistant" else set()
        return ""

    # --- OpenAI ----------------------------------------------------------------------------------

    def _openai_json(self, reply: FakeReply, pieces: list[str], finish: str, prompt: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(pieces) or None, "refusal": None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                }
                for i, c in enumerate(reply.tool_calls)
            ]
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": len(pieces), "total_tokens": prompt + len(pieces)},
        }

    def _openai_events(
        self, reply: FakeReply, pieces: list[str], finish: str, prompt: int, body: dict[str, Any]
    ) -> list[str]:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        created = int(time.time())

        def chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> str:
            data: dict[str, Any] = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.model,
                "system_fingerprint": "fp_fake",
                "choices": choices,
            }
            if include_usage:
                data["usage"] = usage  # null on every chunk but the last, as OpenAI sends it
            return f"data: {json.dumps(data)}\n\n"

        def choice(delta: dict[str, Any], finish_reason: str | None = None) -> list[dict[str, Any]]:
            return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]

        events = [chunk(choice({"role": "assistant", "content": "", "refusal": None}))]
        events += [chunk(choice({"content": piece})) for piece in pieces]
        for i, call in enumerate(reply.tool_calls):
            start = {
                "index": i,
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": call["name"], "arguments": ""},
            }
            events.append(chunk(choice({"tool_calls": [start]})))
            arguments = json.dumps(call["arguments"])
            for j in range(0, len(arguments), 7):  # OpenAI splits the arguments' JSON anywhere
                events.append(
                    chunk(choice({"tool_calls": [{"index": i, "function": {"arguments": arguments[j : j + 7]}}]}))
                )
        events.append(chunk(choice({}, finish)))
        if include_usage:
            usage = {"prompt_tokens": prompt, "completion_tokens": len(pieces), "total_tokens": prompt + len(pieces)}
            events.append(chunk([], usage))
        events.append("data: [DONE]\n\n")
        return events

    # --- Anthropic -------------------------------------------------------------------------------

    def _anthropic_json(self, reply: FakeReply, pieces: list[str], finish: str, prompt: int) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": "".join(pieces)}] if pieces else []
        content += [
            {"type": "tool_use", "id": f"toolu_{i}", "name": c["name"], "input": c["arguments"]}
            for i, c in enumerate(reply.tool_calls)
        ]
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": finish,
            "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": len(pieces)},
        }

    def _anthropic_events(self, reply: FakeReply, pieces: list[str], finish: str, prompt: int) -> list[str]:
        def event(kind: str, data: dict[str, Any]) -> str:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

        start: dict[str, Any] = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self.model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": 1},
        }
        events = [event("message_start", {"message": start}), event("ping", {})]
        index = 0
        if pieces:
            events.append(event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}))
            for piece in pieces:
                events.append(
                    event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
                )
            events.append(event("content_block_stop", {"index": 0}))
            index = 1
        for i, call in enumerate(reply.tool_calls, start=index):
            block = {"type": "tool_use", "id": f"toolu_{i}", "name": call["name"], "input": {}}
            events.append(event("content_block_start", {"index": i, "content_block": block}))
            arguments = json.dumps(call["arguments"])
            for j in range(0, len(arguments), 7):
                delta = {"type": "input_json_delta", "partial_json": arguments[j : j + 7]}
                events.append(event("content_block_delta", {"index": i, "delta": delta}))
            events.append(event("content_block_stop", {"index": i}))
        events.append(
            event(
                "message_delta",
                {"delta": {"stop_reason": finish, "stop_sequence": None}, "usage": {"output_tokens": len(pieces)}},
            )
        )
        events.append(event("message_stop", {}))
        return events
