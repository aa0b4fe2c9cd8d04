"""How a search's two legs are merged: Reciprocal Rank Fusion, weighted by what each kind of match is worth.

A memory's score is the sum over the legs that found it of ``weight / (RRF_K + rank)`` (Cormack et al.;
RRF_K damps the top ranks). The weights encode what was measured on tests/eval/recall.yaml with MiniLM
(tests/bench/recall.py), tuned on its ``tune`` half and reported on its ``test`` half:

- A keyword match on a plain word says what a question is about, which the vector leg judges better
  (it reads the word in context), and on a paraphrase it tends to match the wrong memory: it counts
  almost nothing (0.01 only breaks ties). Top-1 with MiniLM: 0.63 tune / 0.86 test, as with the
  vector leg alone; a plain-word weight of 0.1 gave 0.58 / 0.68, the old 1 : 1 gave 0.39 / 0.57.
- A keyword match on a name, number or code found in at most ``keywords.RARE_MATCHES`` memories
  ("Fernhill", "30419982", "ParentPay") is what embeddings miss: it counts 1.5, so that memory comes
  first even when the vector leg does not find it at all: 22 of 22 such questions first, also among
  3,000 more memories (at 1.0: 20 of 22 there, as a tie goes to the newest).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RRF_K = 60


@dataclass
class Weights:
    """What each kind of match is worth in the fused score (see the module docstring)."""

    vector: float = 1.0
    keyword: float = 0.01
    rare_word: float = 1.5


def fuse(vector_ids: Sequence[int], keyword_ids: Sequence[int], rare: set[int], weights: Weights) -> dict[int, float]:
    """Each memory's fused score from the two legs' rankings (best first); ``rare``: matched a rare name."""
    fused: dict[int, float] = {}
    for rank, memory_id in enumerate(vector_ids, 1):
        fused[memory_id] = weights.vector / (RRF_K + rank)
    for rank, memory_id in enumerate(keyword_ids, 1):
        weight = weights.rare_word if memory_id in rare else weights.keyword
        fused[memory_id] = fused.get(memory_id, 0.0) + weight / (RRF_K + rank)
    return fused
