"""Sentence-embedding proxies: cosine of a packaged sentence encoder's embeddings
(`mitl.annotators.encoders`: all-MiniLM-L6-v2 by default, all-mpnet-base-v2 when its
packages are installed), loaded offline and clipped below at 0 so that it reads as a
relevance in [0, 1]."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mitl.annotators.encoders import DEFAULT_ENCODER, encoder_path, encoder_spec
from mitl.annotators.text_embedding import load_model, normalize
from mitl.relevance.cache import array_write

BATCH_SIZE = 256


def embeddings_cache_file(texts: Sequence[str], cache_dir: Path, encoder: str) -> Path:
    """Return the file that keeps `encoder`'s embeddings of exactly these texts."""
    digest = hashlib.sha256(f"{encoder_spec(encoder).cache_key}|{len(texts)}|".encode())
    for text in texts:
        digest.update(text.encode() + b"\0")
    return cache_dir / f"{encoder}-embeddings-{digest.hexdigest()[:24]}.npy"


def embed(
    texts: Sequence[str], *, cache_dir: Path | None = None, encoder: str = DEFAULT_ENCODER
) -> np.ndarray:
    """Return unit-norm float32 embeddings of the texts by `encoder`, kept in `cache_dir`
    (keyed by the encoder and the texts) when given."""
    cached = None if cache_dir is None else embeddings_cache_file(texts, cache_dir, encoder)
    if cached is not None and cached.is_file():
        try:
            stored = np.load(cached)
        except (OSError, ValueError, EOFError):
            stored = None  # unreadable: embed again and replace it
        if stored is not None and stored.shape == (len(texts), encoder_spec(encoder).dim):
            return stored
    model = load_model(str(encoder_path(encoder)), "cpu")
    vectors = normalize(model.encode(list(texts), batch_size=BATCH_SIZE, convert_to_numpy=True))
    if cached is not None:
        array_write(cached, vectors)
    return vectors


class EncoderCosine:
    """Cosine of sentence embeddings, clipped to [0, 1]."""

    def __init__(
        self,
        texts: Sequence[str],
        *,
        cache_dir: Path | None = None,
        encoder: str = DEFAULT_ENCODER,
    ) -> None:
        """Embed the texts with `encoder` (through the cache when `cache_dir` is given)."""
        self.encoder = encoder
        self.vectors = embed(texts, cache_dir=cache_dir, encoder=encoder)

    def matrix(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Return the clipped cosine of texts `rows` against texts `cols`."""
        return np.clip(self.vectors[rows] @ self.vectors[cols].T, 0.0, 1.0)

    def pairs(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Return the clipped cosine of each text `left[i]` against `right[i]`."""
        dots = np.einsum("ij,ij->i", self.vectors[left], self.vectors[right])
        return np.clip(dots, 0.0, 1.0)


class MiniLMCosine(EncoderCosine):
    """The cosine of all-MiniLM-L6-v2 embeddings (the default encoder)."""

    def __init__(self, texts: Sequence[str], *, cache_dir: Path | None = None) -> None:
        """Embed the texts with MiniLM."""
        super().__init__(texts, cache_dir=cache_dir, encoder="minilm")
