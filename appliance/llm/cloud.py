"""Cloud chat models over HTTP (aiohttp only, no vendor SDKs): any OpenAI-compatible API, and Anthropic's.

Both providers stream (server-sent events), retry 429 / 5xx / connection errors with exponential backoff
(honouring ``retry-after``) inside one total timeout, and share a per-provider :class:`CircuitBreaker` so a
dead endpoint costs nothing after a few failures. Tools are passed as OpenAI function schemas
(``{name, description, parameters}``) to :meth:`CloudProvider.generate`; the calls the model makes come
back on :attr:`CloudGeneration.tool_calls` as ``{id, name, arguments}`` with the arguments JSON-parsed.

Tool calls travel natively both ways: an assistant :class:`ChatMessage` with ``tool_calls`` and the ``tool``
messages answering them (by ``tool_call_id``) become OpenAI's ``tool_calls`` / ``role: tool`` messages or
Anthropic's ``tool_use`` / ``tool_result`` blocks. A tool message without an id (the local model's text
convention) goes as user text. Not sent: ``prefix``, ``repeat_penalty`` and (for Anthropic) ``json_schema``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from appliance.config import ProviderConfig
from appliance.errors import Cancelled
from appliance.llm.base import ChatMessage, CloudGeneration, FinishReason, GenerationRequest
from appliance.llm.cloud_errors import CircuitBreaker, CloudError, CloudMalformed, CloudRefused, CloudUnavailable

if TYPE_CHECKING:
    import aiohttp  # imported when a provider first connects: a one-shot `chat -m` never pays ~0.1 s for it

log = logging.getLogger(__name__)

_CANCEL_POLL_S = 0.05  # how often a hung request looks at request.cancel (a threading.Event)
_MAX_BACKOFF_S = 20.0


class _Retryable(Exception):
    """An attempt failed in a way another attempt may not (429, 5xx, network)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class _Reply:
    """What one generation has gathered so far (kept outside the attempt so a cancel keeps the partial text)."""

    started: float
    parts: list[str] = field(default_factory=list)
    finish: FinishReason = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    first_at: float = 0.0
    last_at: float = 0.0
    tools: dict[int, dict[str, str]] = field(default_factory=dict)  # index -> id, name, raw JSON arguments
    done: bool = False

    @property
    def streamed(self) -> bool:
        """Whether anything reached on_token (then a retry would repeat it)."""
        return bool(self.parts)

    def text(self, piece: str, on_token: Callable[[str], None] | None) -> None:
        """Record and pass on one piece of text."""
        if not piece:
            return
        now = time.monotonic()
        self.first_at = self.first_at or now
        self.last_at = now
        self.parts.append(piece)
        if on_token is not None:
            on_token(piece)

    def tool(self, index: int, *, id: str = "", name: str = "", arguments: str = "") -> None:
        """Merge one fragment of a tool call."""
        call = self.tools.setdefault(index, {"id": "", "name": "", "arguments": ""})
        call["id"] = call["id"] or id
        call["name"] = call["name"] or name
        call["arguments"] += arguments

    def restart(self) -> None:
        """Forget a failed attempt's partial state (only called while no text was streamed)."""
        self.tools.clear()
        self.finish, self.prompt_tokens, self.completion_tokens, self.done = "stop", 0, 0, False

    def generation(self, provider: str, finish: FinishReason | None = None) -> CloudGeneration:
        """The finished CloudGeneration (a cancelled one drops its tool calls: their arguments are cut short)."""
        calls = []
        for _, call in sorted(self.tools.items()) if finish != "cancelled" else ():
            try:
                arguments = json.loads(call["arguments"]) if call["arguments"].strip() else {}
            except json.JSONDecodeError:
                raise CloudMalformed(
                    f"{provider}: tool call {call['name']!r} has arguments that are not JSON"
                ) from None
            calls.append({"id": call["id"], "name": call["name"], "arguments": arguments})
        end = time.monotonic()
        return CloudGeneration(
            text="".join(self.parts),
            finish_reason=finish or self.finish,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens or len(self.parts),
            ttft_s=(self.first_at - self.started) if self.first_at else 0.0,
            decode_s=(self.last_at - self.first_at) if self.first_at else 0.0,
            total_s=end - self.started,
            tool_calls=calls,
        )


