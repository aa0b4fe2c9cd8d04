"""Calibrate routing on the real packaged model: run the labeled prompts, sweep thresholds, fit the difficulty score.

Every prompt of tests/eval/prompts.yaml goes through a real agent turn (the shipped config: its system
prompt, tools, simulated devices and intent fast path) with routing off, and the local answer's token
probabilities are kept. Each threshold is then replayed over them exactly as the router would decide
(escalate when the mean probability is below it, or when the answer collapses mid-way: see
``appliance.agent.router.collapsed``), against the label of each prompt.

The chosen threshold maximises balanced accuracy (recall of "cloud" prompts plus recall of "local"
prompts, halved: escalating everything or nothing both score 0.5) among the thresholds that keep at
least half of the prompts labeled local on the Pi: an edge-first appliance that sends most of what the
Pi could answer to the cloud has lost its point (privacy, cost, offline use).

Each prompt's MiniLM embedding (the vector the agent's understanding layer makes) is stored too, as
float16 in results.json (~1 KB a prompt), so a replay and the escalation bench need no model at all.
Over them, tests/eval/difficulty_fit.py fits the message-difficulty score (a logistic regression),
judges it and every other signal by cross-validated AUC only, and picks the bar above which edge_first
sends a message to the cloud before the local model runs. The weights, fitted on every prompt after
the figures are taken, go to appliance/understanding/difficulty.json. Writes tests/eval/REPORT.md and
tests/eval/results.json.

    .venv/bin/python tests/eval/calibrate.py            # 4 to 13 minutes on 2 cores, by what else runs
    .venv/bin/python tests/eval/calibrate.py --replay   # re-judge the committed results, no model
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from appliance.agent.router import collapsed  # noqa: E402
from appliance.config import CHECKOUT_CONFIG, load_config  # noqa: E402
from appliance.llm.base import Generation, GenerationRequest  # noqa: E402
from appliance.runtime import Runtime  # noqa: E402
from tests.eval import difficulty_fit as fit  # noqa: E402

HERE = Path(__file__).resolve().parent
WEIGHTS = ROOT / "appliance" / "understanding" / "difficulty.json"
THRESHOLDS = [round(0.30 + 0.05 * i, 2) for i in range(13)]  # 0.30 .. 0.90
BEFORE = 0.65  # routing.min_confidence before the difficulty score: the baseline it is measured against


@dataclass
class Result:
    """One prompt's local answer, as the router sees it."""

    category: str
    expect: str
    prompt: str
    route: str  # intent or local (routing is off while calibrating)
    mean_prob: float
    tokens: int
    answer_s: float  # the whole local answer
    ttft_s: float
    decode_s: float
    collapse_at: dict[str, int | None] = field(default_factory=dict)  # threshold -> token index of the abort
    features: dict[str, float] = field(default_factory=dict)  # other confidence signals, compared in the report
    text: str = ""
    embedding: str = ""  # the message's vector from the understanding layer's model (fit.encode_vector)


class Recorder:
    """The agent's model, keeping the last free-text generation (the answer, not a grammar tool call)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.last: Generation | None = None

    @property
    def name(self) -> str:
        return str(self.inner.name)

    async def generate(self, request: GenerationRequest) -> Generation:
        generation: Generation = await self.inner.generate(request)
        if request.json_schema is None:
            self.last = generation
        return generation

    def count_tokens(self, messages: Sequence[Any]) -> int:
        return int(self.inner.count_tokens(messages))


def features(logprobs: Sequence[float], entropies: Sequence[float]) -> dict[str, float]:
    """Confidence signals other than the mean probability, each oriented so that higher means surer."""
    probs = [math.exp(lp) for lp in logprobs]
    windows = [sum(probs[i : i + 12]) / 12 for i in range(max(1, len(probs) - 11))] if len(probs) >= 12 else []
    return {
        "mean_prob": sum(probs) / len(probs),
        "neg_mean_entropy": -sum(entropies) / max(1, len(entropies)),
        "share_above_0.3": sum(1 for p in probs if p >= 0.3) / len(probs),
        "geo_mean_prob": math.exp(sum(logprobs) / len(logprobs)),
        "first_8_mean_prob": sum(probs[:8]) / min(8, len(probs)),
        "lowest_12_window": min(windows) if windows else sum(probs) / len(probs),
        "neg_length": -float(len(probs)),
    }


def first_collapse(logprobs: Sequence[float], threshold: float) -> int | None:
    """The token count at which the router's early abort would stop this answer (None: never)."""
    for n in range(1, len(logprobs) + 1):
        if collapsed(logprobs[:n], threshold):
            return n
    return None


