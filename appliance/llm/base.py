"""What every language model provider speaks: messages in, a :class:`Generation` out."""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

Role = Literal["system", "user", "assistant", "tool"]
# aborted: the request's should_stop said the answer was going nowhere (routing's early abort)
FinishReason = Literal["stop", "length", "cancelled", "timeout", "aborted"]


@dataclass(frozen=True)
class ChatMessage:
    """One message of a chat prompt."""

    role: Role
    content: str
    # Native tool calling (cloud providers): the assistant's calls ``{id, name, arguments}`` (arguments a
    # dict), and on a ``tool`` message the id of the call it answers. The local model reads tool calls as text.
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str = ""

    def as_dict(self) -> dict[str, str]:
        """The OpenAI-style mapping chat templates expect."""
        return {"role": self.role, "content": self.content}


@dataclass
class GenerationRequest:
    """Everything one generation needs besides the model."""

    messages: Sequence[ChatMessage]
    max_tokens: int = 256
    temperature: float = 0.2
    repeat_penalty: float = 1.1  # >1 discourages the loops small models fall into
    stop: Sequence[str] = ()
    json_schema: dict[str, Any] | None = None  # constrain the output to this schema (a grammar)
    prefix: str = ""  # text the reply is forced to start with (already part of the reply)
    seed: int | None = None
    # Called with each new piece of text: on the event loop by generate(), on the worker by generate_sync().
    on_token: Callable[[str], None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    client: str = ""  # who asked: the model is shared fairly between clients
    on_queue: Callable[[int], None] | None = None  # told the queue position while waiting (0 = next)
    # Asked after every token with the log-probabilities so far (on the worker thread): True stops the
    # generation with finish_reason "aborted". Routing uses it to give up on an answer whose confidence collapsed.
    should_stop: Callable[[Sequence[float]], bool] | None = None


@dataclass
class Generation:
    """A finished generation: its text, why it ended, its timings and its token probabilities."""

    text: str
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens found in the KV cache (not re-read)
    queued_s: float = 0.0
    ttft_s: float = 0.0  # from the start of work to the first token
    decode_s: float = 0.0  # from the first token to the last
    total_s: float = 0.0
    token_logprobs: list[float] = field(default_factory=list)  # log p of each sampled token
    token_entropies: list[float] = field(default_factory=list)  # entropy (nats) of each step

    @property
    def decode_tps(self) -> float:
        """Decode speed: tokens after the first, per second."""
        return (self.completion_tokens - 1) / self.decode_s if self.completion_tokens > 1 and self.decode_s else 0.0

    def confidence(self) -> dict[str, float]:
        """A summary of the model's own certainty about this reply (routing reads it)."""
        if not self.token_logprobs:
            return {"mean_prob": 0.0, "min_prob": 0.0, "mean_entropy": 0.0}
        n = len(self.token_logprobs)
        return {
            "mean_prob": round(sum(math.exp(lp) for lp in self.token_logprobs) / n, 4),
            "min_prob": round(math.exp(min(self.token_logprobs)), 4),
            "mean_entropy": round(sum(self.token_entropies) / max(1, len(self.token_entropies)), 4),
        }


@dataclass
class CloudGeneration(Generation):
    """A Generation plus the tool calls the model made: ``{id, name, arguments}`` (arguments parsed).

    Here rather than in llm/cloud.py: the agent tells a cloud answer by its type, and a daemon with no cloud
    provider never imports the cloud module.
    """

    tool_calls: list[dict[str, Any]] = field(default_factory=list)


class ChatModel(Protocol):
    """A provider: the local worker, or a cloud provider (llm/cloud.py)."""

    @property
    def name(self) -> str:
        """The model's name as shown to people."""
        ...

    async def generate(self, request: GenerationRequest) -> Generation:
        """Run one generation; raise ModelError subclasses for expected failures."""
        ...

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """How many prompt tokens these messages take."""
        ...


class ServedModel(ChatModel, Protocol):
    """A model the appliance owns and serves: the local worker (or, in benchmarks, a scripted one)."""

    path: Path
    threads_used: int

    @property
    def loaded(self) -> bool:
        """Whether it is in memory."""
        ...

    async def load(self) -> None:
        """Bring it into memory."""
        ...

    def close(self) -> None:
        """Free it."""
        ...


T = TypeVar("T")


async def await_worker(future: concurrent.futures.Future[T]) -> T:
    """The answer of a model worker's job (a thread or the runner), awaited without cancelling the job itself.

    The caller's cancel reaches the job through ``GenerationRequest.cancel`` instead: the job ends at its next
    token. The answer it ends with then has no reader, and an error among them (the runner stopped at
    SIGTERM before it answered the cancel: ``ModelCrashed``) would be logged by asyncio as the ERROR "Future
    exception was never retrieved"; it is retrieved here, since nobody is left to care.
    """
    answer = asyncio.wrap_future(future)
    try:
        return await asyncio.shield(answer)
    except asyncio.CancelledError:
        answer.add_done_callback(_nobody_waits)
        raise


def on_the_loop(on_token: Callable[[str], None], cancel: threading.Event) -> Callable[[str], None]:
    """``on_token`` called from a worker's thread, run on the running event loop's thread, and never after
    ``cancel`` (checked as a piece leaves the worker and again as it arrives): channels then write to sockets
    and terminals from it without locks. Call it on the event loop."""
    loop = asyncio.get_running_loop()

    def deliver(piece: str) -> None:
        if not cancel.is_set():
            on_token(piece)

    def relay(piece: str) -> None:
        if not cancel.is_set():
            loop.call_soon_threadsafe(deliver, piece)

    return relay


def _nobody_waits(answer: asyncio.Future[Any]) -> None:
    if not answer.cancelled():
        answer.exception()  # marks it retrieved