def _retry_after(value: str | None) -> float | None:
    """Seconds from a retry-after header (HTTP dates are rare from APIs and treated as absent)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


class CloudProvider:
    """What both providers share: retries, the total timeout, the breaker, cancellation and SSE reading."""

    default_fix = "check the provider's name, api_base and model"

    def __init__(
        self,
        name: str,
        *,
        api_base: str,
        api_key: str,
        model: str,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        breaker_threshold: int = 5,
        breaker_cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        stream: bool = True,
        session_factory: Callable[[], aiohttp.ClientSession] | None = None,
    ) -> None:
        self.name = name
        self.api_base = api_base.rstrip("/")
        self._api_key = api_key
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.stream = stream
        self.breaker = CircuitBreaker(breaker_threshold, breaker_cooldown_s, clock)
        self._session_factory = session_factory
        self._session: aiohttp.ClientSession | None = None

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}({self.name!r}, model={self.model!r}, api_base={self.api_base!r})"

    # --- what each API defines ----------------------------------------------------------------

    def _url(self) -> str:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _body(self, request: GenerationRequest, tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
        raise NotImplementedError

    def _on_event(self, event: str, data: str, reply: _Reply, request: GenerationRequest) -> None:
        """Fold one SSE event into the reply (set ``reply.done`` at the end of the stream)."""
        raise NotImplementedError

    def _on_json(self, body: dict[str, Any], reply: _Reply, request: GenerationRequest) -> None:
        """Fold a whole non-streamed answer into the reply."""
        raise NotImplementedError

    def _error_message(self, body: str) -> str:
        """The provider's own explanation from an error body (both APIs nest it in ``error.message``)."""
        try:
            error = json.loads(body).get("error")
            message = error.get("message") if isinstance(error, dict) else error
        except (ValueError, AttributeError):
            message = None
        return str(message or body[:200] or "no explanation")

    # --- the shared part ------------------------------------------------------------------------

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """An estimate (about four characters a token, plus framing): the real tokenizer is the provider's."""
        return sum(len(m.content) // 4 + 4 for m in messages)

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def generate(self, request: GenerationRequest, *, tools: Sequence[dict[str, Any]] = ()) -> CloudGeneration:
        """Run one generation, streaming text to ``on_token``; ``tools`` are OpenAI function schemas."""
        if request.cancel.is_set():
            raise Cancelled("cancelled before it started")
        self.breaker.check(self.name)
        reply = _Reply(started=time.monotonic())
        # The work runs in its own task so a cancel (a threading.Event) is noticed even while a read hangs.
        task = asyncio.create_task(self._with_retries(request, tools, reply))
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=_CANCEL_POLL_S)
                if request.cancel.is_set() and not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, CloudError):
                        await task
                    return reply.generation(self.name, "cancelled")
            result = task.result()
        except (CloudUnavailable, CloudMalformed):
            self.breaker.failure(self.name)
            raise
        finally:
            task.cancel()
        self.breaker.success(self.name)
        return result

    async def _with_retries(
        self, request: GenerationRequest, tools: Sequence[dict[str, Any]], reply: _Reply
    ) -> CloudGeneration:
        deadline = time.monotonic() + self.timeout_s
        try:
            async with asyncio.timeout(self.timeout_s):
                for attempt in range(self.max_retries + 1):
                    try:
                        return await self._attempt(request, tools, reply)
                    except _Retryable as exc:
                        delay = exc.retry_after if exc.retry_after is not None else self.backoff_s * 2**attempt
                        delay = min(delay, _MAX_BACKOFF_S)
                        # Text already streamed cannot be taken back, and a wait past the deadline is pointless.
                        if reply.streamed or attempt == self.max_retries or time.monotonic() + delay > deadline:
                            raise CloudUnavailable(
                                f"{self.name}: {exc} (after {attempt + 1} attempt{'s' * (attempt != 0)})",
                                fix="try again later, or check the network and the provider's status page",
                            ) from None
                        log.info("%s: %s; retry %d in %.1f s", self.name, exc, attempt + 1, delay)
                        await asyncio.sleep(delay)
        except TimeoutError:
            raise CloudUnavailable(
                f"{self.name}: no complete answer within {self.timeout_s:g} s",
                fix="try again later, or raise the provider's timeout",
            ) from None
        raise AssertionError("unreachable")  # the loop returns or raises

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    async def _attempt(
        self, request: GenerationRequest, tools: Sequence[dict[str, Any]], reply: _Reply
    ) -> CloudGeneration:
        import aiohttp

        if self._session is None or self._session.closed:
            self._session = (self._session_factory or aiohttp.ClientSession)()
        body = self._body(request, tools)
        reply.restart()
        try:
            async with self._session.post(self._url(), json=body, headers=self._headers()) as resp:
                if resp.status != 200:
                    await self._raise_for(resp)
                if resp.content_type == "text/event-stream":
                    async for event, data in self._events(resp):
                        if request.cancel.is_set():
                            return reply.generation(self.name, "cancelled")  # leaving the block closes the response
                        self._on_event(event, data, reply, request)
                        if reply.done:
                            break
                    if not reply.done:
                        raise _Retryable("the stream ended before the reply was complete")
                else:
                    try:
                        answer = json.loads(await resp.text())
                    except ValueError:
                        raise CloudMalformed(f"{self.name}: the answer is not JSON") from None
                    if not isinstance(answer, dict):
                        raise CloudMalformed(f"{self.name}: the answer is not a JSON object")
                    self._on_json(answer, reply, request)
        except aiohttp.ClientError as exc:
            # The exception text can hold the URL but never the key (it travels in a header).
            raise _Retryable(f"network error: {type(exc).__name__}: {self._redact(str(exc))}") from None
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise CloudMalformed(f"{self.name}: the answer does not have the expected shape ({exc!r})") from None
        return reply.generation(self.name)

    async def _raise_for(self, resp: aiohttp.ClientResponse) -> None:
        message = self._redact(self._error_message(await resp.text()))
        if resp.status == 429 or resp.status >= 500 or resp.status == 408:
            raise _Retryable(f"HTTP {resp.status}: {message}", _retry_after(resp.headers.get("retry-after")))
        fixes = {
            401: f"check the API key of cloud provider {self.name!r} (it was rejected)",
            403: f"the API key of {self.name!r} has no access to model {self.model!r}: check the account",
            404: f"check api_base ({self.api_base}) and model ({self.model!r}) of {self.name!r}",
        }
        raise CloudRefused(
            f"{self.name}: the provider refused the request (HTTP {resp.status}): {message}",
            fix=fixes.get(resp.status, self.default_fix),
        )

    async def _events(self, resp: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, str]]:
        """Server-sent events as (event, data); ``event`` defaults to "message" as the SSE spec says."""
        event = "message"
        data: list[str] = []
        async for raw in resp.content:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line:
                if data:
                    yield event, "\n".join(data)
                event, data = "message", list[str]()
            elif line.startswith(":"):
                continue  # a comment (keep-alive)
            else:
                key, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if key == "event":
                    event = value
                elif key == "data":
                    data.append(value)
        if data:
            yield event, "\n".join(data)

    def _json(self, data: str) -> dict[str, Any]:
        try:
            value = json.loads(data)
        except ValueError:
            raise CloudMalformed(f"{self.name}: a streamed event is not JSON: {data[:80]!r}") from None
        if not isinstance(value, dict):
            raise CloudMalformed(f"{self.name}: a streamed event is not a JSON object")
        return value


