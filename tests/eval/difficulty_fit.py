"""Fitting and judging the escalation signals, honestly: numpy only, every figure out of fold.

A signal is judged by its AUC: the chance that a prompt labeled ``cloud`` scores as needing the cloud
more than one labeled ``local`` (0.5 is a coin toss). A learned score is only ever judged on prompts it
was not fitted to: stratified k-fold (every fold holds the same share of each label) gives each prompt
an *out-of-fold* score, and the AUC is taken over those. The stacked model (the embedding's logit next
to the answer's token signals) is cross-validated twice over: inside each outer training part, the
embedding logits it learns from are themselves out of fold, exactly as a new message's logit is at run
time (the shipped embedding model never saw it).

Used by tests/eval/calibrate.py (the report and the shipped weights) and tests/bench/escalation.py.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
FitPredict = Callable[[Array, Array, Array], Array]  # (train X, train y, test X) -> test scores

L2 = 0.3  # ridge strength, in units of one prompt's log-loss: flat from 0.1 to 1 on the calibration set
KNN = 10  # neighbours for the k-NN score
FOLDS = 10


def auc(scores: Sequence[float] | Array, labels: Sequence[float] | Array) -> float:
    """P(a cloud-labeled prompt scores higher than a local-labeled one); ties count half."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    pos, neg = s[y == 1], s[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def stratified_folds(labels: Array, k: int, seed: int = 0) -> NDArray[np.int64]:
    """A fold number per prompt; each label is shuffled and dealt round the folds."""
    rng = np.random.default_rng(seed)
    folds = np.zeros(len(labels), dtype=np.int64)
    for value in np.unique(labels):
        index = np.flatnonzero(labels == value)
        rng.shuffle(index)
        folds[index] = np.arange(len(index)) % k
    return folds


def fit_logistic(X: Array, y: Array, l2: float = L2, steps: int = 100) -> tuple[Array, float]:
    """L2-regularised logistic regression by Newton's method (the bias is not penalised): (weights, bias)."""
    n, d = X.shape
    A = np.hstack([X, np.ones((n, 1))])
    ridge = l2 * np.eye(d + 1)
    ridge[-1, -1] = 0.0
    w = np.zeros(d + 1)
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(A @ w)))
        gradient = A.T @ (p - y) + ridge @ w
        hessian = (A * (p * (1.0 - p))[:, None]).T @ A + ridge
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    return w[:-1], float(w[-1])


def logistic(l2: float = L2) -> FitPredict:
    """Fit on the training part, score the rest by the logit (a monotone map of p(cloud): same AUC)."""

    def fit_predict(X: Array, y: Array, test: Array) -> Array:
        weights, bias = fit_logistic(X, y, l2)
        return test @ weights + bias

    return fit_predict


def knn(k: int = KNN, temperature: float = 0.05) -> FitPredict:
    """The cloud share among the k most similar training prompts (cosine), weighted by similarity."""

    def fit_predict(X: Array, y: Array, test: Array) -> Array:
        similarity = test @ X.T
        nearest = np.argsort(-similarity, axis=1)[:, :k]
        weight = np.exp(np.take_along_axis(similarity, nearest, axis=1) / temperature)
        return np.asarray((weight * y[nearest]).sum(axis=1) / weight.sum(axis=1))

    return fit_predict


def out_of_fold(fit_predict: FitPredict, X: Array, y: Array, folds: NDArray[np.int64]) -> Array:
    """Each prompt's score from a model fitted without its fold."""
    scores = np.zeros(len(y))
    for fold in np.unique(folds):
        test = folds == fold
        scores[test] = fit_predict(X[~test], y[~test], X[test])
    return scores


def standardise(T: Array) -> tuple[Array, Array]:
    """Per-column mean and scale (1 for a constant column), to put token signals on one footing."""
    mean = T.mean(axis=0)
    scale = T.std(axis=0)
    return mean, np.where(scale > 0, scale, 1.0)


def stacked(E: Array, T: Array, y: Array, folds: NDArray[np.int64], inner: int = FOLDS) -> Array:
    """Out-of-fold scores of the stacked model: the embedding's logit next to the token signals ``T``.

    For each outer fold: inside the training part, out-of-fold embedding logits (``inner`` folds) next to
    the standardised token signals train a second logistic regression; the test part gets its embedding
    logit from the embedding model fitted on the whole training part, as a new message does at run time.
    """
    scores = np.zeros(len(y))
    for fold in np.unique(folds):
        test, train = folds == fold, folds != fold
        e_train, y_train = E[train], y[train]
        z_train = out_of_fold(logistic(), e_train, y_train, stratified_folds(y_train, inner, seed=1 + int(fold)))
        weights, bias = fit_logistic(e_train, y_train)
        mean, scale = standardise(T[train])
        stage_two = np.column_stack([z_train, (T[train] - mean) / scale])
        w2, b2 = fit_logistic(stage_two, y_train, l2=1.0)
        scores[test] = np.column_stack([E[test] @ weights + bias, (T[test] - mean) / scale]) @ w2 + b2
    return scores


