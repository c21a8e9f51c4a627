"""An annotator that ranks with embeddings an external model computed: one vector per item.

A score matrix grows with images × captions (50,000 × 250,000 float32 scores are 50 GB);
embeddings grow with images + captions. So a model run elsewhere (say on a GPU machine)
exports its vectors once and takes part at any corpus size, with the platform's fast
dot-product retrieval. Pure Python: no Django import.

Config
    `vectors`: an `.npz` file holding the arrays `image_ids` and `caption_ids` (external
    ids), `image_vectors` (one row per image id) and `caption_vectors` (one row per caption
    id), both real-valued with the same number of columns. Rows are matched to the corpus
    by external id, whatever their order; every corpus id must be there, ids the corpus
    lacks are ignored. NaN and infinities are refused.
    `normalize` (default true): scale every vector to unit length, so the score is the
    cosine; false keeps the model's own dot product (vectors of length 0 stay 0 either way).

The vectors are the cache: they are read from the file on every preparation and never
copied into the platform's embedding cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mitl.annotators.base import AnnotatorError, Corpus, EmbeddingAnnotator
from mitl.annotators.precomputed_files import id_array, load_npz, positions_in

_ARRAYS = ("image_ids", "image_vectors", "caption_ids", "caption_vectors")


class PrecomputedEmbeddingAnnotator(EmbeddingAnnotator):
    """Scores are dot products of vectors read from a file an external model wrote."""

    kind = "embeddings"
    config_keys = ("vectors", "normalize")
    uses_store = False

    def __init__(self, *, name: str, config: Mapping[str, Any]) -> None:
        """Check that `vectors` names an existing `.npz` file."""
        super().__init__(name=name, config=config)
        value = self.config.get("vectors")
        if not isinstance(value, str) or not value.strip():
            raise self._fail(f"config key 'vectors' must be a file path, got {value!r}")
        self.source = Path(value).expanduser()
        if self.source.suffix.lower() != ".npz":
            raise self._fail(f"'{self.source}': 'vectors' must be an .npz file")
        if not self.source.is_file():
            raise self._fail(f"'{self.source}' (config key 'vectors') is not an existing file")
        self.normalize = self._bool_option("normalize", True)

    def _fail(self, message: str) -> AnnotatorError:
        return AnnotatorError(f"{self.kind} annotator '{self.name}': {message}")

    def prepare(self, corpus: Corpus) -> None:
        """Read the vectors of every corpus image and caption, in corpus row order."""
        try:
            arrays = load_npz(self.source, _ARRAYS)
            images = _vectors_for(arrays, "image", corpus.image_ids, self.source)
            captions = _vectors_for(arrays, "caption", corpus.caption_ids, self.source)
        except AnnotatorError as exc:
            raise self._fail(str(exc)) from exc
        if images.shape[1] != captions.shape[1]:
            raise self._fail(
                f"'{self.source}': image vectors have {images.shape[1]} columns, caption "
                f"vectors {captions.shape[1]}"
            )
        if self.normalize:
            images, captions = _unit_rows(images), _unit_rows(captions)
        self.image_vectors, self.caption_vectors = images, captions

    def embed_images(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        raise RuntimeError("the vectors come from the file: call prepare()")

    def embed_captions(self, corpus: Corpus, rows: np.ndarray) -> np.ndarray:
        raise RuntimeError("the vectors come from the file: call prepare()")


def _vectors_for(
    arrays: dict[str, np.ndarray], what: str, corpus_ids: np.ndarray, source: Path
) -> np.ndarray:
    """Return float32 vectors of `corpus_ids`, in their order, from the file's `what` arrays."""
    ids = id_array(arrays[f"{what}_ids"], f"{what}_ids", source)
    vectors = arrays[f"{what}_vectors"]
    if vectors.ndim != 2 or len(vectors) != len(ids) or vectors.shape[1] == 0:
        raise AnnotatorError(
            f"'{source}': {what}_vectors must have shape ({what}_ids, dimensions) = "
            f"({len(ids)}, d), got {vectors.shape}"
        )
    if not (np.issubdtype(vectors.dtype, np.floating) or np.issubdtype(vectors.dtype, np.integer)):
        raise AnnotatorError(f"'{source}': {what}_vectors must be numbers, not {vectors.dtype}")
    picked = vectors[positions_in(ids, corpus_ids, what, source)].astype(np.float32)
    bad = ~np.isfinite(picked).all(axis=1)
    if bad.any():
        first = corpus_ids[np.flatnonzero(bad)[0]]
        raise AnnotatorError(
            f"'{source}': {what}_vectors hold NaN or infinite values ({what} id {first})"
        )
    return picked


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    # The norm in float64: squares of large float32 values would overflow to inf.
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)