def _openai_message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        if message.tool_call_id:
            return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
        return {"role": "user", "content": f"Tool result:\n{message.content}"}
    if message.tool_calls:
        calls = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"], ensure_ascii=False)},
            }
            for call in message.tool_calls
        ]
        return {"role": "assistant", "content": message.content or None, "tool_calls": calls}
    return message.as_dict()


def _anthropic_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Messages as Anthropic takes them: tool use and results as content blocks, tool results in user turns."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool" and message.tool_call_id:
            block = {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)  # the results of one turn's calls share one user message
            else:
                out.append({"role": "user", "content": [block]})
        elif message.role == "tool":
            out.append({"role": "user", "content": f"Tool result:\n{message.content}"})
        elif message.tool_calls:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
            blocks += [
                {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["arguments"]}
                for call in message.tool_calls
            ]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append(message.as_dict())
    return out


class OpenAIProvider(CloudProvider):
    """Any OpenAI-compatible ``{api_base}/chat/completions`` (OpenAI, OpenRouter, Groq, vLLM, llama.cpp server)."""

    _finish: ClassVar[dict[str, FinishReason]] = {
        "length": "length"
    }  # stop, tool_calls, content_filter: the reply ended

    def _url(self) -> str:
        return f"{self.api_base}/chat/completions"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"}

    def _body(self, request: GenerationRequest, tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_openai_message(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stream": self.stream,
        }
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if request.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": request.json_schema},
            }
        if tools:
            body["tools"] = [{"type": "function", "function": dict(tool)} for tool in tools]
        return body

    def _on_event(self, event: str, data: str, reply: _Reply, request: GenerationRequest) -> None:
        if data.strip() == "[DONE]":
            reply.done = True
            return
        chunk = self._json(data)
        if isinstance(chunk.get("error"), dict):
            raise _Retryable(f"error in the stream: {self._redact(str(chunk['error'].get('message')))}")
        if chunk.get("usage"):
            reply.prompt_tokens = int(chunk["usage"].get("prompt_tokens") or 0)
            reply.completion_tokens = int(chunk["usage"].get("completion_tokens") or 0)
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            reply.text(delta.get("content") or "", request.on_token)
            for call in delta.get("tool_calls") or []:
                function = call.get("function") or {}
                reply.tool(
                    int(call.get("index", 0)),
                    id=call.get("id") or "",
                    name=function.get("name") or "",
                    arguments=function.get("arguments") or "",
                )
            if choice.get("finish_reason"):
                reply.finish = self._finish.get(choice["finish_reason"], "stop")

    def _on_json(self, body: dict[str, Any], reply: _Reply, request: GenerationRequest) -> None:
        choice = body["choices"][0]
        message = choice["message"]
        reply.text(message.get("content") or "", request.on_token)
        for index, call in enumerate(message.get("tool_calls") or []):
            function = call["function"]
            reply.tool(index, id=call.get("id") or "", name=function["name"], arguments=function.get("arguments") or "")
        reply.finish = self._finish.get(choice.get("finish_reason") or "stop", "stop")
        usage = body.get("usage") or {}
        reply.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        reply.completion_tokens = int(usage.get("completion_tokens") or 0)