def repeated_auc(score: Callable[[NDArray[np.int64]], Array], y: Array, repeats: int, k: int = FOLDS) -> list[float]:
    """The out-of-fold AUC for ``repeats`` different fold shuffles (how much the split alone moves it)."""
    return [auc(score(stratified_folds(y, k, seed)), y) for seed in range(repeats)]


def encode_vector(vector: Sequence[float]) -> str:
    """A unit vector as base64 float16 (about 1 KB for 384 dims) for results.json."""
    return base64.b64encode(np.asarray(vector, dtype="<f2").tobytes()).decode("ascii")


def decode_vector(text: str) -> Array:
    """The vector :func:`encode_vector` stored, as float64."""
    return np.frombuffer(base64.b64decode(text), dtype="<f2").astype(np.float64)


# --- the calibration set, and every figure the report and the bench give -------------------------------

TOKEN_SIGNALS = (  # calibrate.features(), each oriented so that higher means surer
    "mean_prob",
    "neg_mean_entropy",
    "share_above_0.3",
    "geo_mean_prob",
    "first_8_mean_prob",
    "lowest_12_window",
    "neg_length",
)
HARD_BARS = [round(0.30 + 0.05 * i, 2) for i in range(14)]  # 0.30 .. 0.95
MIN_LOCAL_KEPT = 0.9  # the bar acts before any local attempt: it must keep 90% of what the Pi can answer


@dataclass
class Dataset:
    """The prompts routing decides: labeled local or cloud and answered by the local model (not the intent path)."""

    prompts: list[str]
    categories: list[str]
    E: Array  # message embeddings, one row each
    T: Array  # token signals (TOKEN_SIGNALS), one row each
    y: Array  # 1: labeled cloud


def decided(expect: str, route: str) -> bool:
    """Whether routing decides this prompt: labeled local or cloud, and not answered by the intent path."""
    return expect in ("local", "cloud") and route != "intent"


def dataset(rows: Sequence[Mapping[str, Any]]) -> Dataset:
    """From results.json's rows (or calibrate.Result as dicts); rows without a stored embedding are refused."""
    kept = [r for r in rows if decided(r["expect"], r["route"])]
    missing = [r["prompt"] for r in kept if not r.get("embedding")]
    if missing:
        raise SystemExit(f"results.json has no embedding for {len(missing)} prompts: re-run tests/eval/calibrate.py")
    return Dataset(
        prompts=[r["prompt"] for r in kept],
        categories=[r["category"] for r in kept],
        E=np.array([decode_vector(r["embedding"]) for r in kept]),
        T=np.array([[float(r["features"][name]) for name in TOKEN_SIGNALS] for r in kept]),
        y=np.array([1.0 if r["expect"] == "cloud" else 0.0 for r in kept]),
    )


def embedding_auc(data: Dataset, repeats: int) -> list[float]:
    """The shipped score's cross-validated AUC: 10-fold logistic regression on the embeddings, per shuffle."""
    return repeated_auc(lambda folds: out_of_fold(logistic(), data.E, data.y, folds), data.y, repeats)


def sigmoid(z: Array) -> Array:
    """Log-odds to probabilities."""
    return np.asarray(1.0 / (1.0 + np.exp(-z)))


@dataclass
class Figures:
    """Everything the calibration says about the escalation signals; every AUC of a fitted score is out of fold."""

    n_cloud: int
    n_local: int
    repeats: int
    token_auc: dict[str, float]  # fixed signals, nothing fitted: AUC over all prompts (cloud = less sure)
    embedding: list[float]  # logistic regression on the embedding, one AUC per fold shuffle
    knn: list[float]
    tokens: list[float]  # logistic regression on the token signals alone
    stacked: list[float]  # embedding logit (out of fold) + token signals
    loo: float  # the embedding logistic, leave-one-out
    facts: float  # the embedding's out-of-fold AUC among fact questions only (easy vs hard)
    rest: float  # ... and among everything else
    held_out: dict[str, tuple[float, float]]  # category -> (median p, share over the bar) fitted without it
    p_oof: Array  # each prompt's out-of-fold p(cloud), first shuffle
    bars: list[dict[str, Any]]  # the policy at each bar, averaged over the shuffles
    chosen: dict[str, Any]
    baselines: dict[str, dict[str, float]]  # token rules alone, on the same prompts
    weights: Array  # fitted on every prompt, after the figures above
    bias: float
    enabled: bool  # better than every token signal, alone or combined


