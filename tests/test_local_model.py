"""The local model worker, against the real packaged GGUF model."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from appliance.errors import Cancelled, ModelError, ModelFormatError, ModelNotFoundError, ModelTooLargeError
from appliance.llm.base import ChatMessage, GenerationRequest
from appliance.llm.local import LocalModel, _StopMatcher

SYSTEM = ChatMessage("system", "You are a helpful assistant. Answer briefly.")


def ask(text: str, **kw: object) -> GenerationRequest:
    kw.setdefault("temperature", 0.0)
    return GenerationRequest(messages=[SYSTEM, ChatMessage("user", text)], **kw)  # type: ignore[arg-type]


def test_answers_a_simple_question(local_model: LocalModel) -> None:
    g = local_model.generate_sync(ask("What is the capital of France? Answer in one word.", max_tokens=16))
    assert "Paris" in g.text
    assert g.finish_reason == "stop"
    assert g.completion_tokens == len(g.token_logprobs) == len(g.token_entropies) > 0
    assert all(lp <= 0 for lp in g.token_logprobs)
    assert all(e >= 0 for e in g.token_entropies)
    conf = g.confidence()
    assert 0 < conf["min_prob"] <= conf["mean_prob"] <= 1
    assert g.prompt_tokens > 10 and g.ttft_s > 0


def test_streams_pieces_that_add_up_to_the_text(local_model: LocalModel) -> None:
    pieces: list[str] = []
    g = local_model.generate_sync(ask("Name three colours.", max_tokens=24, on_token=pieces.append))
    assert len(pieces) > 3
    assert "".join(pieces) == g.text


def test_max_tokens_cuts_the_reply(local_model: LocalModel) -> None:
    g = local_model.generate_sync(ask("Write a long story about a dragon.", max_tokens=5))
    assert g.completion_tokens == 5
    assert g.finish_reason == "length"


def test_stop_sequence_ends_the_reply_before_it(local_model: LocalModel) -> None:
    full = local_model.generate_sync(ask("Write a long story about a dragon.", max_tokens=40)).text
    words = full.split()
    assert len(words) > 8, full
    stop = " " + words[6]
    expected = full[: full.index(stop)]
    pieces: list[str] = []
    g = local_model.generate_sync(
        ask("Write a long story about a dragon.", max_tokens=40, stop=[stop], on_token=pieces.append)
    )
    assert g.finish_reason == "stop"
    assert g.text == expected
    assert "".join(pieces) == expected  # the held-back start of the stop sequence never streamed


def test_stop_matcher_holds_back_a_possible_stop() -> None:
    m = _StopMatcher(["</tool_call>"])
    assert m.split("hello </to") == ("hello ", "</to", False)
    assert m.split("hello </tool_call> more") == ("hello ", "", True)
    assert m.split("plain") == ("plain", "", False)


def test_cancel_event_stops_at_the_next_token(local_model: LocalModel) -> None:
    request = ask("Write a long story about a dragon.", max_tokens=300)
    seen: list[str] = []

    def on_token(piece: str) -> None:
        seen.append(piece)
        if len(seen) == 3:
            request.cancel.set()

    request.on_token = on_token
    g = local_model.generate_sync(request)
    assert g.finish_reason == "cancelled"
    assert g.completion_tokens <= 4


def test_cancelling_the_task_frees_the_worker(local_model: LocalModel) -> None:
    async def scenario() -> tuple[int, int]:
        started = asyncio.Event()
        generated: list[int] = []  # tokens the worker has made for the story, counted on the worker's thread

        def counted(logprobs: Sequence[float]) -> bool:
            generated.append(len(logprobs))
            return False

        story = ask(
            "Write a long story about a dragon.", max_tokens=400, on_token=lambda _: started.set(), should_stop=counted
        )
        task = asyncio.ensure_future(local_model.generate(story))
        await started.wait()
        task.cancel()
        at_cancel = len(generated)
        with pytest.raises(asyncio.CancelledError):
            await task
        after = await local_model.generate(ask("Say hi.", max_tokens=4))  # the worker runs one job at a time
        assert after.completion_tokens > 0
        return at_cancel, len(generated)

    at_cancel, in_all = asyncio.run(scenario())
    # The story stopped within a token or two of the cancel: the worker was free for the next request at once.
    assert in_all <= at_cancel + 2, (at_cancel, in_all)


def test_a_request_cancelled_before_it_runs_never_runs(local_model: LocalModel) -> None:
    request = ask("Say hi.", max_tokens=4)
    request.cancel.set()
    with pytest.raises(Cancelled):
        local_model.generate_sync(request)


def test_deadline_stops_a_runaway_generation(local_model: LocalModel) -> None:
    saved = local_model.timeout_s
    local_model.timeout_s = 0.0
    try:
        g = local_model.generate_sync(ask("Write a long story about a dragon.", max_tokens=200))
    finally:
        local_model.timeout_s = saved
    assert g.finish_reason == "timeout"
    assert g.completion_tokens < 5


def test_prompt_prefix_is_not_read_again(local_model: LocalModel) -> None:
    system = ChatMessage("system", "You are a helpful assistant. " + "Always be kind and precise. " * 40)
    first = local_model.generate_sync(
        GenerationRequest([system, ChatMessage("user", "Hello!")], max_tokens=8, temperature=0.0)
    )
    second = local_model.generate_sync(
        GenerationRequest(
            [system, ChatMessage("user", "Hello!"), ChatMessage("assistant", first.text), ChatMessage("user", "Bye!")],
            max_tokens=8,
            temperature=0.0,
        )
    )
    assert second.cached_tokens >= first.prompt_tokens - 2
    assert second.prompt_tokens > second.cached_tokens


def test_json_schema_output_always_parses(local_model: LocalModel) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 40}, "country": {"enum": ["France", "Spain"]}},
        "required": ["city", "country"],
        "additionalProperties": False,
    }
    g = local_model.generate_sync(
        ask("Which city is the capital of France? Reply in JSON.", max_tokens=40, json_schema=schema)
    )
    data = json.loads(g.text)
    assert set(data) == {"city", "country"}
    assert data["country"] in ("France", "Spain")


def test_concurrent_requests_are_served_one_at_a_time(local_model: LocalModel) -> None:
    threads: set[int] = set()
    made: list[int] = []  # which request each token was made for, in the order the worker made them

    def on_token(_piece: str) -> None:
        threads.add(threading.get_ident())

    def made_for(n: int) -> Callable[[Sequence[float]], bool]:
        def counted(_logprobs: Sequence[float]) -> bool:
            made.append(n)
            return False

        return counted

    async def one(n: int) -> None:
        await local_model.generate(ask(f"Count to {n}.", max_tokens=8, on_token=on_token, should_stop=made_for(n)))

    async def scenario() -> None:
        await asyncio.gather(*(one(n) for n in (3, 4, 5)))

    asyncio.run(scenario())
    assert threads == {threading.get_ident()}  # pieces arrive on the event loop's thread
    runs = [n for n, _ in itertools.groupby(made)]
    assert sorted(runs) == [3, 4, 5], made  # each request's tokens in one run: never two generations at once


def test_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    model = LocalModel(tmp_path / "nope.gguf")
    with pytest.raises(ModelNotFoundError) as err:
        asyncio.run(model.load())
    assert "does not exist" in str(err.value) and err.value.fix
    model.close()


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"<html>404 not found</html>" * 10)
    model = LocalModel(bad)
    with pytest.raises(ModelFormatError) as err:
        asyncio.run(model.load())
    assert "not a GGUF model file" in str(err.value)
    model.close()


@pytest.mark.parametrize("keep", [2000, 50_000_000])
def test_a_truncated_gguf_is_refused(tmp_path: Path, model_path: Path, keep: int) -> None:
    cut = tmp_path / "cut.gguf"
    with model_path.open("rb") as f:
        cut.write_bytes(f.read(keep))  # cut in the header, and cut in the tensor data
    model = LocalModel(cut)
    with pytest.raises(ModelError) as err:
        asyncio.run(model.load())
    assert "damaged" in str(err.value) or "damaged" in (err.value.fix or "")
    assert "pull" in (err.value.fix or "")
    assert not model.loaded
    model.close()


def test_a_model_too_large_for_free_memory_is_refused(model_path: Path) -> None:
    model = LocalModel(model_path, memory_margin_mb=10**9)
    with pytest.raises(ModelTooLargeError) as err:
        asyncio.run(model.load())
    assert "MB are free" in str(err.value) and "smaller model" in (err.value.fix or "")
    assert not model.loaded
    model.close()


def test_entropy_is_a_real_distribution_property(local_model: LocalModel) -> None:
    g = local_model.generate_sync(ask("What is the capital of France? Answer in one word.", max_tokens=8))
    # Entropy of a distribution over the vocabulary is bounded by log(vocab size).
    assert max(g.token_entropies) <= math.log(49152) + 1e-6
