"""A scripted instant model: answers at once with replies it was given, and records what it was asked.

It measures everything around the model (HTTP, database, prompt assembly, queueing) in the
benchmarks, where the real model's own time would drown the figure, and it plays a model in tests that
need an exact reply or tool call (the agent loop, prompt injection, routing): what it answers is what
the test enqueued, so those tests check the code around the model, never a model's answer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from pathlib import Path

from appliance.llm.base import ChatMessage, FinishReason, Generation, GenerationRequest


class ScriptedModel:
    """A ChatModel whose replies are enqueued ahead (default: an echo of the last message)."""

    def __init__(self, name: str = "scripted") -> None:
        self.name = name
        self.path = Path("/dev/null")
        self.loaded = True
        self.threads_used = 0
        self.replies: deque[str] = deque()
        self.history: list[GenerationRequest] = []

    def enqueue(self, *replies: str) -> None:
        """Replies to give, in order, before falling back to echoing."""
        self.replies.extend(replies)

    async def load(self) -> None:
        """Nothing to load."""

    def close(self) -> None:
        """Nothing to free."""

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """About one token per four characters."""
        return sum(len(m.content) for m in messages) // 4 + 1

    async def generate(self, request: GenerationRequest) -> Generation:
        """Answer at once, streaming the reply word by word to ``on_token``."""
        self.history.append(request)
        text = self.replies.popleft() if self.replies else f"echo: {request.messages[-1].content}"
        words = text.split(" ")
        finish: FinishReason = "stop"
        if request.on_token is not None:
            for i, word in enumerate(words):
                if request.cancel.is_set():  # stopped like the real one: at the next token, with what it had
                    text, words, finish = " ".join(words[:i]), words[:i], "cancelled"
                    break
                request.on_token(word if i == 0 else " " + word)
        return Generation(
            text=text,
            finish_reason=finish,
            prompt_tokens=self.count_tokens(request.messages),
            completion_tokens=len(words),
            token_logprobs=[0.0] * len(words),
            token_entropies=[0.0] * len(words),
        )
