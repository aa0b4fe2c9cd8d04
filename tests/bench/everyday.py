"""The everyday questions (tests/eval/everyday.yaml) on the held-back half: right, honestly declined, wrong.

Each question is asked of a real appliance (tests/eval/everyday_home.py: a Runtime with known devices,
memories, schedules, a place and a fake Open-Meteo) through the turn every channel takes, with the
packaged model in the model runner (real llama.cpp), and graded as a person reads the reply
(tests/eval/everyday.py). Baseline, in the same run and on the same questions: the same model asked
alone (its system prompt, the question; no tools, no grounded answer, no guard), graded alike.

Rows:

- ``everyday_right_or_declined``: (right + declined) / graded over every class but general knowledge;
  goal >= 0.95 and no wrong answer about the time, the date, the appliance, what it can do, its devices,
  its memory, its schedules or the weather. Per class right / declined / wrong / skipped in ``classes``;
  the wrong ones (id, reply) in ``wrong``; questions skipped because this branch lacks a source, with why.
- ``everyday_general``: general knowledge, right share, reported apart (not in the goal).
- ``everyday_grounded_p50_ms``: the latency of the replies no model was called for (grounded answers and
  the device fast path), p50; goal <= 20 ms; baseline: the p50 of the replies a model wrote.
- ``everyday_NAME_right_or_declined`` (with ``everyday_NAME_general`` and ``everyday_NAME_grounded_p50_ms``)
  for each blind held-out set (tests/eval/everyday.py ``BLIND_SETS``: fresh, third ... sixteenth): the same three
  rows on tests/eval/everyday_NAME.yaml, each written without reading the grounded answers' rules nor the sets
  before it (everyday.yaml's held half was read while the rules were written); same harness, same goal.

``make bench`` also runs the set with each bigger catalog chat model installed in the checkout's data
dir (`picoagent models pull ...`), as rows with the model's name.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from appliance.llm.base import ServedModel
from tests.bench.common import report
from tests.eval.everyday import (
    BLIND_LOADERS,
    NEVER_WRONG,
    REPORTED_APART,
    EverydaySet,
    Question,
    Verdict,
    load_set,
    share_right_or_declined,
    tally,
)
from tests.eval.everyday_home import ask_set

GOAL_SHARE = 0.95
GOAL_GROUNDED_MS = 20.0


def pick(questions: Sequence[Question], per_class: int | None) -> list[Question]:
    """The first ``per_class`` questions of each class (None: all), in file order."""
    if per_class is None:
        return list(questions)
    seen: dict[str, int] = {}
    chosen = []
    for q in questions:
        if seen.get(q.cls, 0) < per_class:
            seen[q.cls] = seen.get(q.cls, 0) + 1
            chosen.append(q)
    return chosen


def _wrong(verdicts: Sequence[Verdict], limit: int = 40, whole: bool = False) -> list[dict[str, str]]:
    """The wrong replies (id, reply, why); ``whole``: every one, verbatim, with its question."""
    wrong = [v for v in verdicts if v.outcome == "wrong"]
    if whole:
        return [{"id": v.id, "q": v.q, "reply": v.reply, "why": v.why} for v in wrong]
    return [{"id": v.id, "reply": v.reply[:120], "why": v.why[:160]} for v in wrong][:limit]


def _skipped(verdicts: Sequence[Verdict]) -> dict[str, int]:
    reasons: dict[str, int] = {}
    for v in verdicts:
        if v.outcome == "skipped":
            reasons[v.why] = reasons.get(v.why, 0) + 1
    return reasons


def rows(
    verdicts: Sequence[Verdict], baseline: Sequence[Verdict], split: str, model: str, prefix: str = "everyday"
) -> list[dict[str, Any]]:
    """The three report rows (printed) from the appliance's verdicts and the model-alone ones; ``prefix``
    names the set (everyday, or everyday_NAME for a blind one: everyday_fresh ... everyday_sixteenth)."""
    goal_classes = {v.cls for v in verdicts} - REPORTED_APART
    share = share_right_or_declined(verdicts, goal_classes)
    base_share = share_right_or_declined(baseline, goal_classes)
    strict_wrong = [v for v in verdicts if v.cls in NEVER_WRONG and v.outcome == "wrong"]
    graded = [v for v in verdicts if v.cls in goal_classes and v.outcome != "skipped"]
    right = sum(v.outcome == "right" for v in graded)
    declined = sum(v.outcome == "declined" for v in graded)
    common = {"split": split, "model": model}
    general = [v for v in verdicts if v.cls in REPORTED_APART and v.outcome != "skipped"]
    general_base = [v for v in baseline if v.cls in REPORTED_APART and v.outcome != "skipped"]
    quick = [v.latency_ms for v in verdicts if v.outcome != "skipped" and not v.model_called]
    slow = [v.latency_ms for v in verdicts if v.outcome != "skipped" and v.model_called]
    p50 = statistics.median(quick) if quick else math.nan
    return [
        report(
            f"{prefix}_right_or_declined",
            share,
            base_share,
            f"value >= {GOAL_SHARE} and wrong == 0 for {', '.join(sorted(NEVER_WRONG))} "
            "(every class but general; baseline: the same model alone)",
            share >= GOAL_SHARE and not strict_wrong,
            questions=len(verdicts),
            graded=len(graded),
            right=right,
            declined=declined,
            wrong=len(graded) - right - declined,
            wrong_where_never=len(strict_wrong),
            classes=tally(verdicts),
            baseline_classes=tally(baseline),
            wrong_replies=_wrong(verdicts, whole=prefix != "everyday"),  # the blind sets': all, verbatim
            skipped=_skipped(verdicts),
            **common,
        ),
        report(
            f"{prefix}_general",
            _right_share(general),
            _right_share(general_base),
            "reported apart, not in the goal (right share; baseline: the same model alone)",
            True,
            questions=len(general),
            classes=tally(general),
            **common,
        ),
        report(
            f"{prefix}_grounded_p50_ms",
            p50,
            statistics.median(slow) if slow else math.nan,
            f"value <= {GOAL_GROUNDED_MS:g} ms with no model call (baseline: the p50 of the replies a model wrote)",
            bool(quick) and p50 <= GOAL_GROUNDED_MS,
            answered_without_model=len(quick),
            answered_by_model=len(slow),
            p90_ms=round(sorted(quick)[int(0.9 * (len(quick) - 1))], 2) if quick else math.nan,
            **common,
        ),
    ]


def _right_share(verdicts: Sequence[Verdict]) -> float:
    return sum(v.outcome == "right" for v in verdicts) / len(verdicts) if verdicts else math.nan


def bench_everyday(
    split: str = "held",
    per_class: int | None = None,
    model: ServedModel | None = None,
    model_file: Path | None = None,
    everyday: EverydaySet | None = None,
    questions: Sequence[Question] | None = None,
    prefix: str = "everyday",
) -> list[dict[str, Any]]:
    """The rows for one half (or ``questions``), at most ``per_class`` questions a class; ``model``: share
    this model (a scripted one in make test); None: the config's packaged model in the runner, or
    ``model_file``."""
    everyday = everyday or load_set()
    asked = list(questions) if questions is not None else pick(everyday.half(split), per_class)
    with tempfile.TemporaryDirectory(prefix="everyday-") as folder:
        verdicts, baseline = asyncio.run(ask_set(Path(folder), everyday, asked, model, model_file, alone=True))
    if model is not None:
        name = model.name
    else:
        from appliance.llm import models

        name = model_file.name if model_file is not None else models.default_model_name()
    return rows(verdicts, baseline, split if questions is None else "given", name, prefix)


def bigger_models() -> list[Path]:
    """The catalog chat models installed in the checkout's data dir, other than the packaged default."""
    from appliance.config import CHECKOUT_CONFIG, load_config
    from appliance.llm import models
    from appliance.llm.choice import models_dir

    folder = models_dir(load_config(CHECKOUT_CONFIG))
    default = models.default_model_name()
    found = []
    for name, entry in models.load_catalog().items():
        if name == default or entry.kind != "chat":
            continue
        path = models.installed_path(entry, folder)
        if path is not None:
            found.append(path)
    return found


def bench_all(size: str = "full") -> list[dict[str, Any]]:
    """The packaged model's rows, then each bigger installed catalog model's (not at smoke size)."""
    per_class = 1 if size == "smoke" else 3 if size == "quick" else None
    out = bench_everyday(per_class=per_class)
    if size != "smoke":
        for path in bigger_models():
            out += bench_everyday(per_class=per_class, model_file=path)
    return out


BLIND_SETS = tuple(BLIND_LOADERS)  # tests/eval/everyday_NAME.yaml, each measured blind once


def bench_blind(name: str, size: str = "full", model: ServedModel | None = None) -> list[dict[str, Any]]:
    """A blind held-out set (tests/eval/everyday_NAME.yaml, every question held) through the same harness, as
    the ``everyday_NAME_*`` rows; the packaged model (``model``: a scripted one in make test)."""
    per_class = 1 if size == "smoke" else 3 if size == "quick" else None
    return bench_everyday("held", per_class, model, everyday=BLIND_LOADERS[name](), prefix=f"everyday_{name}")


if __name__ == "__main__":
    bench_all()
