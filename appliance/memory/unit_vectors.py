"""What the memory store takes from an embedding model: unit float32 vectors of the recorded width.

An embedder is third-party code (llama.cpp, or a test's function): any failure of it, and any vector
of another width, is the model's failure, raised as a ``ModelError`` naming the model. The vectors are
scaled to unit length, so that L2 distance (vec0) and dot products (numpy) rank alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from appliance.errors import ModelError, PicoagentError
from appliance.memory.vector_index import LazyNumpy

if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyNumpy(globals())

Embed = Callable[[list[str]], list[list[float]]]
EmbedQuery = Callable[[str], Sequence[float]]


def unit_vectors(embed: Embed, texts: list[str], model_name: str, dimensions: int) -> list[np.ndarray]:
    """Unit float32 vectors for texts; ModelError when the model fails or gives the wrong width."""
    try:
        raw = embed(texts)
        matrix = np.asarray(raw, dtype=np.float32)
    except PicoagentError:
        raise
    except Exception as exc:  # an embedder is third-party code: any failure is the model's
        raise ModelError(f"the embedding model {model_name} failed: {exc}") from None
    if matrix.ndim != 2 or matrix.shape != (len(texts), dimensions):
        raise ModelError(
            f"the embedding model {model_name} gave vectors of shape {matrix.shape}, "
            f"memory expects {len(texts)} x {dimensions}",
            fix="set the memory dimensions to the model's embedding width",
        )
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    # Unit length: then L2 and cosine rank alike, in vec0 (L2) as in numpy (dot products).
    matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return list(matrix)


def unit_query_vector(embed_query: EmbedQuery, query: str, model_name: str, dimensions: int) -> np.ndarray:
    """A search query's unit vector from the embedder's own query entry point (its prefix, its cache)."""
    try:
        vector = np.asarray(embed_query(query), dtype=np.float32)
    except PicoagentError:
        raise
    except Exception as exc:  # an embedder is third-party code: any failure is the model's
        raise ModelError(f"the embedding model {model_name} failed: {exc}") from None
    if vector.shape != (dimensions,):
        raise ModelError(f"the embedding model {model_name} gave a query vector of shape {vector.shape}")
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


__all__ = ["Embed", "EmbedQuery", "unit_query_vector", "unit_vectors"]
