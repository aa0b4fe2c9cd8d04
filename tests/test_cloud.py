"""Cloud providers against fake OpenAI and Anthropic servers that speak the real wire formats."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from appliance.errors import Cancelled
from appliance.llm.base import ChatMessage, GenerationRequest
from appliance.llm.cloud import CloudProvider
from appliance.llm.cloud_errors import CloudMalformed, CloudRefused, CloudUnavailable
from tests.fakes.cloud_api import FakeCloud, Flavour
from tests.helpers import eventually

FLAVOURS: list[Flavour] = ["openai", "anthropic"]
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def ask(text: str = "Hello?", **kwargs: Any) -> GenerationRequest:
    """A request with a system prompt and one user message."""
    return GenerationRequest([ChatMessage("system", "Be brief."), ChatMessage("user", text)], **kwargs)


def run(flavour: Flavour, scenario: Callable[[FakeCloud, CloudProvider], Awaitable[None]], **options: Any) -> None:
    """Run a scenario against a fresh fake server, with a provider pointed at it (closed however it ends)."""

    async def main() -> None:
        async with FakeCloud(flavour) as fake:
            provider = fake.provider(f"fake-{fake.flavour}", **options)
            try:
                await scenario(fake, provider)
            finally:
                await provider.close()

    asyncio.run(main())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_streams_text_and_reports_usage(flavour: Flavour) -> None:
    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        fake.enqueue("The sky is blue today.")
        pieces: list[str] = []
        gen = await provider.generate(ask(on_token=pieces.append, stop=["\n"]))
        assert gen.text == "The sky is blue today."
        assert pieces == ["The", " sky", " is", " blue", " today."]
        assert gen.finish_reason == "stop"
        assert gen.completion_tokens == 5
        assert gen.prompt_tokens > 0
        assert gen.total_s >= gen.ttft_s > 0
        assert gen.tool_calls == []
        sent = fake.requests[0]
        assert sent.headers.get("Authorization", sent.headers.get("x-api-key")) == "<redacted>"
        assert sent.body["stream"] is True
        if flavour == "openai":
            assert sent.path == "/v1/chat/completions"
            assert sent.body["stream_options"] == {"include_usage": True}
            assert sent.body["messages"][0] == {"role": "system", "content": "Be brief."}
            assert sent.body["stop"] == ["\n"]
        else:
            assert sent.path == "/v1/messages"
            assert sent.headers["anthropic-version"] == "2023-06-01"
            assert sent.body["system"] == "Be brief."
            assert sent.body["messages"] == [{"role": "user", "content": "Hello?"}]
            assert sent.body["stop_sequences"] == ["\n"]

    run(flavour, scenario)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_max_tokens_maps_to_length(flavour: Flavour) -> None:
    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        fake.enqueue("one two three four five")
        gen = await provider.generate(ask(max_tokens=2))
        assert (gen.text, gen.finish_reason) == ("one two", "length")

    run(flavour, scenario)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tools_are_sent_in_the_vendors_shape_and_calls_come_back_parsed(flavour: Flavour, stream: bool) -> None:
    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        arguments = {"city": "Zürich", "units": {"temp": "C"}}
        fake.enqueue("Let me check.", tool_calls=[{"name": "get_weather", "arguments": arguments}])
        gen = await provider.generate(ask("Weather in Zürich?"), tools=[WEATHER])
        assert gen.text == "Let me check."
        assert gen.finish_reason == "stop"
        assert [(c["name"], c["arguments"]) for c in gen.tool_calls] == [("get_weather", arguments)]
        assert gen.tool_calls[0]["id"]
        sent_tools = fake.requests[0].body["tools"]
        if flavour == "openai":
            assert sent_tools == [{"type": "function", "function": WEATHER}]
        else:
            assert sent_tools == [
                {"name": "get_weather", "description": WEATHER["description"], "input_schema": WEATHER["parameters"]}
            ]

    run(flavour, scenario, stream=stream)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_429_is_retried_after_the_time_the_server_asks(flavour: Flavour, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        fake.fail_next("429", retry_after=0.5)
        fake.enqueue("Finally.")
        gen = await provider.generate(ask())
        assert gen.text == "Finally."
        assert [r.outcome for r in fake.requests] == ["429", "ok"]
        assert fake.requests[1].at - fake.requests[0].at >= 0.45  # it did wait
        # ... the server's 0.5 s, not its own backoff (0.01 s here, doubling).
        (retry,) = [r for r in caplog.records if r.name == "appliance.llm.cloud" and "retry" in r.msg]
        assert retry.args is not None and retry.args[-1] == 0.5, retry.getMessage()

    caplog.set_level(logging.INFO, logger="appliance.llm.cloud")
    run(flavour, scenario)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_connection_drops_are_retried(flavour: Flavour) -> None:
    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        fake.fail_next("drop")
        gen = await provider.generate(ask("ping"))
        assert gen.text == "echo: ping"
        assert [r.outcome for r in fake.requests] == ["drop", "ok"]

    run(flavour, scenario)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_500_until_retries_run_out_is_unavailable(flavour: Flavour) -> None:
    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        fake.fail_next("500", n=10)
        with pytest.raises(CloudUnavailable) as caught:
            await provider.generate(ask())
        assert "HTTP 500" in caught.value.message and "3 attempts" in caught.value.message
        assert caught.value.fix
        assert len(fake.requests) == 3

    run(flavour, scenario, max_retries=2)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_hanging_server_is_unavailable_within_the_timeout(flavour: Flavour) -> None:
    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        fake.fail_next("hang", n=5)
        with pytest.raises(CloudUnavailable, match=r"within 0.5 s"):
            await provider.generate(ask())
        # The timeout covers the retries too: the hung attempt was the only one, not the first of five.
        assert [r.outcome for r in fake.requests] == ["hang"]

    run(flavour, scenario, timeout_s=0.5)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_body_that_does_not_parse_is_malformed(flavour: Flavour) -> None:
    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        fake.fail_next("malformed")
        with pytest.raises(CloudMalformed, match="not JSON"):
            await provider.generate(ask())
        assert len(fake.requests) == 1  # a broken body is not retried

    run(flavour, scenario)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_wrong_key_is_refused_with_a_fix_and_the_key_is_never_shown(flavour: Flavour) -> None:
    wrong = "sk-wrong-key-that-must-stay-secret"

    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        with pytest.raises(CloudRefused) as caught:
            await provider.generate(ask())
        error = caught.value
        assert "HTTP 401" in error.message
        assert error.fix is not None and "API key" in error.fix
        assert wrong not in error.for_people() and wrong not in repr(provider)
        assert len(fake.requests) == 1  # a refusal is not retried

    run(flavour, scenario, api_key=wrong)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_breaker_opens_fails_fast_and_closes_after_the_cool_down(flavour: Flavour) -> None:
    now = [1000.0]

    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        fake.fail_next("500", n=3)
        for _ in range(2):
            with pytest.raises(CloudUnavailable, match="HTTP 500") as failed:
                await provider.generate(ask())
            assert "(after 1 attempt)" in str(failed.value), failed.value  # not "1 attempts" (a README walk)
        assert provider.breaker.is_open
        with pytest.raises(CloudUnavailable, match="circuit open"):
            await provider.generate(ask())
        assert len(fake.requests) == 2  # the third call never reached the server
        now[0] += 31
        with pytest.raises(CloudUnavailable, match="HTTP 500"):  # the trial call fails: open again at once
            await provider.generate(ask())
        assert len(fake.requests) == 3 and provider.breaker.is_open
        now[0] += 31
        gen = await provider.generate(ask("back?"))
        assert gen.text == "echo: back?" and not provider.breaker.is_open

    run(flavour, scenario, max_retries=0, breaker_threshold=2, breaker_cooldown_s=30, clock=lambda: now[0])


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cancel_stops_the_stream_and_keeps_the_partial_text(flavour: Flavour) -> None:
    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        fake.enqueue(" ".join(f"w{i}" for i in range(100)))
        fake.chunk_delay_s = 0.02
        cancel = threading.Event()
        pieces: list[str] = []

        def on_token(piece: str) -> None:
            pieces.append(piece)
            if len(pieces) == 3:
                cancel.set()

        gen = await provider.generate(ask(on_token=on_token, cancel=cancel))
        assert gen.finish_reason == "cancelled"
        assert gen.text == "w0 w1 w2" and len(pieces) == 3  # nothing reaches on_token after the cancel
        # The client closed the stream: the server stopped writing it, well short of its 100 words.
        (sent,) = fake.requests
        await asyncio.wait_for(sent.ended.wait(), 30)
        assert not sent.streamed_to_the_end and sent.events_sent < 50, sent.events_sent

    run(flavour, scenario)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_cancel_during_a_hang_returns_at_once(flavour: Flavour) -> None:
    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        fake.fail_next("hang")
        request = ask()
        generation = asyncio.ensure_future(provider.generate(request))
        await eventually(lambda: fake.requests, what="the request reaching the hanging server")
        request.cancel.set()
        gen = await generation
        # Only the cancel can end it: the server never answers and the timeout is an hour away.
        assert gen.finish_reason == "cancelled" and gen.text == ""
        assert [r.outcome for r in fake.requests] == ["hang"]

    run(flavour, scenario, timeout_s=3600)


def test_cancelled_before_it_started_sends_nothing() -> None:
    async def scenario(fake: FakeCloud, provider: CloudProvider) -> None:
        request = ask()
        request.cancel.set()
        with pytest.raises(Cancelled):
            await provider.generate(request)
        assert fake.requests == []

    run("openai", scenario)