class AnthropicProvider(CloudProvider):
    """Anthropic's Messages API: ``POST {api_base}/v1/messages`` (api_base is usually https://api.anthropic.com)."""

    _finish: ClassVar[dict[str, FinishReason]] = {"max_tokens": "length"}  # end_turn, stop_sequence, tool_use: ended

    def _url(self) -> str:
        return f"{self.api_base}/v1/messages"

    def _headers(self) -> dict[str, str]:
        return {"x-api-key": self._api_key, "anthropic-version": "2023-06-01"}

    def _body(self, request: GenerationRequest, tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": _anthropic_messages(request.messages),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "stream": self.stream,
        }
        if system:
            body["system"] = system  # Anthropic takes the system prompt at the top level, not as a message
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        if tools:
            body["tools"] = [
                {
                    "name": tool["name"],
                    "description": tool.get("description", ""),
                    "input_schema": tool.get("parameters") or {"type": "object", "properties": {}},
                }
                for tool in tools
            ]
        return body

    def _on_event(self, event: str, data: str, reply: _Reply, request: GenerationRequest) -> None:
        message = self._json(data)
        kind = message.get("type", event)
        if kind == "message_start":
            usage = message["message"].get("usage") or {}
            reply.prompt_tokens = int(usage.get("input_tokens") or 0)
        elif kind == "content_block_start":
            block = message["content_block"]
            if block.get("type") == "tool_use":
                reply.tool(int(message["index"]), id=block.get("id") or "", name=block.get("name") or "")
            else:
                reply.text(block.get("text") or "", request.on_token)
        elif kind == "content_block_delta":
            delta = message["delta"]
            if delta.get("type") == "text_delta":
                reply.text(delta.get("text") or "", request.on_token)
            elif delta.get("type") == "input_json_delta":
                reply.tool(int(message["index"]), arguments=delta.get("partial_json") or "")
        elif kind == "message_delta":
            stop = (message.get("delta") or {}).get("stop_reason")
            if stop:
                reply.finish = self._finish.get(stop, "stop")
            usage = message.get("usage") or {}
            reply.completion_tokens = int(usage.get("output_tokens") or reply.completion_tokens)
        elif kind == "message_stop":
            reply.done = True
        elif kind == "error":
            # Mid-stream errors are mostly overloaded_error: the next attempt may well succeed.
            error = message.get("error") or {}
            raise _Retryable(f"error in the stream: {self._redact(str(error.get('message')))}")
        # ping, content_block_stop and unknown future events carry nothing we need

    def _on_json(self, body: dict[str, Any], reply: _Reply, request: GenerationRequest) -> None:
        for index, block in enumerate(body["content"]):
            if block["type"] == "text":
                reply.text(block["text"], request.on_token)
            elif block["type"] == "tool_use":
                reply.tool(index, id=block.get("id") or "", name=block["name"], arguments=json.dumps(block["input"]))
        reply.finish = self._finish.get(body.get("stop_reason") or "end_turn", "stop")
        usage = body.get("usage") or {}
        reply.prompt_tokens = int(usage.get("input_tokens") or 0)
        reply.completion_tokens = int(usage.get("output_tokens") or 0)