async def run_prompts(limit: int | None) -> tuple[list[Result], dict[str, Any]]:
    """Every prompt through a real turn, and which embedding model made the vectors."""
    data = yaml.safe_load((HERE / "prompts.yaml").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as folder:
        config = load_config(CHECKOUT_CONFIG, data_dir=Path(folder), environ={})
        config.routing.mode = "local_only"
        config.memory.extract_after_messages = 0  # no background model work between prompts
        config.memory.quiet_minutes = 0
        runtime = Runtime.open(config)
        if runtime.agent.understanding is None:
            runtime.close()
            raise SystemExit("no understanding layer: install the embedding model (make install converts minilm)")
        embedder = runtime.agent.understanding.embedder
        embedding = {"model": embedder.name, "file": embedder.path.name, "dimensions": embedder.dimensions}
        recorder = Recorder(runtime.agent.model)
        runtime.agent.model = recorder  # type: ignore[assignment]
        results: list[Result] = []
        try:
            await runtime.model.load()
            items = [(c, spec["expect"], p) for c, spec in data.items() for p in spec["prompts"]]
            bad = [p for _, _, p in items if not isinstance(p, str)]
            if bad:
                raise SystemExit(f"prompts.yaml: not text (quote prompts with ': ' in them): {bad}")
            for i, (category, expect, prompt) in enumerate(items[:limit]):
                recorder.last = None
                record = await runtime.agent.turn(prompt, channel="eval", chat_id=f"p{i}")
                g = recorder.last if record.route != "intent" else None
                lps = list(g.token_logprobs) if g is not None else []
                vector = await embedder.aembed_query(prompt)  # from the cache when the turn embedded it
                results.append(
                    Result(
                        category=category,
                        expect=expect,
                        prompt=prompt,
                        route=record.route,
                        mean_prob=g.confidence()["mean_prob"] if g is not None else 1.0,
                        tokens=len(lps),
                        answer_s=round(g.total_s, 3) if g is not None else 0.0,
                        ttft_s=round(g.ttft_s, 3) if g is not None else 0.0,
                        decode_s=round(g.decode_s, 3) if g is not None else 0.0,
                        collapse_at={f"{t:.2f}": first_collapse(lps, t) for t in THRESHOLDS} if lps else {},
                        features={k: round(v, 4) for k, v in features(lps, g.token_entropies).items()} if lps else {},
                        text=record.text[:160],
                        embedding=fit.encode_vector(vector),
                    )
                )
                r = results[-1]
                took = record.timings.total_s
                head = f"{i + 1:3d} {category:11} {r.route:6} p={r.mean_prob:.2f} n={r.tokens:3d}"
                print(f"{head} {took:5.1f}s {prompt[:50]}")
        finally:
            await runtime.close_cloud()
            runtime.close()
    return results, embedding


def escalates(r: Result, threshold: float) -> bool:
    """What the router would do with this answer at this threshold."""
    if r.route == "intent":
        return False
    return r.mean_prob < threshold or r.collapse_at.get(f"{threshold:.2f}") is not None


def sweep(results: list[Result]) -> list[dict[str, Any]]:
    rows = []
    for t in THRESHOLDS:
        tp = sum(1 for r in results if r.expect == "cloud" and escalates(r, t))
        fp = sum(1 for r in results if r.expect != "cloud" and escalates(r, t))
        fn = sum(1 for r in results if r.expect == "cloud" and not escalates(r, t))
        tn = sum(1 for r in results if r.expect != "cloud" and not escalates(r, t))
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        specificity = tn / (tn + fp) if tn + fp else 1.0
        early = [r for r in results if r.collapse_at.get(f"{t:.2f}") is not None]
        rows.append(
            {
                "threshold": t,
                "local_share": round((tn + fn) / len(results), 3),
                "precision": round(precision, 3),
                "recall": round(recall, 3),
                "balanced_accuracy": round((recall + specificity) / 2, 3),
                "local_kept": round(specificity, 3),
                "f1": round(2 * precision * recall / (precision + recall), 3) if precision + recall else 0.0,
                "private_escalated": sum(1 for r in results if r.category == "private" and escalates(r, t)),
                "aborted_early": len(early),
                "tokens_saved": sum(r.tokens - (r.collapse_at[f"{t:.2f}"] or r.tokens) for r in early),
            }
        )
    return rows


MIN_LOCAL_KEPT = 0.5  # at least this share of the prompts labeled local must stay on the Pi


def choose(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Best balanced accuracy among thresholds keeping enough on the Pi; on a tie, the one keeping more."""
    allowed = [row for row in rows if row["local_kept"] >= MIN_LOCAL_KEPT] or rows
    return max(allowed, key=lambda row: (row["balanced_accuracy"], row["local_share"]))


def write_report(
    results: list[Result],
    rows: list[dict[str, Any]],
    chosen: dict[str, Any],
    seconds: float,
    data: fit.Dataset,
    figures: fit.Figures,
    embedding: dict[str, Any],
) -> None:
    """REPORT.md and results.json."""
    by_category: dict[str, list[Result]] = {}
    for r in results:
        by_category.setdefault(r.category, []).append(r)
    t = chosen["threshold"]
    best = max(rows, key=lambda row: (row["balanced_accuracy"], row["local_share"]))
    emb = statistics.mean(figures.embedding)
    lines = [
        "# Routing calibration: the packaged model (SmolLM2-135M-Instruct Q4_1) and the difficulty score",
        "",
        f"Made by `tests/eval/calibrate.py` from `tests/eval/prompts.yaml` ({len(results)} prompts) in {seconds:.0f} s",
        "on this machine (2 cores, shared with other jobs: the seconds are not a benchmark). Each prompt ran one",
        "real agent turn with the shipped config and routing off; its answer's token probabilities and its",
        f"message's embedding ({embedding['model']}, {embedding['dimensions']} dimensions) were kept. Positive = the"
        " label says `cloud`.",
        "",
        f"**In short**: the message's embedding tells the labels apart (cross-validated AUC {emb:.2f}); the local",
        f"answer's mean token probability does not ({figures.token_auc['mean_prob']:.2f}). In `edge_first`, a message"
        f" scoring at or above {figures.chosen['hard_above']} goes to the cloud before the local model runs; below it,"
        f" the token rule at `min_confidence: {chosen['threshold']}` still judges the local answer.",
        "",
        "## The token rule: routing.min_confidence",
        "",
        "Each threshold is replayed over the answers' token probabilities exactly as the router decides (mean",
        "probability below the threshold, or a collapse mid-answer).",
        "",
        f"**Chosen: `routing.min_confidence: {t}`**: the best balanced accuracy among thresholds that keep at least"
        f" {MIN_LOCAL_KEPT:.0%} of the prompts labeled local on the Pi (unconstrained, the best is"
        f" {best['threshold']}: balanced accuracy {best['balanced_accuracy']:.3f},"
        f" local share {best['local_share']:.0%}).",
        f"At it: local share {chosen['local_share']:.0%}, escalation precision {chosen['precision']:.0%},"
        f" recall {chosen['recall']:.0%}; {chosen['aborted_early']} answers stopped early,"
        f" {chosen['tokens_saved']} local tokens not generated.",
        "",
        "| threshold | local share | precision | recall | local kept | balanced acc. | F1 | private escalated"
        " | stopped early |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        mark = " **←**" if row is chosen else ""
        cells = [
            f"{row['threshold']:.2f}{mark}",
            f"{row['local_share']:.0%}",
            f"{row['precision']:.0%}",
            f"{row['recall']:.0%}",
            f"{row['local_kept']:.0%}",
            f"{row['balanced_accuracy']:.3f}",
            f"{row['f1']:.3f}",
            str(row["private_escalated"]),
            str(row["aborted_early"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    bar = figures.chosen["hard_above"]
    over = {(c, p): bool(s >= bar) for c, p, s in zip(data.categories, data.prompts, figures.p_oof, strict=True)}
    lines += ["", "## By category, at the chosen threshold and bar", ""]
    lines += [
        "| category | label | prompts | escalated by the token rule | mean probability (median)"
        " | over the bar (out of fold) |",
        "|---|---|---|---|---|---|",
    ]
    for category, items in by_category.items():
        escalated = sum(1 for r in items if escalates(r, t))
        median = statistics.median(r.mean_prob for r in items)
        gated = sum(1 for r in items if over.get((r.category, r.prompt)))
        cells = [category, items[0].expect, str(len(items)), str(escalated), f"{median:.2f}", str(gated)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *escalation_lines(figures, t)]
    (HERE / "REPORT.md").write_text("\n".join(_wrapped(lines)) + "\n", encoding="utf-8")
    payload = {
        "chosen": chosen,
        "seconds": round(seconds, 1),
        "embedding_model": embedding,
        "difficulty": {"hard_above": figures.chosen["hard_above"], "auc": aucs(figures)},
        "sweep": rows,
        "results": [asdict(r) for r in results],
    }
    (HERE / "results.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


def _wrapped(lines: list[str], width: int = 108) -> list[str]:
    """Long prose lines broken at ``width`` (tables and headings as they are; list items keep their indent)."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width or line.startswith(("|", "#")):
            out.append(line)
        else:
            out += textwrap.wrap(line, width, subsequent_indent="  " if line.startswith("- ") else "")
    return out


def _spread(runs: list[float]) -> str:
    return f"{statistics.mean(runs):.3f} | {min(runs):.3f}–{max(runs):.3f}"


def aucs(f: fit.Figures) -> dict[str, dict[str, float]]:
    """The AUCs for the JSON files: fitted scores cross-validated (mean over the shuffles), fixed signals as is."""
    fitted = {"embedding_logistic": f.embedding, "embedding_knn": f.knn, "stacked": f.stacked}
    fitted["tokens_logistic"] = f.tokens
    return {
        "cross_validated": {
            **{name: round(statistics.mean(runs), 4) for name, runs in fitted.items()},
            "embedding_logistic_loo": round(f.loo, 4),
        },
        "fixed_signals": {name: round(value, 4) for name, value in f.token_auc.items()},
    }


def escalation_lines(f: fit.Figures, min_confidence: float) -> list[str]:
    """The report's sections on the escalation signals and the bar."""
    emb, stack = statistics.mean(f.embedding), statistics.mean(f.stacked)
    best_name = max(f.token_auc, key=lambda name: f.token_auc[name])
    noise = (max(f.embedding) - min(f.embedding)) / 2
    c = f.chosen
    lines = [
        "## Which signal separates best (cross-validated)",
        "",
        "AUC: the chance that a prompt labeled `cloud` scores as needing the cloud more than one labeled",
        f"`local` (0.5 is a coin toss), over the {f.n_cloud + f.n_local} prompts routing decides ({f.n_cloud} cloud,"
        f" {f.n_local} local: the intent-labeled home commands and prompts the intent path answered are left out).",
        "A fitted score is judged only on prompts it was not fitted to: stratified 10-fold cross-validation,",
        f"repeated over {f.repeats} shuffles of the folds (mean, and the range). The token signals are fixed formulas",
        "(nothing fitted, so nothing to cross-validate); a higher value reads as surer.",
        "",
        "| signal | what | AUC | range over shuffles |",
        "|---|---|---|---|",
        f"| **message embedding, logistic regression** (shipped) | MiniLM vector, 384 weights, L2 {fit.L2} |"
        f" {_spread(f.embedding)} |",
        f"| message embedding, k-nearest neighbours | cosine, k = {fit.KNN} | {_spread(f.knn)} |",
        f"| embedding logit + token signals | stacked logistic regression, nested CV | {_spread(f.stacked)} |",
        f"| token signals together | logistic regression over the {len(f.token_auc)} below | {_spread(f.tokens)} |",
    ]
    for name in sorted(f.token_auc, key=lambda name: -f.token_auc[name]):
        used = " (routing's min_confidence)" if name == "mean_prob" else ""
        lines.append(f"| {name}{used} | fixed | {f.token_auc[name]:.3f} | – |")
    knn_gap = emb - statistics.mean(f.knn)
    lines += [
        "",
        f"Leave-one-out AUC of the shipped score: {f.loo:.3f}. "
        + ("**The message embedding wins**" if f.enabled else "**The message embedding does not win**")
        + f": {emb:.2f} against {f.token_auc['mean_prob']:.2f} for the mean token probability routing used"
        + (" (worse than a coin toss on this set)" if f.token_auc["mean_prob"] < 0.5 else "")
        + f" and {f.token_auc[best_name]:.2f} for the best token signal ({best_name}); the token signals together"
        f" reach {statistics.mean(f.tokens):.2f}. The logistic regression beats k-NN by {knn_gap:.2f}. Adding the"
        f" token signals to the embedding changes the AUC by {stack - emb:+.3f},"
        + (" within" if abs(stack - emb) <= noise else " beyond")
        + f" the ±{noise:.3f} the fold shuffle alone moves it: "
        + (
            "so routing judges the message before the local model runs, and the local answer's tokens keep"
            " only their old job (stopping an answer that falls apart)."
            if stack - emb <= noise
            else "the stacked model is better; routing does not use it yet (it needs the local answer first)."
        ),
        "",
        f"Where it is weaker: among fact questions alone (easy against rare) the AUC is {f.facts:.2f}; among the",
        f"rest (small talk and notes against reasoning and code) {f.rest:.2f}. It learns what *kind* of message",
        "needs the cloud, and a kind it has never seen is guessed from its nearest kind: fitted without a whole",
        "category, that category scores like this (so new kinds of request belong in prompts.yaml, labeled):",
        "",
        "| category left out of the fit | median p(cloud) | over the bar |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {p:.2f} | {share:.0%} |" for name, (p, share) in f.held_out.items()]
    lines += [
        "",
        "## The bar: straight to the cloud, before the local model",
        "",
        "In `edge_first`, a message whose score is at or above the bar goes to the cloud without a local attempt",
        "(`why: looks_hard`); below it the local model answers and is judged as before (the token rule at",
        f"`min_confidence: {min_confidence}`: its mean probability, or a collapse mid-answer). Each row is that",
        f"policy on out-of-fold scores, averaged over the {f.repeats} shuffles. The bar is the best balanced",
        f"accuracy among those keeping at least {fit.MIN_LOCAL_KEPT:.0%} of the local-labeled prompts on the Pi (it",
        "acts before any local attempt, so it must be sure); it is chosen on these same out-of-fold scores, one",
        "number, so its row is a little optimistic where the AUCs above are not.",
        "",
        f"**Chosen: `hard_above: {c['hard_above']}`** (in `appliance/understanding/difficulty.json`, with the weights"
        f" fitted on all {f.n_cloud + f.n_local} prompts): {c['sent_before_local']:.0%} of the cloud-labeled prompts go"
        f" to the cloud before any local work, {c['recall']:.0%} escalate in all, {c['local_kept']:.0%} of the"
        f" local-labeled stay on the Pi, balanced accuracy {c['balanced_accuracy']:.3f}"
        + (
            "."
            if f.enabled
            else "; **but the signal is off** (`enabled: false`): it is no better than the token signals."
        ),
        "",
        "| bar | cloud-labeled sent before local | escalated in all (recall) | local kept | precision"
        " | balanced acc. | private notes sent |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in f.bars:
        mark = " **←**" if row is c else ""
        cells = [
            f"{row['hard_above']:.2f}{mark}",
            f"{row['sent_before_local']:.0%}",
            f"{row['recall']:.0%}",
            f"{row['local_kept']:.0%}",
            f"{row['precision']:.0%}",
            f"{row['balanced_accuracy']:.3f}",
            f"{row['private_sent']:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    for name, row in f.baselines.items():
        cells = [name, "–", f"{row['recall']:.0%}", f"{row['local_kept']:.0%}", f"{row['precision']:.0%}"]
        cells += [f"{row['balanced_accuracy']:.3f}", f"{row['private_sent']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "## What this says",
        "",
        f"- SmolLM2-135M's own token probabilities do not tell easy from hard (mean probability AUC"
        f" {f.token_auc['mean_prob']:.2f}): it is sure of itself writing code and arithmetic it gets wrong, and unsure",
        "  of greetings it words freely. Longer answers go with harder questions (`neg_length`), and an answer",
        "  that collapses mid-way is still stopped early, but neither comes close to reading the message itself.",
        "- The score needs the embedding model it was fitted on (`minilm`, 384 dimensions): with another",
        "  `memory.embedding_model` it turns itself off (logged) and routing uses the token signals alone. Re-run",
        "  this script after changing either model; it rewrites the weights and the bar.",
        "- Private notes can still look like questions for a stronger model: keep such chats on the Pi with",
        "  `/private on`, or list the channel under `routing.local_only_channels` (the bar then only notes it).",
        "- Home commands are answered by the intent fast path without any model, so routing never sends them",
        "  anywhere; a phrasing the fast path does not know goes to the local model like any message.",
    ]
    return lines


def write_weights(f: fit.Figures, embedding: dict[str, Any]) -> None:
    """The shipped difficulty score: fitted on every prompt, after the cross-validated figures were taken."""
    data = {
        "about": "p(a message needs the cloud) from its embedding; written by tests/eval/calibrate.py (see REPORT.md)",
        "model": embedding["model"],
        "file": embedding["file"],
        "dimensions": embedding["dimensions"],
        "hard_above": f.chosen["hard_above"],
        "enabled": f.enabled,
        "auc": aucs(f),
        "trained_on": {"prompts": f.n_cloud + f.n_local, "cloud": f.n_cloud, "local": f.n_local, "l2": fit.L2},
        "bias": round(f.bias, 6),
        "weights": [round(float(w), 6) for w in f.weights],
    }
    WEIGHTS.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, help="only the first N prompts (a quick look; no report written)")
    parser.add_argument("--replay", action="store_true", help="re-judge the answers in results.json (no model)")
    parser.add_argument("--repeats", type=int, default=5, help="shuffles of the cross-validation folds (default 5)")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.replay:
        saved = json.loads((HERE / "results.json").read_text(encoding="utf-8"))
        results = [Result(**r) for r in saved["results"]]
        embedding = saved.get("embedding_model") or {}
        if not embedding:
            raise SystemExit("results.json predates the difficulty score (no embeddings): re-run without --replay")
        seconds = float(saved.get("seconds", 0.0))  # the model run's, not this replay's
    else:
        results, embedding = asyncio.run(run_prompts(args.limit))
        seconds = time.perf_counter() - started
    rows = sweep(results)
    chosen = choose(rows)
    for row in rows:
        print(json.dumps(row))
    print(f"chosen threshold: {chosen['threshold']}")
    if args.limit is None:
        data = fit.dataset([asdict(r) for r in results])
        judged = [r for r in results if fit.decided(r.expect, r.route)]
        t = chosen["threshold"]
        figures = fit.judge(
            data,
            np.array([escalates(r, t) for r in judged]),
            repeats=args.repeats,
            baselines={
                f"token rule alone at {t}": np.array([escalates(r, t) for r in judged]),
                f"token rule alone at {BEFORE} (before)": np.array([escalates(r, BEFORE) for r in judged]),
            },
        )
        print(json.dumps({"difficulty": aucs(figures), "hard_above": figures.chosen["hard_above"]}))
        write_report(results, rows, chosen, seconds, data, figures, embedding)
        write_weights(figures, embedding)
        print(f"wrote {HERE / 'REPORT.md'} and {WEIGHTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
