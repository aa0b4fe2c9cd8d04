"""How hard a message looks, from its embedding alone: p(it needs a stronger model than the Pi's).

A logistic regression over the message's MiniLM vector (384 weights and a bias), fitted by
tests/eval/calibrate.py on the labeled prompts of tests/eval/prompts.yaml and shipped as
``difficulty.json`` beside this module, with the bar calibration chose and its cross-validated AUCs.
Scoring is one dot product on the vector the turn already made (~0.06 ms in plain Python; the
embedding itself ~5 ms, shared with the other understanding stages).

Why the message and not the answer: SmolLM2-135M is as sure of itself writing wrong code as greeting
someone, so its token probabilities do not tell easy from hard (AUC 0.38 for the mean token probability
on the 200 labeled prompts: below chance), while the message's meaning does (0.93, 10-fold
cross-validated). A message that clears the bar goes to the cloud before the local model runs (see
:func:`appliance.agent.router.before_local`); below it, the local answer is judged as before.

The weights only mean something for the embedding model they were fitted on: another model or width
turns the signal off (logged once), and routing falls back to the token signals. Re-run the
calibration after changing ``memory.embedding_model``.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from appliance.llm.embeddings import QueryEmbedder

log = logging.getLogger(__name__)

SHIPPED = Path(__file__).with_name("difficulty.json")


@dataclass(frozen=True)
class Difficulty:
    """How likely a message needs a stronger model, judged from its meaning alone, and the calibrated bar."""

    p_cloud: float
    hard_above: float  # at or above it, edge_first sends the message to the cloud without a local attempt

    def looks_hard(self) -> bool:
        """Whether the message clears the bar."""
        return self.p_cloud >= self.hard_above


@dataclass(frozen=True)
class DifficultyModel:
    """Fitted weights over one embedding model's vectors, and the bar for "clearly needs the cloud"."""

    model: str  # the embedding model's catalog name
    file: str  # its file name (a path to the same file in memory.embedding_model is the same model)
    dimensions: int
    weights: tuple[float, ...]
    bias: float
    hard_above: float  # p(cloud) at or above which edge_first skips the local model
    enabled: bool = True  # False when calibration found it no better than the token signals
    cv_auc: float = math.nan  # cross-validated AUC of this score on the calibration set

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DifficultyModel:
        """The model a calibration run wrote (KeyError / ValueError / TypeError when the file is malformed)."""
        weights = tuple(float(w) for w in data["weights"])
        if len(weights) != int(data["dimensions"]):
            raise ValueError(f"{len(weights)} weights for {data['dimensions']} dimensions")
        return cls(
            model=str(data["model"]),
            file=str(data["file"]),
            dimensions=int(data["dimensions"]),
            weights=weights,
            bias=float(data["bias"]),
            hard_above=float(data["hard_above"]),
            enabled=bool(data.get("enabled", True)),
            cv_auc=float(data.get("auc", {}).get("cross_validated", {}).get("embedding_logistic", math.nan)),
        )

    def mismatch(self, name: str, file: str, dimensions: int) -> str | None:
        """Why these weights cannot score this embedder's vectors (None: they can)."""
        if dimensions != self.dimensions:
            return f"it was fitted on {self.dimensions}-dimension vectors and {name} makes {dimensions}"
        if name != self.model and file != self.file:
            return f"it was fitted on {self.model}'s vectors, not {name}'s"
        return None

    def logit(self, vector: Sequence[float]) -> float:
        """The score before the logistic: log-odds that the message needs the cloud."""
        return math.fsum(w * x for w, x in zip(self.weights, vector, strict=True)) + self.bias

    def p_cloud(self, vector: Sequence[float]) -> float:
        """The probability that the message needs a stronger model than the Pi's."""
        z = self.logit(vector)
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


@functools.cache
def load(path: Path = SHIPPED) -> DifficultyModel | None:
    """The weights in ``path``, read once; None (logged) when the file is missing or malformed."""
    try:
        return DifficultyModel.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        log.warning("no difficulty weights at %s: routing uses the token signals only", path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("the difficulty weights in %s are unreadable (%s): routing uses the token signals only", path, exc)
    return None


@functools.cache
def _checked(path: Path, name: str, file: str, dimensions: int) -> DifficultyModel | None:
    model = load(path)
    if model is None:
        return None
    if not model.enabled:
        log.info("the difficulty signal is off: calibration found it no better than the token signals")
        return None
    why = model.mismatch(name, file, dimensions)
    if why is not None:
        log.warning("the difficulty signal is off: %s (re-run tests/eval/calibrate.py for this embedding model)", why)
        return None
    return model


def for_embedder(embedder: QueryEmbedder, path: Path = SHIPPED) -> DifficultyModel | None:
    """The shipped weights when they were fitted on this embedder's model; None (logged once) when not."""
    return _checked(path, embedder.name, embedder.path.name, embedder.dimensions)