def _policy(escalate: NDArray[np.bool_], y: Array, private: NDArray[np.bool_]) -> dict[str, float]:
    tp = float((escalate & (y == 1)).sum())
    fp = float((escalate & (y == 0)).sum())
    recall = tp / float((y == 1).sum())
    kept = 1.0 - fp / float((y == 0).sum())
    return {
        "local_kept": kept,
        "recall": recall,
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "balanced_accuracy": (recall + kept) / 2,
        "private_sent": float((escalate & private).sum()),
    }


def _mean_rows(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(float(np.mean([row[key] for row in rows])), 3) for key in rows[0]}


def judge(
    data: Dataset,
    token_escalates: NDArray[np.bool_],
    repeats: int = 5,
    baselines: Mapping[str, NDArray[np.bool_]] | None = None,
) -> Figures:
    """Every figure: the signals' AUCs (cross-validated where fitted), the bar, the weights to ship.

    ``token_escalates``: whether the token rule at the chosen ``min_confidence`` escalates each prompt (the
    local answer is still judged after the bar lets a message through, so the policy is the two together);
    ``baselines``: other escalation rules to measure on the same prompts (by name).
    """
    E, T, y = data.E, data.T, data.y
    categories = np.array(data.categories)
    private = categories == "private"
    token_auc = {name: auc(-T[:, i], y) for i, name in enumerate(TOKEN_SIGNALS)}
    mean, scale = standardise(T)
    T_std = (T - mean) / scale
    p_runs = [sigmoid(out_of_fold(logistic(), E, y, stratified_folds(y, FOLDS, seed))) for seed in range(repeats)]
    embedding = [auc(p, y) for p in p_runs]
    knn_runs = repeated_auc(lambda f: out_of_fold(knn(), E, y, f), y, repeats)
    tokens = repeated_auc(lambda f: out_of_fold(logistic(1.0), T_std, y, f), y, repeats)
    stacked_runs = repeated_auc(lambda f: stacked(E, T, y, f), y, repeats)
    loo = auc(out_of_fold(logistic(), E, y, np.arange(len(y))), y)
    facts = np.isin(categories, ["facts_easy", "facts_hard"])
    bars = []
    for bar in HARD_BARS:
        row = _mean_rows([_policy((p >= bar) | token_escalates, y, private) for p in p_runs])
        gate = _mean_rows([_policy(p >= bar, y, private) for p in p_runs])
        bars.append(
            {"hard_above": bar, **row, "sent_before_local": gate["recall"], "gate_local_kept": gate["local_kept"]}
        )
    allowed = [row for row in bars if row["local_kept"] >= MIN_LOCAL_KEPT] or bars
    chosen = max(allowed, key=lambda row: (row["balanced_accuracy"], row["local_kept"]))
    names = sorted(set(data.categories))
    by_category = np.array([names.index(c) for c in data.categories])
    held = sigmoid(out_of_fold(logistic(), E, y, by_category))
    held_out = {
        name: (
            float(np.median(held[categories == name])),
            float((held[categories == name] >= chosen["hard_above"]).mean()),
        )
        for name in names
    }
    weights, bias = fit_logistic(E, y)
    best_tokens = max(max(token_auc.values()), float(np.mean(tokens)))
    return Figures(
        n_cloud=int(y.sum()),
        n_local=int(len(y) - y.sum()),
        repeats=repeats,
        token_auc=token_auc,
        embedding=embedding,
        knn=knn_runs,
        tokens=tokens,
        stacked=stacked_runs,
        loo=loo,
        facts=float(np.mean([auc(p[facts], y[facts]) for p in p_runs])),
        rest=float(np.mean([auc(p[~facts], y[~facts]) for p in p_runs])),
        held_out=held_out,
        p_oof=p_runs[0],
        bars=bars,
        chosen=chosen,
        baselines={name: _mean_rows([_policy(rule, y, private)]) for name, rule in (baselines or {}).items()},
        weights=weights,
        bias=bias,
        enabled=float(np.mean(embedding)) > best_tokens,
    )
