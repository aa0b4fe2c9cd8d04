"""The model runner: llama.cpp in a child process, spoken to over a pipe, restarted when it crashes.

Real runner processes with the real packaged models. Crashes are real: the runner killed with SIGSEGV
mid-reply, or (``PICOAGENT_RUNNER_FAULT=segv``) killing itself after the first token of every reply.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import signal
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from appliance.errors import LocalModelOff, ModelCrashed
from appliance.llm import cpu
from appliance.llm.base import ChatMessage, GenerationRequest
from appliance.llm.local import LocalModel
from appliance.llm.runner_client import ModelRunner
from appliance.llm.runner_models import RunnerModel
from tests.helpers import wait_for

QUESTION = [ChatMessage("user", "What is the capital of France? Answer in one word.")]
STORY = [ChatMessage("user", "Write a long story about a dragon who learns to bake bread.")]


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[ModelRunner]:
    runner = ModelRunner(state_dir=tmp_path)
    yield runner
    runner.stop()


def chat(runner: ModelRunner, model_path: Path) -> RunnerModel:
    return RunnerModel(runner, model_path, context_tokens=1024, seed=42, prompt_cache_mb=0)


def test_a_reply_from_the_runner_is_the_reply_in_process(
    runner: ModelRunner, model_path: Path, local_model: LocalModel
) -> None:
    """Same model, seed and prompt: the same text and token probabilities, streamed in the same pieces."""
    model = chat(runner, model_path)
    pieces: list[str] = []

    async def both() -> tuple[object, object]:
        remote = await model.generate(
            GenerationRequest(QUESTION, max_tokens=12, temperature=0.0, on_token=pieces.append)
        )
        here = await local_model.generate(GenerationRequest(QUESTION, max_tokens=12, temperature=0.0))
        return remote, here

    remote, here = asyncio.run(both())
    assert remote.text == here.text and "Paris" in remote.text  # type: ignore[attr-defined]
    assert remote.token_logprobs == pytest.approx(here.token_logprobs, abs=1e-4)  # type: ignore[attr-defined]
    assert "".join(pieces) == remote.text  # type: ignore[attr-defined]
    assert model.loaded and model.count_tokens(QUESTION) == local_model.count_tokens(QUESTION)
    assert runner.pid is not None and runner.pid != os.getpid()
    wait_for(lambda: runner.info.get("llama_features"), what="the runner's report")
    assert runner.status()["buffer_types"], runner.status()  # where llama.cpp put the weights (CPU_Mapped, ...)
    model.close()
    assert runner.pid is None  # nothing uses it: stopped


def test_cancel_and_routing_abort_reach_the_runner(runner: ModelRunner, model_path: Path) -> None:
    model = chat(runner, model_path)

    async def scenario() -> None:
        aborted = await model.generate(
            GenerationRequest(STORY, max_tokens=200, should_stop=lambda logprobs: len(logprobs) >= 5)
        )
        assert aborted.finish_reason == "aborted" and aborted.completion_tokens < 20
        streaming = asyncio.Event()
        request = GenerationRequest(STORY, max_tokens=400, on_token=lambda piece: streaming.set())
        task = asyncio.ensure_future(model.generate(request))
        await asyncio.wait_for(streaming.wait(), 30)  # the runner is generating it
        request.cancel.set()  # as a web client that went away does
        done = await task
        assert done.finish_reason == "cancelled" and done.completion_tokens < 400

    asyncio.run(scenario())
    model.close()


def test_a_generation_left_by_its_caller_then_stopped_with_the_runner_logs_no_error(
    runner: ModelRunner, model_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """SIGTERM: a memory extraction's task is cancelled, then the runner stops before it answers the cancel.

    The answer that never comes is "the model runner was stopped": nobody waits for it any more, and it must
    not end as asyncio's ERROR "Future exception was never retrieved" in the daemon's last log lines.
    """
    monkeypatch.setenv("PICOAGENT_RUNNER_FAULT", "slow")  # 0.2 s a token: still generating when stopped
    model = chat(runner, model_path)

    async def scenario() -> None:
        started = asyncio.Event()
        request = GenerationRequest(STORY, max_tokens=100, on_token=lambda piece: started.set(), client="memory")
        task = asyncio.ensure_future(model.generate(request))
        await asyncio.wait_for(started.wait(), 30)
        task.cancel()  # as the daemon's stop cancels the background work
        with pytest.raises(asyncio.CancelledError):
            await task
        readers = [t for t in threading.enumerate() if t.name == "runner-reader"]
        runner.stop()  # the runtime closes: the cancel is never answered, the request fails as stopped
        # The reader thread fails the request and ends; what it handed the loop runs before to_thread returns.
        await asyncio.to_thread(lambda: [t.join(30) for t in readers])
        assert readers and not any(t.is_alive() for t in readers)

    caplog.set_level(logging.DEBUG)
    asyncio.run(scenario())
    gc.collect()  # an unretrieved future says so when it is collected
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_crash_mid_reply_fails_that_reply_and_the_next_one_is_answered(runner: ModelRunner, model_path: Path) -> None:
    model = chat(runner, model_path)
    told: list[str] = []
    runner.listeners.append(told.append)

    async def scenario() -> None:
        await model.load()
        first_pid = runner.pid
        assert first_pid is not None
        started = asyncio.Event()
        request = GenerationRequest(STORY, max_tokens=300, on_token=lambda piece: started.set())
        task = asyncio.ensure_future(model.generate(request))
        await asyncio.wait_for(started.wait(), 30)
        os.kill(first_pid, signal.SIGSEGV)  # the process that maps the model file, in the middle of a reply
        with pytest.raises(ModelCrashed, match="SIGSEGV"):
            await task
        answer = await model.generate(GenerationRequest(QUESTION, max_tokens=8, temperature=0.0))
        assert "Paris" in answer.text and runner.pid not in (None, first_pid)

    asyncio.run(scenario())
    assert told == ["The local model crashed (signal SIGSEGV, during generation); restarted."]
    assert runner.mode == "normal" and runner.restarts == 1
    assert "crashed 1×" in runner.summary() and "running again" in runner.summary()
    from zoneinfo import ZoneInfo

    # at the appliance's time, named (walk 9: status showed the machine's UTC beside the feed's CET)
    at = datetime.fromtimestamp(runner.crashes[-1]["at"], ZoneInfo("Europe/Brussels"))
    assert f"(last {at:%Y-%m-%d %H:%M} CET, signal SIGSEGV" in runner.summary(zone=ZoneInfo("Europe/Brussels"))
    model.close()


def test_repeated_crashes_fall_back_to_safe_settings_then_to_no_local_model(
    tmp_path: Path, model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PICOAGENT_RUNNER_FAULT", "segv")  # every reply: SIGSEGV after its first token
    runner = ModelRunner(state_dir=tmp_path)
    model = chat(runner, model_path)
    modes, pids = [], []

    async def ask() -> None:
        await model.generate(GenerationRequest(QUESTION, max_tokens=8))

    for _ in range(4):
        with pytest.raises(ModelCrashed):
            asyncio.run(ask())
        modes.append(runner.mode)
        pids.append(runner.pid)
    assert modes == ["normal", "safe", "safe", "no_chat"]
    assert runner.restarts == 3 and pids[-1] is None  # no runner is started for a chat model that is off
    assert runner.adjust("chat", {"threads": "auto"})["threads"] == 1
    with pytest.raises(LocalModelOff, match="off after 4 crashes"):
        asyncio.run(ask())
    assert runner.restarts == 3 and runner.pid is None  # the restarts stopped
    saved = json.loads((tmp_path / "runner.json").read_text())
    assert saved["mode"] == "no_chat" and len(saved["crashes"]) == 4
    assert {c["how"] for c in saved["crashes"]} == {"signal SIGSEGV"}
    # A daemon started again (systemd) keeps the safe settings and tries the chat model once more.
    again = ModelRunner(state_dir=tmp_path)
    assert again.mode == "safe" and not again.repack and len(again.crashes) == 4
    model.close()


def test_safe_settings_reach_llama_cpp(tmp_path: Path, model_path: Path) -> None:
    """The runner's model parameters say what weight_repack decided (llama.cpp's use_extra_bufts)."""
    seen = {}
    for setting in ("on", "off"):
        runner = ModelRunner(weight_repack=setting, state_dir=None)
        model = chat(runner, model_path)
        asyncio.run(model.load())
        info = runner.request("info", ("info", 0)).result(30)
        seen[setting] = info["use_extra_bufts"]
        model.close()
    assert seen == {"on": True, "off": False}


def test_weight_repack_auto_is_off_exactly_where_the_cpu_has_amx(tmp_path: Path) -> None:
    sapphire = {"avx2", "avx512f", "amx_tile", "amx_int8", "amx_bf16", "fma"}
    epyc = {"avx2", "avx512f", "avx512_vnni", "fma"}
    pi5 = {"fp", "asimd", "asimddp", "fphp"}
    assert not cpu.choose_repack("auto", sapphire, "x86_64").repack
    assert "AMX (amx_tile, amx_int8, amx_bf16)" in cpu.choose_repack("auto", sapphire, "x86_64").reason
    assert cpu.choose_repack("auto", epyc, "x86_64").repack
    assert cpu.choose_repack("auto", pi5, "aarch64").repack
    assert cpu.choose_repack("on", sapphire, "x86_64").repack and not cpu.choose_repack("off", pi5, "aarch64").repack
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx2 amx_tile amx_int8\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 asimddp\n")
    assert cpu.cpu_flags(x86) == {"fpu", "avx2", "amx_tile", "amx_int8"}
    assert "asimddp" in cpu.cpu_flags(arm) and cpu.cpu_flags(tmp_path / "missing") == set()


def test_embeddings_from_the_runner_are_the_in_process_ones(runner: ModelRunner, config: object) -> None:
    from appliance.config import Config
    from appliance.llm.choice import model_path, models_dir
    from appliance.llm.embeddings import LocalEmbedder, embedder_for
    from appliance.llm.runner_models import RunnerEmbedder

    assert isinstance(config, Config)
    model = chat(runner, model_path(config))
    remote = embedder_for(config, model, models_dir(config), runner)
    assert isinstance(remote, RunnerEmbedder) and remote.worker is None
    local = LocalEmbedder(remote.path, context_tokens=128, threads=1, batch_threads=1)
    texts = ["is it stuffy in the living room", "turn on the porch light"]
    for there, here in zip(remote.embed(texts), local.embed(texts), strict=True):
        assert there == pytest.approx(here, abs=1e-5)
    assert asyncio.run(remote.aembed_query(texts[0])) == pytest.approx(local.embed_query(texts[0]), abs=1e-5)
    assert remote.cached_query(texts[0]) is not None
    local.close()
    remote.close()
    model.close()


def test_a_model_loaded_in_this_process_gets_the_auto_decision_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests and one-off scripts load models in-process (LocalModel, LocalEmbedder): on an AMX CPU they must
    not repack either, or `make test` would crash there test by test."""
    import llama_cpp.llama_cpp as lib

    from appliance.llm import local

    here = cpu.choose_repack("auto").repack
    monkeypatch.setattr(cpu, "cpu_flags", lambda *_: {"avx2", "amx_tile", "amx_int8"})
    monkeypatch.setattr(local, "_repack_decided", False)
    try:
        local.decide_repack()
        assert lib.llama_model_default_params().use_extra_bufts is False
        local.apply_repack(True)  # the runner chose first: decide_repack keeps it
        local.decide_repack()
        assert lib.llama_model_default_params().use_extra_bufts is True
    finally:
        local.apply_repack(here)  # this process's own decision again