def make_provider(name: str, config: ProviderConfig, **options: Any) -> CloudProvider:
    """The provider ``providers.<name>`` describes (no connection is made until the first request).

    ``options`` override the client's settings (``timeout_s``, ``max_retries``: doctor asks once, briefly).
    """
    kind = OpenAIProvider if config.type == "openai" else AnthropicProvider
    settings: dict[str, Any] = {"timeout_s": config.timeout_s, **options}
    return kind(name, api_base=config.api_base, api_key=config.api_key, model=config.model, **settings)


PROVIDER_PROBE_S = 10.0  # one question to check a provider (doctor, the setup page): no retries, at most this long


async def ask_once(name: str, provider: ProviderConfig) -> float:
    """Ask the provider for one token (doctor, `routing providers --check`, the setup page's key check): the
    seconds it took, or the CloudError that says what is wrong (a refused key, an unknown model, no network)."""
    client = make_provider(name, provider, timeout_s=min(provider.timeout_s, PROVIDER_PROBE_S), max_retries=0)
    try:
        reply = await client.generate(GenerationRequest([ChatMessage("user", "Say OK.")], max_tokens=1))
    finally:
        await client.close()
    return reply.total_s


def cost_usd(config: ProviderConfig, prompt_tokens: int, completion_tokens: int) -> float:
    """What a request cost by the provider's price table (USD per million tokens)."""
    return (prompt_tokens * config.price_in_per_mtok + completion_tokens * config.price_out_per_mtok) / 1e6