def test_an_answer_to_a_request_its_caller_cancelled_is_dropped_not_raised() -> None:
    """A daemon stopped right after start cancelled a pending request's future; the reader thread then died
    of InvalidStateError answering it (a traceback in the daemon's last lines, seen by the README test)."""
    from concurrent.futures import Future

    from appliance.llm.runner_client import _settle

    gone: Future[object] = Future()
    gone.cancel()
    _settle(gone, error=RuntimeError("the model runner was stopped"))
    _settle(gone, result="late")
    assert gone.cancelled()
    waited: Future[object] = Future()
    _settle(waited, result="the answer")
    assert waited.result() == "the answer"


def test_an_embedding_call_cancelled_while_the_daemon_stops_logs_no_traceback() -> None:
    """Stopping `make run` while MiniLM loaded logged "exception calling callback ... CancelledError": the done
    callback asked a cancelled future for its exception. Only an answered call marks the model loaded."""
    import concurrent.futures

    from appliance.llm.runner_models import RunnerEmbedder

    embedder = object.__new__(RunnerEmbedder)
    embedder._loaded_in = 0
    cancelled: concurrent.futures.Future[object] = concurrent.futures.Future()
    cancelled.cancel()
    embedder._answered(cancelled, 3)  # raised CancelledError before
    failed: concurrent.futures.Future[object] = concurrent.futures.Future()
    failed.set_exception(RuntimeError("no"))
    embedder._answered(failed, 3)
    assert embedder._loaded_in == 0
    answered: concurrent.futures.Future[object] = concurrent.futures.Future()
    answered.set_result([0.1])
    embedder._answered(answered, 3)
    assert embedder._loaded_in == 3
